//! The command line of `oxnet loadgen`, and the checked options a run
//! uses. Short flags follow mutilate where the meaning is the same (`-s`
//! server, `-q` QPS, `-t` seconds, `-c` connections, `-T` threads, `-d`
//! depth, `-u` update ratio, `-r` records, `-K`/`-V`/`-i` distributions,
//! `-w` warm-up); where an older option already had mutilate's meaning
//! it carries mutilate's spelling as an alias (`--keys` is `-r
//! --records`, `--value-size` is `-V --valuesize`, `--arrival` is `-i
//! --iadist`). docs/stack.md's loadgen section has the table.

use super::etc::Generator;
use super::kv::{Fill, KvOptions, Proto};
use super::schedule::InterArrival;
use super::workload::EtcWorkload;
use clap::{Args, ValueEnum};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// How connections are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Connect, send, receive the echo, reset; one request per connection.
    Short,
    /// Connections opened once; request/response over each.
    Persistent,
}

impl Mode {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Short => "short",
            Mode::Persistent => "persistent",
        }
    }
}

/// `oxnet loadgen`'s arguments (see `oxnet loadgen --help`).
#[derive(Args, Debug)]
pub struct LoadgenArgs {
    /// The server, HOST:PORT (10.0.0.2:7, [fd00::2]:7, localhost:7).
    #[arg(long, short = 's', value_parser = parse_target, required_unless_present = "serve_echo")]
    pub target: Option<SocketAddr>,
    /// short (connect, send, receive, reset) or persistent connections.
    #[arg(long, value_enum, default_value_t = Mode::Persistent)]
    pub mode: Mode,
    /// Target requests per second over all threads (open loop); 0 is a
    /// closed loop (each connection sends its next request when the last
    /// is answered).
    #[arg(long, short = 'q', visible_alias = "qps", default_value_t = 0.0)]
    pub rate: f64,
    /// Inter-arrival times of the open loop: poisson (= exponential),
    /// fixed, or a mutilate generator scaled to the rate (fb_ia,
    /// pareto:LOC,SCALE,SHAPE, uniform:S, ...).
    #[arg(long, short = 'i', visible_alias = "iadist", value_name = "DIST", default_value = "poisson", value_parser = |s: &str| InterArrival::parse(s).map(Box::new))]
    pub arrival: Box<InterArrival>,
    /// Connections (persistent) or connections open at once (short).
    #[arg(long, short = 'c', default_value_t = 1)]
    pub connections: usize,
    /// Client threads (default 1); connections and rate are split
    /// between them. With --serve-echo: server threads (default: one per
    /// core this process may run on).
    #[arg(long, short = 'T')]
    pub threads: Option<usize>,
    /// Seconds to run (default 10 unless --requests is given).
    #[arg(long, short = 't', visible_alias = "duration", value_parser = crate::parse_seconds)]
    pub seconds: Option<f64>,
    /// Stop after this many requests (over all threads).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Bytes per request (and per echoed response).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// What a request is: echo (--size bytes back), or memcached's text
    /// or binary protocol (GET and SET of --keys keys with
    /// --value-size bytes, every answer checked).
    #[arg(long, value_enum, default_value_t = Proto::Echo)]
    pub proto: Proto,
    /// memcached: how many keys (records; key:0 ... key:N-1, or
    /// mutilate's names with -K); each thread first SETs its share of
    /// them; requests then draw keys uniformly.
    #[arg(long, short = 'r', visible_alias = "records", default_value_t = 1000)]
    pub keys: u64,
    /// memcached: value sizes in bytes: a number, or a mutilate
    /// generator (fb_value, pareto:..., uniform:S; a record's size is
    /// fixed by its number).
    #[arg(long, short = 'V', visible_alias = "valuesize", value_name = "BYTES|DIST", default_value = "100", value_parser = parse_generator)]
    pub value_size: Box<Generator>,
    /// memcached: key sizes from a mutilate generator (fb_key, a
    /// number, ...): keys are the record's number zero-padded to that
    /// length, as mutilate's; without it keys are key:N.
    #[arg(long, short = 'K', visible_alias = "keysize", value_name = "BYTES|DIST", value_parser = parse_generator)]
    pub key_size: Option<Box<Generator>>,
    /// memcached: the share of requests that are GETs after the fill
    /// (the rest are SETs), 0 to 1 (default 0.9).
    #[arg(long, conflicts_with = "update")]
    pub get_ratio: Option<f64>,
    /// memcached: the share of requests that are SETs (mutilate's
    /// update ratio; 1 - --get-ratio).
    #[arg(long, short = 'u')]
    pub update: Option<f64>,
    /// memcached: skip the fill (the keys were stored by an earlier
    /// run, e.g. --loadonly).
    #[arg(long, conflicts_with = "loadonly")]
    pub noload: bool,
    /// memcached: only SET every key once (closed loop), then end.
    #[arg(long)]
    pub loadonly: bool,
    /// Outstanding requests per connection (mutilate's depth); only 1
    /// is supported (no pipelining).
    #[arg(short = 'd', long, default_value_t = 1)]
    pub depth: usize,
    /// Seconds of load before the measured run (not counted).
    #[arg(short = 'w', long, value_name = "SECONDS", value_parser = crate::parse_seconds)]
    pub warmup: Option<f64>,
    /// Runs at rates MIN, MIN+STEP, ... MAX (requests per second), one
    /// summary each.
    #[arg(long, value_name = "MIN:MAX:STEP", conflicts_with = "search", value_parser = parse_scan)]
    pub scan: Option<Box<[f64; 3]>>,
    /// Finds the highest rate whose N-th percentile latency (from the
    /// scheduled time) is at most X microseconds: a closed-loop run for
    /// the peak, then a bisection; prints the run at the rate found.
    #[arg(long, value_name = "N:X", value_parser = parse_search)]
    pub search: Option<Box<[f64; 2]>>,
    /// Seconds a request may wait for its answer (and a connect for its
    /// handshake) before it counts as an error.
    #[arg(long, default_value_t = 5.0, value_parser = crate::parse_seconds)]
    pub timeout: f64,
    /// Seed of the open loop's inter-arrival times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of the summary line.
    #[arg(long)]
    pub json: bool,
    /// Instead of generating load: serve echo on this TCP port with epoll,
    /// SO_REUSEPORT, one thread per core (or --threads), until
    /// --seconds or Ctrl-C.
    #[arg(long, value_name = "PORT", conflicts_with_all = ["target", "requests", "rate"])]
    pub serve_echo: Option<u16>,
    /// With --serve-echo: serve on io_uring (a ring per thread,
    /// multishot accept, provided-buffer rings) instead of epoll.
    #[arg(long, requires = "serve_echo")]
    pub io_uring: bool,
    /// The echo server's address (default: [::], both families, or
    /// 0.0.0.0 where IPv6 is off).
    #[arg(long, requires = "serve_echo")]
    pub bind: Option<std::net::IpAddr>,
    /// Run on oxnet's own TCP/IP stack over this device instead of kernel
    /// sockets: sim:NAME[,wire=PEER], tap:NAME, memif:SOCKET,...,
    /// af_packet:IF, ... (`oxnet devices`).
    #[arg(long, value_name = "SPEC", conflicts_with = "serve_echo")]
    pub device: Option<String>,
    /// Our IPv4 address on oxnet's stack, ADDR or ADDR/PREFIX.
    #[arg(long, value_name = "ADDR[/PREFIX]", value_parser = parse_ipv4_prefix)]
    pub ip: Option<(Ipv4Addr, u8)>,
    /// Our IPv6 address on oxnet's stack.
    #[arg(long, value_name = "ADDR")]
    pub ip6: Option<Ipv6Addr>,
    /// Our Ethernet address on oxnet's stack.
    #[arg(long, default_value = super::on_stack::DEFAULT_MAC)]
    pub mac: String,
    /// On oxnet's stack: send every packet to this Ethernet address (the
    /// server's, or the gateway's) without ARP or ND; needed with
    /// several threads.
    #[arg(long, value_name = "MAC")]
    pub next_hop_mac: Option<String>,
    /// On oxnet's stack: this configuration instead of the built-in host
    /// (one TCPStack; DEV, IP, IP4, IP6, MAC, NEXT_HOP_MAC given as
    /// variables).
    #[arg(long, value_name = "FILE", conflicts_with = "serve_echo")]
    pub config: Option<std::path::PathBuf>,
    /// On oxnet's stack: simulated time (with simulated devices; the
    /// schedule, timeouts and latencies are in the router's time).
    #[arg(long)]
    pub simtime: bool,
    /// On oxnet's stack: before the clock starts, open one connection to
    /// the target per thread and reset it, so that the device's link is
    /// up and the next hop resolved when the measured run begins (the
    /// server sees one more connection per thread).
    #[arg(long)]
    pub warm_up: bool,
}

