//! A cluster on loopback: three workers in this process (each on its own runtime and port,
//! each over its own small TPC-H database holding its hosts' partitions), a coordinator, and
//! a single-machine database of the same rows as the oracle.
//!
//! - the 22 TPC-H queries give the single machine's answers;
//! - every scan task ran on the host that owns its partitions, and the bytes the hosts read
//!   (their own counters) add up to what the single machine read;
//! - `key = constant` reads on one host only;
//! - a host refuses a partition it does not own; a dead or dying worker fails the query
//!   within 30 s, naming the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion_distributed::{Worker, WorkerQueryContext};
use flashscan_cluster::scan::ScanRequest;
use flashscan_cluster::{ClusterFile, ClusterOptions, ClusterSession, HostState};
use flashscan_sql::{FlashscanSession, ReadOptions, SessionOptions};
use flashscan_storage::load::{load_table, tpch::tpch_source, LoadOptions};
use flashscan_storage::HostSlot;

const SCALE_FACTOR: f64 = 0.01;
const TABLES: [&str; 8] = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];
/// Four partitions over three hosts: host 0 holds two (0 and 3), the others one each.
const PARTITION_COUNT: u32 = 4;
const HOST_COUNT: u32 = 3;
const TARGET_PARTITIONS: usize = 2;
/// What issue 17 promises for a dead host.
const DEAD_HOST_ERROR_WITHIN: Duration = Duration::from_secs(30);

fn load(dir: &Path, host: Option<HostSlot>) {
    for table in TABLES {
        let source = tpch_source(table, SCALE_FACTOR, 2).unwrap();
        // One loader thread: each encoder closes its partial pages at the end, so with two
        // the page boundaries (and the bytes a scan reads) would depend on which thread got
        // which batch; with one, every partition's pages are the same on a host and on the
        // single machine, and the bytes read can be compared exactly.
        let options = LoadOptions { partition_count: PARTITION_COUNT, threads: 1, host, ..LoadOptions::default() };
        load_table(dir, source, &options).unwrap_or_else(|e| panic!("load {table} host {host:?}: {e}"));
    }
}

/// A worker on its own runtime: `kill` drops the runtime, closing every socket it had,
/// as a process that dies does.
struct RunningWorker {
    address: String,
    host: Arc<HostState>,
    kill: std::sync::mpsc::Sender<()>,
}

fn start_worker(db: &Path, make: impl FnOnce(Arc<HostState>) -> Worker + Send + 'static) -> RunningWorker {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let host = Arc::new(HostState::open(db, &address, ReadOptions::default()).unwrap());
    let (kill, killed) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
    let h = host.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = flashscan_cluster::worker::serve_worker(listener, make(h), std::future::pending()).await;
        });
        let _ = ready_tx.send(());
        let _ = killed.recv();
        runtime.shutdown_background();
    });
    ready.recv().unwrap();
    RunningWorker { address, host, kill }
}

fn normal_worker(db: &Path) -> RunningWorker {
    start_worker(db, flashscan_cluster::worker::host_worker)
}

struct Cluster {
    _dir: tempfile::TempDir,
    single: PathBuf,
    hosts: Vec<PathBuf>,
    workers: Vec<RunningWorker>,
    file: PathBuf,
}

