//! SQL indexes through `flashscan sql`'s session: PRIMARY KEY and UNIQUE enforced by every
//! statement, CREATE/DROP INDEX and ALTER TABLE … ADD/DROP CONSTRAINT, and index lookups
//! that answer exactly as a scan does — checked against a twin table without indexes that
//! takes the same statements (the scan is the oracle), through seeded random changes,
//! checkpoints and reopenings.

mod common;

use common::{fails, new_database, run, runtime, session, sorted, Rng};
use flashscan_write::CheckpointOptions;

/// The tests of this file one at a time: `cargo test` runs a file's tests on threads of one
/// process, which share the process's buffer pool, and one of them counts the pages the
/// pool installs (another test's lookups would install theirs meanwhile).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn plan(rt: &tokio::runtime::Runtime, s: &flashscan_sql::FlashscanSession, sql: &str) -> String {
    common::texts(&run(rt, s, &format!("EXPLAIN {sql}"))).into_iter().flatten().collect::<Vec<_>>().join("\n")
}

/// Whether `sql` is planned without DataFusion's optimizers (flashscan_sql::point_plan).
fn is_point_plan(rt: &tokio::runtime::Runtime, s: &flashscan_sql::FlashscanSession, sql: &str) -> bool {
    let state = s.context().state();
    let logical = rt.block_on(state.create_logical_plan(sql)).unwrap();
    rt.block_on(flashscan_sql::point_plan::plan(&state, &logical)).is_some()
}

#[test]
fn point_statements_an_index_answers_skip_the_optimizers() {
    let _one_at_a_time = one_at_a_time();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id INT PRIMARY KEY, g BIGINT, s TEXT)");
    run(&rt, &s, "CREATE TABLE m (id INT, g BIGINT, s TEXT)");
    run(&rt, &s, "INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'b'), (3, NULL, 'c')");
    run(&rt, &s, "INSERT INTO m SELECT * FROM t");
    for point in ["SELECT g FROM t WHERE id = 2", "SELECT id * 2, upper(s) AS u FROM t AS x WHERE x.id IN (1, 3) AND g IS NULL", "SELECT g, now() FROM t WHERE id = 2"] {
        assert!(is_point_plan(&rt, &s, point), "{point}");
    }
    for other in [
        "SELECT g FROM m WHERE id = 2",
        "SELECT g FROM t WHERE id + 0 = 2",
        "SELECT count(*) FROM t WHERE id = 2",
        "SELECT g FROM t WHERE id = (SELECT max(id) FROM m)",
        "SELECT g FROM t WHERE id = 2 ORDER BY g",
        "SELECT t.g FROM t, m WHERE t.id = 2 AND m.id = t.id",
    ] {
        assert!(!is_point_plan(&rt, &s, other), "{other}");
    }
    // Their answers, as the scans of the table without a key give them (an INT key
    // compared with a BIGINT and a DECIMAL literal: coerced as the optimizer would).
    for (q, want) in [
        ("SELECT g FROM {t} WHERE id = 2", vec![vec!["20".to_string()]]),
        ("SELECT s FROM {t} WHERE id = 2.0", vec![vec!["b".to_string()]]),
        ("SELECT id FROM {t} WHERE id = 2.5", Vec::<Vec<String>>::new()),
        // A BIGINT literal over the INT key: narrowed when it fits, else no row can match.
        ("SELECT id FROM {t} WHERE id = 4294967298", Vec::<Vec<String>>::new()),
        ("SELECT id FROM {t} WHERE 2 = id", vec![vec!["2".to_string()]]),
        ("SELECT coalesce(g, -1) FROM {t} WHERE id IN (3, 4)", vec![vec!["-1".to_string()]]),
    ] {
        assert_eq!(sorted(&rt, &s, &q.replace("{t}", "t")), want, "{q}");
        assert_eq!(sorted(&rt, &s, &q.replace("{t}", "m")), want, "{q}");
    }
    // UPDATE and DELETE by key read their rows the same way.
    run(&rt, &s, "UPDATE t SET g = g + 1 WHERE id = 1");
    run(&rt, &s, "DELETE FROM t WHERE id = 3");
    assert_eq!(sorted(&rt, &s, "SELECT id, g FROM t"), vec![vec!["1".to_string(), "11".to_string()], vec!["2".to_string(), "20".to_string()]]);
}

