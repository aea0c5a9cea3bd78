//! Rates: token-bucket and gap-rate limiters, rated and timed sources and
//! sinks, after Click's documentation of the classes of the same names
//! (elements/standard/*.hh in Click; the token bucket's behaviour after
//! Click's include/click/tokenbucket.hh, the gap rate's after gaprate.hh).
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | RatedUnqueue(RATE) | 1/1 | pull in, push out | a task pulls RATE packets per second and pushes them |
//! | BandwidthRatedUnqueue(RATE) | 1/1 | pull in, push out | the same, RATE a bandwidth (bytes per second) |
//! | RatedSplitter(RATE) | 1/1-2 | push | up to RATE packets per second to output 0, the rest to output 1 |
//! | BandwidthRatedSplitter(RATE) | 1/1-2 | push | the same, RATE a bandwidth |
//! | Shaper(RATE) | 1/1-2 | pull | at most RATE successful pulls per second (output 1: the pulls refused on 0) |
//! | BandwidthShaper(RATE) | 1/1-2 | pull | at most RATE bytes per second |
//! | RatedSource(DATA, RATE, LIMIT, ACTIVE) | 0/1 | agnostic | DATA packets at RATE per second, LIMIT in all |
//! | TimedSource(INTERVAL, DATA) | 0/1 | push | one DATA packet every INTERVAL |
//! | TimedSink(INTERVAL) | 1/0 | pull | pulls and drops one packet every INTERVAL |
//!
//! Time is the router's (simulated with `--simtime`): token buckets count
//! it in jiffies of a millisecond, as Click's user-level driver does
//! (CLICK_HZ 1000), so `--simtime` runs give Click's exact counts. An
//! element that waits for tokens sets a timer for the moment they are
//! there, so that a simulated clock can jump to it.

use crate::args::{self, Args};
use crate::element::*;
use crate::router::Ctx;
use crate::timer::TimerId;
use oxnet_driver::{Packet, PacketBatch};

/// Jiffies per second (Click's CLICK_HZ at user level).
pub const HZ: u64 = 1000;

/// The router's time in jiffies.
fn jiffies(ctx: &Ctx<'_>) -> u64 {
    ctx.now_us() / (1_000_000 / HZ)
}

/// A token bucket with Click's arithmetic (tokenbucket.hh): a rate in
/// tokens per second and a capacity in tokens; tokens are kept as
/// fractions of `u32::MAX` so that a capacity of C holds C tokens and a
/// tick (one jiffy) adds `rate * scale / HZ` fractions, rounded down but
/// at least one. That rounding is what makes Click's counts what they are
/// (RATE 2 with a one-token bucket: one token every 501 ms, not 500), so
/// it is kept exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    /// Fractions added per tick (0: idle, the bucket never refills).
    per_tick: u32,
    /// Fractions per token: `u32::MAX / capacity`.
    scale: u32,
    /// Ticks from empty to full.
    ticks_to_full: u64,
    /// Fractions in the bucket.
    fractions: u32,
    /// The tick of the last refill; None before the first, which fills
    /// the bucket (Click's counters start at time point 0, long before
    /// the router's first jiffy).
    at: Option<u64>,
}

impl Default for TokenBucket {
    fn default() -> TokenBucket {
        TokenBucket::new(0, 0)
    }
}

impl TokenBucket {
    /// A bucket of `rate` tokens per second holding at most `capacity`
    /// tokens; idle if either is 0. The capacity is raised to one tick's
    /// worth of tokens if smaller (Click's `TokenRateX::assign`).
    pub fn new(rate: u32, capacity: u32) -> TokenBucket {
        let mut tb = TokenBucket {
            per_tick: 0,
            scale: 1,
            ticks_to_full: u64::MAX,
            fractions: 0,
            at: None,
        };
        tb.assign(rate, capacity);
        tb
    }

    /// Changes the rate and capacity, keeping the tokens held as a number
    /// of tokens (Click's `assign_adjust`).
    pub fn assign_adjust(&mut self, rate: u32, capacity: u32) {
        let old_scale = self.scale;
        self.assign(rate, capacity);
        if old_scale != self.scale {
            let f = u64::from(self.fractions) * u64::from(self.scale) / u64::from(old_scale);
            self.fractions = f.min(u64::from(u32::MAX)) as u32;
        }
    }

    /// Changes the rate and capacity, keeping the fractions held (Click's
    /// `assign`, what a reconfiguration does).
    pub fn assign(&mut self, rate: u32, capacity: u32) {
        let (mut rate, mut capacity) = (rate, capacity);
        if capacity == 0 {
            rate = 0;
            capacity = u32::MAX;
        }
        if rate != 0 {
            let least = (u64::from(rate) - 1) / HZ + 1;
            capacity = capacity.max(least as u32);
        }
        self.scale = u32::MAX / capacity;
        let per_tick = (u64::from(rate) * u64::from(self.scale) / HZ).min(u64::from(u32::MAX)) as u32;
        if rate != 0 {
            self.per_tick = per_tick.max(1);
            self.ticks_to_full = u64::from(u32::MAX - 1) / u64::from(self.per_tick) + 1;
        } else {
            self.per_tick = 0;
            self.ticks_to_full = u64::MAX;
        }
    }

    /// Whether the bucket never refills.
    pub fn idle(&self) -> bool {
        self.per_tick == 0
    }

