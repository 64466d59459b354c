//! The one CPU clock of flashscan: user and system time from getrusage, for the whole
//! process (every thread, including the psync engine's workers and the kernel work reads
//! cause) or for the calling thread. A figure's CPU time is the difference of two
//! readings; dividing by pages gives CPU µs per page, the figure that says whether decode
//! can keep up with the device. Scans, lookups, the cost bench and the workbench all read
//! this clock; printers convert to the unit their names carry.

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    pub user_ns: u64,
    pub system_ns: u64,
}

fn rusage(who: libc::c_int) -> CpuTime {
    // SAFETY: getrusage fills the zeroed struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut usage) != 0 {
            return CpuTime::default();
        }
        usage
    };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    CpuTime { user_ns: ns(usage.ru_utime), system_ns: ns(usage.ru_stime) }
}

/// CPU time of the whole process so far, in nanoseconds (user + system).
pub fn process_cpu_ns() -> u64 {
    CpuTime::now().total_ns()
}

impl CpuTime {
    /// CPU time of the whole process so far.
    pub fn now() -> CpuTime {
        rusage(libc::RUSAGE_SELF)
    }

    /// CPU time of the calling thread so far.
    pub fn thread_now() -> CpuTime {
        rusage(libc::RUSAGE_THREAD)
    }

    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            system_ns: self.system_ns.saturating_sub(earlier.system_ns),
        }
    }

    pub fn total_ns(&self) -> u64 {
        self.user_ns + self.system_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_loop_uses_cpu() {
        let before = CpuTime::now();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(CpuTime::now().since(&before).total_ns() > 0);
        assert!(process_cpu_ns() >= CpuTime::thread_now().total_ns());
    }
}
