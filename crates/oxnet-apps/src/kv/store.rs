//! The key-value store behind every protocol: items in a hash table with
//! an LRU list, a memory limit enforced by evicting the least recently
//! used item, expiry against a clock the caller passes in (seconds of
//! unix time, so tests simulate time), CAS, flush_all with a delay,
//! incr/decr, touch, append/prepend, and memcached's statistics.
//!
//! Values live in packet buffers of size classes ([`Slabs`]: DMA-able
//! memory of the router's kind), each buffer shared ([`SharedBuffer`]):
//! a GET response sends the value's buffers as attached segments,
//! without a copy, and a value replaced, deleted or evicted while its
//! bytes are still queued or unacknowledged stays intact until the last
//! handle goes (the buffer returns to its page only then). A write that
//! finds no buffer of its class (no page to take or move) or the byte
//! limit reached evicts from the LRU tail first.
//!
//! Semantics follow memcached's protocol.txt (section "Commands",
//! "Expiration times", "Increment/Decrement"); where the document is
//! silent, memcached 1.6's behaviour (padding a shrunk decr value with
//! spaces, as it does in place).

use super::slabs::{Slabs, CLASS_ROOMS};
use oxnet_driver::{MemoryKind, SharedBuffer};
use oxnet_stack::FlowMap;
use std::sync::Arc;

/// protocol.txt "Keys": at most 250 bytes.
pub const KEY_MAX: usize = 250;
/// Exptimes up to 30 days are relative (protocol.txt "Expiration times").
pub const RELATIVE_MAX: i64 = 60 * 60 * 24 * 30;
/// Bytes counted per item beyond key and value (memcached's item header,
/// roughly; the `bytes` statistic).
pub const ITEM_OVERHEAD: usize = 48;
const NIL: u32 = u32::MAX;

/// How the store is sized.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Bytes for items (memcached's -m, in bytes).
    pub memory_limit: usize,
    /// Largest value (memcached's -I).
    pub item_size_max: usize,
    /// The value buffers' memory.
    pub memory_kind: MemoryKind,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            memory_limit: 64 << 20,
            item_size_max: 1 << 20,
            memory_kind: MemoryKind::Plain,
        }
    }
}

/// A stored value: its bytes in shared buffers, in order. Cloning takes
/// one more reference to the list (one atomic add; no copy): a reply
/// holds the value this way until its segments are attached, each of
/// which holds its buffer.
#[derive(Clone, Default)]
pub struct Value {
    pub buffers: Arc<[SharedBuffer]>,
    pub len: usize,
}

impl Value {
    /// The bytes, copied (append/prepend, incr/decr, tests).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for b in self.buffers.iter() {
            v.extend_from_slice(b);
        }
        v
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Value({} bytes in {} buffers)", self.len, self.buffers.len())
    }
}

/// What a read returns: the item's fields and a handle to its value.
#[derive(Debug, Clone)]
pub struct Hit {
    pub flags: u32,
    pub cas: u64,
    pub value: Value,
    /// Absolute expiry (unix seconds; 0: never).
    pub exptime: u64,
    /// Whether the item was read before this read (meta `h`).
    pub fetched: bool,
    /// Seconds since the item was last read or written (meta `l`).
    pub last_access: u64,
}

/// How a write treats an existing item (protocol.txt "Storage commands").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    /// Store only if the item's CAS is this one.
    Cas(u64),
}

/// The outcome of a write, as the text protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    Stored,
    NotStored,
    /// The CAS did not match.
    Exists,
    /// `cas` of a missing item.
    NotFound,
    /// Larger than the item size limit.
    TooLarge,
    /// No memory even after evicting.
    NoMemory,
}

/// The outcome of incr/decr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// The new value and the item's new CAS.
    Value(u64, u64),
    NotFound,
    NonNumeric,
    /// CAS given and not matching (meta `C`, binary).
    Exists,
    NoMemory,
}

