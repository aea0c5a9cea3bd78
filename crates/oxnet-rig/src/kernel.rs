//! The guest kernel: Debian's linux-image-amd64, extracted (not installed)
//! by scripts/rig/install-deps.sh into `<cache>/kernel/<version>/`, and its
//! modules, resolved through modules.dep.

use crate::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const INSTALL_HINT: &str =
    "run `sudo bash scripts/rig/install-deps.sh` (installs QEMU, busybox-static and the guest kernel)";

/// Where install-deps.sh keeps the guest kernel: `$OXNET_RIG_CACHE`, or
/// /var/cache/oxnet-rig.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("OXNET_RIG_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/oxnet-rig"))
}

/// The extracted guest kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// e.g. "6.1.0-56-amd64"
    pub version: String,
    pub vmlinuz: PathBuf,
    /// the package's lib/modules/<version>
    pub modules_dir: PathBuf,
}

/// One module to load, in load order.
#[derive(Debug, Clone)]
pub struct Module {
    /// its file name without .ko and compression suffix, e.g. "vfio-pci"
    pub name: String,
    /// the file in the cache (.ko, .ko.xz, .ko.zst or .ko.gz)
    pub path: PathBuf,
}

impl Kernel {
    /// The kernel in `<cache>/kernel/current`.
    pub fn locate() -> Result<Kernel> {
        let current = cache_dir().join("kernel/current");
        let dir = std::fs::canonicalize(&current)
            .map_err(|_| Error::Missing(format!("no guest kernel at {}: {INSTALL_HINT}", current.display())))?;
        let version = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let kernel = Kernel {
            version,
            vmlinuz: dir.join("vmlinuz"),
            modules_dir: dir.join("modules"),
        };
        for needed in [&kernel.vmlinuz, &kernel.modules_dir.join("modules.dep")] {
            if !needed.is_file() {
                return Err(Error::Missing(format!(
                    "{} is missing: {INSTALL_HINT}",
                    needed.display()
                )));
            }
        }
        Ok(kernel)
    }

    /// The modules to insmod, dependencies first, each once. Names may use
    /// `-` or `_` interchangeably. Modules built into the kernel are left
    /// out. A module that does not exist is an error unless `optional`
    /// (e.g. vfio_virqfd, which newer kernels merged into vfio).
    pub fn resolve_modules(&self, wanted: &[(String, bool)]) -> Result<Vec<Module>> {
        let index = self.read_modules_dep()?;
        let builtin = std::fs::read_to_string(self.modules_dir.join("modules.builtin")).unwrap_or_default();
        let builtin: Vec<String> = builtin.lines().map(|l| normalize(base_name(l))).collect();
        let mut order: Vec<Module> = Vec::new();
        for (name, optional) in wanted {
            let key = normalize(name);
            let Some((path, deps)) = index.get(&key) else {
                if builtin.contains(&key) || *optional {
                    continue;
                }
                return Err(Error::Guest(format!(
                    "kernel module `{name}` is neither in {}/modules.dep nor built into kernel {}",
                    self.modules_dir.display(),
                    self.version
                )));
            };
            // modules.dep lists all transitive dependencies, the ones to load
            // first at the end.
            for dependency in deps.iter().rev().chain(std::iter::once(path)) {
                let module = Module {
                    name: base_name(dependency).to_string(),
                    path: self.modules_dir.join(dependency),
                };
                if !order.iter().any(|m| m.path == module.path) {
                    order.push(module);
                }
            }
        }
        Ok(order)
    }

    fn read_modules_dep(&self) -> Result<HashMap<String, (String, Vec<String>)>> {
        let path = self.modules_dir.join("modules.dep");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::Missing(format!("{}: {e}: {INSTALL_HINT}", path.display())))?;
        let mut index = HashMap::new();
        for line in text.lines() {
            let Some((module, deps)) = line.split_once(':') else {
                continue;
            };
            let deps = deps.split_whitespace().map(str::to_string).collect();
            index.insert(normalize(base_name(module)), (module.to_string(), deps));
        }
        Ok(index)
    }
}

