//! `af_xdp:IF[:QUEUE][,attach=auto|generic|native][,bind=auto|copy|zerocopy]`:
//! one queue of a Linux interface through an XDP socket
//! (Documentation/networking/af_xdp.rst) with its own UMEM.
//!
//! How the pieces fit:
//! - [`libxdp`]: Debian's libxdp 1.3, loaded with dlopen at run time,
//!   registers the UMEM, creates and binds the socket and attaches its
//!   default redirect program (`xsk_def_xdp_prog.o`: packets arriving on
//!   QUEUE go to the socket through the program's `xsks_map`).
//! - [`ring`]: the fill/completion/RX/TX rings, driven by oxnet itself.
//! - [`socket`]: the [`Device`](crate::Device): UMEM frames, copies,
//!   need-wakeup kicks, XDP_STATISTICS.
//! - [`stale`]: a program left behind by a crashed oxnet is detached on the
//!   next start.
//!
//! Two independent settings (af_xdp.rst, "XDP_COPY and XDP_ZERO_COPY bind
//! flags"; ip-link(8) "xdpgeneric / xdpdrv"):
//! - `attach=` where the XDP program runs: `generic` (XDP_FLAGS_SKB_MODE,
//!   after the kernel built an skb; every interface), `native`
//!   (XDP_FLAGS_DRV_MODE, in the driver; veth, virtio_net, i40e, ...), or
//!   `auto` (default: libxdp tries native, then generic);
//! - `bind=` how packets reach the UMEM: `copy` (XDP_COPY, the kernel
//!   copies), `zerocopy` (XDP_ZEROCOPY, the NIC DMAs into the UMEM; needs
//!   native attach and driver support, which veth lacks), or `auto`
//!   (default: zero-copy where the driver has it, copy otherwise).
//!
//! The UMEM is a DMA domain of its own ([`crate::domain`]): only the kernel
//! and this device see it. Received packets are copied out of their UMEM
//! frame into a buffer of the device's receive pool (an ordinary mempool,
//! [`Device::mempool`](crate::Device::mempool)), and the frame goes straight
//! back to the fill ring; every packet given to `tx_batch` — whatever pool
//! it comes from — is copied into a free UMEM frame and counted in
//! `tx_copied`. One copy each way keeps the UMEM's frames out of the rest of
//! oxnet (no packet can outlive the socket or hold a frame the kernel
//! needs), at the price of a 64-byte memcpy per small packet, which costs
//! far less than the system calls a veth or copy-mode socket needs anyway
//! (docs/af_xdp.md has the numbers).

mod libxdp;
mod ring;
mod socket;
mod stale;

use crate::device::{Config, Device};
use crate::error::{Error, Result};

/// Where the XDP program is attached (`attach=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// libxdp's choice: native if the driver has it, else generic.
    Auto,
    /// XDP_FLAGS_SKB_MODE.
    Generic,
    /// XDP_FLAGS_DRV_MODE.
    Native,
}

/// How the socket is bound (`bind=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// The kernel's choice: zero-copy if the driver has it, else copy.
    Auto,
    /// XDP_COPY.
    Copy,
    /// XDP_ZEROCOPY.
    ZeroCopy,
}

/// A parsed `af_xdp:` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpSpec {
    pub interface: String,
    pub queue: u32,
    pub attach: AttachMode,
    pub bind: BindMode,
}

const USAGE: &str = "af_xdp:IF[:QUEUE][,attach=auto|generic|native][,bind=auto|copy|zerocopy]";

/// Parses what follows `af_xdp:`.
pub fn parse(rest: &str) -> Result<AfXdpSpec> {
    let bad = |why: String| Error::BadSpec(format!("af_xdp:{rest}: {why} (use {USAGE})"));
    let mut parts = rest.split(',');
    let head = parts.next().unwrap_or("");
    let (interface, queue) = match head.split_once(':') {
        Some((name, q)) => (
            name,
            q.parse::<u32>()
                .map_err(|_| bad(format!("queue '{q}' is not a queue number")))?,
        ),
        None => (head, 0),
    };
    if interface.is_empty() {
        return Err(bad("no interface name".into()));
    }
    crate::netif::check_name(interface)?;
    let mut spec = AfXdpSpec {
        interface: interface.to_string(),
        queue,
        attach: AttachMode::Auto,
        bind: BindMode::Auto,
    };
    for option in parts {
        match option.split_once('=') {
            Some(("attach", v)) => {
                spec.attach = match v {
                    "auto" => AttachMode::Auto,
                    "generic" | "skb" => AttachMode::Generic,
                    "native" | "drv" => AttachMode::Native,
                    _ => return Err(bad(format!("attach={v}: use generic, native or auto"))),
                }
            }
            Some(("bind", v)) => {
                spec.bind = match v {
                    "auto" => BindMode::Auto,
                    "copy" => BindMode::Copy,
                    "zerocopy" | "zero-copy" | "zc" => BindMode::ZeroCopy,
                    _ => return Err(bad(format!("bind={v}: use copy, zerocopy or auto"))),
                }
            }
            _ => return Err(bad(format!("unknown option '{option}'"))),
        }
    }
    Ok(spec)
}

/// Opens `af_xdp:` + `rest`.
pub fn open(rest: &str, config: &Config) -> Result<Box<dyn Device>> {
    let spec = parse(rest)?;
    Ok(Box::new(socket::AfXdp::open(format!("af_xdp:{rest}"), spec, config)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_with_queue_and_both_modes() {
        let s = parse("veth0:3,attach=native,bind=copy").unwrap();
        assert_eq!(
            s,
            AfXdpSpec {
                interface: "veth0".into(),
                queue: 3,
                attach: AttachMode::Native,
                bind: BindMode::Copy
            }
        );
        let s = parse("eth1").unwrap();
        assert_eq!((s.queue, s.attach, s.bind), (0, AttachMode::Auto, BindMode::Auto));
        assert_eq!(parse("eth1,bind=zerocopy").unwrap().bind, BindMode::ZeroCopy);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, says) in [
            ("", "no interface"),
            ("veth0:x", "queue 'x'"),
            ("veth0,attach=fast", "attach=fast"),
            ("veth0,bind=dma", "bind=dma"),
            ("veth0,mode=1", "unknown option"),
            ("a/b", "not a Linux interface name"),
        ] {
            let e = parse(spec).unwrap_err().to_string();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }
}
