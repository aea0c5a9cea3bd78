//! A runner for Click's `clicktest` test format (Click's clicktest(1)
//! manual page is the specification; this is our own implementation):
//! sections `%script`, `%require`, `%file`, `%stdin`, `%expect`,
//! `%expectv`, `%expectx`, `%stdout`, `%stderr`, `%ignore`, `%ignorex`,
//! `%ignorev`, `%info`, `%cut`, `%eot`, `%eof`. The script runs under `sh
//! -e` in a fresh temporary directory holding the `%file`s, with `click`
//! on its PATH being oxnet.

use regex::Regex;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One `%expect`-like section.
#[derive(Debug, Clone)]
struct Expect {
    name: String,
    /// `v`: literal, `x`: every line a regex, ``: `{{ }}` regexes.
    mode: char,
    whitespace: bool,
    case_insensitive: bool,
    alternate: bool,
    data: String,
}

#[derive(Debug, Clone)]
struct Ignore {
    file: String,
    mode: char,
    data: String,
}

/// One test of a file.
#[derive(Debug, Default, Clone)]
pub struct Test {
    pub name: String,
    script: String,
    require: Option<String>,
    files: Vec<(String, Vec<u8>)>,
    expects: Vec<Expect>,
    ignores: Vec<Ignore>,
}

/// The result of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// `%require` failed: not run.
    Skipped(String),
    Fail(String),
}

fn flags_and_names(words: &[&str]) -> (String, Option<usize>, Vec<String>) {
    let mut flags = String::new();
    let mut length = None;
    let mut names = Vec::new();
    for w in words {
        if let Some(f) = w.strip_prefix('-').filter(|f| !f.is_empty()) {
            flags.push_str(f);
        } else if let Some(n) = w.strip_prefix('+') {
            length = n.parse().ok();
        } else {
            names.push(w.to_string());
        }
    }
    (flags, length, names)
}

/// Parses a clicktest file into its tests.
pub fn parse(name: &str, text: &[u8]) -> Result<Vec<Test>, String> {
    let mut tests = Vec::new();
    let mut test = Test {
        name: name.to_string(),
        ..Test::default()
    };
    let mut at = 0;
    // Split into lines but keep offsets, for `+LENGTH` sections.
    let mut current: Option<(String, String, Option<usize>, Vec<String>)> = None;
    let mut body: Vec<u8> = Vec::new();
    let finish = |test: &mut Test,
                  section: Option<(String, String, Option<usize>, Vec<String>)>,
                  body: &mut Vec<u8>|
     -> Result<(), String> {
        let Some((kind, flags, _, names)) = section else {
            body.clear();
            return Ok(());
        };
        let mut data = std::mem::take(body);
        if flags.contains('d') {
            data = data
                .split_inclusive(|&b| b == b'\n')
                .flat_map(|l| l.iter().skip(1).copied().collect::<Vec<u8>>())
                .collect();
        }
        if flags.contains('e') {
            data = base64_decode(&data).map_err(|e| format!("%{kind}: {e}"))?;
        }
        let text = String::from_utf8_lossy(&data).into_owned();
        match kind.as_str() {
            "script" => test.script = text,
            "require" => test.require = Some(text),
            "info" | "cut" | "desc" => {}
            "file" | "stdin" => {
                let names = if kind == "stdin" {
                    vec!["stdin".to_string()]
                } else {
                    names
                };
                for n in names {
                    test.files.push((n, data.clone()));
                }
            }
            "expect" | "expectv" | "expectx" | "stdout" | "stderr" => {
                let names = match kind.as_str() {
                    "stdout" => vec!["stdout".to_string()],
                    "stderr" => vec!["stderr".to_string()],
                    _ => names,
                };
                let mode = match kind.as_str() {
                    "expectv" => 'v',
                    "expectx" => 'x',
                    _ => ' ',
                };
                for n in names {
                    test.expects.push(Expect {
                        name: n,
                        mode,
                        whitespace: flags.contains('w'),
                        case_insensitive: flags.contains('i'),
                        alternate: flags.contains('a'),
                        data: text.clone(),
                    });
                }
            }
            "ignore" | "ignorex" | "ignorev" => {
                let mode = match kind.as_str() {
                    "ignorex" => 'x',
                    "ignorev" => 'v',
                    _ => ' ',
                };
                let file = names.first().cloned().unwrap_or_else(|| "all".to_string());
                test.ignores.push(Ignore { file, mode, data: text });
            }
            other => return Err(format!("unknown section '%{other}'")),
        }
        Ok(())
    };
    while at < text.len() {
        let end = text[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |p| at + p + 1);
        let line = &text[at..end];
        if line.starts_with(b"%") {
            finish(&mut test, current.take(), &mut body)?;
            let header = String::from_utf8_lossy(line).trim().to_string();
            let mut words = header[1..].split_whitespace();
            let kind = words.next().unwrap_or("").to_string();
            let rest: Vec<&str> = words.collect();
            match kind.as_str() {
                "eof" => break,
                "eot" => {
                    tests.push(std::mem::take(&mut test));
                    test.name = format!("{name}#{}", tests.len() + 1);
                    at = end;
                    continue;
                }
                "include" => return Err("%include is not supported".into()),
                _ => {}
            }
            let (flags, length, names) = flags_and_names(&rest);
            at = end;
            if let Some(n) = length {
                let stop = (at + n).min(text.len());
                body.extend_from_slice(&text[at..stop]);
                finish(&mut test, Some((kind, flags, None, names)), &mut body)?;
                at = stop;
                // The rest of the line after the data is ignored.
                continue;
            }
            current = Some((kind, flags, None, names));
            continue;
        }
        body.extend_from_slice(line);
        at = end;
    }
    finish(&mut test, current.take(), &mut body)?;
    if !test.script.is_empty() {
        tests.push(test);
    }
    if tests.is_empty() {
        return Err("no %script section".into());
    }
    Ok(tests)
}

