//! Advanced receive and transmit descriptors, and the receive and transmit
//! queues built on them, shared by the 82599 (ixgbe) and the 82576 (igb):
//! both use the same 16-byte formats.
//!
//! 82599 datasheet §7.1.6 (advanced receive descriptors) and §7.2.3.2.4
//! (advanced transmit data descriptor); 82576 datasheet §7.1.5 and §7.2.2.3.
//! Descriptors are little-endian; we read and write them as volatile u64 /
//! u32 because the NIC writes them concurrently.
//!
//! Read it top-down: a driver's `rx_batch` / `tx_batch` call
//! `RxQueue::rx_batch` and `TxQueue::tx_batch` (`rx.rs` and `tx.rs`),
//! which read and write descriptors through [`DescriptorPtr`] (this file).
//! What differs between the two NICs on the data path is data, one [`Nic`]
//! impl per driver. Each driver keeps its own initialisation: it allocates
//! a queue here and programs the queue's registers itself (`ixgbe/rx.rs`,
//! `igb/rx.rs`, ...).

mod rx;
pub mod stop;
mod tx;

pub use rx::{checksum_flags, RxQueue};
pub use stop::QUEUE_STOP_TIMEOUT;
pub use tx::{TxQueue, TX_CLEAN_BATCH};

use crate::device::{DeviceStats, QueueStats};
use crate::offload::TsoLimits;
use std::ptr;

/// Size of one advanced descriptor in bytes.
pub const DESCRIPTOR_SIZE: usize = 16;

// Receive write-back format, §7.1.6.2: dword 2 is the extended status
// (bits 19:0) and extended error (31:20); dword 3 is the packet length
// (15:0) and VLAN tag (31:16).
/// Descriptor done: the NIC has written this descriptor back.
pub const RX_STATUS_DD: u32 = 1 << 0;
/// End of packet: last descriptor of a frame.
pub const RX_STATUS_EOP: u32 = 1 << 1;

// Transmit data descriptor, §7.2.3.2.4: dword 2 holds DTALEN (15:0),
// DTYP (23:20) and DCMD (31:24); dword 3 holds STA (3:0) and PAYLEN (31:14).
/// DTYP = 0011b: advanced data descriptor.
pub const TX_DTYP_DATA: u32 = 0b0011 << 20;
/// DCMD.EOP: end of packet.
pub const TX_DCMD_EOP: u32 = 1 << 24;
/// DCMD.IFCS: insert the Ethernet FCS (CRC).
pub const TX_DCMD_IFCS: u32 = 1 << 25;
/// DCMD.RS: report status — write DD back when done.
pub const TX_DCMD_RS: u32 = 1 << 27;
/// DCMD.DEXT: descriptor extension (advanced format).
pub const TX_DCMD_DEXT: u32 = 1 << 29;
/// STA.DD in the write-back (bit 0 of dword 3).
pub const TX_STATUS_DD: u32 = 1 << 0;
/// PAYLEN starts at bit 14 of dword 3.
pub const TX_PAYLEN_SHIFT: u32 = 14;

// Offload fields (additive; the 82576 uses the same layout).
/// RX status: UDP checksum computed (UDPCS), L4 checksum computed (L4CS),
/// IPv4 header checksum computed (IPCS) (§7.1.6.2).
pub const RX_STATUS_UDPCS: u32 = 1 << 4;
/// See [`RX_STATUS_UDPCS`].
pub const RX_STATUS_L4CS: u32 = 1 << 5;
/// See [`RX_STATUS_UDPCS`].
pub const RX_STATUS_IPCS: u32 = 1 << 6;
/// RX extended error: TCP/UDP checksum error (TCPE), IPv4 checksum error (IPE).
pub const RX_ERROR_TCPE: u32 = 1 << 30;
/// See [`RX_ERROR_TCPE`].
pub const RX_ERROR_IPE: u32 = 1 << 31;
/// 82576 RX extended errors (82576 datasheet §7.1.5.2; Linux igb's
/// E1000_RXDEXT_STATERR_*): L4E, the TCP/UDP checksum error, is bit 29 and
/// IPE bit 30 — one bit lower than the 82599's TCPE/IPE. The status bits
/// (IPCS, L4CS, UDPCS) are the same as the 82599's.
pub const RX_ERROR_82576_L4E: u32 = 1 << 29;
/// See [`RX_ERROR_82576_L4E`].
pub const RX_ERROR_82576_IPE: u32 = 1 << 30;
/// RX status bits 19:4 of a non-EOP RSC descriptor: NEXTP, the index of the
/// next descriptor of the same coalesced packet (§7.1.6.2).
pub const RX_NEXTP_MASK: u32 = 0xFFFF << 4;
/// NEXTP shift.
pub const RX_NEXTP_SHIFT: u32 = 4;
/// RX dword 0 bits 20:17: RSCCNT, packets coalesced in this descriptor.
pub const RX_RSCCNT_MASK: u32 = 0xF << 17;
/// RSCCNT shift.
pub const RX_RSCCNT_SHIFT: u32 = 17;
/// RX dword 0 bits 3:0: RSS type (0: not hashed).
pub const RX_RSS_TYPE_MASK: u32 = 0xF;

