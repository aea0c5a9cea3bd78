//! The XDP socket device: UMEM, rings, copies, kicks, statistics.
//!
//! UMEM layout (af_xdp.rst, "UMEM"): `frames` equal frames of
//! `frame_size` bytes (aligned chunk mode: every address the kernel hands
//! back lies in the frame it came from, and `addr & !(frame_size - 1)` is
//! the frame). The first `fill_frames` frames circulate between the fill
//! ring, the RX ring and back (we copy each received packet out and return
//! its frame at once); the others are the TX frames, on a free stack until
//! a packet is copied into one, back on it when the completion ring says
//! the kernel is done with it.

use super::libxdp::{self, Libxdp, SocketConfig, UmemConfig, XskSocket, XskUmem};
use super::ring::XskRing;
use super::{AfXdpSpec, AttachMode, BindMode};
use crate::device::{Config, Device, DeviceStats, Features, Link};
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::packet::{BulkFree, PacketBatch};
use std::ffi::c_int;

/// Bytes the kernel keeps in front of a received packet in its UMEM frame
/// (XDP_PACKET_HEADROOM, include/uapi/linux/bpf.h): the largest frame we
/// can receive into a frame is `frame_size - XDP_PACKET_HEADROOM`.
const XDP_PACKET_HEADROOM: usize = 256;

/// An `af_xdp:` device: one queue of one interface.
pub struct AfXdp {
    spec: String,
    interface: String,
    lib: &'static Libxdp,
    xsk: *mut XskSocket,
    umem: *mut XskUmem,
    fd: c_int,
    // Boxed: libxdp keeps pointers to the fill and completion ring structs
    // between xsk_umem__create and xsk_socket__create.
    fill: Box<XskRing>,
    comp: Box<XskRing>,
    rx: Box<XskRing>,
    tx: Box<XskRing>,
    area: *mut u8,
    area_len: usize,
    frame_size: u64,
    /// Free TX frames (UMEM addresses).
    tx_frames: Vec<u64>,
    /// RX frames the fill ring had no room for (never in practice: the
    /// ring holds every RX frame); given back first next time.
    spare_fill: Vec<u64>,
    pool: Mempool,
    /// Fresh receive buffers not used yet by the last rx_batch.
    scratch: PacketBatch,
    stats: DeviceStats,
    mac: [u8; 6],
    zero_copy: bool,
    promisc_set_by_us: bool,
    _claim: Option<super::stale::Claim>,
}

// SAFETY: the raw pointers (libxdp objects, UMEM area) are owned by this
// device and used only through &mut self; libxdp keeps no thread-bound state.
unsafe impl Send for AfXdp {}

fn errno_text(err: c_int) -> String {
    std::io::Error::from_raw_os_error(err).to_string()
}

/// Receive queues of an interface (sysfs `queues/rx-N`).
fn rx_queue_count(interface: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{interface}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(0)
}