fn base64_decode(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in data {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' | b' ' | b'\t' => continue,
            _ => return Err(format!("'{}' is not base64", c as char)),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Ok(out)
}

/// An expected line as a regex: literal text escaped, `{{re}}` kept,
/// `{{?comment}}` dropped; with `whitespace`, runs of spaces match any.
fn line_regex(line: &str, mode: char, whitespace: bool, case_insensitive: bool) -> Result<Regex, String> {
    let mut pattern = String::from("^");
    if mode == 'x' {
        let stripped = strip_comments(line);
        pattern += stripped.trim_end();
    } else {
        let stripped = strip_comments(line);
        let mut rest = stripped.as_str();
        while let Some(open) = rest.find("{{") {
            let Some(close) = rest[open + 2..].find("}}") else {
                break;
            };
            pattern += &literal(&rest[..open], whitespace);
            let inner = &rest[open + 2..open + 2 + close];
            if !inner.starts_with('?') {
                let ci = if case_insensitive { "(?i)" } else { "" };
                pattern += &format!("(?:{ci}{inner})");
            }
            rest = &rest[open + 2 + close + 2..];
        }
        pattern += &literal(rest.trim_end(), whitespace);
    }
    pattern += "\\s*$";
    compile(&pattern).map_err(|e| format!("bad regex in '{line}': {e}"))
}

/// Compiles a Perl-style regex. The regex crate has no look-around: a
/// look-ahead group (`(?!...)`, `(?=...)`) that makes the pattern fail is
/// dropped, which only widens what it matches (Click's files use one to
/// ignore valgrind's lines but those that report errors).
fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(pattern).or_else(|e| {
        let mut out = String::new();
        let mut rest = pattern;
        while let Some(at) = rest.find("(?!").or_else(|| rest.find("(?=")) {
            out += &rest[..at];
            let mut depth = 0usize;
            let mut end = rest.len();
            let mut escaped = false;
            for (i, c) in rest[at..].char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = at + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &rest[end..];
        }
        out += rest;
        if out == pattern {
            Err(e)
        } else {
            Regex::new(&out)
        }
    })
}