#[test]
fn keys_are_enforced_by_every_statement() {
    let _one_at_a_time = one_at_a_time();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT PRIMARY KEY, code TEXT UNIQUE, v BIGINT) WITH (partitions = 2)");
    run(&rt, &s, "INSERT INTO t VALUES (1, 'a', 10), (2, NULL, 20), (3, NULL, 30)");
    let count = |s: &flashscan_sql::FlashscanSession| sorted(&rt, s, "SELECT count(*) FROM t")[0][0].clone();

    // Every way to repeat a key fails, naming the constraint and the key, writing nothing.
    for (sql, constraint) in [
        ("INSERT INTO t VALUES (1, 'z', 0)", "t_pkey"),
        ("INSERT INTO t VALUES (4, 'q', 0), (4, 'r', 0)", "t_pkey"),
        ("INSERT INTO t VALUES (5, 'a', 0)", "t_code_key"),
        ("UPDATE t SET id = 1 WHERE id = 2", "t_pkey"),
        ("UPDATE t SET code = 'a' WHERE id = 3", "t_code_key"),
    ] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains("duplicate key value violates unique constraint") && e.contains(constraint) && e.contains("Key ("), "{sql}: {e}");
        assert_eq!(count(&s), "3", "{sql} wrote nothing");
    }
    // A primary key is NOT NULL; UNIQUE lets any number of NULLs in.
    assert!(fails(&rt, &s, "INSERT INTO t VALUES (NULL, 'n', 0)").to_lowercase().contains("null"));
    run(&rt, &s, "INSERT INTO t VALUES (6, NULL, 60)");
    // An UPDATE that keeps the key, or moves every key at once, passes.
    run(&rt, &s, "UPDATE t SET v = v + 1 WHERE id = 1");
    run(&rt, &s, "UPDATE t SET id = id + 100");
    assert_eq!(sorted(&rt, &s, "SELECT id FROM t"), vec![vec!["101"], vec!["102"], vec!["103"], vec!["106"]].into_iter().map(|r| r.into_iter().map(String::from).collect::<Vec<_>>()).collect::<Vec<_>>());
    // A key deleted earlier in the same transaction can be inserted again; a key
    // inserted earlier in it cannot.
    run(&rt, &s, "BEGIN");
    run(&rt, &s, "DELETE FROM t WHERE id = 101");
    run(&rt, &s, "INSERT INTO t VALUES (101, 'a', 1)");
    assert!(fails(&rt, &s, "INSERT INTO t VALUES (101, 'b', 2)").contains("t_pkey"));
    run(&rt, &s, "ROLLBACK");
    run(&rt, &s, "BEGIN");
    run(&rt, &s, "INSERT INTO t VALUES (200, 'x', 1)");
    assert!(fails(&rt, &s, "INSERT INTO t VALUES (200, 'y', 2)").contains("t_pkey"));
    run(&rt, &s, "ROLLBACK");
    // After a checkpoint and a reopening (the index built again from the table).
    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    assert!(fails(&rt, &s, "INSERT INTO t VALUES (102, 'k', 0)").contains("t_pkey"));
    drop(s);
    let s = session(&db);
    assert!(fails(&rt, &s, "INSERT INTO t VALUES (103, 'k', 0)").contains("t_pkey"));
    assert!(fails(&rt, &s, "INSERT INTO t VALUES (7, 'a', 0)").contains("t_code_key"));
    run(&rt, &s, "INSERT INTO t VALUES (7, 'k', 0)");
    assert_eq!(count(&s), "5");
}

