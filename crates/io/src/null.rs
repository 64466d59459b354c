//! Null engine (fio's `engines/null.c`): every request completes at once with its full
//! length and no data moves. Running the workbench on it measures the harness's own cost
//! per I/O, the floor under every other engine's CPU µs per I/O.

use std::sync::Arc;
use std::time::Instant;

use crate::engine::{EngineConfig, EngineCore, IoCompletion, IoEngine};
use crate::error::IoError;
use crate::file_set::FileSet;

const NAME: &str = "null";

pub struct NullEngine {
    core: EngineCore,
}

impl NullEngine {
    pub fn new(files: Arc<FileSet>, config: EngineConfig) -> Result<NullEngine, IoError> {
        Ok(NullEngine { core: EngineCore::new(NAME, files, &config)? })
    }
}

impl IoEngine for NullEngine {
    fn core(&self) -> &EngineCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut EngineCore {
        &mut self.core
    }
    fn reap(&mut self, _min_complete: u32, out: &mut Vec<IoCompletion>) -> Result<(), IoError> {
        let now = Instant::now();
        let mut pending = self.core.take_pending();
        for r in pending.drain(..) {
            out.push(self.core.finish(r.slot, Ok(r.length_bytes), now));
        }
        self.core.restore_pending(pending);
        Ok(())
    }
}