/// Parses a mutilate generator (boxed: the arguments stay small).
fn parse_generator(text: &str) -> Result<Box<Generator>, String> {
    Generator::parse(text).map(Box::new)
}

/// `N` non-negative numbers separated by ':' (`flag` names the option
/// in errors).
fn numbers<const N: usize>(flag: &str, text: &str) -> Result<[f64; N], String> {
    let v: Vec<f64> = text
        .split(':')
        .map(|p| p.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("{flag} {text}: give {N} non-negative numbers separated by ':'"))?;
    v.try_into()
        .map_err(|_| format!("{flag} {text}: give {N} numbers separated by ':'"))
}

/// Parses `--scan MIN:MAX:STEP`.
fn parse_scan(text: &str) -> Result<Box<[f64; 3]>, String> {
    let v = numbers::<3>("--scan", text)?;
    if v[2] <= 0.0 || v[0] > v[1] || v[1] > MAX_RATE || v[0] <= 0.0 {
        return Err(format!(
            "--scan {text}: MIN:MAX:STEP with 0 < MIN <= MAX <= {MAX_RATE} and STEP > 0"
        ));
    }
    if (v[1] - v[0]) / v[2] > 10_000.0 {
        return Err(format!("--scan {text}: more than 10000 steps"));
    }
    Ok(Box::new(v))
}

