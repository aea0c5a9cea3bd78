//! A mutilate-style key-value workload as a library: the description
//! ([`EtcWorkload`]: key, value and inter-arrival distributions, update
//! ratio, records, seed), its records ([`Records`]: record `i`'s key,
//! value length and value bytes) and a deterministic request stream
//! ([`RequestStream`]: the fill, then `next()` = operation, record, key,
//! value length and the gap before it). `oxnet loadgen -K/-V/-i/-u/-r`
//! runs the same workload over the network ([`super::kv`] encodes and
//! checks its requests); the NIC-feature study (issue 13) drives it in
//! process:
//!
//! ```
//! use oxnet::loadgen::workload::EtcWorkload;
//! let w = EtcWorkload::etc(1000, 1); // -K fb_key -V fb_value -i fb_ia -u 0.25 -r 1000
//! let mut s = w.stream(100_000.0);   // gaps scaled to 100 K requests/s
//! let fill: Vec<_> = s.fill().collect(); // a SET of every record, in order
//! assert_eq!(fill.len(), 1000);
//! let r = s.next_request();
//! assert_eq!(r.key, w.records().key(r.record));
//! assert_eq!(r.value_len, w.records().value_len(r.record));
//! ```
//!
//! Value lengths and contents are a function of the record alone (not
//! of a version, nor of the seed, so that a `--loadonly` run and later
//! `--noload` runs agree): record `i`'s length is drawn from `-V` with a
//! generator seeded by a hash of `i`, its bytes are
//! [`super::kv::value_byte`]`(i, ..)`. Every SET of a record stores the
//! same bytes, so a GET is checked exactly whatever the interleaving of
//! connections. (mutilate draws a fresh length at each SET; a GET's
//! length here has the same distribution over records, and only the
//! length of a record's successive versions differs.)
//!
//! Keys are mutilate's (`super::etc::Keys`: the record number
//! zero-padded to a `-K` length); without a key distribution they are
//! `key:N` as the older `--keys` load has them.

use super::etc::{fnv1a_64, Generator, Keys, Uniform01};
use super::kv::{value_byte, Op};
use super::options::MAX_VALUE;

/// A key-value workload (mutilate's `-K`, `-V`, `-i`, `-u`, `-r`).
#[derive(Debug, Clone, PartialEq)]
pub struct EtcWorkload {
    /// Key lengths (`-K`); None: keys `key:N`.
    pub key: Option<Generator>,
    /// Value lengths (`-V`).
    pub value: Generator,
    /// Gaps between requests (`-i`), scaled to a rate by
    /// [`EtcWorkload::stream`].
    pub interarrival: Generator,
    /// The share of requests that are SETs (`-u`), 0 to 1.
    pub update: f64,
    /// Records `0..records` (`-r`); keys are drawn uniformly over them.
    pub records: u64,
    /// Seed of the request stream (and of the value lengths).
    pub seed: u64,
}

impl EtcWorkload {
    /// The paper's load (§4): `-K fb_key -V fb_value -i fb_ia -u 0.25`.
    pub fn etc(records: u64, seed: u64) -> EtcWorkload {
        EtcWorkload {
            key: Some(Generator::fb_key()),
            value: Generator::fb_value(),
            interarrival: Generator::fb_ia(),
            update: 0.25,
            records,
            seed,
        }
    }

    /// The records' keys and values.
    pub fn records(&self) -> Records {
        Records {
            keys: self.key.clone().map(|g| Keys::new(g, self.records)),
            values: self.value.clone(),
            count: self.records,
        }
    }

    /// The request stream at `rate` requests per second (the gaps'
    /// mean is 1/rate; 0: every gap 0).
    pub fn stream(&self, rate: f64) -> RequestStream {
        let mut ia = self.interarrival.clone();
        ia.set_rate(rate);
        RequestStream {
            records: self.records(),
            update: self.update,
            rng: Uniform01::new(self.seed),
            gaps: Uniform01::new(self.seed ^ 0x5bd1_e995),
            ia,
        }
    }
}

/// The records of a workload: each one's key, value length and value.
#[derive(Debug, Clone)]
pub struct Records {
    keys: Option<Keys>,
    values: Generator,
    count: u64,
}

impl Records {
    /// How many records.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Record `i`'s key.
    pub fn key(&self, i: u64) -> String {
        match &self.keys {
            Some(k) => k.key(i),
            None => format!("key:{i}"),
        }
    }

