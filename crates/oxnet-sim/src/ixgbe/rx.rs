//! Receive path (§7.1): wire → CRC check → address filter → packet buffer
//! → queue choice (RSS, §7.1.2.8) → descriptor ring in host memory, with
//! the checksum verdict (§7.1.6.2) and RSS hash in the write-back.
//!
//! A frame goes straight to host memory when queue 0 is enabled and has
//! enough free descriptors, and nothing is waiting in the packet buffer
//! before it (frames stay in order). Otherwise it waits in the packet
//! buffer, a FIFO of RXPBSIZE(0) bytes; a frame that does not fit is missed
//! (§8.2.3.23.4 MPC). Writing RDT (or enabling the queue) drains the FIFO.

use super::regs::*;
use super::{ordering, packet, rsc, Ixgbe};
use crate::world::WorldState;
use crate::{crc, dma};

/// Length of a frame without VLAN tag and without jumbo frames enabled,
/// destination address through CRC (§8.2.3.22.13).
const MAX_STANDARD_FRAME: usize = 1518;
/// Shortest legal frame, CRC included (IEEE 802.3 §4.4.2).
const MIN_FRAME: usize = 64;

/// Advanced receive descriptor, write-back format (§7.1.6.2).
const DESCRIPTOR_SIZE: usize = 16;
const STATUS_DD: u32 = 1 << 0;
const STATUS_EOP: u32 = 1 << 1;
const STATUS_UDPCS: u32 = 1 << 4;
/// RSC write-back fields (§7.1.6.2): NEXTP in status bits 19:4 of a
/// descriptor that is not the last, RSCCNT in dword 0 bits 20:17.
const NEXTP_SHIFT: u32 = 4;
const RSCCNT_SHIFT: u32 = 17;
const STATUS_L4CS: u32 = 1 << 5;
const STATUS_IPCS: u32 = 1 << 6;
const ERROR_TCPE: u32 = 1 << 30;
const ERROR_IPE: u32 = 1 << 31;
/// RSS types in write-back dword 0 bits 3:0 (§7.1.6.2).
const RSS_TYPE_TCP_IPV4: u32 = 0x1;
const RSS_TYPE_IPV4: u32 = 0x2;
const RSS_TYPE_UDP_IPV4: u32 = 0x7;
/// Packet type bits (dword 0 bits 16:4): IPv4, TCP, UDP.
const PACKET_TYPE_IPV4: u32 = 1 << 4;
const PACKET_TYPE_TCP: u32 = 1 << 8;
const PACKET_TYPE_UDP: u32 = 1 << 9;

/// Where a frame goes and what the write-back says about it.
struct Classified {
    queue: usize,
    rss_hash: u32,
    /// Dword 0: RSS type and packet type.
    lower: u32,
}

/// §7.1.2.8: with MRQC.MRQE = RSS, hash the enabled fields with RSSRK and
/// take the queue from RETA[hash & 0x7F]; otherwise queue 0.
fn classify(nic: &Ixgbe, frame: &[u8]) -> Classified {
    let parsed = packet::parse(frame);
    let mut lower = 0;
    if let Some(p) = &parsed {
        lower |= PACKET_TYPE_IPV4;
        if p.protocol == packet::TCP {
            lower |= PACKET_TYPE_TCP;
        } else if p.protocol == packet::UDP {
            lower |= PACKET_TYPE_UDP;
        }
    }
    let mrqc = nic.plain(MRQC);
    let Some(p) = parsed.filter(|_| mrqc & MRQC_MRQE_MASK == MRQC_MRQE_RSS) else {
        return Classified {
            queue: 0,
            rss_hash: 0,
            lower,
        };
    };
    let mut key = [0u8; 40];
    for n in 0..10 {
        key[4 * n..4 * n + 4].copy_from_slice(&nic.plain(RSSRK_BASE + 4 * n as u32).to_le_bytes());
    }
    let mut input = Vec::with_capacity(12);
    input.extend_from_slice(&frame[p.ip + 12..p.ip + 20]);
    let rss_type = match p.l4 {
        Some(l4) if p.protocol == packet::TCP && mrqc & MRQC_TCPIPV4 != 0 => {
            input.extend_from_slice(&frame[l4..l4 + 4]);
            RSS_TYPE_TCP_IPV4
        }
        Some(l4) if p.protocol == packet::UDP && mrqc & MRQC_UDPIPV4 != 0 => {
            input.extend_from_slice(&frame[l4..l4 + 4]);
            RSS_TYPE_UDP_IPV4
        }
        _ if mrqc & MRQC_IPV4 != 0 => RSS_TYPE_IPV4,
        _ => {
            return Classified {
                queue: 0,
                rss_hash: 0,
                lower,
            }
        }
    };
    let hash = packet::toeplitz(&key, &input);
    let index = (hash & 0x7F) as usize;
    let entry = (nic.plain(RETA_BASE + 4 * (index / 4) as u32) >> (8 * (index % 4))) & 0xF;
    Classified {
        queue: entry as usize,
        rss_hash: hash,
        lower: lower | rss_type,
    }
}

