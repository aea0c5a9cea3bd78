//! `tap:NAME[,vnet_hdr][,ip=A/N][,mac=MAC]`: a Linux TAP device
//! (`/dev/net/tun`, IFF_TAP | IFF_NO_PI; Linux
//! Documentation/networking/tuntap.rst, include/uapi/linux/if_tun.h).
//!
//! What the kernel gives us: a file descriptor per queue; each `read(2)`
//! returns exactly one Ethernet frame the kernel sent out of the
//! interface, each `write(2)` injects exactly one frame as if it had been
//! received on it (tuntap.rst §3 "Program interface"). So a batch is "as
//! many non-blocking reads as frames are ready" on receive and one write
//! per frame on transmit; a frame the kernel refuses with EAGAIN stays with
//! the caller, as with a full descriptor ring.
//!
//! * Opening: `TUNSETIFF` on a fresh `/dev/net/tun` fd creates the
//!   interface if there is none of that name, or attaches to an existing
//!   TAP (a persistent one made by `ip tuntap add mode tap`, used as it is).
//!   An interface oxnet created is not persistent: the kernel removes it
//!   when the last queue fd closes, i.e. when the device is dropped, and
//!   also if oxnet crashes. The interface is brought up (IFF_UP) if it is
//!   down: a TAP that is down refuses writes.
//! * Queues: `Config::rx_queues`/`tx_queues` > 1 opens that many fds with
//!   IFF_MULTI_QUEUE (tuntap.rst §3.2 "Multiqueue tuntap interface"); the
//!   kernel spreads the frames it sends over them by flow hash.
//! * `vnet_hdr` (or the checksum/TSO offload switches): IFF_VNET_HDR, every
//!   frame read or written is preceded by the 10-byte virtio-net header
//!   (VirtIO 1.0 §5.1.6, `TUNSETVNETHDRSZ` 10): transmit checksum and TSO
//!   requests are carried in it (shared code in
//!   [`crate::virtio::net_header`]), and the kernel checksums and segments,
//!   TCP over IPv4 (gso_type TCPV4) and over IPv6 (TCPV6; the kernel's
//!   `virtio_net_hdr_to_skb` takes both without a feature to negotiate).
//!   `TUNSETOFFLOAD` says what *we* accept on receive: TUN_F_CSUM only with
//!   the rx checksum switch (partial checksums are then completed here);
//!   never TSO, so every received frame fits one buffer.
//! * MAC: the kernel-side interface has its own MAC (what `ip link` shows);
//!   it is the *peer's* address. oxnet's side of the wire has no MAC of its
//!   own in the kernel, so we choose a locally administered unicast one
//!   (02:6f:78:xx:xx:xx, "ox" and three bytes of a hash of the name), or
//!   the spec's `mac=`.
//! * Promiscuous mode: the fd receives every frame the kernel sends out of
//!   the interface. With promiscuous off, `TUNSETTXFILTER` makes the
//!   kernel pass only frames to our MAC plus all multicast/broadcast
//!   (TUN_FLT_ALLMULTI); frames it filters count in the interface's
//!   tx_dropped, hence in `kernel_rx_dropped`.
//! * DMA domains: the kernel copies to and from user memory with
//!   `copy_to_user`/`copy_from_user`; any address of this process works,
//!   so packets of every domain are sent as they are (no copy, no
//!   `tx_copied`), and the receive pools are plain memory unless
//!   `--memory` says otherwise.
//! * Interrupt mode: [`Device::rx_interrupt_fd`] is an epoll fd that holds
//!   the queue's TAP fd (level-triggered EPOLLIN): it is readable exactly
//!   when a frame is ready. It is not the TAP fd itself because the
//!   interrupt loop reads 8 bytes from the fd it is given to clear an
//!   eventfd; a read of an epoll fd fails harmlessly, a read of the TAP
//!   fd would consume a frame.
//! * Statistics: software counters per queue, and the kernel's drops of
//!   frames on their way to us (the interface's `tx_dropped` in
//!   /sys/class/net/NAME/statistics, Documentation/ABI/testing/
//!   sysfs-class-net-statistics: the kernel's "transmit" is our receive;
//!   tun counts there frames it drops when a queue's ring of
//!   tx_queue_len frames is full) since the device was opened.

