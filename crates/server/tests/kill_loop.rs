//! kill -9 of the server, again and again, under concurrent writers that UPDATE, DELETE
//! and INSERT in transactions while another client runs CHECKPOINT: after every restart
//! no acknowledged transaction is lost, none that was rolled back appears, and none is
//! half applied.
//!
//! The workload is a bank: transfers move money between 20 hot accounts (two UPDATEs by
//! primary key and an INSERT into `history`, one transaction), and archivals move a
//! transfer's history row into `archive` (a DELETE … RETURNING and an INSERT, one
//! transaction). Writers take row locks on the same accounts in any order, so deadlocks
//! (40P01) and waits happen and are rolled back. The oracle is arithmetic: every account's
//! balance must equal its opening balance plus the transfers recorded in `history` and
//! `archive` together — a transaction half applied breaks it — and the recorded transfer
//! ids must hold every acknowledged one and nothing else but those whose COMMIT was in
//! flight at the kill. The last check reads the database with `flashscan sql`'s session,
//! independent of the server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

mod common;
use common::{connect_port, error_of, init_db, reopened, simple_rows, spawn_child_server};

const ACCOUNTS: i64 = 20;
const OPENING_BALANCE: i64 = 1_000;
const WRITERS: i64 = 4;
const ROUNDS: u64 = 4;

/// The child half: the server as `flashscan serve` runs it. Does nothing in a normal run.
#[test]
fn child_serve_until_killed() {
    common::serve_in_child(common::config);
}

/// What the writers learnt from the server's answers about one kind of transaction, by
/// transfer id.
#[derive(Default)]
struct Ledger {
    /// COMMIT answered OK.
    acked: BTreeSet<i64>,
    /// COMMIT sent and never answered (the server died): either way is right.
    in_doubt: BTreeSet<i64>,
}

impl Ledger {
    /// Records the answer `step` to `tid`'s COMMIT; false when the server is gone.
    fn settle(&mut self, tid: i64, step: Step, rolled_back: &mut u64) -> bool {
        match step {
            Step::Committed => {
                self.in_doubt.remove(&tid);
                self.acked.insert(tid);
            }
            Step::RolledBack => {
                self.in_doubt.remove(&tid);
                *rolled_back += 1;
            }
            Step::Gone => return false,
        }
        true
    }

    /// After a restart: a transaction in doubt committed exactly when the database holds it.
    fn resolve(&mut self, found: &BTreeSet<i64>) {
        let in_doubt = std::mem::take(&mut self.in_doubt);
        self.acked.extend(in_doubt.into_iter().filter(|t| found.contains(t)));
    }

    /// Ids `found` must hold (every acknowledged one) and may hold (those in doubt too):
    /// the first few it lacks, and the first few it holds that it may not.
    fn check(&self, found: &BTreeSet<i64>) -> (Vec<i64>, Vec<i64>) {
        let lost = self.acked.difference(found).take(5).copied().collect();
        let unexplained = found.iter().filter(|t| !self.acked.contains(t) && !self.in_doubt.contains(t)).take(5).copied().collect();
        (lost, unexplained)
    }
}

#[derive(Default)]
struct Outcomes {
    transfers: Ledger,
    /// Archivals, by the transfer id they moved.
    archivals: Ledger,
    /// Transactions rolled back after a SQL error (deadlocks, serialization).
    rolled_back: u64,
}

/// Whether `e` is the server's answer (a SQL error: roll back and go on) rather than the
/// connection's end (the server was killed).
fn answered(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some()
}

/// xorshift64*: reproducible by seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

enum Step {
    Committed,
    RolledBack,
    /// The connection ended: the server is gone.
    Gone,
}

/// One transaction: `body` then COMMIT. A SQL error rolls it back.
async fn transaction(c: &Client, body: impl std::future::Future<Output = Result<bool, tokio_postgres::Error>>, in_doubt: impl FnOnce()) -> Step {
    if let Err(e) = c.batch_execute("BEGIN").await {
        return if answered(&e) { Step::RolledBack } else { Step::Gone };
    }
    match body.await {
        Ok(true) => {}
        Ok(false) => {
            return match c.batch_execute("ROLLBACK").await {
                Ok(()) => Step::RolledBack,
                Err(_) => Step::Gone,
            }
        }
        Err(e) if answered(&e) => {
            return match c.batch_execute("ROLLBACK").await {
                Ok(()) => Step::RolledBack,
                Err(_) => Step::Gone,
            }
        }
        Err(_) => return Step::Gone,
    }
    in_doubt();
    match c.batch_execute("COMMIT").await {
        Ok(()) => Step::Committed,
        Err(e) if answered(&e) => Step::RolledBack,
        Err(_) => Step::Gone,
    }
}

