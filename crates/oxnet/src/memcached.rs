//! `oxnet memcached DEV --ip A.B.C.D/LEN [--ip6 ADDR] [-p PORT] [-U
//! UDPPORT] [-m MiB] [-c CONNS] [-t THREADS] [-I SIZE] [-v]`: a drop-in
//! for `memcached` on an oxnet device. It writes the configuration of
//! conf/memcached.click (StackHost, AppExecutor, TCPEpollServer,
//! MemcachedServer) with these values and runs it as `oxnet run` does
//! (Click's options after `--` pass through: `-h kv.stats`, `-p`, ...).
//!
//! memcached's flags mean what they mean there (-U PORT: memcached's UDP
//! protocol too, as memcached -U; 0, the default as in memcached 1.6,
//! is off); what is not built says so and refuses to start: more than
//! one thread.

/// The command's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub dev: String,
    pub ip: String,
    pub ip6: String,
    pub mac: String,
    pub port: u16,
    pub udp_port: u16,
    pub memory_mib: u64,
    pub max_connections: u64,
    pub item_size_max: u64,
    pub verbose: u32,
    /// Options for `oxnet run` (after `--`).
    pub run_args: Vec<String>,
}

const USAGE: &str = "usage: oxnet memcached DEV --ip A.B.C.D/LEN [OPTION]... [-- RUN OPTION...]
  DEV                  an oxnet device spec (tap:ox0, af_xdp:eth1, ...)
  --ip A.B.C.D/LEN     the server's IPv4 address
  --ip6 ADDR           the server's IPv6 address (fd00::2 when not given)
  --mac MAC            the server's MAC address (02:00:00:00:00:02)
  -p, --port PORT      TCP port (11211)
  -U, --udp-port PORT  UDP port (memcached's UDP protocol), 0 is off (0)
  -m, --memory-limit MiB  item memory in megabytes (64)
  -c, --conn-limit N   most simultaneous connections (1024)
  -t, --threads N      only 1 (one graph thread serves every connection)
  -I, --max-item-size SIZE  largest item, with k or m (1m)
  -v                   verbose: connections ended for their buffers;
                       -vv also every connection and request, on stderr
  -- ...               options for `oxnet run` (-h kv.stats, -p PORT, ...)";

/// memcached's -I: a number with an optional k or m (memcached.c).
fn size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1024),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("-I: '{t}' is not a size"))?;
    Ok(n * unit)
}

/// Parses the command line (without the program and command names).
pub fn parse(args: &[String]) -> Result<Settings, String> {
    let mut s = Settings {
        dev: String::new(),
        ip: String::new(),
        ip6: "fd00::2".into(),
        mac: "02:00:00:00:00:02".into(),
        port: 11211,
        udp_port: 0,
        memory_mib: 64,
        max_connections: 1024,
        item_size_max: 1 << 20,
        verbose: 0,
        run_args: Vec::new(),
    };
    let mut i = 0;
    let mut threads = 1u64;
    while i < args.len() {
        let a = args[i].as_str();
        let mut value = || -> Result<String, String> {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{a} needs a value\n{USAGE}"))
        };
        let number = |v: String, what: &str| -> Result<u64, String> {
            v.parse::<u64>().map_err(|_| format!("{what}: '{v}' is not a number"))
        };
        match a {
            "--help" | "-help" => return Err(USAGE.to_string()),
            "--ip" => s.ip = value()?,
            "--ip6" => s.ip6 = value()?,
            "--mac" => s.mac = value()?,
            "-p" | "--port" => s.port = number(value()?, "-p")? as u16,
            "-U" | "--udp-port" => s.udp_port = number(value()?, "-U")? as u16,
            "-m" | "--memory-limit" => s.memory_mib = number(value()?, "-m")?,
            "-c" | "--conn-limit" => s.max_connections = number(value()?, "-c")?,
            "-t" | "--threads" => threads = number(value()?, "-t")?,
            "-I" | "--max-item-size" => s.item_size_max = size(&value()?)?,
            "--" => {
                s.run_args = args[i + 1..].to_vec();
                break;
            }
            v if v.starts_with("-v") && v[1..].chars().all(|c| c == 'v') => s.verbose += v.len() as u32 - 1,
            v if v.starts_with('-') => return Err(format!("unknown option {v}\n{USAGE}")),
            v if s.dev.is_empty() => s.dev = v.to_string(),
            v => return Err(format!("unexpected argument {v}\n{USAGE}")),
        }
        i += 1;
    }
    if s.dev.is_empty() {
        return Err(format!("no device given\n{USAGE}"));
    }
    if s.ip.is_empty() {
        return Err(format!("--ip A.B.C.D/LEN is required\n{USAGE}"));
    }
    let addr = s.ip.split('/').next().unwrap_or_default();
    addr.parse::<std::net::Ipv4Addr>()
        .map_err(|_| format!("--ip: '{}' is not an IPv4 address", s.ip))?;
    s.ip6
        .parse::<std::net::Ipv6Addr>()
        .map_err(|_| format!("--ip6: '{}' is not an IPv6 address", s.ip6))?;
    if threads != 1 {
        return Err(format!("-t {threads}: oxnet memcached runs one graph thread; use -t 1"));
    }
    if s.port == 0 {
        return Err("-p 0: a TCP port is required".into());
    }
    Ok(s)
}

