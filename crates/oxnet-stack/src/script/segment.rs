//! The parser's part for segment lines, `< S. 0:0(0) ack 1 win 100 <mss
//! 1460>` (packetdrill's `tcp_packet_spec`): flags, sequence numbers,
//! `ack`, `win`, `urg` and the TCP options.

use super::ast::{Direction, EventKind, SackBlock, TcpFlags, TcpOptionSpec};
use super::error::ScriptError;
use super::lex::Tok;
use super::parse::Parser;

/// How the end-of-line check names a segment: a field out of order is
/// the usual reason a segment's line goes on.
pub(super) const WHAT: &str = "segment (its fields come in the order flags, seq, ack, win, urg, <options>)";

/// The most option bytes a TCP header holds: the data offset counts 32-bit
/// words in 4 bits, so at most 60 header bytes, 20 of them fixed
/// (RFC 9293 §3.1, "Data Offset" and "Options").
const MAX_OPTION_BYTES: usize = 40;

impl Parser<'_> {
    /// `flags start:end(len) [ack N] [win N] [urg N] [<options>]`, the
    /// direction already read.
    pub(super) fn packet(&mut self, direction: Direction) -> Result<EventKind, ScriptError> {
        match &self.peek()?.tok {
            Tok::Punct('[' | '(') => {
                return Err(
                    self.unsupported("IP header fields such as `[ect0]`, `[ce]`, `(tos 0x2)` or `(flowlabel 1)`")
                )
            }
            Tok::Word(w) if w == "udp" || w == "icmp" => return Err(self.unsupported("UDP and ICMP packets")),
            _ => {}
        }
        let flags = self.flags()?;
        let seq_start = self.unsigned("a sequence number", u32::MAX.into())? as u32;
        self.punct(':', "`:` between the first and the end sequence number")?;
        let end_pos = self.peek()?.start;
        let seq_end = self.unsigned("an end sequence number", u32::MAX.into())? as u32;
        self.punct('(', "`(` and the payload length")?;
        let payload_len = self.unsigned("a payload length", u16::MAX.into())? as u16;
        self.punct(')', "`)` after the payload length")?;
        // The end is redundant, written for the reader: hold it to the sum
        // (modulo 2^32, as sequence numbers wrap, RFC 9293 §3.4).
        let want_end = seq_start.wrapping_add(payload_len.into());
        if seq_end != want_end {
            return Err(self.expected_at(
                end_pos,
                &format!("the end sequence number {want_end} (start {seq_start} + length {payload_len})"),
                &format!("`{seq_end}`"),
            ));
        }
        let ack = self
            .keyword_number("ack", "an acknowledgment number", u32::MAX.into())?
            .map(|n| n as u32);
        let window = self
            .keyword_number("win", "a window", u16::MAX.into())?
            .map(|n| n as u16);
        let urgent = self
            .keyword_number("urg", "an urgent pointer", u16::MAX.into())?
            .map(|n| n as u16);
        // packetdrill builds injected segments from the script alone, so it
        // needs their window; an expected segment's may be left unchecked.
        if direction == Direction::Inbound && window.is_none() {
            return Err(self.expected("`win N` (an inbound segment must give its window)", ""));
        }
        let options = if self.peek()?.tok == Tok::Punct('<') {
            self.options()?
        } else {
            Some(Vec::new())
        };
        Ok(EventKind::Packet {
            direction,
            flags,
            seq_start,
            seq_end,
            payload_len,
            ack,
            window,
            urgent,
            options,
        })
    }

    /// Letters from `SFRPUEW` then an optional `.` (ACK), a lone `.`, or
    /// `-` for no flag at all.
    fn flags(&mut self) -> Result<TcpFlags, ScriptError> {
        const WANT: &str = "TCP flags (letters from `SFRPUEW`, then `.` for ACK; `-` for none)";
        let mut flags = TcpFlags::default();
        match &self.peek()?.tok {
            Tok::Punct('-') => {
                self.bump()?;
                return Ok(flags);
            }
            Tok::Punct('.') => {}
            Tok::Word(letters) => {
                let letters = letters.clone();
                for letter in letters.chars() {
                    let bit = match letter {
                        'S' => &mut flags.syn,
                        'F' => &mut flags.fin,
                        'R' => &mut flags.rst,
                        'P' => &mut flags.psh,
                        'U' => &mut flags.urg,
                        'E' => &mut flags.ece,
                        'W' => &mut flags.cwr,
                        'A' | '0'..='9' => return Err(self.unsupported("AccECN flags (`A` and the ACE digits)")),
                        _ => return Err(self.expected(WANT, "")),
                    };
                    if *bit {
                        return Err(self.expected("each flag once", &format!("`{letters}`")));
                    }
                    *bit = true;
                }
                self.bump()?;
            }
            Tok::Number(n) if n.starts_with('.') => {
                return Err(self.unsupported("AccECN flags (`A` and the ACE digits)"))
            }
            _ => return Err(self.expected(WANT, "")),
        }
        if self.peek()?.tok == Tok::Punct('.') {
            self.bump()?;
            flags.ack = true;
        }
        Ok(flags)
    }

    /// `<...>` (any options: `None`) or `<option, option, ...>`.
    fn options(&mut self) -> Result<Option<Vec<TcpOptionSpec>>, ScriptError> {
        let open = self.bump()?.start;
        if self.peek()?.tok == Tok::Ellipsis {
            self.bump()?;
            self.punct('>', "`>` after `<...`")?;
            return Ok(None);
        }
        let mut options = Vec::new();
        loop {
            options.push(self.tcp_option()?);
            match self.peek()?.tok {
                Tok::Punct(',') => {
                    self.bump()?;
                }
                Tok::Punct('>') => {
                    self.bump()?;
                    break;
                }
                _ => return Err(self.expected("`,` and another option, or `>` ending the options", "")),
            }
        }
        let bytes: usize = options.iter().map(TcpOptionSpec::encoded_len).sum();
        if bytes > MAX_OPTION_BYTES {
            return Err(self.expected_at(
                open,
                "options that fit in a TCP header's 40 bytes (RFC 9293 §3.1)",
                &format!("{bytes} bytes"),
            ));
        }
        if !bytes.is_multiple_of(4) {
            return Err(self.expected_at(
                open,
                "options padded with `nop` to a multiple of 4 bytes (the data offset counts 32-bit words, RFC 9293 §3.1)",
                &format!("{bytes} bytes"),
            ));
        }
        Ok(Some(options))
    }

    fn tcp_option(&mut self) -> Result<TcpOptionSpec, ScriptError> {
        const WANT: &str =
            "a TCP option (`nop`, `eol`, `mss N`, `wscale N`, `sackOK`, `sack L:R ...`, `TS val N ecr N`)";
        let Tok::Word(name) = &self.peek()?.tok else {
            return Err(self.expected(WANT, ""));
        };
        let option = match name.as_str() {
            "nop" => TcpOptionSpec::Nop,
            "eol" => TcpOptionSpec::EndOfList,
            "sackOK" => TcpOptionSpec::SackPermitted,
            "mss" | "wscale" | "sack" | "TS" => {
                let name = name.clone();
                self.bump()?;
                return match name.as_str() {
                    "mss" => Ok(TcpOptionSpec::Mss(self.unsigned("an MSS", u16::MAX.into())? as u16)),
                    "wscale" => Ok(TcpOptionSpec::WindowScale(
                        self.unsigned("a window scale shift count", u8::MAX.into())? as u8,
                    )),
                    "sack" => self.sack_blocks(),
                    _ => self.timestamps(),
                };
            }
            "FO" | "FOEXP" => return Err(self.unsupported("TCP Fast Open options (`FO`, `FOEXP`)")),
            "md5" => return Err(self.unsupported("TCP MD5 signature options (`md5`)")),
            _ => return Err(self.expected(WANT, "")),
        };
        self.bump()?;
        Ok(option)
    }

    /// `L:R L:R ...` after `sack`: one block or more.
    fn sack_blocks(&mut self) -> Result<TcpOptionSpec, ScriptError> {
        let mut blocks = Vec::new();
        loop {
            let left = self.unsigned("a SACK block's left edge", u32::MAX.into())? as u32;
            self.punct(':', "`:` between a SACK block's edges")?;
            let right = self.unsigned("a SACK block's right edge", u32::MAX.into())? as u32;
            blocks.push(SackBlock { left, right });
            if !matches!(self.peek()?.tok, Tok::Number(_)) {
                return Ok(TcpOptionSpec::Sack(blocks));
            }
        }
    }

    /// `val N ecr N` after `TS`.
    fn timestamps(&mut self) -> Result<TcpOptionSpec, ScriptError> {
        self.keyword("val")?;
        let val = self.unsigned("a TSval", u32::MAX.into())? as u32;
        self.keyword("ecr")?;
        let ecr = self.unsigned("a TSecr", u32::MAX.into())? as u32;
        Ok(TcpOptionSpec::Timestamp { val, ecr })
    }
}