/// The capabilities AF_XDP needs that this process's effective set lacks
/// (capabilities(7); bits from linux/capability.h: CAP_NET_ADMIN 12,
/// CAP_NET_RAW 13, CAP_SYS_ADMIN 21, CAP_BPF 39 — CAP_SYS_ADMIN stands in
/// for CAP_BPF on kernels before 5.8). `None` if it has them all, or if
/// /proc/self/status cannot be read (the kernel then decides).
fn missing_capabilities() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    let caps = u64::from_str_radix(hex, 16).ok()?;
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    let mut missing = Vec::new();
    if !has(13) {
        missing.push("CAP_NET_RAW");
    }
    if !has(12) {
        missing.push("CAP_NET_ADMIN");
    }
    if !has(39) && !has(21) {
        missing.push("CAP_BPF");
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

impl AfXdp {
    pub fn open(spec_text: String, spec: AfXdpSpec, config: &Config) -> Result<AfXdp> {
        config.validate()?;
        let fallback = format!("or use af_packet:{} instead", spec.interface);
        if config.rx_queues != 1 || config.tx_queues != 1 {
            return Err(Error::Config(format!(
                "{spec_text}: an af_xdp device is one queue of an interface; open af_xdp:{}:N once per queue N",
                spec.interface
            )));
        }
        if spec.bind == BindMode::ZeroCopy && spec.attach == AttachMode::Generic {
            return Err(Error::Config(format!(
                "{spec_text}: zero-copy needs the program attached in the driver (attach=native): \
                 generic XDP hands the socket copies of skbs"
            )));
        }
        let lib = libxdp::get().map_err(|e| Error::Device(format!("{spec_text}: {e}")))?;
        let ifindex =
            crate::netif::ifindex(&spec.interface).map_err(|e| Error::BadSpec(format!("{spec_text}: {e}")))?;
        let queues = rx_queue_count(&spec.interface);
        if queues > 0 && spec.queue as usize >= queues {
            return Err(Error::BadSpec(format!(
                "{spec_text}: {} has {queues} receive queue(s) (0..{}), there is no queue {}",
                spec.interface,
                queues - 1,
                spec.queue
            )));
        }
        if let Some(missing) = missing_capabilities() {
            return Err(Error::Permission(format!(
                "{spec_text}: AF_XDP needs the capabilities CAP_NET_RAW (the socket), CAP_NET_ADMIN and \
                 CAP_BPF (the XDP program), and this process lacks {missing}; run as root, {fallback} \
                 (which needs only CAP_NET_RAW)"
            )));
        }
        let mtu = crate::netif::mtu(&spec.interface)?;
        // Ethernet header + one VLAN tag on top of the MTU.
        let largest_frame = mtu + 18;
        let frame_size: usize = if largest_frame + XDP_PACKET_HEADROOM <= 2048 {
            2048
        } else {
            4096
        };
        if largest_frame + XDP_PACKET_HEADROOM > frame_size {
            return Err(Error::Config(format!(
                "{spec_text}: MTU {mtu} of {} does not fit a {frame_size}-byte UMEM frame after the \
                 kernel's {XDP_PACKET_HEADROOM} bytes of head room (XDP multi-buffer is not supported); \
                 lower the MTU, {fallback}",
                spec.interface
            )));
        }
        let memory = crate::domain::device_memory(config.memory.unwrap_or(MemoryKind::Plain), &spec_text)?;
        let pool = Mempool::new(&format!("{spec_text} rx"), config.effective_pool_size(), memory)?;
        if pool.data_room() < largest_frame {
            return Err(Error::Config(format!(
                "{spec_text}: receive buffers of {} bytes are smaller than a frame of MTU {mtu}",
                pool.data_room()
            )));
        }

        // A program a crashed oxnet left here would steal our queue's
        // packets into a dead socket's map, or make libxdp refuse another
        // attach mode: remove it first (stale.rs).
        let removed_left_over = super::stale::remove_left_over(lib, ifindex, &spec.interface);
        let claim = super::stale::Claim::take(ifindex);

        // The kernel's RX and fill rings are larger than oxnet's ring size
        // (at least 2048 entries, DPDK's and libxdp's default,
        // XSK_RING_CONS__DEFAULT_NUM_DESCS): a copy-mode socket has no
        // flow control towards the sender, so what arrives while this
        // thread is not scheduled must fit the RX ring (otherwise the
        // kernel drops it, XDP_STATISTICS rx_ring_full).
        let fill_frames = (config.rx_ring_size * 2).max(2048);
        let tx_frames_n = config.tx_ring_size;
        let frames = fill_frames + tx_frames_n;
        let area_len = frames * frame_size;
        // SAFETY: anonymous private mapping of area_len bytes, page-aligned
        // (the kernel requires a page-aligned UMEM start, af_xdp.rst
        // XDP_UMEM_REG); unmapped in Drop after the socket is gone.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                area_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(crate::error::os_error(&format!(
                "{spec_text}: mmap of the {area_len}-byte UMEM"
            )));
        }
        let mut dev = AfXdp {
            spec: spec_text.clone(),
            interface: spec.interface.clone(),
            lib,
            xsk: std::ptr::null_mut(),
            umem: std::ptr::null_mut(),
            fd: -1,
            fill: Box::default(),
            comp: Box::default(),
            rx: Box::default(),
            tx: Box::default(),
            area: area as *mut u8,
            area_len,
            frame_size: frame_size as u64,
            tx_frames: (fill_frames..frames).rev().map(|f| (f * frame_size) as u64).collect(),
            spare_fill: Vec::new(),
            pool,
            scratch: PacketBatch::with_capacity(config.batch_size),
            stats: DeviceStats::default(),
            mac: crate::netif::mac(&spec.interface)?,
            zero_copy: false,
            promisc_set_by_us: false,
            _claim: claim,
        };

        let umem_config = UmemConfig {
            fill_size: fill_frames as u32,
            comp_size: tx_frames_n as u32,
            frame_size: frame_size as u32,
            frame_headroom: 0,
            flags: 0,
        };
        libxdp::take_messages();
        // SAFETY: area is a live mapping of area_len bytes; the ring
        // structs are boxed (stable addresses) and outlive the UMEM.
        let err = unsafe {
            (lib.umem_create)(
                &mut dev.umem,
                area,
                area_len as u64,
                &mut *dev.fill,
                &mut *dev.comp,
                &umem_config,
            )
        };
        if err != 0 {
            dev.umem = std::ptr::null_mut();
            return Err(dev.refusal("registering the UMEM", -err, &spec, &fallback));
        }

        let socket_config = SocketConfig {
            rx_size: fill_frames as u32,
            tx_size: config.tx_ring_size as u32,
            libxdp_flags: 0,
            xdp_flags: match spec.attach {
                AttachMode::Auto => 0,
                AttachMode::Generic => libxdp::XDP_FLAGS_SKB_MODE,
                AttachMode::Native => libxdp::XDP_FLAGS_DRV_MODE,
            },
            bind_flags: libc::XDP_USE_NEED_WAKEUP
                | match spec.bind {
                    BindMode::Auto => 0,
                    BindMode::Copy => libc::XDP_COPY,
                    BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
                },
        };
        let name = std::ffi::CString::new(spec.interface.as_str())
            .map_err(|_| Error::BadSpec(format!("{spec_text}: bad interface name")))?;
        // After a crashed oxnet's program was removed, its socket may
        // still be on its way out (the kernel releases it after the dead
        // process's files are closed): a busy queue is retried for up to
        // a second then.
        let started = std::time::Instant::now();
        let err = loop {
            // SAFETY: valid name, live UMEM, boxed ring structs that
            // outlive the socket, a valid config.
            let err = unsafe {
                (lib.socket_create)(
                    &mut dev.xsk,
                    name.as_ptr(),
                    spec.queue,
                    dev.umem,
                    &mut *dev.rx,
                    &mut *dev.tx,
                    &socket_config,
                )
            };
            if err == -libc::EBUSY && removed_left_over && started.elapsed() < std::time::Duration::from_secs(1) {
                dev.xsk = std::ptr::null_mut();
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
            break err;
        };
        if err != 0 {
            dev.xsk = std::ptr::null_mut();
            return Err(dev.refusal("creating the XDP socket", -err, &spec, &fallback));
        }
        // SAFETY: a live socket.
        dev.fd = unsafe { (lib.socket_fd)(dev.xsk) };
        for ring in [&mut dev.fill, &mut dev.comp, &mut dev.rx, &mut dev.tx] {
            if !ring.is_mapped() {
                return Err(Error::Device(format!("{spec_text}: libxdp did not map all four rings")));
            }
            ring.sync();
        }
        dev.zero_copy = dev.read_zero_copy();
        if let Some(claim) = dev._claim.as_mut() {
            claim.record(lib);
        }
        // Every RX frame into the fill ring: the kernel needs free frames
        // before it can deliver anything (af_xdp.rst, "FILL RING").
        let rx_addrs: Vec<u64> = (0..fill_frames).map(|f| (f * frame_size) as u64).collect();
        dev.refill(&rx_addrs);

        if config.promiscuous {
            let flags = crate::netif::flags(&spec.interface)?;
            if flags & libc::IFF_PROMISC as u32 == 0 {
                crate::netif::change_flags(&spec.interface, libc::IFF_PROMISC as u32, 0)?;
                dev.promisc_set_by_us = true;
            }
        }
        if let Some(warning) = crate::netif::address_warning(&spec.interface) {
            eprintln!("{spec_text}: {warning}");
        }
        Ok(dev)
    }

    /// The error for a refusal from libxdp / the kernel (`err` an errno),
    /// naming the likely cause and the fix.
    fn refusal(&self, doing: &str, err: c_int, spec: &AfXdpSpec, fallback: &str) -> Error {
        let said = libxdp::take_messages();
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(" [libxdp: {said}]")
        };
        let name = &spec.interface;
        let kind = crate::netif::kind(name);
        let kind = if kind.is_empty() {
            "its driver".to_string()
        } else {
            format!("its driver ({kind})")
        };
        let base = format!("{}: {doing} failed: {}", self.spec, errno_text(err));
        match err {
            libc::EPERM | libc::EACCES => Error::Permission(format!(
                "{base}: not permitted (AF_XDP needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF); run as root, \
                 {fallback}{said}"
            )),
            libc::EOPNOTSUPP | libc::ENOTSUP if spec.bind == BindMode::ZeroCopy => Error::Device(format!(
                "{base}: {name} refuses zero-copy AF_XDP: {kind} has no zero-copy support \
                 (veth never has); use bind=copy, {fallback}{said}"
            )),
            libc::EOPNOTSUPP | libc::ENOTSUP if spec.attach == AttachMode::Native => Error::Device(format!(
                "{base}: {name} refuses native XDP: {kind} does not run XDP programs itself; \
                 use attach=generic, {fallback}{said}"
            )),
            libc::EBUSY | libc::EEXIST => Error::Device(format!(
                "{base}: queue {} of {name} is taken: another XDP socket is bound to it, or another XDP \
                 program (or one in another attach mode) is on {name} (`ip link show {name}`); \
                 close it, use another queue, {fallback}{said}",
                spec.queue
            )),
            libc::ENETDOWN => Error::Device(format!("{base}: {name} is down: `ip link set {name} up`{said}")),
            libc::EAFNOSUPPORT => Error::Device(format!(
                "{base}: this kernel has no AF_XDP (CONFIG_XDP_SOCKETS); {fallback}{said}"
            )),
            _ => Error::Device(format!("{base}; {fallback}{said}")),
        }
    }

    /// XDP_OPTIONS: whether the kernel bound the socket in zero-copy mode.
    fn read_zero_copy(&self) -> bool {
        let mut opts = libc::xdp_options { flags: 0 };
        let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: fd is our socket; opts/len are valid out-parameters.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut opts as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        r == 0 && opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
    }

    /// Puts frames back into the fill ring (what does not fit waits in
    /// `spare_fill`), and kicks the kernel if it asked for it.
    fn refill(&mut self, addrs: &[u64]) {
        let spare = std::mem::take(&mut self.spare_fill);
        let all = spare.iter().chain(addrs.iter());
        let total = (spare.len() + addrs.len()) as u32;
        let room = self.fill.prod_free(total);
        let mut written = 0;
        for &addr in all {
            if written < room {
                *self.fill.prod_addr(written) = addr;
                written += 1;
            } else {
                self.spare_fill.push(addr);
            }
        }
        self.fill.submit(written);
        if self.fill.needs_wakeup() {
            self.kick_rx();
        }
    }

    /// Wakes the kernel's receive side (af_xdp.rst: "recvfrom() or poll()"
    /// when the fill ring has XDP_RING_NEED_WAKEUP).
    fn kick_rx(&self) {
        // SAFETY: a zero-length, non-blocking recvfrom on our socket; no
        // buffer is written.
        unsafe {
            libc::recvfrom(
                self.fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Makes the kernel send what is in the TX ring (af_xdp.rst: sendto()
    /// when the TX ring has XDP_RING_NEED_WAKEUP; in copy mode the kernel
    /// transmits from within this call, and keeps the flag set: bind sets
    /// it, xp_assign_dev in net/xdp/xsk_buff_pool.c, and only zero-copy
    /// drivers ever clear it). EAGAIN, EBUSY, ENOBUFS: the kernel
    /// is still busy with earlier descriptors and will look again at the
    /// next kick; nothing to do now.
    fn kick_tx(&self) {
        // SAFETY: a zero-length, non-blocking sendto on our socket.
        unsafe { libc::sendto(self.fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    }

    /// Takes back the TX frames the kernel has finished with.
    fn reclaim(&mut self) {
        let n = self.comp.cons_ready(self.comp.size());
        let mask = !(self.frame_size - 1);
        for i in 0..n {
            self.tx_frames.push(self.comp.cons_addr(i) & mask);
        }
        self.comp.release(n);
    }

    fn frame(&mut self, addr: u64, len: usize) -> &mut [u8] {
        assert!(
            addr as usize + len <= self.area_len,
            "UMEM address {addr:#x}+{len} outside the UMEM"
        );
        // SAFETY: inside the UMEM mapping (checked above); the frame is ours
        // (not in any ring the kernel reads or writes) while we use it.
        unsafe { std::slice::from_raw_parts_mut(self.area.add(addr as usize), len) }
    }
}

impl Device for AfXdp {
    fn driver_name(&self) -> &'static str {
        "af_xdp"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    /// The XDP socket: readable while its RX ring holds descriptors
    /// (xsk_poll; polling it also wakes the kernel's receive under
    /// need-wakeup, Documentation/networking/af_xdp.rst).
    fn rx_poll_fd(&self, queue: u16) -> Option<std::os::fd::RawFd> {
        (queue == 0 && self.fd >= 0).then_some(self.fd)
    }

    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        if queue != 0 || max == 0 {
            return 0;
        }
        let ready = self.rx.cons_ready(max.min(u32::MAX as usize) as u32) as usize;
        if ready == 0 {
            if self.fill.needs_wakeup() {
                self.kick_rx();
            }
            return 0;
        }
        if self.scratch.len() < ready {
            let want = ready - self.scratch.len();
            if self.pool.alloc_batch(&mut self.scratch, want) < want {
                self.stats.rx_pool_empty += 1;
            }
        }
        let n = ready.min(self.scratch.len());
        let mask = !(self.frame_size - 1);
        let mut recycled = [0u64; 64];
        let mut done = 0;
        let mut got = 0;
        while done < n {
            let chunk = (n - done).min(recycled.len());
            for (i, slot) in recycled.iter_mut().enumerate().take(chunk) {
                let desc = self.rx.cons_desc((done + i) as u32);
                let len = desc.len as usize;
                *slot = desc.addr & mask;
                let fits = len <= self.pool.data_room() && desc.addr as usize + len <= self.area_len;
                if !fits {
                    self.stats.rx_oversize += 1;
                    continue;
                }
                // n <= scratch.len() and each descriptor takes at most one
                // buffer, so there always is one; without it the frame is
                // recycled like a dropped one.
                let Some(mut packet) = self.scratch.pop() else {
                    self.stats.rx_pool_empty += 1;
                    continue;
                };
                // The length fits the buffer (checked above).
                let _ = packet.set_len(len);
                // SAFETY: inside the UMEM (checked above); the kernel wrote
                // this frame before publishing the descriptor and does not
                // touch it until we give the frame back through the fill ring.
                let data = unsafe { std::slice::from_raw_parts(self.area.add(desc.addr as usize), len) };
                packet.copy_from_slice(data);
                self.stats.rx_bytes += len as u64;
                batch.push(packet);
                got += 1;
            }
            self.rx.release(chunk as u32);
            let frames = recycled;
            self.refill(&frames[..chunk]);
            done += chunk;
        }
        self.stats.rx_packets += got as u64;
        got
    }

    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        if queue != 0 || batch.is_empty() {
            return 0;
        }
        self.reclaim();
        let room = self.tx.prod_free(batch.len().min(self.tx_frames.len()) as u32);
        let frame_size = self.frame_size as usize;
        let mut written = 0u32;
        let mut freed = BulkFree::new();
        let mut bytes = 0u64;
        let mut invalid = 0u64;
        let taken = batch.consume_front_while(batch.len(), |packet| {
            let len = packet.total_len();
            if len == 0 || len > frame_size {
                invalid += 1;
                freed.push(packet);
                return Ok(());
            }
            if written == room {
                return Err(packet);
            }
            let Some(addr) = self.tx_frames.pop() else {
                return Err(packet);
            };
            let frame = self.frame(addr, len);
            let mut at = 0;
            for segment in packet.segments() {
                frame[at..at + segment.len()].copy_from_slice(segment);
                at += segment.len();
            }
            *self.tx.prod_desc(written) = libc::xdp_desc {
                addr,
                len: len as u32,
                options: 0,
            };
            written += 1;
            bytes += len as u64;
            freed.push(packet);
            Ok(())
        });
        freed.flush();
        self.tx.submit(written);
        if written > 0 && self.tx.needs_wakeup() {
            self.kick_tx();
        }
        self.stats.tx_packets += written as u64;
        self.stats.tx_bytes += bytes;
        self.stats.tx_copied += written as u64;
        self.stats.tx_invalid += invalid;
        self.stats.tx_ring_full += batch.len() as u64;
        taken
    }

    fn stats(&mut self) -> DeviceStats {
        let mut s = self.stats;
        // SAFETY: all-zero is a valid xdp_statistics.
        let mut k: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: fd is our socket; k/len are valid out-parameters
        // (af_xdp.rst, "XDP_STATISTICS getsockopt").
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut k as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            // rx_dropped: no room / other drops; rx_ring_full: the RX ring
            // was full (we did not read fast enough).
            s.kernel_rx_dropped = k.rx_dropped + k.rx_ring_full;
            s.kernel_invalid_descs = k.rx_invalid_descs + k.tx_invalid_descs;
        }
        s
    }

    fn link(&self) -> Link {
        crate::netif::link(&self.interface)
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn set_promisc(&mut self, on: bool) -> Result<()> {
        let flag = libc::IFF_PROMISC as u32;
        if on {
            crate::netif::change_flags(&self.interface, flag, 0)
        } else {
            crate::netif::change_flags(&self.interface, 0, flag)?;
            self.promisc_set_by_us = false;
            Ok(())
        }
    }

    /// `xdp_zero_copy`: 1 if the kernel bound the socket in zero-copy
    /// mode (XDP_OPTIONS), for `oxnet stats`.
    fn feature_registers(&self) -> Vec<(String, u32)> {
        vec![("xdp_zero_copy".into(), self.zero_copy as u32)]
    }

    fn features(&self) -> Features {
        Features::default()
    }

    fn mempool(&self, _queue: u16) -> Mempool {
        self.pool.clone()
    }

    fn queues(&self) -> (u16, u16) {
        (1, 1)
    }

    fn drain_tx(&mut self, timeout: std::time::Duration) -> usize {
        let start = std::time::Instant::now();
        loop {
            self.reclaim();
            // A frame not on the free stack is in the TX ring or waiting in
            // the completion ring: the kernel has not finished with it.
            let outstanding = self.tx_frames_in_flight();
            if outstanding == 0 || start.elapsed() >= timeout {
                return outstanding;
            }
            if self.tx.needs_wakeup() {
                self.kick_tx();
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

impl AfXdp {
    fn tx_frames_in_flight(&self) -> usize {
        // TX frames = comp ring size; those not on the free stack are with
        // the kernel (in the TX ring or waiting in the completion ring).
        (self.comp.size() as usize).saturating_sub(self.tx_frames.len())
    }
}

impl Drop for AfXdp {
    fn drop(&mut self) {
        if !self.xsk.is_null() {
            // Give the kernel a bounded time to send what we posted.
            let timeout = std::time::Duration::from_millis(200);
            let left = self.drain_tx(timeout);
            self.stats.tx_not_sent += left as u64;
            // SAFETY: our live socket, deleted once. libxdp removes the
            // socket from the xsks_map and detaches the program when no
            // socket uses it any more (stale.rs checks that too).
            unsafe { (self.lib.socket_delete)(self.xsk) };
            self.xsk = std::ptr::null_mut();
        }
        if !self.umem.is_null() {
            // SAFETY: our UMEM, no socket uses it any more.
            unsafe { (self.lib.umem_delete)(self.umem) };
            self.umem = std::ptr::null_mut();
        }
        libxdp::take_messages();
        if let Some(claim) = self._claim.take() {
            claim.release(self.lib, &self.interface);
        }
        // SAFETY: our mapping; the kernel unregistered the UMEM above.
        unsafe { libc::munmap(self.area as *mut libc::c_void, self.area_len) };
        if self.promisc_set_by_us {
            let _ = crate::netif::change_flags(&self.interface, 0, libc::IFF_PROMISC as u32);
        }
    }
}