/// The statistics set queue `q` counts in (RQSMR/TQSM: 4 bits per queue).
pub(crate) fn statistics_set(nic: &Ixgbe, base: u32, q: usize) -> usize {
    ((nic.plain(base + 4 * (q / 4) as u32) >> (8 * (q % 4))) & 0xF) as usize
}

/// A frame (CRC included) arrives from the wire at `port`.
pub(crate) fn receive(state: &mut WorldState, port: usize, frame: &[u8]) {
    let nic = &mut state.ports[port].nic;
    if nic.in_reset() {
        return; // link down: nothing arrives
    }
    // §8.2.3.23.16 RUC, §8.2.3.23.18 ROC: runts and giants are dropped.
    let max = if nic.hlreg0 & HLREG0_JUMBOEN != 0 {
        (nic.maxfrs >> 16) as usize
    } else {
        MAX_STANDARD_FRAME
    };
    if frame.len() < MIN_FRAME {
        nic.stats.undersize += 1;
        return;
    }
    if frame.len() > max {
        nic.stats.oversize += 1;
        return;
    }
    // §8.2.3.23.1 CRCERRS. Counted before address filtering (a choice: the
    // model counts every bad frame that reaches the port).
    if !crc::fcs_is_good(frame) {
        nic.stats.crc_errors += 1;
        return;
    }
    if !accepts(nic, frame) {
        return; // filtered: dropped silently, not a missed packet
    }
    let q = classify(nic, frame).queue;
    match rsc::enabled(nic, q) {
        Ok(false) => deliver(state, port, frame, 0, true),
        Ok(true) => {
            // Counted on arrival: a segment may wait in a context.
            nic.stats.count_received(frame.len());
            let mut ready = Vec::new();
            rsc::offer(nic, q, &frame[..frame.len() - 4], &mut ready);
            deliver_coalesced(state, port, ready);
        }
        Err(message) => state.fault(port, message),
    }
}

/// End of a burst on the wire into `port`: RSC contexts close (see rsc.rs).
pub(crate) fn end_burst(state: &mut WorldState, port: usize) {
    let nic = &mut state.ports[port].nic;
    if nic.rsc.is_empty() {
        return;
    }
    let mut ready = Vec::new();
    rsc::close_all(nic, &mut ready);
    deliver_coalesced(state, port, ready);
}

/// Packets from RSC (no FCS), with their segment counts, to the ring.
fn deliver_coalesced(state: &mut WorldState, port: usize, ready: Vec<rsc::Ready>) {
    for (mut frame, segments) in ready {
        crc::append_fcs(&mut frame);
        deliver(state, port, &frame, segments, false);
    }
}

/// Straight to host memory if nothing waits in the packet buffer and the
/// ring has room, into the packet buffer otherwise (or missed when full).
/// `segments`: an RSC packet of that many segments; `count`: count it in
/// GPRC/GORC (RSC counts segments as they arrive).
fn deliver(state: &mut WorldState, port: usize, frame: &[u8], segments: u32, count: bool) {
    // With a DMA engine every frame waits in the packet buffer until the
    // engine moves it (engine.rs).
    let direct = !state.threaded;
    let nic = &mut state.ports[port].nic;
    if nic.rx_buffer.is_empty() && direct {
        match try_dma(nic, frame, segments, false) {
            Ok(true) => {
                if count {
                    nic.stats.count_received(frame.len());
                }
                return;
            }
            Ok(false) => {}
            Err(message) => {
                state.fault(port, message);
                return;
            }
        }
    }
    if nic.rx_buffer_bytes + frame.len() > nic.rx_buffer_capacity() {
        nic.stats.missed[0] += 1;
        return;
    }
    // GPRC counts a frame once it is in the packet buffer (§8.2.3.23.26).
    if count {
        nic.stats.count_received(frame.len());
    }
    nic.rx_buffer_bytes += frame.len();
    let mut stored = state.spare.pop().unwrap_or_default();
    stored.clear();
    stored.extend_from_slice(frame);
    state.ports[port].nic.rx_buffer.push_back((stored, segments));
    check_xoff(state, port);
}