fn strip_comments(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find("{{?") {
        out += rest[..open].trim_end();
        match rest[open..].find("}}") {
            Some(close) => rest = rest[open + close + 2..].trim_start(),
            None => {
                rest = "";
            }
        }
    }
    out + rest
}

fn literal(text: &str, whitespace: bool) -> String {
    if whitespace {
        text.split_whitespace()
            .map(regex::escape)
            .collect::<Vec<_>>()
            .join("\\s+")
    } else {
        regex::escape(text)
    }
}

/// Compares `actual` output with one expectation; Err says where.
fn compare(actual: &str, expect: &Expect, ignores: &[Regex]) -> Result<(), String> {
    if expect.mode == 'v' {
        return if actual == expect.data {
            Ok(())
        } else {
            Err(format!(
                "{}: differs from %expectv:\n--- expected\n{}--- actual\n{}",
                expect.name, expect.data, actual
            ))
        };
    }
    let wanted: Vec<&str> = expect
        .data
        .lines()
        .filter(|l| !strip_comments(l).trim().is_empty())
        .collect();
    let got: Vec<&str> = actual
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !ignores.iter().any(|r| r.is_match(l.trim_end())))
        .collect();
    for (i, w) in wanted.iter().enumerate() {
        let re = line_regex(w, expect.mode, expect.whitespace, expect.case_insensitive)?;
        match got.get(i) {
            Some(g) if re.is_match(g.trim_end()) => {}
            Some(g) => return Err(format!("{}:{}: expected '{}'\n  got '{}'", expect.name, i + 1, w, g)),
            None => {
                return Err(format!(
                    "{}:{}: expected '{}', got end of output",
                    expect.name,
                    i + 1,
                    w
                ))
            }
        }
    }
    if got.len() > wanted.len() {
        return Err(format!(
            "{}:{}: unexpected '{}'",
            expect.name,
            wanted.len() + 1,
            got[wanted.len()]
        ));
    }
    Ok(())
}

fn ignore_regexes(test: &Test, file: &str) -> Result<Vec<Regex>, String> {
    let mut out = Vec::new();
    for ig in test.ignores.iter().filter(|i| i.file == "all" || i.file == file) {
        for line in ig.data.lines().filter(|l| !l.trim().is_empty()) {
            let re = match ig.mode {
                'x' => compile(&format!("^(?:{})\\s*$", strip_comments(line).trim_end())),
                'v' => Regex::new(&format!("^{}\\s*$", regex::escape(line.trim_end()))),
                _ => line_regex(line, ' ', false, false).map_err(regex::Error::Syntax),
            }
            .map_err(|e| format!("bad %ignore line '{line}': {e}"))?;
            out.push(re);
        }
    }
    Ok(out)
}

/// Where `click` comes from and how long a script may run.
pub struct Runner {
    /// A directory holding `click` (a link to oxnet).
    pub bin_dir: PathBuf,
    pub timeout: Duration,
}

impl Runner {
    /// A runner whose `click` is the oxnet binary at `oxnet`: makes a
    /// temporary directory with the link.
    pub fn new(oxnet: &Path) -> Result<Runner, String> {
        // One directory per runner: several may live in one process.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("oxnet-clicktest-bin-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let link = dir.join("click");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(oxnet, &link).map_err(|e| format!("{}: {e}", link.display()))?;
        Ok(Runner {
            bin_dir: dir,
            timeout: Duration::from_secs(30),
        })
    }