use crate::device::{Config, Device, DeviceStats, Features, Link, QueueStats};
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::netif;
use crate::packet::{Packet, PacketBatch, TX_REQUEST_MASK, TX_TSO};
use crate::virtio::net_header::{NetHeader, NET_HEADER_LEN};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// include/uapi/linux/if_tun.h (ioctl numbers: _IOW('T', nr, int) etc.).
/// TUNSETIFF = _IOW('T', 202, int).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// TUNSETOFFLOAD = _IOW('T', 208, unsigned int).
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// TUNSETTXFILTER = _IOW('T', 209, unsigned int).
const TUNSETTXFILTER: libc::c_ulong = 0x4004_54d1;
/// TUNSETVNETHDRSZ = _IOW('T', 216, int).
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
/// IFF_TUN: a layer-3 device (the name is taken by one of those).
const IFF_TUN: u32 = 0x0001;
/// IFF_TAP: a layer-2 (Ethernet) device.
const IFF_TAP: u32 = 0x0002;
/// IFF_NO_PI: no 4-byte packet information in front of each frame.
const IFF_NO_PI: u32 = 0x1000;
/// IFF_MULTI_QUEUE: one fd per queue.
const IFF_MULTI_QUEUE: u32 = 0x0100;
/// IFF_VNET_HDR: a virtio-net header in front of each frame.
const IFF_VNET_HDR: u32 = 0x4000;
/// TUN_F_CSUM: we accept frames with partial checksums.
const TUN_F_CSUM: libc::c_uint = 0x01;
/// TUN_FLT_ALLMULTI: the transmit filter passes all multicast.
const TUN_FLT_ALLMULTI: u16 = 0x0001;

/// Ethernet header + one VLAN tag: what a frame adds to the MTU.
const L2_OVERHEAD: usize = 18;

/// What the spec string says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct TapSpec {
    name: String,
    vnet_hdr: bool,
    ip: Option<(std::net::Ipv4Addr, u8)>,
    mac: Option<[u8; 6]>,
}

fn parse_ip(text: &str) -> Result<(std::net::Ipv4Addr, u8)> {
    let bad = || {
        Error::BadSpec(format!(
            "tap: ip={text}: expected an IPv4 address with a prefix length, like ip=10.0.0.1/24"
        ))
    };
    let (address, prefix) = text.split_once('/').ok_or_else(bad)?;
    let address: std::net::Ipv4Addr = address.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    if prefix > 32 {
        return Err(bad());
    }
    Ok((address, prefix))
}

fn parse_spec(rest: &str) -> Result<TapSpec> {
    let mut parts = rest.split(',');
    let name = parts.next().unwrap_or("");
    netif::check_name(name).map_err(|e| Error::BadSpec(format!("tap:{rest}: {e}")))?;
    let mut spec = TapSpec {
        name: name.to_string(),
        ..TapSpec::default()
    };
    for option in parts {
        match option.split_once('=') {
            None if option == "vnet_hdr" => spec.vnet_hdr = true,
            Some(("ip", value)) => spec.ip = Some(parse_ip(value)?),
            Some(("mac", value)) => {
                let mac = netif::parse_mac(value).ok_or_else(|| {
                    Error::BadSpec(format!("tap:{rest}: mac={value} is not a MAC like 02:00:00:00:00:01"))
                })?;
                if mac[0] & 1 != 0 {
                    return Err(Error::BadSpec(format!(
                        "tap:{rest}: mac={value} is a multicast address"
                    )));
                }
                spec.mac = Some(mac);
            }
            _ => {
                return Err(Error::BadSpec(format!(
                    "tap:{rest}: unknown option '{option}' (tap:NAME[,vnet_hdr][,ip=A/N][,mac=MAC])"
                )))
            }
        }
    }
    Ok(spec)
}

/// oxnet's own MAC on a TAP: locally administered (bit 1 of the first
/// octet, IEEE 802 §8.2.2), unicast, 02:6f:78 ("ox") and three bytes of an
/// FNV-1a hash of the interface name, so it is stable across runs.
pub fn local_mac(name: &str) -> [u8; 6] {
    let mut hash: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        hash = (hash ^ b as u32).wrapping_mul(0x0100_0193);
    }
    let h = hash.to_be_bytes();
    [0x02, 0x6f, 0x78, h[1], h[2], h[3]]
}