#[test]
fn index_ddl_and_its_refusals() {
    let _one_at_a_time = one_at_a_time();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE a (id BIGINT NOT NULL, g INT, name TEXT)");
    run(&rt, &s, "INSERT INTO a VALUES (1, 1, 'x'), (2, 1, 'y'), (3, 2, NULL)");
    // A unique index over repeated keys is refused, naming the key.
    let e = fails(&rt, &s, "CREATE UNIQUE INDEX a_g ON a (g)");
    assert!(e.contains("could not create unique index") && e.contains("(g)=(1)"), "{e}");
    run(&rt, &s, "CREATE INDEX a_g ON a (g DESC)");
    run(&rt, &s, "CREATE INDEX IF NOT EXISTS a_g ON a (name)");
    assert!(fails(&rt, &s, "CREATE INDEX a_g ON a (name)").contains("already exists"));
    run(&rt, &s, "CREATE INDEX ON a (name, g)");
    assert!(plan(&rt, &s, "SELECT * FROM a WHERE name = 'x'").contains("index=a_name_g_idx"));
    run(&rt, &s, "ALTER TABLE a ADD PRIMARY KEY (id)");
    assert!(fails(&rt, &s, "INSERT INTO a VALUES (1, 5, 'dup')").contains("a_pkey"));
    assert!(fails(&rt, &s, "ALTER TABLE a ADD PRIMARY KEY (g)").contains("multiple primary keys"));
    assert!(fails(&rt, &s, "ALTER TABLE a ADD CONSTRAINT a_name_key UNIQUE (g)").contains("duplicated"));
    // An index behind a constraint goes with the constraint, as in PostgreSQL.
    assert!(fails(&rt, &s, "DROP INDEX a_pkey").contains("DROP CONSTRAINT"));
    run(&rt, &s, "ALTER TABLE a DROP CONSTRAINT a_pkey");
    run(&rt, &s, "INSERT INTO a VALUES (1, 5, 'dup')");
    run(&rt, &s, "DROP INDEX a_g");
    run(&rt, &s, "DROP INDEX IF EXISTS a_g");
    assert!(fails(&rt, &s, "DROP INDEX a_g").contains("does not exist"));
    // What would not be honoured is refused, by name.
    for (sql, what) in [
        ("CREATE INDEX e ON a ((g + 1))", "expression"),
        ("CREATE INDEX p ON a (g) WHERE g > 1", "partial"),
        ("CREATE INDEX h ON a USING hash (g)", "USING"),
        ("CREATE INDEX i ON a (g) INCLUDE (name)", "INCLUDE"),
        ("CREATE TABLE f (id BIGINT REFERENCES a (id))", "REFERENCES"),
        ("CREATE TABLE c (id BIGINT, CHECK (id > 0))", "CHECK"),
        ("ALTER TABLE a ADD COLUMN z INT, ADD COLUMN y INT", "ALTER TABLE"),
        ("ALTER TABLE a ADD PRIMARY KEY (g)", "NULL"),
    ] {
        let e = fails(&rt, &s, sql);
        assert!(e.contains(what), "{sql}: {e}");
    }
    // DROP TABLE takes its indexes along; a new table may reuse their names.
    run(&rt, &s, "DROP TABLE a");
    run(&rt, &s, "CREATE TABLE a (id BIGINT PRIMARY KEY)");
    run(&rt, &s, "INSERT INTO a VALUES (1)");
    // TRUNCATE keeps the key and empties it.
    run(&rt, &s, "TRUNCATE a");
    run(&rt, &s, "INSERT INTO a VALUES (1)");
    assert!(fails(&rt, &s, "INSERT INTO a VALUES (1)").contains("a_pkey"));
}