    /// The rate in tokens per second, as recomputed from the fractions
    /// (Click's `rate()`: it may differ slightly from the one given).
    pub fn rate(&self) -> u32 {
        let r = (u64::from(self.per_tick) * HZ + u64::from(self.per_tick) / 2) / u64::from(self.scale);
        r.min(u64::from(u32::MAX)) as u32
    }

    /// The capacity in tokens.
    pub fn capacity(&self) -> u32 {
        u32::MAX / self.scale
    }

    /// Whole tokens held.
    pub fn size(&self) -> u32 {
        self.fractions / self.scale
    }

    /// `tokens` as fractions; None if more than the bucket can hold.
    fn fraction(&self, tokens: u32) -> Option<u32> {
        tokens.checked_mul(self.scale)
    }

    /// Sets the bucket to hold `tokens` (full if more than it can hold).
    pub fn set(&mut self, tokens: u32) {
        self.fractions = self.fraction(tokens).unwrap_or(u32::MAX);
    }

    /// Fills the bucket.
    pub fn set_full(&mut self) {
        self.fractions = u32::MAX;
    }

    /// Adds the tokens earned since the last refill, up to the capacity.
    pub fn refill(&mut self, now: u64) {
        match self.at {
            // An idle bucket never fills, not even the first time.
            None if self.idle() => {}
            None => self.fractions = u32::MAX,
            Some(at) => {
                let ticks = now.saturating_sub(at);
                if ticks >= self.ticks_to_full {
                    self.fractions = u32::MAX;
                } else if ticks > 0 {
                    let f = u64::from(self.fractions) + ticks * u64::from(self.per_tick);
                    self.fractions = f.min(u64::from(u32::MAX)) as u32;
                }
            }
        }
        self.at = Some(now);
    }

    /// Whether the bucket holds `tokens`.
    pub fn contains(&self, tokens: u32) -> bool {
        self.fraction(tokens).is_some_and(|f| f <= self.fractions)
    }

    /// Takes `tokens` out (down to empty).
    pub fn remove(&mut self, tokens: u32) {
        let f = self.fraction(tokens).unwrap_or(u32::MAX);
        self.fractions = self.fractions.saturating_sub(f);
    }

    /// Takes `tokens` out if the bucket holds them.
    pub fn remove_if(&mut self, tokens: u32) -> bool {
        if self.contains(tokens) {
            self.remove(tokens);
            true
        } else {
            false
        }
    }

    /// Ticks until the bucket holds `tokens` (None: never).
    pub fn ticks_until(&self, tokens: u32) -> Option<u64> {
        let f = self.fraction(tokens)?;
        if f <= self.fractions {
            Some(0)
        } else if self.per_tick == 0 {
            None
        } else {
            Some(u64::from(f - self.fractions - 1) / u64::from(self.per_tick) + 1)
        }
    }
}

/// What the bandwidth elements keep in hand before letting a packet go:
/// 128 KiB of tokens (Click's `tb_bandwidth_thresh`), added to their
/// bucket's capacity, so that a packet of any size can pass.
pub const BANDWIDTH_THRESHOLD: u32 = 131_072;

/// The argument parsing every token-bucket element shares (Click's
/// RatedUnqueue documentation): RATE (packets per second, or a bandwidth
/// for the Bandwidth classes), and the capacity as BURST_DURATION (time,
/// default 20 ms: capacity = RATE x duration) or BURST_SIZE (tokens;
/// BURST_BYTES for the Bandwidth classes), not both.
fn configure_bucket(a: &mut Args, bandwidth: bool) -> Result<(TokenBucket, Burst), String> {
    let text = a.required("RATE")?;
    let rate = parse_rate(&text, bandwidth)?;
    let duration = a.keyword("BURST_DURATION");
    let size = a.keyword(if bandwidth { "BURST_BYTES" } else { "BURST_SIZE" });
    let burst = match (duration, size) {
        (Some(_), Some(_)) => return Err("cannot specify both BURST_DURATION and BURST_SIZE".into()),
        (None, Some(s)) => Burst::Tokens(
            args::unsigned(&s)
                .map_err(|e| format!("BURST_SIZE: {e}"))?
                .min(u64::from(u32::MAX)) as u32,
        ),
        (Some(d), None) => {
            Burst::Millis((args::seconds(&d).map_err(|e| format!("BURST_DURATION: {e}"))? * 1000.0).round() as u64)
        }
        (None, None) => Burst::Millis(20),
    };
    Ok((TokenBucket::new(rate, burst.capacity(rate, bandwidth)), burst))
}

/// How the capacity of a token-bucket element was given: kept so that a
/// new rate (a write to `rate`, Click's reconfiguration) recomputes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Burst {
    /// BURST_DURATION (default 20 ms): capacity = rate x duration.
    Millis(u64),
    /// BURST_SIZE / BURST_BYTES.
    Tokens(u32),
}

impl Burst {
    /// The bucket's capacity at `rate`: at least one token, and the
    /// Bandwidth classes add their [`BANDWIDTH_THRESHOLD`].
    fn capacity(self, rate: u32, bandwidth: bool) -> u32 {
        let tokens = match self {
            Burst::Tokens(t) => t,
            Burst::Millis(ms) => (u64::from(rate) * ms / 1000).min(u64::from(u32::MAX)) as u32,
        };
        let tokens = if bandwidth {
            tokens.saturating_add(BANDWIDTH_THRESHOLD)
        } else {
            tokens
        };
        tokens.max(1)
    }
}

