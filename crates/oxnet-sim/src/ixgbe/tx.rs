//! Transmit path (§7.2): descriptors TDH..TDT → gathered packet → padding
//! and CRC (§7.2.5 / HLREG0) → the wire, at the moment TDT is written.
//!
//! Transmission stops (TDH stays) while the link partner has sent XOFF and
//! MFLCN.RFCE is set, and continues when it sends XON (§8.2.3.22.34).
//! Frames sent while the link is down are lost and not counted in GPTC
//! (GPTC counts packets "transmitted successfully", §8.2.3.23.32).

use super::regs::*;
use super::{link_up, Ixgbe};
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

/// Transmits whatever every queue of `port` has pending.
pub(crate) fn kick(state: &mut WorldState, port: usize) {
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
    /// Host address of the descriptor ring, and its size.
    ring: *mut u8,
    ring_size: usize,
    /// Descriptors it used, from TDH on.
    descriptors: usize,
    /// Insert the CRC (DCMD.IFCS of the EOP descriptor).
    insert_fcs: bool,
    /// Why the packet is dropped instead of sent, if it is.
    problem: Option<String>,
}

/// Sends packets from queue `q` until TDH reaches TDT, the queue stops, or
/// the link partner pauses us.
pub(crate) fn transmit(state: &mut WorldState, port: usize, q: usize) {
    loop {
        let nic = &state.ports[port].nic;
        let queue = &nic.tx[q];
        if nic.dmatxctl & DMATXCTL_TE == 0 || queue.txdctl & QUEUE_ENABLE == 0 || queue.tdh == queue.tdt {
            return;
        }
        if paused(state, port) {
            return;
        }
        let packet = match gather(&mut state.ports[port].nic, q) {
            Ok(Some(packet)) => packet,
            Ok(None) => return, // no EOP before TDT yet: wait for the rest
            Err(message) => {
                state.fault(port, format!("TX queue {q}: {message}"));
                return;
            }
        };
        match &packet.problem {
            Some(problem) => state.fault(port, format!("TX queue {q}: {problem}")),
            None => send(state, port, packet.insert_fcs),
        }
        write_back(&mut state.ports[port].nic, q, &packet);
    }
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
    let base = (u64::from(queue.tdbah) << 32) | u64::from(queue.tdbal);
    if !base.is_multiple_of(128) {
        return Err(format!("ring base {base:#x} is not 128-byte aligned (§8.2.3.9.5)"));
    }
    let ring = dma::map(base, ring_size * DESCRIPTOR_SIZE, "the TX descriptor ring")?;
    nic.tx_frame.clear();
    let mut packet = Gathered {
        ring,
        ring_size,
        descriptors: 0,
        insert_fcs: false,
        problem: None,
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
            // A context descriptor stands alone (it has no EOP).
            packet
                .problem
                .get_or_insert_with(|| "context descriptor (DTYP 0010b) not modelled yet".into());
            if packet.descriptors == 1 {
                return Ok(Some(packet));
            }
        } else if dtyp != DTYP_DATA {
            packet
                .problem
                .get_or_insert_with(|| format!("descriptor type {dtyp:#06b} not modelled"));
        } else if command & DCMD_TSE != 0 {
            packet
                .problem
                .get_or_insert_with(|| "TCP segmentation (DCMD.TSE) not modelled yet".into());
        } else if packet.problem.is_none() {
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

/// The MAC's part: pad, append the CRC, count, put it on the wire.
fn send(state: &mut WorldState, port: usize, insert_fcs: bool) {
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
        state.ports[port].nic.stats.count_sent(frame.len());
        put_on_wire(state, port, &frame);
    }
    state.ports[port].nic.tx_frame = frame;
}

/// §7.2.3.5.1: DD in every descriptor of the packet that has RS, then TDH
/// moves past the packet.
fn write_back(nic: &mut Ixgbe, q: usize, packet: &Gathered) {
    let queue = &mut nic.tx[q];
    let head = queue.tdh as usize;
    for i in 0..packet.descriptors {
        // SAFETY: the ring was mapped by `gather` in this same register
        // access (the driver cannot free it while it waits for the access).
        unsafe {
            let desc = packet.ring.add(((head + i) % packet.ring_size) * DESCRIPTOR_SIZE);
            if dma::read_u32(desc.add(8)) & DCMD_RS != 0 {
                let status = dma::read_u32(desc.add(12));
                dma::publish_u32(desc.add(12), status | STA_DD);
            }
        }
    }
    queue.tdh = ((head + packet.descriptors) % packet.ring_size) as u32;
}