/// A query over `{t}` whose filter fixes leading columns of one of t's indexes.
fn lookup_query(rng: &mut Rng, next_id: i64) -> String {
    let word = |r: &mut Rng| format!("'w{}'", r.below(6));
    match rng.below(8) {
        0 => format!("SELECT id, g, s FROM {{t}} WHERE id = {}", rng.below(next_id as u64 + 2)),
        1 => format!("SELECT id, g, s FROM {{t}} WHERE id IN ({}, {}, {})", rng.below(next_id as u64 + 2), rng.below(next_id as u64 + 2), rng.below(next_id as u64 + 2)),
        2 => format!("SELECT id, s FROM {{t}} WHERE g = {}", rng.below(8)),
        3 => format!("SELECT id, g FROM {{t}} WHERE s = {} AND g = {}", word(rng), rng.below(8)),
        4 => format!("SELECT id, g FROM {{t}} WHERE s = {}", word(rng)),
        5 => format!("SELECT count(*), sum(g) FROM {{t}} WHERE g IN ({}, {}) AND id > {}", rng.below(8), rng.below(8), rng.below(next_id as u64 + 1)),
        // Expressions, an alias, a key compared with another type, a second condition.
        6 => format!("SELECT x.id + 1 AS next, coalesce(x.g, -1) AS g, length(x.s) FROM {{t}} AS x WHERE x.id = {}.0 OR x.id = {}", rng.below(next_id as u64 + 2), rng.below(next_id as u64 + 2)),
        _ => format!("SELECT id, s FROM {{t}} WHERE g = {} AND s <> {} AND id > {}", rng.below(8), word(rng), rng.below(next_id as u64 + 1)),
    }
}

/// A query over `{t}` whose filter puts a range on an index's column after its fixed ones.
fn range_query(rng: &mut Rng, next_id: i64) -> String {
    let id = |r: &mut Rng| r.below(next_id as u64 + 2) as i64;
    let (a, b) = (id(rng), id(rng));
    match rng.below(9) {
        0 => format!("SELECT id, g, s FROM {{t}} WHERE id > {a}"),
        1 => format!("SELECT id, s FROM {{t}} WHERE id BETWEEN {} AND {}", a.min(b), a.max(b)),
        2 => format!("SELECT id FROM {{t}} WHERE id < {a} AND id >= {b}"),
        3 => format!("SELECT id, g FROM {{t}} WHERE s = 'w{}' AND g > {}", rng.below(6), rng.below(8)),
        4 => format!("SELECT id, s FROM {{t}} WHERE s >= 'w{}' AND s < 'w{}'", rng.below(6), rng.below(7)),
        5 => format!("SELECT id, g FROM {{t}} WHERE g <= {}", rng.below(8)),
        // A bound that is not a value of the column's type: left to the filter.
        6 => format!("SELECT id FROM {{t}} WHERE id > {a}.5 AND id <= {}", a + 20),
        7 => format!("SELECT count(*), min(id), max(id) FROM {{t}} WHERE s = 'w{}' AND g BETWEEN {} AND {}", rng.below(6), rng.below(4), rng.below(8)),
        _ => format!("SELECT id, s FROM {{t}} WHERE s > 'w{}'", rng.below(6)),
    }
}

/// A query over `{t}` ordered by the first column of one of t's indexes, with a LIMIT
/// (answers that are the same whatever row a tie gives: the ordered values, or a key).
fn order_query(rng: &mut Rng, next_id: i64) -> String {
    let n = rng.below(12) + 1;
    let id = rng.below(next_id as u64 + 2);
    match rng.below(10) {
        0 => format!("SELECT id, s FROM {{t}} ORDER BY id LIMIT {n}"),
        1 => format!("SELECT id FROM {{t}} ORDER BY id DESC LIMIT {n}"),
        2 => format!("SELECT g FROM {{t}} ORDER BY g LIMIT {n}"),
        3 => format!("SELECT g FROM {{t}} ORDER BY g DESC LIMIT {n}"),
        4 => format!("SELECT g FROM {{t}} ORDER BY g NULLS FIRST LIMIT {n}"),
        5 => format!("SELECT g FROM {{t}} ORDER BY g DESC NULLS LAST LIMIT {n}"),
        6 => format!("SELECT g FROM {{t}} WHERE g > {} ORDER BY g LIMIT {n}", rng.below(8)),
        7 => format!("SELECT id + 0 AS i, g FROM {{t}} WHERE id < {id} ORDER BY id DESC LIMIT {n}"),
        8 => format!("SELECT s FROM {{t}} ORDER BY s LIMIT {n}"),
        _ => format!("SELECT id FROM {{t}} ORDER BY id LIMIT {n} OFFSET {}", rng.below(5)),
    }
}

