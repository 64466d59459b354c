//! `flashscan io` (not built yet).

#[derive(clap::Args)]
pub struct IoArgs {}

pub fn run(_args: IoArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan io` is not built yet"))
}