/// RATE as an integer rate, or a bandwidth in bytes per second.
fn parse_rate(text: &str, bandwidth: bool) -> Result<u32, String> {
    let v = if bandwidth {
        args::bandwidth(text).map_err(|e| format!("RATE: {e}"))?.round() as u64
    } else {
        args::unsigned(text).map_err(|e| format!("RATE: {e}"))?
    };
    u32::try_from(v).map_err(|_| format!("RATE: {v} is too large"))
}

/// A bandwidth as Click prints one (BandwidthArg): bits per second in
/// kbps, Mbps or Gbps, bytes per second in MBps above 2^29.
pub fn unparse_bandwidth(bytes: u32) -> String {
    fn decimal(value: u64, digits: u32) -> String {
        let div = 10u64.pow(digits);
        let frac = format!("{:0width$}", value % div, width = digits as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            format!("{}", value / div)
        } else {
            format!("{}.{frac}", value / div)
        }
    }
    let b = u64::from(bytes);
    if bytes >= 0x2000_0000 {
        decimal(b, 6) + "MBps"
    } else if bytes >= 125_000_000 {
        decimal(b * 8, 9) + "Gbps"
    } else if bytes >= 125_000 {
        decimal(b * 8, 6) + "Mbps"
    } else {
        decimal(b * 8, 3) + "kbps"
    }
}

fn rate_text(tb: &TokenBucket, bandwidth: bool) -> String {
    if bandwidth {
        unparse_bandwidth(tb.rate())
    } else {
        tb.rate().to_string()
    }
}

/// A timer the element keeps at most one of: the wake-up for when its
/// tokens are there (what lets a simulated clock jump there).
#[derive(Default)]
struct WakeUp(Option<TimerId>);

impl WakeUp {
    fn after_jiffies(&mut self, ticks: u64, ctx: &mut Ctx<'_>) {
        if self.0.is_none() {
            self.0 = Some(ctx.schedule_after_us(ticks.saturating_mul(1_000_000 / HZ)));
        }
    }
    fn at_us(&mut self, at: u64, ctx: &mut Ctx<'_>) {
        if self.0.is_none() {
            let now = ctx.now_us();
            self.0 = Some(ctx.schedule_after_us(at.saturating_sub(now).max(1)));
        }
    }
    fn fired(&mut self, id: TimerId) -> bool {
        if self.0 == Some(id) {
            self.0 = None;
            true
        } else {
            false
        }
    }
}

/// Most packets a task moves in one run.
const TASK_BURST: usize = 32;

/// RatedUnqueue(RATE, BURST_DURATION, BURST_SIZE) and
/// BandwidthRatedUnqueue(RATE, BURST_DURATION, BURST_BYTES): a task pulls
/// packets as long as the token bucket allows and pushes them. One token
/// a packet; the Bandwidth class lets a packet go while the bucket holds
/// [`BANDWIDTH_THRESHOLD`] and takes its length in bytes. The task
/// sleeps while a queue upstream says it is empty (Click's empty
/// notifier, [`crate::router::Ctx::upstream_nonempty`]). Handlers:
/// `rate` (read/write), `active` (read/write), `calls` (task statistics,
/// as Click's).
pub struct RatedUnqueue {
    class: &'static str,
    bandwidth: bool,
    tb: TokenBucket,
    burst: Burst,
    active: bool,
    wake: WakeUp,
    runs: u64,
    pushes: u64,
    failed_pulls: u64,
    empty_runs: u64,
}

impl RatedUnqueue {
    pub fn new(class: &'static str) -> RatedUnqueue {
        RatedUnqueue {
            class,
            bandwidth: class.starts_with('B'),
            tb: TokenBucket::default(),
            burst: Burst::Millis(20),
            active: true,
            wake: WakeUp::default(),
            runs: 0,
            pushes: 0,
            failed_pulls: 0,
            empty_runs: 0,
        }
    }

    /// Tokens a packet needs before it may be pulled.
    fn needed(&self) -> u32 {
        if self.bandwidth {
            BANDWIDTH_THRESHOLD
        } else {
            1
        }
    }
}

impl Element for RatedUnqueue {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn processing(&self) -> &'static str {
        PULL_TO_PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        (self.tb, self.burst) = configure_bucket(a, self.bandwidth)?;
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        // Asleep while the queue upstream is empty (Click's empty
        // notifier: the task is not even scheduled then).
        if !self.active || ctx.upstream_nonempty(0) == Some(false) {
            return false;
        }
        self.runs += 1;
        self.tb.refill(jiffies(ctx));
        let needed = self.needed();
        if !self.tb.contains(needed) {
            // Sleep until the tokens are there (Click's timer).
            if let Some(ticks) = self.tb.ticks_until(needed) {
                self.wake.after_jiffies(ticks, ctx);
            }
            self.empty_runs += 1;
            return false;
        }
        let mut out = PacketBatch::with_capacity(TASK_BURST);
        while out.len() < TASK_BURST && self.tb.contains(needed) {
            if !out.is_empty() && ctx.upstream_nonempty(0) == Some(false) {
                break;
            }
            let Some(mut one) = ctx.pull(0, 1) else {
                self.failed_pulls += 1;
                break;
            };
            let Some(p) = one.pop() else {
                self.failed_pulls += 1;
                break;
            };
            self.tb.remove(if self.bandwidth { p.len() as u32 } else { 1 });
            out.push(p);
        }
        if out.is_empty() {
            self.empty_runs += 1;
            return false;
        }
        self.pushes += out.len() as u64;
        ctx.push(0, out);
        true
    }
    fn run_timer(&mut self, id: TimerId, _ctx: &mut Ctx<'_>) {
        self.wake.fired(id);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("rate", true, true), ("active", true, true), ("calls", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "rate" => Some(rate_text(&self.tb, self.bandwidth)),
            "active" => Some(self.active.to_string()),
            "calls" => Some(format!(
                "{} calls to run_task()\n{} empty runs\n{} pushes\n{} failed pulls\n",
                self.runs, self.empty_runs, self.pushes, self.failed_pulls
            )),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "rate" => parse_rate(value.trim(), self.bandwidth)
                .map(|r| self.tb.assign(r, self.burst.capacity(r, self.bandwidth))),
            "active" => args::boolean(value).map(|v| self.active = v),
            _ => return None,
        })
    }
}