/// The interface's `tun_flags` (sysfs, hexadecimal), if it is a tun/tap.
fn tun_flags(name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/tun_flags")).ok()?;
    u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

fn kernel_counter(name: &str, counter: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/{counter}"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// One queue: its fd, receive pool and counters.
struct Queue {
    fd: OwnedFd,
    pool: Mempool,
    /// A buffer kept for the next read (a read that finds nothing would
    /// otherwise allocate and free one per poll).
    spare: Option<Packet>,
    /// epoll fd holding `fd`, for interrupt mode.
    interrupt: Option<OwnedFd>,
    stats: QueueStats,
    rx_pool_empty: u64,
    rx_oversize: u64,
    rx_errors: u64,
    tx_ring_full: u64,
    tx_invalid: u64,
}

/// A TAP device.
pub struct TapDevice {
    spec: String,
    name: String,
    queues: Vec<Queue>,
    rx_queues: u16,
    tx_queues: u16,
    vnet_hdr: bool,
    rx_checksum: bool,
    mac: [u8; 6],
    created: bool,
    kernel_tx_dropped_at_open: u64,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Opens one queue fd of `name` with `flags`.
fn open_queue(name: &str, flags: u32, spec: &str) -> Result<OwnedFd> {
    let path = c"/dev/net/tun";
    // SAFETY: plain open(2) of a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => Error::Device(format!(
                "{spec}: /dev/net/tun is missing ({err}): load the tun module (`modprobe tun`) or, in a container, \
                 pass the device in (docker run --device /dev/net/tun)"
            )),
            Some(libc::EACCES) | Some(libc::EPERM) => Error::Permission(format!(
                "{spec}: cannot open /dev/net/tun ({err}): run as root or with CAP_NET_ADMIN"
            )),
            _ => Error::Io(format!("{spec}: open /dev/net/tun: {err}")),
        });
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; zeroes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = flags as u16 as libc::c_short;
    // SAFETY: TUNSETIFF reads a struct ifreq (tuntap.rst §3); req is one.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission(format!(
                "{spec}: creating or attaching to TAP device {name} needs CAP_NET_ADMIN ({err}): run as root, \
                 or create it for your user first (`ip tuntap add mode tap name {name} user $USER`)"
            )),
            Some(libc::EBUSY) => Error::Device(format!(
                "{spec}: TAP device {name} is in use by another process ({err})"
            )),
            Some(libc::EINVAL) => Error::Device(format!(
                "{spec}: the kernel refused to attach to {name} ({err}): an existing TAP must have been made with the \
                 same queue mode (`ip tuntap add mode tap name {name} multi_queue` for several queues)"
            )),
            _ => Error::Io(format!("{spec}: TUNSETIFF on {name}: {err}")),
        });
    }
    Ok(fd)
}

fn ioctl_int(fd: &OwnedFd, request: libc::c_ulong, value: libc::c_int, what: &str) -> Result<()> {
    // SAFETY: these tun ioctls read one int through the pointer.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &value) };
    if rc < 0 {
        return Err(Error::Io(format!("{what}: {}", std::io::Error::last_os_error())));
    }
    Ok(())
}

/// Gives the kernel side `address/prefix` (netdevice(7): SIOCSIFADDR and
/// SIOCSIFNETMASK on an AF_INET socket).
fn set_ipv4(name: &str, address: std::net::Ipv4Addr, prefix: u8) -> Result<()> {
    // SAFETY: plain socket(2); checked and owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(Error::Io(format!("socket: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: a fresh fd.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix as u32)
    };
    for (request, value, what) in [
        (libc::SIOCSIFADDR, u32::from(address), "address"),
        (libc::SIOCSIFNETMASK, mask, "netmask"),
    ] {
        // SAFETY: ifreq is plain old data.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: value.to_be() },
            sin_zero: [0; 8],
        };
        // SAFETY: ifru_addr is a sockaddr, large enough for a sockaddr_in
        // (both 16 bytes); we write the sockaddr_in's bytes into it.
        unsafe {
            std::ptr::write(
                &mut req.ifr_ifru.ifru_addr as *mut libc::sockaddr as *mut libc::sockaddr_in,
                sin,
            );
        }
        // SAFETY: req is a valid ifreq with the address set.
        if unsafe { libc::ioctl(socket.as_raw_fd(), request as _, &req) } < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EPERM) {
                return Err(Error::Permission(format!(
                    "{name}: setting its IPv4 {what} needs CAP_NET_ADMIN ({err})"
                )));
            }
            return Err(Error::Io(format!(
                "{name}: setting its IPv4 {what} {address}/{prefix}: {err}"
            )));
        }
    }
    Ok(())
}