/// Transfers and archivals until the server dies; transfer ids are `round · writer · i`.
async fn writer(port: u16, round: u64, w: i64, outcomes: Arc<Mutex<Outcomes>>) {
    let Ok(c) = common::try_connect(port, "writer", "flashscan", None).await else { return };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (round << 8) ^ w as u64);
    let mut own: Vec<i64> = Vec::new();
    for i in 0.. {
        if i % 7 == 6 && !own.is_empty() {
            let tid = own.swap_remove(rng.below(own.len() as u64) as usize);
            let step = transaction(
                &c,
                async {
                    let rows = c.query("DELETE FROM history WHERE tid = $1 RETURNING src, dst, amount", &[&tid]).await?;
                    if rows.len() != 1 {
                        return Ok(false);
                    }
                    let (src, dst, amount): (i64, i64, i64) = (rows[0].get(0), rows[0].get(1), rows[0].get(2));
                    Ok(c.execute("INSERT INTO archive VALUES ($1, $2, $3, $4)", &[&tid, &src, &dst, &amount]).await? == 1)
                },
                || {
                    outcomes.lock().expect("outcomes").archivals.in_doubt.insert(tid);
                },
            )
            .await;
            let o = &mut *outcomes.lock().expect("outcomes");
            if !o.archivals.settle(tid, step, &mut o.rolled_back) {
                return;
            }
            continue;
        }
        let tid = ((round as i64) << 40) | (w << 32) | i;
        let src = rng.below(ACCOUNTS as u64) as i64;
        let dst = (src + 1 + rng.below(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
        let amount = 1 + rng.below(50) as i64;
        let step = transaction(
            &c,
            async {
                let out = c.execute("UPDATE accounts SET balance = balance - $1 WHERE id = $2", &[&amount, &src]).await?;
                let inn = c.execute("UPDATE accounts SET balance = balance + $1 WHERE id = $2", &[&amount, &dst]).await?;
                if (out, inn) != (1, 1) {
                    return Ok(false);
                }
                Ok(c.execute("INSERT INTO history VALUES ($1, $2, $3, $4)", &[&tid, &src, &dst, &amount]).await? == 1)
            },
            || {
                outcomes.lock().expect("outcomes").transfers.in_doubt.insert(tid);
            },
        )
        .await;
        let committed = matches!(step, Step::Committed);
        let o = &mut *outcomes.lock().expect("outcomes");
        if !o.transfers.settle(tid, step, &mut o.rolled_back) {
            return;
        }
        if committed {
            own.push(tid);
        }
    }
}

/// The invariants over the rows of `history` and `archive` (tid, src, dst, amount) and
/// `accounts` (id, balance).
fn check(round: u64, accounts: &[Vec<String>], history: &[Vec<String>], archive: &[Vec<String>], o: &Outcomes) {
    let parse = |rows: &[Vec<String>]| -> Vec<Vec<i64>> { rows.iter().map(|r| r.iter().map(|v| v.parse().expect("integer")).collect()).collect() };
    let (accounts, history, archive) = (parse(accounts), parse(history), parse(archive));
    assert_eq!(accounts.len() as i64, ACCOUNTS, "round {round}: every account once");
    let mut seen: BTreeSet<i64> = BTreeSet::new();
    let mut balance: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|a| (a, OPENING_BALANCE)).collect();
    for r in history.iter().chain(&archive) {
        assert!(seen.insert(r[0]), "round {round}: transfer {:#x} recorded twice (history and archive, or twice in one)", r[0]);
        *balance.get_mut(&r[1]).expect("src") -= r[3];
        *balance.get_mut(&r[2]).expect("dst") += r[3];
    }
    for a in &accounts {
        assert_eq!(balance[&a[0]], a[1], "round {round}: account {} holds {}, its recorded transfers say {}: a transaction was half applied", a[0], a[1], balance[&a[0]]);
    }
    let archived: BTreeSet<i64> = archive.iter().map(|r| r[0]).collect();
    for (what, ledger, found) in [("transfers", &o.transfers, &seen), ("archivals", &o.archivals, &archived)] {
        let (lost, unexplained) = ledger.check(found);
        assert!(lost.is_empty(), "round {round}: acknowledged {what} lost: {lost:x?}");
        assert!(unexplained.is_empty(), "round {round}: {what} never committed are there: {unexplained:x?}");
    }
}

