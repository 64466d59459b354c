//! Data files an interrupted load or rebuild left behind (killed mid-write: the catalog
//! never saw them). Every data file name carries the catalog generation that was about to
//! commit it (`TABLE.pNNN.fN.gGEN.dat`); a file whose generation is above the committed
//! catalog's can only come from a write that never committed, so it is removed, under the
//! database lock, before the next load or rebuild. Files of any other name are never touched.

use std::path::Path;

use crate::catalog::Catalog;

/// The generation in a data file name `….g<GEN>.dat`, if it is one of ours.
fn generation_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".dat")?;
    let (_, generation) = stem.rsplit_once(".g")?;
    if !stem.contains(".p") || generation.is_empty() || !generation.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    generation.parse().ok()
}

/// Removes, from `db_dir`, data files of generations the catalog never committed.
/// Returns the names removed.
pub fn remove_orphans(db_dir: &Path, catalog: &Catalog) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(db_dir) else { return removed };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if generation_of(&name).is_some_and(|g| g > catalog.generation) && std::fs::remove_file(entry.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_names_of_uncommitted_generations_go() {
        assert_eq!(generation_of("lineitem.p000.f0.g6.dat"), Some(6));
        assert_eq!(generation_of("lineitem__cs.p012.f1.g17.dat"), Some(17));
        assert_eq!(generation_of("notes.g6.dat"), None);
        assert_eq!(generation_of("lineitem.p000.f0.g6.dat.bak"), None);
        assert_eq!(generation_of("lineitem.p000.f0.gx.dat"), None);
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.p000.f0.g1.dat", "t.p000.f0.g2.dat", "t.p001.f0.g3.dat", "mine.dat", "catalog.json"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let catalog = Catalog { generation: 2, ..Catalog::default() };
        assert_eq!(remove_orphans(dir.path(), &catalog), vec!["t.p001.f0.g3.dat".to_string()]);
        let mut left: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, vec!["catalog.json", "mine.dat", "t.p000.f0.g1.dat", "t.p000.f0.g2.dat"]);
    }
}