/// A key lookup reads its table page from the buffer pool once it is there (no reader
/// opened per lookup), and a table dropped and made again under the same name is never
/// answered from the old one's pages.
#[test]
fn key_lookups_read_table_pages_kept_in_the_buffer_pool() {
    let _one_at_a_time = one_at_a_time();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = new_database(dir.path());
    let s = session(&db);
    let checkpoint = |s: &flashscan_sql::FlashscanSession| {
        s.write_path().become_writer("indexes test").unwrap();
        s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
    };
    run(&rt, &s, "CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT)");
    let rows: Vec<String> = (1..=500).map(|i| format!("({i}, 'v{i}')")).collect();
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", rows.join(", ")));
    checkpoint(&s);
    let want = |v: &str| vec![vec![v.to_string()]];
    assert_eq!(sorted(&rt, &s, "SELECT v FROM t WHERE id = 7"), want("v7"));
    let pool = flashscan_buffer::BufferPool::global();
    let before = pool.snapshot();
    for _ in 0..3 {
        assert_eq!(sorted(&rt, &s, "SELECT v FROM t WHERE id = 7"), want("v7"));
    }
    let after = pool.snapshot();
    assert!(after.hits_count >= before.hits_count + 3, "hits {} -> {}", before.hits_count, after.hits_count);
    assert_eq!(after.pages_installed_count, before.pages_installed_count, "the page was read again");
    // The same name, the same file names, other rows.
    run(&rt, &s, "DROP TABLE t");
    run(&rt, &s, "CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT)");
    let rows: Vec<String> = (1..=500).map(|i| format!("({i}, 'new{i}')")).collect();
    run(&rt, &s, &format!("INSERT INTO t VALUES {}", rows.join(", ")));
    checkpoint(&s);
    assert_eq!(sorted(&rt, &s, "SELECT v FROM t WHERE id = 7"), want("new7"));
    assert_eq!(sorted(&rt, &s, "SELECT v FROM t WHERE id = 500"), want("new500"));
}

