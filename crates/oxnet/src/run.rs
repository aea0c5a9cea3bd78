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
}

const USAGE: &str = "usage: oxnet run [OPTION]... [PARAM=VALUE]... [ROUTERFILE]
  -f, --file FILE        read the configuration from FILE (- is standard input)
  -e, --expression EXPR  use EXPR as the configuration
  -h, --handler ELEMENT.HANDLER
                         print the value of a read handler at exit (globs allowed)
  -q, --quit             build the router but do not run it (useful with -h)
  -w, --no-warnings      do not print warnings
  -t, --time             print the time the router ran
      --simtime          simulated time: timers fire at once when nothing else runs
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
            "-q" | "--quit" => o.quit = true,
            "-w" | "--no-warnings" => o.quiet = true,
            "-t" | "--time" => o.time = true,
            "--simtime" => o.simtime = true,
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

/// The `-h` output, as Click's `call_read_handlers` prints it: the value
/// alone when one handler of one element is asked for, else
/// `NAME.HANDLER:` then the value then an empty line.
pub fn read_handlers(router: &Router, handlers: &[String]) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut errors = Vec::new();
    let several = handlers.len() > 1;
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
        let print_name = several || matches.len() > 1;
        for i in matches {
            match router.read_handler(i, handler) {
                Ok(mut value) => {
                    if !value.is_empty() && !value.ends_with('\n') {
                        value.push('\n');
                    }
                    if print_name {
                        out += &format!("{}.{handler}:\n{value}\n", router.names()[i]);
                    } else {
                        out += &value;
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    }
    (out, errors)
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
    crate::signal::install();
    let start = std::time::Instant::now();
    if !options.quit {
        router.run(&crate::signal::stop_requested);
    }
    if options.time {
        eprintln!("{:.6} real", start.elapsed().as_secs_f64());
    }
    let (out, errors) = read_handlers(&router, &options.handlers);
    print!("{out}");
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