/// Opens `tap:` + `rest`.
pub fn open(rest: &str, config: &Config) -> Result<Box<dyn Device>> {
    Ok(Box::new(TapDevice::open(rest, config)?))
}

impl TapDevice {
    /// Opens (creating it if needed) the TAP device `tap:` + `rest`.
    pub fn open(rest: &str, config: &Config) -> Result<TapDevice> {
        let spec_text = format!("tap:{rest}");
        let mut spec = parse_spec(rest)?;
        if spec.ip.is_none() {
            if let Some(ip) = &config.tap_ip {
                spec.ip = Some(parse_ip(ip)?);
            }
        }
        config.validate()?;
        let name = spec.name.clone();
        // A name taken by something that is not a TAP: TUNSETIFF would
        // fail with a bare EINVAL; say what it is instead.
        let existed = netif::exists(&name);
        if existed {
            match tun_flags(&name) {
                None => {
                    return Err(Error::Device(format!(
                    "{spec_text}: the name {name} is taken by a {} interface, not a TAP device; choose another name",
                    match netif::kind(&name).as_str() {
                        "" => "non-TAP".to_string(),
                        kind => kind.to_string(),
                    }
                )))
                }
                Some(flags) if flags & IFF_TUN != 0 => {
                    return Err(Error::Device(format!(
                        "{spec_text}: {name} is a TUN (layer 3) device, not a TAP (layer 2) one; \
                         use another name or recreate it with `ip tuntap add mode tap name {name}`"
                    )))
                }
                Some(_) => {}
            }
        }
        let offloads = config.offloads;
        let tx_offloads = offloads.tx_checksum || offloads.tso != crate::device::TsoMode::Off;
        let vnet_hdr = spec.vnet_hdr || tx_offloads || offloads.rx_checksum;
        let queue_count = config.rx_queues.max(config.tx_queues) as usize;
        let mut flags = IFF_TAP | IFF_NO_PI;
        if queue_count > 1 {
            flags |= IFF_MULTI_QUEUE;
        }
        if vnet_hdr {
            flags |= IFF_VNET_HDR;
        }
        let kind = crate::domain::device_memory(config.memory.unwrap_or(MemoryKind::Plain), &spec_text)?;
        let mut queues = Vec::with_capacity(queue_count);
        for q in 0..queue_count {
            let fd = open_queue(&name, flags, &spec_text)?;
            if vnet_hdr {
                // 10 bytes: struct virtio_net_hdr without num_buffers
                // (§5.1.6; the kernel's default, set to be explicit).
                ioctl_int(&fd, TUNSETVNETHDRSZ, NET_HEADER_LEN as libc::c_int, "TUNSETVNETHDRSZ")?;
                // TUNSETOFFLOAD takes its flags by value, not by pointer
                // (drivers/net/tun.c: set_offload(tun, arg)).
                let accept: libc::c_ulong = if offloads.rx_checksum {
                    TUN_F_CSUM as libc::c_ulong
                } else {
                    0
                };
                // SAFETY: an ioctl with an integer argument.
                if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, accept) } < 0 {
                    return Err(Error::Io(format!(
                        "{spec_text}: TUNSETOFFLOAD: {}",
                        std::io::Error::last_os_error()
                    )));
                }
            }
            let pool = Mempool::new(&format!("{spec_text}/rx{q}"), config.effective_pool_size(), kind)?;
            let interrupt = if config.interrupts {
                Some(interrupt_fd(&fd)?)
            } else {
                None
            };
            queues.push(Queue {
                fd,
                pool,
                spare: None,
                interrupt,
                stats: QueueStats::new(q as u16),
                rx_pool_empty: 0,
                rx_oversize: 0,
                rx_errors: 0,
                tx_ring_full: 0,
                tx_invalid: 0,
            });
        }
        let created = !existed;
        let mtu = netif::mtu(&name)?;
        let room = queues[0].pool.data_room();
        if mtu + L2_OVERHEAD > room {
            return Err(Error::Config(format!(
                "{spec_text}: the interface's MTU {mtu} makes frames of up to {} bytes, more than a {room}-byte buffer; \
                 lower it (`ip link set {name} mtu 1500`)",
                mtu + L2_OVERHEAD
            )));
        }
        if let Some((address, prefix)) = spec.ip {
            set_ipv4(&name, address, prefix)?;
        }
        netif::set_up(&name).map_err(|e| match e {
            // A user may own a persistent TAP (`ip tuntap add ... user
            // U`) and attach without CAP_NET_ADMIN, but not bring it up.
            Error::Permission(_) => Error::Permission(format!(
                "{spec_text}: {name} is down and bringing it up needs CAP_NET_ADMIN: \
                 run `ip link set {name} up` as root first, or run oxnet as root"
            )),
            other => other,
        })?;
        let mut mac = spec.mac.unwrap_or_else(|| local_mac(&name));
        if netif::mac(&name).ok() == Some(mac) {
            // Never the kernel side's own address: frames to it would be
            // taken by the kernel, not by us.
            mac[5] ^= 1;
        }
        let mut dev = TapDevice {
            spec: spec_text,
            kernel_tx_dropped_at_open: kernel_counter(&name, "tx_dropped"),
            name,
            queues,
            rx_queues: config.rx_queues,
            tx_queues: config.tx_queues,
            vnet_hdr,
            rx_checksum: offloads.rx_checksum,
            mac,
            created,
        };
        dev.set_promisc(config.promiscuous)?;
        Ok(dev)
    }

    /// The Linux interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this device created the interface (it goes away when the
    /// device is dropped) rather than attaching to an existing one.
    pub fn created(&self) -> bool {
        self.created
    }

    /// Whether frames carry a virtio-net header (IFF_VNET_HDR).
    pub fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }
}

