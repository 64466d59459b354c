//! `flashscan load` (not built yet).

#[derive(clap::Args)]
pub struct LoadArgs {}

pub fn run(_args: LoadArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan load` is not built yet"))
}
