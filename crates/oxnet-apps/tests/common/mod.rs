//! What the in-process tests of the application elements share: two
//! hosts on one stack without a device, a record of every stream packet
//! a test element receives, and reading a handler.
#![allow(dead_code)] // each test file uses a different subset

use oxnet_apps::stream::{self, StreamEvent};
use oxnet_driver::{Mempool, Packet, PacketBatch};
use std::collections::BTreeMap;

/// What came back for one connection id.
#[derive(Default, Debug)]
pub struct Seen {
    pub opens: u32,
    pub eofs: u32,
    pub closes: Vec<i32>,
    pub data: Vec<u8>,
    /// Events in order (O, D, E, C), with repeats of D folded.
    pub order: String,
}

/// Records every packet of `batch` under its connection id.
pub fn record(seen: &mut BTreeMap<u32, Seen>, batch: &PacketBatch) {
    for p in batch.iter() {
        let s = seen.entry(stream::socket(p)).or_default();
        let letter = match stream::event(p) {
            StreamEvent::Open => {
                s.opens += 1;
                'O'
            }
            StreamEvent::Data => {
                s.data.extend(p.segments().flat_map(|seg| seg.iter().copied()));
                'D'
            }
            StreamEvent::Eof => {
                s.eofs += 1;
                'E'
            }
            StreamEvent::Close => {
                s.closes.push(stream::errno(p));
                'C'
            }
        };
        if !(letter == 'D' && s.order.ends_with('D')) {
            s.order.push(letter);
        }
    }
}

/// `bytes` as Data packets of connection `id`, 1500 bytes each.
pub fn data_packets(pool: &Mempool, id: u32, bytes: &[u8]) -> Vec<Packet> {
    bytes
        .chunks(1500)
        .map(|chunk| {
            let mut p = pool.alloc().unwrap();
            p.set_len(chunk.len()).unwrap();
            p.copy_from_slice(chunk);
            stream::data(p, id)
        })
        .collect()
}

pub use oxnet_apps::testkit::handler;