fn write_cluster_file(dir: &Path, name: &str, hosts: &[(String, PathBuf)]) -> PathBuf {
    let file = ClusterFile::make(hosts).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    path
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single");
    load(&single, None);
    let hosts: Vec<PathBuf> = (0..HOST_COUNT)
        .map(|i| {
            let db = dir.path().join(format!("host{i}"));
            load(&db, Some(HostSlot::new(i, HOST_COUNT).unwrap()));
            db
        })
        .collect();
    let workers: Vec<RunningWorker> = hosts.iter().map(|db| normal_worker(db)).collect();
    let list: Vec<(String, PathBuf)> = workers.iter().zip(&hosts).map(|(w, db)| (w.address.clone(), db.clone())).collect();
    let file = write_cluster_file(dir.path(), "cluster.json", &list);
    Cluster { _dir: dir, single, hosts, workers, file }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn query_text(n: usize) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../sql/tests/tpch/q{n:02}.sql"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Rows as text cell by cell, floats apart to compare with a tolerance; sorted, so ties in
/// ORDER BY and unordered answers compare equal.
fn rows(batches: &[RecordBatch]) -> Vec<Vec<(String, Option<f64>)>> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let columns: Vec<Vec<(String, Option<f64>)>> = b.columns().iter().map(|a| column(a, &options)).collect();
        for r in 0..b.num_rows() {
            out.push(columns.iter().map(|c| c[r].clone()).collect::<Vec<_>>());
        }
    }
    out.sort_by(|a, b| key(a).cmp(&key(b)));
    out
}

fn column(array: &ArrayRef, options: &FormatOptions) -> Vec<(String, Option<f64>)> {
    if matches!(array.data_type(), DataType::Float32 | DataType::Float64) {
        let a = cast(array, &DataType::Float64).unwrap();
        let a = a.as_any().downcast_ref::<arrow::array::Float64Array>().unwrap();
        return (0..a.len()).map(|i| if a.is_null(i) { ("NULL".into(), None) } else { (String::new(), Some(a.value(i))) }).collect();
    }
    let f = ArrayFormatter::try_new(array.as_ref(), options).unwrap();
    (0..array.len()).map(|i| (f.value(i).to_string(), None)).collect()
}

fn key(row: &[(String, Option<f64>)]) -> String {
    row.iter().map(|(s, f)| f.map(|f| format!("{f:.4}")).unwrap_or_else(|| s.clone())).collect::<Vec<_>>().join("\u{1}")
}

fn same_rows(a: &[Vec<(String, Option<f64>)>], b: &[Vec<(String, Option<f64>)>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(c, d)| match (c.1, d.1) {
                    (Some(p), Some(q)) => (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
                    _ => c == d,
                })
        })
}

fn owners_ok(partitions: &str, host: u32) -> bool {
    partitions.split(',').filter(|p| !p.is_empty()).all(|p| p.parse::<u32>().is_ok_and(|p| HostSlot::owner_of(p, HOST_COUNT) == host))
}