/// Bytes of replies that may wait for one connection before it is no
/// longer read (TCPEpollServer's MAX_PENDING; four times that ends it):
/// sixteen of the largest items, so that a multi-get of large values is
/// answered (the values are shared buffers, not copies).
pub fn max_pending(item_size_max: u64) -> u64 {
    (16 * item_size_max).max(4 << 20)
}

/// The configuration (conf/memcached.click with the values in).
pub fn config(s: &Settings) -> String {
    let ip = s.ip.split('/').next().unwrap_or_default();
    format!(
        "host :: StackHost(\"{}\", {ip}, {}, {});\n\
         AppExecutor;\n\
         srv :: TCPEpollServer({}, MAX_PENDING {});\n\
         srv -> kv :: MemcachedServer(MEMORY {}, ITEM_SIZE_MAX {}, MAX_CONNECTIONS {}, VERBOSE {}, PORT {}, UDP_PORT {}) -> srv;\n",
        s.dev,
        s.ip6,
        s.mac,
        s.port,
        max_pending(s.item_size_max),
        s.memory_mib, s.item_size_max, s.max_connections, s.verbose, s.port, s.udp_port
    )
}

/// Runs the command; the exit code.
pub fn main(args: &[String]) -> u8 {
    let s = match parse(args) {
        Ok(s) => s,
        Err(e) if e.starts_with("usage:") => {
            println!("{e}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let text = config(&s);
    if s.verbose > 0 {
        eprintln!("oxnet memcached: {text}");
    }
    let mut run_args = s.run_args.clone();
    run_args.push("-e".into());
    run_args.push(text);
    crate::run::main(&run_args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn memcached_flags_become_the_configuration() {
        let s = parse(&args(
            "tap:ox0 --ip 10.0.0.2/24 -p 11211 -U 0 -m 8 -c 10 -I 2m -vv -- -h kv.stats",
        ))
        .unwrap();
        assert_eq!(
            (s.memory_mib, s.max_connections, s.item_size_max, s.verbose),
            (8, 10, 2 << 20, 2)
        );
        assert_eq!(s.run_args, args("-h kv.stats"));
        assert_eq!(
            config(&s),
            "host :: StackHost(\"tap:ox0\", 10.0.0.2, fd00::2, 02:00:00:00:00:02);\nAppExecutor;\nsrv :: TCPEpollServer(11211, MAX_PENDING 33554432);\nsrv -> kv :: MemcachedServer(MEMORY 8, ITEM_SIZE_MAX 2097152, MAX_CONNECTIONS 10, VERBOSE 2, PORT 11211, UDP_PORT 0) -> srv;\n"
        );
    }

    #[test]
    fn what_is_not_built_is_refused_clearly() {
        assert_eq!(
            parse(&args("tap:ox0 --ip 10.0.0.2/24 -U 11211")).unwrap().udp_port,
            11211
        );
        assert!(parse(&args("tap:ox0 --ip 10.0.0.2/24 -t 4"))
            .unwrap_err()
            .contains("-t 1"));
        assert!(parse(&args("tap:ox0")).unwrap_err().contains("--ip"));
        assert!(parse(&args("tap:ox0 --ip 10.0.0/24")).is_err());
        assert!(parse(&args("tap:ox0 --ip 10.0.0.2 -x"))
            .unwrap_err()
            .contains("unknown option -x"));
    }
}
