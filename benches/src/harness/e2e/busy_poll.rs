//! `rr64busy`: Tern's requests one at a time with busy polling on in both
//! endpoints (`Config::busy_poll`), beside the bare UDP echo on two threads
//! that spin instead of parking — what busy polling buys, and what it is
//! still short of. Both pairs run with their client on CPU 0 and their
//! server on CPU 1 (see [`crate::affinity`] for why a spinning thread needs
//! a CPU of its own).

use std::time::Duration;

use super::tern::{Tern, config};
use super::{ping_pong, run_requests};
use crate::affinity::pin_current_thread;
use crate::cli::Args;

/// How long each driver keeps polling after its last exchange: far longer
/// than a round trip, so that neither side parks while requests flow.
const BUSY_POLL: Duration = Duration::from_millis(1);
/// Where the client (this thread) and the server run.
pub(super) const CLIENT_CPU: usize = 0;
pub(super) const SERVER_CPU: usize = 1;
const PREFIX: &str = "e2e/tern";
const WORKLOAD: &str = "rr64busy";

struct BusyPoll;

pub(super) fn group() -> Box<dyn crate::Group> {
    Box::new(BusyPoll)
}

impl crate::Group for BusyPoll {
    fn name(&self) -> &str {
        "e2e/tern/rr64busy"
    }

    fn level(&self) -> u8 {
        super::LEVEL
    }

    fn selected(&self, args: &Args) -> bool {
        args.wants(&format!("{PREFIX}/{WORKLOAD}/"))
    }

    fn run(&self, args: &Args) {
        if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
            eprintln!("   {PREFIX}/{WORKLOAD}: busy polling needs two CPUs; skipped");
            return;
        }
        let started = pin_current_thread(CLIENT_CPU).and_then(|pinned| {
            let tern = Tern::start_with(config().busy_poll(BUSY_POLL), Some(SERVER_CPU))?;
            Ok((pinned, tern))
        });
        match started {
            Ok((_pinned, mut tern)) => run_requests(
                PREFIX,
                WORKLOAD,
                1,
                &mut tern,
                args,
                ping_pong::run_spinning,
            ),
            Err(e) => eprintln!("   {PREFIX}/{WORKLOAD}: cannot start: {e}"),
        }
    }
}
