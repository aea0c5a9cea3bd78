//! The kernel's AF_PACKET ring formats and option numbers, as written in
//! `include/uapi/linux/if_packet.h` (Linux 6.x) and described in
//! packet(7) and `Documentation/networking/packet_mmap.rst`.
//!
//! Only what the driver uses. The ring headers are read and written
//! through byte offsets (checked below against the C layout) rather than
//! through references, because the kernel writes the same memory
//! concurrently: every access is a raw volatile or atomic access.

/// `SOL_PACKET` (linux/socket.h).
pub const SOL_PACKET: libc::c_int = 263;
/// `ETH_P_ALL` (linux/if_ether.h): every protocol.
pub const ETH_P_ALL: u16 = 0x0003;

// setsockopt(SOL_PACKET, ...) option names (if_packet.h).
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
pub const PACKET_DROP_MEMBERSHIP: libc::c_int = 2;
pub const PACKET_RX_RING: libc::c_int = 5;
pub const PACKET_STATISTICS: libc::c_int = 6;
pub const PACKET_VERSION: libc::c_int = 10;
pub const PACKET_TX_RING: libc::c_int = 13;
pub const PACKET_LOSS: libc::c_int = 14;
pub const PACKET_FANOUT: libc::c_int = 18;
pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// `enum tpacket_versions`: TPACKET_V3 = 2.
pub const TPACKET_V3: libc::c_int = 2;

/// `PACKET_MR_PROMISC` (packet_mreq.mr_type).
pub const PACKET_MR_PROMISC: u16 = 1;

/// Fanout mode: by the packet's flow hash (packet(7) PACKET_FANOUT).
pub const PACKET_FANOUT_HASH: u32 = 0;
/// Fanout flag: the kernel picks an unused group id (Linux 4.18+); the
/// flag is dropped once the group exists, so others join without it.
pub const PACKET_FANOUT_FLAG_UNIQUEID: u32 = 0x2000;

/// `sockaddr_ll.sll_pkttype` of a frame this host sends (linux/if_packet.h).
pub const PACKET_OUTGOING: u8 = 4;

// Frame and block status bits (if_packet.h, "Rx ring - header status"
// and "Tx ring - header status").
/// Receive: the block (V3) belongs to user space. Transmit: the frame
/// is a request to send (TP_STATUS_SEND_REQUEST has the same value).
pub const TP_STATUS_USER: u32 = 1;
/// Transmit: the frame is free for user space (TP_STATUS_AVAILABLE = 0;
/// receive: TP_STATUS_KERNEL = 0, the block belongs to the kernel).
pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_SEND_REQUEST: u32 = 1;
/// Receive: the frame was cut to fit (snaplen < len).
pub const TP_STATUS_COPY: u32 = 1 << 1;
/// Receive: the checksum is not filled in yet (a packet from this host,
/// CHECKSUM_PARTIAL).
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// Receive: `tp_vlan_tci` is valid (the tag was taken out of the frame).
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// Receive: `tp_vlan_tpid` is valid.
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// Receive: the kernel or the NIC verified the checksum.
pub const TP_STATUS_CSUM_VALID: u32 = 1 << 7;

/// `struct tpacket_req3` (setsockopt PACKET_RX_RING / PACKET_TX_RING with
/// TPACKET_V3).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketReq3 {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
    /// Milliseconds after which the kernel hands over a block that is not
    /// full (receive only; 0 = the kernel's default of 8 ms or more).
    pub tp_retire_blk_tov: u32,
    pub tp_sizeof_priv: u32,
    pub tp_feature_req_word: u32,
}

/// `struct tpacket_stats_v3` (getsockopt PACKET_STATISTICS; reading clears it).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketStatsV3 {
    pub tp_packets: u32,
    pub tp_drops: u32,
    pub tp_freeze_q_cnt: u32,
}

