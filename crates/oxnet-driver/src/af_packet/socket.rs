//! One AF_PACKET socket with its two rings mapped: the set-up steps of
//! `Documentation/networking/packet_mmap.rst` ("How to use mmap() to
//! improve transmission/reception") and packet(7), each a system call
//! made once at open, never on the data path.

use super::abi::{self, PacketMreq, TpacketReq3, TpacketStatsV3};
use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// Sizes of the two rings of one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per receive block (a multiple of the page size).
    pub rx_block_size: u32,
    /// Receive blocks.
    pub rx_block_nr: u32,
    /// Largest frame the receive ring takes (header included).
    pub rx_frame_size: u32,
    /// Transmit frames (fixed size, `tx_frame_size` each).
    pub tx_frame_nr: u32,
    /// Bytes per transmit frame (header included).
    pub tx_frame_size: u32,
    /// Milliseconds before the kernel hands over a receive block that is
    /// not full.
    pub retire_ms: u32,
}

/// Bytes of a transmit block: 64 KiB, 32 frames of 2 KiB (the kernel
/// wants whole frames per block and a block of whole pages).
const TX_BLOCK_SIZE: u32 = 64 * 1024;

impl Geometry {
    /// The rings for `rx_ring_size` / `tx_ring_size` frames of at most
    /// `max_frame` bytes (Ethernet header, VLAN tag and payload):
    ///
    /// * frames of 2 KiB (the next power of two that holds the 48-byte
    ///   `tpacket3_hdr`, its `sockaddr_ll`, alignment and `max_frame`;
    ///   4 KiB and up for jumbo MTUs);
    /// * receive: blocks of 64 KiB, as many as hold `rx_ring_size` frames
    ///   of that size (at least 8); a V3 block packs frames back to back,
    ///   so it holds about 450 minimum-size frames, not 32: the ring
    ///   absorbs bursts many times `rx_ring_size` long;
    /// * receive block timeout 1 ms, the smallest the kernel takes (the
    ///   field is in milliseconds; 0 means its default, 8 ms at 1 Gbit/s
    ///   and above, computed in prb_calc_retire_blk_tmo): a block that is
    ///   not full reaches us at most 1 ms after its first frame;
    /// * transmit: `tx_ring_size` frames of the same size.
    pub fn for_config(rx_ring_size: usize, tx_ring_size: usize, max_frame: usize) -> Geometry {
        let frame_size = (max_frame + 128).next_power_of_two().max(2048) as u32;
        let block_size = TX_BLOCK_SIZE.max(frame_size);
        let rx_block_nr = ((rx_ring_size as u64 * frame_size as u64) / block_size as u64).max(8) as u32;
        Geometry {
            rx_block_size: block_size,
            rx_block_nr,
            rx_frame_size: frame_size,
            tx_frame_nr: (tx_ring_size as u32).max(block_size / frame_size),
            tx_frame_size: frame_size,
            retire_ms: 1,
        }
    }

    fn rx_bytes(&self) -> usize {
        self.rx_block_size as usize * self.rx_block_nr as usize
    }

    fn tx_bytes(&self) -> usize {
        self.tx_frame_size as usize * self.tx_frame_nr as usize
    }
}

/// An AF_PACKET socket bound to one interface, its receive ring (V3
/// blocks) and transmit ring (V3 fixed frames) mapped into this process:
/// the receive ring first, the transmit ring right after it (packet_mmap.rst,
/// "Mapping and use of the circular buffer (ring)").
pub struct PacketSocket {
    fd: OwnedFd,
    map: NonNull<u8>,
    map_len: usize,
    pub geometry: Geometry,
    /// The interface index it is bound to.
    pub ifindex: i32,
    /// PACKET_QDISC_BYPASS was accepted.
    pub qdisc_bypass: bool,
}