/// memcached's counters of the same names (`stats`).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub cmd_get: u64,
    pub cmd_set: u64,
    pub cmd_flush: u64,
    pub cmd_touch: u64,
    pub get_hits: u64,
    pub get_misses: u64,
    pub get_expired: u64,
    pub get_flushed: u64,
    pub delete_misses: u64,
    pub delete_hits: u64,
    pub incr_misses: u64,
    pub incr_hits: u64,
    pub decr_misses: u64,
    pub decr_hits: u64,
    pub cas_misses: u64,
    pub cas_hits: u64,
    pub cas_badval: u64,
    pub touch_hits: u64,
    pub touch_misses: u64,
    pub curr_items: u64,
    pub total_items: u64,
    pub evictions: u64,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub evicted_unfetched: u64,
    pub bytes: u64,
    /// Writes refused for want of memory.
    pub outofmemory: u64,
    /// Writes refused as larger than the item size limit.
    pub store_too_large: u64,
    /// Meta commands (the protocol layer counts them).
    pub cmd_meta: u64,
}

pub(crate) struct Item {
    pub(crate) key: Box<[u8]>,
    pub(crate) flags: u32,
    pub(crate) exptime: u64,
    pub(crate) cas: u64,
    pub(crate) value: Value,
    /// Last access, unix seconds.
    pub(crate) access: u64,
    pub(crate) fetched: bool,
    /// Marked stale by meta delete's `I` (meta get answers `X`).
    pub(crate) stale: bool,
    /// A meta get has sent the recache token `W` (later ones see `Z`).
    pub(crate) token_sent: bool,
    prev: u32,
    next: u32,
}

impl Item {
    fn size(&self) -> usize {
        self.key.len() + self.value.len + ITEM_OVERHEAD
    }
}

/// The store (see the module doc). One per server element; not shared
/// between threads.
pub struct Store {
    config: StoreConfig,
    slabs: Slabs,
    /// Keyed foldhash (the stack's `FlowMap`): keys come from clients,
    /// and std's SipHash cost more per lookup than the rest of a GET's
    /// parse (kv-instructions.sh).
    index: FlowMap<Box<[u8]>, u32>,
    slots: Vec<Option<Item>>,
    free_slots: Vec<u32>,
    /// LRU list: head is the most recently used.
    head: u32,
    tail: u32,
    next_cas: u64,
    /// A delayed flush_all: everything written before this time is gone
    /// once the clock reaches it.
    flush_at: Option<u64>,
    pub stats: Stats,
}

