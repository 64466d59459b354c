//! `flashscan sql`: SQL through Apache DataFusion. DataFusion is a long build, so it sits
//! behind the `sql` feature of this crate; without it the command says how to get it.

#[derive(clap::Args)]
pub struct SqlArgs {
    /// Database directory.
    pub db: std::path::PathBuf,
    /// The query; without it (and without --file) an interactive shell starts.
    pub query: Option<String>,
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub csv: bool,
    #[arg(long)]
    pub file: Option<std::path::PathBuf>,
    /// Run on a cluster (docs/cluster.md): `flashscan sql --cluster cluster.json "QUERY"`
    /// (the one positional argument is then the query; needs the `cluster` feature).
    #[arg(long)]
    pub cluster: Option<std::path::PathBuf>,
}

#[cfg(not(feature = "sql"))]
pub fn run(_args: SqlArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input(
        "this flashscan was built without SQL: rebuild with `cargo build --release --features sql`",
    ))
}

#[cfg(feature = "sql")]
pub fn run(args: SqlArgs) -> anyhow::Result<()> {
    if args.cluster.is_some() {
        return crate::cmd_cluster::sql(args);
    }
    crate::sql_shell::run(args)
}
