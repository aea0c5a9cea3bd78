//! The virtio-net packet header (`struct virtio_net_hdr`, VirtIO 1.0
//! §5.1.6): how a packet's transmit offload request ([`TxOffload`]) is told
//! to a device that checksums and segments, and how a received header's
//! checksum flags become the packet's checksum metadata.
//!
//! Shared by every user of this header: the virtio driver (in the head
//! room in front of each buffer) and a TAP device opened with
//! `IFF_VNET_HDR`, which reads and writes the same header in front of each
//! frame.
//!
//! Layout (§5.1.6, all fields little-endian for a legacy device on a
//! little-endian machine and for VERSION_1):
//!
//! | offset | field        |
//! |--------|--------------|
//! | 0      | flags (u8)   |
//! | 1      | gso_type (u8)|
//! | 2      | hdr_len      |
//! | 4      | gso_size     |
//! | 6      | csum_start   |
//! | 8      | csum_offset  |
//! | 10     | num_buffers (only with MRG_RXBUF or VERSION_1) |

use crate::error::{Error, Result};
use crate::offload::{self, IPPROTO_TCP, IPPROTO_UDP};
use crate::packet::{
    TxOffload, FLAG_CSUM_CHECKED, FLAG_IP_CSUM_BAD, FLAG_IP_CSUM_GOOD, FLAG_L4_CSUM_GOOD, TX_IP_CSUM, TX_TCP_CSUM,
    TX_TSO, TX_UDP_CSUM,
};

/// VIRTIO_NET_F_CSUM (bit 0, §5.1.3): the device completes partial
/// checksums (NEEDS_CSUM) of packets we send.
pub const F_CSUM: u64 = 1 << 0;
/// VIRTIO_NET_F_GUEST_CSUM (bit 1): we accept packets with partial
/// checksums, and the device may mark checksums it checked (DATA_VALID).
pub const F_GUEST_CSUM: u64 = 1 << 1;
/// VIRTIO_NET_F_HOST_TSO4 (bit 11): the device segments TCP/IPv4 packets
/// we send (gso_type TCPV4). Requires F_CSUM (§5.1.3.1).
pub const F_HOST_TSO4: u64 = 1 << 11;
/// VIRTIO_NET_F_HOST_TSO6 (bit 12): likewise for TCP/IPv6 (gso_type
/// TCPV6). Requires F_CSUM (§5.1.3.1).
pub const F_HOST_TSO6: u64 = 1 << 12;

/// VIRTIO_NET_HDR_F_NEEDS_CSUM (§5.1.6): the checksum from `csum_start`
/// to the end of the packet is to be put at `csum_start + csum_offset`.
pub const HDR_F_NEEDS_CSUM: u8 = 1;
/// VIRTIO_NET_HDR_F_DATA_VALID (§5.1.6, receive only, with GUEST_CSUM):
/// the device checked the packet's checksum and it is good.
pub const HDR_F_DATA_VALID: u8 = 2;
/// VIRTIO_NET_HDR_GSO_NONE (§5.1.6).
pub const GSO_NONE: u8 = 0;
/// VIRTIO_NET_HDR_GSO_TCPV4.
pub const GSO_TCPV4: u8 = 1;
/// VIRTIO_NET_HDR_GSO_UDP.
pub const GSO_UDP: u8 = 3;
/// VIRTIO_NET_HDR_GSO_TCPV6.
pub const GSO_TCPV6: u8 = 4;
/// VIRTIO_NET_HDR_GSO_ECN (flag in gso_type).
pub const GSO_ECN: u8 = 0x80;

/// Offset of the checksum field in a TCP header (RFC 793 §3.1).
const TCP_CHECKSUM_OFFSET: u16 = 16;
/// Offset of the checksum field in a UDP header (RFC 768).
const UDP_CHECKSUM_OFFSET: u16 = 6;

/// The first 10 bytes of a virtio-net header (num_buffers, when present,
/// is only written by the device on receive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetHeader {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

/// Bytes of [`NetHeader`] on the wire (without num_buffers).
pub const NET_HEADER_LEN: usize = 10;

impl NetHeader {
    /// Writes the header into `out` (at least 10 bytes; a following
    /// num_buffers field, if any, is set to 0).
    pub fn write(&self, out: &mut [u8]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        for b in out.iter_mut().skip(NET_HEADER_LEN) {
            *b = 0;
        }
    }