/// An epoll fd that is readable when `fd` is (see the module docs).
fn interrupt_fd(fd: &OwnedFd) -> Result<OwnedFd> {
    // SAFETY: plain syscall; checked and owned below.
    let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if raw < 0 {
        return Err(Error::Io(format!("epoll_create1: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: a fresh fd.
    let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: adding a live fd to our own epoll set.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut event) } != 0 {
        return Err(Error::Io(format!("epoll_ctl: {}", std::io::Error::last_os_error())));
    }
    Ok(epoll)
}

impl Queue {
    /// One read: `Some(packet)` with a frame, `None` when nothing is ready.
    #[inline]
    fn read_one(&mut self, vnet_hdr: bool, rx_checksum: bool) -> Option<Packet> {
        loop {
            let mut packet = match self.spare.take() {
                Some(p) => p,
                None => match self.pool.alloc() {
                    Ok(p) => p,
                    Err(_) => {
                        self.rx_pool_empty += 1;
                        return None;
                    }
                },
            };
            let mut header = [0u8; NET_HEADER_LEN];
            let room = packet.data_room_mut();
            let capacity = room.len();
            let n = if vnet_hdr {
                let iov = [
                    libc::iovec {
                        iov_base: header.as_mut_ptr() as *mut libc::c_void,
                        iov_len: NET_HEADER_LEN,
                    },
                    libc::iovec {
                        iov_base: room.as_mut_ptr() as *mut libc::c_void,
                        iov_len: capacity,
                    },
                ];
                // SAFETY: both iovecs point to memory we own and may write.
                unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 2) }
            } else {
                // SAFETY: room is our buffer's data room, capacity bytes.
                unsafe { libc::read(self.fd.as_raw_fd(), room.as_mut_ptr() as *mut libc::c_void, capacity) }
            };
            if n < 0 {
                self.spare = Some(packet);
                let e = errno();
                if e != libc::EAGAIN && e != libc::EINTR {
                    // EFAULT/EINVAL (a frame the buffer could not take),
                    // EBADFD (the interface was deleted under us): counted;
                    // the batch ends here so a persistent error cannot
                    // spin.
                    self.rx_errors += 1;
                }
                return None;
            }
            let frame = n as usize - if vnet_hdr { NET_HEADER_LEN.min(n as usize) } else { 0 };
            if frame > capacity || frame == 0 {
                self.rx_oversize += (frame > capacity) as u64;
                self.spare = Some(packet);
                continue;
            }
            if packet.set_len(frame).is_err() {
                self.spare = Some(packet);
                continue;
            }
            if vnet_hdr {
                if let Some(h) = NetHeader::read(&header) {
                    if h.complete_partial(&mut packet).is_err() {
                        self.rx_errors += 1;
                    } else if rx_checksum {
                        let flags = h.rx_checksum_flags(&packet);
                        packet.meta_mut().flags |= flags;
                    }
                }
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += frame as u64;
            return Some(packet);
        }
    }

    /// One write of `header` (if any) and every segment of `packet`.
    /// `Ok(true)`: sent; `Ok(false)`: EAGAIN (try later); `Err`: refused.
    fn write_one(&mut self, packet: &Packet, header: Option<&[u8; NET_HEADER_LEN]>) -> std::result::Result<bool, i32> {
        let mut iov: [libc::iovec; 8] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 8];
        let mut n = 0;
        if let Some(h) = header {
            iov[0] = libc::iovec {
                iov_base: h.as_ptr() as *mut libc::c_void,
                iov_len: NET_HEADER_LEN,
            };
            n = 1;
        }
        let rc = if n == 0 && !packet.is_chained() {
            // SAFETY: the packet's data, len() bytes, read by the kernel.
            unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    packet.as_ptr() as *const libc::c_void,
                    packet.len(),
                )
            }
        } else {
            let mut heap: Vec<libc::iovec>;
            let list: &[libc::iovec] = if packet.segment_count() + n <= iov.len() {
                for segment in packet.segments() {
                    iov[n] = libc::iovec {
                        iov_base: segment.as_ptr() as *mut libc::c_void,
                        iov_len: segment.len(),
                    };
                    n += 1;
                }
                &iov[..n]
            } else {
                heap = iov[..n].to_vec();
                heap.extend(packet.segments().map(|s| libc::iovec {
                    iov_base: s.as_ptr() as *mut libc::c_void,
                    iov_len: s.len(),
                }));
                &heap
            };
            // SAFETY: every iovec points into memory that lives through
            // the call (the header, the packet's segments); the kernel
            // only reads it.
            unsafe {
                libc::writev(
                    self.fd.as_raw_fd(),
                    list.as_ptr(),
                    list.len().min(libc::UIO_MAXIOV as usize) as i32,
                )
            }
        };
        if rc >= 0 {
            return Ok(true);
        }
        match errno() {
            libc::EAGAIN | libc::EINTR | libc::ENOBUFS => Ok(false),
            e => Err(e),
        }
    }
}

