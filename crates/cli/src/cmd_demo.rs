//! `flashscan demo` (not built yet).

#[derive(clap::Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<()> {
    Err(crate::exit::bad_input("`flashscan demo` is not built yet"))
}
