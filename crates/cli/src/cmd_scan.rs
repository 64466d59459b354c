//! `flashscan scan` (not built yet).

#[derive(clap::Args)]
pub struct ScanArgs {}

pub fn run(_args: ScanArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan scan` is not built yet"))
}
