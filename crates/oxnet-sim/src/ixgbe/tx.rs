//! Transmit path (§7.2): descriptors TDH..TDT → gathered packet → padding
//! and CRC (§7.2.5 / HLREG0) → the wire, at the moment TDT is written.
//!
//! Transmission stops (TDH stays) while the link partner has sent XOFF and
//! MFLCN.RFCE is set, and continues when it sends XON (§8.2.3.22.34).
//! Frames sent while the link is down are lost and not counted in GPTC
//! (GPTC counts packets "transmitted successfully", §8.2.3.23.32).

use super::regs::*;
use super::{link_up, ordering, packet, Ixgbe};
use crate::world::{put_on_wire, WorldState};
use crate::{crc, dma};

/// Advanced transmit descriptor (§7.2.3.2.4): 16 bytes, buffer address at
/// byte 0, DTALEN/DTYP/DCMD in dword 2, STA/PAYLEN in dword 3.
const DESCRIPTOR_SIZE: usize = 16;
const DTYP_DATA: u32 = 0b0011;
const DTYP_CONTEXT: u32 = 0b0010;
const DCMD_EOP: u32 = 1 << 24;
const DCMD_IFCS: u32 = 1 << 25;
const DCMD_RS: u32 = 1 << 27;
const DCMD_DEXT: u32 = 1 << 29;
const DCMD_TSE: u32 = 1 << 31;
const STA_DD: u32 = 1 << 0;
/// Shortest frame without CRC; TXPADEN pads up to it (§8.2.3.22.8).
const MIN_FRAME_WITHOUT_CRC: usize = 60;

/// Transmits whatever every queue of `port` has pending (nothing with a
/// DMA engine: the engine transmits, engine.rs).
pub(crate) fn kick(state: &mut WorldState, port: usize) {
    if state.threaded {
        return;
    }
    for queue in 0..QUEUES {
        transmit(state, port, queue);
    }
}

/// True if the receiver this port sends to has asked it to pause.
fn paused(state: &WorldState, port: usize) -> bool {
    let receiver = state.destination(port);
    state.ports[port].nic.mflcn & MFLCN_RFCE != 0 && state.ports[receiver].nic.xoff_sent
}

/// A packet taken from the ring.
struct Gathered {
    /// Descriptors it used, from TDH on.
    descriptors: usize,
    /// Insert the CRC (DCMD.IFCS of the EOP descriptor).
    insert_fcs: bool,
    /// Why the packet is dropped instead of sent, if it is.
    problem: Option<String>,
    /// A context descriptor alone: nothing to send.
    context_only: bool,
    /// DCMD.TSE of the data descriptors.
    tse: bool,
    /// POPTS (IXSM bit 8, TXSM bit 9) and PAYLEN of the first data descriptor.
    popts: u32,
    paylen: usize,
}

/// Sends packets from queue `q` until TDH reaches TDT, the queue stops, or
/// the link partner pauses us; then the burst has ended for the receiver
/// (its RSC contexts close, see rsc.rs). Nothing with a DMA engine.
pub(crate) fn transmit(state: &mut WorldState, port: usize, q: usize) {
    if state.threaded {
        return;
    }
    transmit_some(state, port, q, usize::MAX, false);
}

/// The next descriptor the engine fetches: TDH plus what it has fetched
/// and not yet written back.
fn next_fetch(queue: &super::TxQueue) -> u32 {
    let size = (queue.tdlen as usize / DESCRIPTOR_SIZE).max(1);
    ((queue.tdh as usize + queue.fetched) % size) as u32
}

/// True if queue `q` has descriptors the engine can send now.
pub(crate) fn can_send(state: &WorldState, port: usize, q: usize) -> bool {
    let nic = &state.ports[port].nic;
    let queue = &nic.tx[q];
    nic.dmatxctl & DMATXCTL_TE != 0
        && queue.txdctl & QUEUE_ENABLE != 0
        && next_fetch(queue) != queue.tdt
        && !paused(state, port)
}

