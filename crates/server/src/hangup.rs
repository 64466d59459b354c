//! Noticing a client that went away in the middle of its query.
//!
//! A server only learns that a client died when it next writes to it, and a query that sends
//! nothing until its end (`count(*)` over a big join) would hold its query slot, its memory
//! and its scan buffers for its whole length on behalf of nobody. PostgreSQL's answer is
//! `client_connection_check_interval`: while a query runs, poll the socket for the peer's
//! hang-up (`POLLRDHUP` on Linux) every so often and end the query when it is gone. flashscan
//! does the same, on by default: one `poll(2)` per running query per interval costs nothing next
//! to a query long enough to be checked.
//!
//! The socket's descriptor reaches the query through a task-local set around the connection's
//! task ([`serving`]): the query's stream is polled inside that task, which owns the socket,
//! so the descriptor is open whenever it is read here.

use std::future::Future;
use std::os::fd::RawFd;
use std::time::Duration;

/// How often a running query checks its client is still there, by default (a session changes
/// it with `SET client_connection_check_interval`, 0 turns it off). PostgreSQL leaves the
/// check off by default; one second keeps an abandoned query's slot at most about a second
/// longer than needed (plus however long the query takes to reach its next await).
pub const CLIENT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

tokio::task_local! {
    static PEER_FD: RawFd;
}

/// Runs one connection's protocol with its socket's descriptor known to the queries it runs.
pub async fn serving<F: Future>(fd: RawFd, connection: F) -> F::Output {
    PEER_FD.scope(fd, connection).await
}

/// The descriptor of the connection this task serves, if it serves one.
pub fn current_peer() -> Option<RawFd> {
    PEER_FD.try_with(|fd| *fd).ok()
}

/// Resolves once the peer of `peer` hangs up, checked every `every`; never without a peer
/// (or with the check off: `every` zero).
pub async fn hung_up(peer: Option<RawFd>, every: Duration) {
    let Some(fd) = peer.filter(|_| !every.is_zero()) else { return std::future::pending().await };
    loop {
        tokio::time::sleep(every).await;
        if peer_hung_up(fd) {
            return;
        }
    }
}

/// True when the peer closed or reset the connection. Data waiting to be read (a pipelined
/// message) is not a hang-up.
pub fn peer_hung_up(fd: RawFd) -> bool {
    #[cfg(target_os = "linux")]
    const HUNG_UP: libc::c_short = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
    #[cfg(not(target_os = "linux"))]
    const HUNG_UP: libc::c_short = libc::POLLHUP | libc::POLLERR;
    let mut p = libc::pollfd { fd, events: HUNG_UP, revents: 0 };
    // SAFETY: one pollfd we own, a zero timeout; poll only reads the descriptor's state.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    // POLLNVAL (not a descriptor) or a failed poll: say nothing rather than end a query.
    n == 1 && p.revents & HUNG_UP != 0 && p.revents & libc::POLLNVAL == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_closed_peer_is_a_hang_up_and_pending_data_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server_side, _) = listener.accept().expect("accept");
        assert!(!peer_hung_up(server_side.as_raw_fd()), "an open, quiet peer");
        client.write_all(b"next query").expect("write");
        client.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(20));
        assert!(!peer_hung_up(server_side.as_raw_fd()), "unread data is not a hang-up");
        drop(client);
        std::thread::sleep(Duration::from_millis(20));
        assert!(peer_hung_up(server_side.as_raw_fd()), "the peer closed");
    }

    #[tokio::test]
    async fn hung_up_resolves_after_the_peer_closes_and_never_without_a_peer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server_side, _) = listener.accept().expect("accept");
        let every = Duration::from_millis(10);
        let open = tokio::time::timeout(Duration::from_millis(100), hung_up(Some(server_side.as_raw_fd()), every)).await;
        assert!(open.is_err(), "an open peer is not a hang-up");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), hung_up(Some(server_side.as_raw_fd()), every)).await.expect("noticed");
        let off = tokio::time::timeout(Duration::from_millis(50), hung_up(Some(server_side.as_raw_fd()), Duration::ZERO)).await;
        assert!(off.is_err(), "a zero interval turns the check off");
        assert!(tokio::time::timeout(Duration::from_millis(50), hung_up(None, every)).await.is_err());
    }

    #[tokio::test]
    async fn the_descriptor_is_known_only_inside_its_connection() {
        assert_eq!(current_peer(), None);
        assert_eq!(serving(42, async { current_peer() }).await, Some(42));
    }
}
