//! The request queue: the one place above the engines that owns slots, dispatches
//! completions and drains on drop, so no caller writes its own slot loop (TigerBeetle's
//! `io/linux.zig`: callers hand in a request and get a completion back; the ring is never
//! touched directly).
//!
//! Each request carries a typed tag `T` (a chunk description, the load tickets a read will
//! fill, ...). The queue keeps it beside the slot while the request is in flight and hands
//! it back, by value, with the bytes or a typed error when the request completes. Nothing
//! allocates per request: slots, tags and the completion list are sized once.
//!
//! Safety: a slot is in the kernel's (or a worker's) hands from `queue_*` until its
//! completion is reaped, so the queue never drops an engine with requests in flight —
//! `drain` (also run by `Drop`) waits for every one. Engines assert the same on their own
//! drop (debug builds).

use std::time::Instant;

use crate::engine::{IoCompletion, IoEngine, IoOp, IoRequest};
use crate::error::IoError;
use crate::file_set::FileSet;

/// What a completed request hands back: its tag, and its bytes (the full length asked
/// for) or the error that ended it.
pub struct Completed<'q, T> {
    pub tag: T,
    pub completion: IoCompletion,
    pub result: Result<&'q mut [u8], IoError>,
}

/// Counters of one queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    pub reads_count: u64,
    pub writes_count: u64,
    pub bytes_count: u64,
    /// Time blocked in the engine waiting for a completion while none was ready.
    pub io_wait_ns: u64,
}

pub struct RequestQueue<T> {
    engine: Box<dyn IoEngine>,
    /// Per slot: the tag of the request in flight there (`None` while idle or for an
    /// untagged synchronous read).
    tags: Vec<Option<T>>,
    /// Per slot: whether a request occupies it (queued, in flight, or reaped and not yet
    /// handed back).
    busy: Vec<bool>,
    free_slots: Vec<u32>,
    /// Reaped, not yet handed back (handed back newest first; order is never promised).
    ready: Vec<IoCompletion>,
    /// Queued since the last submit.
    unsubmitted: bool,
    stats: QueueStats,
}

impl<T> RequestQueue<T> {
    /// Takes `engine` (idle). Usable slots: one per outstanding request the engine allows.
    pub fn new(engine: Box<dyn IoEngine>) -> RequestQueue<T> {
        assert_eq!(engine.in_flight(), 0, "a request queue starts with an idle engine");
        let slot_count = engine.arena().slot_count().min(engine.queue_depth());
        assert!(slot_count >= 1, "an engine with no slots cannot do I/O");
        let all_slots = engine.arena().slot_count() as usize;
        RequestQueue {
            tags: (0..all_slots).map(|_| None).collect(),
            busy: vec![false; all_slots],
            // Popped from the back: slot 0 goes first, which keeps small jobs in few slots.
            free_slots: (0..slot_count).rev().collect(),
            ready: Vec::with_capacity(slot_count as usize),
            engine,
            unsubmitted: false,
            stats: QueueStats::default(),
        }
    }

    pub fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    pub fn files(&self) -> &FileSet {
        self.engine.files()
    }

    pub fn slot_size_bytes(&self) -> usize {
        self.engine.arena().slot_size_bytes()
    }

    /// Slots this queue uses (its depth).
    pub fn depth(&self) -> u32 {
        self.engine.arena().slot_count().min(self.engine.queue_depth())
    }

    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// Whether another request may be queued now.
    pub fn has_free_slot(&self) -> bool {
        !self.free_slots.is_empty()
    }

    /// Requests queued and not yet handed back.
    pub fn outstanding(&self) -> u32 {
        self.depth() - self.free_slots.len() as u32
    }

    pub fn is_idle(&self) -> bool {
        self.outstanding() == 0
    }

    /// Queues a read of `length_bytes` at `offset_bytes` of file `file_index`, tagged.
    /// Fails if no slot is free (check `has_free_slot`) or the request is invalid.
    pub fn queue_read(&mut self, file_index: u32, offset_bytes: u64, length_bytes: u32, tag: T) -> Result<(), IoError> {
        self.queue_op(IoOp::Read, file_index, offset_bytes, length_bytes, Some(tag), None::<fn(&mut [u8]) -> T>)
    }

    /// Queues a write of `length_bytes` at `offset_bytes`; `fill` writes the bytes into
    /// the slot first (the slot is the caller's until the request is queued) and returns
    /// the request's tag.
    pub fn queue_write(&mut self, file_index: u32, offset_bytes: u64, length_bytes: u32, fill: impl FnOnce(&mut [u8]) -> T) -> Result<(), IoError> {
        self.queue_op(IoOp::Write, file_index, offset_bytes, length_bytes, None, Some(fill))
    }

