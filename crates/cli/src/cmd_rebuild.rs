//! `flashscan rebuild` (not built yet).

#[derive(clap::Args)]
pub struct RebuildArgs {}

pub fn run(_args: RebuildArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan rebuild` is not built yet"))
}
