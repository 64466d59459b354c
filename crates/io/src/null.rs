//! Null engine (fio's `engines/null.c`): every request completes at once with its full
//! length and no data moves. Running the workbench on it measures the harness's own cost
//! per I/O, the floor under every other engine's CPU µs per I/O.

use std::sync::Arc;
use std::time::Instant;

use crate::engine::{EngineConfig, EngineCore, IoCompletion, IoEngine, IoRequest};
use crate::error::IoError;
use crate::file_set::FileSet;

const NAME: &str = "null";

pub struct NullEngine {
    core: EngineCore,
    pending: Vec<u32>,
}

impl NullEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig) -> Result<NullEngine, IoError> {
        Ok(NullEngine {
            core: EngineCore::new(files, &config)?,
            pending: Vec::with_capacity(config.queue_depth as usize),
        })
    }
}

impl IoEngine for NullEngine {
    fn name(&self) -> &'static str {
        NAME
    }
    fn core(&self) -> &EngineCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut EngineCore {
        &mut self.core
    }
    fn queue(&mut self, request: IoRequest) -> Result<(), IoError> {
        self.core.admit(NAME, &request)?;
        self.core.in_flight.start(request, Instant::now());
        self.pending.push(request.slot);
        Ok(())
    }
    fn submit(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn reap(&mut self, _min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        let now = Instant::now();
        for slot in self.pending.drain(..) {
            let length = self.core.in_flight.requests[slot as usize].length_bytes;
            out.push(self.core.finish(slot, Ok(length), now));
        }
        Ok(())
    }
}

impl Drop for NullEngine {
    fn drop(&mut self) {
        self.core.in_flight.assert_drained(NAME);
    }
}
