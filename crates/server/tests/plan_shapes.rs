//! Statements planned by shape (`crates/server/src/plan_shapes.rs`) against statements
//! planned every time: one server, two connections, `SET flashscan.plan_shapes = off` on
//! the second; two tables loaded alike, each connection reading and changing its own by
//! the same statements with seeded random literals. Every answer — rows with their column
//! names, row counts, errors with their SQLSTATE — must be the same, and the tables must
//! stay alike. The oracle is the planner itself, run on each statement's own text.

use std::sync::atomic::Ordering::Relaxed;

use tokio_postgres::{Client, SimpleQueryMessage};

mod common;
use common::{error_of, init_db, serve, Served};

/// A small seeded generator (xorshift64*): the statements are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Mostly keys of the table, sometimes values at the edges of the integer types.
    fn int(&mut self) -> i64 {
        match self.below(12) {
            0 => [i64::MIN, i64::MAX, i32::MAX as i64, i32::MIN as i64, 2_147_483_648, 0][self.below(6) as usize],
            1 => -(self.below(300) as i64),
            _ => self.below(300) as i64,
        }
    }

    fn text(&mut self) -> String {
        match self.below(5) {
            0 => "it''s".to_string(),
            1 => String::new(),
            2 => "1999-12-31".to_string(),
            _ => format!("s{}", self.below(40)),
        }
    }
}

/// What a statement answered: column names and rows, or the row count, or the error.
async fn answer(client: &Client, sql: &str) -> String {
    match client.simple_query(sql).await {
        Err(e) => format!("error {}", error_of(&e)),
        Ok(messages) => {
            let mut out = Vec::new();
            for m in messages {
                match m {
                    SimpleQueryMessage::RowDescription(columns) => out.push(format!("columns {:?}", columns.iter().map(|c| c.name().to_string()).collect::<Vec<_>>())),
                    SimpleQueryMessage::Row(r) => out.push(format!("{:?}", (0..r.len()).map(|i| r.get(i).map(str::to_string)).collect::<Vec<_>>())),
                    SimpleQueryMessage::CommandComplete(n) => out.push(format!("complete {n}")),
                    _ => {}
                }
            }
            out.join("\n")
        }
    }
}

/// One statement of each shape, `{t}` the table, `{i}` an integer, `{s}` a string, `{p}` a
/// select-list position (1..3: 3 is out of range for two columns).
const SHAPES: &[&str] = &[
    "SELECT i, s FROM {t} WHERE k = {i}",
    "select i,s from {t} where k={i};",
    "SELECT k FROM {t} WHERE s = '{s}' ORDER BY k",
    "SELECT count(*) FROM {t} WHERE i > {i} AND i < {i}",
    "SELECT k, i + {i} FROM {t} WHERE k IN ({i}, {i}, {i}) ORDER BY k",
    "SELECT k FROM {t} WHERE k >= {i} ORDER BY k LIMIT {p}",
    "SELECT s || '{s}' AS joined FROM {t} WHERE k = {i}",
    "SELECT k, s FROM {t} WHERE k < 20 ORDER BY {p}",
    "SELECT count(*) FROM {t} WHERE k < {i} ORDER BY {p}",
    "SELECT k FROM {t} WHERE i = - {i} ORDER BY k",
    "SELECT k FROM {t} WHERE i -{i} > 0 ORDER BY k",
    "SELECT k FROM {t} WHERE d = '{s}' ORDER BY k",
    "SELECT CAST(i AS DECIMAL(10, 2)) FROM {t} WHERE k = {i}",
    "SELECT k, i * {i} FROM {t} WHERE k = {i}",
    "SELECT k FROM {t} WHERE s LIKE '{s}%' ORDER BY k",
    "UPDATE {t} SET i = i + {i} WHERE k = {i}",
    "UPDATE {t} SET s = '{s}' WHERE k IN ({i}, {i})",
    "UPDATE {t} SET i = -{i}, s = s || '{s}' WHERE i > {i} AND k < 40",
    "DELETE FROM {t} WHERE k = {i}",
    "INSERT INTO {t} VALUES ({i}, {i}, '{s}', DATE '1999-12-01')",
    "INSERT INTO {t} (k, s, d) VALUES ({i}, '{s}', CURRENT_DATE), ({i}, NULL, '{s}')",
    "SELECT k, i, s, d FROM {t} ORDER BY k",
];

