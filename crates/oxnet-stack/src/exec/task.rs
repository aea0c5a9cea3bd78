//! A task as the executor stores it, its waker, and the ready queue the
//! wakers push onto.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use super::join::Abort;

/// Names a task: its slot in the executor's table and the generation of
/// that slot, so that an entry left in the ready queue by a task that has
/// since finished never wakes the task that reuses the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TaskKey {
    pub slot: u32,
    pub generation: u32,
}

/// Keys of woken tasks in wake order. The only part of the executor that
/// another thread can reach, through a [`TaskWaker`].
#[derive(Default)]
pub(super) struct ReadyQueue {
    keys: Mutex<VecDeque<TaskKey>>,
    /// `keys.len()`, readable without the lock ([`super::Executor::has_ready`]
    /// is asked every round of the graph).
    len: AtomicUsize,
}

impl ReadyQueue {
    pub fn push(&self, key: TaskKey) {
        // A panic while the lock is held cannot happen (push_back only
        // allocates, and an allocation failure aborts), so poisoning is
        // not a state this queue can be in; take the guard either way.
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.push_back(key);
        self.len.store(keys.len(), Ordering::Release);
    }

    /// Moves up to `max` keys from the front into `out`, in wake order.
    pub fn take_front(&self, max: usize, out: &mut Vec<TaskKey>) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let n = max.min(keys.len());
        out.extend(keys.drain(..n));
        self.len.store(keys.len(), Ordering::Release);
    }

    /// Whether any key is queued.
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }
}

/// What a [`Waker`] of a task points to.
pub(super) struct TaskWaker {
    pub key: TaskKey,
    /// True while the task's key is in the ready queue, so that several
    /// wakes before the task runs queue it once. Left true for good when the
    /// task is gone, so a waker that outlives its task does nothing.
    pub queued: AtomicBool,
    pub ready: Arc<ReadyQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A swap even when the flag is already set (a socket waking its
        // reader per segment of a burst): a plain load that saw "queued"
        // and returned would not publish what the waking thread wrote
        // before it, and the executor's poll, which clears the flag with a
        // swap first, could miss it (a lost wake-up from another thread).
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.ready.push(self.key);
        }
    }
}

/// The future of a spawned task, with its output sent to its join handle.
pub(super) type Body = Pin<Box<dyn Future<Output = ()>>>;

/// A live task.
pub(super) struct Task {
    pub header: Arc<TaskWaker>,
    /// Made once at spawn: polling clones nothing.
    pub waker: Waker,
    pub body: Body,
    /// Tells the join handle why the task ended without a value.
    pub join: Rc<dyn Abort>,
}

/// A slot of the task table.
pub(super) enum Slot {
    /// Free; the next free slot's index (a free list through the table).
    Free(Option<u32>),
    /// The task is out of the table while it is polled (a task spawned
    /// from inside that poll must not take this slot).
    Running,
    Live(Task),
}

/// The task table: a slab of slots, each with a generation that counts
/// its reuses.
#[derive(Default)]
pub(super) struct Tasks {
    slots: Vec<(u32, Slot)>,
    free: Option<u32>,
    live: usize,
}

impl Tasks {
    /// Reserves a slot and returns its key; [`Tasks::put`] fills it.
    pub fn reserve(&mut self) -> TaskKey {
        self.live += 1;
        if let Some(slot) = self.free {
            let (generation, entry) = &mut self.slots[slot as usize];
            if let Slot::Free(next) = *entry {
                self.free = next;
            }
            *entry = Slot::Running;
            return TaskKey {
                slot,
                generation: *generation,
            };
        }
        let slot = u32::try_from(self.slots.len()).expect("more than 2^32 live tasks");
        self.slots.push((0, Slot::Running));
        TaskKey { slot, generation: 0 }
    }

    /// Takes the task named by `key` out to poll it; its slot stays
    /// reserved. None if the key is stale.
    pub fn take(&mut self, key: TaskKey) -> Option<Task> {
        let (generation, entry) = self.slots.get_mut(key.slot as usize)?;
        if *generation != key.generation || !matches!(entry, Slot::Live(_)) {
            return None;
        }
        match std::mem::replace(entry, Slot::Running) {
            Slot::Live(task) => Some(task),
            _ => None,
        }
    }

    /// Puts a task back in its reserved slot.
    pub fn put(&mut self, key: TaskKey, task: Task) {
        self.slots[key.slot as usize].1 = Slot::Live(task);
    }

    /// Frees a reserved slot; the next task in it gets a new generation.
    pub fn release(&mut self, key: TaskKey) {
        let (generation, entry) = &mut self.slots[key.slot as usize];
        *generation = generation.wrapping_add(1);
        *entry = Slot::Free(self.free);
        self.free = Some(key.slot);
        self.live -= 1;
    }

    /// Live tasks (including one being polled).
    pub fn len(&self) -> usize {
        self.live
    }

    /// Empties the table, returning the tasks it held.
    pub fn drain(&mut self) -> Vec<Task> {
        let slots = std::mem::take(&mut self.slots);
        self.free = None;
        self.live = 0;
        slots
            .into_iter()
            .filter_map(|(_, s)| match s {
                Slot::Live(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    #[cfg(test)]
    pub fn header(&self, key: TaskKey) -> Option<&Arc<TaskWaker>> {
        match self.slots.get(key.slot as usize) {
            Some((g, Slot::Live(t))) if *g == key.generation => Some(&t.header),
            _ => None,
        }
    }
}
