//! Which compiled form of a hot loop this CPU runs. The crates are built for baseline
//! x86-64 (SSE2) so one binary runs everywhere; a hot loop is compiled a second time with
//! AVX2 enabled (`#[target_feature(enable = "avx2")]` on a copy that calls the same
//! `#[inline(always)]` body) and chosen here at run time, once. `FLASHSCAN_PORTABLE_KERNELS`
//! (any value) keeps the portable forms, to time or test them on an AVX2 machine.
//! Users: the FastLanes unpacker, frame-of-reference widening (vectors.rs), and the scan's
//! filter bit packing (crates/exec `segment_slices.rs`).

use std::sync::OnceLock;

/// Which kernel this CPU runs, decided once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Portable,
    Avx2,
}

pub fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::env::var_os("FLASHSCAN_PORTABLE_KERNELS").is_none() {
            return Kernel::Avx2;
        }
        Kernel::Portable
    })
}

