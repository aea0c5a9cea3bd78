//! Bodies of the stack's fuzz targets in `fuzz/` (cargo-fuzz), kept in
//! the library (cargo feature `fuzzing`) so that a plain `cargo test`
//! replays every corpus and regression file with them
//! (`tests/fuzz_replay.rs`, docs/fuzzing.md). Each body takes arbitrary
//! bytes and must never panic; the properties it checks panic on purpose
//! when broken.
//!
//! | target | file | what |
//! |---|---|---|
//! | `stack_wire_headers` | [`wire`] | every wire parser on the bytes, and parse → emit → parse round trips |
//! | `stack_tcp_input` | [`tcp`] | a sequence of segments, time steps and socket calls against TCPStack with a listener and an established connection |
//! | `stack_ip_input` | [`ip`] | frames into IPv4Input, IPv6Input, the ICMP responders, ARPResolver and NDResolver |
//!
//! The routers are built from configurations with two elements of this
//! module ([`rig`]): a source that pushes the bytes a body queued and a
//! sink that keeps what reaches it (the test harness's are `cfg(test)`
//! only).

pub mod ip;
pub mod rig;
pub mod tcp;
pub mod wire;

pub use ip::ip_input;
pub use tcp::tcp_input;
pub use wire::wire_headers;

/// The names of the targets, as in `fuzz/fuzz_targets/`, `fuzz/corpus/`
/// and `fuzz/regressions/`.
pub const TARGETS: &[&str] = &["stack_wire_headers", "stack_tcp_input", "stack_ip_input"];

/// Runs the target `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "stack_wire_headers" => wire_headers(data),
        "stack_tcp_input" => tcp_input(data),
        "stack_ip_input" => ip_input(data),
        _ => panic!("no fuzz target {name}"),
    }
}

/// Reads fuzz bytes front to back; past the end every read gives zeros,
/// so any input decodes to something. A copy reads the same bytes again.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next `n` bytes, or fewer if the input ends first.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_reads_big_endian_and_zeros_past_the_end() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7]);
        let copy = r;
        assert_eq!(r.u16(), 0x0102);
        assert_eq!(r.u32(), 0x0304_0506);
        assert_eq!(r.bytes(5), &[7]);
        assert!(r.is_empty());
        assert_eq!((r.u8(), r.u16(), r.u32()), (0, 0, 0));
        assert_eq!(r.bytes(3), &[] as &[u8]);
        let mut again = copy;
        assert_eq!(again.u8(), 1, "a copy reads from where it was made");
    }
}