/// Sends up to `limit` packets from queue `q`; with `defer` their
/// write-backs wait for [`complete`]. Returns how many packets it took.
pub(crate) fn transmit_some(state: &mut WorldState, port: usize, q: usize, limit: usize, defer: bool) -> usize {
    let taken = transmit_burst(state, port, q, limit, defer);
    let receiver = state.destination(port);
    super::rx::end_burst(state, receiver);
    taken
}

fn transmit_burst(state: &mut WorldState, port: usize, q: usize, limit: usize, defer: bool) -> usize {
    let mut taken = 0;
    while taken < limit {
        if !can_send(state, port, q) {
            return taken;
        }
        let packet = match gather(&mut state.ports[port].nic, q) {
            Ok(Some(packet)) => packet,
            Ok(None) => return taken, // no EOP before TDT yet: wait for the rest
            Err(message) => {
                state.fault(port, format!("TX queue {q}: {message}"));
                return taken;
            }
        };
        taken += 1;
        match &packet.problem {
            Some(problem) => state.fault(port, format!("TX queue {q}: {problem}")),
            None if packet.context_only => {}
            None => {
                if let Err(problem) = offload(state, port, q, &packet) {
                    state.fault(port, format!("TX queue {q}: {problem}"));
                }
            }
        }
        let queue = &mut state.ports[port].nic.tx[q];
        queue.fetched += packet.descriptors;
        queue.pending.push_back(packet.descriptors);
        if !defer {
            if let Err(problem) = complete(&mut state.ports[port].nic, q) {
                state.fault(port, format!("TX queue {q}: {problem}"));
            }
        }
    }
    taken
}

/// Writes back every packet of queue `q` sent but not yet written back,
/// in order (§7.2.3.5.1).
pub(crate) fn complete(nic: &mut Ixgbe, q: usize) -> Result<(), String> {
    while let Some(descriptors) = nic.tx[q].pending.pop_front() {
        nic.tx[q].fetched -= descriptors;
        write_back(nic, q, descriptors)?;
    }
    Ok(())
}

/// Reads descriptors from TDH up to the next EOP and copies their buffers
/// into `nic.tx_frame`. `Ok(None)`: TDT comes before EOP.
fn gather(nic: &mut Ixgbe, q: usize) -> Result<Option<Gathered>, String> {
    let queue = &nic.tx[q];
    if queue.tdlen == 0 || !queue.tdlen.is_multiple_of(128) {
        return Err(format!(
            "TDLEN {} is not a non-zero multiple of 128 (§8.2.3.9.7)",
            queue.tdlen
        ));
    }
    let ring_size = queue.tdlen as usize / DESCRIPTOR_SIZE;
    let (head, tail) = (queue.tdh as usize, queue.tdt as usize);
    if head >= ring_size || tail >= ring_size {
        return Err(format!("TDH {head} or TDT {tail} outside a ring of {ring_size}"));
    }
    let head = (head + queue.fetched) % ring_size;
    let base = (u64::from(queue.tdbah) << 32) | u64::from(queue.tdbal);
    if !base.is_multiple_of(128) {
        return Err(format!("ring base {base:#x} is not 128-byte aligned (§8.2.3.9.5)"));
    }
    let ring = dma::map(base, ring_size * DESCRIPTOR_SIZE, "the TX descriptor ring")?;
    nic.tx_frame.clear();
    let mut packet = Gathered {
        descriptors: 0,
        insert_fcs: false,
        problem: None,
        context_only: false,
        tse: false,
        popts: 0,
        paylen: 0,
    };
    let mut index = head;
    loop {
        if index == tail {
            return Ok(None);
        }
        // SAFETY: index < ring_size, and the ring is mapped for ring_size descriptors.
        let desc = unsafe { ring.add(index * DESCRIPTOR_SIZE) };
        // SAFETY: desc points at 16 mapped bytes.
        let (address, command) = unsafe { (dma::read_u64(desc), dma::read_u32(desc.add(8))) };
        packet.descriptors += 1;
        index = (index + 1) % ring_size;
        let dtyp = (command >> 20) & 0xF;
        let length = (command & 0xFFFF) as usize;
        if command & DCMD_DEXT == 0 {
            packet
                .problem
                .get_or_insert_with(|| "legacy descriptor (DEXT = 0) not modelled".into());
        } else if dtyp == DTYP_CONTEXT {
            // §7.2.3.2.3: a context descriptor stands alone (no EOP); it
            // sets the context for the packets that follow.
            // SAFETY: desc points at 16 mapped bytes.
            let (d0, d3) = unsafe { (dma::read_u32(desc), dma::read_u32(desc.add(12))) };
            nic.tx[q].context = [d0, command, d3];
            if packet.descriptors == 1 {
                packet.context_only = true;
                return Ok(Some(packet));
            }
            packet
                .problem
                .get_or_insert_with(|| "context descriptor inside a packet".into());
        } else if dtyp != DTYP_DATA {
            packet
                .problem
                .get_or_insert_with(|| format!("descriptor type {dtyp:#06b} not modelled"));
        } else if packet.problem.is_none() {
            if packet.descriptors == 1 {
                // §7.2.3.2.4: POPTS and PAYLEN count in the first data
                // descriptor; TSE must be set alike in all of them.
                // SAFETY: desc points at 16 mapped bytes.
                let d3 = unsafe { dma::read_u32(desc.add(12)) };
                packet.popts = d3 & (0x3F << 8);
                packet.paylen = (d3 >> 14) as usize;
                packet.tse = command & DCMD_TSE != 0;
            }
            match dma::map(address, length, "a TX packet buffer") {
                // SAFETY: map checked `length` bytes at `buffer`.
                Ok(buffer) => unsafe { dma::copy_from(buffer, length, &mut nic.tx_frame) },
                Err(message) => packet.problem = Some(message),
            }
        }
        if command & DCMD_EOP != 0 {
            packet.insert_fcs = command & DCMD_IFCS != 0;
            return Ok(Some(packet));
        }
    }
}