/// DTYP = 0010b: advanced context descriptor (§7.2.3.2.3).
pub const TX_DTYP_CONTEXT: u32 = 0b0010 << 20;
/// DCMD.TSE: TCP segmentation.
pub const TX_DCMD_TSE: u32 = 1 << 31;
/// POPTS.IXSM (dword 3 bit 8): insert the IPv4 header checksum.
pub const TX_POPTS_IXSM: u32 = 1 << 8;
/// POPTS.TXSM (dword 3 bit 9): insert the TCP/UDP checksum.
pub const TX_POPTS_TXSM: u32 = 1 << 9;
/// Context TUCMD.IPV4 (dword 2 bit 10).
pub const TX_TUCMD_IPV4: u32 = 1 << 10;
/// Context TUCMD.L4T (bits 12:11): 00b UDP, 01b TCP.
pub const TX_TUCMD_L4T_TCP: u32 = 1 << 11;
/// Context dword 0: MACLEN at bit 9 (IPLEN in bits 8:0).
pub const TX_MACLEN_SHIFT: u32 = 9;
/// Context dword 3: L4LEN at bit 8, MSS at bit 16 (IDX at bit 4).
pub const TX_L4LEN_SHIFT: u32 = 8;
/// See [`TX_L4LEN_SHIFT`].
pub const TX_MSS_SHIFT: u32 = 16;

/// A pointer to one descriptor in a ring in DMA memory.
#[derive(Clone, Copy)]
pub struct DescriptorPtr(*mut u8);

impl DescriptorPtr {
    /// # Safety
    /// `ptr` must point to 16 bytes of live DMA memory, aligned to 16.
    #[inline]
    pub unsafe fn new(ptr: *mut u8) -> DescriptorPtr {
        DescriptorPtr(ptr)
    }

    #[inline]
    fn dword(self, i: usize) -> *mut u32 {
        // SAFETY (for callers): i < 4 keeps us inside the descriptor.
        unsafe { (self.0 as *mut u32).add(i) }
    }

    #[inline]
    fn qword(self, i: usize) -> *mut u64 {
        // SAFETY: i < 2 keeps us inside the descriptor.
        unsafe { (self.0 as *mut u64).add(i) }
    }

    /// Hands a receive buffer to the NIC (read format, §7.1.6.1): packet
    /// buffer address, header buffer address 0 (no header split). Writing
    /// the second quadword also clears DD of the previous write-back.
    #[inline]
    pub fn rx_arm(self, buffer_iova: u64) {
        // SAFETY: the descriptor is ours until RDT hands it to the NIC.
        unsafe {
            ptr::write_volatile(self.qword(0), buffer_iova.to_le());
            ptr::write_volatile(self.qword(1), 0);
        }
    }

    /// Extended status of a receive write-back.
    #[inline]
    pub fn rx_status(self) -> u32 {
        // SAFETY: aligned read inside the descriptor; the NIC may write it.
        u32::from_le(unsafe { ptr::read_volatile(self.dword(2)) })
    }

    /// Packet length (PKT_LEN) of a receive write-back.
    #[inline]
    pub fn rx_length(self) -> u16 {
        // SAFETY: as above; only meaningful after DD was seen (acquire barrier).
        (u32::from_le(unsafe { ptr::read_volatile(self.dword(3)) }) & 0xFFFF) as u16
    }

    /// RSS hash of a receive write-back (dword 1).
    #[inline]
    pub fn rx_rss_hash(self) -> u32 {
        // SAFETY: as above.
        u32::from_le(unsafe { ptr::read_volatile(self.dword(1)) })
    }

