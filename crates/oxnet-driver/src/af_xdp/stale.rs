//! Removing the XDP program a crashed oxnet left on an interface.
//!
//! libxdp detaches its default redirect program when the last XDP socket
//! using it is deleted (`xsk_socket__delete`). A process that dies without
//! deleting its socket (SIGKILL, a crash) leaves the program attached: the
//! kernel closes the socket and empties its `xsks_map` slot, so packets on
//! that queue then go to the kernel stack again, but the program stays on
//! the interface (`ip link` shows `xdp`/`xdpgeneric`) and blocks attaching
//! in another mode.
//!
//! How oxnet knows a program is its own and abandoned: while an `af_xdp:`
//! device is open, oxnet holds a shared flock(2) on a marker file
//! `/run/oxnet/af_xdp/NETNS-IFINDEX` (NETNS: the inode of the network
//! namespace, so equal interface indexes in different namespaces do not
//! collide). flock locks go away with the process however it dies. On the
//! next open of that interface (and on close), oxnet tries an exclusive
//! lock: if it gets it while the marker exists, no live oxnet uses the
//! interface. The marker holds the kernel's id of the program oxnet's
//! socket got (libxdp's dispatcher, or `xsk_def_prog` itself where there
//! is no bpffs for the dispatcher, as inside `ip netns exec`); program ids
//! are not reused soon (the kernel hands them out cyclically). If the
//! program on the interface still has that id and is libxdp's
//! `xsk_def_prog` alone, oxnet detaches it with `xdp_multiprog__detach`
//! and removes the marker. Any other program — someone else's, or one
//! attached after the crash — is left alone. Markers of namespaces that
//! are gone stay behind as small empty-ish files in /run (a tmpfs).

use super::libxdp::Libxdp;
use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The function name of libxdp's default AF_XDP program (xsk_def_xdp_prog.c).
const DEFAULT_PROG: &str = "xsk_def_prog";
const DIR: &str = "/run/oxnet/af_xdp";

fn marker(ifindex: u32) -> Option<PathBuf> {
    let netns = std::fs::metadata("/proc/self/ns/net").ok()?.ino();
    Some(PathBuf::from(DIR).join(format!("{netns}-{ifindex}")))
}

fn flock(file: &std::fs::File, op: libc::c_int) -> bool {
    // SAFETY: flock on a file descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), op) == 0 }
}

/// A live device's shared lock on its interface's marker.
pub struct Claim {
    file: std::fs::File,
    path: PathBuf,
    ifindex: u32,
}

impl Claim {
    /// Creates the marker and locks it shared; `None` if that is not
    /// possible (no /run/oxnet: then there is no crash clean-up either).
    pub fn take(ifindex: u32) -> Option<Claim> {
        let path = marker(ifindex)?;
        std::fs::create_dir_all(DIR).ok()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?;
        flock(&file, libc::LOCK_SH).then_some(Claim { file, path, ifindex })
    }

    /// Records the id of the program now on the interface (after our
    /// socket was created): only that program is ever removed as stale.
    pub fn record(&mut self, lib: &Libxdp) {
        use std::io::Write;
        if let Some(id) = main_program_id(lib, self.ifindex) {
            let _ = self.file.set_len(0);
            let _ = (&self.file).write_all(format!("{id}\n").as_bytes());
        }
    }

    /// Drops the lock; the last user also makes sure no program is left
    /// (normally libxdp has detached it already) and removes the marker.
    pub fn release(self, lib: &Libxdp, interface: &str) {
        let Claim { file, path, ifindex } = self;
        drop(file);
        let _ = clean_if_unused(lib, &path, ifindex, interface, false);
    }
}

/// Detaches a program left on `ifindex` by an oxnet that crashed.
/// Whether a program a crashed oxnet left was removed (its socket may
/// still be on its way out in the kernel: the caller retries a bind that
/// finds the queue busy for a moment).
pub fn remove_left_over(lib: &Libxdp, ifindex: u32, interface: &str) -> bool {
    match marker(ifindex) {
        Some(path) if path.exists() => clean_if_unused(lib, &path, ifindex, interface, true),
        _ => false,
    }
}

fn clean_if_unused(lib: &Libxdp, path: &PathBuf, ifindex: u32, interface: &str, after_crash: bool) -> bool {
    let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) else {
        return false;
    };
    if !flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
        return false; // another oxnet uses the interface
    }
    let recorded: Option<u32> = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok());
    let removed = recorded.is_some()
        && recorded == main_program_id(lib, ifindex)
        && detach_default_program(lib, ifindex)
        && after_crash;
    if removed {
        eprintln!(
            "af_xdp:{interface}: removed the XDP program a previous oxnet left attached (it did not exit cleanly)"
        );
    }
    let _ = std::fs::remove_file(path);
    removed
}

/// The kernel id of the program attached to `ifindex` (the dispatcher,
/// or the program itself in legacy mode).
fn main_program_id(lib: &Libxdp, ifindex: u32) -> Option<u32> {
    // SAFETY: as in detach_default_program.
    let mp = unsafe { (lib.multiprog_get_from_ifindex)(ifindex as libc::c_int) };
    // SAFETY: libxdp_get_error accepts any pointer value returned by libxdp.
    if mp.is_null() || unsafe { (lib.get_error)(mp as *const _) } != 0 {
        return None;
    }
    // SAFETY: mp valid; main_prog returns a program owned by mp or NULL;
    // mp closed once.
    let id = unsafe {
        let main = (lib.multiprog_main_prog)(mp);
        let id = if main.is_null() {
            None
        } else {
            Some((lib.program_id)(main))
        };
        (lib.multiprog_close)(mp);
        id
    };
    super::libxdp::take_messages();
    id.filter(|&id| id != 0)
}

/// Detaches libxdp's default AF_XDP program from `ifindex` if that is the
/// only program there; true if it did.
pub fn detach_default_program(lib: &Libxdp, ifindex: u32) -> bool {
    // SAFETY: returns an xdp_multiprog, NULL or an error pointer
    // (checked with libxdp_get_error before use).
    let mp = unsafe { (lib.multiprog_get_from_ifindex)(ifindex as libc::c_int) };
    // SAFETY: libxdp_get_error accepts any pointer value returned by libxdp.
    if mp.is_null() || unsafe { (lib.get_error)(mp as *const _) } != 0 {
        return false;
    }
    let name = |prog: *const super::libxdp::XdpProgram| -> String {
        // SAFETY: prog is a live program of mp; the name is a C string
        // owned by it (or NULL).
        let p = unsafe { (lib.program_name)(prog) };
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: non-null NUL-terminated string owned by libxdp.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let mut names = Vec::new();
    // SAFETY: mp is a valid multiprog; the iteration functions return
    // programs owned by it, or NULL at the end.
    unsafe {
        if (lib.multiprog_is_legacy)(mp) {
            let main = (lib.multiprog_main_prog)(mp);
            if !main.is_null() {
                names.push(name(main));
            }
        } else {
            let mut prog = (lib.multiprog_next_prog)(std::ptr::null(), mp);
            while !prog.is_null() && names.len() < 16 {
                names.push(name(prog));
                prog = (lib.multiprog_next_prog)(prog, mp);
            }
        }
    }
    let ours = !names.is_empty() && names.iter().all(|n| n == DEFAULT_PROG);
    // SAFETY: mp valid; detached at most once, closed once.
    let detached = ours && unsafe { (lib.multiprog_detach)(mp) } == 0;
    // SAFETY: as above.
    unsafe { (lib.multiprog_close)(mp) };
    super::libxdp::take_messages();
    detached
}
