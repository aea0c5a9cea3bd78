//! Value memory in size classes, as memcached's slab allocator: a value
//! of up to 64 bytes takes one 192-byte buffer, up to 448 bytes one
//! 576-byte buffer, anything larger 1920-byte pieces of 2 KiB buffers.
//! Each class gets *pages* (a packet mempool of a fixed size, DMA-able
//! memory of the router's kind) when it needs room, until the pages reach
//! the memory limit; then a page of another class that has become
//! entirely free moves over (memcached's slab rebalancing, done when it
//! is free rather than by force), and only then does the store evict.
//! Buffers are handed out as packets and shared ([`oxnet_driver::SharedBuffer`]);
//! a page whose buffers are all back may be dropped while a reply still
//! holds none of them.

use oxnet_driver::packet::HEADER_SIZE;
use oxnet_driver::{MemoryKind, Mempool, Packet};

/// Data room per buffer of each class; with the 128-byte header, entries
/// of 192, 576 and 2048 bytes.
pub const CLASS_ROOMS: [usize; 3] = [64, 448, 1920];
/// The largest class: values longer than its room are split.
const LARGE: usize = CLASS_ROOMS.len() - 1;

/// The classes and their pages.
pub struct Slabs {
    kind: MemoryKind,
    page_bytes: usize,
    max_pages: usize,
    classes: Vec<Vec<Mempool>>,
    /// Pages created, for their names.
    created: u64,
}

impl Slabs {
    /// Slabs for `limit` bytes of `kind` memory: pages of 1/8 of it,
    /// between 16 KiB and 2 MiB (2 MiB, one huge page, in huge pages). One page of the largest
    /// class is made now, so that a memory kind that cannot be had fails
    /// at start.
    pub fn new(limit: usize, kind: MemoryKind) -> Result<Slabs, String> {
        let page_bytes = match kind {
            // A pool of huge pages takes whole 2 MiB pages anyway.
            MemoryKind::HugePages => oxnet_driver::memory::HUGE_PAGE_SIZE,
            _ => (limit / 8).clamp(16 << 10, 2 << 20),
        };
        let mut s = Slabs {
            kind,
            page_bytes,
            max_pages: (limit / page_bytes).max(1),
            classes: vec![Vec::new(); CLASS_ROOMS.len()],
            created: 0,
        };
        if !s.add_page(LARGE) {
            return Err(format!(
                "cannot allocate {page_bytes} bytes of {kind:?} memory for values"
            ));
        }
        Ok(s)
    }

    /// The class of a value of `len` bytes and how many buffers it takes.
    pub fn buffers_for(len: usize) -> (usize, usize) {
        match CLASS_ROOMS.iter().position(|&room| len <= room) {
            _ if len == 0 => (0, 0),
            Some(class) => (class, 1),
            None => (LARGE, len.div_ceil(CLASS_ROOMS[LARGE])),
        }
    }

    fn pages(&self) -> usize {
        self.classes.iter().map(Vec::len).sum()
    }

    fn add_page(&mut self, class: usize) -> bool {
        let room = CLASS_ROOMS[class];
        let entries = (self.page_bytes / (HEADER_SIZE + room)).max(1);
        self.created += 1;
        let name = format!("kv-slab{class}-{}", self.created);
        match Mempool::with_layout(&name, entries, 0, room, self.kind) {
            Ok(pool) => {
                self.classes[class].push(pool);
                true
            }
            Err(_) => false,
        }
    }

    /// Moves an entirely free page of another class to `class`.
    fn reclaim_page(&mut self, class: usize) -> bool {
        for other in 0..self.classes.len() {
            if other == class {
                continue;
            }
            if let Some(i) = self.classes[other].iter().position(|p| p.free_count() == p.size()) {
                self.classes[other].swap_remove(i);
                return self.add_page(class);
            }
        }
        false
    }

    /// `n` buffers of `class`, taking a page if the class is full and one
    /// can be had; None if not (the caller evicts and tries again).
    pub fn alloc(&mut self, class: usize, n: usize) -> Option<Vec<Packet>> {
        let mut got = Vec::with_capacity(n);
        loop {
            for pool in self.classes[class].iter().rev() {
                while got.len() < n {
                    match pool.alloc() {
                        Ok(p) => got.push(p),
                        Err(_) => break,
                    }
                }
            }
            if got.len() == n {
                return Some(got);
            }
            let more = if self.pages() < self.max_pages {
                self.add_page(class)
            } else {
                self.reclaim_page(class)
            };
            if !more {
                return None;
            }
        }
    }

    /// Buffers in all pages.
    pub fn total(&self) -> usize {
        self.classes.iter().flatten().map(Mempool::size).sum()
    }

    /// Buffers free in all pages.
    pub fn free(&self) -> usize {
        self.classes.iter().flatten().map(Mempool::free_count).sum()
    }

    /// Per class: (entry bytes, pages, buffers, free buffers).
    pub fn class_stats(&self) -> Vec<(usize, usize, usize, usize)> {
        self.classes
            .iter()
            .enumerate()
            .map(|(c, pages)| {
                (
                    HEADER_SIZE + CLASS_ROOMS[c],
                    pages.len(),
                    pages.iter().map(Mempool::size).sum(),
                    pages.iter().map(Mempool::free_count).sum(),
                )
            })
            .collect()
    }

    /// Bytes of pages allocated.
    pub fn malloced(&self) -> usize {
        self.classes
            .iter()
            .enumerate()
            .map(|(c, pages)| pages.iter().map(Mempool::size).sum::<usize>() * (HEADER_SIZE + CLASS_ROOMS[c]))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_take_the_smallest_class_that_fits() {
        assert_eq!(Slabs::buffers_for(0), (0, 0));
        assert_eq!(Slabs::buffers_for(1), (0, 1));
        assert_eq!(Slabs::buffers_for(64), (0, 1));
        assert_eq!(Slabs::buffers_for(65), (1, 1));
        assert_eq!(Slabs::buffers_for(448), (1, 1));
        assert_eq!(Slabs::buffers_for(449), (2, 1));
        assert_eq!(Slabs::buffers_for(1920), (2, 1));
        assert_eq!(Slabs::buffers_for(1921), (2, 2));
    }

    #[test]
    fn pages_grow_to_the_limit_then_move_when_free() {
        // 128 KiB: pages of 16 KiB, 8 of them.
        let mut s = Slabs::new(128 << 10, MemoryKind::Plain).unwrap();
        let small = s.alloc(0, 85).unwrap(); // one 16 KiB page of 192-byte entries
        assert_eq!(s.class_stats()[0].1, 1);
        let mut large = Vec::new();
        while let Some(mut v) = s.alloc(2, 1) {
            large.append(&mut v);
        }
        // The other 7 pages went to the large class: 7 * 8 buffers.
        assert_eq!(large.len(), 7 * 8);
        assert!(s.alloc(2, 1).is_none(), "full, nothing free to move");
        drop(small);
        assert_eq!(
            s.alloc(2, 8).map(|v| v.len()),
            Some(8),
            "the free small page moved over"
        );
        assert_eq!(s.class_stats()[0].1, 0);
        assert_eq!(s.class_stats()[2].1, 8);
    }
}
