//! `flashscan stats` (not built yet).

#[derive(clap::Args)]
pub struct StatsArgs {}

pub fn run(_args: StatsArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan stats` is not built yet"))
}
