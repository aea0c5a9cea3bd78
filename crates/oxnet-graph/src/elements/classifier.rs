//! Classification by packet contents, after Click's documentation of
//! Classifier (elements/standard/classifier.hh), and the decision
//! program that Classifier, IPClassifier and IPFilter share.
//!
//! | element | ports | processing | what |
//! |---|---|---|---|
//! | Classifier(PATTERN, ...) | 1/- | push | a packet goes to the output of the first pattern of OFFSET/VALUE[%MASK] clauses it matches; no match: dropped |
//!
//! IPClassifier and IPFilter (ipfilter.rs) parse their tcpdump-like
//! expressions into the same [`Expr`] trees and compile them with
//! [`Program::compile`].
//!
//! ## The decision program
//!
//! Every pattern is a boolean expression over [`Test`]s: "the bits of a
//! 1 to 4 byte field, shifted and masked, compared with a value". A test
//! whose bytes are not all in the packet is false, whatever its operator
//! (so `transp[1] != 0` is false on a packet cut before byte 1, while
//! `not transp[1] == 0` is true: Click's test ip/IPFilter-03).
//!
//! At configuration the patterns are compiled, last to first, into one
//! decision graph: each node runs one test and names the node (or the
//! output, or "drop") to go to on yes and on no. `a and b` becomes
//! "test a; yes: test b", `not a` swaps the two exits, and the "no" exit
//! of pattern i is the entry of pattern i+1, so the first matching
//! pattern wins (Click's rule). Identical (test, yes, no) nodes are made
//! once, a test with both exits the same is left out, and a node always
//! leads to nodes made before it, so a walk ends. A packet walks the
//! graph from the entry: no allocation, one bounds check per test.

use crate::args::Args;
use crate::element::*;
use crate::router::Ctx;
use oxnet_driver::{Packet, PacketBatch};
use std::collections::HashMap;
use std::fmt;

/// Where a test's offset counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Base {
    /// The first byte of the packet data (Classifier).
    Data,
    /// The network header mark (Click's `ip_header()`).
    Network,
    /// The transport header mark (Click's `transport_header()`).
    Transport,
}

/// How a field is compared with a test's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rel {
    Eq,
    Gt,
    Lt,
}

/// One comparison: `((FIELD >> shift) & mask) REL value`, negated if
/// `negate`, where FIELD is the `len` bytes (1 to 4, network byte order)
/// at `offset` from `base`. False if those bytes are not all there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Test {
    pub base: Base,
    pub offset: u32,
    pub len: u8,
    pub shift: u8,
    pub mask: u32,
    pub rel: Rel,
    pub value: u32,
    pub negate: bool,
}

impl Test {
    /// `FIELD & mask == value` on `len` bytes at `offset`.
    pub fn eq(base: Base, offset: u32, len: u8, mask: u32, value: u32) -> Test {
        Test {
            base,
            offset,
            len,
            shift: 0,
            mask,
            rel: Rel::Eq,
            value,
            negate: false,
        }
    }

    /// The test with its result inverted (the bytes still must be there).
    pub fn negated(mut self) -> Test {
        self.negate = !self.negate;
        self
    }

    /// Runs the test on a packet view.
    #[inline]
    pub fn eval(&self, view: &View<'_>) -> bool {
        let Some(field) = view.field(self.base, self.offset, self.len) else {
            return false;
        };
        let v = field.checked_shr(u32::from(self.shift)).unwrap_or(0) & self.mask;
        let r = match self.rel {
            Rel::Eq => v == self.value,
            Rel::Gt => v > self.value,
            Rel::Lt => v < self.value,
        };
        r != self.negate
    }
}

impl fmt::Display for Test {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = match self.base {
            Base::Data => "",
            Base::Network => "ip",
            Base::Transport => "transp",
        };
        write!(f, "{base}[{}:{}]", self.offset, self.len)?;
        if self.shift != 0 {
            write!(f, ">>{}", self.shift)?;
        }
        let op = match (self.rel, self.negate) {
            (Rel::Eq, false) => "==",
            (Rel::Eq, true) => "!=",
            (Rel::Gt, false) => ">",
            (Rel::Gt, true) => "<=",
            (Rel::Lt, false) => "<",
            (Rel::Lt, true) => ">=",
        };
        write!(f, "&{:#x} {op} {:#x}", self.mask, self.value)
    }
}

