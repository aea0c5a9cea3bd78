//! What `cargo test` runs of a fuzz target (the targets themselves are in
//! `fuzz/`, docs/fuzzing.md): its corpus and regressions, then seeded
//! inputs, half of them mutations of the corpus and half random, each
//! through the target's body.

use std::path::PathBuf;

fn files(kind: &str, target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path()).ok())
        .collect()
}

/// Runs `body` on every file of `fuzz/corpus/TARGET` (at least three)
/// and `fuzz/regressions/TARGET`, then on `rounds` inputs from `seed`:
/// 1 to 16 edits each (a byte changed, a byte inserted, up to 63 random
/// bytes appended), of a corpus file or of nothing.
pub(crate) fn replay(target: &str, seed: u64, rounds: usize, body: impl Fn(&[u8])) {
    let corpus = files("corpus", target);
    assert!(corpus.len() >= 3, "fuzz/corpus/{target} has its seeds");
    for input in corpus.iter().chain(&files("regressions", target)) {
        body(input);
    }
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for n in 0..rounds {
        let mut input = if n % 2 == 0 {
            corpus[n / 2 % corpus.len()].clone()
        } else {
            Vec::new()
        };
        for _ in 0..1 + next() % 16 {
            let at = if input.is_empty() {
                0
            } else {
                next() as usize % input.len()
            };
            match next() % 3 {
                0 if !input.is_empty() => input[at] = next() as u8,
                1 => input.insert(at, next() as u8),
                _ => input.extend((0..next() % 64).map(|_| next() as u8)),
            }
        }
        body(&input);
    }
}