impl TapDevice {
    fn queue_for(&mut self, queue: u16) -> Option<&mut Queue> {
        self.queues.get_mut(queue as usize)
    }

    /// Sends one packet. `Err(packet)`: the kernel had no room (EAGAIN),
    /// it stays with the caller; `Ok`: sent, or refused and counted.
    fn tx_one(&mut self, queue: usize, mut packet: Packet) -> std::result::Result<(), Packet> {
        let vnet_hdr = self.vnet_hdr;
        let request = packet.tx_offload();
        let total = packet.total_len();
        let q = &mut self.queues[queue];
        if packet.len() < 14 {
            q.tx_invalid += 1;
            return Ok(());
        }
        let wants = request.flags & TX_REQUEST_MASK != 0;
        let header = if vnet_hdr {
            let header = if wants {
                // The kernel does checksums and TSO (tuntap.rst: "the
                // kernel acts on the virtio-net header" via
                // virtio_net_hdr_to_skb): every request fits the header.
                match NetHeader::for_request(&mut packet, total, &request) {
                    Ok(h) => h,
                    Err(_) => {
                        q.tx_invalid += 1;
                        return Ok(());
                    }
                }
            } else {
                NetHeader::default()
            };
            let mut bytes = [0u8; NET_HEADER_LEN];
            header.write(&mut bytes);
            Some(bytes)
        } else if wants {
            return self.tx_software(queue, packet);
        } else {
            None
        };
        let q = &mut self.queues[queue];
        match q.write_one(&packet, header.as_ref()) {
            Ok(true) => {
                q.stats.tx_packets += 1;
                q.stats.tx_bytes += total as u64;
                Ok(())
            }
            Ok(false) => {
                q.tx_ring_full += 1;
                Err(packet)
            }
            Err(_) => {
                q.tx_invalid += 1;
                Ok(())
            }
        }
    }

