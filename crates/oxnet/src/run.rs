//! `oxnet run` (and `click`, when the binary is called by that name): runs
//! a configuration in Click's language with Click's command-line options,
//! so that scripts written for Click's `click` driver run oxnet.
//!
//! Options (Click's `click --help`): `-f FILE` / a file argument (`-` is
//! standard input), `-e EXPR`, `NAME=VALUE` parameters, `-h
//! ELEMENT.HANDLER` (read at exit; element globs allowed), `-q` (no
//! warnings), `-t`/`--time` (print the time taken). The configuration
//! is read from standard input when none is given.

use oxnet_graph::Router;
use std::io::Read;

/// Parsed options.
#[derive(Debug, Default, PartialEq)]
pub struct ClickOptions {
    pub file: Option<String>,
    pub expr: Option<String>,
    pub vars: Vec<(String, String)>,
    pub handlers: Vec<String>,
    pub quiet: bool,
    /// Click's `-q`/`--quit`: build the router, do not run it (with `-h`,
    /// print handlers of the configured router).
    pub quit: bool,
    pub time: bool,
    pub simtime: bool,
    /// `-p PORT`: a ControlSocket on TCP port PORT of 127.0.0.1.
    pub port: Option<u16>,
    /// `-u PATH`: a ControlSocket on a Unix socket.
    pub unix_socket: Option<String>,
    /// `-j N`: graph threads (0 and 1: one).
    pub threads: usize,
    /// `--busy-poll`: an idle router never sleeps (as a DPDK poll loop).
    pub busy_poll: bool,
}

const USAGE: &str = "usage: oxnet run [OPTION]... [PARAM=VALUE]... [ROUTERFILE]
  -f, --file FILE        read the configuration from FILE (- is standard input)
  -e, --expression EXPR  use EXPR as the configuration
  -h, --handler ELEMENT.HANDLER
                         print the value of a read handler at exit (globs allowed)
  -p, --port PORT        a control socket on TCP port PORT of 127.0.0.1
  -u, --unix-socket FILE a control socket on the Unix socket FILE
  -j, --threads N        N graph threads, one per core; thread i owns queue i of each device
  -q, --quit             build the router but do not run it (useful with -h)
  -w, --no-warnings      do not print warnings
  -t, --time             print the time the router ran (and whether
                         pushes are direct calls)
      --simtime          simulated time: timers fire at once when nothing else runs
      --busy-poll        never sleep when idle (default: poll 20 us, then sleep
                         on the devices' descriptors where every task allows it)
      --help             this text";

/// Parses Click's options; Err is a usage error.
pub fn parse(args: &[String]) -> Result<ClickOptions, String> {
    let mut o = ClickOptions::default();
    let mut i = 0;
    let value = |i: &mut usize, flag: &str| -> Result<String, String> {
        *i += 1;
        args.get(*i)
            .cloned()
            .ok_or_else(|| format!("option '{flag}' needs a value"))
    };
    while i < args.len() {
        let a = &args[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let take = |i: &mut usize| -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => value(i, &flag),
            }
        };
        match flag.as_str() {
            "-f" | "--file" => {
                let f = take(&mut i)?;
                if o.file.is_some() {
                    return Err(format!("more than one configuration file ('{f}')\n{USAGE}"));
                }
                o.file = Some(f);
            }
            "-e" | "--expression" | "--expr" => o.expr = Some(take(&mut i)?),
            "-h" | "--handler" => o.handlers.push(take(&mut i)?),
            "-p" | "--port" => {
                let p = take(&mut i)?;
                o.port = Some(p.parse().map_err(|_| format!("'{p}' is not a TCP port\n{USAGE}"))?);
            }
            "-u" | "--unix-socket" => o.unix_socket = Some(take(&mut i)?),
            "-j" | "--threads" => {
                let j = take(&mut i)?;
                o.threads = match j.parse::<usize>() {
                    Ok(n) if (1..=64).contains(&n) => n,
                    _ => return Err(format!("'{j}' is not a thread count (1..64)\n{USAGE}")),
                };
            }
            "-q" | "--quit" => o.quit = true,
            "-w" | "--no-warnings" => o.quiet = true,
            "-t" | "--time" => o.time = true,
            "--simtime" => o.simtime = true,
            "--busy-poll" => o.busy_poll = true,
            "--help" => return Err(USAGE.to_string()),
            "-" => o.file = Some("-".into()),
            f if f.starts_with('-') => {
                if let Some(rest) = f.strip_prefix("-e").filter(|r| !r.is_empty()) {
                    o.expr = Some(rest.to_string());
                } else if let Some(rest) = f.strip_prefix("-h").filter(|r| !r.is_empty()) {
                    o.handlers.push(rest.to_string());
                } else {
                    return Err(format!("unknown option '{f}'\n{USAGE}"));
                }
            }
            _ => match a.split_once('=') {
                Some((name, v)) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                    o.vars.push((name.to_string(), v.to_string()));
                }
                _ => {
                    if o.file.is_some() {
                        return Err(format!("more than one configuration file ('{a}')\n{USAGE}"));
                    }
                    o.file = Some(a.clone());
                }
            },
        }
        i += 1;
    }
    if o.file.is_some() && o.expr.is_some() {
        return Err("give a configuration file or -e, not both".into());
    }
    Ok(o)
}