#[test]
fn tpch_on_three_hosts_gives_the_single_machine_answers_and_reads_where_the_data_is() {
    let c = cluster();
    let rt = runtime();
    let single = FlashscanSession::open(&c.single, SessionOptions { target_partitions: Some(TARGET_PARTITIONS), ..SessionOptions::default() }).unwrap();
    let session = ClusterSession::open(&c.file, ClusterOptions { target_partitions: Some(TARGET_PARTITIONS) }).unwrap();
    let mut mismatched_bytes = Vec::new();
    let mut stopped_early = Vec::new();
    for n in 1..=22 {
        let sql = query_text(n);
        let expected = rt.block_on(single.run(&sql)).unwrap_or_else(|e| panic!("q{n} single machine: {e}"));
        let expected = expected.last().unwrap();
        for w in &c.workers {
            w.host.scan_log().take();
        }
        let got = rt.block_on(session.run(&sql)).unwrap_or_else(|e| panic!("q{n} cluster: {e}"));
        let got = got.last().unwrap();
        let (e_rows, g_rows) = (rows(&expected.batches), rows(&got.output.batches));
        assert!(same_rows(&e_rows, &g_rows), "q{n}: cluster answer differs\nsingle: {e_rows:?}\ncluster: {g_rows:?}");
        assert!(!e_rows.is_empty(), "q{n} returns rows");
        // Locality: every task read only partitions its host owns.
        assert!(!got.tasks.is_empty(), "q{n}: no scan task figures");
        for t in &got.tasks {
            assert!(owners_ok(&t.partitions, t.host), "q{n}: task on host {} read partitions {}", t.host, t.partitions);
        }
        // Bytes: the hosts' own counters, the coordinator's per-task figures and the single
        // machine agree.
        let per_host: Vec<u64> = c.workers.iter().map(|w| w.host.scan_log().take().values().map(|t| t.figures.bytes_read).sum()).collect();
        let hosts_total: u64 = per_host.iter().sum();
        let tasks_total: u64 = got.tasks.iter().map(|t| t.bytes_read).sum();
        // The per-task figures are complete: a host waits for its stopped units' figures
        // before it ships a task's metrics.
        assert_eq!(hosts_total, tasks_total, "q{n}: hosts' counters {per_host:?} vs per-task figures");
        // Per table, the hosts read what the single machine read. Except where a scan was
        // stopped early (a hash join whose build side is empty drops its probe side after
        // a batch or two: q17 at this scale, where no part matches): how far it got depends
        // on timing, on one machine as on the hosts, and the plans differ (on the cluster a
        // scan that feeds a shuffle runs to its end). Such a table's figure is not a whole
        // number of full scans on at least one side; both stay within its scans' full size.
        let mut cluster_by_table: BTreeMap<String, (u64, std::collections::BTreeSet<u64>)> = BTreeMap::new();
        for t in &got.tasks {
            let e = cluster_by_table.entry(t.table.clone()).or_default();
            e.0 += t.bytes_read;
            e.1.insert(t.scan);
        }
        for (table, single) in &expected.scans {
            let (on_hosts, scans) = cluster_by_table.get(table).map(|(b, s)| (*b, s.len() as u64)).unwrap_or((0, 0));
            let single_bytes = single.figures.bytes_read;
            if on_hosts == single_bytes {
                continue;
            }
            let whole = |bytes: u64| single.table_bytes > 0 && bytes % single.table_bytes == 0;
            let within = |bytes: u64| bytes <= scans * single.table_bytes;
            if (!whole(on_hosts) || !whole(single_bytes)) && within(on_hosts) && within(single_bytes) {
                stopped_early.push((n, table.clone(), single_bytes, on_hosts, single.table_bytes));
                continue;
            }
            mismatched_bytes.push((n, table.clone(), single_bytes, on_hosts, single.table_bytes));
        }
        for table in cluster_by_table.keys() {
            assert!(expected.scans.contains_key(table), "q{n}: the cluster scanned {table}, the single machine did not");
        }
    }
    eprintln!("stopped scans (query, table, single machine, hosts, table bytes): {stopped_early:?}");
    // Only q17 stops a scan early at this scale; anywhere else a difference is a bug.
    assert!(stopped_early.iter().all(|s| s.0 == 17), "scans stopped early outside q17: {stopped_early:?}");
    assert!(mismatched_bytes.is_empty(), "bytes read (query, table, single machine, sum over hosts, table bytes): {mismatched_bytes:?}");
}

#[test]
fn key_equal_constant_reads_on_one_host_only() {
    let c = cluster();
    let rt = runtime();
    let session = ClusterSession::open(&c.file, ClusterOptions { target_partitions: Some(TARGET_PARTITIONS) }).unwrap();
    let single = FlashscanSession::open(&c.single, SessionOptions { target_partitions: Some(TARGET_PARTITIONS), ..SessionOptions::default() }).unwrap();
    for w in &c.workers {
        w.host.scan_log().take();
    }
    let sql = "SELECT o_orderkey, o_totalprice FROM orders WHERE o_orderkey = 4";
    let got = rt.block_on(session.run(sql)).unwrap();
    let expected = rt.block_on(single.run(sql)).unwrap();
    assert_eq!(rows(&got[0].output.batches), rows(&expected[0].batches));
    assert_eq!(got[0].output.row_count(), 1);
    let read: Vec<u64> = c.workers.iter().map(|w| w.host.scan_log().take().values().map(|t| t.figures.bytes_read).sum()).collect();
    assert_eq!(read.iter().filter(|&&b| b > 0).count(), 1, "bytes read per host: {read:?}");
    let hosts: std::collections::BTreeSet<u32> = got[0].tasks.iter().filter(|t| t.bytes_read > 0).map(|t| t.host).collect();
    assert_eq!(hosts.len(), 1, "{:?}", got[0].tasks);
    // EXPLAIN ANALYZE shows the task's host and partitions.
    let explained = rt.block_on(session.run(&format!("EXPLAIN ANALYZE {sql}"))).unwrap();
    let text = explained[0].explain.clone().unwrap();
    assert!(text.contains("flashscan_host") || text.contains("host="), "{text}");
}