/// §7.1.2.1 L2 filtering: promiscuous, an exact address match in RAL/RAH,
/// broadcast with BAM, multicast with MPE.
fn accepts(nic: &Ixgbe, frame: &[u8]) -> bool {
    let destination = &frame[..6];
    let multicast = destination[0] & 1 != 0;
    let broadcast = destination == [0xFF; 6];
    nic.fctrl & FCTRL_UPE != 0
        || (broadcast && nic.fctrl & FCTRL_BAM != 0)
        || (multicast && nic.fctrl & FCTRL_MPE != 0)
        || (0..RECEIVE_ADDRESSES).any(|n| {
            nic.rah[n] & RAH_AV != 0
                && destination[..4] == nic.ral[n].to_le_bytes()
                && destination[4..] == nic.rah[n].to_le_bytes()[..2]
        })
}

/// Moves waiting frames from the packet buffer into queue 0's ring, as far
/// as there are descriptors; then sends XON if that emptied the buffer enough.
/// With a DMA engine this does nothing: the engine drains (engine.rs).
pub(crate) fn drain(state: &mut WorldState, port: usize) {
    if !state.threaded {
        drain_some(state, port, usize::MAX, false);
    }
}

/// Moves up to `limit` frames from the packet buffer to host memory; with
/// `defer`, their status write-backs wait for [`complete`]. Returns how many.
pub(crate) fn drain_some(state: &mut WorldState, port: usize, limit: usize, defer: bool) -> usize {
    let mut moved = 0;
    while moved < limit {
        let nic = &mut state.ports[port].nic;
        let Some((frame, segments)) = nic.rx_buffer.pop_front() else {
            break;
        };
        let result = try_dma(nic, &frame, segments, defer);
        if let Ok(false) = result {
            nic.rx_buffer.push_front((frame, segments));
            break;
        }
        moved += 1;
        nic.rx_buffer_bytes -= frame.len();
        state.spare.push(frame);
        if let Err(message) = result {
            state.fault(port, message);
        }
    }
    check_xon(state, port);
    moved
}

/// Writes the deferred status dwords (DD last, §7.1.6.2) of queue `q`.
pub(crate) fn complete(nic: &mut Ixgbe, q: usize) -> Result<(), String> {
    let queue = &mut nic.rx[q];
    if queue.pending.is_empty() {
        return Ok(());
    }
    let pending = std::mem::take(&mut queue.pending);
    let ring = queue.ring();
    let size = ring.bytes as usize / DESCRIPTOR_SIZE;
    let base = dma::map(ring.base, ring.bytes as usize, "the RX descriptor ring")
        .map_err(|m| format!("RX queue {q}: write-back after the ring was freed: {m}"))?;
    for (slot, status) in pending {
        if slot >= size {
            return Err(format!("RX queue {q}: RDLEN changed under a pending write-back"));
        }
        // Counted before the driver can see DD (ordering.rs reads it lock-free).
        ordering::completed(&nic.barriers, &mut queue.handover, ring, slot);
        // SAFETY: slot < size: 16 mapped, aligned bytes; dword 2 is the status.
        unsafe { dma::publish_u32(base.add(slot * DESCRIPTOR_SIZE + 8), status) };
    }
    Ok(())
}