/// RatedSplitter(RATE, BURST_DURATION, BURST_SIZE) and
/// BandwidthRatedSplitter(RATE, BURST_DURATION, BURST_BYTES): packets
/// within the token bucket's rate go to output 0, the others to output 1
/// (dropped, and counted in `drops`, if output 1 is not connected).
/// Unlike a meter, RATE still passes when the input is faster. Handlers:
/// `rate` (read/write), `drops`.
pub struct RatedSplitter {
    class: &'static str,
    bandwidth: bool,
    tb: TokenBucket,
    burst: Burst,
    drops: u64,
}

impl RatedSplitter {
    pub fn new(class: &'static str) -> RatedSplitter {
        RatedSplitter {
            class,
            bandwidth: class.starts_with('B'),
            tb: TokenBucket::default(),
            burst: Burst::Millis(20),
            drops: 0,
        }
    }
}

impl Element for RatedSplitter {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        (self.tb, self.burst) = configure_bucket(a, self.bandwidth)?;
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let mut batch = std::mem::take(batch);
        self.tb.refill(jiffies(ctx));
        let mut pass = PacketBatch::with_capacity(batch.len());
        let mut rest = PacketBatch::with_capacity(batch.len());
        let n = batch.len();
        let (tb, bandwidth) = (&mut self.tb, self.bandwidth);
        batch.consume_front(n, |p| {
            let ok = if bandwidth {
                let ok = tb.contains(BANDWIDTH_THRESHOLD);
                if ok {
                    tb.remove(p.len() as u32);
                }
                ok
            } else {
                tb.remove_if(1)
            };
            if ok {
                pass.push(p)
            } else {
                rest.push(p)
            }
        });
        ctx.push(0, pass);
        if ctx.noutputs() > 1 {
            ctx.push(1, rest);
        } else {
            self.drops += rest.len() as u64;
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("rate", true, true), ("drops", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "rate" => Some(rate_text(&self.tb, self.bandwidth)),
            "drops" => Some(self.drops.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "rate").then(|| {
            parse_rate(value.trim(), self.bandwidth).map(|r| self.tb.assign(r, self.burst.capacity(r, self.bandwidth)))
        })
    }
}

/// Click's GapRate (gaprate.hh): a uniform rate of events, counted per
/// second. `need_update` says whether the events so far are behind the
/// true rate at time `now`; up to a second of lag is made up in a burst,
/// more is forgotten.
#[derive(Debug, Clone)]
pub struct GapRate {
    rate: u32,
    /// Microseconds per event, scaled by 2^UGAP_SHIFT.
    ugap: u64,
    /// Events this second (may go negative when a second ends).
    count: i64,
    /// The current second (None: reset).
    second: Option<u64>,
}

const UGAP_SHIFT: u32 = 12;
/// The fastest rate a GapRate can follow: a microsecond per event, in
/// fixed point.
const GAP_MAX_RATE: u64 = 1_000_000 << UGAP_SHIFT;

impl GapRate {
    pub fn new(rate: u32) -> GapRate {
        let rate = u64::from(rate).min(GAP_MAX_RATE) as u32;
        GapRate {
            rate,
            ugap: if rate == 0 {
                GAP_MAX_RATE + 1
            } else {
                GAP_MAX_RATE / u64::from(rate)
            },
            count: 0,
            second: None,
        }
    }

    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Forgets the past: the next `need_update` starts a new count.
    pub fn reset(&mut self) {
        self.second = None;
    }

    /// Whether an event is due at `now_us`.
    pub fn need_update(&mut self, now_us: u64) -> bool {
        let (sec, usec) = (now_us / 1_000_000, now_us % 1_000_000);
        let scaled = usec << UGAP_SHIFT;
        let need = (scaled / self.ugap) as i64;
        match self.second {
            None => {
                // Just after a reset an event is allowed if the true
                // process is at least half way to its next one.
                self.second = Some(sec);
                let half = scaled - need as u64 * self.ugap > self.ugap / 2;
                self.count = need + i64::from(half);
            }
            Some(s) if sec > s => {
                self.second = Some(sec);
                if self.count > 0 {
                    self.count -= i64::from(self.rate);
                }
            }
            _ => {}
        }
        need >= self.count
    }

    /// Counts `n` events (may be negative).
    pub fn update(&mut self, n: i64) {
        self.count += n;
    }