fn statement(shape: &str, table: &str, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut rest = shape;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        let mark = &rest[at..at + 3];
        match mark {
            "{t}" => out.push_str(table),
            "{i}" => out.push_str(&rng.int().to_string()),
            "{s}" => out.push_str(&rng.text()),
            "{p}" => out.push_str(&(1 + rng.below(3)).to_string()),
            other => panic!("unknown mark {other}"),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    out
}

/// A server on a new database, with a client.
async fn served() -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = init_db(dir.path(), "db");
    serve((dir, db)).await
}

async fn load(client: &Client, table: &str) {
    client.simple_query(&format!("CREATE TABLE {table} (k bigint PRIMARY KEY, i int, s text, d date)")).await.expect("create");
    let rows: Vec<String> = (0..200).map(|k| format!("({k}, {}, 's{}', DATE '1999-12-{:02}')", (k * 37) % 101 - 50, k % 40, 1 + k % 31)).collect();
    client.simple_query(&format!("INSERT INTO {table} VALUES {}", rows.join(", "))).await.expect("insert");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_planned_by_shape_answer_as_statements_planned_each_time() {
    let Served { server, client: shaped, _guard, .. } = served().await;
    let planned = common::connect(&server).await;
    planned.simple_query("SET flashscan.plan_shapes = off").await.expect("set");
    load(&shaped, "t_shaped").await;
    load(&shaped, "t_planned").await;
    let counters = &server.shared.shapes;
    let mut rng = Rng(0x5eed_0f_5a_9e5);
    let mut differences = Vec::new();
    let rounds = 600;
    for n in 0..rounds {
        let shape = SHAPES[rng.below(SHAPES.len() as u64) as usize];
        // The same literals for both: one generator state, copied.
        let mut twin = Rng(rng.0);
        let a = statement(shape, "t_shaped", &mut rng);
        let b = statement(shape, "t_planned", &mut twin);
        let (got, want) = (answer(&shaped, &a).await, answer(&planned, &b).await);
        if got.replace("t_shaped", "T") != want.replace("t_planned", "T") {
            differences.push(format!("#{n} {a}\n  shaped: {got}\n  planned: {want}"));
        }
    }
    assert!(differences.is_empty(), "{} of {rounds} statements answered differently:\n{}", differences.len(), differences.iter().take(5).cloned().collect::<Vec<_>>().join("\n"));
    let final_shaped = answer(&shaped, "SELECT k, i, s, d FROM t_shaped ORDER BY k").await;
    let final_planned = answer(&planned, "SELECT k, i, s, d FROM t_planned ORDER BY k").await;
    assert_eq!(final_shaped, final_planned, "the tables changed alike");
    let (reused, learned, refused) = (counters.reused.load(Relaxed), counters.learned.load(Relaxed), counters.refused.load(Relaxed));
    eprintln!("shapes: {reused} statements reused a kept plan, {learned} shapes learned, {refused} refused");
    // Most statements took a kept plan; the positional ORDER BY shapes were refused (the
    // planner consumes their number), as were the shapes whose first literals repeated.
    assert!(reused > rounds / 2, "reused {reused}, learned {learned}, refused {refused}");
    assert!(refused >= 2, "reused {reused}, learned {learned}, refused {refused}");
    assert!(learned >= 10, "reused {reused}, learned {learned}, refused {refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_shape_is_dropped_by_ddl() {
    let Served { server, client, _guard, .. } = served().await;
    client.simple_query("CREATE TABLE t (k bigint, i int)").await.expect("create");
    client.simple_query("INSERT INTO t VALUES (1, 10), (2, 20)").await.expect("insert");
    for k in 1..=2 {
        assert_eq!(answer(&client, &format!("SELECT i FROM t WHERE k = {k}")).await, format!("columns [\"i\"]\n[Some(\"{}\")]\ncomplete 1", k * 10));
    }
    assert!(server.shared.shapes.reused.load(Relaxed) >= 1, "the second statement took the kept plan");
    // The same name, other columns: the kept plan's table is gone.
    client.simple_query("DROP TABLE t").await.expect("drop");
    client.simple_query("CREATE TABLE t (k bigint, i text)").await.expect("create again");
    client.simple_query("INSERT INTO t VALUES (1, 'one')").await.expect("insert again");
    assert_eq!(answer(&client, "SELECT i FROM t WHERE k = 1").await, "columns [\"i\"]\n[Some(\"one\")]\ncomplete 1");
    client.simple_query("DROP TABLE t").await.expect("drop again");
    assert!(answer(&client, "SELECT i FROM t WHERE k = 2").await.starts_with("error 42P01"), "a dropped table is not found");
}

/// A connection keeps `SHAPES_MAX` shapes; a statement of a shape beyond them is planned
/// once (not learned, which plans it twice), and the shapes kept are still used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shapes_beyond_the_bound_are_planned_once() {
    let Served { server, client, _guard, .. } = served().await;
    client.simple_query("CREATE TABLE t (k bigint, i int)").await.expect("create");
    client.simple_query("INSERT INTO t VALUES (1, 10), (2, 20)").await.expect("insert");
    let shapes = &server.shared.shapes;
    let max = flashscan_server::plan_shapes::SHAPES_MAX;
    for n in 0..max + 40 {
        assert_eq!(answer(&client, &format!("SELECT i AS a{n} FROM t WHERE k = 2")).await, format!("columns [\"a{n}\"]\n[Some(\"20\")]\ncomplete 1"));
    }
    let tried = shapes.learned.load(Relaxed) + shapes.refused.load(Relaxed);
    assert_eq!(tried, max as u64, "learned only while there was room");
    let reused = shapes.reused.load(Relaxed);
    assert_eq!(answer(&client, "SELECT i AS a0 FROM t WHERE k = 1").await, "columns [\"a0\"]\n[Some(\"10\")]\ncomplete 1");
    assert_eq!(shapes.reused.load(Relaxed), reused + 1, "a kept shape is still used");
}

/// A statement with parameters, parsed again at each execution (tokio-postgres prepares a
/// `&str` query every time): the kept plan with its `$1` is the one a fresh Parse makes,
/// answers and parameter types alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_parsed_each_time_take_the_kept_plan() {
    let Served { server, client: shaped, _guard, .. } = served().await;
    let planned = common::connect(&server).await;
    planned.simple_query("SET flashscan.plan_shapes = off").await.expect("set");
    load(&shaped, "t").await;
    let sql = "SELECT i, s, d FROM t WHERE k = $1 AND i > -100";
    let before = server.shared.shapes.reused.load(Relaxed);
    for k in [5i64, 7, 199, 200, -1, 5] {
        let rows = |r: Vec<tokio_postgres::Row>| r.iter().map(|r| format!("{:?} {:?} {:?}", r.get::<_, Option<i32>>(0), r.get::<_, Option<String>>(1), r.get::<_, Option<chrono::NaiveDate>>(2))).collect::<Vec<_>>();
        let got = rows(shaped.query(sql, &[&k]).await.expect("shaped"));
        let want = rows(planned.query(sql, &[&k]).await.expect("planned"));
        assert_eq!(got, want, "k = {k}");
        assert_eq!(got.len(), usize::from((0..200).contains(&k)), "k = {k}");
    }
    assert!(server.shared.shapes.reused.load(Relaxed) >= before + 4, "the Parses after the first took the kept plan");
}