/// Whether `name` matches a glob with `*` and `?` (Click's handler
/// element patterns).
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// One `-h` value: element name, handler name, value.
pub type HandlerValue = (String, String, String);

/// Reads the `-h` handlers (element globs expanded) in order; errors for
/// those that do not exist or fail.
/// What `-t` says about how pushes are made (docs/graph.md, "How a push
/// is made").
fn pushes_line(router: &Router) -> String {
    if router.direct_pushes() {
        return "pushes: direct (no call cycle in the graph)".to_string();
    }
    let mut cycle = router.call_cycle();
    cycle.push(cycle[0]);
    format!(
        "pushes: direct, checked into the {} elements on call cycles ({}; one cycle: {})",
        router.checked_elements().len(),
        router.checked_elements().join(" "),
        cycle.join(" -> ")
    )
}

pub fn read_handler_values(router: &Router, handlers: &[String]) -> (Vec<HandlerValue>, Vec<String>) {
    let mut values = Vec::new();
    let mut errors = Vec::new();
    for h in handlers {
        let Some((element, handler)) = h.rsplit_once('.') else {
            errors.push(format!("no '{h}' handler"));
            continue;
        };
        let matches: Vec<usize> = if element.contains(['*', '?']) {
            (0..router.names().len())
                .filter(|&i| glob(element, &router.names()[i]))
                .collect()
        } else {
            router.find(element).into_iter().collect()
        };
        if matches.is_empty() {
            errors.push(format!("no element matching '{element}'"));
            continue;
        }
        for i in matches {
            match router.read_handler(i, handler) {
                Ok(value) => values.push((router.names()[i].clone(), handler.to_string(), value)),
                Err(e) => errors.push(e),
            }
        }
    }
    (values, errors)
}

/// The `-h` output, as Click's `call_read_handlers` prints it: the value
/// alone when one handler of one element is asked for, else
/// `NAME.HANDLER:` then the value then an empty line.
pub fn format_handler_values(values: &[HandlerValue]) -> String {
    let mut out = String::new();
    let print_name = values.len() > 1;
    for (element, handler, value) in values {
        let mut value = value.clone();
        if !value.is_empty() && !value.ends_with('\n') {
            value.push('\n');
        }
        if print_name {
            out += &format!("{element}.{handler}:\n{value}\n");
        } else {
            out += &value;
        }
    }
    out
}

/// [`read_handler_values`] then [`format_handler_values`].
pub fn read_handlers(router: &Router, handlers: &[String]) -> (String, Vec<String>) {
    let (values, errors) = read_handler_values(router, handlers);
    (format_handler_values(&values), errors)
}

