//! Traffic sources of many flows, after Click's FastUDPFlows
//! (elements/userlevel/fastudpflows.hh): UDP packets spread over FLOWS
//! flows, so that RSS, hash switches and per-flow state see many flows.
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | FastUDPFlows(RATE, LIMIT, LENGTH, SRCETH, SRCIP, DSTETH, DSTIP, FLOWS, FLOWSIZE [, ACTIVE]) | 0/1 | push | Ethernet/IPv4/UDP packets of LENGTH bytes (Ethernet header included), FLOWSIZE packets of one flow then the next, FLOWS flows in turn |
//!
//! Flow f (0 ≤ f < FLOWS) has UDP source port 1024 + f and destination
//! port 1024 + f, and the addresses given; packets carry valid IPv4 and
//! UDP checksums (RFC 791 §3.1, RFC 768). RATE is packets per second (0:
//! as fast as the router runs, a batch of 32 per task run); LIMIT is the
//! number of packets in all (-1: no limit); `STOP true` (an oxnet
//! keyword, as InfiniteSource's) asks the driver to stop once LIMIT
//! packets are out. Handlers: `count` (sent),
//! `active` (rw), `limit` (rw), `reset` (w: count back to 0).
//!
//! Click chooses each flow's ports at random; here they are fixed, so that
//! a run is reproducible and a test can predict where each flow goes.

