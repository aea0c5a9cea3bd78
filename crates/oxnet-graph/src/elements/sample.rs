//! RandomSample, after Click's documentation of the class
//! (elements/standard/randomsample.hh in Click).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | RandomSample([P], SAMPLE p, DROP q, ACTIVE b, SEED n) | 1/1-2 | push | each packet goes on with probability P (SAMPLE), else it is dropped, or sent to output 1 if there is one |
//!
//! P is a probability between 0 and 1; DROP q is SAMPLE 1-q. ACTIVE false
//! passes every packet on. The draws come from a generator seeded with
//! SEED (default 1): a run is repeatable, which is what a test of loss
//! recovery needs (Click draws from its global random source). Handlers:
//! `sampling_prob` and `drop_prob` (read and write), `active` (read and
//! write), `drops` (packets not passed on).

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::PacketBatch;

pub struct RandomSample {
    /// Probability of going on, in 1/2^32 units.
    threshold: u64,
    active: bool,
    state: u64,
    drops: u64,
}

impl Default for RandomSample {
    fn default() -> RandomSample {
        RandomSample {
            threshold: 1 << 32,
            active: true,
            state: 1,
            drops: 0,
        }
    }
}

fn probability(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a probability"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("'{text}' is not a probability between 0 and 1"));
    }
    Ok(p)
}

impl RandomSample {
    fn set(&mut self, sample: f64) {
        self.threshold = (sample * (1u64 << 32) as f64).round() as u64;
    }

    fn sample(&self) -> f64 {
        self.threshold as f64 / (1u64 << 32) as f64
    }

    /// xorshift64*: a 32-bit draw.
    fn draw(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32
    }
}

impl Element for RandomSample {
    fn class_name(&self) -> &'static str {
        "RandomSample"
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let p = a.positional_or("P");
        let sample = a.keyword("SAMPLE");
        let drop = a.keyword("DROP");
        let p = match (p, sample, drop) {
            (Some(p), None, None) | (None, Some(p), None) => probability(&p)?,
            (None, None, Some(q)) => 1.0 - probability(&q)?,
            (None, None, None) => return Err("give P, SAMPLE or DROP".into()),
            _ => return Err("give only one of P, SAMPLE and DROP".into()),
        };
        self.set(p);
        if let Some(v) = a.keyword("ACTIVE") {
            self.active = args::boolean(&v).map_err(|e| format!("ACTIVE: {e}"))?;
        }
        if let Some(v) = a.keyword("SEED") {
            self.state = args::unsigned(&v).map_err(|e| format!("SEED: {e}"))?.max(1);
        }
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        if !self.active || self.threshold >= 1 << 32 {
            ctx.forward(0, batch);
            return;
        }
        let mut batch = std::mem::take(batch);
        let two = ctx.noutputs() > 1;
        let mut kept = take_batch(batch.len());
        let mut rest = take_batch(if two { batch.len() } else { 0 });
        let len = batch.len();
        batch.consume_front(len, |p| {
            if self.draw() < self.threshold {
                kept.push(p);
            } else {
                self.drops += 1;
                if two {
                    rest.push(p);
                }
            }
        });
        recycle_batch(batch);
        ctx.forward(0, &mut kept);
        recycle_batch(kept);
        if two {
            ctx.forward(1, &mut rest);
        }
        recycle_batch(rest);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("sampling_prob", true, true),
            ("drop_prob", true, true),
            ("active", true, true),
            ("drops", true, false),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "sampling_prob" => Some(self.sample().to_string()),
            "drop_prob" => Some((1.0 - self.sample()).to_string()),
            "active" => Some(self.active.to_string()),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        match name {
            "sampling_prob" => Some(probability(value).map(|p| self.set(p))),
            "drop_prob" => Some(probability(value).map(|q| self.set(1.0 - q))),
            "active" => Some(args::boolean(value).map(|v| self.active = v)),
            _ => None,
        }
    }
}

pub const MODULE: super::Module = super::Module {
    classes: &["RandomSample"],
    create: |class| (class == "RandomSample").then(|| Box::new(RandomSample::default()) as Box<dyn Element>),
};

#[cfg(test)]
mod tests {
    fn run(config: &str) -> crate::Router {
        let mut r = crate::build("t.click", config, &[]).unwrap();
        r.use_simulated_time();
        r.run(&|| false);
        r
    }

    fn read(r: &crate::Router, spec: &str) -> u64 {
        let (e, h) = spec.split_once('.').unwrap();
        r.read_handler(r.find(e).unwrap(), h).unwrap().trim().parse().unwrap()
    }

    #[test]
    fn about_the_asked_share_goes_on_and_every_packet_is_counted_once() {
        let r = run("InfiniteSource(LIMIT 10000, STOP true) -> s :: RandomSample(DROP 0.1) -> kept :: Counter -> Discard; s[1] -> lost :: Counter -> Discard");
        let (kept, lost) = (read(&r, "kept.count"), read(&r, "lost.count"));
        assert_eq!(kept + lost, 10000);
        assert_eq!(read(&r, "s.drops"), lost);
        assert!((900..1100).contains(&lost), "about 10 %: {lost}");
        // Repeatable: the same seed, the same draws.
        let again = run("InfiniteSource(LIMIT 10000, STOP true) -> s :: RandomSample(DROP 0.1) -> kept :: Counter -> Discard; s[1] -> lost :: Counter -> Discard");
        assert_eq!(read(&again, "lost.count"), lost);
    }

    #[test]
    fn probability_one_and_inactive_pass_everything_and_bad_arguments_are_refused() {
        let r = run("InfiniteSource(LIMIT 100, STOP true) -> s :: RandomSample(1) -> c :: Counter -> Discard");
        assert_eq!(read(&r, "c.count"), 100);
        let r = run("InfiniteSource(LIMIT 100, STOP true) -> s :: RandomSample(DROP 1, ACTIVE false) -> c :: Counter -> Discard");
        assert_eq!(read(&r, "c.count"), 100);
        let r = run("InfiniteSource(LIMIT 100, STOP true) -> s :: RandomSample(DROP 1) -> c :: Counter -> Discard");
        assert_eq!(read(&r, "c.count"), 0);
        for bad in [
            "RandomSample(2)",
            "RandomSample()",
            "RandomSample(0.5, DROP 0.1)",
            "RandomSample(x)",
        ] {
            let e = crate::build("t.click", &format!("Idle -> {bad} -> Discard"), &[])
                .err()
                .unwrap();
            assert!(e.contains("RandomSample"), "{e}");
        }
    }
}