/// Combines the `-h` values of the graph threads of `-j N`: a value that
/// is an integer in every thread (a counter) is their sum, anything else
/// is thread 0's.
pub fn combine_thread_values(per_thread: &[Vec<HandlerValue>]) -> Vec<HandlerValue> {
    let Some(first) = per_thread.first() else {
        return Vec::new();
    };
    let mut out = first.clone();
    for (k, (_, _, value)) in out.iter_mut().enumerate() {
        let numbers: Option<Vec<i64>> = per_thread
            .iter()
            .map(|t| t.get(k).and_then(|(_, _, v)| v.trim().parse::<i64>().ok()))
            .collect();
        if let Some(numbers) = numbers {
            *value = numbers.iter().sum::<i64>().to_string();
        }
    }
    out
}

/// Runs `oxnet run ARGS`; returns the process exit code (0 ok, 1 a
/// configuration or run error, 2 a usage error).
pub fn main(args: &[String]) -> u8 {
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return if e.starts_with("usage:") { 0 } else { 2 };
        }
    };
    let (name, text) = match (&options.expr, &options.file) {
        (Some(e), _) => ("config".to_string(), e.clone()),
        (None, Some(f)) if f != "-" => match std::fs::read_to_string(f) {
            Ok(t) => (f.clone(), t),
            Err(e) => {
                eprintln!("{f}: {e}");
                return 1;
            }
        },
        _ => {
            let mut t = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut t) {
                eprintln!("<stdin>: {e}");
                return 1;
            }
            ("<stdin>".to_string(), t)
        }
    };
    oxnet_sim::install();
    // -p and -u add a ControlSocket, as Click's driver does (with -j, to
    // graph thread 0 only).
    let mut control = String::new();
    if let Some(p) = options.port {
        control += &format!("\nControlSocket(TCP, {p});\n");
    }
    if let Some(path) = &options.unix_socket {
        control += &format!(
            "\nControlSocket(UNIX, \"{}\");\n",
            path.replace('\\', "\\\\").replace('"', "\\\"")
        );
    }
    crate::signal::install();
    if options.threads > 1 {
        return run_threads(&options, &name, &text, &control);
    }
    let text = text + &control;
    let mut router = match oxnet_graph::build(&name, &text, &options.vars) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("Router could not be initialized!");
            return 1;
        }
    };
    if options.simtime {
        router.use_simulated_time();
    }
    if options.busy_poll {
        router.set_idle_spin_us(u64::MAX);
    }
    let start = std::time::Instant::now();
    if !options.quit {
        router.run(&crate::signal::stop_requested);
    }
    if options.time {
        eprintln!("{}", pushes_line(&router));
        eprintln!("{:.6} real", start.elapsed().as_secs_f64());
    }
    let (out, errors) = read_handlers(&router, &options.handlers);
    print!("{out}");
    for e in &errors {
        eprintln!("{e}");
    }
    u8::from(!errors.is_empty())
}