/// What the DMA engine does to a gathered packet before the MAC: TCP
/// segmentation (§7.2.4) or checksum insertion (§7.2.5), then send.
fn offload(state: &mut WorldState, port: usize, q: usize, packet: &Gathered) -> Result<(), String> {
    let nic = &mut state.ports[port].nic;
    let [d0, tucmd, d3] = nic.tx[q].context;
    let maclen = ((d0 >> 9) & 0x7F) as usize;
    let iplen = (d0 & 0x1FF) as usize;
    let l4_is_tcp = (tucmd >> 11) & 0b11 == 0b01;
    // TUCMD.IPV4 (bit 10, §7.2.3.2.3): clear for IPv6.
    let ipv4 = tucmd & TUCMD_IPV4 != 0;
    let ixsm = packet.popts & POPTS_IXSM != 0;
    let txsm = packet.popts & POPTS_TXSM != 0;
    if ixsm && !ipv4 {
        return Err("POPTS.IXSM with TUCMD.IPV4 clear: IPv6 has no header checksum (§7.2.5)".into());
    }
    let frame = std::mem::take(&mut nic.tx_frame);
    if packet.tse {
        let result = segment(state, port, q, &frame, maclen, iplen, d3, ipv4, packet);
        state.ports[port].nic.tx_frame = frame;
        return result;
    }
    let mut frame = frame;
    if ixsm || txsm {
        let min_iplen = if ipv4 { 20 } else { 40 };
        if maclen + iplen + 8 > frame.len() || iplen < min_iplen {
            state.ports[port].nic.tx_frame = frame;
            return Err(format!(
                "checksum context MACLEN {maclen} IPLEN {iplen} does not fit a {}-byte packet",
                packet_len(packet)
            ));
        }
        if ixsm {
            ip_checksum(&mut frame[maclen..maclen + iplen]);
        }
        if txsm {
            l4_checksum(&mut frame[maclen + iplen..], l4_is_tcp, 0);
        }
    }
    state.ports[port].nic.tx_frame = frame;
    send(state, port, q, packet.insert_fcs);
    Ok(())
}

fn packet_len(packet: &Gathered) -> usize {
    packet.paylen
}

const POPTS_IXSM: u32 = 1 << 8;
/// Context descriptor TUCMD.IPV4 (dword 2 bit 10, §7.2.3.2.3).
const TUCMD_IPV4: u32 = 1 << 10;
const POPTS_TXSM: u32 = 1 << 9;