    fn sh(&self, script: &str, dir: &Path, stdin: Option<&Path>) -> Result<(bool, Vec<u8>, Vec<u8>), String> {
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-e")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("PATH", path)
            .env("rundir", std::env::current_dir().unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match stdin {
            Some(f) => cmd.stdin(std::fs::File::open(f).map_err(|e| e.to_string())?),
            None => cmd.stdin(Stdio::null()),
        };
        // A process group of its own: on a timeout the whole group goes
        // (sh and the `click` it started, which holds the pipes open).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| format!("sh: {e}"))?;
        let start = Instant::now();
        // Read both pipes on threads so a chatty script cannot block.
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let t_out = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut out, &mut v);
            v
        });
        let t_err = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut err, &mut v);
            v
        });
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break Some(s);
            }
            if start.elapsed() > self.timeout {
                // SAFETY: kill(2) on the process group we created above
                // (its id is the child's pid); no memory is involved.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if status.is_some() {
            // The script is done; whatever it left running in its group
            // (a `click &` it did not wait for) would hold the pipes open
            // forever: it goes too.
            // SAFETY: kill(2) on the process group created above.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
        }
        let (stdout, stderr) = (t_out.join().unwrap_or_default(), t_err.join().unwrap_or_default());
        match status {
            None => Err(format!(
                "the script ran longer than {} s and was killed",
                self.timeout.as_secs()
            )),
            Some(s) => Ok((s.success(), stdout, stderr)),
        }
    }

    /// Runs one test.
    pub fn run(&self, test: &Test) -> Outcome {
        match self.run_inner(test) {
            Ok(o) => o,
            Err(e) => Outcome::Fail(e),
        }
    }

    fn run_inner(&self, test: &Test) -> Result<Outcome, String> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("oxnet-clicktest-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let result = (|| {
            if let Some(req) = &test.require {
                let (ok, _, _) = self.sh(req, &dir, None)?;
                if !ok {
                    return Ok(Outcome::Skipped("%require failed".into()));
                }
            }
            for (name, data) in &test.files {
                std::fs::write(dir.join(name), data).map_err(|e| format!("{name}: {e}"))?;
            }
            let stdin = test.files.iter().any(|(n, _)| n == "stdin").then(|| dir.join("stdin"));
            let (ok, stdout, stderr) = self.sh(&test.script, &dir, stdin.as_deref())?;
            let stderr_text = String::from_utf8_lossy(&stderr).into_owned();
            if !ok {
                return Ok(Outcome::Fail(format!("the script failed; stderr:\n{stderr_text}")));
            }
            // Group alternates by file name: any may match.
            let mut names: Vec<&str> = test.expects.iter().map(|e| e.name.as_str()).collect();
            names.dedup();
            for name in names {
                let actual = match name {
                    "stdout" => String::from_utf8_lossy(&stdout).into_owned(),
                    "stderr" => stderr_text.clone(),
                    f => match std::fs::read(dir.join(f)) {
                        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                        Err(_) => return Ok(Outcome::Fail(format!("{f}: the script did not create it"))),
                    },
                };
                let ignores = ignore_regexes(test, name)?;
                let mut last_error = None;
                let mut matched = false;
                for e in test.expects.iter().filter(|e| e.name == name) {
                    match compare(&actual, e, if e.mode == 'v' { &[] } else { &ignores }) {
                        Ok(()) => {
                            matched = true;
                            break;
                        }
                        Err(msg) => {
                            last_error = Some(msg);
                            if !e.alternate {
                                break;
                            }
                        }
                    }
                }
                if !matched {
                    let mut msg = last_error.unwrap_or_default();
                    if name != "stderr" && !stderr_text.is_empty() {
                        msg += &format!("\n(stderr: {})", stderr_text.trim_end());
                    }
                    return Ok(Outcome::Fail(msg));
                }
            }
            Ok(Outcome::Pass)
        })();
        let _ = std::fs::remove_dir_all(&dir);
        result
    }
}

/// Every `*.clicktest` under `path` (a file or a directory), sorted.
pub fn find(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(find(&p));
            } else if p.extension().is_some_and(|x| x == "clicktest") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `oxnet clicktest PATH...`: runs every test found, prints one line per
