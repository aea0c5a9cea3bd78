//! The pretty-printer: a [`Script`] back to text that [`parse`](super::parse)
//! reads as the same script (line numbers aside), one event per line in
//! packetdrill's layout: times right-aligned, options without blanks.

use std::fmt::{self, Display, Formatter};

use super::ast::{Direction, Event, EventKind, EventTime, Expr, Field, Micros, Script, TcpFlags, TcpOptionSpec};

/// Microseconds shown as seconds with no trailing zeros: `0.1`, `2`,
/// `0.000001`.
pub(super) struct Seconds(pub Micros);

impl Display for Seconds {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (whole, fraction) = (self.0 / 1_000_000, self.0 % 1_000_000);
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{fraction:06}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl Display for Script {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (name, value) in &self.options {
            match value.as_str() {
                "" => writeln!(f, "--{name}")?,
                value => writeln!(f, "--{name}={value}")?,
            }
        }
        for event in &self.events {
            writeln!(f, "{event}")?;
        }
        Ok(())
    }
}

impl Display for Event {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.time {
            EventTime::Untimed => write!(f, "{}", self.kind),
            time => write!(f, "{:>6} {}", time.to_string(), self.kind),
        }
    }
}

impl Display for EventTime {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match *self {
            EventTime::Absolute(t) => write!(f, "{}", Seconds(t)),
            EventTime::Relative(t) => write!(f, "+{}", Seconds(t)),
            EventTime::Range { relative, start, end } => {
                let plus = if relative { "+" } else { "" };
                write!(f, "{plus}{}~{plus}{}", Seconds(start), Seconds(end))
            }
            EventTime::Any => write!(f, "*"),
            EventTime::Untimed => Ok(()),
        }
    }
}

impl Display for EventKind {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            EventKind::Syscall {
                name,
                args,
                result,
                errno,
            } => {
                write!(f, "{name}(")?;
                comma_separated(f, args)?;
                write!(f, ") = {result}")?;
                // packetdrill wants a note after an errno; the original
                // note is not kept, so the name stands in for it.
                match errno {
                    Some(errno) => write!(f, " {errno} ({errno})"),
                    None => Ok(()),
                }
            }
            EventKind::Packet {
                direction,
                flags,
                seq_start,
                seq_end,
                payload_len,
                ack,
                window,
                urgent,
                options,
            } => {
                let arrow = match direction {
                    Direction::Inbound => '<',
                    Direction::Outbound => '>',
                };
                write!(f, "{arrow} {flags} {seq_start}:{seq_end}({payload_len})")?;
                if let Some(ack) = ack {
                    write!(f, " ack {ack}")?;
                }
                if let Some(window) = window {
                    write!(f, " win {window}")?;
                }
                if let Some(urgent) = urgent {
                    write!(f, " urg {urgent}")?;
                }
                match options {
                    None => write!(f, " <...>"),
                    Some(options) if options.is_empty() => Ok(()),
                    Some(options) => {
                        write!(f, " <")?;
                        for (i, option) in options.iter().enumerate() {
                            let comma = if i == 0 { "" } else { "," };
                            write!(f, "{comma}{option}")?;
                        }
                        write!(f, ">")
                    }
                }
            }
            EventKind::Shell(command) => write!(f, "`{command}`"),
        }
    }
}

impl Display for TcpFlags {
    /// The letters in the order `SFRPUEW`, then `.`; `-` for none.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let letters = [
            (self.syn, 'S'),
            (self.fin, 'F'),
            (self.rst, 'R'),
            (self.psh, 'P'),
            (self.urg, 'U'),
            (self.ece, 'E'),
            (self.cwr, 'W'),
            (self.ack, '.'),
        ];
        if !letters.iter().any(|&(set, _)| set) {
            return write!(f, "-");
        }
        for (set, letter) in letters {
            if set {
                write!(f, "{letter}")?;
            }
        }
        Ok(())
    }
}

impl Display for TcpOptionSpec {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TcpOptionSpec::EndOfList => write!(f, "eol"),
            TcpOptionSpec::Nop => write!(f, "nop"),
            TcpOptionSpec::Mss(mss) => write!(f, "mss {mss}"),
            TcpOptionSpec::WindowScale(shift) => write!(f, "wscale {shift}"),
            TcpOptionSpec::SackPermitted => write!(f, "sackOK"),
            TcpOptionSpec::Sack(blocks) => {
                write!(f, "sack")?;
                for block in blocks {
                    write!(f, " {}:{}", block.left, block.right)?;
                }
                Ok(())
            }
            TcpOptionSpec::Timestamp { val, ecr } => write!(f, "TS val {val} ecr {ecr}"),
        }
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Ellipsis => write!(f, "..."),
            Expr::Int(n) => write!(f, "{n}"),
            Expr::Symbol(name) => write!(f, "{name}"),
            Expr::Str(text) => write!(f, "\"{text}\""),
            Expr::List(items) => {
                write!(f, "[")?;
                comma_separated(f, items)?;
                write!(f, "]")
            }
            Expr::Struct(fields) => {
                write!(f, "{{")?;
                comma_separated(f, fields)?;
                write!(f, "}}")
            }
            Expr::Call { name, args } => {
                write!(f, "{name}(")?;
                comma_separated(f, args)?;
                write!(f, ")")
            }
            Expr::BitOr(items) => {
                for (i, item) in items.iter().enumerate() {
                    let bar = if i == 0 { "" } else { "|" };
                    write!(f, "{bar}{item}")?;
                }
                Ok(())
            }
        }
    }
}

impl Display for Field {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{name}={}", self.value),
            None => write!(f, "{}", self.value),
        }
    }
}

fn comma_separated<T: Display>(f: &mut Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        let comma = if i == 0 { "" } else { ", " };
        write!(f, "{comma}{item}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_trim_trailing_zeros() {
        assert_eq!(Seconds(0).to_string(), "0");
        assert_eq!(Seconds(100_000).to_string(), "0.1");
        assert_eq!(Seconds(2_000_000).to_string(), "2");
        assert_eq!(Seconds(1_000_001).to_string(), "1.000001");
    }

    #[test]
    fn flags_in_canonical_order() {
        let fin_psh_ack = TcpFlags {
            fin: true,
            psh: true,
            ack: true,
            ..TcpFlags::default()
        };
        assert_eq!(fin_psh_ack.to_string(), "FP.");
        assert_eq!(TcpFlags::default().to_string(), "-");
        let ecn_syn = TcpFlags {
            syn: true,
            ece: true,
            cwr: true,
            ..TcpFlags::default()
        };
        assert_eq!(ecn_syn.to_string(), "SEW");
    }

    #[test]
    fn expressions() {
        let pollfd = Expr::List(vec![Expr::Struct(vec![
            Field {
                name: Some("fd".into()),
                value: Expr::Int(4),
            },
            Field {
                name: Some("events".into()),
                value: Expr::BitOr(vec![Expr::Symbol("POLLIN".into()), Expr::Symbol("POLLOUT".into())]),
            },
            Field {
                name: None,
                value: Expr::Ellipsis,
            },
        ])]);
        assert_eq!(pollfd.to_string(), "[{fd=4, events=POLLIN|POLLOUT, ...}]");
        assert_eq!(Expr::Str(r#"a\"\x01é"#.into()).to_string(), r#""a\"\x01é""#);
        let call = Expr::Call {
            name: "inet_addr".into(),
            args: vec![Expr::Str("192.0.2.1".into())],
        };
        assert_eq!(call.to_string(), "inet_addr(\"192.0.2.1\")");
    }
}