    /// Reads a header; `None` if `bytes` is shorter than 10.
    pub fn read(bytes: &[u8]) -> Option<NetHeader> {
        let b = bytes.get(..NET_HEADER_LEN)?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(NetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header for a transmit request, and the preparation of the frame
    /// it needs (§5.1.6.2): the IPv4 header checksum is computed here (the
    /// header has no field for it; a segmenting device rewrites it per
    /// segment; IPv6 has none, RFC 8200 §3, and TX_IP_CSUM on it is
    /// refused), and the TCP/UDP checksum field is set to the pseudo-header
    /// sum over the whole L4 length, as §5.1.6.2.1 requires with
    /// NEEDS_CSUM ("the driver MUST set the packet checksum stored in the
    /// buffer to the TCP/UDP pseudo header"). `head` is the first segment
    /// of the packet: the headers must lie in it; `total_len` is the whole
    /// packet's length.
    ///
    /// `request` must ask for nothing the device cannot do: with TX_TSO the
    /// device must have HOST_TSO4 (HOST_TSO6 for an IPv6 packet, gso_type
    /// TCPV6), with a checksum request F_CSUM. IPv4 or IPv6 is read from
    /// the version nibble at `l2_len`; an IPv6 header is 40 bytes (no
    /// extension headers: csum_start would lie behind them).
    pub fn for_request(head: &mut [u8], total_len: usize, request: &TxOffload) -> Result<NetHeader> {
        let (l2, l3, l4) = (
            request.l2_len as usize,
            request.l3_len as usize,
            request.l4_len as usize,
        );
        let tso = request.flags & TX_TSO != 0;
        let protocol = if tso || request.flags & TX_TCP_CSUM != 0 {
            Some(IPPROTO_TCP)
        } else if request.flags & TX_UDP_CSUM != 0 {
            Some(IPPROTO_UDP)
        } else {
            None
        };
        // The checksum field must lie in the first segment: l4 covers it
        // for TCP (>= 20) and UDP (8); checked before any write.
        let min_l4 = match protocol {
            Some(IPPROTO_TCP) => 20,
            Some(_) => 8,
            None => 0,
        };
        let ipv6 = offload::is_ipv6(head, l2);
        let min_l3 = if ipv6 { offload::IPV6_HEADER_LEN } else { 20 };
        if l3 < min_l3 || l4 < min_l4 || l2 + l3 + l4 > head.len() || head.len() > total_len {
            return Err(Error::Config(format!(
                "offload lengths {l2}+{l3}+{l4} do not fit the {}-byte first segment of a {total_len}-byte packet \
                 (IPv4 header of at least 20 bytes, IPv6 40, TCP 20, UDP 8)",
                head.len()
            )));
        }
        if tso && request.mss == 0 {
            return Err(Error::Config("TSO packet with MSS 0".into()));
        }
        if ipv6 && request.flags & TX_IP_CSUM != 0 {
            return Err(Error::Config(
                "IP header checksum requested for an IPv6 packet, which has none (RFC 8200 §3)".into(),
            ));
        }
        if !ipv6 && request.flags & (TX_IP_CSUM | TX_TSO) != 0 {
            offload::set_ipv4_checksum(&mut head[l2..l2 + l3]);
        }
        let Some(protocol) = protocol else {
            return Ok(NetHeader::default());
        };
        let csum_offset = if protocol == IPPROTO_TCP {
            TCP_CHECKSUM_OFFSET
        } else {
            UDP_CHECKSUM_OFFSET
        };
        let field = l2 + l3 + csum_offset as usize;
        let l4_length = total_len - l2 - l3;
        let pseudo = offload::pseudo_header_sum(head, l2, protocol, Some(l4_length));
        head[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
        let mut header = NetHeader {
            flags: HDR_F_NEEDS_CSUM,
            csum_start: (l2 + l3) as u16,
            csum_offset,
            ..NetHeader::default()
        };
        if tso {
            // §5.1.6.2: gso_type and gso_size (the MSS); hdr_len is the
            // length of the headers (Ethernet + IP + TCP), a hint the
            // device may use. NEEDS_CSUM is required with any gso_type.
            header.gso_type = if ipv6 { GSO_TCPV6 } else { GSO_TCPV4 };
            header.gso_size = request.mss;
            header.hdr_len = (l2 + l3 + l4) as u16;
        }
        Ok(header)
    }

    /// The checksum metadata flags for a received packet with this header
    /// (GUEST_CSUM negotiated), after [`complete_partial`] for NEEDS_CSUM:
    /// DATA_VALID means the device checked the L4 checksum (§5.1.6.4.1);
    /// NEEDS_CSUM means the sender left it for us to compute, and it has
    /// been computed. The IPv4 header checksum is not covered by either
    /// flag, so it is checked here in software. Without either flag, 0: the
    /// packet's checksums are checked in software later if asked.
    ///
    /// [`complete_partial`]: NetHeader::complete_partial
    pub fn rx_checksum_flags(&self, frame: &[u8]) -> u32 {
        if self.flags & (HDR_F_DATA_VALID | HDR_F_NEEDS_CSUM) == 0 {
            return 0;
        }
        let mut flags = FLAG_CSUM_CHECKED | FLAG_L4_CSUM_GOOD;
        // IPv6 has no header checksum (RFC 8200 §3): the L4 flag alone.
        if let Some(h) = offload::parse(frame).filter(|h| !h.ipv6) {
            let ip = &frame[h.l2_len..h.l2_len + h.l3_len];
            flags |= if offload::fold(offload::ones_sum(ip, 0)) == 0xFFFF {
                FLAG_IP_CSUM_GOOD
            } else {
                FLAG_IP_CSUM_BAD | crate::packet::FLAG_CSUM_BAD
            };
        }
        flags
    }

    /// For a received header with NEEDS_CSUM: computes the checksum from
    /// `csum_start` to the end of `frame` and stores it at `csum_start +
    /// csum_offset` (§5.1.6.4: the field holds the pseudo-header sum
    /// already). An error if the offsets point outside the frame: the
    /// header came from outside and is not trusted.
    pub fn complete_partial(&self, frame: &mut [u8]) -> Result<()> {
        if self.flags & HDR_F_NEEDS_CSUM == 0 {
            return Ok(());
        }
        let start = self.csum_start as usize;
        let field = start + self.csum_offset as usize;
        if field + 2 > frame.len() {
            return Err(Error::Device(format!(
                "virtio-net header: checksum at {start}+{} outside a {}-byte frame",
                self.csum_offset,
                frame.len()
            )));
        }
        let checksum = !offload::fold(offload::ones_sum(&frame[start..], 0));
        frame[field..field + 2].copy_from_slice(&checksum.to_be_bytes());
        Ok(())
    }
}

/// What a device can do with a packet's request, from the negotiated
/// features: `true` if the header can carry it, `false` if it must be done
/// in software. `ipv6`: the packet is IPv6 ([`offload::is_ipv6`]): TSO
/// needs HOST_TSO6, and an IP header checksum request is left to the
/// software path, which refuses it.
pub fn device_can(features: u64, request: &TxOffload, ipv6: bool) -> bool {
    let flags = request.flags;
    if ipv6 && flags & TX_IP_CSUM != 0 {
        return false;
    }
    if flags & TX_TSO != 0 {
        let tso = if ipv6 { F_HOST_TSO6 } else { F_HOST_TSO4 };
        return features & tso != 0 && features & F_CSUM != 0;
    }
    if flags & (TX_TCP_CSUM | TX_UDP_CSUM) != 0 {
        return features & F_CSUM != 0;
    }
    // Only the IPv4 header checksum (or nothing): always done here, in
    // for_request, as the header has no field for it.
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/TCP frame of `payload` bytes (no IP options, TCP
    /// header 20 bytes), checksums zero.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + payload];
        f[12] = 0x08; // EtherType IPv4 (RFC 894)
        f[14] = 0x45; // version 4, IHL 5 (RFC 791 §3.1)
        let total = (20 + 20 + payload) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[22] = 64; // TTL
        f[23] = 6; // TCP
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[46] = 0x50; // data offset 5 words
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn header_layout_is_the_specs() {
        // §5.1.6: flags, gso_type (u8 each), then hdr_len, gso_size,
        // csum_start, csum_offset as little-endian u16.
        let h = NetHeader {
            flags: 1,
            gso_type: 1,
            hdr_len: 0x0102,
            gso_size: 0x0304,
            csum_start: 0x0506,
            csum_offset: 0x0708,
        };
        let mut b = [0xEEu8; 12];
        h.write(&mut b);
        assert_eq!(b, [1, 1, 2, 1, 4, 3, 6, 5, 8, 7, 0, 0]);
        assert_eq!(NetHeader::read(&b), Some(h));
        assert_eq!(NetHeader::read(&b[..9]), None);
    }

    #[test]
    fn checksum_request_gives_needs_csum_at_the_tcp_checksum_field() {
        let mut f = tcp_frame(100);
        let len = f.len();
        let request = TxOffload {
            flags: TX_IP_CSUM | TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0,
        };
        let h = NetHeader::for_request(&mut f, len, &request).unwrap();
        // §5.1.6.2's example: TCP/IPv4 behind 14 bytes of Ethernet:
        // csum_start 14 + 20 = 34, csum_offset 16.
        assert_eq!((h.flags, h.gso_type, h.csum_start, h.csum_offset), (1, 0, 34, 16));
        // The IPv4 header checksum is complete: the header sums to 0xFFFF
        // (RFC 1071).
        assert_eq!(offload::fold(offload::ones_sum(&f[14..34], 0)), 0xFFFF);
        // Completing the partial checksum as the device does (the ones'
        // complement of the sum from csum_start on) gives a TCP checksum
        // that verifies with the pseudo-header (RFC 793 §3.1).
        let c = !offload::fold(offload::ones_sum(&f[34..], 0));
        f[50..52].copy_from_slice(&c.to_be_bytes());
        let pseudo = offload::ones_sum(&f[26..34], 6 + (len - 34) as u64);
        assert_eq!(offload::fold(offload::ones_sum(&f[34..], pseudo)), 0xFFFF);
    }

    #[test]
    fn tso_request_sets_gso_fields() {
        let mut f = tcp_frame(4000);
        let len = f.len();
        let request = TxOffload {
            flags: TX_TSO,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 1448,
        };
        let h = NetHeader::for_request(&mut f, len, &request).unwrap();
        // §5.1.6.2: NEEDS_CSUM with any gso_type; TCPV4 = 1; hdr_len the
        // header bytes 14 + 20 + 20.
        assert_eq!(
            h,
            NetHeader {
                flags: 1,
                gso_type: 1,
                hdr_len: 54,
                gso_size: 1448,
                csum_start: 34,
                csum_offset: 16
            }
        );
    }

    #[test]
    fn udp_checksum_offset_is_6_and_bad_lengths_are_refused() {
        let mut f = tcp_frame(10);
        f[23] = 17;
        let len = f.len();
        let mut request = TxOffload {
            flags: TX_UDP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 8,
            mss: 0,
        };
        let h = NetHeader::for_request(&mut f, len, &request).unwrap();
        assert_eq!((h.csum_start, h.csum_offset), (34, 6)); // RFC 768
        request.l4_len = 4; // the checksum field would lie past the header
        assert!(NetHeader::for_request(&mut f, len, &request).is_err());
        request.l4_len = 8;
        assert!(NetHeader::for_request(&mut f[..40], len, &request).is_err());
    }

    #[test]
    fn received_partial_checksum_is_completed_and_hostile_offsets_refused() {
        let mut f = tcp_frame(33);
        let len = f.len();
        let request = TxOffload {
            flags: TX_IP_CSUM | TX_TCP_CSUM,
            l2_len: 14,
            l3_len: 20,
            l4_len: 20,
            mss: 0,
        };
        let h = NetHeader::for_request(&mut f, len, &request).unwrap();
        h.complete_partial(&mut f).unwrap();
        // The frame now passes the software checker as a whole.
        assert_eq!(
            offload::checksum_verdict(&f) & (FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD),
            FLAG_IP_CSUM_GOOD | FLAG_L4_CSUM_GOOD
        );
        assert_eq!(
            h.rx_checksum_flags(&f),
            FLAG_CSUM_CHECKED | FLAG_L4_CSUM_GOOD | FLAG_IP_CSUM_GOOD
        );
        let hostile = NetHeader {
            flags: HDR_F_NEEDS_CSUM,
            csum_start: 0xFFF0,
            csum_offset: 0xFFFF,
            ..NetHeader::default()
        };
        assert!(hostile.complete_partial(&mut f).is_err());
        assert_eq!(NetHeader::default().rx_checksum_flags(&f), 0);
    }

    #[test]
    fn device_abilities_follow_the_features() {
        let csum = TxOffload {
            flags: TX_TCP_CSUM,
            ..TxOffload::default()
        };
        let tso = TxOffload {
            flags: TX_TSO,
            ..TxOffload::default()
        };
        assert!(!device_can(0, &csum, false));
        assert!(device_can(F_CSUM, &csum, false));
        assert!(!device_can(F_CSUM, &tso, false));
        assert!(device_can(F_CSUM | F_HOST_TSO4, &tso, false));
        // IPv6: TSO needs HOST_TSO6, not HOST_TSO4; checksums F_CSUM; an
        // IP header checksum never goes to the device.
        assert!(device_can(F_CSUM, &csum, true));
        assert!(!device_can(F_CSUM | F_HOST_TSO4, &tso, true));
        assert!(device_can(F_CSUM | F_HOST_TSO6, &tso, true));
        assert!(!device_can(F_CSUM | F_HOST_TSO6, &tso, false));
        let ip = TxOffload {
            flags: TX_IP_CSUM | TX_TCP_CSUM,
            ..TxOffload::default()
        };
        assert!(device_can(F_CSUM, &ip, false));
        assert!(!device_can(F_CSUM, &ip, true));
    }

    /// An Ethernet/IPv6/TCP frame (fd00::1 to fd00::2, RFC 8200 §3) of
    /// `payload` bytes, checksum zero.
    fn tcp6_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 20 + payload];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
        f[20] = 6;
        f[21] = 64;
        f[22] = 0xfd;
        f[37] = 1;
        f[38] = 0xfd;
        f[53] = 2;
        f[66] = 0x50;
        for (i, b) in f[74..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    /// TSO of an IPv6 packet (§5.1.6.2): gso_type TCPV6 (4), csum_start
    /// after the 40-byte header, hdr_len 74; the IPv6 header is not
    /// touched (no header checksum); the TCP field holds the RFC 8200
    /// §8.1 pseudo-header sum over the whole L4 length, summed here:
    /// fd00 + 0001 + fd00 + 0002 + length + 6.
    #[test]
    fn ipv6_tso_request_sets_tcpv6_and_leaves_the_ip_header() {
        let mut f = tcp6_frame(4000);
        let original = f.clone();
        let len = f.len();
        let request = TxOffload {
            flags: TX_TSO,
            l2_len: 14,
            l3_len: 40,
            l4_len: 20,
            mss: 1428,
        };
        let h = NetHeader::for_request(&mut f, len, &request).unwrap();
        assert_eq!(
            h,
            NetHeader {
                flags: 1,
                gso_type: 4,
                hdr_len: 74,
                gso_size: 1428,
                csum_start: 54,
                csum_offset: 16
            }
        );
        assert_eq!(f[..70], original[..70]);
        let seed = 0xfd00u32 + 1 + 0xfd00 + 2 + 4020 + 6;
        let seed = ((seed & 0xFFFF) + (seed >> 16)) as u16;
        assert_eq!(u16::from_be_bytes([f[70], f[71]]), seed);
        // Checksum alone: GSO none, the same offsets; TX_IP_CSUM refused.
        let csum = TxOffload {
            flags: TX_TCP_CSUM,
            mss: 0,
            ..request
        };
        let h = NetHeader::for_request(&mut f, len, &csum).unwrap();
        assert_eq!((h.flags, h.gso_type, h.csum_start, h.csum_offset), (1, 0, 54, 16));
        let with_ip = TxOffload {
            flags: TX_IP_CSUM | TX_TCP_CSUM,
            ..csum
        };
        assert!(NetHeader::for_request(&mut f, len, &with_ip).is_err());
        let short = TxOffload { l3_len: 20, ..csum };
        assert!(NetHeader::for_request(&mut f, len, &short).is_err());
        // The device's DATA_VALID verdict for IPv6: L4 only.
        let valid = NetHeader {
            flags: HDR_F_DATA_VALID,
            ..NetHeader::default()
        };
        assert_eq!(valid.rx_checksum_flags(&f), FLAG_CSUM_CHECKED | FLAG_L4_CSUM_GOOD);
    }
}
