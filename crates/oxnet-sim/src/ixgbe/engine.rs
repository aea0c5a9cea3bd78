//! The DMA engine of a port, for worlds whose devices run beside the
//! driver (`World::set_dma_mode`): register writes only store, and each
//! [`step`] does a partial run of the work the hardware would be doing:
//!
//! * transmit: first the write-backs of what the previous step sent (DD,
//!   or the head, §7.2.3.5), then up to 32 packets per queue from the
//!   descriptors after TDH (their write-backs wait for the next step);
//! * receive: first the status dwords (DD) of what the previous step wrote,
//!   then up to 32 frames from the packet buffer into host memory (data
//!   and the other write-back fields now, DD in the next step: the
//!   datasheet's order, data before DD, §7.1.6.2);
//! * a queue being disabled (ENABLE cleared while write-backs were
//!   outstanding) stops once they are done: ENABLE then reads 0
//!   (§4.6.7.1.2, §4.6.8.1.2).
//!
//! The run lengths come from a fixed-seed generator, so descriptors
//! complete some time after the tail write and in runs of varying size.

use super::{rx, tx};
use crate::world::WorldState;

/// Most packets a queue sends, and frames a port receives, per step.
const MAX_RUN: u64 = 32;

/// One step of `port`'s engine. True if it did anything.
pub(crate) fn step(state: &mut WorldState, port: usize) -> bool {
    let mut busy = false;
    for q in 0..state.ports[port].nic.tx.len() {
        let nic = &mut state.ports[port].nic;
        let queue = &nic.tx[q];
        if !queue.pending.is_empty() || queue.stopping {
            busy = true;
            if let Err(message) = tx::complete(nic, q) {
                nic.tx[q].pending.clear();
                nic.tx[q].fetched = 0;
                state.fault(port, format!("TX queue {q}: {message}"));
            }
            state.ports[port].nic.tx[q].stopping = false;
        }
        if tx::can_send(state, port, q) {
            let limit = 1 + (state.random() % MAX_RUN) as usize;
            busy |= tx::transmit_some(state, port, q, limit, true) > 0;
        }
    }
    for q in 0..state.ports[port].nic.rx.len() {
        let nic = &mut state.ports[port].nic;
        let queue = &nic.rx[q];
        if !queue.pending.is_empty() || queue.stopping {
            busy = true;
            if let Err(message) = rx::complete(nic, q) {
                state.fault(port, message);
            }
            state.ports[port].nic.rx[q].stopping = false;
        }
    }
    let limit = 1 + (state.random() % MAX_RUN) as usize;
    busy |= rx::drain_some(state, port, limit, true) > 0;
    busy
}
