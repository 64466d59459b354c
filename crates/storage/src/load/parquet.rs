//! Parquet files: row groups are split over parts so large files decode in parallel.
//! Several files (or a glob such as `flights/*.parquet`) load into one table when their
//! schemas agree.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::source::{BatchIter, PartSource, TableSource};
use crate::error::StorageError;

const PARQUET_BATCH_ROWS: usize = 8192;
/// Files one glob may name: a bound on open files and on the catalog's source text.
pub const GLOB_FILES_MAX: usize = 100_000;

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, StorageError> {
    let f = File::open(path).map_err(|e| StorageError::io("opening", path, e))?;
    ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| StorageError::Parquet { path: path.to_path_buf(), source: e })
}

pub fn parquet_source(path: &Path, table_name: &str, threads: usize) -> Result<TableSource, StorageError> {
    parquet_files_source(&[path.to_path_buf()], table_name, threads)
}

/// One table from every file in `paths`, whose schemas must match the first one's (names,
/// types and order; nullability may differ and is then nullable).
pub fn parquet_files_source(paths: &[PathBuf], table_name: &str, threads: usize) -> Result<TableSource, StorageError> {
    let Some(first) = paths.first() else {
        return Err(StorageError::InvalidArgument(format!("no Parquet files to load into {table_name}")));
    };
    let mut schema: Option<SchemaRef> = None;
    // (path, row groups) of every file, read once here so a mismatch fails before loading.
    let mut files: Vec<(PathBuf, usize)> = Vec::with_capacity(paths.len());
    let mut rows_estimate = 0u64;
    for path in paths {
        let builder = open(path)?;
        let file_schema = builder.schema().clone();
        match &schema {
            None => schema = Some(file_schema),
            Some(s) => {
                let same = s.fields().len() == file_schema.fields().len()
                    && s.fields().iter().zip(file_schema.fields()).all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
                if !same {
                    return Err(StorageError::InvalidArgument(format!(
                        "{} has columns {}, but {} has {}: load files with the same columns into one table",
                        path.display(),
                        describe(&file_schema),
                        first.display(),
                        describe(s)
                    )));
                }
                if file_schema.fields().iter().any(|f| f.is_nullable()) {
                    let fields: Vec<_> = s.fields().iter().zip(file_schema.fields()).map(|(a, b)| a.as_ref().clone().with_nullable(a.is_nullable() || b.is_nullable())).collect();
                    schema = Some(std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, s.metadata().clone())));
                }
            }
        }
        rows_estimate += builder.metadata().file_metadata().num_rows().max(0) as u64;
        files.push((path.clone(), builder.metadata().num_row_groups()));
    }
    let schema = schema.unwrap_or_else(|| std::sync::Arc::new(arrow::datatypes::Schema::empty()));
    let mut parts: Vec<PartSource> = Vec::new();
    for (path, row_groups) in files {
        let part_count = row_groups.clamp(1, threads.max(1) * 2);
        for part in 0..part_count {
            let groups: Vec<usize> = (0..row_groups).filter(|g| g % part_count == part).collect();
            if groups.is_empty() && part > 0 {
                continue;
            }
            let path = path.clone();
            parts.push(Box::new(move || {
                let reader = open(&path)?
                    .with_row_groups(groups)
                    .with_batch_size(PARQUET_BATCH_ROWS)
                    .build()
                    .map_err(|e| StorageError::Parquet { path: path.clone(), source: e })?;
                let it: BatchIter = Box::new(reader.map(move |r| r.map_err(|e| StorageError::Arrow { path: path.clone(), source: e })));
                Ok(it)
            }));
        }
    }
    let description = if paths.len() == 1 { first.display().to_string() } else { format!("{} and {} more files", first.display(), paths.len() - 1) };
    Ok(TableSource { name: table_name.to_string(), schema, parts, description, rows_estimate })
}

fn describe(schema: &SchemaRef) -> String {
    schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
}

/// Whether `path` holds a wildcard (`*`, `?`) in its file name.
pub fn is_glob(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().contains(['*', '?']))
}

/// The regular files of the pattern's directory whose names match its last component
/// (`*` any run of characters, `?` one character), sorted by name. Wildcards in the
/// directory part are not expanded (say so rather than guess).
pub fn expand_glob(pattern: &Path) -> Result<Vec<PathBuf>, StorageError> {
    let name = pattern.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = match pattern.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if dir.to_string_lossy().contains(['*', '?']) {
        return Err(StorageError::InvalidArgument(format!("{}: wildcards work in the file name only", pattern.display())));
    }
    if !dir.is_dir() {
        return Err(StorageError::InvalidArgument(format!("{}: {} is not a directory", pattern.display(), dir.display())));
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| StorageError::io("listing", &dir, e))? {
        let entry = entry.map_err(|e| StorageError::io("listing", &dir, e))?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        // file_type does not follow links: a planted link is not a data file of ours to read.
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && wildcard_match(name.as_bytes(), file_name.as_bytes()) {
            out.push(entry.path());
            if out.len() > GLOB_FILES_MAX {
                return Err(StorageError::InvalidArgument(format!("{} matches more than {GLOB_FILES_MAX} files", pattern.display())));
            }
        }
    }
    if out.is_empty() {
        return Err(StorageError::InvalidArgument(format!("{} matches no file", pattern.display())));
    }
    out.sort();
    Ok(out)
}

/// `*` and `?` matching, iterative with one backtrack point (linear in practice).
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_like_a_shell() {
        assert!(wildcard_match(b"*.parquet", b"a.parquet"));
        assert!(wildcard_match(b"part-?.parquet", b"part-1.parquet"));
        assert!(!wildcard_match(b"part-?.parquet", b"part-12.parquet"));
        assert!(wildcard_match(b"*-*.pq", b"a-b-c.pq"));
        assert!(!wildcard_match(b"*.parquet", b"a.parquet.tmp"));
        assert!(wildcard_match(b"*", b""));
    }
}