    /// Writes a transmit data descriptor for one single-buffer packet.
    #[inline]
    pub fn tx_data(self, buffer_iova: u64, len: u16, cmd: u32) {
        let dword2 = TX_DTYP_DATA | TX_DCMD_DEXT | cmd | len as u32;
        let dword3 = (len as u32) << TX_PAYLEN_SHIFT;
        // SAFETY: the descriptor is ours until TDT hands it to the NIC.
        unsafe {
            ptr::write_volatile(self.qword(0), buffer_iova.to_le());
            ptr::write_volatile(self.qword(1), ((dword2 as u64) | ((dword3 as u64) << 32)).to_le());
        }
    }

    /// Dword 0 of a receive write-back: packet type, RSS type, RSCCNT.
    #[inline]
    pub fn rx_lower(self) -> u32 {
        // SAFETY: as rx_status.
        u32::from_le(unsafe { ptr::read_volatile(self.dword(0)) })
    }

    /// Writes an advanced transmit context descriptor (§7.2.3.2.3): dword 0
    /// VLAN/MACLEN/IPLEN, dword 1 reserved (0), dword 2 TUCMD with DTYP =
    /// context and DEXT, dword 3 MSS/L4LEN/IDX.
    #[inline]
    pub fn tx_context(self, vlan_maclen_iplen: u32, tucmd: u32, mss_l4len_idx: u32) {
        let dword2 = TX_DTYP_CONTEXT | TX_DCMD_DEXT | tucmd;
        // SAFETY: the descriptor is ours until TDT hands it to the NIC.
        unsafe {
            ptr::write_volatile(self.qword(0), (vlan_maclen_iplen as u64).to_le());
            ptr::write_volatile(
                self.qword(1),
                ((dword2 as u64) | ((mss_l4len_idx as u64) << 32)).to_le(),
            );
        }
    }

    /// Writes a transmit data descriptor with offload options: `cmd` as in
    /// [`DescriptorPtr::tx_data`] (plus TSE), `paylen` the packet's whole
    /// length (TSO: its payload only) and `popts` the POPTS bits.
    #[inline]
    pub fn tx_data_offload(self, buffer_iova: u64, len: u16, cmd: u32, paylen: u32, popts: u32) {
        let dword2 = TX_DTYP_DATA | TX_DCMD_DEXT | cmd | len as u32;
        let dword3 = (paylen << TX_PAYLEN_SHIFT) | popts;
        // SAFETY: the descriptor is ours until TDT hands it to the NIC.
        unsafe {
            ptr::write_volatile(self.qword(0), buffer_iova.to_le());
            ptr::write_volatile(self.qword(1), ((dword2 as u64) | ((dword3 as u64) << 32)).to_le());
        }
    }

    /// STA of a transmit write-back (§7.2.3.2.4: DD in bit 0 of dword 3).
    #[inline]
    pub fn tx_status(self) -> u32 {
        // SAFETY: aligned read inside the descriptor; the NIC may write it.
        u32::from_le(unsafe { ptr::read_volatile(self.dword(3)) })
    }
}

/// What differs on the data path between the NICs that use advanced
/// descriptors: a zero-sized type per driver implements it (`Nic82599`,
/// `Nic82576`), and the queues are generic over it, so every constant
/// folds into the code (no dynamic dispatch, the same machine code as a
/// queue written for one NIC).
pub trait Nic {
    /// Receive descriptor tail register (RDT) of queue `queue`.
    fn rdt(queue: u32) -> u32;
    /// Transmit descriptor tail register (TDT) of queue `queue`.
    fn tdt(queue: u32) -> u32;
    /// Extended-error bit of a receive write-back: IPv4 header checksum
    /// error (82599: IPE, bit 31; 82576: IPE, bit 30).
    const RX_ERROR_IPE: u32;
    /// Extended-error bit of a receive write-back: TCP/UDP checksum error
    /// (82599: TCPE, bit 30; 82576: L4E, bit 29).
    const RX_ERROR_L4E: u32;
    /// Receive side coalescing (82599 §7.11): with it, the receive path
    /// with offloads on assembles a frame spread over several descriptors
    /// into one chained packet (following NEXTP). Without it (82576) such a
    /// frame is dropped, as on the fast path.
    const RSC: bool;
    /// Whether the fast receive path counts descriptors and packets in the
    /// queue's software counters. The ixgbe driver always has; the igb
    /// driver counts on its offload path only (kept, so that no number
    /// changes).
    const COUNT_FAST_RX: bool;
    /// TSO limits and the names in their messages.
    const TSO_LIMITS: TsoLimits;
}

