//! The QEMU test rig: boots Debian's kernel under TCG with an initramfs that
//! holds busybox, our statically linked binaries and the kernel modules
//! they need, wires a set of NICs together with QEMU hubs, runs a shell
//! script inside, and returns its exit code and output.
//!
//! ```no_run
//! use oxnet_rig::{static_binary, Vm};
//! let oxnet = static_binary("oxnet", "oxnet")?;
//! let out = Vm::new()
//!     .nic("virtio-net-pci,disable-modern=on", 0)
//!     .nic("virtio-net-pci,disable-modern=on", 0)
//!     .file(&oxnet, "/bin/oxnet")
//!     .run("oxnet devices")?;
//! assert!(out.success(), "{}", out.report());
//! # Ok::<(), oxnet_rig::Error>(())
//! ```
//!
//! How it works: [`Vm::run`] writes a cpio archive (`/init`, busybox, the
//! modules, the files, the script), starts `qemu-system-x86_64 -accel tcg`
//! with the serial console (ttyS0) and a second serial port (ttyS1, the
//! script's output only) going to files, waits for QEMU to exit (the guest
//! powers off after the script) or kills it at the deadline, and reads the
//! exit code the guest's /init printed. See docs/rig.md.

mod cpio;
mod kernel;
mod static_build;