/// Parses `--search N:X`.
fn parse_search(text: &str) -> Result<Box<[f64; 2]>, String> {
    let v = numbers::<2>("--search", text)?;
    if !(v[0] > 0.0 && v[0] < 100.0 && v[1] > 0.0) {
        return Err(format!(
            "--search {text}: N:X with 0 < N < 100 (a percentile) and X > 0 µs"
        ));
    }
    Ok(Box::new(v))
}

/// Parses ADDR or ADDR/PREFIX (IPv4; no prefix is /32).
pub fn parse_ipv4_prefix(text: &str) -> Result<(Ipv4Addr, u8), String> {
    let (addr, len) = text.split_once('/').unwrap_or((text, "32"));
    let addr = addr
        .parse::<Ipv4Addr>()
        .map_err(|_| format!("`{text}`: give an IPv4 address, ADDR or ADDR/PREFIX (10.0.0.1/24)"))?;
    match len.parse::<u8>() {
        Ok(len) if len <= 32 => Ok((addr, len)),
        _ => Err(format!("`{text}`: the prefix length must be 0 to 32")),
    }
}

/// The largest request: a bound on each connection's buffers.
pub const MAX_SIZE: usize = 1 << 20;
/// The most keys of a memcached load (its keys are `key:` and a number).
pub const MAX_KEYS: u64 = 1 << 40;
/// The largest memcached value: memcached's default item size limit
/// (`-I 1m`) less room for the item's header.
pub const MAX_VALUE: usize = (1 << 20) - 1024;
/// The most connections a run opens at once.
pub const MAX_CONNECTIONS: usize = 100_000;
/// The most client threads.
pub const MAX_THREADS: usize = 256;
/// The highest open-loop rate (requests per second).
pub const MAX_RATE: f64 = 100e6;