    /// When the next event will be due, in microseconds (None: never).
    pub fn expiry_us(&self) -> Option<u64> {
        let sec = self.second?;
        if self.rate == 0 {
            return None;
        }
        if self.count < 0 {
            return Some(sec * 1_000_000);
        }
        let rate = i64::from(self.rate);
        let (more, count) = (self.count / rate, self.count % rate);
        let usec = (count as u64 * self.ugap) >> UGAP_SHIFT;
        Some((sec + more as u64) * 1_000_000 + usec)
    }
}

/// Shaper(RATE) and BandwidthShaper(RATE): pull elements that let at
/// most RATE packets (Shaper) or RATE bytes (BandwidthShaper, RATE a
/// bandwidth) per second through, evenly spaced if pulled often (Click's
/// GapRate). Shaper's output 1 gives, when pulled, the packets that do
/// not meet the rate at that moment (pulled from upstream unshaped);
/// BandwidthShaper shapes on every output. A refused pull sets a timer
/// for when the next packet is due (a simulated clock jumps there).
/// Handlers: `rate` (read/write), `reset` (write).
pub struct Shaper {
    class: &'static str,
    bandwidth: bool,
    rate: GapRate,
    wake: WakeUp,
}

impl Shaper {
    pub fn new(class: &'static str) -> Shaper {
        Shaper {
            class,
            bandwidth: class.starts_with('B'),
            rate: GapRate::new(0),
            wake: WakeUp::default(),
        }
    }
}

impl Element for Shaper {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> &'static str {
        "1/1-2"
    }
    fn processing(&self) -> &'static str {
        PULL
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let rate = parse_rate(&a.required("RATE")?, self.bandwidth)?;
        self.rate = GapRate::new(rate);
        Ok(())
    }
    fn pull(&mut self, port: usize, max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        let now = ctx.now_us();
        if port == 1 && !self.bandwidth {
            if self.rate.need_update(now) {
                return None;
            }
            return ctx.pull(0, max);
        }
        let mut out = PacketBatch::with_capacity(max.min(TASK_BURST));
        while out.len() < max && self.rate.need_update(now) {
            let Some(p) = ctx.pull(0, 1).and_then(|mut b| b.pop()) else {
                break;
            };
            self.rate.update(if self.bandwidth { p.len() as i64 } else { 1 });
            out.push(p);
        }
        if !self.rate.need_update(now) {
            if let Some(at) = self.rate.expiry_us() {
                self.wake.at_us(at, ctx);
            }
        }
        (!out.is_empty()).then_some(out)
    }
    fn run_timer(&mut self, id: TimerId, _ctx: &mut Ctx<'_>) {
        self.wake.fired(id);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("rate", true, true), ("reset", false, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "rate").then(|| {
            if self.bandwidth {
                unparse_bandwidth(self.rate.rate())
            } else {
                self.rate.rate().to_string()
            }
        })
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "rate" => parse_rate(value.trim(), self.bandwidth).map(|r| self.rate = GapRate::new(r)),
            "reset" => {
                self.rate.reset();
                Ok(())
            }
            _ => return None,
        })
    }
}

/// The default DATA of RatedSource and TimedSource (Click's, at least 64
/// bytes).
pub const DEFAULT_DATA: &[u8] = b"Random bullshit in a packet, at least 64 bytes long. Well, now it is.";

/// A packet holding `data`, time-stamped now (None: the pool is empty).
fn make_packet(ctx: &Ctx<'_>, data: &[u8]) -> Option<Packet> {
    let mut p = super::standard::packet_from(ctx, data)?;
    p.anno_mut().timestamp_ns = (ctx.now_us() as i64).saturating_mul(1000);
    Some(p)
}

/// DATA repeated or cut to `len` bytes (LENGTH).
fn sized(data: &[u8], len: Option<usize>) -> Vec<u8> {
    match len {
        None => data.to_vec(),
        Some(len) if data.is_empty() => vec![0; len],
        Some(len) => data.iter().copied().cycle().take(len).collect(),
    }
}

/// RatedSource(DATA, RATE, LIMIT, ACTIVE; LENGTH, STOP, BANDWIDTH):
/// packets of DATA (LENGTH bytes if given) at RATE per second (default
/// 10), LIMIT in all (-1: no limit), while ACTIVE. BANDWIDTH sets RATE
/// from the packet length. STOP: stop the driver once LIMIT are sent. The
/// token bucket holds 2 tokens below 200 packets per second, RATE/100
/// above (Click's). Push: a task; pull: a packet when a token is there.
/// Handlers: `count`, `reset` (write), `data`, `length`, `rate`, `limit`,
/// `active` (read/write).
pub struct RatedSource {
    data: Vec<u8>,
    length: Option<usize>,
    tb: TokenBucket,
    limit: Option<u64>,
    active: bool,
    stop: bool,
    stopped: bool,
    count: u64,
    pushing: bool,
    wake: WakeUp,
}

impl Default for RatedSource {
    fn default() -> RatedSource {
        RatedSource {
            data: DEFAULT_DATA.to_vec(),
            length: None,
            tb: RatedSource::bucket(10),
            limit: None,
            active: true,
            stop: false,
            stopped: false,
            count: 0,
            pushing: true,
            wake: WakeUp::default(),
        }
    }
}

impl RatedSource {
    fn bucket(rate: u32) -> TokenBucket {
        TokenBucket::new(rate, if rate < 200 { 2 } else { rate / 100 })
    }

