//! `flashscan partitions` (not built yet).

#[derive(clap::Args)]
pub struct PartitionsArgs {}

pub fn run(_args: PartitionsArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan partitions` is not built yet"))
}