/// A checked load: what [`super::run`] executes.
#[derive(Clone, Debug)]
pub struct Options {
    /// The server.
    pub target: SocketAddr,
    /// Short or persistent connections.
    pub mode: Mode,
    /// Requests per second over all threads; 0 for a closed loop.
    pub rate: f64,
    /// The open loop's inter-arrival distribution.
    pub arrival: InterArrival,
    /// Connections (at once, in short mode) over all threads.
    pub connections: usize,
    /// Client threads.
    pub threads: usize,
    /// How long the run lasts at most.
    pub duration: Option<Duration>,
    /// How many requests the run makes at most.
    pub requests: Option<u64>,
    /// Bytes per request.
    pub size: usize,
    /// memcached's protocols instead of echo: the key-value load.
    pub kv: Option<KvOptions>,
    /// Per-request (and per-connect) time limit.
    pub timeout: Duration,
    /// Seed of the inter-arrival times.
    pub seed: u64,
}

/// The runs of `--scan`, `--search` and `-w` around the load.
#[derive(Clone, Debug, PartialEq)]
pub struct Steps {
    /// Seconds of load before the measured run(s), not counted.
    pub warmup: Option<Duration>,
    /// `--scan MIN:MAX:STEP`, requests per second.
    pub scan: Option<(f64, f64, f64)>,
    /// `--search N:X`: percentile and microseconds.
    pub search: Option<(f64, f64)>,
}

/// One thread's share of a load.
#[derive(Clone, Debug)]
pub struct ThreadPlan {
    /// The load as a whole (requests and target are shared).
    pub options: Options,
    /// This thread's connections.
    pub connections: usize,
    /// This thread's rate (requests per second; 0 closed loop).
    pub rate: f64,
    /// This thread's seed.
    pub seed: u64,
    /// This thread's number (0 to threads - 1): its share of the
    /// memcached keys to fill.
    pub thread: usize,
}

/// Parses HOST:PORT: an IPv4 or bracketed IPv6 address, or a name that
/// resolves (the first address is used).
pub fn parse_target(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    if !text.contains(':') {
        return Err(format!("`{text}`: give HOST:PORT (10.0.0.2:7, [fd00::2]:7)"));
    }
    let mut found = text
        .to_socket_addrs()
        .map_err(|e| format!("`{text}` is not HOST:PORT that resolves ({e}); e.g. 10.0.0.2:7, [fd00::2]:7"))?;
    found.next().ok_or_else(|| format!("`{text}`: the name has no address"))
}