    /// Whether LIMIT is reached; asks the driver to stop then if STOP.
    fn done(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let done = self.limit.is_some_and(|l| self.count >= l);
        if done && self.stop && !self.stopped {
            self.stopped = true;
            ctx.stop();
        }
        done
    }

    fn packet(&self, ctx: &Ctx<'_>) -> Option<Packet> {
        make_packet(ctx, &sized(&self.data, self.length))
    }
}

impl Element for RatedSource {
    fn class_name(&self) -> &'static str {
        "RatedSource"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(d) = a.positional_or("DATA") {
            self.data = args::unquote(&d)?;
        }
        let mut rate = 10;
        if let Some(r) = a.positional_or("RATE") {
            rate = parse_rate(&r, false)?;
        }
        if let Some(l) = a.positional_or("LIMIT") {
            let l = args::integer(&l).map_err(|e| format!("LIMIT: {e}"))?;
            self.limit = u64::try_from(l).ok();
        }
        if let Some(v) = a.positional_or("ACTIVE") {
            self.active = args::boolean(&v).map_err(|e| format!("ACTIVE: {e}"))?;
        }
        for key in ["LENGTH", "DATASIZE"] {
            if let Some(v) = a.keyword(key) {
                let n = args::integer(&v).map_err(|e| format!("{key}: {e}"))?;
                self.length = usize::try_from(n).ok();
            }
        }
        if let Some(v) = a.keyword("STOP") {
            self.stop = args::boolean(&v).map_err(|e| format!("STOP: {e}"))?;
        }
        let mut burst = None;
        if let Some(b) = a.keyword("BANDWIDTH") {
            let bw = parse_rate(&b, true)?;
            if bw > 0 {
                let len = self.length.unwrap_or(self.data.len()).max(1) as u32;
                rate = bw / len;
                let base = if rate < 200 { 2 } else { rate / 100 };
                burst = Some(base.max(2 * self.length.unwrap_or(0) as u32));
            }
        }
        self.tb = match burst {
            Some(b) => TokenBucket::new(rate, b),
            None => RatedSource::bucket(rate),
        };
        self.tb.set(1);
        Ok(())
    }
    fn initialize(&mut self, ports: &Ports) -> Result<(), String> {
        self.pushing = !ports.output_pull.first().copied().unwrap_or(false);
        Ok(())
    }
    fn has_task(&self) -> bool {
        true
    }
    fn run_task(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.pushing || !self.active || ctx.noutputs() == 0 || self.done(ctx) {
            return false;
        }
        self.tb.refill(jiffies(ctx));
        let mut batch = PacketBatch::with_capacity(4);
        while batch.len() < TASK_BURST && self.limit.is_none_or(|l| self.count < l) && self.tb.remove_if(1) {
            match self.packet(ctx) {
                Some(p) => batch.push(p),
                None => break,
            }
            self.count += 1;
        }
        if batch.is_empty() {
            if let Some(ticks) = self.tb.ticks_until(1) {
                self.wake.after_jiffies(ticks, ctx);
            }
            return false;
        }
        ctx.push(0, batch);
        true
    }
    fn pull(&mut self, _port: usize, _max: usize, ctx: &mut Ctx<'_>) -> Option<PacketBatch> {
        if !self.active || self.done(ctx) {
            return None;
        }
        self.tb.refill(jiffies(ctx));
        if !self.tb.remove_if(1) {
            // A timer for the next token: a simulated clock jumps there
            // and the puller asks again.
            if let Some(ticks) = self.tb.ticks_until(1) {
                self.wake.after_jiffies(ticks, ctx);
            }
            return None;
        }
        let p = self.packet(ctx)?;
        self.count += 1;
        let mut b = PacketBatch::with_capacity(1);
        b.push(p);
        Some(b)
    }
    fn run_timer(&mut self, id: TimerId, _ctx: &mut Ctx<'_>) {
        self.wake.fired(id);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("count", true, false),
            ("reset", false, true),
            ("data", true, true),
            ("length", true, true),
            ("rate", true, true),
            ("limit", true, true),
            ("active", true, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "count" => Some(self.count.to_string()),
            "data" => Some(String::from_utf8_lossy(&self.data).into_owned()),
            "length" => Some(self.length.map_or("-1".into(), |l| l.to_string())),
            "rate" => Some(self.tb.rate().to_string()),
            "limit" => Some(self.limit.map_or("-1".into(), |l| l.to_string())),
            "active" => Some(self.active.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "reset" => {
                self.count = 0;
                self.stopped = false;
                self.tb.set(1);
                Ok(())
            }
            "data" => {
                self.data = value.as_bytes().to_vec();
                Ok(())
            }
            "length" => args::integer(value).map(|n| self.length = usize::try_from(n).ok()),
            "rate" => {
                parse_rate(value.trim(), false).map(|r| self.tb.assign_adjust(r, if r < 200 { 2 } else { r / 100 }))
            }
            "limit" => args::integer(value).map(|l| self.limit = u64::try_from(l).ok()),
            "active" => args::boolean(value).map(|v| {
                if v && !self.active {
                    self.tb.set(1);
                }
                self.active = v;
            }),
            _ => return None,
        })
    }
}

/// Microseconds in a time argument.
fn interval_us(text: &str, key: &str) -> Result<u64, String> {
    let s = args::seconds(text).map_err(|e| format!("{key}: {e}"))?;
    Ok((s * 1e6).round() as u64)
}