    /// Record `i`'s value length in bytes (0 to [`MAX_VALUE`]).
    pub fn value_len(&self, i: u64) -> usize {
        let mut rng = Uniform01::new(fnv1a_64(i ^ 0x76a1_6c75_6573));
        let v = self.values.generate(&mut rng);
        if v.is_finite() && v > 0.0 {
            (v as usize).min(MAX_VALUE)
        } else {
            0
        }
    }

    /// Record `i`'s value (what every SET of it stores).
    pub fn value(&self, i: u64) -> Vec<u8> {
        (0..self.value_len(i)).map(|b| value_byte(i, b)).collect()
    }
}

/// One request of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// GET or SET of `record`.
    pub op: Op,
    /// The record.
    pub record: u64,
    /// Its key.
    pub key: String,
    /// Its value's length (what a SET sends, a GET gets back).
    pub value_len: usize,
}

/// A workload's requests, the same for the same description and rate.
#[derive(Debug, Clone)]
pub struct RequestStream {
    records: Records,
    update: f64,
    rng: Uniform01,
    gaps: Uniform01,
    ia: Generator,
}

impl RequestStream {
    /// The load phase (mutilate's, before `--noload` skips it): a SET of
    /// every record, record 0 first.
    pub fn fill(&self) -> impl Iterator<Item = Request> + '_ {
        (0..self.records.count).map(|i| self.request(Op::Set(i), i))
    }

    /// The next request: a record drawn uniformly, a SET with
    /// probability `update`.
    pub fn next_request(&mut self) -> Request {
        let i = self.rng.below(self.records.count.max(1));
        let op = if self.rng.draw() <= self.update {
            Op::Set(i)
        } else {
            Op::Get(i)
        };
        self.request(op, i)
    }

    /// The gap before the next request, seconds (from `-i` at the
    /// stream's rate; never negative).
    pub fn next_gap(&mut self) -> f64 {
        self.ia.generate(&mut self.gaps).max(0.0)
    }

    /// The records the stream draws from.
    pub fn records(&self) -> &Records {
        &self.records
    }

    fn request(&self, op: Op, i: u64) -> Request {
        Request {
            op,
            record: i,
            key: self.records.key(i),
            value_len: self.records.value_len(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_deterministic_and_its_mix_follows_the_update_ratio() {
        let w = EtcWorkload::etc(500, 9);
        let (mut a, mut b) = (w.stream(1e5), w.stream(1e5));
        let n = 40_000;
        let mut sets = 0;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..n {
            let r = a.next_request();
            assert_eq!(r, b.next_request());
            assert!(r.record < 500);
            sets += usize::from(matches!(r.op, Op::Set(_)));
            seen.insert(r.record);
        }
        let share = sets as f64 / n as f64;
        assert!((share - 0.25).abs() < 0.01, "SET share {share}");
        assert_eq!(seen.len(), 500, "uniform over the records: all drawn");
    }

    #[test]
    fn gaps_average_one_over_the_rate() {
        let mut s = EtcWorkload::etc(10, 3).stream(50_000.0);
        let n = 200_000;
        let mean = (0..n).map(|_| s.next_gap()).sum::<f64>() / n as f64;
        assert!((mean - 2e-5).abs() < 2e-5 * 0.02, "mean gap {mean}");
    }

    #[test]
    fn a_record_always_has_the_same_key_and_value() {
        let w = EtcWorkload::etc(1000, 4);
        let r = w.records();
        for i in [0, 7, 999] {
            assert_eq!(r.key(i), w.records().key(i));
            assert_eq!(r.value(i).len(), r.value_len(i));
            assert_eq!(
                r.key(i).parse::<u64>().unwrap(),
                i,
                "mutilate's keys are the number, padded"
            );
        }
        let fill: Vec<_> = w.stream(0.0).fill().map(|q| q.record).collect();
        assert_eq!(fill, (0..1000).collect::<Vec<_>>());
        // Over the records, fb_value's head: 17.82 % are 2 bytes long.
        let r = EtcWorkload::etc(40_000, 4).records();
        let twos = (0..40_000).filter(|&i| r.value_len(i) == 2).count();
        assert!((twos as f64 / 40_000.0 - 0.1782).abs() < 0.01, "{twos}");
        let mut plain = w.clone();
        plain.key = None;
        assert_eq!(plain.records().key(5), "key:5");
    }
}