/// §7.2.5: IXSM — the IPv4 header checksum, computed by the NIC.
fn ip_checksum(ip: &mut [u8]) {
    ip[10] = 0;
    ip[11] = 0;
    let checksum = !packet::fold(packet::sum(ip));
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
}

/// §7.2.5: TXSM — the one's-complement sum over the L4 packet from its
/// start to the end, *including* what the driver put in the checksum field
/// (the pseudo-header sum), plus `extra` (TSO: the segment's L4 length,
/// which the driver's seed leaves out, §7.2.4.7).
fn l4_checksum(l4: &mut [u8], tcp: bool, extra: usize) {
    let field = if tcp { 16 } else { 6 };
    let mut checksum = !packet::fold(packet::sum(l4) + extra as u64);
    if !tcp && checksum == 0 {
        checksum = 0xFFFF;
    }
    l4[field..field + 2].copy_from_slice(&checksum.to_be_bytes());
}

/// §7.2.4: TCP segmentation. The header (MACLEN + IPLEN + L4LEN bytes) is
/// repeated in front of every MSS bytes of payload; per segment the NIC
/// writes the IPv4 total length, identification (+1 each), header
/// checksum, TCP sequence number, the flags masked by DTXTCPFLGL/H (first,
/// middle, last segment, §8.2.3.9.12/13), and the TCP checksum. With
/// TUCMD.IPV4 clear (IPv6) the IP header gets its payload length alone
/// (RFC 8200 §3: no identification, no header checksum).
#[allow(clippy::too_many_arguments)]
fn segment(
    state: &mut WorldState,
    port: usize,
    q: usize,
    frame: &[u8],
    maclen: usize,
    iplen: usize,
    d3: u32,
    ipv4: bool,
    packet: &Gathered,
) -> Result<(), String> {
    let mss = (d3 >> 16) as usize;
    let l4len = ((d3 >> 8) & 0xFF) as usize;
    let header = maclen + iplen + l4len;
    let min_iplen = if ipv4 { 20 } else { 40 };
    if mss == 0 || l4len < 20 || iplen < min_iplen || header > frame.len() {
        return Err(format!(
            "TSO context MSS {mss} L4LEN {l4len} HDR {header} on a {}-byte packet",
            frame.len()
        ));
    }
    let payload = &frame[header..];
    if payload.len() != packet.paylen {
        return Err(format!(
            "TSO PAYLEN {} differs from the {} payload bytes in the data descriptors (§7.2.3.2.4)",
            packet.paylen,
            payload.len()
        ));
    }
    let nic = &state.ports[port].nic;
    let low = nic.plain(DTXTCPFLGL);
    let masks = (low & 0xFFF, (low >> 16) & 0xFFF, nic.plain(DTXTCPFLGH) & 0xFFF);
    let chunks = payload.len().div_ceil(mss).max(1);
    let ip_id = u16::from_be_bytes([frame[maclen + 4], frame[maclen + 5]]);
    let tcp = maclen + iplen;
    let seq = u32::from_be_bytes([frame[tcp + 4], frame[tcp + 5], frame[tcp + 6], frame[tcp + 7]]);
    let flags_word = u16::from_be_bytes([frame[tcp + 12], frame[tcp + 13]]);
    for k in 0..chunks {
        let chunk = &payload[(k * mss).min(payload.len())..((k + 1) * mss).min(payload.len())];
        let mut segment = Vec::with_capacity(header + chunk.len() + 4);
        segment.extend_from_slice(&frame[..header]);
        segment.extend_from_slice(chunk);
        let mask = if k + 1 == chunks {
            masks.2
        } else if k == 0 {
            masks.0
        } else {
            masks.1
        } as u16;
        if ipv4 {
            segment[maclen + 2..maclen + 4].copy_from_slice(&((iplen + l4len + chunk.len()) as u16).to_be_bytes());
            segment[maclen + 4..maclen + 6].copy_from_slice(&ip_id.wrapping_add(k as u16).to_be_bytes());
        } else {
            // The payload length counts what follows the 40-byte header.
            let payload_length = (iplen - 40 + l4len + chunk.len()) as u16;
            segment[maclen + 4..maclen + 6].copy_from_slice(&payload_length.to_be_bytes());
        }
        segment[tcp + 4..tcp + 8].copy_from_slice(&seq.wrapping_add((k * mss) as u32).to_be_bytes());
        segment[tcp + 12..tcp + 14].copy_from_slice(&((flags_word & 0xF000) | (flags_word & mask)).to_be_bytes());
        if ipv4 {
            ip_checksum(&mut segment[maclen..tcp]);
        }
        let l4_length = l4len + chunk.len();
        l4_checksum(&mut segment[tcp..], true, l4_length);
        state.ports[port].nic.tx_frame = segment;
        send(state, port, q, packet.insert_fcs);
    }
    Ok(())
}

