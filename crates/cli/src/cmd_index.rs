//! `flashscan index create DB TABLE --name NAME --columns COL[,COL…]`: bulk build a B+tree
//! (8 KB nodes) over a table's rows and register it in the database's catalog.
//! `flashscan index drop DB TABLE INDEX`: take it out of the catalog and remove its file.

use std::path::PathBuf;

use flashscan_index::{create_index, drop_index, CreateIndex};
use crate::exit::index_error;


#[derive(clap::Subcommand)]
pub enum IndexCommand {
    /// Build a B+tree index on a table.
    Create(CreateArgs),
    /// Drop an index: out of the catalog (atomically), then its file removed.
    Drop(DropArgs),
}

#[derive(clap::Args)]
pub struct DropArgs {
    /// Database directory.
    pub db: PathBuf,
    /// The indexed table.
    pub table: String,
    /// The index to drop.
    pub index: String,
}

#[derive(clap::Args)]
pub struct CreateArgs {
    /// Database directory.
    pub db: PathBuf,
    /// Table to index.
    pub table: String,
    /// Name of the new index (letters, digits, _).
    #[arg(long)]
    pub name: String,
    /// Key columns, comma-separated (integer, date, decimal or boolean columns).
    #[arg(long, value_delimiter = ',', required = true)]
    pub columns: Vec<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: IndexCommand) -> anyhow::Result<()> {
    match command {
        IndexCommand::Create(args) => create(args),
        IndexCommand::Drop(args) => {
            let meta = drop_index(&args.db, &args.table, &args.index).map_err(index_error)?;
            println!("dropped index {} on {}: {:.1} MB freed", meta.name, meta.table, meta.size_bytes as f64 / 1e6);
            Ok(())
        }
    }
}

fn create(args: CreateArgs) -> anyhow::Result<()> {
    let request = CreateIndex { table: args.table.clone(), name: args.name.clone(), columns: args.columns.clone(), build_options: None };
    crate::cmd_write::checkpoint_if_unflushed(&args.db, &args.table, "flashscan index create")?;
    let meta = create_index(&args.db, &request).map_err(index_error)?;
    if args.json {
        return crate::print_json(&meta);
    }
    println!(
        "index {} on {} ({}): {} entries, height {}, {} nodes of 8 KB ({:.1} MB), built in {:.2} s",
        meta.name,
        meta.table,
        meta.columns.join(", "),
        meta.tree.entry_count,
        meta.tree.height,
        meta.tree.node_count,
        meta.size_bytes as f64 / 1e6,
        meta.build_seconds
    );
    Ok(())
}