pub use kernel::{cache_dir, Kernel, Module, INSTALL_HINT};
pub use static_build::{static_binary, static_lib_test, static_target_dir, static_test, workspace_dir, TARGET};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The modules vfio needs inside the guest, in any order (dependencies are
/// resolved through modules.dep). vfio_virqfd is optional: kernels from
/// 6.2 on have it inside vfio.
pub const VFIO_MODULES: &[&str] = &["vfio", "vfio_iommu_type1", "irqbypass", "vfio-pci-core", "vfio-pci"];
pub const VFIO_OPTIONAL_MODULES: &[&str] = &["vfio_virqfd"];

/// QEMU's legacy (0.9.5) VirtIO network device, PCI id 1af4:1000.
pub const VIRTIO_LEGACY: &str = "virtio-net-pci,disable-modern=on";
/// QEMU's Intel 82576 model (QEMU >= 8), PCI id 8086:10c9.
pub const IGB: &str = "igb";

/// Busybox as Debian's busybox-static installs it.
const BUSYBOX: &str = "/bin/busybox";
/// NIC i is in PCI slot 3 + 2i. QEMU's igb registers its 8 SR-IOV VFs
/// at device/function PF + 0x80, stride 2: 16 functions, two slots (PF
/// slot + 16 and + 17). Spacing the NICs by two slots keeps the VFs of
/// neighbouring igb NICs apart, and slot 0x0d is the last PF whose VFs fit
/// below slot 0x1f (q35's LPC/SATA/SMBus).
const FIRST_NIC_SLOT: usize = 0x03;
const NIC_SLOT_STRIDE: usize = 2;
/// NICs at most: slots 0x03, 0x05, ..., 0x0d.
pub const MAX_NICS: usize = 6;
const EXIT_MARKER: &str = "OXNET-RIG-EXIT=";
const ERROR_MARKER: &str = "OXNET-RIG-ERROR:";

/// What went wrong, with a message a person can act on.
#[derive(Debug)]
pub enum Error {
    /// QEMU, busybox or the guest kernel is not installed.
    Missing(String),
    /// A static cargo build failed.
    Build(String),
    /// Reading or writing a file on the host.
    Io(String),
    /// QEMU failed to start or stopped before the script finished.
    Qemu(String),
    /// The guest did not finish in time (QEMU was killed).
    Timeout(String),
    /// The guest's set-up failed (a module did not load, a bad file).
    Guest(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, message) = match self {
            Error::Missing(m) => ("missing dependency", m),
            Error::Build(m) => ("static build", m),
            Error::Io(m) => ("I/O", m),
            Error::Qemu(m) => ("QEMU", m),
            Error::Timeout(m) => ("timeout", m),
            Error::Guest(m) => ("guest", m),
        };
        write!(f, "oxnet-rig: {kind}: {message}")
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// What a guest run produced.
#[derive(Debug, Clone)]
pub struct VmOutput {
    /// The script's exit code.
    pub exit_code: i32,
    /// What the script printed (stdout and stderr), and nothing else.
    pub stdout: String,
    /// The whole serial console: kernel log, /init's lines, the script's
    /// output between markers.
    pub console: String,
    /// From starting QEMU to its exit.
    pub duration: Duration,
}

impl VmOutput {
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// Exit code, the script's output and the whole console: for assertion
    /// messages.
    pub fn report(&self) -> String {
        format!(
            "guest script exited with {} after {:.1} s\n--- script output ---\n{}\n--- console ---\n{}",
            self.exit_code,
            self.duration.as_secs_f64(),
            self.stdout.trim_end(),
            self.console.trim_end()
        )
    }
}

#[derive(Debug, Clone)]
struct Nic {
    model: String,
    backend: Backend,
}

/// Where a NIC's frames go on the host side.
#[derive(Debug, Clone)]
enum Backend {
    /// A QEMU hub: NICs on the same hub see each other's frames.
    Hub(u32),
    /// A host TAP device of this name, with a virtio-net header
    /// (`vnet_hdr=on`): the host kernel acts on the guest's checksum and
    /// segmentation requests.
    Tap(String),
}

/// A guest to boot: a builder; [`Vm::run`] boots it.
#[derive(Debug, Clone)]
pub struct Vm {
    q35_iommu: bool,
    nics: Vec<Nic>,
    files: Vec<(PathBuf, String)>,
    text_files: Vec<(String, String)>,
    modules: Vec<(String, bool)>,
    memory_mb: u32,
    cpus: u32,
    hugepages: u32,
    timeout: Duration,
    kernel_args: String,
    devices: Vec<String>,
    netns: Option<String>,
}

impl Default for Vm {
    fn default() -> Self {
        Vm::new()
    }
}

impl Vm {
    /// i440fx ("pc") machine, 1 CPU, 512 MiB, no NICs, 90 s timeout.
    pub fn new() -> Vm {
        Vm {
            q35_iommu: false,
            nics: Vec::new(),
            files: Vec::new(),
            text_files: Vec::new(),
            modules: Vec::new(),
            memory_mb: 512,
            cpus: 1,
            hugepages: 0,
            timeout: Duration::from_secs(90),
            kernel_args: String::new(),
            devices: Vec::new(),
            netns: None,
        }
    }

    /// Adds any other QEMU device (`-device spec`), e.g. a virtio-rng to
    /// check that a driver refuses a device that is not a NIC. QEMU picks
    /// its PCI slot; find it in the guest's sysfs.
    pub fn device(mut self, spec: &str) -> Vm {
        self.devices.push(spec.to_string());
        self
    }

    /// A q35 machine with an emulated Intel IOMMU (interrupt remapping on)
    /// and `intel_iommu=on` for the guest: what vfio needs.
    pub fn machine_q35_iommu(mut self, on: bool) -> Vm {
        self.q35_iommu = on;
        self
    }

    /// Adds a NIC: `model` is a QEMU device with its options
    /// ([`VIRTIO_LEGACY`], [`IGB`], "e1000e", ...); NICs with the same `hub`
    /// number see each other's frames (`-netdev hubport,hubid=hub`). NIC i
    /// (from 0, in the order added) is at PCI address [`Vm::nic_address`]`(i)`
    /// and has MAC 52:54:00:00:00:(i+1). At most [`MAX_NICS`].
    pub fn nic(mut self, model: &str, hub: u32) -> Vm {
        self.nics.push(Nic {
            model: model.to_string(),
            backend: Backend::Hub(hub),
        });
        self
    }

    /// Adds a NIC whose back end is the host TAP device `ifname`
    /// (`-netdev tap,ifname=..,script=no,downscript=no,vnet_hdr=on`): QEMU
    /// creates it, or attaches to a persistent one of that name. With
    /// `vnet_hdr=on` a virtio-net NIC offers the guest CSUM and HOST_TSO4
    /// and hands its requests to the host kernel in the header (VirtIO 1.x
    /// §5.1.6.2; the Linux tun driver's IFF_VNET_HDR). Give the TAP no
    /// address in the root namespace: start the guest in a namespace of
    /// the test's own ([`Vm::netns`]).
    pub fn tap_nic(mut self, model: &str, ifname: &str) -> Vm {
        self.nics.push(Nic {
            model: model.to_string(),
            backend: Backend::Tap(ifname.to_string()),
        });
        self
    }

    /// Runs QEMU inside the network namespace `name` (`ip netns exec`),
    /// so that its TAP devices live there.
    pub fn netns(mut self, name: &str) -> Vm {
        self.netns = Some(name.to_string());
        self
    }

    /// The guest's PCI address of NIC `index`: "0000:00:03.0" for the
    /// first, then 05, 07, ... (see [`MAX_NICS`]).
    pub fn nic_address(index: usize) -> String {
        format!("0000:00:{:02x}.0", nic_slot(index))
    }

    /// Copies a host file into the initramfs (its permission bits are
    /// kept). ELF binaries must be statically linked: see [`static_binary`].
    pub fn file(mut self, host_path: impl AsRef<Path>, guest_path: &str) -> Vm {
        self.files
            .push((host_path.as_ref().to_path_buf(), guest_path.to_string()));
        self
    }

    /// Puts a file with the given text into the initramfs (mode 0755).
    pub fn text_file(mut self, guest_path: &str, contents: &str) -> Vm {
        self.text_files.push((guest_path.to_string(), contents.to_string()));
        self
    }

    /// Kernel modules /init loads before the script, with their
    /// dependencies (modules.dep). Built-in ones are skipped; an unknown
    /// one is an error.
    pub fn modules(mut self, names: &[&str]) -> Vm {
        self.modules.extend(names.iter().map(|n| (n.to_string(), false)));
        self
    }

    /// Like [`Vm::modules`], but a module this kernel does not have is
    /// skipped.
    pub fn optional_modules(mut self, names: &[&str]) -> Vm {
        self.modules.extend(names.iter().map(|n| (n.to_string(), true)));
        self
    }

    pub fn memory_mb(mut self, megabytes: u32) -> Vm {
        self.memory_mb = megabytes;
        self
    }

    /// Virtual CPUs (TCG runs each on a host thread).
    pub fn cpus(mut self, count: u32) -> Vm {
        self.cpus = count.max(1);
        self
    }

    /// Reserves `count` 2 MiB huge pages in the guest and mounts hugetlbfs
    /// at /mnt/huge before the script runs.
    pub fn hugepages(mut self, count: u32) -> Vm {
        self.hugepages = count;
        self
    }

    /// QEMU is killed after this long (boot included); run() then fails
    /// with the console's tail.
    pub fn timeout(mut self, timeout: Duration) -> Vm {
        self.timeout = timeout;
        self
    }

    /// Extra kernel command-line arguments.
    pub fn kernel_args(mut self, args: &str) -> Vm {
        if !self.kernel_args.is_empty() {
            self.kernel_args.push(' ');
        }
        self.kernel_args.push_str(args);
        self
    }

    /// Boots the guest, runs `script` with busybox sh (cwd /, PATH has
    /// busybox's applets and /bin), and returns its exit code and output.
    /// A non-zero exit code is an `Ok` (check [`VmOutput::success`]); the
    /// guest failing to get there is an `Err` that quotes the console.
    pub fn run(&self, script: &str) -> Result<VmOutput> {
        if self.nics.len() > MAX_NICS {
            return Err(Error::Guest(format!(
                "{} NICs asked for; the rig places at most {MAX_NICS}",
                self.nics.len()
            )));
        }
        let qemu = qemu_binary()?;
        let kernel = check_installed()?;
        let run_dir = RunDir::create()?;
        let nonce = run_dir.nonce();

        self.write_initramfs(&kernel, &run_dir.path.join("initramfs.cpio"), script, &nonce)?;

        let mut args: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| args.extend(items.iter().map(|s| s.to_string()));
        push(&["-accel", "tcg", "-cpu", "max", "-nodefaults", "-no-user-config"]);
        push(&["-display", "none", "-no-reboot", "-nic", "none"]);
        push(&["-smp", &self.cpus.to_string(), "-m", &self.memory_mb.to_string()]);
        if self.q35_iommu {
            // intel-iommu must come before the PCI devices it translates for.
            push(&["-M", "q35,kernel-irqchip=split", "-device", "intel-iommu,intremap=on"]);
        } else {
            push(&["-M", "pc"]);
        }
        let console_log = run_dir.path.join("console.log");
        let stdout_log = run_dir.path.join("stdout.log");
        push(&["-chardev", &format!("file,id=console,path={}", console_log.display())]);
        push(&["-serial", "chardev:console"]);
        push(&["-chardev", &format!("file,id=script,path={}", stdout_log.display())]);
        push(&["-serial", "chardev:script"]);
        for (i, nic) in self.nics.iter().enumerate() {
            let netdev = match &nic.backend {
                Backend::Hub(hub) => format!("hubport,id=nic{i},hubid={hub}"),
                Backend::Tap(ifname) => {
                    format!("tap,id=nic{i},ifname={ifname},script=no,downscript=no,vnet_hdr=on")
                }
            };
            push(&["-netdev", &netdev]);
            push(&[
                "-device",
                &format!(
                    "{},netdev=nic{i},mac=52:54:00:00:00:{:02x},addr=0x{:x}",
                    nic.model,
                    i + 1,
                    nic_slot(i)
                ),
            ]);
        }
        for device in &self.devices {
            push(&["-device", device]);
        }
        let mut append = String::from("console=ttyS0 panic=-1 rdinit=/init");
        if self.q35_iommu {
            append.push_str(" intel_iommu=on");
        }
        if !self.kernel_args.is_empty() {
            append.push(' ');
            append.push_str(&self.kernel_args);
        }
        push(&["-kernel", &kernel.vmlinuz.to_string_lossy()]);
        push(&["-initrd", &run_dir.path.join("initramfs.cpio").to_string_lossy()]);
        push(&["-append", &append]);
        std::fs::write(run_dir.path.join("qemu.cmdline"), shell_words(&qemu, &args))
            .map_err(|e| Error::Io(format!("{}: {e}", run_dir.path.display())))?;

        let qemu_log_path = run_dir.path.join("qemu.log");
        let qemu_log = std::fs::File::create(&qemu_log_path)
            .map_err(|e| Error::Io(format!("{}: {e}", qemu_log_path.display())))?;
        let started = Instant::now();
        // `ip netns exec` enters the namespace and then execs QEMU: the
        // child's id stays QEMU's, so killing it below ends QEMU itself.
        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&qemu);
                c
            }
            None => Command::new(&qemu),
        };
        let mut child = command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(qemu_log.try_clone().map_err(|e| Error::Io(e.to_string()))?)
            .stderr(qemu_log)
            .spawn()
            .map_err(|e| Error::Missing(format!("cannot start {}: {e}: {INSTALL_HINT}", qemu.display())))?;

        let deadline = started + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= deadline => break None,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(Error::Qemu(format!("waiting for QEMU: {e}"))),
            }
        };
        let duration = started.elapsed();
        if status.is_none() {
            // Child::kill sends SIGKILL to exactly the process we started.
            let _ = child.kill();
            let _ = child.wait();
        }

        let console = read_serial(&console_log);
        let script_output = read_serial(&stdout_log);
        let qemu_messages = std::fs::read_to_string(&qemu_log_path).unwrap_or_default();
        let mut run_dir = run_dir;

        let Some(status) = status else {
            return Err(Error::Timeout(format!(
                "the guest did not finish within {:.0} s; QEMU (pid {}) killed; {}\n--- console (last lines) ---\n{}",
                self.timeout.as_secs_f64(),
                child.id(),
                run_dir.keep(),
                tail(&console, 60)
            )));
        };
        if let Some(line) = console.lines().find(|l| l.contains(ERROR_MARKER)) {
            return Err(Error::Guest(format!(
                "{}; {}\n--- console (last lines) ---\n{}",
                line.trim(),
                run_dir.keep(),
                tail(&console, 60)
            )));
        }
        let exit_code = exit_code_in(&script_output).or_else(|| exit_code_in(&console));
        let Some(exit_code) = exit_code else {
            return Err(Error::Qemu(format!(
                "QEMU exited ({status}) after {:.1} s before the guest script finished; {}\n\
                 --- QEMU says ---\n{}\n--- console (last lines) ---\n{}",
                duration.as_secs_f64(),
                run_dir.keep(),
                qemu_messages.trim_end(),
                tail(&console, 60)
            )));
        };
        let stdout = match script_output.rfind(EXIT_MARKER) {
            Some(at) => script_output[..at].to_string(),
            None => script_output,
        };
        run_dir.finish();
        Ok(VmOutput {
            exit_code,
            stdout,
            console,
            duration,
        })
    }

    /// The initramfs: /init, busybox, the modules, the files, the script.
    fn write_initramfs(&self, kernel: &Kernel, path: &Path, script: &str, nonce: &str) -> Result<()> {
        let modules = kernel.resolve_modules(&self.modules)?;
        let io = |e: std::io::Error| Error::Io(format!("writing {}: {e}", path.display()));
        let mut cpio = cpio::CpioWriter::create(path).map_err(io)?;
        for dir in [
            "bin",
            "sbin",
            "dev",
            "proc",
            "sys",
            "tmp",
            "run",
            "mnt",
            "root",
            "etc",
            "rig",
            "lib/modules",
        ] {
            cpio.directory(dir).map_err(io)?;
        }
        // The kernel opens /dev/console for /init before devtmpfs is mounted.
        cpio.char_device("dev/console", 5, 1, 0o600).map_err(io)?;
        cpio.char_device("dev/null", 1, 3, 0o666).map_err(io)?;
        cpio.file_from_host("bin/busybox", Path::new(BUSYBOX), 0o755)
            .map_err(io)?;
        cpio.symlink("bin/sh", "busybox").map_err(io)?;

        let mut load = String::new();
        for (i, module) in modules.iter().enumerate() {
            let file = format!("lib/modules/rig/{i:02}-{}.ko", module.name);
            cpio.file(&file, &module.object()?, 0o644).map_err(io)?;
            load.push_str(&format!(
                "insmod /{file} || fail \"insmod {} failed (kernel {})\"\n",
                module.name, kernel.version
            ));
        }
        for (host, guest) in &self.files {
            let metadata = std::fs::metadata(host)
                .map_err(|e| Error::Io(format!("file for the guest {}: {e}", host.display())))?;
            if kernel::is_dynamic_elf(host) {
                return Err(Error::Guest(format!(
                    "{} is dynamically linked; the guest has no libc: build it with oxnet_rig::static_binary",
                    host.display()
                )));
            }
            use std::os::unix::fs::PermissionsExt;
            cpio.file_from_host(guest, host, metadata.permissions().mode())
                .map_err(io)?;
        }
        for (guest, text) in &self.text_files {
            cpio.file(guest, text.as_bytes(), 0o755).map_err(io)?;
        }
        cpio.file("rig/script.sh", script.as_bytes(), 0o755).map_err(io)?;
        cpio.file("init", self.init_script(&load, nonce).as_bytes(), 0o755)
            .map_err(io)?;
        cpio.finish().map_err(io)?;
        Ok(())
    }

    /// /init: mounts, huge pages, modules, the script (its output to the
    /// console and to ttyS1), the exit code, power off.
    fn init_script(&self, load_modules: &str, nonce: &str) -> String {
        let hugepages = if self.hugepages > 0 {
            format!(
                "echo {n} > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages\n\
                 mkdir -p /mnt/huge && mount -t hugetlbfs -o pagesize=2M hugetlbfs /mnt/huge\n\
                 echo \"oxnet-rig: $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) of {n} huge pages\"\n",
                n = self.hugepages
            )
        } else {
            String::new()
        };
        format!(
            r#"#!/bin/busybox sh
# Written by oxnet-rig (crates/oxnet-rig/src/lib.rs).
/bin/busybox --install -s /bin
export PATH=/bin:/sbin HOME=/root
fail() {{
    echo "{ERROR_MARKER} $*"
    exec >/dev/null 2>&1 </dev/null
    poweroff -f
}}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev || fail "mounting devtmpfs failed"
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
ip link set lo up 2>/dev/null
{hugepages}{load_modules}echo "oxnet-rig: running the script"
echo "OXNET-RIG-BEGIN-{nonce}"
( cd / && sh /rig/script.sh </dev/null; echo $? > /rig/exit-code ) 2>&1 | tee /dev/ttyS1
code=$(cat /rig/exit-code 2>/dev/null || echo 255)
echo "OXNET-RIG-END-{nonce}"
echo "{EXIT_MARKER}$code" > /dev/ttyS1
echo "{EXIT_MARKER}$code"
# Closing the last file on each serial port waits until it is sent.
exec >/dev/null 2>&1 </dev/null
poweroff -f
"#
        )
    }
}