#[test]
fn a_host_refuses_a_partition_it_does_not_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("host1");
    let source = tpch_source("orders", SCALE_FACTOR, 1).unwrap();
    load_table(&db, source, &LoadOptions { partition_count: 4, threads: 2, host: Some(HostSlot::new(1, 2).unwrap()), ..LoadOptions::default() }).unwrap();
    let host = HostState::open(&db, "127.0.0.1:1", ReadOptions::default()).unwrap();
    let task_ctx = datafusion::execution::TaskContext::default();
    let request = |partitions: Vec<u32>| ScanRequest {
        scan: 1,
        table: "orders".into(),
        host: Some(1),
        host_count: 2,
        partitions,
        projection: vec![0, 3],
        ranges: vec![],
        row_filter: None,
        pruning_filters: vec![],
        limit: None,
        partitions_total: 4,
        partitions_pruned: 0,
        units_wanted: 2,
        output_partitions: 2,
    };
    assert!(host.scan(request(vec![1, 3]), &task_ctx).is_ok());
    let e = host.scan(request(vec![1, 2]), &task_ctx).unwrap_err().to_string();
    assert!(e.contains("host 1/2") && e.contains("partition 2") && e.contains("host 0/2 owns it"), "{e}");
    assert_eq!(e.lines().count(), 1);
    // Planned for another host, or another cluster shape: refused too.
    let e = host.scan(ScanRequest { host: Some(0), ..request(vec![]) }, &task_ctx).unwrap_err().to_string();
    assert!(e.contains("planned for host 0/2"), "{e}");
    let e = host.scan(ScanRequest { host_count: 3, ..request(vec![1]) }, &task_ctx).unwrap_err().to_string();
    assert!(e.contains("refuses"), "{e}");
    // Through the codec, as a worker receives it.
    use datafusion_proto::physical_plan::PhysicalExtensionCodec;
    let codec = flashscan_cluster::codec::ScanCodec::worker(Arc::new(host));
    let mut bytes = Vec::new();
    flashscan_cluster::codec::encode_request(&request(vec![0]), &mut bytes).unwrap();
    let ctx = datafusion::execution::TaskContext::default();
    let e = codec.try_decode(&bytes, &[], &ctx, &datafusion_proto::physical_plan::DefaultPhysicalProtoConverter {}).unwrap_err().to_string();
    assert!(e.contains("partition 0 is not here"), "{e}");
}