impl Module {
    /// The module's ELF object, decompressed if the package compressed it
    /// (busybox insmod reads plain .ko files only).
    pub fn object(&self) -> Result<Vec<u8>> {
        let file = self.path.to_string_lossy();
        let tool = if file.ends_with(".ko") {
            return std::fs::read(&self.path).map_err(|e| Error::Io(format!("{file}: {e}")));
        } else if file.ends_with(".xz") {
            "xz"
        } else if file.ends_with(".zst") {
            "zstd"
        } else if file.ends_with(".gz") {
            "gzip"
        } else {
            return Err(Error::Guest(format!("{file}: unknown module compression")));
        };
        let output =
            Command::new(tool).arg("-dc").arg(&self.path).output().map_err(|e| {
                Error::Missing(format!("cannot run `{tool}` to decompress {file}: {e}: {INSTALL_HINT}"))
            })?;
        if !output.status.success() {
            return Err(Error::Io(format!(
                "`{tool} -dc {file}` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(output.stdout)
    }
}

/// "kernel/drivers/vfio/pci/vfio-pci.ko.xz" -> "vfio-pci"
fn base_name(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file)
}

/// Module names treat '-' and '_' alike.
fn normalize(name: &str) -> String {
    base_name(name.trim()).replace('-', "_")
}

/// True if `path` is an ELF file that needs a dynamic loader (has a
/// PT_INTERP program header): such a binary cannot run in the guest,
/// which has no libc.
pub fn is_dynamic_elf(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| is_dynamic_elf_bytes(&bytes))
}

/// [`is_dynamic_elf`] on the file's bytes. Any bytes are accepted: header
/// fields pointing outside the file (e_phoff, e_phentsize, e_phnum of the
/// ELF-64 header) make it false, never an overflow or an index panic.
pub fn is_dynamic_elf_bytes(bytes: &[u8]) -> bool {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false; // not a 64-bit little-endian ELF: a script or data
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let mut phoff = [0u8; 8];
    phoff.copy_from_slice(&bytes[0x20..0x28]);
    let Ok(phoff) = usize::try_from(u64::from_le_bytes(phoff)) else {
        return false;
    };
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    (0..phnum).any(|i| {
        let Some(at) = i.checked_mul(phentsize).and_then(|o| o.checked_add(phoff)) else {
            return false;
        };
        let Some(word) = at.checked_add(4).and_then(|end| bytes.get(at..end)) else {
            return false;
        };
        u32::from_le_bytes([word[0], word[1], word[2], word[3]]) == PT_INTERP
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names() {
        assert_eq!(base_name("kernel/drivers/vfio/pci/vfio-pci.ko.xz"), "vfio-pci");
        assert_eq!(base_name("kernel/virt/lib/irqbypass.ko"), "irqbypass");
        assert_eq!(normalize("vfio-pci-core"), normalize("vfio_pci_core"));
    }

    /// ELF headers whose program-header table lies outside the file or
    /// whose offsets overflow used to panic (issue 8 item 9).
    #[test]
    fn hostile_elf_headers_are_not_dynamic_and_do_not_panic() {
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        for (phoff, phentsize, phnum) in [
            (u64::MAX, 56u16, 1u16),
            (u64::MAX - 3, 0, 1),
            (0x40, 0xFFFF, 0xFFFF),
            (1 << 62, 56, 100),
            (60, 56, 1),
        ] {
            elf[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
            elf[0x36..0x38].copy_from_slice(&phentsize.to_le_bytes());
            elf[0x38..0x3A].copy_from_slice(&phnum.to_le_bytes());
            assert!(!is_dynamic_elf_bytes(&elf), "{phoff:#x} {phentsize} {phnum}");
        }
        // A PT_INTERP entry right after the header is found.
        let mut dynamic = elf.clone();
        dynamic[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        dynamic[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        dynamic[0x38..0x3A].copy_from_slice(&1u16.to_le_bytes());
        dynamic.extend_from_slice(&[3, 0, 0, 0]);
        assert!(is_dynamic_elf_bytes(&dynamic));
        assert!(!is_dynamic_elf_bytes(&[]));
    }

    #[test]
    fn dynamic_elf_detection() {
        assert!(is_dynamic_elf(Path::new("/bin/sh")));
        assert!(!is_dynamic_elf(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/Cargo.toml"
        ))));
    }
}
