//! Teardown of an 82576: stop every DMA the device could still do before
//! the driver frees the rings and buffers. The same steps as the 82599's
//! (see `ixgbe/teardown.rs` for why each is needed):
//!
//! 1. each transmit queue: wait (bounded) until TDH == TDT, clear
//!    TXDCTL.ENABLE, poll until it reads 0; each receive queue: clear
//!    RXDCTL.ENABLE, poll until it reads 0 (82576 datasheet §4.5.9,
//!    receive and transmit queue disabling; Linux igb polls the same bits);
//! 2. receiver (RCTL.EN) and transmitter (TCTL.EN) off;
//! 3. GIO master disable: CTRL.GIO_MASTER_DISABLE, poll until
//!    STATUS.GIO_MASTER_ENABLE reads 0 (§4.5.2, before a reset);
//! 4. device reset, CTRL.RST, polled until it clears (§4.5.1);
//!    CTRL_EXT.DRV_LOAD cleared: the driver no longer owns the device;
//! 5. bus mastering off ([`RegisterAccess::disable_bus_master`]).

use super::regs::*;
use crate::regs::RegisterAccess;
use crate::wait::poll_bits;
use std::time::Duration;

pub use crate::advanced::QUEUE_STOP_TIMEOUT;

/// Stops receive queue `q` ([`crate::advanced::stop`]). True once the
/// device acknowledged.
pub fn stop_rx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    crate::advanced::stop::stop_rx(regs, rxdctl(q))
}

/// Stops transmit queue `q`: drained, then disabled. True once the
/// device acknowledged the disable.
pub fn stop_tx_queue<R: RegisterAccess>(regs: &R, q: u32) -> bool {
    crate::advanced::stop::stop_tx(regs, tdh(q), tdt(q), txdctl(q))
}

/// Stops all DMA of the device with `rx_queues` receive and `tx_queues`
/// transmit queues in use, resets it and clears bus mastering. True if
/// every step was acknowledged: the queues' memory can be freed.
pub fn stop_device<R: RegisterAccess>(regs: &R, rx_queues: u32, tx_queues: u32) -> bool {
    let mut stopped = true;
    for q in 0..tx_queues {
        stopped &= stop_tx_queue(regs, q);
    }
    for q in 0..rx_queues {
        stopped &= stop_rx_queue(regs, q);
    }
    regs.clear_flags32(RCTL, RCTL_EN);
    regs.clear_flags32(TCTL, TCTL_EN);
    regs.set_flags32(CTRL, CTRL_GIO_MASTER_DISABLE);
    // On a timeout the reset below ends outstanding requests anyway.
    let _ = poll_bits(regs, STATUS, STATUS_GIO_MASTER_ENABLE, 0, QUEUE_STOP_TIMEOUT);
    let ctrl = regs.read32(CTRL);
    regs.write32(CTRL, ctrl | CTRL_RST);
    // §8.2.1 (CTRL.RST): at least 1 ms before the next register access.
    std::thread::sleep(Duration::from_millis(2));
    stopped &= poll_bits(regs, CTRL, CTRL_RST, 0, QUEUE_STOP_TIMEOUT);
    regs.clear_flags32(CTRL_EXT, CTRL_EXT_DRV_LOAD);
    regs.disable_bus_master();
    stopped
}

