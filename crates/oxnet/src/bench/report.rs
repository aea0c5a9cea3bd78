//! The table, the JSON file and the SVG figure of `oxnet bench`.

use super::{
    callgrind, BenchReport, Breakdown, FwdResult, IXY_C_CYCLES, IXY_C_INSTRUCTIONS, IXY_RS_INSTRUCTIONS,
    TARGET_INSTRUCTIONS,
};
use oxnet_driver::Result;
use std::fmt::Write;
use std::path::Path;

/// Self cost per function, per packet, from the callgrind file of
/// `result`: with the model kept out of the count, every collected
/// instruction belongs to the driver, the forwarder or what they call.
pub fn breakdown(file: &Path, result: &FwdResult) -> Result<Breakdown> {
    let annotation = callgrind::annotate(file, false)?;
    let packets = result.packets();
    let mut per_function: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for e in &annotation.entries {
        // Inlined code is listed once per source file: self costs add up.
        *per_function.entry(e.function().to_string()).or_insert(0) += e.ir;
    }
    let mut items: Vec<(String, u64)> = per_function.into_iter().filter(|(_, ir)| *ir > 0).collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(Breakdown {
        batch: result.batch,
        items: items.into_iter().map(|(f, ir)| (f, ir as f64 / packets)).collect(),
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "-".to_string(),
    }
}

/// The table printed at the end.
pub fn table(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\noxnet bench: forwarding path over the simulated 82599 (one direction, fwd0 -> fwd1, \
         60-byte frames, rings of 512, flow control on)"
    );
    let _ = writeln!(
        s,
        "instructions per packet under callgrind ({}), collected only inside \
         measured_forward_step with collection switched off inside the model: nothing subtracted",
        r.valgrind
    );
    let _ = writeln!(s, "mix: {}", super::fwd::Mix::describe());
    let _ = writeln!(
        s,
        "anchors: ixy (C) {IXY_C_INSTRUCTIONS:.0} instructions ({IXY_C_CYCLES:.0} cycles) and \
         ixy.rs {IXY_RS_INSTRUCTIONS:.0} instructions per packet at batch 32 are PUBLISHED \
         figures, not measured here; our target is < {TARGET_INSTRUCTIONS:.0}"
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:>5} {:>8} {:>11} {:>8} {:>8} {:>7} {:>7} {:>7} {:>6} {:>9} {:>9} {:>10} {:>6}",
        "batch",
        "packets",
        "driver+app",
        "/ixy C",
        "/ixy.rs",
        "polls",
        "empty",
        "partial",
        "held",
        "writes/",
        "reads/pkt",
        "Mpps wall*",
        "check"
    );
    let _ = writeln!(
        s,
        "{:>5} {:>8} {:>11} {:>8} {:>8} {:>7} {:>7} {:>7} {:>6} {:>9} {:>9} {:>10} {:>6}",
        "", "", "Ir/pkt", "(127)", "(209)", "/pkt", "%", "%", "TDT", "sendpoll", "", "", ""
    );
    for f in &r.fwd {
        let d = f.driver_app_per_packet();
        let steps = f.run.steps.max(1) as f64;
        let sending = f.run.steps.saturating_sub(f.run.empty_steps).max(1) as f64;
        let _ = writeln!(
            s,
            "{:>5} {:>8} {:>11.1} {:>8.2} {:>8.2} {:>7.3} {:>7.1} {:>7.1} {:>6} {:>9.2} {:>9.3} {:>10} {:>6}",
            f.batch,
            f.run.forwarded,
            d,
            d / IXY_C_INSTRUCTIONS,
            d / IXY_RS_INSTRUCTIONS,
            steps / f.packets(),
            100.0 * f.run.empty_steps as f64 / steps,
            100.0 * f.run.partial_steps as f64 / steps,
            f.run.held_tails,
            f.run.reg_writes as f64 / sending,
            f.run.reg_reads as f64 / f.packets(),
            opt(f.wall_median(), 2),
            if f.run.clean() { "ok" } else { "FAIL" }
        );
    }
    let _ = writeln!(
        s,
        "  driver+app = all instructions collected in the measured polls (driver rx + tx, \
         forwarder's touch, mempool) / packets; /ixy C, /ixy.rs = divided by the published \
         batch-32 figure"
    );
    let _ = writeln!(
        s,
        "  polls/pkt = measured polls per packet; empty/partial = polls that sent 0 / \
         1..batch-1 packets; held TDT = tail writes that reached the model 1-2 polls late"
    );
    let _ = writeln!(
        s,
        "  writes/sendpoll = register writes per poll that sent (RDT + TDT = 2); * Mpps wall \
         = median wall clock of the measured polls WITH the model inside, not a hardware figure"
    );
    if let Some(b) = &r.breakdown {
        let _ = writeln!(
            s,
            "\nwhere the instructions go at batch {} (self cost per packet, top items):",
            b.batch
        );
        for (name, ir) in b.items.iter().take(12) {
            let _ = writeln!(s, "  {ir:>8.1}  {name}");
        }
    }
    let _ = writeln!(s, "\nmempool alloc + free per packet (pool of 4096, one thread):");
    let _ = writeln!(
        s,
        "{:>16} {:>10} {:>12} {:>18}",
        "operation", "Ir/pkt", "ns/pkt wall", "cross-thread ns/pkt"
    );
    for m in &r.mempool {
        let op = if m.single {
            "alloc()+drop".to_string()
        } else {
            format!("batch {:>3}", m.batch)
        };
        let _ = writeln!(
            s,
            "{:>16} {:>10.1} {:>12} {:>18}",
            op,
            m.per_packet(),
            opt(m.wall_ns, 1),
            opt(m.cross_thread_ns, 1)
        );
    }
    let _ = writeln!(
        s,
        "  batch N = alloc_batch(N) then PacketBatch::clear() (bulk free); cross-thread = \
         allocate here, free on another thread (batch + channel hand-over included, wall clock)"
    );
    s
}

