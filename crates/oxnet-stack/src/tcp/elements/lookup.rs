//! TCPFlowLookup (ClickNF §3.1): the first TCP element. It checks the
//! segment's checksum (RFC 9293 §3.1, over the pseudo-header) unless
//! told the device did, finds the flow's TCB, and writes the TCB
//! annotation every later element reads, so the flow table is searched
//! once per segment.
//!
//! Input: IP packets with the network and transport header marks set (the
//! IP layer's IPv4Input / IPv6Input). Output 0: segments of a known flow;
//! output 1: segments of no flow (for TCPListen).
//! When the device checked the TCP checksum (receive checksum offload:
//! the driver's verdict flags), its verdict is taken; otherwise it is
//! checked in software. Arguments: `CHECKSUM` (boolean, default true:
//! false skips the software check). Handlers: `count` (segments looked
//! up), `bad_segments` (no whole TCP header), `bad_checksums`,
//! `device_checked` (verdicts taken from the device), `no_flow` (to
//! output 1).

use super::{info, Info, Seg};
use crate::anno;
use crate::wire::{IpAddress, TcpPacket};
use oxnet_driver::packet::{FLAG_CSUM_CHECKED, FLAG_L4_CSUM_BAD, FLAG_L4_CSUM_GOOD};
use oxnet_driver::{Packet, PacketBatch};
use oxnet_graph::args::{self, Args};
use oxnet_graph::element::{Element, PORTS_1_1, PUSH};
use oxnet_graph::Ctx;

#[derive(Default)]
pub struct FlowLookup {
    info: Option<Info>,
    skip_checksum: bool,
    count: u64,
    bad_segments: u64,
    bad_checksums: u64,
    device_checked: u64,
    no_flow: u64,
}

fn checksum_ok(p: &Packet, seg: &Seg) -> bool {
    if p.is_chained() {
        // Over the whole chain (RFC 9293 §3.1: the pseudo-header, the
        // header and all the data).
        let (src, dst): (IpAddress, IpAddress) = (seg.key.remote.addr, seg.key.local.addr);
        let length = (seg.header_len + seg.payload_len) as u32;
        let seed = crate::wire::ip::pseudo_header_sum(&src, &dst, crate::wire::IpProtocol::Tcp, length);
        let sum = crate::ip::chain_sum(p, seg.tcp_at, seed);
        return oxnet_driver::offload::fold(sum) == 0xFFFF;
    }
    let Some(tcp) = p.get(seg.tcp_at..).and_then(|b| TcpPacket::new_checked(b).ok()) else {
        return false;
    };
    let (src, dst): (IpAddress, IpAddress) = (seg.key.remote.addr, seg.key.local.addr);
    tcp.verify_checksum(&src, &dst)
}

impl Element for FlowLookup {
    fn class_name(&self) -> &'static str {
        "TCPFlowLookup"
    }
    fn port_count(&self) -> &'static str {
        let _ = PORTS_1_1;
        "1/2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = a.keyword("CHECKSUM") {
            self.skip_checksum = !args::boolean(&v).map_err(|e| format!("CHECKSUM: {e}"))?;
        }
        let info = info();
        // With several graph threads, the NIC's RSS decides which core a
        // flow's packets reach; this stack's connections choose their
        // ports by it (TcpInfo::rss).
        let place = oxnet_graph::elements::device::thread_place();
        if place.count > 1 {
            info.borrow_mut().rss = Some(crate::tcp::info::RssPlace::for_thread(place.index, place.count));
        }
        self.info = Some(info);
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let Some(info) = self.info.clone() else { return };
        let now = ctx.now_us();
        let n = ctx.noutputs();
        let outs = {
            let mut info = info.borrow_mut();
            info.clock_us = now;
            super::split_packets(batch, n, |mut p| {
                self.count += 1;
                let Some(seg) = Seg::read(&p) else {
                    self.bad_segments += 1;
                    return None;
                };
                // The device's verdict when it checked (receive checksum
                // offload), else the software check.
                let flags = p.meta().flags;
                let good = if flags & FLAG_CSUM_CHECKED != 0 && flags & (FLAG_L4_CSUM_GOOD | FLAG_L4_CSUM_BAD) != 0 {
                    self.device_checked += 1;
                    flags & FLAG_L4_CSUM_GOOD != 0
                } else {
                    self.skip_checksum || checksum_ok(&p, &seg)
                };
                if !good {
                    self.bad_checksums += 1;
                    return None;
                }
                match info.lookup(&seg.key) {
                    Some(tcb) => {
                        anno::set_tcb(&mut p, Some(tcb));
                        anno::set_tcp_flags(&mut p, anno::TcpFlags::default());
                        Some((0, p))
                    }
                    None => {
                        self.no_flow += 1;
                        anno::set_tcb(&mut p, None);
                        Some((1, p))
                    }
                }
            })
        };
        super::push_all(ctx, outs);
    }
    counter_handlers!(count, bad_segments, bad_checksums, device_checked, no_flow);
}