/// The teardown order against a small fake 82576 that behaves as the
/// datasheet says a busy device does: queue ENABLE bits read 1 for a while
/// after they are cleared (write-backs in flight), TDH catches up with TDT
/// late, STATUS.GIO_MASTER_ENABLE stays 1 for a while after
/// CTRL.GIO_MASTER_DISABLE, CTRL.RST self-clears. (The software 82599 of
/// oxnet-sim checks the 82599's teardown with real DMA; QEMU's igb model
/// cannot show the order, since the kernel's probe resets the device.)
/// Offsets and bits are the datasheet's, written here, not the driver's
/// constants (82576 datasheet §8.2.1 CTRL, §8.2.2 STATUS, §8.2.3 CTRL_EXT,
/// §8.10.1 RCTL, §8.12.1 TCTL, §8.10.10 RXDCTL, §8.12.13 TXDCTL, §8.12.9/10
/// TDH/TDT).
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    const CTRL_: u32 = 0x0000;
    const STATUS_: u32 = 0x0008;
    const CTRL_EXT_: u32 = 0x0018;
    const RCTL_: u32 = 0x0100;
    const TCTL_: u32 = 0x0400;
    const fn rxdctl_(q: u32) -> u32 {
        0x0C028 + 0x40 * q
    }
    const fn txdctl_(q: u32) -> u32 {
        0x0E028 + 0x40 * q
    }
    const fn tdh_(q: u32) -> u32 {
        0x0E010 + 0x40 * q
    }
    const fn tdt_(q: u32) -> u32 {
        0x0E018 + 0x40 * q
    }
    const ENABLE: u32 = 1 << 25; // RXDCTL/TXDCTL.ENABLE
    const RST: u32 = 1 << 26; // CTRL.RST
    const GIO_MASTER_DISABLE: u32 = 1 << 2; // CTRL
    const GIO_MASTER_ENABLE: u32 = 1 << 19; // STATUS
    const DRV_LOAD: u32 = 1 << 28; // CTRL_EXT
    const EN: u32 = 1 << 1; // RCTL.EN, TCTL.EN

    /// What the device observably did, in order.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Event {
        QueueStopped(&'static str, u32),
        ReceiverOff,
        TransmitterOff,
        MasterDisabled,
        Reset,
        DriverUnloaded,
        BusMasterOff,
    }

    struct Fake {
        regs: Mutex<HashMap<u32, u32>>,
        /// Reads left until a cleared ENABLE / STATUS bit / TDH catches up.
        delay: Mutex<HashMap<u32, u32>>,
        events: Mutex<Vec<Event>>,
        /// Queues whose ENABLE never clears (a hung device).
        stuck: Vec<u32>,
        queues: u32,
    }

    impl Fake {
        fn new(queues: u32, stuck: Vec<u32>) -> Fake {
            let mut regs = HashMap::new();
            for q in 0..queues {
                regs.insert(rxdctl_(q), ENABLE);
                regs.insert(txdctl_(q), ENABLE);
                regs.insert(tdh_(q), 3);
                regs.insert(tdt_(q), 10);
            }
            regs.insert(RCTL_, EN);
            regs.insert(TCTL_, EN);
            regs.insert(STATUS_, GIO_MASTER_ENABLE);
            regs.insert(CTRL_EXT_, DRV_LOAD);
            Fake {
                regs: Mutex::new(regs),
                delay: Mutex::new(HashMap::new()),
                events: Mutex::new(Vec::new()),
                stuck,
                queues,
            }
        }
        fn event(&self, e: Event) {
            self.events.lock().unwrap().push(e);
        }
        fn queue_of(&self, offset: u32) -> Option<(&'static str, u32)> {
            (0..self.queues).find_map(|q| {
                if offset == rxdctl_(q) {
                    Some(("rx", q))
                } else if offset == txdctl_(q) {
                    Some(("tx", q))
                } else {
                    None
                }
            })
        }
    }

    impl RegisterAccess for Fake {
        fn read32(&self, offset: u32) -> u32 {
            let mut regs = self.regs.lock().unwrap();
            let mut delay = self.delay.lock().unwrap();
            let value = *regs.get(&offset).unwrap_or(&0);
            if let Some(left) = delay.get_mut(&offset) {
                if *left > 0 {
                    *left -= 1;
                    return value;
                }
                delay.remove(&offset);
                // The pending change lands now.
                let new = if let Some((kind, q)) = self.queue_of(offset) {
                    if self.stuck.contains(&q) {
                        delay.insert(offset, u32::MAX);
                        return value;
                    }
                    self.event(Event::QueueStopped(kind, q));
                    value & !ENABLE
                } else if offset == STATUS_ {
                    self.event(Event::MasterDisabled);
                    value & !GIO_MASTER_ENABLE
                } else if offset == CTRL_ {
                    self.event(Event::Reset);
                    value & !RST
                } else {
                    // TDH reaches TDT.
                    let q = (0..self.queues).find(|&q| tdh_(q) == offset).expect("a TDH");
                    *regs.get(&tdt_(q)).unwrap()
                };
                regs.insert(offset, new);
                return new;
            }
            value
        }

        fn write32(&self, offset: u32, value: u32) {
            let mut regs = self.regs.lock().unwrap();
            let old = *regs.get(&offset).unwrap_or(&0);
            let mut delay = self.delay.lock().unwrap();
            if self.queue_of(offset).is_some() && old & ENABLE != 0 && value & ENABLE == 0 {
                // Cleared, but reads 1 until the in-flight write-backs end.
                delay.insert(offset, 3);
                return;
            }
            if offset == CTRL_ && value & GIO_MASTER_DISABLE != 0 && old & GIO_MASTER_DISABLE == 0 {
                delay.insert(STATUS_, 2);
            }
            if offset == CTRL_ && value & RST != 0 {
                delay.insert(CTRL_, 1);
            }
            if (offset == RCTL_ || offset == TCTL_) && old & EN != 0 && value & EN == 0 {
                drop(delay);
                self.event(if offset == RCTL_ {
                    Event::ReceiverOff
                } else {
                    Event::TransmitterOff
                });
            } else if offset == CTRL_EXT_ && old & DRV_LOAD != 0 && value & DRV_LOAD == 0 {
                drop(delay);
                self.event(Event::DriverUnloaded);
            }
            regs.insert(offset, value);
        }

        fn disable_bus_master(&self) {
            self.event(Event::BusMasterOff);
        }
    }

    #[test]
    fn every_queue_is_acknowledged_stopped_before_the_reset_and_bus_mastering_goes_last() {
        let fake = Fake::new(2, vec![]);
        {
            // TDH lags TDT by two reads on each queue.
            let mut delay = fake.delay.lock().unwrap();
            delay.insert(tdh_(0), 2);
            delay.insert(tdh_(1), 2);
        }
        assert!(stop_device(&fake, 2, 2), "every step acknowledged");
        let events = fake.events.lock().unwrap().clone();
        use Event::*;
        assert_eq!(
            events,
            vec![
                QueueStopped("tx", 0),
                QueueStopped("tx", 1),
                QueueStopped("rx", 0),
                QueueStopped("rx", 1),
                ReceiverOff,
                TransmitterOff,
                MasterDisabled,
                Reset,
                DriverUnloaded,
                BusMasterOff,
            ]
        );
        let regs = fake.regs.lock().unwrap();
        // The transmit queues were drained (TDH == TDT) before the disable.
        assert_eq!(regs[&tdh_(0)], regs[&tdt_(0)]);
        assert_eq!(regs[&tdh_(1)], regs[&tdt_(1)]);
    }

    #[test]
    fn a_queue_that_never_acknowledges_makes_the_teardown_report_failure() {
        // The caller then leaks the queue memory rather than freeing pages
        // the device may still write (ixgbe/teardown.rs, Drop).
        let fake = Fake::new(2, vec![1]);
        assert!(!stop_device(&fake, 2, 2));
        let events = fake.events.lock().unwrap().clone();
        assert!(events.contains(&Event::Reset), "the reset still runs: {events:?}");
        assert_eq!(events.last(), Some(&Event::BusMasterOff));
        assert!(!events.contains(&Event::QueueStopped("tx", 1)));
    }
}