impl LoadgenArgs {
    /// Checks the arguments of a client run.
    pub fn options(&self) -> Result<Options, String> {
        if self.io_uring {
            // Checked here: clap's `requires` lets a lone flag through.
            return Err("--io-uring is for the echo server: give --serve-echo PORT with it".into());
        }
        let target = self.target.ok_or("--target HOST:PORT is required")?;
        if target.port() == 0 {
            return Err(format!("--target {target}: port 0 is not a server's port"));
        }
        if !(self.rate.is_finite() && (0.0..=MAX_RATE).contains(&self.rate)) {
            return Err(format!(
                "--rate {}: requests per second from 0 (closed loop) to {MAX_RATE}",
                self.rate
            ));
        }
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return Err(format!(
                "--connections {}: from 1 to {MAX_CONNECTIONS}",
                self.connections
            ));
        }
        let threads = self.threads.unwrap_or(1);
        if threads == 0 || threads > MAX_THREADS {
            return Err(format!("--threads {threads}: from 1 to {MAX_THREADS}"));
        }
        if threads > self.connections {
            return Err(format!(
                "--threads {threads} is more than --connections {}: each thread needs a connection",
                self.connections
            ));
        }
        if self.depth != 1 {
            return Err(format!(
                "-d/--depth {}: only 1 request outstanding per connection is supported (use more -c connections)",
                self.depth
            ));
        }
        if self.size == 0 || self.size > MAX_SIZE {
            return Err(format!("--size {}: from 1 to {MAX_SIZE} bytes", self.size));
        }
        let kv = self.kv_options()?;
        if kv.is_none() {
            let mutilate = [
                (self.key_size.is_some(), "-K/--keysize"),
                (self.update.is_some(), "-u/--update"),
                (self.noload, "--noload"),
                (self.loadonly, "--loadonly"),
            ];
            if let Some((_, flag)) = mutilate.iter().find(|(on, _)| *on) {
                return Err(format!("{flag} is for --proto memcached-text|memcached-binary"));
            }
        }
        if self.requests == Some(0) {
            return Err("--requests 0: nothing to do".into());
        }
        if self.timeout <= 0.0 {
            return Err("--timeout must be more than 0 seconds".into());
        }
        let seconds = match (self.seconds, self.requests) {
            _ if self.loadonly => Some(super::fill_limit(self.keys).as_secs_f64()),
            (Some(s), _) => Some(s),
            (None, Some(_)) => None,
            (None, None) => Some(10.0),
        };
        Ok(Options {
            target,
            mode: self.mode,
            // --loadonly: the fill, closed loop, until every key is SET.
            rate: if self.loadonly { 0.0 } else { self.rate },
            arrival: (*self.arrival).clone(),
            connections: self.connections,
            threads,
            duration: seconds.map(Duration::from_secs_f64),
            requests: self.requests,
            size: self.size,
            kv,
            timeout: Duration::from_secs_f64(self.timeout),
            seed: self.seed,
        })
    }

    /// The key-value load of `--proto memcached-*`, checked; None for
    /// echo.
    fn kv_options(&self) -> Result<Option<KvOptions>, String> {
        if self.proto == Proto::Echo {
            return Ok(None);
        }
        if self.keys == 0 || self.keys > MAX_KEYS {
            return Err(format!("--keys {}: from 1 to {MAX_KEYS}", self.keys));
        }
        let value_size = match *self.value_size {
            Generator::Fixed(v) if !(0.0..=MAX_VALUE as f64).contains(&v) || v.fract() != 0.0 => {
                return Err(format!("--value-size {v}: from 0 to {MAX_VALUE} bytes"))
            }
            Generator::Fixed(v) => v as usize,
            _ => 0,
        };
        let get_ratio = match (self.get_ratio, self.update) {
            (Some(g), _) if !(0.0..=1.0).contains(&g) => return Err(format!("--get-ratio {g}: from 0 to 1")),
            (_, Some(u)) if !(0.0..=1.0).contains(&u) => return Err(format!("--update {u}: from 0 to 1")),
            (Some(g), _) => g,
            (None, Some(u)) => 1.0 - u,
            (None, None) => 0.9,
        };
        // mutilate's records when a key or value distribution is given.
        let records = (self.key_size.is_some() || !matches!(*self.value_size, Generator::Fixed(_))).then(|| {
            EtcWorkload {
                key: self.key_size.as_deref().cloned(),
                value: (*self.value_size).clone(),
                interarrival: Generator::fb_ia(),
                update: 1.0 - get_ratio,
                records: self.keys,
                seed: self.seed,
            }
            .records()
        });
        let fill = match (self.noload, self.loadonly) {
            (true, _) => Fill::Skip,
            (_, true) => Fill::Only,
            _ => Fill::First,
        };
        Ok(Some(KvOptions {
            proto: self.proto,
            keys: self.keys,
            value_size,
            get_ratio,
            records,
            fill,
        }))
    }

    /// The runs around the measured one: warm-up, `--scan`, `--search`.
    pub fn steps(&self) -> Result<Steps, String> {
        if (self.scan.is_some() || self.search.is_some()) && self.loadonly {
            return Err("--loadonly only fills: it takes no --scan or --search".into());
        }
        Ok(Steps {
            warmup: self.warmup.map(Duration::from_secs_f64),
            scan: self.scan.as_deref().map(|v| (v[0], v[1], v[2])),
            search: self.search.as_deref().map(|v| (v[0], v[1])),
        })
    }

    /// The oxnet stack's options, if the run is on oxnet's stack
    /// (`--device` or `--config`); its flags without either are an
    /// error.
    pub fn stack_options(&self) -> Result<Option<super::on_stack::StackOptions>, String> {
        if self.device.is_none() && self.config.is_none() {
            let given = [
                (self.ip.is_some(), "--ip"),
                (self.ip6.is_some(), "--ip6"),
                (self.next_hop_mac.is_some(), "--next-hop-mac"),
                (self.simtime, "--simtime"),
                (self.warm_up, "--warm-up"),
                (self.mac != super::on_stack::DEFAULT_MAC, "--mac"),
            ];
            if let Some((_, flag)) = given.iter().find(|(on, _)| *on) {
                return Err(format!(
                    "{flag} is for oxnet's stack: give --device SPEC too (without it the load runs on kernel sockets)"
                ));
            }
            return Ok(None);
        }
        let config = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
                Some((path.display().to_string(), text))
            }
            None => None,
        };
        Ok(Some(super::on_stack::StackOptions {
            device: self.device.clone(),
            ip: self.ip,
            ip6: self.ip6,
            mac: self.mac.clone(),
            next_hop_mac: self.next_hop_mac.clone(),
            config,
            simtime: self.simtime,
            warm_up: self.warm_up,
        }))
    }

    /// Checks the arguments of `--serve-echo PORT`.
    pub fn serve_options(&self, port: u16) -> Result<super::serve::ServeOptions, String> {
        // available_parallelism follows the affinity mask (taskset).
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if threads == 0 || threads > MAX_THREADS {
            return Err(format!("--threads {threads}: from 1 to {MAX_THREADS}"));
        }
        Ok(super::serve::ServeOptions {
            port,
            bind: self.bind,
            threads,
            duration: self.seconds.map(Duration::from_secs_f64),
        })
    }
}