/// Writes `frame` into queue 0's ring. `Ok(false)`: the queue is disabled
/// or has too few free descriptors; `Err`: a configuration the model cannot
/// follow (the frame is dropped and the caller records a fault).
/// With `defer`, the status dwords (DD) are kept for [`complete`] instead
/// of written now.
fn try_dma(nic: &mut Ixgbe, frame: &[u8], segments: u32, defer: bool) -> Result<bool, String> {
    let class = classify(nic, frame);
    let q = class.queue;
    let queue = &nic.rx[q];
    if nic.rxctrl & RXCTRL_RXEN == 0 || queue.rxdctl & QUEUE_ENABLE == 0 {
        return Ok(false);
    }
    let ring_size = (queue.rdlen as usize) / DESCRIPTOR_SIZE;
    if queue.rdlen == 0 || !queue.rdlen.is_multiple_of(128) {
        return Err(format!(
            "RX queue {q}: RDLEN {} is not a non-zero multiple of 128 (§8.2.3.8.3)",
            queue.rdlen
        ));
    }
    let (head, tail) = (queue.rdh as usize, queue.rdt as usize);
    if head >= ring_size || tail >= ring_size {
        return Err(format!(
            "RX queue {q}: RDH {head} or RDT {tail} outside a ring of {ring_size}"
        ));
    }
    if queue.srrctl & SRRCTL_DESCTYPE_MASK != SRRCTL_DESCTYPE_ADV_ONE_BUFFER {
        return Err(format!(
            "RX queue {q}: SRRCTL.DESCTYPE {:#05b} not modelled, only 001b advanced one-buffer (§8.2.3.8.7)",
            queue.srrctl >> SRRCTL_DESCTYPE_SHIFT & 0b111
        ));
    }
    let buffer_size = (queue.srrctl & SRRCTL_BSIZEPACKET_MASK) as usize * 1024;
    if buffer_size == 0 {
        return Err(format!("RX queue {q}: SRRCTL.BSIZEPACKET is 0"));
    }
    // §8.2.3.22.8 / §8.2.3.8.8: the two CRC strip bits must agree.
    let strip = nic.hlreg0 & HLREG0_RXCRCSTRP != 0;
    if strip != (nic.rdrxctl & RDRXCTL_CRCSTRIP != 0) {
        return Err("RX: HLREG0.RXCRCSTRP and RDRXCTL.CRCSTRIP differ (they must be set alike)".into());
    }
    let data = if strip { &frame[..frame.len() - 4] } else { frame };
    let needed = data.len().div_ceil(buffer_size).max(1);
    let free = (tail + ring_size - head) % ring_size;
    if free < needed {
        return Ok(false);
    }
    let base = (u64::from(queue.rdbah) << 32) | u64::from(queue.rdbal);
    if !base.is_multiple_of(128) {
        return Err(format!(
            "RX queue {q}: ring base {base:#x} is not 128-byte aligned (§8.2.3.8.1)"
        ));
    }
    let ring = dma::map(base, ring_size * DESCRIPTOR_SIZE, "the RX descriptor ring")?;
    // Check every buffer address before writing anything.
    let descriptor = |i: usize| {
        // SAFETY: index < ring_size, the ring is mapped for ring_size descriptors.
        unsafe { ring.add(((head + i) % ring_size) * DESCRIPTOR_SIZE) }
    };
    for (i, chunk) in data.chunks(buffer_size).enumerate() {
        // SAFETY: descriptor(i) points at 16 mapped bytes.
        let address = unsafe { dma::read_u64(descriptor(i)) };
        dma::map(address, chunk.len(), "an RX packet buffer")?;
    }
    let chunks = data.chunks(buffer_size).count();
    // §7.1.6.2: checksum status (IPCS/L4CS/UDPCS) and errors (IPE/TCPE)
    // in the last descriptor; RSS hash in dword 1 when RXCSUM.PCSD is set.
    // An RSC packet: every segment's checksums were checked good before
    // it was coalesced (rsc.rs); its TCP checksum field is stale.
    let (ipcs, ipe, l4cs, tcpe, udp) = if segments > 0 {
        (true, false, true, false, false)
    } else {
        packet::verdict(data)
    };
    let mut checksum_status = 0;
    if ipcs {
        checksum_status |= STATUS_IPCS | if ipe { ERROR_IPE } else { 0 };
    }
    if l4cs {
        checksum_status |= STATUS_L4CS | if tcpe { ERROR_TCPE } else { 0 };
        if udp {
            checksum_status |= STATUS_UDPCS;
        }
    }
    let dword1 = if nic.plain(RXCSUM) & RXCSUM_PCSD != 0 {
        class.rss_hash
    } else {
        0
    };
    for (i, chunk) in data.chunks(buffer_size).enumerate() {
        let desc = descriptor(i);
        // SAFETY: desc is 16 mapped, 16-byte aligned bytes (the base is
        // 128-byte aligned); the buffer was mapped above for chunk.len().
        unsafe {
            let buffer = dma::map(dma::read_u64(desc), chunk.len(), "an RX packet buffer")?;
            dma::copy_to(buffer, chunk);
            // §7.1.6.2 write-back: packet and RSS type, RSS hash, PKT_LEN,
            // VLAN 0, and the status (DD, EOP, checksums) last.
            // RSC (§7.1.6.2): RSCCNT (dword 0 bits 20:17) in every
            // descriptor of the packet, NEXTP (bits 19:4 of the status) in
            // all but the last; the model's are consecutive.
            let rsccnt = if segments > 0 {
                (chunks.min(15) as u32) << RSCCNT_SHIFT
            } else {
                0
            };
            dma::write_u32(desc, class.lower | rsccnt);
            dma::write_u32(desc.add(4), dword1);
            dma::write_u32(desc.add(12), chunk.len() as u32);
            let status = if i + 1 == chunks {
                STATUS_EOP | checksum_status
            } else if segments > 0 {
                (((head + i + 1) % ring_size) as u32) << NEXTP_SHIFT
            } else {
                0
            };
            let slot = (head + i) % ring_size;
            if defer {
                nic.rx[q].pending.push((slot, STATUS_DD | status));
            } else {
                let ring = nic.rx[q].ring();
                ordering::completed(&nic.barriers, &mut nic.rx[q].handover, ring, slot);
                dma::publish_u32(desc.add(8), STATUS_DD | status);
            }
        }
    }
    let queue = &mut nic.rx[q];
    queue.rdh = ((head + needed) % ring_size) as u32;
    let set = statistics_set(nic, RQSMR_BASE, q);
    nic.stats.count_queue_received(set, data.len());
    Ok(true)
}