/// The MAC's part: pad, append the CRC, count, put it on the wire.
fn send(state: &mut WorldState, port: usize, q: usize, insert_fcs: bool) {
    let nic = &mut state.ports[port].nic;
    let mut frame = std::mem::take(&mut nic.tx_frame);
    if nic.hlreg0 & HLREG0_TXPADEN != 0 && frame.len() < MIN_FRAME_WITHOUT_CRC {
        frame.resize(MIN_FRAME_WITHOUT_CRC, 0);
    }
    if insert_fcs && nic.hlreg0 & HLREG0_TXCRCEN != 0 {
        crc::append_fcs(&mut frame);
    }
    if link_up(state, port) {
        // §8.2.3.23.32-33: GOTC counts destination address through CRC.
        let nic = &mut state.ports[port].nic;
        nic.stats.count_sent(frame.len());
        let set = super::rx::statistics_set(nic, TQSM_BASE, q);
        nic.stats.count_queue_sent(set, frame.len());
        put_on_wire(state, port, &frame);
    }
    state.ports[port].nic.tx_frame = frame;
}

/// §7.2.3.5.1: DD in every descriptor of the packet that has RS, then TDH
/// moves past the packet. With head write-back (TDWBAL.Head_WB_En,
/// §7.2.3.5.2) the NIC writes no DD bits; it writes TDH to host memory
/// instead, after a descriptor with RS.
fn write_back(nic: &mut Ixgbe, q: usize, descriptors: usize) -> Result<(), String> {
    let queue = &mut nic.tx[q];
    let ring = queue.ring();
    let ring_size = ring.bytes as usize / DESCRIPTOR_SIZE;
    if ring_size == 0 {
        return Err("TDLEN changed under a pending write-back".into());
    }
    let head = queue.tdh as usize;
    for i in 0..descriptors {
        ordering::completed(&nic.barriers, &mut queue.handover, ring, (head + i) % ring_size);
    }
    if queue.tdwbal & TDWBAL_HEAD_WB_EN != 0 {
        queue.tdh = ((head + descriptors) % ring_size) as u32;
        let address = (u64::from(queue.tdwbah) << 32) | u64::from(queue.tdwbal & !0x3);
        let target = dma::map(address, 4, "the TX head write-back address")?;
        // SAFETY: mapped for 4 bytes just above, 4-byte aligned (bits 1:0 are 0).
        unsafe { dma::publish_u32(target, queue.tdh) };
        return Ok(());
    }
    // Mapped again: with a DMA engine the driver may have freed the ring
    // since the packet was fetched (a fault, not a write into freed memory).
    let base = dma::map(ring.base, ring.bytes as usize, "the TX descriptor ring")?;
    for i in 0..descriptors {
        // SAFETY: the index is < ring_size and the ring is mapped for
        // ring_size descriptors until the enclosing dma::hold ends.
        unsafe {
            let desc = base.add(((head + i) % ring_size) * DESCRIPTOR_SIZE);
            if dma::read_u32(desc.add(8)) & DCMD_RS != 0 {
                let status = dma::read_u32(desc.add(12));
                dma::publish_u32(desc.add(12), status | STA_DD);
            }
        }
    }
    queue.tdh = ((head + descriptors) % ring_size) as u32;
    Ok(())
}
