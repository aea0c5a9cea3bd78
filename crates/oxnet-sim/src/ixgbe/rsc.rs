//! Receive side coalescing (§7.11): in-order TCP/IPv4 segments of one flow
//! become one large packet, written to the ring as a chain of descriptors
//! (NEXTP, RSCCNT in the write-back, §7.1.6.2).
//!
//! What the model does, and where it simplifies:
//! * RSC is on for queue q when RSCCTL(q).RSCEN is set and RFCTL.RSC_DIS is
//!   clear (§8.2.3.8.13, §8.2.3.7.6); the driver must also have set
//!   RDRXCTL.RSCACKC and FCOE_WRFIX and cleared RSCFRSTSIZE (§8.2.3.8.8),
//!   and strip the CRC — otherwise a fault;
//! * a segment is coalesced if it is TCP/IPv4 without IP options, not a
//!   fragment, with a payload, no TCP flag other than ACK and PSH, and good
//!   IP and TCP checksums (§7.11.3 lists what ends or prevents coalescing);
//! * a context (one per flow, at most [`MAX_CONTEXTS`], §7.11.1) closes when
//!   an out-of-order or ineligible segment of its flow arrives, when the
//!   next segment would not fit MAXDESC buffers (or 64 KB), and — the
//!   model's stand-in for the ITR timer that closes contexts on hardware
//!   (§7.11.4: "the RSC is completed ... when the interrupt throttling
//!   timer expires") — at the end of each burst: after the sender's
//!   transmit loop has put everything up to its TDT on the wire, and after
//!   every `World::inject` (`World::inject_burst` keeps them open over a
//!   whole slice of frames);
//! * the hardware writes each segment into buffers as it arrives; the model
//!   keeps the coalesced packet until the context closes and then writes it
//!   into consecutive descriptors, so NEXTP always names the next one;
//! * the coalesced packet has the first segment's headers with the IPv4
//!   total length and header checksum updated, the latest ACK number and
//!   window, PSH if any segment had it; its TCP checksum is not updated
//!   (each segment's was checked: the write-back reports L4CS good).

use super::packet::{self, TCP};
use super::regs::*;
use super::Ixgbe;

/// Concurrent coalescing contexts of the 82599 (§7.11.1: 32 RSC contexts).
pub(crate) const MAX_CONTEXTS: usize = 32;

/// RSCCTL.MAXDESC (bits 3:2): 1, 4, 8 or 16 descriptors per RSC.
fn max_descriptors(rscctl: u32) -> usize {
    [1, 4, 8, 16][((rscctl >> 2) & 0b11) as usize]
}

/// One open coalescing context.
pub(crate) struct Context {
    queue: usize,
    /// Source and destination address and port (frame bytes 26..38).
    flow: [u8; 12],
    next_sequence: u32,
    /// The coalesced packet so far, without FCS.
    frame: Vec<u8>,
    segments: u32,
    max_bytes: usize,
}

/// A packet ready for the ring: without FCS, and the number of segments
/// coalesced into it (0: not an RSC packet).
pub(crate) type Ready = (Vec<u8>, u32);

/// Whether RSC is on for queue `q`; `Err`: on but configured in a way the
/// datasheet forbids.
pub(crate) fn enabled(nic: &Ixgbe, q: usize) -> Result<bool, String> {
    if nic.plain(RFCTL) & RFCTL_RSC_DIS != 0 || nic.rx[q].rscctl & RSCCTL_RSCEN == 0 {
        return Ok(false);
    }
    let rdrxctl = nic.rdrxctl();
    if rdrxctl & (RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX) != RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX
        || rdrxctl & RDRXCTL_RSCFRSTSIZE != 0
    {
        return Err(format!(
            "RX queue {q}: RSC on but RDRXCTL {rdrxctl:#010x} lacks RSCACKC/FCOE_WRFIX or has RSCFRSTSIZE set (§8.2.3.8.8)"
        ));
    }
    if nic.hlreg0 & HLREG0_RXCRCSTRP == 0 {
        return Err(format!(
            "RX queue {q}: RSC needs CRC stripping (HLREG0.RXCRCSTRP, §7.11)"
        ));
    }
    Ok(true)
}