#[test]
fn index_lookups_answer_as_the_scan_does() {
    let _one_at_a_time = one_at_a_time();
    for seed in [0x5eed_0001u64, 0x5eed_0002] {
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        let db = new_database(dir.path());
        let mut s = session(&db);
        for t in ["t", "m"] {
            let key = if t == "t" { " PRIMARY KEY" } else { " NOT NULL" };
            run(&rt, &s, &format!("CREATE TABLE {t} (id BIGINT{key}, g BIGINT, s TEXT) WITH (partitions = 2)"));
        }
        run(&rt, &s, "CREATE INDEX t_g ON t (g)");
        run(&rt, &s, "CREATE INDEX t_sg ON t (s, g)");
        let mut rng = Rng(seed);
        let mut next_id = 0i64;
        let mut used_index = 0;
        let mut ranges_by_index = 0;
        let mut orders_by_index = 0;
        let mut point_plans = 0;
        for step in 0..60 {
            let both = |sql: String, s: &flashscan_sql::FlashscanSession| {
                for t in ["t", "m"] {
                    run(&rt, s, &sql.replace("{t}", t));
                }
            };
            match rng.below(10) {
                0..=3 => {
                    let rows: Vec<String> = (0..rng.below(20) + 1)
                        .map(|_| {
                            next_id += 1;
                            let g = if rng.below(10) == 0 { "NULL".to_string() } else { rng.below(8).to_string() };
                            format!("({next_id}, {g}, 'w{}')", rng.below(6))
                        })
                        .collect();
                    both(format!("INSERT INTO {{t}} VALUES {}", rows.join(", ")), &s);
                }
                4 => both(format!("DELETE FROM {{t}} WHERE g = {}", rng.below(8)), &s),
                5 => both(format!("UPDATE {{t}} SET g = g + 1, s = 'w{}' WHERE id % 7 = {}", rng.below(6), rng.below(7)), &s),
                6 => both(format!("UPDATE {{t}} SET s = 'w{}' WHERE id = {}", rng.below(6), rng.below(next_id as u64 + 1)), &s),
                7 => {
                    // A reopened session becomes the writer at its first write; a checkpoint
                    // asks for it first.
                    s.write_path().become_writer("indexes test").unwrap();
                    s.write_path().checkpoint(&CheckpointOptions::default()).unwrap();
                }
                8 => {
                    drop(s);
                    s = session(&db);
                }
                // Changes that find their rows through an index range.
                _ => {
                    let a = rng.below(next_id as u64 + 1);
                    both(format!("UPDATE {{t}} SET s = 'w{}' WHERE id BETWEEN {a} AND {}", rng.below(6), a + 4), &s);
                    both(format!("DELETE FROM {{t}} WHERE s = 'w{}' AND g > {}", rng.below(6), rng.below(8) + 4), &s);
                }
            }
            for _ in 0..6 {
                let q = lookup_query(&mut rng, next_id);
                let (with, without) = (sorted(&rt, &s, &q.replace("{t}", "t")), sorted(&rt, &s, &q.replace("{t}", "m")));
                assert_eq!(with, without, "seed {seed:#x} step {step}: {q}");
                if plan(&rt, &s, &q.replace("{t}", "t")).contains("IndexLookupExec") {
                    used_index += 1;
                }
                if is_point_plan(&rt, &s, &q.replace("{t}", "t")) {
                    point_plans += 1;
                }
            }
            for _ in 0..3 {
                let q = range_query(&mut rng, next_id);
                let (with, without) = (sorted(&rt, &s, &q.replace("{t}", "t")), sorted(&rt, &s, &q.replace("{t}", "m")));
                assert_eq!(with, without, "seed {seed:#x} step {step}: {q}");
                if plan(&rt, &s, &q.replace("{t}", "t")).contains("range) keys=") {
                    ranges_by_index += 1;
                }
            }
            for _ in 0..3 {
                let q = order_query(&mut rng, next_id);
                let (with, without) = (sorted(&rt, &s, &q.replace("{t}", "t")), sorted(&rt, &s, &q.replace("{t}", "m")));
                assert_eq!(with, without, "seed {seed:#x} step {step}: {q}");
                if plan(&rt, &s, &q.replace("{t}", "t")).contains(" rows) keys=") {
                    orders_by_index += 1;
                }
            }
        }
        assert!(ranges_by_index > 120, "seed {seed:#x}: an index range answered {ranges_by_index} of 180 range queries");
        assert!(orders_by_index > 120, "seed {seed:#x}: the index's order answered {orders_by_index} of 180 ORDER BY … LIMIT queries");
        assert!(used_index > 200, "seed {seed:#x}: the index answered {used_index} of 360 queries");
        assert!(point_plans > 150, "seed {seed:#x}: {point_plans} of 360 queries were planned as point statements");
        // With lookups off the same answers come from scans.
        run(&rt, &s, "SET flashscan.index_lookups = false");
        assert!(!plan(&rt, &s, "SELECT * FROM t WHERE id = 1").contains("IndexLookupExec"));
    }
}

