//! The cache's memory: objects by request target, their bodies in a pool
//! of DMA-able buffers of its own (plain memory, the Virtual domain:
//! what the router's pool is), evicted least recently used first when
//! the pool is empty. Objects loaded from DIR are pinned (there is no
//! origin to fetch them again).

use super::object::Object;
use oxnet_driver::{AttachPool, MemoryKind, Mempool, Packet};
use std::collections::{BTreeMap, HashMap};

/// Bytes of body per buffer.
pub const CHUNK: usize = oxnet_driver::mempool::DEFAULT_DATA_ROOM;

struct Entry {
    object: Object,
    /// Last use, the key of `lru`.
    tick: u64,
    pinned: bool,
}

/// The objects and their memory.
pub struct Store {
    pool: Mempool,
    attach: AttachPool,
    objects: HashMap<String, Entry>,
    /// Unpinned objects by last use.
    lru: BTreeMap<u64, String>,
    tick: u64,
    pub evictions: u64,
}

impl Store {
    /// A store of `memory` bytes of bodies (whole buffers of [`CHUNK`]),
    /// with `attach_headers` attached-segment headers for responses in
    /// flight.
    pub fn new(name: &str, memory: usize, attach_headers: usize) -> Result<Store, String> {
        let buffers = (memory / CHUNK).max(1);
        let pool =
            Mempool::with_layout(name, buffers, 0, CHUNK, MemoryKind::Plain).map_err(|e| format!("MEMORY: {e}"))?;
        let attach = AttachPool::new(&format!("{name}-attach"), attach_headers).map_err(|e| e.to_string())?;
        Ok(Store {
            pool,
            attach,
            objects: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            evictions: 0,
        })
    }

    pub fn attach_pool(&self) -> &AttachPool {
        &self.attach
    }

    /// The object for `key`, marked as used.
    pub fn get(&mut self, key: &str) -> Option<&mut Object> {
        let e = self.objects.get_mut(key)?;
        if !e.pinned {
            self.tick += 1;
            self.lru.remove(&e.tick);
            e.tick = self.tick;
            self.lru.insert(self.tick, key.to_string());
        }
        Some(&mut e.object)
    }

    /// The object for `key`, not marked.
    pub fn peek(&self, key: &str) -> Option<&Object> {
        self.objects.get(key).map(|e| &e.object)
    }

    /// Stores `object` under `key` (replacing what was there).
    pub fn insert(&mut self, key: &str, object: Object, pinned: bool) {
        self.remove(key);
        self.tick += 1;
        if !pinned {
            self.lru.insert(self.tick, key.to_string());
        }
        self.objects.insert(
            key.to_string(),
            Entry {
                object,
                tick: self.tick,
                pinned,
            },
        );
    }

    pub fn remove(&mut self, key: &str) -> Option<Object> {
        let e = self.objects.remove(key)?;
        if !e.pinned {
            self.lru.remove(&e.tick);
        }
        Some(e.object)
    }

    /// A buffer for body bytes, evicting the least recently used objects
    /// until one is free; None if nothing more can be evicted. (An
    /// evicted object's buffers come back when the last response that
    /// carries them has been sent, so eviction may take several.)
    pub fn alloc(&mut self) -> Option<Packet> {
        loop {
            if let Ok(mut p) = self.pool.alloc() {
                let _ = p.set_len(0);
                return Some(p);
            }
            let (_, key) = self.lru.pop_first()?;
            self.objects.remove(&key);
            self.evictions += 1;
        }
    }

    /// Copies `bytes` into buffers (None without memory for them).
    pub fn write(&mut self, chunks: &mut Vec<Packet>, mut bytes: &[u8]) -> Option<()> {
        while !bytes.is_empty() {
            let room = chunks.last().map_or(0, |p| CHUNK - p.len());
            if room == 0 {
                chunks.push(self.alloc()?);
                continue;
            }
            let p = chunks.last_mut()?;
            let n = room.min(bytes.len());
            let at = p.len();
            p.set_len(at + n).ok()?;
            p[at..at + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        Some(())
    }

    /// Objects stored.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Bytes of memory in use (whole buffers, those of evicted objects
    /// still in flight included).
    pub fn memory_used(&self) -> usize {
        (self.pool.size() - self.pool.free_count()) * CHUNK
    }

    /// The memory limit in bytes.
    pub fn memory_limit(&self) -> usize {
        self.pool.size() * CHUNK
    }
}
