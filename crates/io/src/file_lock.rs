//! Taking a whole-file lock without waiting for its holder, but past a release still in flight.
//!
//! flashscan's locks are `flock`s, so a crash never leaves one held. An `flock` belongs to
//! the open file description, and a child process forked by *another* thread of the same
//! process shares every descriptor until its `exec` closes them (`O_CLOEXEC`). So a lock its
//! owner has just dropped can stay held for the moment between that fork and that exec —
//! the next taker in the process (a test's second writer, a server reopening its database)
//! would be refused by a holder that is already gone. CI saw exactly this: a test's writer
//! refused right after `create_table` closed its own writer, while another test spawned a
//! child. Linux has no close-on-fork flag, so the taker retries for a short, named grace.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

/// How long a refused non-blocking `flock` is retried before the holder is reported: long
/// enough for a fork-to-exec window on a loaded 2-core machine, short enough that a person
/// told "locked by …" does not notice the wait.
pub const LOCK_RELEASE_GRACE_MS: u64 = 500;
/// Pause between retries within the grace.
const LOCK_RETRY_PAUSE_MS: u64 = 5;

const _: () = assert!(LOCK_RETRY_PAUSE_MS < LOCK_RELEASE_GRACE_MS);

/// Takes an exclusive `flock` on `file`. `Ok(true)` when taken, `Ok(false)` when another
/// holder still has it after [`LOCK_RELEASE_GRACE_MS`]; other errors are returned.
pub fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    let deadline = Instant::now() + Duration::from_millis(LOCK_RELEASE_GRACE_MS);
    loop {
        // SAFETY: flock on a descriptor the caller owns for the call's duration.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(LOCK_RETRY_PAUSE_MS)),
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => {}
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_after_the_grace_and_a_released_one_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = File::create(&path).unwrap();
        let b = File::options().write(true).open(&path).unwrap();
        assert!(try_lock_exclusive(&a).unwrap());
        let start = Instant::now();
        assert!(!try_lock_exclusive(&b).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(LOCK_RELEASE_GRACE_MS));
        drop(a);
        assert!(try_lock_exclusive(&b).unwrap());
    }

    #[test]
    fn a_lock_still_shared_by_a_forked_child_is_taken_once_the_child_lets_go() {
        // The CI race, made deterministic: another descriptor for the same open file
        // description (what a forked child holds until exec) keeps the lock for a moment
        // after its owner drops it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let owner = File::create(&path).unwrap();
        assert!(try_lock_exclusive(&owner).unwrap());
        let child_copy = owner.try_clone().unwrap();
        drop(owner);
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(child_copy);
        });
        let next = File::options().write(true).open(&path).unwrap();
        assert!(try_lock_exclusive(&next).unwrap());
        releaser.join().unwrap();
    }
}
