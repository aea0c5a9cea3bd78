//! Timers on a hierarchical timing wheel (Varghese and Lauck, "Hashed and
//! Hierarchical Timing Wheels", SOSP 1987; ClickNF §5.3): scheduling and
//! cancelling are O(1), expiring costs O(1) per timer plus a cascade of
//! the next level's slot every time a level wraps.
//!
//! Time is in ticks (the router uses 1 µs). Level L has 256 slots of
//! 256^L ticks each: level 0 covers the next 256 ticks one per slot,
//! level 1 the next 65 536, and so on; four levels reach 2^32 ticks
//! (71 minutes at 1 µs). Timers further out wait in an overflow list that
//! is looked at whenever the top level wraps.
//!
//! Timers live in a slab; each slot is a doubly linked list through the
//! slab, so a timer is unlinked without searching.

const LEVELS: usize = 4;
const SLOT_BITS: u32 = 8;
const SLOTS: usize = 1 << SLOT_BITS;
const MASK: u64 = SLOTS as u64 - 1;
const NIL: u32 = u32::MAX;

/// A timer's handle: its slab index and a generation, so that a stale
/// handle never cancels a newer timer that reused the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    generation: u32,
}

#[derive(Clone)]
struct Entry {
    expires: u64,
    owner: usize,
    prev: u32,
    next: u32,
    /// Which list: level * SLOTS + slot, OVERFLOW, or FREE.
    list: u32,
    generation: u32,
}

const OVERFLOW: u32 = (LEVELS * SLOTS) as u32;
/// Timers scheduled for a tick already passed: they fire at the next
/// advance.
const LATE: u32 = OVERFLOW + 1;
const FREE: u32 = OVERFLOW + 2;

/// The wheel. `owner` is opaque to it (the router stores the element).
pub struct TimerWheel {
    entries: Vec<Entry>,
    free: Vec<u32>,
    heads: Vec<u32>,
    /// One bit per slot of each level: set while the slot's list is not
    /// empty, so that finding the next non-empty slot takes a few
    /// `trailing_zeros` instead of a walk over 256 heads per level (a
    /// router with timers pending asks at every round).
    occupied: [[u64; SLOTS / 64]; LEVELS],
    /// Every tick before this one has been expired.
    now: u64,
    pending: usize,
}

impl Default for TimerWheel {
    fn default() -> TimerWheel {
        TimerWheel::new(0)
    }
}

impl TimerWheel {
    /// An empty wheel whose time starts at `now` ticks.
    pub fn new(now: u64) -> TimerWheel {
        TimerWheel {
            entries: Vec::new(),
            free: Vec::new(),
            heads: vec![NIL; LEVELS * SLOTS + 2],
            occupied: [[0; SLOTS / 64]; LEVELS],
            now,
            pending: 0,
        }
    }

    /// The current time of the wheel (every earlier tick has expired).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Timers scheduled and not yet expired or cancelled.
    pub fn len(&self) -> usize {
        self.pending
    }