/// IEEE 802.3x: XOFF once the packet buffer fills to FCRTH(0) (§8.2.3.3.4),
/// if link flow control is on (FCCFG.TFCE = 01b, FCRTH.FCEN).
fn check_xoff(state: &mut WorldState, port: usize) {
    let nic = &mut state.ports[port].nic;
    let enabled = nic.fccfg & FCCFG_TFCE_MASK == FCCFG_TFCE_LINK && nic.fcrth[0] & FCRTH_FCEN != 0;
    let high = (nic.fcrth[0] & FC_THRESHOLD_MASK) as usize;
    if nic.xoff_sent || !enabled || nic.rx_buffer_bytes < high {
        return;
    }
    nic.xoff_sent = true;
    nic.stats.xoff_sent += 1;
    for sender in state.senders_to(port).into_iter().flatten() {
        let sender = &mut state.ports[sender].nic;
        if sender.mflcn & MFLCN_RFCE != 0 {
            sender.stats.xoff_received += 1;
        }
    }
}

/// XON once the buffer has drained below FCRTL(0) (§8.2.3.3.3). Without
/// FCRTL.XONE no XON frame is sent, but the partner's pause timer runs out,
/// which the model (no time) takes to happen at once: the same resumption,
/// just not counted in LXONTXC. An empty buffer always ends the pause.
fn check_xon(state: &mut WorldState, port: usize) {
    let nic = &mut state.ports[port].nic;
    let low = (nic.fcrtl[0] & FC_THRESHOLD_MASK) as usize;
    if !nic.xoff_sent || (nic.rx_buffer_bytes >= low && nic.rx_buffer_bytes > 0) {
        return;
    }
    nic.xoff_sent = false;
    let send_xon = nic.fcrtl[0] & FCRTL_XONE != 0;
    if send_xon {
        nic.stats.xon_sent += 1;
    }
    for sender in state.senders_to(port).into_iter().flatten() {
        if send_xon && state.ports[sender].nic.mflcn & MFLCN_RFCE != 0 {
            state.ports[sender].nic.stats.xon_received += 1;
        }
        super::tx::kick(state, sender);
    }
}