/// Adds the queues' software counters (pool empty, ring full, refused
/// packets) to the device's hardware counters, for `Device::stats`.
pub fn add_queue_counters<N: Nic>(stats: &mut DeviceStats, rx_queues: &[RxQueue<N>], tx_queues: &[TxQueue<N>]) {
    for q in rx_queues {
        stats.rx_pool_empty += q.pool_empty_count();
    }
    for q in tx_queues {
        stats.tx_ring_full += q.ring_full_count();
        stats.tx_invalid += q.invalid_count();
        let t = q.software_stats();
        stats.tx_copied += t.tx_copied;
        stats.tx_copy_pool_empty += t.tx_copy_pool_empty;
    }
}

/// The software counters of every queue pair, for `Device::queue_stats`
/// (a driver adds its hardware per-queue counters, if it reads any).
pub fn software_queue_stats<N: Nic>(rx_queues: &[RxQueue<N>], tx_queues: &[TxQueue<N>]) -> Vec<QueueStats> {
    let n = rx_queues.len().max(tx_queues.len());
    (0..n)
        .map(|q| {
            let mut s = QueueStats::new(q as u16);
            if let Some(rx) = rx_queues.get(q) {
                let r = rx.software_stats();
                s.rx_descriptors = r.rx_descriptors;
                s.rx_packets = r.rx_packets;
                s.rx_bytes = r.rx_bytes;
            }
            if let Some(tx) = tx_queues.get(q) {
                let t = tx.software_stats();
                s.tx_descriptors = t.tx_descriptors;
                s.tx_packets = t.tx_packets;
                s.tx_bytes = t.tx_bytes;
                s.tx_context_descriptors = t.tx_context_descriptors;
                s.tx_software_fallback = t.tx_software_fallback;
                s.tx_copied = t.tx_copied;
                s.tx_copy_pool_empty = t.tx_copy_pool_empty;
                s.tx_descriptors_per_packet = t.tx_descriptors_per_packet;
            }
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(align(16))]
    struct Raw([u8; 16]);

    #[test]
    fn tx_data_descriptor_encoding() {
        let mut raw = Raw([0; 16]);
        let d = unsafe { DescriptorPtr::new(raw.0.as_mut_ptr()) };
        d.tx_data(0x1122_3344_5566_7788, 60, TX_DCMD_EOP | TX_DCMD_RS | TX_DCMD_IFCS);
        assert_eq!(&raw.0[0..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        let dword2 = u32::from_le_bytes(raw.0[8..12].try_into().unwrap());
        let dword3 = u32::from_le_bytes(raw.0[12..16].try_into().unwrap());
        assert_eq!(dword2 & 0xFFFF, 60, "DTALEN");
        assert_eq!((dword2 >> 20) & 0xF, 0b0011, "DTYP advanced data");
        assert_eq!(dword2 >> 24, 0b0010_1011, "DCMD = DEXT | RS | IFCS | EOP");
        assert_eq!(dword3 >> 14, 60, "PAYLEN");
        assert_eq!(d.tx_status() & TX_STATUS_DD, 0);
    }

    #[test]
    fn rx_read_format_and_write_back() {
        let mut raw = Raw([0xFF; 16]);
        let d = unsafe { DescriptorPtr::new(raw.0.as_mut_ptr()) };
        d.rx_arm(0xABCD_0000);
        assert_eq!(&raw.0[0..8], &0xABCD_0000u64.to_le_bytes());
        assert_eq!(&raw.0[8..16], &[0; 8], "header address 0 and DD cleared");
        assert_eq!(d.rx_status() & RX_STATUS_DD, 0);
        // A write-back as the NIC does it (§7.1.6.2).
        raw.0[4..8].copy_from_slice(&0xCAFEu32.to_le_bytes());
        raw.0[8..12].copy_from_slice(&(RX_STATUS_DD | RX_STATUS_EOP).to_le_bytes());
        raw.0[12..16].copy_from_slice(&((7u32 << 16) | 1514).to_le_bytes());
        assert_eq!(d.rx_status(), RX_STATUS_DD | RX_STATUS_EOP);
        assert_eq!(d.rx_length(), 1514);
        assert_eq!(d.rx_rss_hash(), 0xCAFE);
    }
}