fn nic_slot(index: usize) -> usize {
    FIRST_NIC_SLOT + NIC_SLOT_STRIDE * index
}

/// Checks that QEMU, busybox-static and the guest kernel are installed;
/// the error names scripts/rig/install-deps.sh. Tests call it first so that
/// a machine without them fails at once, before any build.
pub fn check_installed() -> Result<Kernel> {
    qemu_binary()?;
    if !Path::new(BUSYBOX).is_file() || kernel::is_dynamic_elf(Path::new(BUSYBOX)) {
        return Err(Error::Missing(format!(
            "{BUSYBOX} is missing or not static (package busybox-static): {INSTALL_HINT}"
        )));
    }
    Kernel::locate()
}

/// The QEMU binary: `$OXNET_RIG_QEMU`, else /usr/bin/qemu-system-x86_64.
fn qemu_binary() -> Result<PathBuf> {
    let qemu = std::env::var_os("OXNET_RIG_QEMU")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/qemu-system-x86_64"));
    if qemu.is_file() {
        Ok(qemu)
    } else {
        Err(Error::Missing(format!(
            "QEMU is not installed ({} not found): {INSTALL_HINT}",
            qemu.display()
        )))
    }
}

/// A serial port's log as text, with the tty's CR LF turned into LF.
fn read_serial(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&bytes).replace("\r\n", "\n").replace('\r', "")
}

