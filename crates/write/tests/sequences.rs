//! Sequences hand every value out once, across crashes (a write path dropped without a
//! checkpoint is what a crash leaves of them: only the catalog's reservation), and leave no
//! gap after a clean stop (a checkpoint trims the reservation).

use flashscan_storage::SequenceMeta;
use flashscan_write::{init_database, CheckpointOptions, InitOptions, WriteError};

mod common;
use common::writer;

fn new_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    init_database(&db, &InitOptions::default()).unwrap();
    (dir, db)
}

#[test]
fn values_are_never_handed_out_twice_and_a_checkpoint_leaves_no_gap() {
    let (_dir, db) = new_db();
    let wp = writer(&db);
    assert!(wp.create_sequence("s", SequenceMeta::new(1, 1, 1, i64::MAX).unwrap(), false).unwrap());
    assert!(!wp.create_sequence("S", SequenceMeta::new(1, 1, 1, i64::MAX).unwrap(), true).unwrap(), "IF NOT EXISTS");
    let mut handed = Vec::new();
    handed.extend(wp.next_sequence_values("s", 3).unwrap());
    handed.extend(wp.next_sequence_values("s", 1).unwrap());
    assert_eq!(handed, vec![1, 2, 3, 4]);
    // A crash: the process ends with values reserved but not handed out.
    drop(wp);
    let wp = writer(&db);
    let after_crash = wp.next_sequence_values("s", 1).unwrap()[0];
    assert!(after_crash > 4, "after a crash the next value ({after_crash}) comes after every value handed out");
    handed.push(after_crash);
    // Many runs, each reservation longer than the last, none handing a value out twice.
    for n in [1usize, 7, 100, 1000, 5000] {
        handed.extend(wp.next_sequence_values("s", n).unwrap());
    }
    let mut sorted = handed.clone();
    sorted.dedup();
    assert_eq!(sorted, handed, "strictly increasing: no value twice");
    // A checkpoint trims the reservation: the next open continues with no gap.
    let last = *handed.last().unwrap();
    wp.checkpoint(&CheckpointOptions::default()).unwrap();
    drop(wp);
    let wp = writer(&db);
    assert_eq!(wp.next_sequence_values("s", 1).unwrap(), vec![last + 1]);
}

#[test]
fn a_sequence_ends_at_its_maximum_and_setval_moves_it() {
    let (_dir, db) = new_db();
    let wp = writer(&db);
    wp.create_sequence("small", SequenceMeta::new(1, 2, 1, 6).unwrap(), false).unwrap();
    assert_eq!(wp.next_sequence_values("small", 3).unwrap(), vec![1, 3, 5]);
    assert!(matches!(wp.next_sequence_values("small", 1), Err(WriteError::InvalidArgument(m)) if m.contains("maximum")));
    assert!(matches!(wp.next_sequence_values("small", 1), Err(WriteError::InvalidArgument(_))), "still at the end");
    assert_eq!(wp.set_sequence_value("small", 2, true).unwrap(), 2);
    assert_eq!(wp.next_sequence_values("small", 1).unwrap(), vec![4]);
    wp.set_sequence_value("small", 1, false).unwrap();
    drop(wp);
    // setval is durable at once.
    let wp = writer(&db);
    assert_eq!(wp.next_sequence_values("small", 1).unwrap(), vec![1]);
    assert!(wp.set_sequence_value("small", 7, true).is_err(), "beyond MAXVALUE");
    assert!(matches!(wp.next_sequence_values("nope", 1), Err(WriteError::UnknownSequence { .. })));
    assert_eq!(wp.drop_sequences(&["small".into(), "nope".into()], true).unwrap(), vec!["small".to_string()]);
    assert!(matches!(wp.drop_sequences(&["small".into()], false), Err(WriteError::UnknownSequence { .. })));
}
