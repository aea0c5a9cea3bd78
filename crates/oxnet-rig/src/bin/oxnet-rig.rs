//! `oxnet-rig`: boots a guest from the command line and runs a script in
//! it; exits with the script's exit code. See docs/rig.md.
//!
//!     cargo run -p oxnet-rig -- --oxnet --nic virtio-net-pci,disable-modern=on@0 'oxnet devices'

use oxnet_rig::{static_binary, Vm, VFIO_MODULES, VFIO_OPTIONAL_MODULES};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: oxnet-rig [OPTIONS] SCRIPT
Boots Debian's kernel in QEMU (TCG) with busybox and runs SCRIPT (busybox sh)
in it; prints what the script printed and exits with its exit code
(125 if the guest could not run it).

  --nic MODEL[@HUB]    add a NIC on hub HUB (default 0); repeatable, e.g.
                       --nic virtio-net-pci,disable-modern=on@0 --nic igb@1
  --file HOST[:GUEST]  copy a file into the guest (default /bin/<name>)
  --oxnet              build `oxnet` statically and copy it to /bin/oxnet
  --module NAME        load a kernel module (and its dependencies); repeatable
  --vfio               q35 with an Intel IOMMU, intel_iommu=on, vfio modules
  --iommu              q35 with an Intel IOMMU, intel_iommu=on
  --hugepages N        reserve N 2 MiB huge pages, hugetlbfs at /mnt/huge
  --memory MB          guest memory (default 512)
  --cpus N             virtual CPUs (default 1)
  --timeout SECONDS    kill QEMU after this long (default 90)
  --append ARGS        extra kernel command-line arguments
  --console            print the whole guest console too (on stderr)";

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(125)
        }
    }
}

fn run() -> Result<u8, String> {
    let mut vm = Vm::new();
    let mut script = None;
    let mut show_console = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--nic" => {
                let spec = value("--nic")?;
                let (model, hub) = match spec.rsplit_once('@') {
                    Some((model, hub)) => (
                        model.to_string(),
                        hub.parse().map_err(|_| format!("bad hub in --nic {spec}"))?,
                    ),
                    None => (spec, 0),
                };
                vm = vm.nic(&model, hub);
            }
            "--file" => {
                let spec = value("--file")?;
                let (host, guest) = match spec.split_once(':') {
                    Some((host, guest)) => (host.to_string(), guest.to_string()),
                    None => {
                        let name = std::path::Path::new(&spec)
                            .file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into_owned();
                        (spec.clone(), format!("/bin/{name}"))
                    }
                };
                vm = vm.file(host, &guest);
            }
            "--oxnet" => {
                vm = vm.file(
                    static_binary("oxnet", "oxnet").map_err(|e| e.to_string())?,
                    "/bin/oxnet",
                )
            }
            "--module" => vm = vm.modules(&[&value("--module")?]),
            "--vfio" => {
                vm = vm
                    .machine_q35_iommu(true)
                    .modules(VFIO_MODULES)
                    .optional_modules(VFIO_OPTIONAL_MODULES)
            }
            "--iommu" => vm = vm.machine_q35_iommu(true),
            "--hugepages" => vm = vm.hugepages(number(&value("--hugepages")?)?),
            "--memory" => vm = vm.memory_mb(number(&value("--memory")?)?),
            "--cpus" => vm = vm.cpus(number(&value("--cpus")?)?),
            "--timeout" => vm = vm.timeout(Duration::from_secs(number(&value("--timeout")?)? as u64)),
            "--append" => vm = vm.kernel_args(&value("--append")?),
            "--console" => show_console = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(0);
            }
            other if other.starts_with("--") => return Err(format!("unknown option {other}\n{USAGE}")),
            other if script.is_none() => script = Some(other.to_string()),
            other => return Err(format!("one SCRIPT only (got a second: {other}); quote it\n{USAGE}")),
        }
    }
    let script = script.ok_or_else(|| format!("no SCRIPT given\n{USAGE}"))?;
    let out = vm.run(&script).map_err(|e| e.to_string())?;
    if show_console {
        eprintln!("{}", out.console.trim_end());
    }
    print!("{}", out.stdout);
    eprintln!(
        "oxnet-rig: exit code {} after {:.1} s",
        out.exit_code,
        out.duration.as_secs_f64()
    );
    Ok(out.exit_code.clamp(0, 255) as u8)
}

fn number(text: &str) -> Result<u32, String> {
    text.parse().map_err(|_| format!("not a number: {text}"))
}