fn texts(rows: Vec<Vec<Option<String>>>) -> Vec<Vec<String>> {
    rows.into_iter().map(|r| r.into_iter().map(|v| v.expect("no NULLs")).collect()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_again_and_again_loses_no_acknowledged_transaction_and_applies_none_by_half() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let mut child = spawn_child_server("child_serve_until_killed", &db).await;
    {
        let admin = connect_port(child.port).await;
        admin.batch_execute("CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL)").await.expect("create");
        admin.batch_execute("CREATE TABLE history (tid bigint NOT NULL, src bigint NOT NULL, dst bigint NOT NULL, amount bigint NOT NULL) WITH (partitions = 2)").await.expect("create");
        admin.batch_execute("CREATE TABLE archive (tid bigint NOT NULL, src bigint NOT NULL, dst bigint NOT NULL, amount bigint NOT NULL)").await.expect("create");
        let values: Vec<String> = (0..ACCOUNTS).map(|a| format!("({a}, {OPENING_BALANCE})")).collect();
        admin.batch_execute(&format!("INSERT INTO accounts VALUES {}", values.join(", "))).await.expect("accounts");
    }
    let mut checkpoints = 0u64;
    for round in 0..ROUNDS {
        let port = child.port;
        let writers: Vec<_> = (0..WRITERS).map(|w| tokio::spawn(writer(port, round, w, outcomes.clone()))).collect();
        // CHECKPOINT now and then: rows move from the deltas into pages (and deleted rows
        // into the deleted rows file) while transactions commit.
        let checkpointer = tokio::spawn(async move {
            let Ok(c) = common::try_connect(port, "admin", "flashscan", None).await else { return 0u64 };
            let mut n = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(120)).await;
                match c.batch_execute("CHECKPOINT").await {
                    Ok(()) => n += 1,
                    Err(e) if answered(&e) => panic!("CHECKPOINT failed: {}", error_of(&e)),
                    Err(_) => return n,
                }
            }
        });
        // Kill at a moment that varies by round, once some work is acknowledged.
        let acked_before = outcomes.lock().expect("outcomes").transfers.acked.len();
        let started = Instant::now();
        while outcomes.lock().expect("outcomes").transfers.acked.len() < acked_before + 40 && started.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(150 + 170 * round)).await;
        // SAFETY: kill(2) on the child this test spawned.
        assert_eq!(unsafe { libc::kill(child.process.id() as i32, libc::SIGKILL) }, 0);
        let _ = child.process.wait();
        for w in writers {
            w.await.expect("writer ends");
        }
        checkpoints += checkpointer.await.expect("checkpointer ends");
        // The next server recovers the database; what it serves must hold.
        child = spawn_child_server("child_serve_until_killed", &db).await;
        let c = connect_port(child.port).await;
        let accounts = texts(simple_rows(&c, "SELECT id, balance FROM accounts").await);
        let history = texts(simple_rows(&c, "SELECT tid, src, dst, amount FROM history").await);
        let archive = texts(simple_rows(&c, "SELECT tid, src, dst, amount FROM archive").await);
        let mut o = outcomes.lock().expect("outcomes");
        check(round, &accounts, &history, &archive, &o);
        // Outcomes in doubt are settled by what the database holds.
        let ids = |rows: &[Vec<String>]| -> BTreeSet<i64> { rows.iter().map(|r| r[0].parse().expect("tid")).collect() };
        let archived = ids(&archive);
        o.transfers.resolve(&ids(&history).union(&archived).copied().collect());
        o.archivals.resolve(&archived);
    }
    let o = outcomes.lock().expect("outcomes");
    assert!(o.transfers.acked.len() >= 160 && !o.archivals.acked.is_empty(), "{} transfers, {} archivals acknowledged", o.transfers.acked.len(), o.archivals.acked.len());
    assert!(checkpoints >= ROUNDS, "{checkpoints} checkpoints ran");
    // SAFETY: kill(2) on the child this test spawned; then the database read without a server.
    assert_eq!(unsafe { libc::kill(child.process.id() as i32, libc::SIGKILL) }, 0);
    let _ = child.process.wait();
    let accounts = reopened(&db, "SELECT id, balance FROM accounts").await;
    let history = reopened(&db, "SELECT tid, src, dst, amount FROM history").await;
    let archive = reopened(&db, "SELECT tid, src, dst, amount FROM archive").await;
    check(ROUNDS, &accounts, &history, &archive, &o);
    eprintln!("{} transfers and {} archivals acknowledged over {ROUNDS} kills, {checkpoints} checkpoints, {} rolled back", o.transfers.acked.len(), o.archivals.acked.len(), o.rolled_back);
}