/// The bytes a packet offers to tests: its data and where its network
/// and transport headers start (None: not marked, or before the data).
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [u8],
    pub network: Option<usize>,
    pub transport: Option<usize>,
}

impl<'a> View<'a> {
    /// A packet's view, with the header marks an element set before
    /// (CheckIPHeader, MarkIPHeader). A mark that lies before the data
    /// (the header was stripped) offers no bytes.
    pub fn of(p: &'a Packet) -> View<'a> {
        let mark = |m: Option<isize>| m.and_then(|o| usize::try_from(o).ok());
        View {
            data: p,
            network: mark(p.network_offset()),
            transport: mark(p.transport_offset()),
        }
    }

    /// `len` bytes at `offset` from `base` as a big-endian number.
    #[inline]
    pub fn field(&self, base: Base, offset: u32, len: u8) -> Option<u32> {
        let start = match base {
            Base::Data => 0,
            Base::Network => self.network?,
            Base::Transport => self.transport?,
        };
        let from = start.checked_add(offset as usize)?;
        let bytes = self.data.get(from..from.checked_add(usize::from(len))?)?;
        Some(bytes.iter().fold(0u32, |v, &b| (v << 8) | u32::from(b)))
    }
}

/// A pattern: a boolean expression over tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    True,
    False,
    Test(Test),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

impl Expr {
    pub fn negation(e: Expr) -> Expr {
        Expr::Not(Box::new(e))
    }
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::And(Box::new(a), Box::new(b))
    }
    pub fn or(a: Expr, b: Expr) -> Expr {
        Expr::Or(Box::new(a), Box::new(b))
    }

    /// All of `parts` (true if none).
    pub fn all(parts: impl IntoIterator<Item = Expr>) -> Expr {
        parts.into_iter().reduce(Expr::and).unwrap_or(Expr::True)
    }

    /// The direct meaning of the expression on a packet: the reference
    /// the compiled [`Program`] must agree with (see the tests).
    pub fn eval(&self, view: &View<'_>) -> bool {
        match self {
            Expr::True => true,
            Expr::False => false,
            Expr::Test(t) => t.eval(view),
            Expr::Not(e) => !e.eval(view),
            Expr::And(a, b) => a.eval(view) && b.eval(view),
            Expr::Or(a, b) => a.eval(view) || b.eval(view),
            Expr::Cond(c, a, b) => {
                if c.eval(view) {
                    a.eval(view)
                } else {
                    b.eval(view)
                }
            }
        }
    }
}

/// Where a decision leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Next {
    Node(u32),
    Output(u32),
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Node {
    test: Test,
    yes: Next,
    no: Next,
}

/// Patterns compiled into a decision graph (see the module comment).
#[derive(Debug, Clone)]
pub struct Program {
    nodes: Vec<Node>,
    entry: Next,
}

impl Default for Program {
    fn default() -> Self {
        Program {
            nodes: Vec::new(),
            entry: Next::Drop,
        }
    }
}

struct Builder {
    nodes: Vec<Node>,
    made: HashMap<Node, u32>,
}

impl Builder {
    fn node(&mut self, test: Test, mut yes: Next, mut no: Next) -> Next {
        // A test right after the same test knows its answer already.
        if let Next::Node(j) = yes {
            if self.nodes[j as usize].test == test {
                yes = self.nodes[j as usize].yes;
            }
        }
        if let Next::Node(j) = no {
            if self.nodes[j as usize].test == test {
                no = self.nodes[j as usize].no;
            }
        }
        if yes == no {
            return yes;
        }
        let node = Node { test, yes, no };
        if let Some(&i) = self.made.get(&node) {
            return Next::Node(i);
        }
        let i = self.nodes.len() as u32;
        self.nodes.push(node);
        self.made.insert(node, i);
        Next::Node(i)
    }