    /// Whether no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.pending == 0
    }

    /// The list a timer expiring at `expires` belongs in, given the time.
    fn list_for(&self, expires: u64) -> u32 {
        if expires < self.now {
            return LATE;
        }
        let delta = expires - self.now;
        for level in 0..LEVELS {
            let span = 1u64 << (SLOT_BITS * (level as u32 + 1));
            // The slot must not have been passed by this level's cursor:
            // keep the timer at the lowest level whose window holds it.
            if delta < span {
                // The slot may be the cursor's own at this level when the
                // timer is almost a whole wrap ahead; it is then reached
                // at the cursor's next visit, a wrap later.
                let shift = SLOT_BITS * level as u32;
                return (level * SLOTS) as u32 + ((expires >> shift) & MASK) as u32;
            }
        }
        OVERFLOW
    }

    fn link(&mut self, index: u32, list: u32) {
        let head = self.heads[list as usize];
        {
            let e = &mut self.entries[index as usize];
            e.list = list;
            e.prev = NIL;
            e.next = head;
        }
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        self.heads[list as usize] = index;
        if list < OVERFLOW {
            self.occupied[list as usize / SLOTS][(list as usize % SLOTS) / 64] |= 1 << (list % 64);
        }
    }

    /// Clears the slot's bit once its list is empty.
    fn mark_if_empty(&mut self, list: u32) {
        if list < OVERFLOW && self.heads[list as usize] == NIL {
            self.occupied[list as usize / SLOTS][(list as usize % SLOTS) / 64] &= !(1 << (list % 64));
        }
    }

    /// The first non-empty slot of `level` at index `from` or after
    /// (no wrap), if any.
    fn occupied_from(&self, level: usize, from: u64) -> Option<u64> {
        let mut word = (from / 64) as usize;
        if word >= SLOTS / 64 {
            return None;
        }
        let mut bits = self.occupied[level][word] & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(word as u64 * 64 + bits.trailing_zeros() as u64);
            }
            word += 1;
            if word == SLOTS / 64 {
                return None;
            }
            bits = self.occupied[level][word];
        }
    }

    /// The first non-empty slot of `level` in cursor order starting at
    /// `from` and wrapping around: (slot, how many steps after `from`).
    fn occupied_wrapping(&self, level: usize, from: u64) -> Option<u64> {
        match self.occupied_from(level, from) {
            Some(k) => Some(k - from),
            None => self
                .occupied_from(level, 0)
                .filter(|&k| k < from)
                .map(|k| k + SLOTS as u64 - from),
        }
    }

    fn unlink(&mut self, index: u32) {
        let (prev, next, list) = {
            let e = &self.entries[index as usize];
            (e.prev, e.next, e.list)
        };
        if prev != NIL {
            self.entries[prev as usize].next = next;
        } else {
            self.heads[list as usize] = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
        self.entries[index as usize].list = FREE;
        self.mark_if_empty(list);
    }

    /// Schedules a timer for `owner` at tick `expires` (a time already
    /// past expires at the next advance). O(1).
    pub fn schedule(&mut self, expires: u64, owner: usize) -> TimerId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    expires: 0,
                    owner: 0,
                    prev: NIL,
                    next: NIL,
                    list: FREE,
                    generation: 0,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let generation = {
            let e = &mut self.entries[index as usize];
            e.expires = expires;
            e.owner = owner;
            e.generation = e.generation.wrapping_add(1);
            e.generation
        };
        let list = self.list_for(expires);
        self.link(index, list);
        self.pending += 1;
        TimerId { index, generation }
    }

    /// Cancels a timer; false if it already expired or was cancelled. O(1).
    pub fn cancel(&mut self, id: TimerId) -> bool {
        let Some(e) = self.entries.get(id.index as usize) else {
            return false;
        };
        if e.generation != id.generation || e.list == FREE {
            return false;
        }
        self.unlink(id.index);
        self.free.push(id.index);
        self.pending -= 1;
        true
    }

    /// Whether a timer is still pending.
    pub fn is_pending(&self, id: TimerId) -> bool {
        self.entries
            .get(id.index as usize)
            .is_some_and(|e| e.generation == id.generation && e.list != FREE)
    }

    /// Moves every timer of `list` to where it belongs now.
    fn cascade(&mut self, list: u32) {
        let mut at = self.heads[list as usize];
        self.heads[list as usize] = NIL;
        self.mark_if_empty(list);
        while at != NIL {
            let next = self.entries[at as usize].next;
            let target = self.list_for(self.entries[at as usize].expires);
            self.entries[at as usize].list = FREE;
            self.link(at, target);
            at = next;
        }
    }

    /// Advances time to `now` (ticks), calling `fire(id, owner, expires)`
    /// for every timer whose tick has been reached (`expires <= now`), in
    /// order of expiry tick (timers of one tick in no particular order).
    pub fn advance(&mut self, now: u64, fire: &mut dyn FnMut(TimerId, usize, u64)) {
        self.expire_list(LATE, fire);
        while self.now <= now {
            if self.pending == 0 {
                self.now = now + 1;
                break;
            }
            // Jump to the next tick where a non-empty slot is reached:
            // the cascades of the boundaries jumped over concern empty
            // slots only.
            let target = self.next_event_tick();
            if target > now {
                self.now = now + 1;
                break;
            }
            self.now = target;
            if self.now & MASK == 0 {
                // Levels whose cursor moves at this tick: level L moves
                // when every level below it wrapped to 0. Cascade from
                // the top down, so that timers brought down from level
                // L+1 into level L's current slot are brought down again.
                let mut top = 1;
                while top < LEVELS && (self.now >> (SLOT_BITS * top as u32)) & MASK == 0 {
                    top += 1;
                }
                if top == LEVELS {
                    self.cascade(OVERFLOW);
                }
                for level in (1..top.min(LEVELS - 1) + 1).rev() {
                    let index = ((self.now >> (SLOT_BITS * level as u32)) & MASK) as u32;
                    self.cascade((level * SLOTS) as u32 + index);
                }
            }
            self.expire_list((self.now & MASK) as u32, fire);
            self.now += 1;
        }
    }

    fn expire_list(&mut self, list: u32, fire: &mut dyn FnMut(TimerId, usize, u64)) {
        loop {
            let head = self.heads[list as usize];
            if head == NIL {
                break;
            }
            let (owner, expires, generation) = {
                let e = &self.entries[head as usize];
                (e.owner, e.expires, e.generation)
            };
            self.unlink(head);
            self.free.push(head);
            self.pending -= 1;
            fire(
                TimerId {
                    index: head,
                    generation,
                },
                owner,
                expires,
            );
        }
    }

    /// The next tick at which something happens: a non-empty level-0
    /// slot is expired, or a non-empty higher slot is cascaded. The
    /// minimum over the levels (a slot behind a level's cursor is reached
    /// after that level wraps).
    fn next_event_tick(&self) -> u64 {
        let now = self.now;
        let mut best = u64::MAX;
        let idx0 = now & MASK;
        // Level-0 slots behind the cursor hold the next round's ticks.
        if let Some(step) = self.occupied_wrapping(0, idx0) {
            best = now + step;
        }
        // A cascade due at this very tick comes first (below).
        for level in 1..LEVELS {
            let shift = SLOT_BITS * level as u32;
            let base = (now >> shift) << shift;
            let idx = (now >> shift) & MASK;
            // At the very start of a period the cursor's own slot has not
            // been cascaded yet; otherwise it is next visited a whole
            // wrap later (step 256: timers a wrap ahead land there).
            let first = if now & ((1u64 << shift) - 1) == 0 { 0 } else { 1 };
            let step = match self.occupied_wrapping(level, (idx + first) & MASK) {
                Some(s) => s + first,
                None => continue,
            };
            // Wrapping from idx + 1 reaches the cursor's own slot last, a
            // whole wrap (256 steps) after it.
            best = best.min(base + (step << shift));
        }
        if self.heads[OVERFLOW as usize] != NIL {
            let top = SLOT_BITS * LEVELS as u32;
            let boundary = if now & ((1u64 << top) - 1) == 0 {
                now
            } else {
                ((now >> top) + 1) << top
            };
            best = best.min(boundary);
        }
        best
    }

    /// The earliest pending expiry tick, if any (for a simulated clock
    /// that jumps to the next event, and for how long an idle router may
    /// sleep). A timer on a higher level may expire before one on a lower
    /// level that was scheduled later, so every level is looked at; but
    /// within a level, the slots after the cursor cover successive time
    /// ranges, so only two lists per level can hold its earliest timer:
    /// the cursor's own slot (not yet cascaded, or a whole wrap ahead)
    /// and the first non-empty slot after it. Plus the overflow list.
    pub fn next_expiry(&self) -> Option<u64> {
        if self.pending == 0 {
            return None;
        }
        if self.heads[LATE as usize] != NIL {
            return Some(self.now);
        }
        let mut best: Option<u64> = None;
        let mut scan = |head: u32| {
            let mut at = head;
            while at != NIL {
                let e = &self.entries[at as usize];
                best = Some(best.map_or(e.expires, |b| b.min(e.expires)));
                at = e.next;
            }
        };
        for level in 0..LEVELS {
            let idx = (self.now >> (SLOT_BITS * level as u32)) & MASK;
            scan(self.heads[level * SLOTS + idx as usize]);
            if let Some(step) = self.occupied_wrapping(level, (idx + 1) & MASK) {
                scan(self.heads[level * SLOTS + ((idx + 1 + step) & MASK) as usize]);
            }
        }
        scan(self.heads[OVERFLOW as usize]);
        best.map(|b| b.max(self.now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Expiries in order, compared with a sorted reference.
    fn check(ops: &[(u64, bool)], steps: &[u64]) {
        let mut wheel = TimerWheel::new(0);
        let mut reference: BTreeMap<(u64, usize), ()> = BTreeMap::new();
        let mut ids = Vec::new();
        for (i, &(delay, cancel)) in ops.iter().enumerate() {
            let id = wheel.schedule(delay, i);
            ids.push((id, delay, cancel));
            reference.insert((delay, i), ());
        }
        for (i, (id, delay, cancel)) in ids.iter().enumerate() {
            if *cancel {
                assert!(wheel.cancel(*id));
                assert!(!wheel.cancel(*id), "second cancel");
                reference.remove(&(*delay, i));
            }
        }
        assert_eq!(wheel.len(), reference.len());
        let mut t = 0;
        for &step in steps {
            t += step;
            let mut fired = Vec::new();
            wheel.advance(t, &mut |_, owner, expires| fired.push((expires, owner)));
            let due: Vec<(u64, usize)> = reference.range(..(t + 1, 0)).map(|(k, _)| *k).collect();
            for k in &due {
                reference.remove(k);
            }
            let mut sorted = fired.clone();
            sorted.sort();
            assert_eq!(sorted, due, "at {t}");
            // Order of expiry ticks is non-decreasing.
            assert!(fired.windows(2).all(|w| w[0].0 <= w[1].0), "order at {t}: {fired:?}");
            assert!(fired.iter().all(|&(e, _)| e <= t));
        }
    }

    #[test]
    fn near_far_and_overflow_timers_expire_in_order() {
        let ops: Vec<(u64, bool)> = [
            0,
            1,
            255,
            256,
            257,
            65_535,
            65_536,
            70_000,
            16_777_216,
            5_000_000_000,
            3,
            3,
        ]
        .iter()
        .enumerate()
        .map(|(i, &d)| (d, i == 11))
        .collect();
        check(&ops, &[0, 1, 100, 200, 65_000, 1_000, 20_000_000, 5_000_000_000]);
    }

    #[test]
    fn stale_handles_do_not_cancel_new_timers() {
        let mut w = TimerWheel::new(10);
        let a = w.schedule(20, 1);
        w.advance(25, &mut |_, _, _| {});
        let b = w.schedule(30, 2);
        assert!(!w.cancel(a), "a expired; its entry now holds b");
        assert!(w.is_pending(b));
        assert_eq!(w.next_expiry(), Some(30));
        assert!(w.cancel(b));
        assert_eq!(w.next_expiry(), None);
    }

    #[test]
    fn timers_in_the_past_fire_at_the_next_advance() {
        let mut w = TimerWheel::new(1000);
        w.schedule(5, 7);
        let mut fired = Vec::new();
        w.advance(1000, &mut |_, o, _| fired.push(o));
        assert_eq!(fired, [7]);
    }

    /// A small deterministic generator (no extra crate): xorshift.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn random_schedules_match_a_sorted_reference() {
        // Property test against a BTreeMap (a priority queue): random
        // delays across all levels, random cancels, random advance steps,
        // with scheduling interleaved with advancing.
        for round in 0..200u64 {
            let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (round + 1);
            // Every third round starts just below 2^32 ticks, where all
            // four levels wrap and the overflow list is cascaded.
            let offset = rng(&mut seed) % 1_000_000;
            let start = if round % 3 == 0 { (1u64 << 32) - offset } else { offset };
            let mut wheel = TimerWheel::new(start);
            let start = wheel.now();
            let mut reference = BTreeMap::new();
            let mut live: Vec<(TimerId, u64, usize)> = Vec::new();
            let mut t = start;
            for op in 0..300usize {
                match rng(&mut seed) % 4 {
                    0 | 1 => {
                        let scale = [10, 300, 70_000, 20_000_000, 5_000_000_000][(rng(&mut seed) % 5) as usize];
                        let at = t + rng(&mut seed) % scale;
                        let id = wheel.schedule(at, op);
                        reference.insert((at, op), ());
                        live.push((id, at, op));
                    }
                    2 if !live.is_empty() => {
                        let k = (rng(&mut seed) % live.len() as u64) as usize;
                        let (id, at, owner) = live.swap_remove(k);
                        let was = reference.remove(&(at, owner)).is_some();
                        assert_eq!(wheel.cancel(id), was);
                    }
                    _ => {
                        let step = [1, 50, 1_000, 100_000, 30_000_000][(rng(&mut seed) % 5) as usize];
                        t += rng(&mut seed) % step;
                        let mut fired = Vec::new();
                        wheel.advance(t, &mut |_, o, e| fired.push((e, o)));
                        let due: Vec<(u64, usize)> = reference.range(..(t + 1, 0)).map(|(k, _)| *k).collect();
                        for k in &due {
                            reference.remove(k);
                        }
                        let mut sorted = fired.clone();
                        sorted.sort();
                        assert_eq!(sorted, due, "round {round} op {op} t {t}");
                        assert!(
                            fired.windows(2).all(|w| w[0].0 <= w[1].0),
                            "round {round}: order {fired:?}"
                        );
                    }
                }
                assert_eq!(wheel.len(), reference.len());
                if let Some((&(first, _), _)) = reference.iter().next() {
                    assert_eq!(wheel.next_expiry(), Some(first.max(wheel.now())), "round {round}");
                }
            }
        }
    }
}
