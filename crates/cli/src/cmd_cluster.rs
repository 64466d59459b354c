//! `flashscan worker`, `flashscan cluster make|check` and `flashscan sql --cluster`: a table
//! bigger than one machine (docs/cluster.md). Behind the `cluster` feature (it brings in
//! datafusion-distributed and gRPC); without it each command says how to get it.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The host's database (loaded with `flashscan load DB --host I/N`).
    pub db: PathBuf,
    /// IP:PORT to serve on, as cluster.json lists it for this host.
    #[arg(long)]
    pub listen: String,
    /// Read with O_DIRECT (from the device every time) instead of through the page cache.
    #[arg(long)]
    pub direct: bool,
}

#[derive(clap::Subcommand)]
pub enum ClusterCommand {
    /// Write cluster.json from the hosts' databases, in host order: --host ADDR=DB ...
    Make {
        /// The file to create (never overwritten).
        out: PathBuf,
        /// Host I's address and database (or a directory holding a copy of its catalog.json).
        #[arg(long = "host", required = true)]
        hosts: Vec<String>,
    },
    /// Prove every partition of every table is owned by exactly one host; reads the
    /// catalogs of hosts whose database is given and checks they agree.
    Check {
        file: PathBuf,
    },
}

#[cfg(not(feature = "cluster"))]
fn not_built() -> anyhow::Error {
    crate::exit::bad_input("this flashscan was built without the cluster (--no-default-features): rebuild with `cargo build --release -p flashscan-cli`, which includes it")
}

#[cfg(not(feature = "cluster"))]
pub fn worker(_args: WorkerArgs) -> anyhow::Result<()> {
    Err(not_built())
}

#[cfg(not(feature = "cluster"))]
pub fn run(_command: ClusterCommand) -> anyhow::Result<()> {
    Err(not_built())
}

#[cfg(all(feature = "sql", not(feature = "cluster")))]
pub fn sql(_args: crate::cmd_sql::SqlArgs) -> anyhow::Result<()> {
    Err(not_built())
}

#[cfg(feature = "cluster")]
pub use with_cluster::{run, sql, worker};

#[cfg(feature = "cluster")]
mod with_cluster {
    use std::io::Write;

    use flashscan_cluster::{render_tasks, ClusterError, ClusterFile, ClusterOptions, ClusterSession};
    use flashscan_sql::{render, OutputMode, ReadOptions};

    use super::{ClusterCommand, WorkerArgs};
    use crate::cmd_sql::SqlArgs;
    use crate::exit::bad_input;

    fn to_anyhow(e: ClusterError) -> anyhow::Error {
        if e.is_user_input() {
            bad_input(e.to_string())
        } else {
            anyhow::anyhow!(e.to_string())
        }
    }

    fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| anyhow::anyhow!("cannot start the runtime: {e}"))
    }

    pub fn worker(args: WorkerArgs) -> anyhow::Result<()> {
        let read = ReadOptions { direct: args.direct, ..ReadOptions::default() };
        let runtime = runtime()?;
        runtime.block_on(async {
            let (listener, host) = flashscan_cluster::worker::bind(&args.db, &args.listen, read).await.map_err(to_anyhow)?;
            eprintln!("flashscan worker: {} serves {} (Ctrl-C stops)", host.label(), args.db.display());
            let stop = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            flashscan_cluster::worker::serve(listener, host, stop).await.map_err(to_anyhow)
        })
    }

    pub fn run(command: ClusterCommand) -> anyhow::Result<()> {
        match command {
            ClusterCommand::Make { out, hosts } => {
                let mut list = Vec::new();
                for h in &hosts {
                    let (address, db) = h.split_once('=').ok_or_else(|| bad_input(format!("--host {h:?}: give ADDRESS=DATABASE, like 10.0.0.1:7070=/data/tpch")))?;
                    list.push((address.to_string(), std::path::PathBuf::from(db)));
                }
                let file = ClusterFile::make(&list).map_err(to_anyhow)?;
                let text = serde_json::to_string_pretty(&file)?;
                // A new file only: flashscan never overwrites what it did not create.
                let mut f = flashscan_storage::fs_safe::create_new(&out).map_err(|e| bad_input(format!("{}: {e} (choose a new file name)", out.display())))?;
                f.write_all(text.as_bytes())?;
                f.write_all(b"\n")?;
                f.sync_all()?;
                println!("{}: {} hosts, {} tables", out.display(), file.hosts.len(), file.tables.len());
                Ok(())
            }
            ClusterCommand::Check { file } => {
                let cluster = ClusterFile::read(&file).map_err(to_anyhow)?;
                let report = cluster.check(&file).map_err(to_anyhow)?;
                println!(
                    "{}: ok — {} partitions of {} tables each owned by exactly one of {} hosts; {} host catalogs read and agree",
                    file.display(),
                    report.partition_count,
                    report.table_count,
                    report.host_count,
                    report.catalogs_read
                );
                Ok(())
            }
        }
    }

    pub fn sql(args: SqlArgs) -> anyhow::Result<()> {
        let Some(cluster) = &args.cluster else { return Err(bad_input("--cluster FILE is missing")) };
        if args.query.is_some() {
            return Err(bad_input("with --cluster give only the query: the hosts' databases are listed in cluster.json"));
        }
        let mode = match (args.json, args.csv) {
            (true, true) => return Err(bad_input("--json and --csv exclude each other: choose one")),
            (true, false) => OutputMode::Json,
            (false, true) => OutputMode::Csv,
            (false, false) => OutputMode::Table,
        };
        let sql = match &args.file {
            Some(path) => std::fs::read_to_string(path).map_err(|e| bad_input(format!("reading {}: {e}", path.display())))?,
            // The positional argument: with --cluster it is the query.
            None => args.db.to_string_lossy().into_owned(),
        };
        let runtime = runtime()?;
        let session = ClusterSession::open(cluster, ClusterOptions::default()).map_err(to_anyhow)?;
        let outputs = runtime.block_on(session.run(&sql)).map_err(to_anyhow)?;
        let mut out = std::io::stdout().lock();
        for o in &outputs {
            if let Some(explain) = &o.explain {
                out.write_all(explain.as_bytes())?;
                out.write_all(b"\n")?;
                out.write_all(render_tasks(&o.tasks).as_bytes())?;
                continue;
            }
            let text = render(&o.output, mode).map_err(|e| anyhow::anyhow!(e.to_string()))?;
            out.write_all(text.as_bytes())?;
        }
        Ok(())
    }
}