pub(super) fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(super) fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "null".to_string()
    }
}

fn json_opt(v: Option<f64>) -> String {
    v.map(json_num).unwrap_or_else(|| "null".to_string())
}

/// fwd.json.
pub fn json(r: &BenchReport) -> String {
    let mut s = String::new();
    s.push_str("{\n");
    let _ = writeln!(s, "  \"benchmark\": \"oxnet bench\",");
    let _ = writeln!(s, "  \"valgrind\": {},", json_str(&r.valgrind));
    let _ = writeln!(
        s,
        "  \"method\": {},",
        json_str(&format!(
            "instructions counted by callgrind inside measured_forward_step (Forwarder::step \
                 only, one direction, 60-byte frames, rings of 512, flow control on), collection \
                 switched off inside the model (--toggle-collect on the wrapper's \
                 uncounted_model_read32/write32); nothing subtracted. Mix: {}",
            super::fwd::Mix::describe()
        ))
    );
    let _ = writeln!(s, "  \"anchors\": {{");
    let _ = writeln!(
        s,
        "    \"note\": \"published ixy figures at batch 32, not measured here\","
    );
    let _ = writeln!(s, "    \"ixy_c_instructions_per_packet\": {IXY_C_INSTRUCTIONS},");
    let _ = writeln!(s, "    \"ixy_c_cycles_per_packet\": {IXY_C_CYCLES},");
    let _ = writeln!(s, "    \"ixy_rs_instructions_per_packet\": {IXY_RS_INSTRUCTIONS},");
    let _ = writeln!(s, "    \"target_instructions_per_packet\": {TARGET_INSTRUCTIONS}");
    let _ = writeln!(s, "  }},");
    let _ = writeln!(s, "  \"forward\": [");
    for (i, f) in r.fwd.iter().enumerate() {
        let d = f.driver_app_per_packet();
        let runs: Vec<String> = f.wall_mpps.iter().map(|&v| json_num(v)).collect();
        let _ = write!(
            s,
            "    {{\"batch\": {}, \"packets\": {}, \"steps\": {}, \"partial_steps\": {}, \
             \"empty_steps\": {}, \"arrivals_none\": {}, \"arrivals_partial\": {}, \
             \"arrivals_full\": {}, \"held_tails\": {}, \"collected_ir\": {}, \
             \"driver_app_ir_per_packet\": {}, \"ratio_to_ixy_c\": {}, \"ratio_to_ixy_rs\": {}, \
             \"register_writes\": {}, \"register_reads\": {}, \"register_writes_per_step\": {}, \
             \"injected\": {}, \"captured\": {}, \"duplicated\": {}, \"reordered\": {}, \"faults\": {}, \
             \"tx_ring_full\": {}, \"wall_mpps_with_model\": [{}], \
             \"wall_mpps_with_model_median\": {}}}",
            f.batch,
            f.run.forwarded,
            f.run.steps,
            f.run.partial_steps,
            f.run.empty_steps,
            f.run.arrive_none,
            f.run.arrive_partial,
            f.run.arrive_full,
            f.run.held_tails,
            f.collected_ir,
            json_num(d),
            json_num(d / IXY_C_INSTRUCTIONS),
            json_num(d / IXY_RS_INSTRUCTIONS),
            f.run.reg_writes,
            f.run.reg_reads,
            json_num(f.run.reg_writes as f64 / f.run.steps.max(1) as f64),
            f.run.injected,
            f.run.captured,
            f.run.duplicated,
            f.run.reordered,
            f.run.faults,
            f.run.ring_full,
            runs.join(", "),
            json_opt(f.wall_median())
        );
        s.push_str(if i + 1 < r.fwd.len() { ",\n" } else { "\n" });
    }
    let _ = writeln!(s, "  ],");
    match &r.breakdown {
        Some(b) => {
            let _ = writeln!(
                s,
                "  \"breakdown\": {{\"batch\": {}, \"self_ir_per_packet\": [",
                b.batch
            );
            for (i, (name, ir)) in b.items.iter().enumerate() {
                let _ = write!(
                    s,
                    "    {{\"function\": {}, \"ir_per_packet\": {}}}",
                    json_str(name),
                    json_num(*ir)
                );
                s.push_str(if i + 1 < b.items.len() { ",\n" } else { "\n" });
            }
            let _ = writeln!(s, "  ]}},");
        }
        None => {
            let _ = writeln!(s, "  \"breakdown\": null,");
        }
    }
    let _ = writeln!(s, "  \"mempool\": [");
    for (i, m) in r.mempool.iter().enumerate() {
        let _ = write!(
            s,
            "    {{\"operation\": {}, \"batch\": {}, \"packets\": {}, \"collected_ir\": {}, \
             \"ir_per_packet\": {}, \"wall_ns_per_packet\": {}, \"cross_thread_ns_per_packet\": {}}}",
            json_str(if m.single { "alloc+drop" } else { "alloc_batch+clear" }),
            m.batch,
            m.packets,
            m.collected_ir,
            json_num(m.per_packet()),
            json_opt(m.wall_ns),
            json_opt(m.cross_thread_ns)
        );
        s.push_str(if i + 1 < r.mempool.len() { ",\n" } else { "\n" });
    }
    let _ = writeln!(s, "  ]");
    s.push_str("}\n");
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A "nice" upper bound for an axis: 1, 2, 2.5 or 5 times a power of ten.
fn nice_ceil(v: f64) -> f64 {
    let v = v.max(1.0);
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

/// fwd.svg: instructions per packet against batch size (log2 x axis), with
/// ixy's published figures as horizontal reference lines.
pub fn svg(r: &BenchReport) -> String {
    let (w, h) = (760.0, 460.0);
    let (left, right, top, bottom) = (70.0, 200.0, 50.0, 60.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let fwd: Vec<(f64, f64)> = r
        .fwd
        .iter()
        .map(|f| (f.batch as f64, f.driver_app_per_packet()))
        .collect();
    let pool: Vec<(f64, f64)> = r
        .mempool
        .iter()
        .filter(|m| !m.single)
        .map(|m| (m.batch as f64, m.per_packet()))
        .collect();
    let ymax_data = fwd
        .iter()
        .chain(pool.iter())
        .map(|p| p.1)
        .fold(IXY_RS_INSTRUCTIONS, f64::max);
    let ymax = nice_ceil(ymax_data * 1.05);
    let xs: Vec<f64> = fwd.iter().chain(pool.iter()).map(|p| p.0).collect();
    let xmin = xs.iter().cloned().fold(1.0, f64::min).log2().floor();
    let xmax = xs.iter().cloned().fold(256.0, f64::max).log2().ceil();
    let xspan = (xmax - xmin).max(1.0);
    let x = |b: f64| left + (b.log2() - xmin) / xspan * pw;
    let y = |v: f64| top + ph - v / ymax * ph;

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(s, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">oxnet forwarder: \
         instructions per packet (driver + app, model kept out of the count)</text>",
        left + pw / 2.0
    );
    // Grid and y ticks.
    for i in 0..=5 {
        let v = ymax * i as f64 / 5.0;
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            v.round()
        );
    }
    // x ticks at powers of two.
    let mut e = xmin;
    while e <= xmax + 1e-9 {
        let b = 2f64.powf(e);
        let xx = x(b);
        let _ = writeln!(
            s,
            "<line x1=\"{xx:.1}\" y1=\"{top}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\
             <text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + ph,
            top + ph + 18.0,
            b.round()
        );
        e += 1.0;
    }
    let _ = writeln!(
        s,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#333\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">batch size (packets, log2 scale)</text>",
        left + pw / 2.0,
        h - 18.0
    );
    let _ = writeln!(
        s,
        "<text transform=\"translate(18 {:.1}) rotate(-90)\" text-anchor=\"middle\">instructions per packet</text>",
        top + ph / 2.0
    );
    // Reference lines.
    let refs = [
        (IXY_C_INSTRUCTIONS, "#2a9d8f", "ixy C (published, b32)"),
        (IXY_RS_INSTRUCTIONS, "#e76f51", "ixy.rs (published, b32)"),
        (TARGET_INSTRUCTIONS, "#999", "target"),
    ];
    for (v, color, _) in refs {
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"{color}\" \
             stroke-dasharray=\"6 4\" stroke-width=\"1.5\"/>",
            left + pw
        );
    }
    let series = [
        (&fwd, "#1d4ed8", "oxnet fwd, driver+app"),
        (&pool, "#d97706", "mempool alloc+free"),
    ];
    for (points, color, _) in series {
        if points.is_empty() {
            continue;
        }
        let path: Vec<String> = points
            .iter()
            .map(|&(b, v)| format!("{:.1},{:.1}", x(b), y(v)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
            path.join(" ")
        );
        for &(b, v) in points.iter() {
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\"><title>batch {}: {:.1}</title></circle>",
                x(b),
                y(v),
                b,
                v
            );
        }
    }
    // Value labels on the forwarder series.
    for &(b, v) in &fwd {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#1d4ed8\">{:.0}</text>",
            x(b),
            y(v) - 8.0,
            v
        );
    }
    // Legend.
    let lx = left + pw + 14.0;
    let mut ly = top + 10.0;
    for (points, color, label) in series {
        if points.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{:.1}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            lx + 22.0,
            lx + 28.0,
            ly + 4.0,
            xml(label)
        );
        ly += 20.0;
    }
    for (v, color, label) in refs {
        let _ = writeln!(
            s,
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{:.1}\" y2=\"{ly}\" stroke=\"{color}\" stroke-dasharray=\"6 4\" stroke-width=\"1.5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{} {}</text>",
            lx + 22.0,
            lx + 28.0,
            ly + 4.0,
            xml(label),
            v
        );
        ly += 20.0;
    }
    let _ = writeln!(
        s,
        "<text x=\"{lx}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">ixy figures: published,</text>\
         <text x=\"{lx}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">not measured here</text>",
        ly + 10.0,
        ly + 24.0
    );
    s.push_str("</svg>\n");
    s
}