    /// Without IFF_VNET_HDR, an offload request is done here ([`crate::offload`])
    /// and the frames written plain.
    #[cold]
    fn tx_software(&mut self, queue: usize, packet: Packet) -> std::result::Result<(), Packet> {
        let request = packet.tx_offload();
        let pool = self.queues[queue].pool.clone();
        let mut frames = Vec::new();
        let made = if request.flags & TX_TSO != 0 {
            crate::offload::segment(&packet, &pool, &mut frames)
        } else {
            crate::offload::linearize(&packet, &pool).and_then(|mut copy| {
                crate::offload::fill_checksums(&mut copy, &request)?;
                copy.set_tx_offload(Default::default());
                frames.push(copy);
                Ok(())
            })
        };
        let q = &mut self.queues[queue];
        if made.is_err() {
            q.tx_invalid += 1;
            return Ok(());
        }
        // The frames of one packet go out together or (EAGAIN on the
        // first) not at all; a later EAGAIN loses the rest, counted.
        for (k, frame) in frames.iter().enumerate() {
            match q.write_one(frame, None) {
                Ok(true) => {}
                Ok(false) if k == 0 => {
                    q.tx_ring_full += 1;
                    return Err(packet);
                }
                _ => q.tx_invalid += 1,
            }
        }
        q.stats.tx_packets += 1;
        q.stats.tx_bytes += packet.total_len() as u64;
        q.stats.tx_software_fallback += 1;
        Ok(())
    }
}

