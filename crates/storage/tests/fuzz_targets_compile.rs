//! The fuzz targets (`fuzz/`, a crate of its own outside the workspace) must keep compiling
//! as the decoders they drive change: a target that no longer builds protects nothing, and
//! nothing else in `cargo test` would notice. This type-checks every target with the stable
//! toolchain (running them needs nightly: see fuzz/README.md).

use std::path::PathBuf;
use std::process::Command;

#[test]
fn every_fuzz_target_type_checks() {
    // The run's own package directory (cargo sets it when it runs a test), not only the one
    // compiled in: clones sharing one target directory reuse each other's test binaries,
    // and a binary built in a clone since deleted would look for fuzz/ there.
    let package_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let root = package_dir.join("../..");
    let manifest = root.join("fuzz/Cargo.toml");
    // A target directory of its own: the outer `cargo test` may hold the lock of the shared
    // one, and the fuzz crate has its own lock file and dependency versions.
    let outer_target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let target = outer_target.join("fuzz-check");
    let output = Command::new(env!("CARGO"))
        .args(["check", "--quiet", "--bins", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        // The outer test run's flags are for the workspace, not for this crate.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("running cargo check on fuzz/");
    assert!(
        output.status.success(),
        "fuzz targets no longer compile ({}):\n{}",
        manifest.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}
