//! `flashscan serve DB`: the database over the PostgreSQL wire protocol (crates/server).
//! Built with the `sql` feature, like `flashscan sql`.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Address to listen on [default: 127.0.0.1:5432, or the next free port]. Anything
    /// but loopback requires --password-file.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// Serve /metrics (Prometheus) and a live dashboard at this address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// Connections past this are refused with SQLSTATE 53300 [default: 100].
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Queries running at once; the rest wait in a queue [default: 2 per core].
    #[arg(long)]
    pub max_active_queries: Option<usize>,
    /// Seconds a query may wait for a slot before it fails with SQLSTATE 53000 [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub queue_timeout: Option<f64>,
    /// DataFusion memory per query (sorts, joins, aggregates), e.g. 512M [default: 1G].
    #[arg(long, value_name = "SIZE")]
    pub query_memory: Option<String>,
    /// Global budget of scan read buffers for all running queries, e.g. 512M [default: 512M].
    #[arg(long, value_name = "SIZE")]
    pub scan_buffers: Option<String>,
    /// A file whose first line is the password (any user name); required to listen on
    /// anything but loopback.
    #[arg(long, value_name = "F")]
    pub password_file: Option<PathBuf>,
    /// How --password-file is checked: scram-sha-256 (the password never crosses the
    /// wire), md5, or password (in clear; trusted networks only) [default: scram-sha-256].
    #[arg(long, value_name = "METHOD")]
    pub auth: Option<String>,
    /// Threads committing INSERT/COPY groups; while one group waits for its log flush the
    /// next is formed and logged [default: 4; 1 = one group at a time].
    #[arg(long, value_name = "N")]
    pub commit_workers: Option<usize>,
}

#[cfg(not(feature = "sql"))]
pub fn run(_args: ServeArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("this flashscan was built without SQL: rebuild with `cargo build --release --features sql`"))
}

#[cfg(feature = "sql")]
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    use crate::exit::bad_input;
    use flashscan_server::config::parse_size_bytes;
    use flashscan_server::ServerConfig;

    if !args.db.is_dir() {
        return Err(bad_input(format!("{} is not a database directory (create one with `flashscan init` or `flashscan load`)", args.db.display())));
    }
    // Exit codes of every error are decided in exit.rs.
    let to_input = crate::exit::classify::<flashscan_server::ServerError>;
    let mut config = ServerConfig::new(args.db.clone());
    config.listen = args.listen;
    config.http = args.http;
    if let Some(n) = args.max_connections {
        config.max_connections = n;
        // The default number of active queries never exceeds the connections allowed.
        config.max_active_queries = config.max_active_queries.min(n);
    }
    if let Some(n) = args.max_active_queries {
        config.max_active_queries = n;
    }
    if let Some(s) = args.queue_timeout {
        if !(s.is_finite() && s > 0.0) {
            return Err(bad_input(format!("--queue-timeout {s}: use a positive number of seconds")));
        }
        config.queue_timeout = std::time::Duration::from_secs_f64(s);
    }
    if let Some(s) = &args.query_memory {
        config.query_memory_bytes = parse_size_bytes(s).map_err(to_input)?;
    }
    if let Some(s) = &args.scan_buffers {
        config.scan_buffer_budget_bytes = parse_size_bytes(s).map_err(to_input)?;
    }
    if let Some(n) = args.commit_workers {
        config.commit_workers = n;
    }
    config.password_file = args.password_file;
    if let Some(a) = &args.auth {
        config.password_auth = flashscan_server::startup::PasswordAuth::parse(a)
            .ok_or_else(|| bad_input(format!("--auth {a}: use scram-sha-256, md5 or password")))?;
        if config.password_file.is_none() {
            return Err(bad_input(format!("--auth {a} needs --password-file F (the password to check)")));
        }
    }
    config.validate().map_err(to_input)?;
    // Connections plan their statements on these threads: stacks for deep expressions.
    let runtime = tokio::runtime::Builder::new_multi_thread().thread_stack_size(flashscan_sql::SQL_THREAD_STACK_BYTES).enable_all().build()?;
    runtime.block_on(flashscan_server::serve_until_signal(config)).map_err(to_input)
}
