//! A writer for the "newc" cpio format, the one the kernel unpacks as an
//! initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
//! Writing it ourselves means no root is needed for device nodes
//! (/dev/console) and no staging directory is built on disk.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

pub struct CpioWriter {
    out: BufWriter<File>,
    next_inode: u32,
    directories: BTreeSet<String>,
    written: u64,
}

impl CpioWriter {
    pub fn create(path: &Path) -> io::Result<CpioWriter> {
        Ok(CpioWriter {
            out: BufWriter::with_capacity(1 << 20, File::create(path)?),
            next_inode: 1,
            directories: BTreeSet::new(),
            written: 0,
        })
    }

    /// A directory and all its parents (each written once).
    pub fn directory(&mut self, path: &str) -> io::Result<()> {
        let path = path.trim_matches('/');
        let mut prefix = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if self.directories.insert(prefix.clone()) {
                let name = prefix.clone();
                self.entry(&name, S_IFDIR | 0o755, 0, (0, 0), &mut io::empty())?;
            }
        }
        Ok(())
    }

    /// A regular file with the contents of `host_path`.
    pub fn file_from_host(&mut self, guest_path: &str, host_path: &Path, mode: u32) -> io::Result<()> {
        let mut file = File::open(host_path)?;
        let size = file.metadata()?.len();
        self.parent_of(guest_path)?;
        self.entry(guest_path, S_IFREG | (mode & 0o7777), size, (0, 0), &mut file)
    }

    /// A regular file with the given contents.
    pub fn file(&mut self, guest_path: &str, contents: &[u8], mode: u32) -> io::Result<()> {
        self.parent_of(guest_path)?;
        self.entry(
            guest_path,
            S_IFREG | (mode & 0o7777),
            contents.len() as u64,
            (0, 0),
            &mut &contents[..],
        )
    }

    pub fn symlink(&mut self, guest_path: &str, target: &str) -> io::Result<()> {
        self.parent_of(guest_path)?;
        self.entry(
            guest_path,
            S_IFLNK | 0o777,
            target.len() as u64,
            (0, 0),
            &mut target.as_bytes(),
        )
    }

    pub fn char_device(&mut self, guest_path: &str, major: u32, minor: u32, mode: u32) -> io::Result<()> {
        self.parent_of(guest_path)?;
        self.entry(
            guest_path,
            S_IFCHR | (mode & 0o7777),
            0,
            (major, minor),
            &mut io::empty(),
        )
    }

    /// Writes the trailer; returns the archive's size in bytes.
    pub fn finish(mut self) -> io::Result<u64> {
        self.entry("TRAILER!!!", 0, 0, (0, 0), &mut io::empty())?;
        self.out.flush()?;
        Ok(self.written)
    }

    fn parent_of(&mut self, guest_path: &str) -> io::Result<()> {
        match guest_path.trim_matches('/').rsplit_once('/') {
            Some((parent, _)) => self.directory(parent),
            None => Ok(()),
        }
    }

    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        size: u64,
        (rdev_major, rdev_minor): (u32, u32),
        data: &mut dyn io::Read,
    ) -> io::Result<()> {
        let name = name.trim_start_matches('/');
        if size > u32::MAX as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name}: larger than 4 GiB"),
            ));
        }
        let inode = self.next_inode;
        self.next_inode += 1;
        let nlink = if mode & 0o170000 == S_IFDIR { 2 } else { 1 };
        // magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
        // devminor, rdevmajor, rdevminor, namesize (with NUL), check
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            inode,
            mode,
            0,
            0,
            nlink,
            0,
            size as u32,
            0,
            0,
            rdev_major,
            rdev_minor,
            name.len() + 1,
            0
        );
        self.write(header.as_bytes())?;
        self.write(name.as_bytes())?;
        self.write(&[0])?;
        self.pad()?;
        let copied = io::copy(&mut io::Read::take(data, size), &mut self.out)?;
        if copied != size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{name}: file changed while packing"),
            ));
        }
        self.written += copied;
        self.pad()
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let rest = (4 - self.written % 4) % 4;
        self.write(&[0u8; 3][..rest as usize])
    }
}
