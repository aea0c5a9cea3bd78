//! Paint annotations and small header edits (Click's
//! `elements/standard/{paint,paintswitch,checkpaint,striptonet,pad}.hh`
//! documentation is the specification).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | Paint(COLOR, ANNO) | 1/1 | agnostic | sets the paint annotation (or the one-byte annotation at ANNO) to COLOR |
//! | PaintSwitch(ANNO) | 1/- | push | packet to output K, K its paint (255: a copy to every output; no output K: dropped) |
//! | CheckPaint(COLOR, ANNO) | 1/1-2 | agnostic, output 1 push | packets painted COLOR to output 0, the others to output 1 (dropped if there is none) |
//! | StripToNetworkHeader | 1/1 | agnostic | removes the bytes before the network header (moves back to it if it lies before the data) |
//! | Pad(LENGTH, ZERO) | 1/1 | agnostic | extends packets to LENGTH bytes, or by their extra length annotation without LENGTH |
//!
//! ANNO is a byte offset in Click's 48-byte annotation area, or the name
//! PAINT (offset 16, the default).

use super::ipsumdump_fields as f;
use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::packet::{ANNO_AREA, PAINT_ANNO};
use oxnet_driver::PacketBatch;

fn anno_arg(a: &mut Args) -> Result<usize, String> {
    match a.positional_or("ANNO") {
        None => Ok(PAINT_ANNO),
        Some(v) => match v.trim() {
            "PAINT" => Ok(PAINT_ANNO),
            "AGGREGATE" => Ok(f::AGGREGATE_ANNO),
            other => {
                let n = args::unsigned(other).map_err(|e| format!("ANNO: {e}"))? as usize;
                if n >= ANNO_AREA {
                    return Err(format!("ANNO: {n} is outside the {ANNO_AREA}-byte annotation area"));
                }
                Ok(n)
            }
        },
    }
}

fn color_arg(a: &mut Args) -> Result<u8, String> {
    let v = a.required("COLOR")?;
    let n = args::unsigned(&v).map_err(|e| format!("COLOR: {e}"))?;
    u8::try_from(n).map_err(|_| format!("COLOR: {n} is not in 0..255"))
}

/// Paint(COLOR, ANNO): sets each packet's paint annotation (or the byte at
/// ANNO) to COLOR. Handler `color` (rw).
#[derive(Default)]
pub struct Paint {
    color: u8,
    anno: usize,
}

impl Element for Paint {
    fn class_name(&self) -> &'static str {
        "Paint"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.color = color_arg(a)?;
        self.anno = anno_arg(a)?;
        Ok(())
    }
    fn simple_action(&mut self, mut batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        for p in batch.iter_mut() {
            p.anno_mut().area[self.anno] = self.color;
        }
        Some(batch)
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("color", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "color").then(|| self.color.to_string())
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "color").then(|| {
            let n = args::unsigned(value)?;
            self.color = u8::try_from(n).map_err(|_| format!("color: {n} is not in 0..255"))?;
            Ok(())
        })
    }
}

/// PaintSwitch(ANNO): each packet to the output its paint names; paint
/// 255 sends a copy to every output; a paint with no such output drops
/// the packet (counted in `drops`).
#[derive(Default)]
pub struct PaintSwitch {
    anno: usize,
    drops: u64,
}

impl Element for PaintSwitch {
    fn class_name(&self) -> &'static str {
        "PaintSwitch"
    }
    fn port_count(&self) -> &'static str {
        "1/-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.anno = anno_arg(a)?;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let n = ctx.noutputs();
        let mut outs: Vec<PacketBatch> = (0..n).map(|_| PacketBatch::with_capacity(batch.len())).collect();
        let mut batch = batch;
        let len = batch.len();
        let anno = self.anno;
        let mut drops = 0;
        batch.consume_front(len, |p| {
            let k = usize::from(p.anno().area[anno]);
            if k == 255 {
                for out in outs.iter_mut().take(n.saturating_sub(1)) {
                    match super::standard::copy_packet(ctx, &p) {
                        Some(q) => out.push(q),
                        None => drops += 1,
                    }
                }
                match outs.last_mut() {
                    Some(last) => last.push(p),
                    None => drops += 1,
                }
            } else if k < n {
                outs[k].push(p);
            } else {
                drops += 1;
            }
        });
        self.drops += drops;
        for (k, b) in outs.into_iter().enumerate() {
            ctx.push(k, b);
        }
    }
    crate::drops_handler!();
}

/// CheckPaint(COLOR, ANNO): packets painted COLOR go to output 0; the
/// others to output 1, or are dropped (counted in `drops`) if output 1
/// is not connected.
#[derive(Default)]
pub struct CheckPaint {
    color: u8,
    anno: usize,
    drops: u64,
}