/// test and a summary; returns whether none failed.
pub fn main(paths: &[PathBuf], verbose: bool, timeout: Duration) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding oxnet itself: {e}"))?;
    let mut runner = Runner::new(&exe)?;
    runner.timeout = timeout;
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for path in paths {
        let files = find(path);
        if files.is_empty() {
            return Err(format!("{}: no .clicktest files there", path.display()));
        }
        for file in files {
            let text = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let tests = match parse(&file.display().to_string(), &text) {
                Ok(t) => t,
                Err(e) => {
                    println!("FAIL {}: {e}", file.display());
                    failed += 1;
                    continue;
                }
            };
            for t in tests {
                match runner.run(&t) {
                    Outcome::Pass => {
                        passed += 1;
                        println!("PASS {}", t.name);
                    }
                    Outcome::Skipped(why) => {
                        skipped += 1;
                        println!("SKIP {}: {why}", t.name);
                    }
                    Outcome::Fail(why) => {
                        failed += 1;
                        if verbose {
                            println!("FAIL {}: {why}", t.name);
                        } else {
                            println!("FAIL {}: {}", t.name, why.lines().next().unwrap_or(""));
                        }
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&runner.bin_dir);
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    Ok(failed == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(data: &str, mode: char, w: bool) -> Expect {
        Expect {
            name: "stdout".into(),
            mode,
            whitespace: w,
            case_insensitive: false,
            alternate: false,
            data: data.into(),
        }
    }

    #[test]
    fn sections_parse() {
        let t = parse(
            "t",
            b"%info\nabout\n%script\nclick CONFIG\n%file CONFIG\nIdle\n%file -d x\n %y\n%file +3 raw\nabcdef\n%expect stdout\n5\n%eot\n%script\ntrue\n%eof\n%script\nfalse\n",
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].script, "click CONFIG\n");
        assert_eq!(t[0].files[0], ("CONFIG".to_string(), b"Idle\n".to_vec()));
        assert_eq!(t[0].files[1], ("x".to_string(), b"%y\n".to_vec()));
        assert_eq!(t[0].files[2], ("raw".to_string(), b"abc".to_vec()));
        assert_eq!(t[0].expects[0].data, "5\n");
        assert_eq!(t[1].script, "true\n");
    }

    #[test]
    fn look_ahead_groups_are_dropped_when_the_regex_crate_refuses_them() {
        // Click's valgrind filter: the look-ahead goes, the rest matches.
        let re = line_regex("=={{\\d+}}=={{(?!.*\\b(?:uninit|[Ii]nvalid).*).*}}", ' ', false, false).unwrap();
        assert!(re.is_match("==123== anything"));
        assert!(!re.is_match("=123= anything"));
        assert!(line_regex("a{{(}}", ' ', false, false).is_err());
    }

    #[test]
    fn expectations_compare_as_clicktest_1_says() {
        // Blank lines and trailing white space do not count; {{ }} are
        // regexes; {{? }} comments.
        compare(
            "a 1\n\nb  \n",
            &expect("a {{\\d+}}\nb {{?the b line}}\n", ' ', false),
            &[],
        )
        .unwrap();
        assert!(compare("a x\n", &expect("a {{\\d+}}\n", ' ', false), &[]).is_err());
        compare("a    b\n", &expect("a b\n", ' ', true), &[]).unwrap();
        assert!(compare("a    b\n", &expect("a b\n", ' ', false), &[]).is_err());
        assert!(compare("1\n2\n", &expect("1\n", ' ', false), &[]).is_err());
        compare("x1\n", &expect("x[0-9]\n", 'x', false), &[]).unwrap();
        let ignore = vec![Regex::new("^noise.*$").unwrap()];
        compare("noise 1\nok\n", &expect("ok\n", ' ', false), &ignore).unwrap();
        assert!(compare("ok\n", &expect("ok \n", 'v', false), &[]).is_err());
        // Literal text with regex metacharacters matches only itself.
        compare("a.b (c)\n", &expect("a.b (c)\n", ' ', false), &[]).unwrap();
        assert!(compare("axb (c)\n", &expect("a.b (c)\n", ' ', false), &[]).is_err());
    }

    #[test]
    fn base64_sections_decode() {
        assert_eq!(base64_decode(b"SGVs\nbG8=\n").unwrap(), b"Hello");
        assert!(base64_decode(b"*").is_err());
    }
}