use super::ip::write_ip_header;
use crate::args::{self, opt, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::offload::set_l4_checksum;
use oxnet_driver::PacketBatch;

/// The element.
#[derive(Default)]
pub struct FastUdpFlows {
    rate: u64,
    limit: Option<u64>,
    length: usize,
    src_eth: [u8; 6],
    dst_eth: [u8; 6],
    src_ip: [u8; 4],
    dst_ip: [u8; 4],
    flows: u64,
    flow_size: u64,
    active: bool,
    stop: bool,
    count: u64,
    /// Router time of the first packet (rate pacing).
    start_us: Option<u64>,
}

const BATCH: usize = 32;
const HEADERS: usize = 14 + 20 + 8;

impl FastUdpFlows {
    /// Writes packet number `n` into `buf` (`length` bytes).
    fn fill(&self, n: u64, buf: &mut [u8]) {
        let flow = (n / self.flow_size.max(1)) % self.flows.max(1);
        let port = (1024 + flow as u16).to_be_bytes();
        buf[..HEADERS].fill(0);
        buf[0..6].copy_from_slice(&self.dst_eth);
        buf[6..12].copy_from_slice(&self.src_eth);
        buf[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip_len = (self.length - 14) as u16;
        write_ip_header(&mut buf[14..], 0, ip_len, n as u16, 0, 64, 17, self.src_ip, self.dst_ip);
        buf[34..36].copy_from_slice(&port);
        buf[36..38].copy_from_slice(&port);
        buf[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        set_l4_checksum(&mut buf[..self.length], 14, 20, 17);
    }

    /// Packets the rate allows by now.
    fn allowed(&mut self, now_us: u64) -> u64 {
        if self.rate == 0 {
            return BATCH as u64;
        }
        let start = *self.start_us.get_or_insert(now_us);
        let due = (now_us - start) as u128 * self.rate as u128 / 1_000_000 + 1;
        (due as u64).saturating_sub(self.count).min(BATCH as u64)
    }
}

impl Element for FastUdpFlows {
    fn class_name(&self) -> &'static str {
        "FastUDPFlows"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.rate = args::unsigned(&a.required("RATE")?).map_err(|e| format!("RATE: {e}"))?;
        let limit = args::integer(&a.required("LIMIT")?).map_err(|e| format!("LIMIT: {e}"))?;
        self.limit = (limit >= 0).then_some(limit as u64);
        self.length = args::unsigned(&a.required("LENGTH")?).map_err(|e| format!("LENGTH: {e}"))? as usize;
        if !(HEADERS..=1514).contains(&self.length) {
            return Err(format!("LENGTH {} must be between {HEADERS} and 1514", self.length));
        }
        self.src_eth = args::ether_address(&a.required("SRCETH")?).map_err(|e| format!("SRCETH: {e}"))?;
        self.src_ip = args::ip_address(&a.required("SRCIP")?).map_err(|e| format!("SRCIP: {e}"))?;
        self.dst_eth = args::ether_address(&a.required("DSTETH")?).map_err(|e| format!("DSTETH: {e}"))?;
        self.dst_ip = args::ip_address(&a.required("DSTIP")?).map_err(|e| format!("DSTIP: {e}"))?;
        self.flows = args::unsigned(&a.required("FLOWS")?).map_err(|e| format!("FLOWS: {e}"))?;
        self.flow_size = args::unsigned(&a.required("FLOWSIZE")?).map_err(|e| format!("FLOWSIZE: {e}"))?;
        if self.flows == 0 || self.flows > 64512 || self.flow_size == 0 {
            return Err("FLOWS must be 1..64512 and FLOWSIZE at least 1".into());
        }
        self.active = opt(a.positional_or("ACTIVE"), args::boolean, "ACTIVE")?.unwrap_or(true);
        self.stop = opt(a.keyword("STOP"), args::boolean, "STOP")?.unwrap_or(false);
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.active {
            return false;
        }
        let left = self.limit.map_or(u64::MAX, |l| l.saturating_sub(self.count));
        if left == 0 {
            if self.stop {
                // As InfiniteSource's STOP: ask the driver to stop, once.
                self.stop = false;
                ctx.stop();
            }
            return false;
        }
        let n = self.allowed(ctx.now_us()).min(left) as usize;
        if n == 0 {
            return false;
        }
        let n = match ctx.downstream_room(0) {
            Some(room) => n.min(room),
            None => n,
        };
        if n == 0 {
            return false;
        }
        let mut batch = PacketBatch::with_capacity(n);
        let got = ctx.pool().alloc_batch(&mut batch, n);
        for (i, p) in batch.iter_mut().enumerate() {
            if p.set_len(self.length).is_err() {
                continue;
            }
            self.fill(self.count + i as u64, p);
        }
        self.count += got as u64;
        ctx.push(0, batch);
        got > 0
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("active", true, true),
            ("limit", true, true),
            ("reset", false, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "active" => Some(self.active.to_string()),
            "limit" => Some(self.limit.map_or("-1".to_string(), |l| l.to_string())),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "active" => args::boolean(value).map(|b| self.active = b),
            "limit" => args::integer(value).map(|l| self.limit = (l >= 0).then_some(l as u64)),
            "reset" => {
                self.count = 0;
                self.start_us = None;
                Ok(())
            }
            _ => return None,
        })
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["FastUDPFlows"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    (class == "FastUDPFlows").then(|| Box::<FastUdpFlows>::default() as Box<dyn Element>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::offload::{fold, ones_sum};

    fn element(config: &str) -> FastUdpFlows {
        let mut e = FastUdpFlows::default();
        let mut a = Args::new(config);
        e.configure(&mut a).unwrap();
        a.complete().unwrap();
        e
    }

    #[test]
    fn packets_cycle_over_the_flows_with_valid_checksums() {
        let e = element("0, 10, 60, 02:00:00:00:00:01, 10.0.0.1, 02:00:00:00:00:02, 10.0.0.2, 3, 2");
        let mut buf = vec![0u8; 60];
        let mut ports = Vec::new();
        for n in 0..8 {
            e.fill(n, &mut buf);
            ports.push(u16::from_be_bytes([buf[34], buf[35]]));
            // The IPv4 header sums to 0xffff with its checksum.
            assert_eq!(fold(ones_sum(&buf[14..34], 0)), 0xffff);
            let mut pseudo = [0u8; 12];
            pseudo[0..4].copy_from_slice(&buf[26..30]);
            pseudo[4..8].copy_from_slice(&buf[30..34]);
            pseudo[9] = 17;
            pseudo[10..12].copy_from_slice(&buf[38..40]);
            assert_eq!(fold(ones_sum(&buf[34..60], ones_sum(&pseudo, 0))), 0xffff);
        }
        assert_eq!(ports, [1024, 1024, 1025, 1025, 1026, 1026, 1024, 1024]);
    }

    #[test]
    fn bad_arguments_say_which() {
        let err = |config: &str| {
            let mut e = FastUdpFlows::default();
            e.configure(&mut Args::new(config)).unwrap_err()
        };
        assert!(err("0, 10, 20, 02:00:00:00:00:01, 10.0.0.1, 02:00:00:00:00:02, 10.0.0.2, 3, 2").contains("LENGTH"));
        assert!(err("0, 10, 60, 02:00:00:00:00, 10.0.0.1, 02:00:00:00:00:02, 10.0.0.2, 3, 2").contains("SRCETH"));
        assert!(err("0, 10, 60, 02:00:00:00:00:01, 10.0.0.1, 02:00:00:00:00:02, 10.0.0.2, 0, 2").contains("FLOWS"));
    }
}
