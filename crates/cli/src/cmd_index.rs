//! `flashscan index …` (not built yet).

#[derive(clap::Subcommand)]
pub enum IndexCommand {
    /// Build a B+tree index on a table.
    Create {},
}

pub fn run(_command: IndexCommand) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan index` is not built yet"))
}
