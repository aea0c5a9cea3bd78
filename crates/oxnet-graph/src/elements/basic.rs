//! Switches and simple packet edits, after Click's documentation of the
//! classes of the same names (elements/standard/*.hh in Click).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | StaticSwitch(K) | 1/- | push | every packet to output K, fixed at configuration (-1: dropped) |
//! | RoundRobinSwitch | 1/1- | push | packet i to output i mod n |
//! | HashSwitch(OFFSET, LENGTH) | 1/1- | push | the output is a hash of LENGTH bytes at OFFSET, modulo the outputs (a packet too short goes to output 0) |
//! | Strip(LENGTH) | 1/1 | agnostic | removes LENGTH bytes from the front (all of a shorter packet) |
//! | Unstrip(LENGTH) | 1/1 | agnostic | puts LENGTH bytes back in front from the head room (a packet without that much is dropped and counted) |
//! | Truncate(LENGTH) | 1/1 | agnostic | cuts a packet to at most LENGTH bytes |
//!
//! A batch is split per output by the switches: packets keep their order
//! within each output.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::PacketBatch;

fn length_arg(a: &mut Args, name: &str) -> Result<usize, String> {
    match a.positional_or(name) {
        Some(v) => args::unsigned(&v)
            .map(|n| n as usize)
            .map_err(|e| format!("{name}: {e}")),
        None => Err(format!("{name} is required")),
    }
}

/// Hands packet i of `batch` to output `choose(i, packet)`, one batch per
/// output, order kept within each.
fn split_push(batch: PacketBatch, ctx: &mut Ctx<'_>, mut choose: impl FnMut(&oxnet_driver::Packet) -> usize) {
    let n = ctx.noutputs().max(1);
    let mut outs: Vec<PacketBatch> = (0..n).map(|_| PacketBatch::with_capacity(batch.len())).collect();
    let mut batch = batch;
    let len = batch.len();
    batch.consume_front(len, |p| {
        let k = choose(&p) % n;
        outs[k].push(p);
    });
    for (k, b) in outs.into_iter().enumerate() {
        ctx.push(k, b);
    }
}

#[derive(Default)]
pub struct StaticSwitch {
    output: i64,
}

impl Element for StaticSwitch {
    fn class_name(&self) -> &'static str {
        "StaticSwitch"
    }
    fn port_count(&self) -> &'static str {
        "1/-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = a.positional_or("OUTPUT") {
            self.output = args::integer(&v).map_err(|e| format!("OUTPUT: {e}"))?;
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        if self.output >= 0 && (self.output as usize) < ctx.noutputs() {
            ctx.push(self.output as usize, batch);
        }
    }
}

#[derive(Default)]
pub struct RoundRobinSwitch {
    next: usize,
}

impl Element for RoundRobinSwitch {
    fn class_name(&self) -> &'static str {
        "RoundRobinSwitch"
    }
    fn port_count(&self) -> &'static str {
        "1/1-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let mut next = self.next;
        split_push(batch, ctx, |_| {
            next += 1;
            next - 1
        });
        self.next = next % ctx.noutputs().max(1);
    }
}

#[derive(Default)]
pub struct HashSwitch {
    offset: usize,
    length: usize,
}

impl Element for HashSwitch {
    fn class_name(&self) -> &'static str {
        "HashSwitch"
    }
    fn port_count(&self) -> &'static str {
        "1/1-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.offset = length_arg(a, "OFFSET")?;
        self.length = length_arg(a, "LENGTH")?;
        if self.length == 0 {
            return Err("LENGTH must be at least 1".into());
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let (offset, length) = (self.offset, self.length);
        split_push(batch, ctx, |p| match p.get(offset..offset + length) {
            // FNV-1a over the bytes: the same bytes, the same output.
            Some(bytes) => bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            }) as usize,
            None => 0,
        });
    }
}

/// Strip, Unstrip and Truncate: one edit per packet.
pub struct Edit {
    class: &'static str,
    length: usize,
    drops: u64,
}

impl Edit {
    pub fn new(class: &'static str) -> Edit {
        Edit {
            class,
            length: 0,
            drops: 0,
        }
    }
}

impl Element for Edit {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.length = length_arg(a, "LENGTH")?;
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let n = self.length;
        match self.class {
            "Strip" => {
                for p in batch.iter_mut() {
                    let k = n.min(p.len());
                    let _ = p.strip_front(k);
                }
            }
            "Truncate" => {
                for p in batch.iter_mut() {
                    if p.len() > n {
                        let _ = p.set_len(n);
                    }
                }
            }
            _ => {
                // Unstrip: packets without the head room are dropped.
                let len = batch.len();
                let mut kept = PacketBatch::with_capacity(len);
                let mut drops = 0;
                batch.consume_front(len, |mut p| {
                    if p.prepend(n).is_ok() {
                        kept.push(p);
                    } else {
                        drops += 1;
                    }
                });
                self.drops += drops;
                return Some(kept);
            }
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        if self.class == "Unstrip" {
            &[("drops", true, false)]
        } else {
            &[]
        }
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (self.class == "Unstrip" && name == "drops").then(|| self.drops.to_string())
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &[
        "HashSwitch",
        "RoundRobinSwitch",
        "StaticSwitch",
        "Strip",
        "Truncate",
        "Unstrip",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn crate::element::Element>> {
    Some(match class {
        "StaticSwitch" => Box::<StaticSwitch>::default(),
        "RoundRobinSwitch" => Box::<RoundRobinSwitch>::default(),
        "HashSwitch" => Box::<HashSwitch>::default(),
        "Strip" => Box::new(Edit::new("Strip")),
        "Unstrip" => Box::new(Edit::new("Unstrip")),
        "Truncate" => Box::new(Edit::new("Truncate")),
        _ => return None,
    })
}