/// `struct packet_mreq` (PACKET_ADD_MEMBERSHIP).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PacketMreq {
    pub mr_ifindex: libc::c_int,
    pub mr_type: u16,
    pub mr_alen: u16,
    pub mr_address: [u8; 8],
}

/// `struct tpacket_block_desc` (V3 receive block header): offsets of the
/// fields of its `struct tpacket_hdr_v1` (the 8 bytes of `version` and
/// `offset_to_priv` come first).
pub mod block {
    /// `block_status`: TP_STATUS_KERNEL or TP_STATUS_USER.
    pub const STATUS: usize = 8;
    /// `num_pkts`: packets in the block.
    pub const NUM_PKTS: usize = 12;
    /// `offset_to_first_pkt`, from the block's start.
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
}

/// `struct tpacket3_hdr` (48 bytes, one per packet in a V3 block and one
/// per frame of a V3 transmit ring), then `struct sockaddr_ll` at
/// TPACKET_ALIGN(48) = 48.
pub mod frame {
    /// `tp_next_offset`: the next packet of the block, from this header
    /// (transmit: must be 0, fixed-size frames).
    pub const NEXT_OFFSET: usize = 0;
    /// `tp_snaplen`: bytes of the frame in the ring.
    pub const SNAPLEN: usize = 12;
    /// `tp_len`: bytes of the frame on the wire (transmit: bytes to send).
    pub const LEN: usize = 16;
    /// `tp_status`.
    pub const STATUS: usize = 20;
    /// `tp_mac` (u16): where the frame starts, from this header.
    pub const MAC: usize = 24;
    /// `hv1.tp_rxhash`: the kernel's flow hash.
    pub const RXHASH: usize = 28;
    /// `hv1.tp_vlan_tci`.
    pub const VLAN_TCI: usize = 32;
    /// `hv1.tp_vlan_tpid` (u16).
    pub const VLAN_TPID: usize = 36;
    /// Size of `struct tpacket3_hdr`.
    #[allow(dead_code)] // checked against libc in the tests
    pub const HEADER_SIZE: usize = 48;
    /// `sockaddr_ll.sll_pkttype` (u8): sockaddr_ll starts at 48, pkttype
    /// is its byte 10.
    pub const PKTTYPE: usize = 48 + 10;
    /// Transmit: the frame's data starts at tp_hdrlen - sizeof(sockaddr_ll)
    /// = TPACKET3_HDRLEN (48 + 20) - 20 = 48 (net/packet/af_packet.c,
    /// tpacket_parse_header, without PACKET_TX_HAS_OFF).
    pub const TX_DATA: usize = 48;
}

/// The C layouts, checked with the libc crate's own copies of the structs.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_kernel_headers() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<TpacketReq3>(), size_of::<libc::tpacket_req3>());
        assert_eq!(size_of::<TpacketStatsV3>(), 12);
        assert_eq!(size_of::<PacketMreq>(), size_of::<libc::packet_mreq>());
        assert_eq!(size_of::<libc::tpacket3_hdr>(), frame::HEADER_SIZE);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_next_offset), frame::NEXT_OFFSET);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_snaplen), frame::SNAPLEN);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_len), frame::LEN);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_status), frame::STATUS);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_mac), frame::MAC);
        assert_eq!(offset_of!(libc::tpacket3_hdr, hv1), frame::RXHASH);
        assert_eq!(offset_of!(libc::sockaddr_ll, sll_pkttype), frame::PKTTYPE - 48);
        assert_eq!(libc::PACKET_FANOUT_HASH, PACKET_FANOUT_HASH);
        assert_eq!(libc::PACKET_QDISC_BYPASS, PACKET_QDISC_BYPASS);
        assert_eq!(libc::PACKET_IGNORE_OUTGOING, PACKET_IGNORE_OUTGOING);
        assert_eq!(libc::TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_VALID);
        assert_eq!(libc::TP_STATUS_CSUM_VALID, TP_STATUS_CSUM_VALID);
        assert_eq!(libc::PACKET_OUTGOING, PACKET_OUTGOING);
    }
}