impl Device for TapDevice {
    fn driver_name(&self) -> &'static str {
        "tap"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        let (vnet_hdr, rx_checksum) = (self.vnet_hdr, self.rx_checksum);
        if queue >= self.rx_queues {
            return 0;
        }
        let Some(q) = self.queue_for(queue) else { return 0 };
        let mut received = 0;
        while received < max {
            let Some(packet) = q.read_one(vnet_hdr, rx_checksum) else {
                break;
            };
            batch.push(packet);
            received += 1;
        }
        received
    }

    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        if queue >= self.tx_queues || queue as usize >= self.queues.len() {
            return 0;
        }
        let n = batch.len();
        batch.consume_front_while(n, |packet| self.tx_one(queue as usize, packet))
    }

    fn stats(&mut self) -> DeviceStats {
        let mut s = DeviceStats::default();
        for q in &self.queues {
            s.rx_packets += q.stats.rx_packets;
            s.rx_bytes += q.stats.rx_bytes;
            s.tx_packets += q.stats.tx_packets;
            s.tx_bytes += q.stats.tx_bytes;
            s.rx_pool_empty += q.rx_pool_empty;
            s.rx_oversize += q.rx_oversize;
            s.rx_length_errors += q.rx_errors;
            s.tx_ring_full += q.tx_ring_full;
            s.tx_invalid += q.tx_invalid;
        }
        s.kernel_rx_dropped = kernel_counter(&self.name, "tx_dropped").saturating_sub(self.kernel_tx_dropped_at_open);
        s
    }

    fn link(&self) -> Link {
        netif::link(&self.name)
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Off: TUNSETTXFILTER with our MAC and all multicast (the kernel
    /// passes only those frames to the fd); on: the filter removed.
    fn set_promisc(&mut self, on: bool) -> Result<()> {
        // struct tun_filter { __u16 flags; __u16 count; __u8 addr[][6]; }
        let mut filter = [0u8; 10];
        if !on {
            filter[0..2].copy_from_slice(&TUN_FLT_ALLMULTI.to_ne_bytes());
            filter[2..4].copy_from_slice(&1u16.to_ne_bytes());
            filter[4..10].copy_from_slice(&self.mac);
        }
        // The filter belongs to the device, not the queue: set once.
        let fd = self.queues[0].fd.as_raw_fd();
        // SAFETY: TUNSETTXFILTER reads a tun_filter header and `count`
        // addresses; `filter` holds both.
        if unsafe { libc::ioctl(fd, TUNSETTXFILTER as _, filter.as_ptr()) } < 0 {
            return Err(Error::Io(format!(
                "{}: TUNSETTXFILTER: {}",
                self.spec,
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }

    fn features(&self) -> Features {
        Features::default()
    }

    fn mempool(&self, queue: u16) -> Mempool {
        self.queues[(queue as usize).min(self.queues.len() - 1)].pool.clone()
    }

    fn queues(&self) -> (u16, u16) {
        (self.rx_queues, self.tx_queues)
    }

    fn queue_stats(&mut self) -> Vec<QueueStats> {
        self.queues.iter().map(|q| q.stats.clone()).collect()
    }

    /// The queue's TAP fd: readable while a frame waits (tun_chr_poll).
    fn rx_poll_fd(&self, queue: u16) -> Option<RawFd> {
        (queue < self.rx_queues).then(|| self.queues.get(queue as usize).map(|q| q.fd.as_raw_fd()))?
    }

    fn rx_interrupt_fd(&self, queue: u16) -> Option<RawFd> {
        self.queues
            .get(queue as usize)?
            .interrupt
            .as_ref()
            .map(|e| e.as_raw_fd())
    }

    /// Readiness of a TAP fd is level-triggered: nothing to arm.
    fn set_rx_interrupt(&mut self, queue: u16, _enabled: bool) -> Result<()> {
        match self.queues.get(queue as usize).and_then(|q| q.interrupt.as_ref()) {
            Some(_) => Ok(()),
            None => Err(Error::Config(format!(
                "{}: opened without interrupts (--interrupts)",
                self.spec
            ))),
        }
    }
}

impl Drop for TapDevice {
    fn drop(&mut self) {
        // Buffers first, then the fds (Queue's field order). An interface
        // we created is not persistent: closing its last fd removes it.
        for q in &mut self.queues {
            q.spare = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_why() {
        let s = parse_spec("tap0,vnet_hdr,ip=10.0.0.1/24,mac=02:00:00:00:00:07").unwrap();
        assert_eq!(s.name, "tap0");
        assert!(s.vnet_hdr);
        assert_eq!(s.ip, Some(("10.0.0.1".parse().unwrap(), 24)));
        assert_eq!(s.mac, Some([2, 0, 0, 0, 0, 7]));
        for (bad, says) in [
            ("", "interface name"),
            ("a234567890123456", "interface name"),
            ("a/b", "interface name"),
            ("tap0,ip=10.0.0.1", "prefix length"),
            ("tap0,ip=10.0.0.1/33", "prefix length"),
            ("tap0,mac=01:00:00:00:00:01", "multicast"),
            ("tap0,frob", "unknown option"),
        ] {
            let err = parse_spec(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn our_mac_is_locally_administered_unicast_and_stable() {
        let mac = local_mac("tap0");
        // IEEE 802 §8.2.2: bit 0 of the first octet is I/G (0: unicast),
        // bit 1 is U/L (1: locally administered).
        assert_eq!(mac[0] & 0b11, 0b10);
        assert_eq!(mac, local_mac("tap0"));
        assert_ne!(mac, local_mac("tap1"));
    }

    #[test]
    fn ioctl_numbers_match_the_ioc_encoding() {
        // _IOW(type, nr, size) = 1 << 30 | size << 16 | type << 8 | nr
        // (include/uapi/asm-generic/ioctl.h); 'T' = 0x54, int = 4 bytes.
        let iow = |nr: u64| (1u64 << 30) | (4 << 16) | (0x54 << 8) | nr;
        assert_eq!(TUNSETIFF, iow(202));
        assert_eq!(TUNSETOFFLOAD, iow(208));
        assert_eq!(TUNSETTXFILTER, iow(209));
        assert_eq!(TUNSETVNETHDRSZ, iow(216));
    }
}