/// The code in the last `OXNET-RIG-EXIT=<code>` line.
fn exit_code_in(text: &str) -> Option<i32> {
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(EXIT_MARKER)?.trim().parse().ok())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The command line, quoted for a shell (saved in the run directory so
/// that a failed run can be repeated by hand).
fn shell_words(program: &Path, args: &[String]) -> String {
    let quote = |s: &str| {
        if s.chars().all(|c| c.is_ascii_alphanumeric() || "-_=,.:/@".contains(c)) {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    let mut line = quote(&program.to_string_lossy());
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line.push('\n');
    line
}

/// A run's files: $TMPDIR/oxnet-rig-<pid>-<n>. Removed after a successful
/// run unless OXNET_RIG_KEEP is set; kept (and named in the error) otherwise.
struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    fn create() -> Result<RunDir> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("oxnet-rig-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        Ok(RunDir {
            path,
            keep: std::env::var_os("OXNET_RIG_KEEP").is_some(),
        })
    }

    /// Unique per run, so that the script cannot print a marker by chance.
    fn nonce(&self) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        format!(
            "{}-{:08x}",
            self.path.file_name().unwrap_or_default().to_string_lossy(),
            nanos
        )
    }

    /// Keeps the files for debugging; says where they are.
    fn keep(&mut self) -> String {
        self.keep = true;
        format!(
            "this run's files (qemu.cmdline, initramfs.cpio, console.log, qemu.log) are in {}",
            self.path.display()
        )
    }

    fn finish(self) {}
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_parsing() {
        assert_eq!(exit_code_in("a\nOXNET-RIG-EXIT=3\n"), Some(3));
        assert_eq!(exit_code_in("OXNET-RIG-EXIT=0\nOXNET-RIG-EXIT=7\n"), Some(7));
        assert_eq!(exit_code_in("nothing"), None);
    }

    #[test]
    fn nic_addresses() {
        assert_eq!(Vm::nic_address(0), "0000:00:03.0");
        assert_eq!(Vm::nic_address(1), "0000:00:05.0");
        assert_eq!(Vm::nic_address(MAX_NICS - 1), "0000:00:0d.0");
    }
}