/// Offers a frame (without FCS) that goes to queue `q` with RSC on; returns
/// what must be written to the ring now, in order.
pub(crate) fn offer(nic: &mut Ixgbe, q: usize, frame: &[u8], out: &mut Vec<Ready>) {
    let Some((flow, sequence, payload_at)) = eligible(frame) else {
        // An ineligible segment of an open flow closes its context first.
        if let Some(flow) = flow_of(frame) {
            close_where(nic, out, |c| c.queue == q && c.flow == flow);
        }
        out.push((frame.to_vec(), 0));
        return;
    };
    let buffer_size = ((nic.rx[q].srrctl & SRRCTL_BSIZEPACKET_MASK) as usize * 1024).max(1024);
    let max_bytes = (max_descriptors(nic.rx[q].rscctl) * buffer_size).min(14 + 0xFFFF);
    if let Some(k) = nic.rsc.iter().position(|c| c.queue == q && c.flow == flow) {
        let context = &mut nic.rsc[k];
        let payload = &frame[payload_at..];
        if sequence == context.next_sequence && context.frame.len() + payload.len() <= context.max_bytes {
            context.frame.extend_from_slice(payload);
            context.next_sequence = sequence.wrapping_add(payload.len() as u32);
            context.segments += 1;
            // Latest ACK number and window; PSH from any segment.
            context.frame[42..46].copy_from_slice(&frame[42..46]);
            context.frame[48..50].copy_from_slice(&frame[48..50]);
            context.frame[47] |= frame[47] & 0x08;
            return;
        }
        let context = nic.rsc.remove(k);
        out.push(finish(context));
    }
    if nic.rsc.len() == MAX_CONTEXTS {
        let oldest = nic.rsc.remove(0);
        out.push(finish(oldest));
    }
    nic.rsc.push(Context {
        queue: q,
        flow,
        next_sequence: sequence.wrapping_add((frame.len() - payload_at) as u32),
        frame: frame.to_vec(),
        segments: 1,
        max_bytes,
    });
}

/// Closes every open context (end of a burst: the ITR timer's stand-in).
pub(crate) fn close_all(nic: &mut Ixgbe, out: &mut Vec<Ready>) {
    out.extend(nic.rsc.drain(..).map(finish));
}

fn close_where(nic: &mut Ixgbe, out: &mut Vec<Ready>, pred: impl Fn(&Context) -> bool) {
    while let Some(k) = nic.rsc.iter().position(&pred) {
        let context = nic.rsc.remove(k);
        out.push(finish(context));
    }
}

/// The coalesced packet with its IPv4 total length and header checksum
/// updated.
fn finish(context: Context) -> Ready {
    let mut frame = context.frame;
    if context.segments > 1 {
        let total = (frame.len() - 14) as u16;
        frame[16..18].copy_from_slice(&total.to_be_bytes());
        frame[24..26].copy_from_slice(&[0, 0]);
        let checksum = !packet::fold(packet::sum(&frame[14..34]));
        frame[24..26].copy_from_slice(&checksum.to_be_bytes());
    }
    let segments = if context.segments > 1 { context.segments } else { 0 };
    (frame, segments)
}

fn flow_of(frame: &[u8]) -> Option<[u8; 12]> {
    let p = packet::parse(frame)?;
    (p.protocol == TCP && p.l4.is_some() && p.ip_len == 20).then(|| frame[26..38].try_into().expect("12 bytes"))
}

/// (flow, sequence number, payload offset) of a segment that may be
/// coalesced.
fn eligible(frame: &[u8]) -> Option<([u8; 12], u32, usize)> {
    let flow = flow_of(frame)?;
    let tcp = 34;
    let flags = frame[tcp + 13];
    // Only ACK (0x10) and PSH (0x08); SYN, FIN, RST, URG, ECE, CWR end it.
    if flags & !0x18 != 0 {
        return None;
    }
    let total = u16::from_be_bytes([frame[16], frame[17]]) as usize;
    let header = tcp + (frame[tcp + 12] >> 4) as usize * 4;
    if 14 + total != frame.len() || header >= frame.len() {
        return None; // padded (no payload) or inconsistent
    }
    let (ipcs, ipe, l4cs, tcpe, _) = packet::verdict(frame);
    if !ipcs || ipe || !l4cs || tcpe {
        return None;
    }
    let sequence = u32::from_be_bytes(frame[tcp + 4..tcp + 8].try_into().expect("4 bytes"));
    Some((flow, sequence, header))
}
