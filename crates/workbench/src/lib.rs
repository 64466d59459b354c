//! flashscan's I/O workbench: what SQLIO, DiskSpd, IOMeter and fio do, for database people.
//!
//! Data flows one way: options ([`spec`], [`param_file`], [`size`]) → test files
//! ([`test_file`]) → measurement ([`runner`], `flashscan_measure`'s histogram and CPU clock via [`cpu`]) → one struct
//! ([`report`]) → printers ([`print_table`], [`print_json`], [`print_csv`], [`chart`]).
//! [`sweep`] runs the IOMeter matrix and the thread/process/queue-depth sweeps; [`processes`]
//! runs one job in several OS processes; [`job_file`] saves and replays jobs; [`html`] writes
//! the one-page report; [`output`] creates output files without replacing anything;
//! [`verify`] checks that bytes land where they should.

pub mod chart;
pub mod cpu;
pub mod error;
pub mod html;
pub mod job_file;
pub mod output;
pub mod processes;
pub mod param_file;
pub mod print_csv;
pub mod print_json;
pub mod print_table;
pub mod report;
pub mod rng;
pub mod runner;
pub mod size;
pub mod spec;
pub mod sweep;
pub mod test_file;
pub mod verify;

pub use error::WorkbenchError;
pub use report::{Figures, Report};
pub use spec::{JobOptions, JobSpec, SweepAxis, SweepSpec};
