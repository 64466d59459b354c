//! Cancel requests: a client's second connection names a backend (pid and secret key);
//! the query that backend runs now stops with SQLSTATE 57014 and the connection lives on.
//! pgwire's own cancel only interrupts the planning call, not a result already streaming,
//! so the server keeps its own registry and checks the flag while it streams rows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

/// One query's cancel flag; cheap to clone, shared by the query and the registry.
#[derive(Debug, Clone, Default)]
pub struct QueryCancel {
    inner: Arc<CancelInner>,
}

#[derive(Debug, Default)]
struct CancelInner {
    canceled: AtomicBool,
    notify: Notify,
}

impl QueryCancel {
    pub fn new() -> QueryCancel {
        QueryCancel::default()
    }

    pub fn cancel(&self) {
        self.inner.canceled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    pub fn is_canceled(&self) -> bool {
        self.inner.canceled.load(Ordering::SeqCst)
    }

    /// Completes once the query is canceled.
    pub async fn canceled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            if self.is_canceled() {
                return;
            }
            notified.await;
        }
    }
}

/// What a backend runs now, shared by its connection and the registry.
#[derive(Debug, Default)]
pub struct BackendCancel {
    current: Mutex<Option<QueryCancel>>,
}

impl BackendCancel {
    /// A new query starts: later cancel requests stop this one.
    pub fn start_query(&self) -> QueryCancel {
        let q = QueryCancel::new();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(q.clone());
        q
    }

    pub fn cancel_current(&self) -> bool {
        match self.current.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(q) => {
                q.cancel();
                true
            }
            None => false,
        }
    }
}

/// Backends by (pid, secret key).
#[derive(Debug, Default)]
pub struct CancelRegistry {
    backends: Mutex<HashMap<i32, (Vec<u8>, Weak<BackendCancel>)>>,
}

/// Removes its backend from the registry when the connection ends.
#[derive(Debug)]
pub struct BackendRegistration {
    registry: Arc<CancelRegistry>,
    pid: i32,
}

impl Drop for BackendRegistration {
    fn drop(&mut self) {
        self.registry.backends.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.pid);
    }
}

impl CancelRegistry {
    pub fn register(self: &Arc<Self>, pid: i32, secret: Vec<u8>, backend: &Arc<BackendCancel>) -> BackendRegistration {
        self.backends.lock().unwrap_or_else(|p| p.into_inner()).insert(pid, (secret, Arc::downgrade(backend)));
        BackendRegistration { registry: self.clone(), pid }
    }

    /// Cancels the backend's current query when the secret matches; a wrong secret does
    /// nothing (PostgreSQL answers neither way).
    pub fn cancel(&self, pid: i32, secret: &[u8]) -> bool {
        let backend = {
            let map = self.backends.lock().unwrap_or_else(|p| p.into_inner());
            match map.get(&pid) {
                Some((s, b)) if s.as_slice() == secret => b.upgrade(),
                _ => None,
            }
        };
        backend.map(|b| b.cancel_current()).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_with_the_right_secret_stops_the_current_query_only() {
        let registry = Arc::new(CancelRegistry::default());
        let backend = Arc::new(BackendCancel::default());
        let _reg = registry.register(7, vec![1, 2, 3, 4], &backend);
        let q = backend.start_query();
        assert!(!registry.cancel(7, &[9, 9, 9, 9]));
        assert!(!q.is_canceled());
        assert!(registry.cancel(7, &[1, 2, 3, 4]));
        q.canceled().await;
        let next = backend.start_query();
        assert!(!next.is_canceled());
    }

    #[test]
    fn a_closed_connection_leaves_the_registry() {
        let registry = Arc::new(CancelRegistry::default());
        let backend = Arc::new(BackendCancel::default());
        let reg = registry.register(8, vec![1], &backend);
        drop(reg);
        backend.start_query();
        assert!(!registry.cancel(8, &[1]));
    }
}