impl Element for CheckPaint {
    fn class_name(&self) -> &'static str {
        "CheckPaint"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        "a/ah"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        self.color = color_arg(a)?;
        self.anno = anno_arg(a)?;
        Ok(())
    }
    fn pull(&mut self, _port: usize, max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        // Pulled on output 0: what is not painted COLOR goes out of
        // output 1 (push) on the way.
        let batch = ctx.pull(0, max)?;
        let (good, bad) = self.split(batch);
        self.reject(bad, ctx);
        (!good.is_empty()).then_some(good)
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        let (good, bad) = self.split(batch);
        ctx.push(0, good);
        self.reject(bad, ctx);
    }
    crate::drops_handler!();
}

impl CheckPaint {
    fn reject(&mut self, bad: PacketBatch, ctx: &mut Ctx<'_>) {
        if ctx.noutputs() > 1 {
            ctx.push(1, bad);
        } else {
            self.drops += bad.len() as u64;
        }
    }

    fn split(&self, batch: PacketBatch) -> (PacketBatch, PacketBatch) {
        let mut good = PacketBatch::with_capacity(batch.len());
        let mut bad = PacketBatch::with_capacity(0);
        let mut batch = batch;
        let len = batch.len();
        let (anno, color) = (self.anno, self.color);
        batch.consume_front(len, |p| {
            if p.anno().area[anno] == color {
                good.push(p);
            } else {
                bad.push(p);
            }
        });
        (good, bad)
    }
}

/// StripToNetworkHeader: the packet then starts at its network header.
/// A packet without a network header annotation, or whose header lies
/// before its head room can give back, is dropped and counted (`drops`).
#[derive(Default)]
pub struct StripToNetworkHeader {
    drops: u64,
}

impl Element for StripToNetworkHeader {
    fn class_name(&self) -> &'static str {
        "StripToNetworkHeader"
    }
    fn simple_action(&mut self, batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let mut batch = batch;
        let len = batch.len();
        let mut kept = PacketBatch::with_capacity(len);
        let mut drops = 0;
        batch.consume_front(len, |mut p| {
            let ok = match p.network_offset() {
                Some(off) if off >= 0 => p.strip_front(off as usize).is_ok(),
                Some(off) => p.prepend((-off) as usize).is_ok(),
                None => false,
            };
            if ok {
                kept.push(p);
            } else {
                drops += 1;
            }
        });
        self.drops += drops;
        Some(kept)
    }
    crate::drops_handler!();
}

/// Pad(LENGTH, ZERO): packets shorter than LENGTH are extended to it;
/// without LENGTH, by their extra length annotation. Added bytes are
/// zero (ZERO is accepted; data is never left uninitialised here). The
/// extra length annotation is cleared. A packet that does not fit its
/// buffer is dropped and counted (`drops`).
#[derive(Default)]
pub struct Pad {
    length: Option<usize>,
    drops: u64,
}

impl Element for Pad {
    fn class_name(&self) -> &'static str {
        "Pad"
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(v) = a.positional_or("LENGTH") {
            self.length = Some(args::unsigned(&v).map_err(|e| format!("LENGTH: {e}"))? as usize);
        }
        if let Some(z) = a.keyword("ZERO") {
            args::boolean(&z).map_err(|e| format!("ZERO: {e}"))?;
        }
        Ok(())
    }
    fn simple_action(&mut self, batch: PacketBatch, _ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let mut batch = batch;
        let len = batch.len();
        let mut kept = PacketBatch::with_capacity(len);
        let mut drops = 0;
        let length = self.length;
        batch.consume_front(len, |mut p| {
            let extra = f::anno_u32(&p, f::EXTRA_LENGTH_ANNO) as usize;
            let want = match length {
                Some(n) => n.max(p.len()),
                None => p.len() + extra,
            };
            let old = p.len();
            if want > old {
                if p.set_len(want).is_err() {
                    drops += 1;
                    return;
                }
                p[old..].fill(0);
            }
            if extra != 0 {
                f::set_anno_u32(&mut p, f::EXTRA_LENGTH_ANNO, 0);
            }
            kept.push(p);
        });
        self.drops += drops;
        Some(kept)
    }
    crate::drops_handler!();
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["CheckPaint", "Pad", "Paint", "PaintSwitch", "StripToNetworkHeader"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "Paint" => Box::<Paint>::default(),
        "PaintSwitch" => Box::<PaintSwitch>::default(),
        "CheckPaint" => Box::<CheckPaint>::default(),
        "StripToNetworkHeader" => Box::<StripToNetworkHeader>::default(),
        "Pad" => Box::<Pad>::default(),
        _ => return None,
    })
}
