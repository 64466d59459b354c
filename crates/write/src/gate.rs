//! The commit gate: a commit holds it shared from its first log record until its rows are
//! in the delta (the durable wait included); DDL, the checkpoint and becoming the writer
//! hold it exclusively, so a checkpoint's redo point never falls between a commit's
//! records and its delta rows (insert.rs says why that matters).
//!
//! Why not `std::sync::RwLock` (what this was): commits now also await their flush in
//! async tasks (the server's connections, `PendingCommit::durable`), and a std guard may
//! not be held across an `.await` of a task that moves between threads (it is `!Send`).
//! These guards are plain references to the gate, so they may. Writer-preferring, as the
//! std lock is on Linux: once an exclusive holder waits, new shared holders wait behind
//! it, so a stream of commits cannot starve a checkpoint. No poisoning: the gate holds
//! only counts, which a panic cannot leave half-changed (a guard dropped while unwinding
//! gives its count back), and the state mutex beside it still poisons.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Default)]
pub(crate) struct CommitGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    shared: usize,
    exclusive: bool,
    exclusive_waiting: usize,
}

/// Held by a commit (see the module comment). `Send`: it may cross an `.await`.
pub(crate) struct SharedGate<'a>(&'a CommitGate);

/// Held by DDL, the checkpoint and `become_writer`: no commit is in flight meanwhile.
pub(crate) struct ExclusiveGate<'a>(&'a CommitGate);

impl CommitGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while an exclusive holder holds or waits for the gate.
    pub(crate) fn shared(&self) -> SharedGate<'_> {
        let mut st = self.lock();
        while st.exclusive || st.exclusive_waiting > 0 {
            st = self.changed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.shared += 1;
        SharedGate(self)
    }

    /// The shared gate if it can be had without waiting (for async callers, which must not
    /// block a runtime thread behind a checkpoint).
    pub(crate) fn try_shared(&self) -> Option<SharedGate<'_>> {
        let mut st = self.lock();
        if st.exclusive || st.exclusive_waiting > 0 {
            return None;
        }
        st.shared += 1;
        Some(SharedGate(self))
    }

    /// An exclusive holder holds or waits for the gate (a commit would wait now).
    pub(crate) fn is_contended(&self) -> bool {
        let st = self.lock();
        st.exclusive || st.exclusive_waiting > 0
    }

    /// Waits until no commit holds the gate, keeping new ones out meanwhile.
    pub(crate) fn exclusive(&self) -> ExclusiveGate<'_> {
        let mut st = self.lock();
        st.exclusive_waiting += 1;
        while st.exclusive || st.shared > 0 {
            st = self.changed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.exclusive_waiting -= 1;
        st.exclusive = true;
        ExclusiveGate(self)
    }
}

impl Drop for SharedGate<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        debug_assert!(st.shared > 0);
        st.shared -= 1;
        if st.shared == 0 && st.exclusive_waiting > 0 {
            self.0.changed.notify_all();
        }
    }
}

impl Drop for ExclusiveGate<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        debug_assert!(st.exclusive);
        st.exclusive = false;
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    /// Shared holders run together; an exclusive holder waits for them, keeps new shared
    /// holders out (try_shared fails, shared waits) and never overlaps one.
    #[test]
    fn exclusive_excludes_shared_and_is_not_starved() {
        let gate = Arc::new(CommitGate::default());
        let a = gate.shared();
        let b = gate.shared();
        assert_send(&a);
        let inside = Arc::new(AtomicBool::new(false));
        let shared_inside = Arc::new(AtomicUsize::new(2));
        let (g, i, s) = (gate.clone(), inside.clone(), shared_inside.clone());
        let excl = std::thread::spawn(move || {
            let _x = g.exclusive();
            assert_eq!(s.load(Ordering::SeqCst), 0, "exclusive while commits hold the gate");
            i.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(30));
            i.store(false, Ordering::SeqCst);
        });
        // Wait until the exclusive holder is waiting: new shared holders are refused.
        while gate.lock().exclusive_waiting == 0 {
            std::thread::yield_now();
        }
        assert!(gate.try_shared().is_none(), "a commit passed a waiting checkpoint");
        let (g, i) = (gate.clone(), inside.clone());
        let late = std::thread::spawn(move || {
            let _s = g.shared();
            assert!(!i.load(Ordering::SeqCst), "shared while exclusive");
        });
        shared_inside.fetch_sub(1, Ordering::SeqCst);
        drop(a);
        shared_inside.fetch_sub(1, Ordering::SeqCst);
        drop(b);
        excl.join().unwrap();
        late.join().unwrap();
        assert!(gate.try_shared().is_some());
    }
}