#[test]
fn cluster_check_proves_each_partition_is_owned_once_and_catalogs_agree() {
    let dir = tempfile::tempdir().unwrap();
    let mut hosts = Vec::new();
    for i in 0..2 {
        let db = dir.path().join(format!("h{i}"));
        let source = tpch_source("nation", SCALE_FACTOR, 1).unwrap();
        load_table(&db, source, &LoadOptions { partition_count: 5, threads: 1, host: Some(HostSlot::new(i, 2).unwrap()), ..LoadOptions::default() }).unwrap();
        hosts.push((format!("127.0.0.1:{}", 7100 + i), db));
    }
    let path = write_cluster_file(dir.path(), "c.json", &hosts);
    let file = ClusterFile::read(&path).unwrap();
    let report = file.check(&path).unwrap();
    assert_eq!((report.partition_count, report.catalogs_read), (5, 2));
    // A file that lists the hosts in the wrong order disagrees with their catalogs.
    let mut swapped = file.clone();
    swapped.hosts.swap(0, 1);
    let e = swapped.check(&path).unwrap_err().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    // A host whose catalog holds another partition set than the file claims.
    let mut wrong = file.clone();
    wrong.hosts[0].partitions.insert("nation".into(), vec![0, 2]);
    wrong.hosts[1].partitions.insert("nation".into(), vec![1, 3, 4]);
    assert!(wrong.check(&path).is_err());
    // A load into a host database with another slot, or without --host, is refused.
    let source = tpch_source("region", SCALE_FACTOR, 1).unwrap();
    let e = load_table(&hosts[0].1, source, &LoadOptions { partition_count: 5, threads: 1, ..LoadOptions::default() }).unwrap_err().to_string();
    assert!(e.contains("--host 0/2"), "{e}");
    // Old catalogs (no host place) still read: the single-machine path is unchanged.
    let plain = dir.path().join("plain");
    load_table(&plain, tpch_source("region", SCALE_FACTOR, 1).unwrap(), &LoadOptions { partition_count: 2, threads: 1, ..LoadOptions::default() }).unwrap();
    assert!(flashscan_storage::Catalog::read(&plain).unwrap().host.is_none());
}

/// A cluster of two hosts for the fault tests; `second` makes host 1's worker.
fn two_hosts(second: impl FnOnce(Arc<HostState>) -> Worker + Send + 'static) -> (tempfile::TempDir, RunningWorker, RunningWorker, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dbs: Vec<PathBuf> = (0..2)
        .map(|i| {
            let db = dir.path().join(format!("h{i}"));
            let source = tpch_source("lineitem", SCALE_FACTOR, 2).unwrap();
            load_table(&db, source, &LoadOptions { partition_count: 4, threads: 2, host: Some(HostSlot::new(i, 2).unwrap()), ..LoadOptions::default() }).unwrap();
            db
        })
        .collect();
    let w0 = normal_worker(&dbs[0]);
    let w1 = start_worker(&dbs[1], second);
    let path = write_cluster_file(dir.path(), "c.json", &[(w0.address.clone(), dbs[0].clone()), (w1.address.clone(), dbs[1].clone())]);
    (dir, w0, w1, path)
}

const FAULT_QUERY: &str = "SELECT l_returnflag, count(*), sum(l_extendedprice) FROM lineitem GROUP BY l_returnflag";