/// A range that would read much of the table is left to the scan; a narrow one is a lookup.
#[test]
fn wide_ranges_are_scanned_and_narrow_ones_looked_up() {
    let _one_at_a_time = one_at_a_time();
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = new_database(dir.path());
    let s = session(&db);
    run(&rt, &s, "CREATE TABLE t (id BIGINT PRIMARY KEY, day DATE NOT NULL, v TEXT)");
    run(&rt, &s, "CREATE INDEX t_day ON t (day)");
    for chunk in 0..4 {
        let rows: Vec<String> = (chunk * 5_000..(chunk + 1) * 5_000).map(|i| format!("({i}, DATE '2026-01-01' + INTERVAL '{} days', 'v{i}')", i / 100)).collect();
        run(&rt, &s, &format!("INSERT INTO t VALUES {}", rows.join(", ")));
    }
    let narrow = "SELECT count(*), min(v) FROM t WHERE id BETWEEN 100 AND 199";
    assert!(plan(&rt, &s, narrow).contains("index=t_pkey (id range)"), "{}", plan(&rt, &s, narrow));
    assert_eq!(sorted(&rt, &s, narrow), vec![vec!["100".to_string(), "v100".into()]]);
    let by_day = "SELECT count(*) FROM t WHERE day >= DATE '2026-02-01' AND day < DATE '2026-02-03'";
    assert!(plan(&rt, &s, by_day).contains("index=t_day (day range)"), "{}", plan(&rt, &s, by_day));
    assert_eq!(sorted(&rt, &s, by_day), vec![vec!["200".to_string()]]);
    // 15,000 of 20,000 rows: the scan reads them.
    let wide = "SELECT count(*) FROM t WHERE id >= 5000";
    assert!(!plan(&rt, &s, wide).contains("IndexLookupExec"), "{}", plan(&rt, &s, wide));
    assert_eq!(sorted(&rt, &s, wide), vec![vec!["15000".to_string()]]);
    // The newest rows by the index's order; the transaction's own rows are seen (the
    // index holds committed rows only, so the scan answers then).
    let newest = "SELECT id, v FROM t ORDER BY id DESC LIMIT 3";
    assert!(plan(&rt, &s, newest).contains("index=t_pkey (id descending, first 3 rows)"), "{}", plan(&rt, &s, newest));
    assert_eq!(common::texts(&run(&rt, &s, newest)), vec![vec!["19999".to_string(), "v19999".into()], vec!["19998".into(), "v19998".into()], vec!["19997".into(), "v19997".into()]]);
    run(&rt, &s, "BEGIN");
    run(&rt, &s, "INSERT INTO t VALUES (50000, DATE '2027-01-01', 'mine')");
    assert_eq!(common::texts(&run(&rt, &s, "SELECT id, v FROM t ORDER BY id DESC LIMIT 1")), vec![vec!["50000".to_string(), "mine".into()]]);
    run(&rt, &s, "ROLLBACK");
    assert_eq!(common::texts(&run(&rt, &s, "SELECT id FROM t ORDER BY id DESC LIMIT 1")), vec![vec!["19999".to_string()]]);
    // Rows deleted from the front are skipped, the next ones found.
    run(&rt, &s, "DELETE FROM t WHERE id < 150");
    assert_eq!(common::texts(&run(&rt, &s, "SELECT id FROM t ORDER BY id LIMIT 2")), vec![vec!["150".to_string()], vec!["151".into()]]);
    let by_day = "SELECT day FROM t ORDER BY day DESC LIMIT 150";
    assert!(plan(&rt, &s, by_day).contains("index=t_day (day descending, first 150 rows)"), "{}", plan(&rt, &s, by_day));
    let days = common::texts(&run(&rt, &s, by_day));
    assert_eq!((days.len(), days[0][0].as_str(), days[149][0].as_str()), (150, "2026-07-19", "2026-07-18"));
}