impl Options {
    /// Thread `t`'s share: connections and rate split evenly (the first
    /// threads take the remainder of the connections).
    pub fn thread_plan(&self, t: usize) -> ThreadPlan {
        let base = self.connections / self.threads;
        let extra = usize::from(t < self.connections % self.threads);
        ThreadPlan {
            options: self.clone(),
            connections: base + extra,
            rate: self.rate / self.threads as f64,
            seed: self.seed.wrapping_add(t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            thread: t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadgenArgs,
    }

    fn parse(args: &[&str]) -> Result<Options, String> {
        let mut all = vec!["loadgen"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map_err(|e| e.to_string())?.args.options()
    }

    #[test]
    fn connections_and_rate_are_split_over_threads_exactly() {
        let o = parse(&["-s", "10.0.0.2:7", "-c", "10", "-T", "3", "-q", "900"]).unwrap();
        let plans: Vec<_> = (0..3).map(|t| o.thread_plan(t)).collect();
        assert_eq!(plans.iter().map(|p| p.connections).collect::<Vec<_>>(), [4, 3, 3]);
        assert!(plans.iter().all(|p| p.rate == 300.0));
        assert_ne!(plans[0].seed, plans[1].seed, "threads draw different schedules");
    }

    #[test]
    fn defaults_and_mutilate_style_flags() {
        let o = parse(&["-s", "[fd00::2]:7"]).unwrap();
        assert_eq!(o.target, "[fd00::2]:7".parse().unwrap());
        assert_eq!((o.mode, o.size, o.connections, o.threads), (Mode::Persistent, 64, 1, 1));
        assert_eq!(o.duration, Some(Duration::from_secs(10)), "bounded by default");
        assert_eq!(o.rate, 0.0);
        let o = parse(&["-s", "10.0.0.2:7", "--requests", "5"]).unwrap();
        assert_eq!((o.duration, o.requests), (None, Some(5)));
        let o = parse(&["-s", "10.0.0.2:7", "--qps", "10", "-t", "2", "--mode", "short"]).unwrap();
        assert_eq!(
            (o.rate, o.duration, o.mode),
            (10.0, Some(Duration::from_secs(2)), Mode::Short)
        );
    }

    #[test]
    fn memcached_flags_make_a_checked_key_value_load() {
        let o = parse(&["-s", "10.0.0.2:11211", "--proto", "memcached-binary", "--keys", "50"]).unwrap();
        let kv = o.kv.unwrap();
        assert_eq!(
            (kv.proto, kv.keys, kv.value_size, kv.get_ratio),
            (Proto::MemcachedBinary, 50, 100, 0.9)
        );
        assert!(parse(&["-s", "10.0.0.2:7"]).unwrap().kv.is_none(), "echo by default");
        for (args, says) in [
            (&["--keys", "0"][..], "--keys 0"),
            (&["--get-ratio", "1.5"][..], "--get-ratio 1.5"),
            (&["--value-size", "2000000"][..], "--value-size 2000000"),
        ] {
            let mut all = vec!["-s", "10.0.0.2:11211", "--proto", "memcached-text"];
            all.extend_from_slice(args);
            let e = parse(&all).expect_err(says);
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }

    #[test]
    fn mutilate_flags_make_the_etc_load() {
        let args = [
            "-s",
            "10.0.0.2:11211",
            "--proto",
            "memcached-text",
            "-K",
            "fb_key",
            "-V",
            "fb_value",
            "-i",
            "fb_ia",
            "-u",
            "0.25",
            "-r",
            "5000",
            "-c",
            "1024",
            "-d",
            "1",
            "-q",
            "1000",
        ];
        let o = parse(&args).unwrap();
        let kv = o.kv.unwrap();
        assert_eq!((kv.keys, kv.get_ratio, kv.fill), (5000, 0.75, Fill::First));
        assert_eq!(o.arrival, InterArrival::Dist(Generator::fb_ia()));
        let records = kv.records.expect("-K gives mutilate's records");
        assert_eq!(records.key(12).trim_start_matches('0'), "12");
        assert_eq!(o.connections, 1024);
        let o = parse(&[
            "-s",
            "10.0.0.2:11211",
            "--proto",
            "memcached-text",
            "--records",
            "9",
            "--loadonly",
            "-q",
            "5",
        ])
        .unwrap();
        let kv = o.kv.unwrap();
        assert_eq!(
            (kv.keys, kv.fill, o.rate, o.duration),
            (9, Fill::Only, 0.0, Some(crate::loadgen::fill_limit(9)))
        );
        assert!(kv.records.is_none(), "fixed sizes and no -K: key:N");
        for (args, says) in [
            (&["-d", "4"][..], "--depth 4"),
            (&["-u", "2"][..], "--update 2"),
            (&["-V", "fixed:-1"][..], "--value-size -1"),
            (&["-K", "nope"][..], "--key-size"),
        ] {
            let mut all = vec!["-s", "10.0.0.2:11211", "--proto", "memcached-text"];
            all.extend_from_slice(args);
            let e = parse(&all).expect_err(says);
            assert!(e.contains(says), "{args:?}: {e}");
        }
        let e = parse(&["-s", "10.0.0.2:7", "-u", "0.5"]).unwrap_err();
        assert!(e.contains("-u/--update is for --proto"), "{e}");
    }

    #[test]
    fn scan_and_search_are_checked() {
        let steps = |args: &[&str]| {
            let mut all = vec!["loadgen", "-s", "10.0.0.2:7"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).map_err(|e| e.to_string())?.args.steps()
        };
        let s = steps(&["--scan", "1000:5000:1000", "-w", "2"]).unwrap();
        assert_eq!(
            (s.scan, s.warmup),
            (Some((1000.0, 5000.0, 1000.0)), Some(Duration::from_secs(2)))
        );
        assert_eq!(steps(&["--search", "99:500"]).unwrap().search, Some((99.0, 500.0)));
        for bad in [
            &["--scan", "5:1:1"][..],
            &["--scan", "1:2"],
            &["--search", "100:5"],
            &["--search", "a:b"],
        ] {
            assert!(steps(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn out_of_range_values_name_the_flag() {
        for (args, says) in [
            (&["-s", "10.0.0.2:7", "--size", "2000000"][..], "--size 2000000"),
            (&["-s", "10.0.0.2:7", "-c", "0"][..], "--connections 0"),
            (&["-s", "10.0.0.2:7", "--requests", "0"][..], "--requests 0"),
            (&["-s", "10.0.0.2:7", "--rate", "inf"][..], "--rate"),
            (&["-s", "10.0.0.2:7", "--timeout", "0"][..], "--timeout"),
            (&["-s", "10.0.0.2:7", "-T", "0"][..], "--threads 0"),
        ] {
            let e = parse(args).expect_err(says);
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