#[test]
fn a_worker_that_is_down_fails_the_query_naming_the_host() {
    let (_dir, _w0, w1, path) = two_hosts(flashscan_cluster::worker::host_worker);
    let rt = runtime();
    let session = ClusterSession::open(&path, ClusterOptions::default()).unwrap();
    assert!(rt.block_on(session.run(FAULT_QUERY)).is_ok());
    w1.kill.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let session = ClusterSession::open(&path, ClusterOptions::default()).unwrap();
    let started = Instant::now();
    let e = rt.block_on(session.run(FAULT_QUERY)).unwrap_err().to_string();
    assert!(started.elapsed() < DEAD_HOST_ERROR_WITHIN, "took {:?}", started.elapsed());
    assert!(e.contains(&w1.address) && e.contains("host 1"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn a_worker_dying_mid_query_fails_the_query_within_the_bound() {
    let (signal_tx, signal) = std::sync::mpsc::channel::<()>();
    let signal_tx = std::sync::Mutex::new(signal_tx);
    // Host 1 takes its task, tells the test, then stalls: the test kills it meanwhile.
    let (_dir, _w0, w1, path) = two_hosts(move |host| {
        let channels = flashscan_cluster::worker::SharedChannels(Arc::new(flashscan_cluster::network::Channels::new(Default::default())));
        let signal_tx = Arc::new(signal_tx);
        Worker::from_session_builder(move |ctx: WorkerQueryContext| {
            let (host, channels, signal_tx) = (host.clone(), channels.clone(), signal_tx.clone());
            async move {
                if let Ok(s) = signal_tx.lock() {
                    let _ = s.send(());
                }
                tokio::time::sleep(Duration::from_secs(120)).await;
                flashscan_cluster::worker::task_session(host, channels, ctx).await
            }
        })
    });
    let kill = w1.kill.clone();
    std::thread::spawn(move || {
        if signal.recv_timeout(Duration::from_secs(60)).is_ok() {
            std::thread::sleep(Duration::from_millis(300));
            let _ = kill.send(());
        }
    });
    let rt = runtime();
    let session = ClusterSession::open(&path, ClusterOptions::default()).unwrap();
    let started = Instant::now();
    let e = rt.block_on(session.run(FAULT_QUERY)).unwrap_err().to_string();
    assert!(started.elapsed() < DEAD_HOST_ERROR_WITHIN, "took {:?}: {e}", started.elapsed());
    assert!(e.contains(&w1.address), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn the_cluster_file_names_every_table_and_host() {
    let c = cluster();
    let file = ClusterFile::read(&c.file).unwrap();
    assert_eq!(file.hosts.len(), HOST_COUNT as usize);
    assert_eq!(file.tables.len(), TABLES.len());
    let owned: BTreeMap<String, Vec<u32>> = file.hosts[0].partitions.clone();
    assert_eq!(owned.get("lineitem"), Some(&vec![0, 3]));
    assert_eq!(c.hosts.len(), 3);
}

/// A column store scan evaluates the query's filters itself (DataFusion runs no filter
/// above it), so the filter must travel with the scan task: the hosts' answers equal the
/// single machine's for filtered queries over a column store.
#[test]
fn a_column_store_filter_travels_with_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let column_store = flashscan_storage::RebuildTarget::ColumnStore { archive: false };
    let load_lineitem = |db: &Path, host: Option<HostSlot>| {
        let source = tpch_source("lineitem", SCALE_FACTOR, 2).unwrap();
        load_table(db, source, &LoadOptions { partition_count: 4, threads: 2, host, ..LoadOptions::default() }).unwrap();
        flashscan_storage::rebuild_table(db, "lineitem", column_store, &flashscan_storage::RebuildOptions::default()).unwrap();
    };
    let single = dir.path().join("single");
    load_lineitem(&single, None);
    let dbs: Vec<PathBuf> = (0..2)
        .map(|i| {
            let db = dir.path().join(format!("h{i}"));
            load_lineitem(&db, Some(HostSlot::new(i, 2).unwrap()));
            db
        })
        .collect();
    let workers: Vec<RunningWorker> = dbs.iter().map(|db| normal_worker(db)).collect();
    let list: Vec<(String, PathBuf)> = workers.iter().zip(&dbs).map(|(w, db)| (w.address.clone(), db.clone())).collect();
    let path = write_cluster_file(dir.path(), "c.json", &list);
    let rt = runtime();
    let single = FlashscanSession::open(&single, SessionOptions { target_partitions: Some(TARGET_PARTITIONS), ..SessionOptions::default() }).unwrap();
    let session = ClusterSession::open(&path, ClusterOptions { target_partitions: Some(TARGET_PARTITIONS) }).unwrap();
    for sql in [
        "SELECT count(*), sum(l_extendedprice) FROM lineitem WHERE l_quantity < 10 AND l_shipmode = 'AIR'",
        "SELECT l_orderkey, l_linenumber, l_comment FROM lineitem WHERE l_comment LIKE '%furious%' AND l_discount > 0.05",
        "SELECT l_returnflag, count(*) FROM lineitem WHERE l_shipdate >= DATE '1995-01-01' GROUP BY l_returnflag",
    ] {
        let expected = rt.block_on(single.run(sql)).unwrap();
        let got = rt.block_on(session.run(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let (e_rows, g_rows) = (rows(&expected[0].batches), rows(&got[0].output.batches));
        assert!(!e_rows.is_empty(), "{sql}: the oracle returns rows");
        assert!(same_rows(&e_rows, &g_rows), "{sql}: cluster answer differs\nsingle: {e_rows:?}\ncluster: {g_rows:?}");
    }
}