    fn queue_op(
        &mut self,
        op: IoOp,
        file_index: u32,
        offset_bytes: u64,
        length_bytes: u32,
        mut tag: Option<T>,
        fill: Option<impl FnOnce(&mut [u8]) -> T>,
    ) -> Result<(), IoError> {
        let Some(&slot) = self.free_slots.last() else {
            return Err(IoError::InvalidRequest(format!("{}: request queue full ({} outstanding)", self.engine.name(), self.outstanding())));
        };
        debug_assert!(!self.busy[slot as usize], "free slot {slot} is busy");
        if length_bytes as usize > self.slot_size_bytes() {
            return Err(IoError::InvalidRequest(format!("{}: {length_bytes} bytes do not fit a {}-byte slot", self.engine.name(), self.slot_size_bytes())));
        }
        if let Some(fill) = fill {
            tag = Some(fill(&mut self.engine.slot_mut(slot)[..length_bytes as usize]));
        }
        self.engine.queue(IoRequest { op, file_index, offset_bytes, length_bytes, slot, user_data: slot as u64 })?;
        self.free_slots.pop();
        self.busy[slot as usize] = true;
        self.tags[slot as usize] = tag;
        self.unsubmitted = true;
        Ok(())
    }

    /// Hands everything queued to the device.
    pub fn submit(&mut self) -> Result<(), IoError> {
        if self.unsubmitted {
            self.engine.submit()?;
            self.unsubmitted = false;
        }
        Ok(())
    }

    /// Hands back one completed request to `on_done`, waiting for one if none is ready;
    /// `None` when nothing is outstanding. The slot is reused only after `on_done` returns,
    /// so the bytes it sees stay put. An `Err` is the engine itself failing (a request's
    /// own failure arrives in `Completed::result`).
    pub fn complete_next<R>(&mut self, on_done: impl FnOnce(Completed<'_, T>) -> R) -> Result<Option<R>, IoError> {
        if self.ready.is_empty() {
            if self.engine.in_flight() == 0 {
                debug_assert!(self.is_idle(), "requests outstanding with an idle engine");
                return Ok(None);
            }
            let waited = Instant::now();
            self.engine.reap(1, &mut self.ready)?;
            self.unsubmitted = false;
            self.stats.io_wait_ns += waited.elapsed().as_nanos() as u64;
        } else {
            // Completions are waiting; send new requests out before handing them back.
            self.submit()?;
        }
        let Some(done) = self.ready.pop() else {
            return Err(IoError::Engine { engine: self.engine.name(), source: std::io::Error::other("reap returned no completion") });
        };
        Ok(Some(self.hand_back(done, on_done)))
    }

    fn hand_back<R>(&mut self, done: IoCompletion, on_done: impl FnOnce(Completed<'_, T>) -> R) -> R {
        let slot = done.slot;
        assert!(self.busy[slot as usize], "completion for idle slot {slot}");
        let tag = self.tags[slot as usize].take();
        let checked = done.expect_full(self.engine.files());
        if checked.is_ok() {
            match done.op {
                IoOp::Read => self.stats.reads_count += 1,
                IoOp::Write => self.stats.writes_count += 1,
            }
            self.stats.bytes_count += done.length_bytes as u64;
        }
        let length = done.length_bytes as usize;
        let result = checked.map(|()| &mut self.engine.slot_mut(slot)[..length]);
        let out = match tag {
            Some(tag) => on_done(Completed { tag, completion: done, result }),
            None => panic!("untagged completion on slot {slot} outside read_one"),
        };
        self.busy[slot as usize] = false;
        self.free_slots.push(slot);
        out
    }

    /// One synchronous read (the queue must be idle): `f` sees the bytes.
    pub fn read_one<R>(&mut self, file_index: u32, offset_bytes: u64, length_bytes: u32, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, IoError> {
        assert!(self.is_idle(), "read_one needs an idle request queue");
        self.queue_op(IoOp::Read, file_index, offset_bytes, length_bytes, None, None::<fn(&mut [u8]) -> T>)?;
        let mut out = Vec::with_capacity(1);
        let waited = Instant::now();
        while out.is_empty() {
            if let Err(e) = self.engine.reap(1, &mut out) {
                self.drain();
                return Err(e);
            }
        }
        self.unsubmitted = false;
        self.stats.io_wait_ns += waited.elapsed().as_nanos() as u64;
        debug_assert_eq!(out.len(), 1);
        let done = out[0];
        let slot = done.slot;
        self.busy[slot as usize] = false;
        self.free_slots.push(slot);
        done.expect_full(self.engine.files())?;
        self.stats.reads_count += 1;
        self.stats.bytes_count += done.length_bytes as u64;
        Ok(f(&mut self.engine.slot_mut(slot)[..length_bytes as usize]))
    }

    /// Waits for every request in flight and forgets them (their tags are dropped): after
    /// an error, the queue is idle and every slot free again. An engine that itself fails
    /// while draining is left as it is (nothing more can be waited for).
    pub fn drain(&mut self) {
        let mut sink = Vec::new();
        // Anything queued but not yet submitted goes out first, so it can complete.
        if self.engine.submit().is_ok() {
            self.unsubmitted = false;
        }
        while self.engine.in_flight() > 0 {
            if self.engine.reap(1, &mut sink).is_err() {
                break;
            }
            sink.clear();
        }
        self.ready.clear();
        for t in &mut self.tags {
            *t = None;
        }
        self.busy.iter_mut().for_each(|b| *b = false);
        self.free_slots = (0..self.depth()).rev().collect();
    }
}

impl<T> Drop for RequestQueue<T> {
    fn drop(&mut self) {
        if self.engine.in_flight() > 0 || !self.ready.is_empty() {
            self.drain();
        }
    }
}