// SAFETY: the socket and its mapping are owned by this value; the rings
// are shared with the kernel only, which synchronises through the status
// words (atomics, see rx.rs and tx.rs).
unsafe impl Send for PacketSocket {}
// SAFETY: the methods that take &self make system calls on the descriptor
// (safe from several threads) and hand out the ring addresses; the rings
// themselves are read and written only through RxRing and TxRing, each
// owned by one thread.
unsafe impl Sync for PacketSocket {}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> std::io::Result<()> {
    // SAFETY: value points to a T of size_of::<T>() bytes that lives for
    // the call; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            abi::SOL_PACKET,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T: Default>(fd: &OwnedFd, name: libc::c_int) -> std::io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value is a writable T of `len` bytes; the kernel writes at
    // most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            abi::SOL_PACKET,
            name,
            &mut value as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

impl PacketSocket {
    /// The socket's descriptor: it polls readable when a receive block is
    /// retired to user space (packet_poll, TP_STATUS_USER).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Opens a socket on interface `ifindex` (called `name`, for
    /// messages) with rings of `geometry`, bound to every protocol.
    pub fn open(spec: &str, name: &str, ifindex: u32, geometry: Geometry) -> Result<PacketSocket> {
        // packet(7): protocol 0 receives nothing until bind() names one,
        // so the ring stays empty while it is being set up.
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let err = std::io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission(format!(
                    "{spec}: opening an AF_PACKET socket needs CAP_NET_RAW ({err}): run oxnet as root, \
                     or give the binary the capabilities with `setcap cap_net_raw,cap_net_admin+ep $(which oxnet)`"
                )),
                Some(libc::EAFNOSUPPORT) => Error::Device(format!(
                    "{spec}: this kernel has no AF_PACKET sockets ({err}): load the af_packet module"
                )),
                _ => Error::Io(format!("{spec}: socket(AF_PACKET): {err}")),
            });
        }
        // SAFETY: raw is a new descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let fail = |what: &str, err: std::io::Error| Error::Io(format!("{spec}: {what}: {err}"));

        setsockopt(&fd, abi::PACKET_VERSION, &abi::TPACKET_V3)
            .map_err(|e| fail("TPACKET_V3 (Linux 3.2+, transmit ring with V3 Linux 4.11+)", e))?;
        // Transmit straight to the driver's queue, past the qdisc layer
        // (packet(7) PACKET_QDISC_BYPASS, Linux 3.14+). Optional: without
        // it frames take the qdisc path, which is slower but correct.
        let qdisc_bypass = setsockopt(&fd, abi::PACKET_QDISC_BYPASS, &1i32).is_ok();
        // A transmit frame the kernel rejects is skipped (marked free)
        // instead of stopping the ring (packet_mmap.rst, PACKET_LOSS).
        setsockopt(&fd, abi::PACKET_LOSS, &1i32).map_err(|e| fail("PACKET_LOSS", e))?;
        // Frames other sockets of this host send on the interface are not
        // received (Linux 4.20+); the receive path also skips them by
        // sll_pkttype where this option is missing.
        let _ = setsockopt(&fd, abi::PACKET_IGNORE_OUTGOING, &1i32);

        let rx_req = TpacketReq3 {
            tp_block_size: geometry.rx_block_size,
            tp_block_nr: geometry.rx_block_nr,
            tp_frame_size: geometry.rx_frame_size,
            tp_frame_nr: geometry.rx_block_nr * (geometry.rx_block_size / geometry.rx_frame_size),
            tp_retire_blk_tov: geometry.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, abi::PACKET_RX_RING, &rx_req).map_err(|e| fail("PACKET_RX_RING", e))?;
        // The transmit ring in V3 has fixed-size frames; the receive-only
        // fields must be 0 (af_packet.c packet_set_ring).
        let tx_per_block = TX_BLOCK_SIZE.max(geometry.tx_frame_size) / geometry.tx_frame_size;
        let tx_req = TpacketReq3 {
            tp_block_size: TX_BLOCK_SIZE.max(geometry.tx_frame_size),
            tp_block_nr: geometry.tx_frame_nr / tx_per_block,
            tp_frame_size: geometry.tx_frame_size,
            tp_frame_nr: geometry.tx_frame_nr,
            ..TpacketReq3::default()
        };
        setsockopt(&fd, abi::PACKET_TX_RING, &tx_req)
            .map_err(|e| fail("PACKET_TX_RING (TPACKET_V3 transmit needs Linux 4.11+)", e))?;

        let map_len = geometry.rx_bytes() + geometry.tx_bytes();
        // SAFETY: a new shared mapping of the socket's rings; the kernel
        // checks the length against the rings it made.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(fail("mapping the rings", std::io::Error::last_os_error()));
        }
        let socket = PacketSocket {
            fd,
            // SAFETY: mmap succeeded, so map is not null.
            map: unsafe { NonNull::new_unchecked(map as *mut u8) },
            map_len,
            geometry,
            ifindex: ifindex as i32,
            qdisc_bypass,
        };

        // SAFETY: sockaddr_ll is plain old data; zero is valid.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = abi::ETH_P_ALL.to_be();
        address.sll_ifindex = ifindex as i32;
        // SAFETY: address is a valid sockaddr_ll for the call.
        let rc = unsafe {
            libc::bind(
                socket.fd.as_raw_fd(),
                &address as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(fail(&format!("binding to {name}"), std::io::Error::last_os_error()));
        }
        Ok(socket)
    }

    /// Start of the receive ring.
    pub fn rx_ring(&self) -> NonNull<u8> {
        self.map
    }

    /// Start of the transmit ring.
    pub fn tx_ring(&self) -> NonNull<u8> {
        // SAFETY: the transmit ring starts right after the receive ring,
        // inside the mapping.
        unsafe { NonNull::new_unchecked(self.map.as_ptr().add(self.geometry.rx_bytes())) }
    }

    /// Creates a fanout group (PACKET_FANOUT_HASH, a group id the kernel
    /// picks) and returns its id.
    pub fn create_fanout(&self, spec: &str) -> Result<u16> {
        let arg = (abi::PACKET_FANOUT_HASH | abi::PACKET_FANOUT_FLAG_UNIQUEID) << 16;
        setsockopt(&self.fd, abi::PACKET_FANOUT, &arg)
            .map_err(|e| Error::Io(format!("{spec}: PACKET_FANOUT (several queues need Linux 4.18+): {e}")))?;
        let value: u32 = getsockopt(&self.fd, abi::PACKET_FANOUT)
            .map_err(|e| Error::Io(format!("{spec}: reading the fanout group id: {e}")))?;
        Ok(value as u16)
    }

    /// Joins fanout group `id` (hash mode).
    pub fn join_fanout(&self, spec: &str, id: u16) -> Result<()> {
        let arg = (abi::PACKET_FANOUT_HASH << 16) | id as u32;
        setsockopt(&self.fd, abi::PACKET_FANOUT, &arg)
            .map_err(|e| Error::Io(format!("{spec}: joining fanout group {id}: {e}")))
    }

    /// Adds (`on`) or drops promiscuous membership (packet(7)
    /// PACKET_ADD_MEMBERSHIP with PACKET_MR_PROMISC). The kernel counts
    /// memberships and drops this socket's when it is closed, so the
    /// interface's IFF_PROMISC is left as found.
    pub fn set_promisc(&self, spec: &str, on: bool) -> Result<()> {
        let request = PacketMreq {
            mr_ifindex: self.ifindex,
            mr_type: abi::PACKET_MR_PROMISC,
            ..PacketMreq::default()
        };
        let name = if on {
            abi::PACKET_ADD_MEMBERSHIP
        } else {
            abi::PACKET_DROP_MEMBERSHIP
        };
        setsockopt(&self.fd, name, &request).map_err(|e| {
            Error::Io(format!(
                "{spec}: promiscuous mode {}: {e}",
                if on { "on" } else { "off" }
            ))
        })
    }

    /// Frames the kernel dropped since the last call because the receive
    /// ring was full (PACKET_STATISTICS tp_drops; reading resets it).
    pub fn take_drops(&self) -> u64 {
        getsockopt::<TpacketStatsV3>(&self.fd, abi::PACKET_STATISTICS)
            .map(|s| s.tp_drops as u64)
            .unwrap_or(0)
    }

    /// Asks the kernel to send every frame marked TP_STATUS_SEND_REQUEST,
    /// without waiting (packet_mmap.rst: "send(fd, NULL, 0, MSG_DONTWAIT)"
    /// ... the one system call per transmit batch). Errors are transient
    /// (ENOBUFS: the interface's queue is full; the frames stay marked and
    /// go with the next kick) or say the interface went down.
    pub fn kick(&self) -> std::io::Result<()> {
        // SAFETY: no buffer: the frames are in the mapped ring.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in open with this length and is not
        // used after this (the rings are owned by this value).
        unsafe { libc::munmap(self.map.as_ptr() as *mut libc::c_void, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_for_the_default_rings() {
        let g = Geometry::for_config(512, 512, 1518);
        assert_eq!(g.rx_frame_size, 2048);
        assert_eq!(g.rx_block_size, 65536);
        assert_eq!(g.rx_block_nr, 16);
        assert_eq!(g.tx_frame_nr, 512);
        assert_eq!(g.retire_ms, 1);
        // Smallest rings: at least 8 receive blocks, whole transmit blocks.
        let g = Geometry::for_config(64, 64, 1518);
        assert_eq!(g.rx_block_nr, 8);
        assert_eq!(g.tx_frame_nr % (65536 / 2048), 0);
        // Jumbo frames get bigger frames.
        assert_eq!(Geometry::for_config(512, 512, 9018).rx_frame_size, 16384);
    }
}