impl Store {
    /// A store whose value buffers take at most `config.memory_limit`
    /// bytes of `config.memory_kind` memory, in pages taken as needed
    /// ([`Slabs`]).
    pub fn new(config: StoreConfig) -> Result<Store, String> {
        let slabs = Slabs::new(config.memory_limit, config.memory_kind)?;
        Ok(Store {
            config,
            slabs,
            index: FlowMap::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            head: NIL,
            tail: NIL,
            next_cas: 0,
            flush_at: None,
            stats: Stats::default(),
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// An item's size as memcached counts it (ITEM_ntotal).
    pub fn item_total(key_len: usize, flags: u32, value_len: usize) -> usize {
        ITEM_OVERHEAD + key_len + 1 + if flags != 0 { 4 } else { 0 } + value_len + 2 + 8
    }

    /// Whether an item of this size is within the item size limit (and
    /// the memory limit), as memcached sizes it: its item header, the key
    /// and a NUL, the flags when not 0, the value and "\r\n", the CAS
    /// (items.c `item_size_ok`).
    pub fn fits(&self, key_len: usize, flags: u32, value_len: usize) -> bool {
        Store::item_total(key_len, flags, value_len) <= self.config.item_size_max
            && key_len + value_len + ITEM_OVERHEAD <= self.config.memory_limit
    }

    /// Counts a write refused as too large; a `set` also drops the old
    /// item, so that readers do not see a stale value (memcached's
    /// process_update_command).
    pub fn refuse_too_large(&mut self, mode: Mode, key: &[u8], now: u64) {
        self.stats.cmd_set += 1;
        self.stats.store_too_large += 1;
        if mode == Mode::Set {
            if let Some(slot) = self.find(key, now) {
                self.unlink(slot);
            }
        }
    }

    /// `stats reset`: the counters, not the state (items, bytes).
    pub fn reset_stats(&mut self) {
        let s = &self.stats;
        self.stats = Stats {
            curr_items: s.curr_items,
            bytes: s.bytes,
            ..Stats::default()
        };
    }

    /// Creates an empty item for `key` (meta get's `N`, vivify on miss):
    /// its slot, or None without memory.
    pub(crate) fn vivify(&mut self, key: &[u8], exptime: u64, now: u64) -> Option<u32> {
        let value = self.make_value(&[], key.len(), None)?;
        let cas = self.new_cas();
        self.link_abs(key.into(), 0, exptime, value, cas, now);
        self.index.get(key).copied()
    }

    /// Panics if a bound does not hold (fuzzing, tests): bytes within the
    /// limit, the index and the LRU list agreeing, and the value buffers
    /// accounted for (free, an item's, or among `in_flight` held
    /// elsewhere).
    pub fn check_bounds(&self, in_flight: usize) {
        assert!(
            self.stats.bytes <= self.config.memory_limit as u64,
            "{} bytes",
            self.stats.bytes
        );
        let keys = self.keys();
        assert_eq!(keys.len(), self.index.len(), "LRU list and index");
        assert_eq!(keys.len() as u64, self.stats.curr_items);
        let held: usize = self.slots.iter().flatten().map(|it| it.value.buffers.len()).sum();
        let used = self.slabs.total() - self.slabs.free();
        assert!(
            used >= held && used <= held + in_flight,
            "{used} buffers used, {held} held by items, {in_flight} in flight"
        );
    }

    /// Items the hash table holds without growing.
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }

    /// Value buffers free now.
    pub fn free_buffers(&self) -> usize {
        self.slabs.free()
    }

    /// Value buffers in all (in the pages taken so far).
    pub fn total_buffers(&self) -> usize {
        self.slabs.total()
    }

    /// The value memory by class (`stats slabs`).
    pub fn slabs(&self) -> &Slabs {
        &self.slabs
    }

    /// Absolute expiry of a protocol exptime (protocol.txt "Expiration
    /// times"): 0 never; up to 30 days relative to `now`; beyond that a
    /// unix time; negative: already expired (1, long past).
    pub fn absolute(exptime: i64, now: u64) -> u64 {
        if exptime == 0 {
            0
        } else if exptime < 0 {
            1
        } else if exptime <= RELATIVE_MAX {
            now + exptime as u64
        } else {
            // An absolute time in the past expires now (not "never").
            (exptime as u64).max(1)
        }
    }

    pub(crate) fn new_cas(&mut self) -> u64 {
        self.next_cas += 1;
        self.next_cas
    }

    fn flush_due(&mut self, now: u64) {
        if let Some(at) = self.flush_at {
            if now >= at {
                self.flush_at = None;
                self.remove_all();
            }
        }
    }

    /// The live item of `key`, or None (an expired one is removed,
    /// counted).
    pub(crate) fn find(&mut self, key: &[u8], now: u64) -> Option<u32> {
        self.find_or_expired(key, now).ok()
    }

    /// The live item of `key`; Err(true) if it was there but expired (it
    /// is removed, counted), Err(false) if absent.
    fn find_or_expired(&mut self, key: &[u8], now: u64) -> Result<u32, bool> {
        self.flush_due(now);
        let slot = *self.index.get(key).ok_or(false)?;
        let it = self.item(slot);
        if it.exptime != 0 && it.exptime <= now {
            if !it.fetched {
                self.stats.expired_unfetched += 1;
            }
            self.stats.reclaimed += 1;
            self.unlink(slot);
            return Err(true);
        }
        Ok(slot)
    }

    pub(crate) fn item(&self, slot: u32) -> &Item {
        self.slots[slot as usize].as_ref().expect("linked slot holds an item")
    }

    pub(crate) fn item_mut(&mut self, slot: u32) -> &mut Item {
        self.slots[slot as usize].as_mut().expect("linked slot holds an item")
    }

    fn hit(&mut self, slot: u32, now: u64) -> Hit {
        self.bump(slot);
        let it = self.item_mut(slot);
        let hit = Hit {
            flags: it.flags,
            cas: it.cas,
            value: it.value.clone(),
            exptime: it.exptime,
            fetched: it.fetched,
            last_access: now.saturating_sub(it.access),
        };
        it.fetched = true;
        it.access = now;
        hit
    }

    /// A read (get/gets/mg/binary get): counted in cmd_get, get_hits,
    /// get_misses.
    pub fn get(&mut self, key: &[u8], now: u64) -> Option<Hit> {
        self.stats.cmd_get += 1;
        match self.find_or_expired(key, now) {
            Ok(slot) => {
                self.stats.get_hits += 1;
                Some(self.hit(slot, now))
            }
            Err(expired) => {
                self.stats.get_misses += 1;
                self.stats.get_expired += expired as u64;
                None
            }
        }
    }

    /// A read without statistics or LRU bump (meta flags that only look).
    pub fn peek(&mut self, key: &[u8], now: u64) -> Option<Hit> {
        let slot = self.find(key, now)?;
        let it = self.item(slot);
        Some(Hit {
            flags: it.flags,
            cas: it.cas,
            value: it.value.clone(),
            exptime: it.exptime,
            fetched: it.fetched,
            last_access: now.saturating_sub(it.access),
        })
    }

    /// touch: a new exptime (protocol form); false if missing.
    pub fn touch(&mut self, key: &[u8], exptime: i64, now: u64) -> bool {
        self.stats.cmd_touch += 1;
        match self.find(key, now) {
            Some(slot) => {
                self.stats.touch_hits += 1;
                self.bump(slot);
                let it = self.item_mut(slot);
                it.exptime = Store::absolute(exptime, now);
                it.access = now;
                true
            }
            None => {
                self.stats.touch_misses += 1;
                false
            }
        }
    }

    /// gat/gats: touch and read.
    /// Counted as a touch only, as memcached counts gat.
    pub fn gat(&mut self, key: &[u8], exptime: i64, now: u64) -> Option<Hit> {
        self.stats.cmd_touch += 1;
        match self.find(key, now) {
            Some(slot) => {
                self.stats.touch_hits += 1;
                self.item_mut(slot).exptime = Store::absolute(exptime, now);
                Some(self.hit(slot, now))
            }
            None => {
                self.stats.touch_misses += 1;
                None
            }
        }
    }

    /// A write (protocol.txt "Storage commands"). `exptime` is the
    /// protocol's form. Returns the outcome and, when stored, the new CAS.
    pub fn store(&mut self, mode: Mode, key: &[u8], flags: u32, exptime: i64, data: &[u8], now: u64) -> (Stored, u64) {
        self.stats.cmd_set += 1;
        let existing = self.find(key, now);
        match (mode, existing) {
            (Mode::Add, Some(slot)) => {
                // memcached bumps the existing item on a failed add.
                self.bump(slot);
                return (Stored::NotStored, 0);
            }
            (Mode::Replace | Mode::Append | Mode::Prepend, None) => return (Stored::NotStored, 0),
            (Mode::Cas(_), None) => {
                self.stats.cas_misses += 1;
                return (Stored::NotFound, 0);
            }
            (Mode::Cas(c), Some(slot)) => {
                if self.item(slot).cas != c {
                    self.stats.cas_badval += 1;
                    return (Stored::Exists, 0);
                }
                self.stats.cas_hits += 1;
            }
            _ => {}
        }
        let (bytes, flags, exptime) = match (mode, existing) {
            (Mode::Append, Some(slot)) => {
                let it = self.item(slot);
                let mut v = it.value.to_vec();
                v.extend_from_slice(data);
                (std::borrow::Cow::Owned(v), it.flags, it.exptime)
            }
            (Mode::Prepend, Some(slot)) => {
                let it = self.item(slot);
                let mut v = data.to_vec();
                v.extend(it.value.to_vec());
                (std::borrow::Cow::Owned(v), it.flags, it.exptime)
            }
            _ => (std::borrow::Cow::Borrowed(data), flags, Store::absolute(exptime, now)),
        };
        if !self.fits(key.len(), flags, bytes.len()) {
            if matches!(mode, Mode::Append | Mode::Prepend) {
                // memcached: the joined item cannot be allocated.
                return (Stored::NotStored, 0);
            }
            self.stats.cmd_set -= 1;
            self.refuse_too_large(mode, key, now);
            return (Stored::TooLarge, 0);
        }
        let value = match self.make_value(&bytes, key.len(), existing) {
            Some(v) => v,
            None => {
                self.stats.outofmemory += 1;
                return (Stored::NoMemory, 0);
            }
        };
        let cas = self.new_cas();
        self.link(key, flags, exptime, value, cas, now);
        (Stored::Stored, cas)
    }

    /// incr/decr (protocol.txt "Increment/Decrement"): the value must be
    /// a decimal 64-bit number; incr wraps at 2^64, decr stops at 0. With
    /// `cas` non-zero, only if it matches.
    pub fn delta(&mut self, key: &[u8], incr: bool, delta: u64, cas: u64, now: u64) -> Delta {
        let Some(slot) = self.find(key, now) else {
            if incr {
                self.stats.incr_misses += 1;
            } else {
                self.stats.decr_misses += 1;
            }
            return Delta::NotFound;
        };
        let it = self.item(slot);
        if cas != 0 && it.cas != cas {
            return Delta::Exists;
        }
        let old = it.value.to_vec();
        let (flags, exptime) = (it.flags, it.exptime);
        let Some(n) = parse_counter(&old) else {
            return Delta::NonNumeric;
        };
        if incr {
            self.stats.incr_hits += 1;
        } else {
            self.stats.decr_hits += 1;
        }
        let n = if incr {
            n.wrapping_add(delta)
        } else {
            n.saturating_sub(delta)
        };
        let mut text = n.to_string().into_bytes();
        // memcached rewrites a shorter number in place, padded with
        // spaces to the old length; a longer one makes a new item.
        if text.len() < old.len() {
            text.resize(old.len(), b' ');
        }
        let Some(value) = self.make_value(&text, key.len(), Some(slot)) else {
            self.stats.outofmemory += 1;
            return Delta::NoMemory;
        };
        let cas = self.new_cas();
        let key: Box<[u8]> = key.into();
        self.link_abs(key, flags, exptime, value, cas, now);
        Delta::Value(n, cas)
    }

    /// delete: true if an item was removed.
    pub fn delete(&mut self, key: &[u8], now: u64) -> bool {
        match self.find(key, now) {
            Some(slot) => {
                self.stats.delete_hits += 1;
                self.unlink(slot);
                true
            }
            None => {
                self.stats.delete_misses += 1;
                false
            }
        }
    }

    /// delete only if the CAS matches (meta `C`, binary delete with CAS).
    pub fn delete_cas(&mut self, key: &[u8], cas: u64, now: u64) -> Stored {
        match self.find(key, now) {
            Some(slot) if cas != 0 && self.item(slot).cas != cas => Stored::Exists,
            Some(slot) => {
                self.stats.delete_hits += 1;
                self.unlink(slot);
                Stored::Stored
            }
            None => {
                self.stats.delete_misses += 1;
                Stored::NotFound
            }
        }
    }

    /// flush_all [delay]: everything now (delay 0, or an absolute time
    /// reached), else everything written before the delay's time when it
    /// comes (protocol.txt "flush_all").
    pub fn flush(&mut self, delay: i64, now: u64) {
        self.stats.cmd_flush += 1;
        if delay <= 0 {
            self.flush_at = None;
            self.remove_all();
        } else {
            let at = Store::absolute(delay, now);
            if at <= now {
                self.flush_at = None;
                self.remove_all();
            } else {
                self.flush_at = Some(at);
            }
        }
    }

    /// Items in LRU order (most recent first), for `stats cachedump`-like
    /// inspection and tests.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        let mut at = self.head;
        while at != NIL {
            let it = self.item(at);
            keys.push(it.key.to_vec());
            at = it.next;
        }
        keys
    }

    fn remove_all(&mut self) {
        while self.tail != NIL {
            self.unlink(self.tail);
        }
    }

    /// Copies `bytes` into shared buffers, evicting from the LRU tail
    /// (never `keep`, the item being rewritten) while the pool is empty or
    /// the byte limit would be passed.
    fn make_value(&mut self, bytes: &[u8], key_len: usize, keep: Option<u32>) -> Option<Value> {
        let (class, need) = Slabs::buffers_for(bytes.len());
        let size = (key_len + bytes.len() + ITEM_OVERHEAD) as u64;
        // The old version of the item goes when the new one is linked;
        // count its room as free for the limit.
        let kept = keep.map(|s| self.item(s).size() as u64).unwrap_or(0);
        while self.stats.bytes - kept + size > self.config.memory_limit as u64 {
            if !self.evict_one(keep) {
                return None;
            }
        }
        let packets = loop {
            match self.slabs.alloc(class, need) {
                Some(p) => break p,
                None => {
                    if !self.evict_one(keep) {
                        return None;
                    }
                }
            }
        };
        let mut buffers = Vec::with_capacity(need);
        for (mut p, chunk) in packets.into_iter().zip(bytes.chunks(CLASS_ROOMS[class])) {
            p.set_len(chunk.len()).ok()?;
            p.copy_from_slice(chunk);
            buffers.push(SharedBuffer::new(p).ok()?);
        }
        Some(Value {
            buffers: buffers.into(),
            len: bytes.len(),
        })
    }

    /// Evicts the least recently used item other than `keep`; false if
    /// there is none.
    fn evict_one(&mut self, keep: Option<u32>) -> bool {
        let mut at = self.tail;
        if at != NIL && Some(at) == keep {
            at = self.item(at).prev;
        }
        if at == NIL {
            return false;
        }
        self.stats.evictions += 1;
        if !self.item(at).fetched {
            self.stats.evicted_unfetched += 1;
        }
        self.unlink(at);
        true
    }

    fn link(&mut self, key: &[u8], flags: u32, exptime: u64, value: Value, cas: u64, now: u64) {
        self.link_abs(key.into(), flags, exptime, value, cas, now)
    }

    /// Links a new item for `key`, replacing the old one (whose buffers
    /// live on while anyone holds them).
    fn link_abs(&mut self, key: Box<[u8]>, flags: u32, exptime: u64, value: Value, cas: u64, now: u64) {
        if let Some(&old) = self.index.get(&key) {
            self.unlink(old);
        }
        let item = Item {
            key: key.clone(),
            flags,
            exptime,
            cas,
            value,
            access: now,
            fetched: false,
            stale: false,
            token_sent: false,
            prev: NIL,
            next: self.head,
        };
        self.stats.bytes += item.size() as u64;
        self.stats.curr_items += 1;
        self.stats.total_items += 1;
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(item);
                s
            }
            None => {
                self.slots.push(Some(item));
                (self.slots.len() - 1) as u32
            }
        };
        if self.head != NIL {
            let h = self.head;
            self.item_mut(h).prev = slot;
        }
        self.head = slot;
        if self.tail == NIL {
            self.tail = slot;
        }
        self.index.insert(key, slot);
    }

    fn unlink(&mut self, slot: u32) {
        let it = self.slots[slot as usize].take().expect("linked slot holds an item");
        self.detach(slot, it.prev, it.next);
        self.index.remove(&it.key);
        self.stats.bytes -= it.size() as u64;
        self.stats.curr_items -= 1;
        self.free_slots.push(slot);
    }

    fn detach(&mut self, slot: u32, prev: u32, next: u32) {
        if prev != NIL {
            self.item_mut(prev).next = next;
        } else if self.head == slot {
            self.head = next;
        }
        if next != NIL {
            self.item_mut(next).prev = prev;
        } else if self.tail == slot {
            self.tail = prev;
        }
    }

    /// Moves `slot` to the LRU head.
    pub(crate) fn bump(&mut self, slot: u32) {
        if self.head == slot {
            return;
        }
        let (prev, next) = {
            let it = self.item(slot);
            (it.prev, it.next)
        };
        self.detach(slot, prev, next);
        let head = self.head;
        {
            let it = self.item_mut(slot);
            it.prev = NIL;
            it.next = head;
        }
        if head != NIL {
            self.item_mut(head).prev = slot;
        }
        self.head = slot;
        if self.tail == NIL {
            self.tail = slot;
        }
    }
}

/// A counter value as memcached reads it (util.c `safe_strtoull` on the
/// value and its "\r\n"): optional leading white space and sign, decimal
/// digits, then white space or the end; more than 64 bits or a negative
/// number is not a number.
pub fn parse_counter(v: &[u8]) -> Option<u64> {
    let mut with_crlf = v.to_vec();
    with_crlf.extend_from_slice(b"\r\n");
    parse_u64(&with_crlf)
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// C's strtoull then memcached's checks (util.c `safe_strtoull`): digits
/// must follow optional white space and sign; what follows them must be
/// white space or nothing.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    let mut i = s.iter().take_while(|&&b| is_space(b)).count();
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = s[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &s[i + digits..];
    if rest.first().is_some_and(|&b| !is_space(b)) {
        return None;
    }
    let n: u64 = std::str::from_utf8(&s[i..i + digits]).ok()?.parse().ok()?;
    if negative && n != 0 {
        // strtoull negates; memcached refuses a result that is negative
        // as a signed number, i.e. every "-N" with N below 2^63.
        let wrapped = n.wrapping_neg();
        if (wrapped as i64) < 0 {
            return None;
        }
        return Some(wrapped);
    }
    Some(n)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