    /// Where `e` leads, given where its true and false go.
    fn expr(&mut self, e: &Expr, yes: Next, no: Next) -> Next {
        match e {
            Expr::True => yes,
            Expr::False => no,
            Expr::Test(t) => self.node(*t, yes, no),
            Expr::Not(a) => self.expr(a, no, yes),
            Expr::And(a, b) => {
                let then = self.expr(b, yes, no);
                self.expr(a, then, no)
            }
            Expr::Or(a, b) => {
                let otherwise = self.expr(b, yes, no);
                self.expr(a, yes, otherwise)
            }
            Expr::Cond(c, a, b) => {
                let then = self.expr(a, yes, no);
                let otherwise = self.expr(b, yes, no);
                self.expr(c, then, otherwise)
            }
        }
    }
}

impl Program {
    /// Compiles `(pattern, output)` pairs, tried in order; an output of
    /// None drops the packet (IPFilter's `drop`). No match: dropped.
    pub fn compile(patterns: &[(Expr, Option<u32>)]) -> Program {
        let mut b = Builder {
            nodes: Vec::new(),
            made: HashMap::new(),
        };
        let mut next = Next::Drop;
        for (expr, output) in patterns.iter().rev() {
            let target = output.map_or(Next::Drop, Next::Output);
            next = b.expr(expr, target, next);
        }
        Program {
            nodes: b.nodes,
            entry: next,
        }
    }

    /// The output for a packet (None: dropped).
    #[inline]
    pub fn classify(&self, view: &View<'_>) -> Option<u32> {
        let mut at = self.entry;
        loop {
            match at {
                Next::Node(i) => {
                    let node = &self.nodes[i as usize];
                    at = if node.test.eval(view) { node.yes } else { node.no };
                }
                Next::Output(k) => return Some(k),
                Next::Drop => return None,
            }
        }
    }

    /// The number of tests in the graph.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The `program` handler: one line per node, the entry first.
    pub fn listing(&self) -> String {
        let name = |n: Next| match n {
            Next::Node(i) => format!("step {i}"),
            Next::Output(k) => format!("[{k}]"),
            Next::Drop => "[X]".to_string(),
        };
        let mut out = format!("entry {}\n", name(self.entry));
        for (i, n) in self.nodes.iter().enumerate().rev() {
            out += &format!("{i:3}  {}  yes->{}  no->{}\n", n.test, name(n.yes), name(n.no));
        }
        out
    }
}

/// Per element: where each packet of the batch in hand goes (kept
/// between batches, so that classifying allocates nothing once it has
/// seen the largest batch).
#[derive(Debug, Default)]
pub struct Splitter {
    choices: Vec<Option<u32>>,
    /// Packets no pattern matched, dropped by a rule, or sent to an
    /// output that is not connected.
    pub drops: u64,
}

impl Splitter {
    /// Sends each packet of `batch` to the output `program` picks, order
    /// kept within each output. A batch that goes one way entirely (the
    /// common case) moves on as it is; a mixed one is split, one batch
    /// per output used.
    pub fn push(&mut self, program: &Program, mut batch: PacketBatch, ctx: &mut Ctx<'_>) {
        let n = ctx.noutputs();
        self.choices.clear();
        self.choices.extend(
            batch
                .iter()
                .map(|p| program.classify(&View::of(p)).filter(|&k| (k as usize) < n)),
        );
        let Some(&first) = self.choices.first() else {
            return;
        };
        if self.choices.iter().all(|&c| c == first) {
            match first {
                Some(k) => ctx.push(k as usize, batch),
                None => self.drops += batch.len() as u64,
            }
            return;
        }
        let mut outs: Vec<Option<PacketBatch>> = (0..n).map(|_| None).collect();
        let len = batch.len();
        let mut i = 0;
        let choices = &self.choices;
        let mut drops = 0;
        batch.consume_front(len, |p| {
            match choices[i] {
                Some(k) => outs[k as usize]
                    .get_or_insert_with(|| PacketBatch::with_capacity(len))
                    .push(p),
                None => drops += 1,
            }
            i += 1;
        });
        self.drops += drops;
        for (k, b) in outs.into_iter().enumerate() {
            if let Some(b) = b {
                ctx.push(k, b);
            }
        }
    }
}

