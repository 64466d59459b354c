//! CPU accounting in the workbench's unit (µs), read from flashscan's one CPU clock
//! (`flashscan_measure::CpuTime`, getrusage) for the process (every thread, including the
//! psync engine's workers) and for one thread. The runner reads them at the end of warm-up
//! and at the end of the run, so warm-up is excluded.

use flashscan_measure::CpuTime;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CpuTimes {
    pub user_us: u64,
    pub sys_us: u64,
}

impl CpuTimes {
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes { user_us: self.user_us.saturating_sub(earlier.user_us), sys_us: self.sys_us.saturating_sub(earlier.sys_us) }
    }

    pub fn total_us(&self) -> u64 {
        self.user_us + self.sys_us
    }
}

impl From<CpuTime> for CpuTimes {
    fn from(t: CpuTime) -> CpuTimes {
        CpuTimes { user_us: t.user_ns / 1000, sys_us: t.system_ns / 1000 }
    }
}

/// CPU time of the whole process so far.
pub fn process_cpu() -> CpuTimes {
    CpuTime::now().into()
}

/// CPU time of the calling thread so far.
pub fn thread_cpu() -> CpuTimes {
    CpuTime::thread_now().into()
}

/// CPUs online: the denominator of the process-wide percentages.
pub fn cpu_count() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 { 1 } else { n as u32 }
}

/// Pins the calling thread to the CPUs in `mask` (bit n = CPU n); 0 leaves it free.
pub fn pin_to_mask(mask: u64) -> Result<(), std::io::Error> {
    if mask == 0 {
        return Ok(());
    }
    // SAFETY: the cpu_set_t is ours and zeroed; CPU_SET stays within its 1024 bits.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..64 {
            if mask & (1 << cpu) != 0 {
                libc::CPU_SET(cpu, &mut set);
            }
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_as_user_time() {
        let before = thread_cpu();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = thread_cpu().since(&before);
        assert!(spent.total_us() > 0);
        assert!(process_cpu().total_us() >= spent.total_us());
        assert!(cpu_count() >= 1);
    }

    #[test]
    fn since_never_underflows() {
        let a = CpuTimes { user_us: 5, sys_us: 5 };
        let b = CpuTimes { user_us: 10, sys_us: 1 };
        assert_eq!(a.since(&b), CpuTimes { user_us: 0, sys_us: 4 });
    }
}