/// A time in seconds as Click prints an interval (`0.5s`, `2s`).
fn unparse_interval(us: u64) -> String {
    let frac = format!("{:06}", us % 1_000_000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{}s", us / 1_000_000)
    } else {
        format!("{}.{frac}s", us / 1_000_000)
    }
}

/// TimedSource(INTERVAL, DATA; LIMIT, ACTIVE, STOP, HEADROOM): pushes a
/// packet of DATA every INTERVAL (default 0.5 s), LIMIT in all (-1, the
/// default: no limit), while ACTIVE; STOP: stop the driver after LIMIT.
/// HEADROOM is accepted and shown (the router's pool fixes the head
/// room). Handlers: `data`, `limit`, `interval`, `active`, `headroom`
/// (read/write), `count`, `reset` (write).
pub struct TimedSource {
    interval_us: u64,
    data: Vec<u8>,
    limit: i64,
    active: bool,
    stop: bool,
    headroom: u64,
    count: u64,
    timer: Option<TimerId>,
}

impl Default for TimedSource {
    fn default() -> TimedSource {
        TimedSource {
            interval_us: 500_000,
            data: DEFAULT_DATA.to_vec(),
            limit: -1,
            active: true,
            stop: false,
            headroom: 0,
            count: 0,
            timer: None,
        }
    }
}

impl TimedSource {
    fn schedule(&mut self, after: u64, ctx: &mut Ctx<'_>) {
        if self.timer.is_none() {
            self.timer = Some(ctx.schedule_after_us(after));
        }
    }
}

impl Element for TimedSource {
    fn class_name(&self) -> &'static str {
        "TimedSource"
    }
    fn port_count(&self) -> &'static str {
        PORTS_0_1
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(i) = a.positional_or("INTERVAL") {
            self.interval_us = interval_us(&i, "INTERVAL")?;
        }
        if let Some(d) = a.positional_or("DATA") {
            self.data = args::unquote(&d)?;
        }
        if let Some(l) = a.keyword("LIMIT") {
            self.limit = args::integer(&l).map_err(|e| format!("LIMIT: {e}"))?;
        }
        if let Some(v) = a.keyword("ACTIVE") {
            self.active = args::boolean(&v).map_err(|e| format!("ACTIVE: {e}"))?;
        }
        if let Some(v) = a.keyword("STOP") {
            self.stop = args::boolean(&v).map_err(|e| format!("STOP: {e}"))?;
        }
        if let Some(v) = a.keyword("HEADROOM") {
            self.headroom = args::unsigned(&v).map_err(|e| format!("HEADROOM: {e}"))?;
        }
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        if self.active {
            self.schedule(self.interval_us, ctx);
        }
    }
    fn run_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        if self.timer != Some(id) {
            return;
        }
        self.timer = None;
        if !self.active {
            return;
        }
        if self.limit < 0 || (self.count as i64) < self.limit {
            if let Some(p) = make_packet(ctx, &self.data) {
                let mut b = PacketBatch::with_capacity(1);
                b.push(p);
                ctx.push(0, b);
            }
            self.count += 1;
            self.schedule(self.interval_us, ctx);
        } else if self.stop {
            ctx.stop();
        }
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[
            ("data", true, true),
            ("limit", true, true),
            ("interval", true, true),
            ("active", true, true),
            ("count", true, false),
            ("headroom", true, true),
            ("reset", false, true),
        ]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "data" => Some(String::from_utf8_lossy(&self.data).into_owned()),
            "limit" => Some(self.limit.to_string()),
            "interval" => Some(unparse_interval(self.interval_us)),
            "active" => Some(self.active.to_string()),
            "count" => Some(self.count.to_string()),
            "headroom" => Some(self.headroom.to_string()),
            _ => None,
        }
    }
    fn write_handler(&mut self, name: &str, value: &str, ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        Some(match name {
            "data" => {
                self.data = value.as_bytes().to_vec();
                Ok(())
            }
            "limit" => args::integer(value).map(|l| self.limit = l),
            "interval" => match interval_us(value, "interval") {
                Ok(0) => Err("bad interval".into()),
                Ok(us) => {
                    self.interval_us = us;
                    Ok(())
                }
                Err(e) => Err(e),
            },
            "active" => args::boolean(value).map(|v| {
                self.active = v;
                if v {
                    self.schedule(0, ctx);
                }
            }),
            "headroom" => args::unsigned(value).map(|h| self.headroom = h),
            "reset" => {
                self.count = 0;
                if self.active {
                    self.schedule(0, ctx);
                }
                Ok(())
            }
            _ => return None,
        })
    }
}

/// TimedSink(INTERVAL): pulls one packet every INTERVAL (default 0.5 s)
/// and drops it. Handler: `interval` (read/write).
pub struct TimedSink {
    interval_us: u64,
    timer: Option<TimerId>,
}

impl Default for TimedSink {
    fn default() -> TimedSink {
        TimedSink {
            interval_us: 500_000,
            timer: None,
        }
    }
}

