//! The pool's files: every table or index file any path reads gets one id for the life of
//! the process, so a page has one key wherever it is read from (a scan, a lookup, a
//! checkpoint) and a page made dirty by one is seen by the others.
//!
//! A file is known by its canonical path and its identity on disk (device, inode, last
//! change time). If a path comes back with another identity (the file was replaced or
//! changed behind the pool's back, e.g. by a rebuild or a test that corrupts bytes), it
//! gets a new id, so clean pages cached under the old id are never served for it. A file
//! with dirty pages keeps its id: the pool's version is the newest there is.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::BufferError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    ctime_ns: i128,
}

struct Entry {
    id: u32,
    identity: Identity,
}

#[derive(Default)]
struct Inner {
    by_path: HashMap<PathBuf, Entry>,
    /// Each path as callers gave it → its canonical path: a path seen before is checked by
    /// one `stat` (its identity), not resolved again component by component (a point
    /// lookup registers its table's file per statement).
    aliases: HashMap<PathBuf, PathBuf>,
    /// Path of every id ever given (ids are never reused).
    paths: Vec<PathBuf>,
}

#[derive(Default)]
pub struct FileRegistry {
    inner: Mutex<Inner>,
}

/// What `register` found.
pub(crate) struct Registered {
    pub id: u32,
    /// The id the path had before it changed on disk (its clean pages are stale).
    pub replaced: Option<u32>,
}

impl FileRegistry {
    /// The id of the file at `path`; `has_dirty(id)` says whether an id holds dirty pages.
    pub(crate) fn register(&self, path: &Path, has_dirty: &dyn Fn(u32) -> bool) -> Result<Registered, BufferError> {
        let meta = std::fs::metadata(path).map_err(|e| BufferError::File { path: path.to_path_buf(), what: format!("cannot stat: {e}") })?;
        let identity = Identity::of(&meta);
        {
            // The same file under a path seen before (the identity names the file, however
            // the path resolves): its id as it is.
            let inner = self.inner.lock();
            if let Some(entry) = inner.aliases.get(path).and_then(|canonical| inner.by_path.get(canonical)) {
                if entry.identity == identity {
                    return Ok(Registered { id: entry.id, replaced: None });
                }
            }
        }
        let canonical = std::fs::canonicalize(path).map_err(|e| BufferError::File { path: path.to_path_buf(), what: format!("cannot resolve the path: {e}") })?;
        let mut inner = self.inner.lock();
        if inner.aliases.get(path) != Some(&canonical) {
            inner.aliases.insert(path.to_path_buf(), canonical.clone());
        }
        if let Some(entry) = inner.by_path.get_mut(&canonical) {
            if entry.identity == identity {
                return Ok(Registered { id: entry.id, replaced: None });
            }
            if entry.identity.dev == identity.dev && entry.identity.ino == identity.ino && has_dirty(entry.id) {
                // Written by the pool itself (or changed under dirty pages): keep the id.
                entry.identity = identity;
                return Ok(Registered { id: entry.id, replaced: None });
            }
        }
        let id = inner.paths.len() as u32;
        inner.paths.push(canonical.clone());
        let replaced = inner.by_path.insert(canonical, Entry { id, identity }).map(|old| old.id);
        Ok(Registered { id, replaced })
    }

    /// Forgets the file at `path` (it is about to be removed): a file made later at the
    /// same path gets a new id whatever its identity (a new file can reuse the inode, and
    /// change times are coarse). The id it had, if it had one.
    pub(crate) fn forget(&self, path: &Path) -> Option<u32> {
        let mut inner = self.inner.lock();
        let canonical = match inner.aliases.remove(path) {
            Some(c) => c,
            None => std::fs::canonicalize(path).ok()?,
        };
        inner.aliases.retain(|_, c| *c != canonical);
        inner.by_path.remove(&canonical).map(|e| e.id)
    }

    /// The canonical path of a file id.
    pub fn path(&self, id: u32) -> Option<PathBuf> {
        self.inner.lock().paths.get(id as usize).cloned()
    }

    /// Refreshes the identity after the pool wrote the file, so the next `register`
    /// does not mistake its own writes for a replacement.
    pub(crate) fn wrote(&self, id: u32) {
        let mut inner = self.inner.lock();
        let Some(path) = inner.paths.get(id as usize).cloned() else { return };
        if let (Ok(meta), Some(entry)) = (std::fs::metadata(&path), inner.by_path.get_mut(&path)) {
            if entry.id == id {
                entry.identity = Identity::of(&meta);
            }
        }
    }
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        Identity { dev: meta.dev(), ino: meta.ino(), ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128 }
    }
}
