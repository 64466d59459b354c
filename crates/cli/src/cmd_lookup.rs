//! `flashscan lookup` (not built yet).

#[derive(clap::Args)]
pub struct LookupArgs {}

pub fn run(_args: LookupArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan lookup` is not built yet"))
}