/// `-j N`: one graph per thread, built from the same configuration, each
/// pinned to a core and owning queue i of every device (FromDevice /
/// ToDevice). Each graph runs until it stops itself (its DriverManager,
/// a source's STOP); the run ends when all have, or at once on a signal or
/// a control socket's `stop`. `-h` prints the sum over the
/// threads of a handler that is a number in each (a counter), else thread
/// 0's value, and each thread's values on standard error.
fn run_threads(options: &ClickOptions, name: &str, text: &str, control: &str) -> u8 {
    use oxnet_graph::router::STOP_ALL;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    let n = options.threads;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let built = Arc::new(Barrier::new(n + 1));
    let go = Arc::new(Barrier::new(n + 1));
    let failed = Arc::new(AtomicBool::new(false));
    oxnet_graph::elements::device::reset_devices();
    let mut threads = Vec::new();
    for t in 0..n {
        let text = if t == 0 {
            format!("{text}{control}")
        } else {
            text.to_string()
        };
        let (name, vars, handlers) = (name.to_string(), options.vars.clone(), options.handlers.clone());
        let (built, go, failed) = (built.clone(), go.clone(), failed.clone());
        let (simtime, quit, time, busy_poll) = (options.simtime, options.quit, options.time, options.busy_poll);
        let spawned = std::thread::Builder::new().name(format!("graph{t}")).spawn(move || {
            let _ = crate::apps::multiqueue::pin_to_core(t % cores);
            let place = oxnet_graph::elements::device::ThreadPlace {
                index: t as u16,
                count: n as u16,
            };
            let router = oxnet_graph::build_on_thread(&name, &text, &vars, place);
            if let Err(e) = &router {
                // Every thread builds the same configuration: thread 0
                // speaks for all of them.
                if t == 0 {
                    eprintln!("{e}");
                }
                failed.store(true, Ordering::Relaxed);
            }
            built.wait();
            go.wait();
            let Ok(mut router) = router else {
                return None;
            };
            if failed.load(Ordering::Relaxed) {
                return None;
            }
            if simtime {
                router.use_simulated_time();
            }
            if busy_poll {
                router.set_idle_spin_us(u64::MAX);
            }
            if time && t == 0 {
                eprintln!("{}", pushes_line(&router));
            }
            if quit {
                return Some(read_handler_values(&router, &handlers));
            }
            router.run(&|| crate::signal::stop_requested() || STOP_ALL.load(Ordering::Relaxed));
            Some(read_handler_values(&router, &handlers))
        });
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => {
                eprintln!("cannot start graph thread {t}: {e}");
                return 1;
            }
        }
    }
    built.wait();
    // Every thread has taken its queues; the rest are closed now.
    oxnet_graph::elements::device::reset_devices();
    let start = std::time::Instant::now();
    go.wait();
    let results: Vec<_> = threads.into_iter().map(|h| h.join().ok().flatten()).collect();
    if failed.load(Ordering::Relaxed) {
        eprintln!("Router could not be initialized!");
        return 1;
    }
    if options.time {
        eprintln!("{:.6} real", start.elapsed().as_secs_f64());
    }
    let mut per_thread = Vec::new();
    let mut errors = Vec::new();
    for (t, r) in results.into_iter().enumerate() {
        let Some((values, errs)) = r else {
            errors.push(format!("graph thread {t} failed"));
            continue;
        };
        if t == 0 {
            errors.extend(errs);
        }
        if !options.quiet {
            for (element, handler, value) in &values {
                eprintln!("thread {t}: {element}.{handler} {}", value.trim_end());
            }
        }
        per_thread.push(values);
    }
    print!("{}", format_handler_values(&combine_thread_values(&per_thread)));
    for e in &errors {
        eprintln!("{e}");
    }
    u8::from(!errors.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn clicks_options_parse() {
        let o = parse(&strings(&[
            "-q",
            "A=1",
            "conf.click",
            "-h",
            "c.count",
            "-hd.count",
            "--file=x",
        ]))
        .unwrap_err();
        assert!(o.contains("more than one"), "{o}");
        let o = parse(&strings(&["-q", "A=1", "conf.click", "-h", "c.count", "-hd.count"])).unwrap();
        assert_eq!(o.file.as_deref(), Some("conf.click"));
        assert_eq!(o.vars, vec![("A".into(), "1".into())]);
        assert_eq!(o.handlers, ["c.count", "d.count"]);
        assert!(o.quit && !o.quiet);
        assert!(parse(&strings(&["-w", "x.click"])).unwrap().quiet);
        let o = parse(&strings(&["-e", "Idle -> Discard"])).unwrap();
        assert_eq!(o.expr.as_deref(), Some("Idle -> Discard"));
        assert!(parse(&strings(&["-z"])).unwrap_err().contains("unknown option '-z'"));
        assert!(parse(&strings(&["-e"])).unwrap_err().contains("needs a value"));
    }

    #[test]
    fn globs_match_as_shell_patterns() {
        assert!(glob("c*", "counter"));
        assert!(glob("*/c", "a/b/c"));
        assert!(glob("c?", "c1"));
        assert!(!glob("c?", "c12"));
        assert!(!glob("d*", "counter"));
    }
}
