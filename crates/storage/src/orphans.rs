//! Files an interrupted or finished write left unreferenced. Writers list the files they are
//! about to create in the catalog's `unreferenced_files` before creating them, and a commit
//! that drops or replaces a table or an index lists that one's files there; so after a
//! kill -9 at any moment, every file flashscan made and nothing references is named in the
//! catalog. The sweep, under the database lock before every write, removes exactly those:
//! confined paths (the database directory and its declared volumes) whose names follow the
//! grammar flashscan generates (`fs_safe::is_generated_file_name`). It never lists a
//! directory, so a user's file that merely looks like a data file is never touched.

use std::path::Path;

use crate::catalog::{Catalog, SweepReport};
use crate::error::StorageError;

/// Removes the catalog's unreferenced files and commits the catalog without them. Call
/// under the database lock.
pub fn sweep_unreferenced(db_dir: &Path, catalog: &mut Catalog) -> Result<SweepReport, StorageError> {
    if catalog.unreferenced_files.is_empty() {
        return Ok(SweepReport::default());
    }
    catalog.commit_and_sweep(db_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_generated_names_go() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.p000.f0.g1.dat", "t.p000.f0.g2.dat", "t.p001.f0.g3.dat", "mine.dat"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let mut catalog = Catalog { generation: 2, unreferenced_files: vec!["t.p001.f0.g3.dat".into(), "mine.dat".into(), "t.p009.f0.g3.dat".into()], ..Catalog::default() };
        let report = sweep_unreferenced(dir.path(), &mut catalog).unwrap();
        assert_eq!(report, SweepReport { removed_count: 1, missing_count: 1, refused_count: 1 });
        assert!(catalog.unreferenced_files.is_empty());
        let mut left: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, vec!["catalog.json", "mine.dat", "t.p000.f0.g1.dat", "t.p000.f0.g2.dat"]);
        assert!(Catalog::read(dir.path()).unwrap().unreferenced_files.is_empty());
    }
}