impl Element for TimedSink {
    fn class_name(&self) -> &'static str {
        "TimedSink"
    }
    fn port_count(&self) -> &'static str {
        PORTS_1_0
    }
    fn processing(&self) -> &'static str {
        PULL
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(i) = a.positional_or("INTERVAL") {
            self.interval_us = interval_us(&i, "INTERVAL")?;
        }
        Ok(())
    }
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        self.timer = Some(ctx.schedule_after_us(self.interval_us));
    }
    fn run_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        if self.timer != Some(id) {
            return;
        }
        drop(ctx.pull(0, 1));
        self.timer = Some(ctx.schedule_after_us(self.interval_us));
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("interval", true, true)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        (name == "interval").then(|| unparse_interval(self.interval_us))
    }
    fn write_handler(&mut self, name: &str, value: &str, _ctx: &mut Ctx<'_>) -> Option<Result<(), String>> {
        (name == "interval").then(|| match interval_us(value, "interval") {
            Ok(0) => Err("bad interval".into()),
            Ok(us) => {
                self.interval_us = us;
                Ok(())
            }
            Err(e) => Err(e),
        })
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &[
        "BandwidthRatedSplitter",
        "BandwidthRatedUnqueue",
        "BandwidthShaper",
        "RatedSource",
        "RatedSplitter",
        "RatedUnqueue",
        "Shaper",
        "TimedSink",
        "TimedSource",
    ],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "RatedUnqueue" => Box::new(RatedUnqueue::new("RatedUnqueue")),
        "BandwidthRatedUnqueue" => Box::new(RatedUnqueue::new("BandwidthRatedUnqueue")),
        "RatedSplitter" => Box::new(RatedSplitter::new("RatedSplitter")),
        "BandwidthRatedSplitter" => Box::new(RatedSplitter::new("BandwidthRatedSplitter")),
        "Shaper" => Box::new(Shaper::new("Shaper")),
        "BandwidthShaper" => Box::new(Shaper::new("BandwidthShaper")),
        "RatedSource" => Box::<RatedSource>::default(),
        "TimedSource" => Box::<TimedSource>::default(),
        "TimedSink" => Box::<TimedSink>::default(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_token_bucket_at_two_per_second_refills_in_501_ticks() {
        // RATE 2, capacity 1: 8589934 fractions a tick, 501 ticks to a
        // token (Click's RatedUnqueue-01: 20 packets in 10 s).
        let mut tb = TokenBucket::new(2, 1);
        tb.refill(0);
        assert!(tb.remove_if(1));
        assert!(!tb.contains(1));
        assert_eq!(tb.ticks_until(1), Some(501));
        tb.refill(500);
        assert!(!tb.contains(1));
        tb.refill(501);
        assert!(tb.contains(1));
        assert_eq!(tb.rate(), 2);
    }

    #[test]
    fn a_bucket_starts_full_and_holds_its_capacity() {
        let mut tb = TokenBucket::new(2, 50);
        tb.refill(7);
        assert_eq!(tb.size(), 50);
        for _ in 0..50 {
            assert!(tb.remove_if(1));
        }
        assert!(!tb.remove_if(1));
        // A long wait fills it again, and not beyond.
        tb.refill(1_000_000);
        assert_eq!(tb.size(), 50);
    }

    #[test]
    fn rate_100_with_one_token_takes_11_ticks_a_token() {
        // 429496729 fractions a tick: 10 ticks are 5 fractions short of
        // a token (Click's 909 or 910 packets in 10 s).
        let mut tb = TokenBucket::new(100, 1);
        tb.refill(0);
        tb.remove(1);
        assert_eq!(tb.ticks_until(1), Some(11));
    }

    #[test]
    fn an_idle_bucket_never_refills() {
        let mut tb = TokenBucket::new(0, 10);
        assert!(tb.idle());
        tb.refill(0);
        tb.refill(1_000_000);
        assert!(!tb.contains(1));
        assert_eq!(tb.ticks_until(1), None);
    }

    #[test]
    fn a_gap_rate_spaces_events_evenly() {
        // 10 events a second: one every 100 ms.
        let mut g = GapRate::new(10);
        let mut events = 0;
        for ms in 0..1000u64 {
            if g.need_update(1_000_000 + ms * 1000) {
                g.update(1);
                events += 1;
            }
        }
        assert_eq!(events, 10);
        assert!(!g.need_update(1_999_000));
        assert_eq!(g.expiry_us(), Some(2_000_000));
    }

    #[test]
    fn bandwidths_print_as_clicks() {
        assert_eq!(unparse_bandwidth(125_000), "1Mbps");
        assert_eq!(unparse_bandwidth(1000), "8kbps");
        assert_eq!(unparse_bandwidth(125_000_000), "1Gbps");
        assert_eq!(unparse_interval(500_000), "0.5s");
        assert_eq!(unparse_interval(2_000_000), "2s");
    }

    #[test]
    fn burst_arguments_set_the_capacity() {
        let (tb, _) = configure_bucket(&mut Args::new("RATE 2, BURST_SIZE 50"), false).unwrap();
        assert_eq!(tb.capacity(), 50);
        let (tb, _) = configure_bucket(&mut Args::new("2, BURST_DURATION 25"), false).unwrap();
        assert_eq!(tb.capacity(), 50);
        let (tb, burst) = configure_bucket(&mut Args::new("200"), false).unwrap();
        assert_eq!(tb.capacity(), 4);
        // A new rate keeps the 20 ms: 1000 per second holds 20.
        assert_eq!(burst.capacity(1000, false), 20);
        assert_eq!(burst.capacity(2, false), 1);
        assert!(configure_bucket(&mut Args::new("2, BURST_SIZE 5, BURST_DURATION 1"), false).is_err());
        let (tb, _) = configure_bucket(&mut Args::new("1000Bps, BURST_BYTES 100"), true).unwrap();
        assert_eq!(tb.capacity(), 100 + BANDWIDTH_THRESHOLD);
    }
}