/// Parses one Classifier pattern: `-`, or clauses `[!]OFFSET/VALUE[%MASK]`
/// separated by spaces (Click's classifier.hh: OFFSET decimal, VALUE and
/// MASK hex with an even number of digits, `?` a nibble that is not
/// compared). A clause on bytes past the packet's end does not match,
/// with or without `!`.
pub fn parse_classifier_pattern(text: &str) -> Result<Expr, String> {
    let text = text.trim();
    if text == "-" {
        return Ok(Expr::True);
    }
    if text.is_empty() {
        return Err("empty pattern".into());
    }
    let mut parts = Vec::new();
    for clause in text.split_ascii_whitespace() {
        parts.push(parse_clause(clause)?);
    }
    Ok(Expr::all(parts))
}

fn parse_clause(clause: &str) -> Result<Expr, String> {
    let (negated, body) = match clause.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, clause),
    };
    let bad = || format!("bad clause '{clause}' (OFFSET/VALUE[%MASK])");
    let (offset, rest) = body.split_once('/').ok_or_else(bad)?;
    let offset: u32 = offset.parse().map_err(|_| bad())?;
    let (value, mask) = match rest.split_once('%') {
        Some((v, m)) => (v, Some(m)),
        None => (rest, None),
    };
    if value.is_empty() || value.len() % 2 != 0 {
        return Err(format!("'{clause}': the value needs an even number of hex digits"));
    }
    if let Some(m) = mask {
        if m.len() != value.len() {
            return Err(format!(
                "'{clause}': the mask must have as many hex digits as the value"
            ));
        }
    }
    // Per byte: value and the mask of bits compared.
    let mut bytes = Vec::new();
    let vb = value.as_bytes();
    for i in (0..vb.len()).step_by(2) {
        let mut v = 0u8;
        let mut m = 0u8;
        for &c in &vb[i..i + 2] {
            let (dv, dm) = match c {
                b'?' => (0, 0),
                _ => (
                    hex(c).ok_or_else(|| format!("'{clause}': '{}' is not a hex digit", c as char))?,
                    0xf,
                ),
            };
            v = (v << 4) | dv;
            m = (m << 4) | dm;
        }
        if let Some(mask) = mask {
            let mb = &mask.as_bytes()[i..i + 2];
            let mut given = 0u8;
            for &c in mb {
                given =
                    (given << 4) | hex(c).ok_or_else(|| format!("'{clause}': '{}' is not a hex digit", c as char))?;
            }
            m &= given;
        }
        bytes.push((v & m, m));
    }
    // Four bytes a test.
    let mut tests = Vec::new();
    let mut at = offset;
    for chunk in bytes.chunks(4) {
        let (mut v, mut m) = (0u32, 0u32);
        for &(bv, bm) in chunk {
            v = (v << 8) | u32::from(bv);
            m = (m << 8) | u32::from(bm);
        }
        tests.push(Test::eq(Base::Data, at, chunk.len() as u8, m, v));
        at += chunk.len() as u32;
    }
    if !negated {
        return Ok(Expr::all(tests.into_iter().map(Expr::Test)));
    }
    if tests.len() == 1 {
        return Ok(Expr::Test(tests[0].negated()));
    }
    // The bytes must be there, and differ somewhere.
    let last = at - 1;
    let present = Test::eq(Base::Data, last, 1, 0, 0);
    Ok(Expr::and(
        Expr::Test(present),
        Expr::negation(Expr::all(tests.into_iter().map(Expr::Test))),
    ))
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Click's Classifier: see the module comment.
///
/// Arguments: one pattern per output, `-` matching every packet.
/// Handlers: `program` (the compiled decision graph), `drops` (packets
/// no pattern matched, or sent to an output that is not connected).
#[derive(Default)]
pub struct Classifier {
    program: Program,
    split: Splitter,
}

impl Element for Classifier {
    fn class_name(&self) -> &'static str {
        "Classifier"
    }
    fn port_count(&self) -> &'static str {
        "1/-"
    }
    fn processing(&self) -> &'static str {
        PUSH
    }
    fn configure(&mut self, a: &mut Args) -> Result<(), String> {
        let mut patterns = Vec::new();
        for (k, text) in a.take_raw().iter().enumerate() {
            let expr = parse_classifier_pattern(text).map_err(|e| format!("pattern {k}: {e}"))?;
            patterns.push((expr, Some(k as u32)));
        }
        self.program = Program::compile(&patterns);
        Ok(())
    }
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, ctx: &mut Ctx<'_>) {
        let batch = std::mem::take(batch);
        self.split.push(&self.program, batch, ctx);
    }
    fn handlers(&self) -> &'static [(&'static str, bool, bool)] {
        &[("drops", true, false), ("program", true, false)]
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        match name {
            "drops" => Some(self.split.drops.to_string()),
            "program" => Some(self.program.listing()),
            _ => None,
        }
    }
}

