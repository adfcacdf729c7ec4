//! Pinning a thread to one CPU, for the busy-polling workloads.
//!
//! A thread that busy-polls never sleeps, so it must have a CPU of its own:
//! the kernel otherwise tends to place the two ends of a ping-pong on one
//! CPU (a wake-up pulls the woken thread next to its waker), where each
//! spinning end then holds the CPU the other needs until it gives up and
//! parks. Pinning the two ends to two CPUs is how busy polling is deployed,
//! and what its ceiling (the spinning UDP echo) gets too.

use std::io;

/// The CPU set the thread had before [`pin_current_thread`]; restored on drop.
pub(crate) struct Pinned {
    #[cfg(target_os = "linux")]
    previous: nix::sched::CpuSet,
}

/// Restricts the calling thread to `cpu` until the returned guard is
/// dropped. Elsewhere than on Linux it leaves the thread as it is.
pub(crate) fn pin_current_thread(cpu: usize) -> io::Result<Pinned> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        use nix::unistd::Pid;
        let this_thread = Pid::from_raw(0);
        let previous = sched_getaffinity(this_thread)?;
        let mut only = CpuSet::new();
        only.set(cpu)?;
        sched_setaffinity(this_thread, &only)?;
        Ok(Pinned { previous })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        Ok(Pinned {})
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        {
            // Failing to widen the set again only leaves the thread pinned.
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &self.previous);
        }
    }
}