/// The classes of this module (see [`super::MODULES`]).
pub const MODULE: super::Module = super::Module {
    classes: &["Classifier"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    match class {
        "Classifier" => Some(Box::<Classifier>::default()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(data: &[u8]) -> View<'_> {
        View {
            data,
            network: None,
            transport: None,
        }
    }

    fn classify(patterns: &[&str], data: &[u8]) -> Option<u32> {
        let ps: Vec<(Expr, Option<u32>)> = patterns
            .iter()
            .enumerate()
            .map(|(k, p)| (parse_classifier_pattern(p).unwrap(), Some(k as u32)))
            .collect();
        let prog = Program::compile(&ps);
        let direct = ps.iter().find(|(e, _)| e.eval(&view(data))).and_then(|(_, o)| *o);
        let got = prog.classify(&view(data));
        assert_eq!(got, direct, "compiled and direct disagree on {patterns:?}");
        got
    }

    fn ether(ty: u16, extra: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&ty.to_be_bytes());
        p.extend_from_slice(extra);
        p
    }

    #[test]
    fn clicks_example_sorts_arp_requests_replies_ip_and_the_rest() {
        let pats = ["12/0806 20/0001", "12/0806 20/0002", "12/0800", "-"];
        let arp = |op: u8| ether(0x0806, &[0, 1, 8, 0, 6, 4, 0, op]);
        assert_eq!(classify(&pats, &arp(1)), Some(0));
        assert_eq!(classify(&pats, &arp(2)), Some(1));
        assert_eq!(classify(&pats, &ether(0x0800, &[0x45])), Some(2));
        assert_eq!(classify(&pats, &ether(0x86dd, &[])), Some(3));
        assert_eq!(classify(&pats, &[1, 2]), Some(3), "too short for every clause");
    }

    #[test]
    fn masks_nibbles_and_negation() {
        assert_eq!(classify(&["12/0800%ff00"], &ether(0x08ff, &[])), Some(0));
        assert_eq!(classify(&["12/0800%ff00"], &ether(0x09ff, &[])), None);
        assert_eq!(classify(&["0/4?"], &[0x47]), Some(0));
        assert_eq!(classify(&["0/4?"], &[0x57]), None);
        assert_eq!(classify(&["0/?5%0f"], &[0xf5]), Some(0));
        assert_eq!(classify(&["!12/0800", "-"], &ether(0x0806, &[])), Some(0));
        assert_eq!(classify(&["!12/0800", "-"], &ether(0x0800, &[])), Some(1));
        assert_eq!(
            classify(&["!12/0800", "-"], &[0; 13]),
            Some(1),
            "a short packet matches no clause"
        );
        // Values longer than four bytes: several tests, all compared.
        let long = ["0/0102030405060708090a"];
        assert_eq!(classify(&long, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), Some(0));
        assert_eq!(classify(&long, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 11]), None);
        assert_eq!(classify(&long, &[1, 2, 3, 4, 5, 6, 7, 8, 9]), None);
        let nlong = ["!0/0102030405", "-"];
        assert_eq!(classify(&nlong, &[1, 2, 3, 4, 6]), Some(0));
        assert_eq!(classify(&nlong, &[1, 2, 3, 4, 5]), Some(1));
        assert_eq!(classify(&nlong, &[1, 2, 3, 4]), Some(1));
    }

    #[test]
    fn the_first_matching_pattern_wins() {
        assert_eq!(classify(&["-", "0/01"], &[1]), Some(0));
        assert_eq!(classify(&["0/01", "-"], &[1]), Some(0));
        assert_eq!(classify(&["0/02", "0/01", "0/01"], &[1]), Some(1));
        assert_eq!(classify(&["0/02 1/03", "0/02"], &[2, 4]), Some(1));
    }

    #[test]
    fn parse_errors_say_what_is_wrong() {
        let err = |p: &str| parse_classifier_pattern(p).unwrap_err();
        assert_eq!(err(""), "empty pattern");
        assert_eq!(err("12"), "bad clause '12' (OFFSET/VALUE[%MASK])");
        assert_eq!(err("x/08"), "bad clause 'x/08' (OFFSET/VALUE[%MASK])");
        assert_eq!(err("12/080"), "'12/080': the value needs an even number of hex digits");
        assert_eq!(err("12/"), "'12/': the value needs an even number of hex digits");
        assert_eq!(
            err("12/0800%ff"),
            "'12/0800%ff': the mask must have as many hex digits as the value"
        );
        assert_eq!(err("12/08g0"), "'12/08g0': 'g' is not a hex digit");
        assert_eq!(err("12/0800%fg00"), "'12/0800%fg00': 'g' is not a hex digit");
    }

    #[test]
    fn the_program_shares_tests_and_drops_useless_ones() {
        let ps = vec![
            (parse_classifier_pattern("12/0806 20/0001").unwrap(), Some(0)),
            (parse_classifier_pattern("12/0806 20/0002").unwrap(), Some(1)),
            (parse_classifier_pattern("12/0800").unwrap(), Some(2)),
            (Expr::True, Some(3)),
        ];
        let prog = Program::compile(&ps);
        // 12/0806 twice compiles to two nodes (their exits differ), but
        // "x or x" style duplicates with equal exits are shared.
        assert_eq!(prog.len(), 5);
        let dup = Program::compile(&[(
            Expr::or(
                parse_classifier_pattern("0/01").unwrap(),
                parse_classifier_pattern("0/01").unwrap(),
            ),
            Some(0),
        )]);
        assert_eq!(dup.len(), 1);
        assert!(Program::compile(&[(Expr::True, Some(2))]).is_empty());
        assert!(prog.listing().starts_with("entry step 4\n"), "{}", prog.listing());
    }

    use proptest::prelude::*;

    /// A clause `[!]OFFSET/VALUE[%MASK]` with '?' nibbles now and then,
    /// its bytes small (0 to 3) like the packets', so that clauses match
    /// about as often as not.
    fn arb_clause() -> impl Strategy<Value = String> {
        (
            any::<bool>(),
            0u32..10,
            prop::collection::vec((0u8..3, 0u8..5, any::<u8>()), 1..7),
            any::<bool>(),
        )
            .prop_map(|(neg, offset, bytes, masked)| {
                let mut value = String::new();
                let mut mask = String::new();
                for (hi, lo, m) in &bytes {
                    value.push(if *hi == 2 { '?' } else { '0' });
                    value.push(if *lo == 4 { '?' } else { char::from(b'0' + lo) });
                    mask += &format!("{m:02x}");
                }
                let mut c = format!("{}{offset}/{value}", if neg { "!" } else { "" });
                if masked {
                    c += &format!("%{mask}");
                }
                c
            })
    }

    proptest! {
        /// The compiled graph sends every packet where the Classifier
        /// patterns, read directly and in order, send it.
        #[test]
        fn compiled_classifier_agrees_with_the_clauses(
            pool in prop::collection::vec(arb_clause(), 4),
            patterns in prop::collection::vec(prop::collection::vec(0usize..4, 1..4), 1..5),
            packets in prop::collection::vec(prop::collection::vec(0u8..4, 0..14), 1..30),
        ) {
            // Patterns share clauses from a small pool, as real ones do
            // (12/0806 twice in Click's example).
            let ps: Vec<(Expr, Option<u32>)> = patterns
                .iter()
                .enumerate()
                .map(|(k, picks)| {
                    let text: Vec<&str> = picks.iter().map(|&i| pool[i].as_str()).collect();
                    (parse_classifier_pattern(&text.join(" ")).unwrap(), Some(k as u32))
                })
                .collect();
            let prog = Program::compile(&ps);
            for data in &packets {
                let v = view(data);
                let direct = ps.iter().find(|(e, _)| e.eval(&v)).and_then(|(_, o)| *o);
                prop_assert_eq!(prog.classify(&v), direct, "{:?} {:?} on {:?}", pool, patterns, data);
            }
        }
    }
}
