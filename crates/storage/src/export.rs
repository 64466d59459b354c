//! The way out: query answers written to a new Parquet or CSV file (`COPY (query) TO
//! 'file'` in `flashscan sql`).
//!
//! The file must not exist: flashscan never replaces a file it did not create. The bytes go
//! to a temporary name beside the target, created with O_EXCL|O_NOFOLLOW (so a planted
//! link is never followed and nothing is overwritten), are synced, and only then take the
//! target's name by `link(2)`, which fails rather than replace anything that appeared
//! there meanwhile. On any error the temporary file (ours) is removed and no target is
//! left: a reader never sees a half-written answer.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::StorageError;

/// The file formats `COPY TO` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Parquet,
    Csv,
}

impl ExportFormat {
    /// The format named by `stored_as` (`STORED AS PARQUET`) or else by the file's extension.
    pub fn of(path: &Path, stored_as: Option<&str>) -> Result<ExportFormat, StorageError> {
        let named = match stored_as {
            Some(s) => s.to_ascii_lowercase(),
            None => path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default(),
        };
        match named.as_str() {
            "parquet" => Ok(ExportFormat::Parquet),
            "csv" => Ok(ExportFormat::Csv),
            _ => Err(StorageError::InvalidArgument(format!(
                "COPY TO {}: name a .parquet or .csv file (or add STORED AS PARQUET / STORED AS CSV)",
                path.display()
            ))),
        }
    }
}

enum Sink {
    Parquet(ArrowWriter<File>),
    Csv(arrow::csv::Writer<BufWriter<File>>),
}

/// A new file being written; `finish` gives it its name, dropping it unfinished removes it.
pub struct ExportWriter {
    sink: Option<Sink>,
    temp_path: PathBuf,
    target: PathBuf,
    row_count: u64,
}

/// Refuses a target that exists in any form (file, directory, link, even a dangling one).
pub fn check_new_target(target: &Path) -> Result<(), StorageError> {
    if std::fs::symlink_metadata(target).is_ok() {
        return Err(StorageError::InvalidArgument(format!(
            "{} exists: COPY TO writes a new file only; remove it or choose another name",
            target.display()
        )));
    }
    Ok(())
}

impl ExportWriter {
    pub fn create(target: &Path, format: ExportFormat, schema: SchemaRef) -> Result<ExportWriter, StorageError> {
        check_new_target(target)?;
        let file_name = target.file_name().ok_or_else(|| StorageError::InvalidArgument(format!("COPY TO {}: not a file name", target.display())))?;
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let temp_path = dir.join(format!(".{}.flashscan-{}-{nanos}.tmp", file_name.to_string_lossy(), std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&temp_path)
            .map_err(|e| StorageError::io("creating", &temp_path, e))?;
        // From here the temporary file is ours: `Drop` removes it on any error.
        let mut writer = ExportWriter { sink: None, temp_path, target: target.to_path_buf(), row_count: 0 };
        writer.sink = Some(match format {
            ExportFormat::Parquet => {
                let properties = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())).build();
                let w = ArrowWriter::try_new(file, schema, Some(properties)).map_err(|e| StorageError::Parquet { path: writer.target.clone(), source: e })?;
                Sink::Parquet(w)
            }
            ExportFormat::Csv => Sink::Csv(arrow::csv::WriterBuilder::new().with_header(true).build(BufWriter::with_capacity(1 << 20, file))),
        });
        Ok(writer)
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), StorageError> {
        let target = self.target.clone();
        match &mut self.sink {
            Some(Sink::Parquet(w)) => w.write(batch).map_err(|e| StorageError::Parquet { path: target, source: e })?,
            Some(Sink::Csv(w)) => w.write(batch).map_err(|e| StorageError::Arrow { path: target, source: e })?,
            None => return Err(StorageError::InvalidArgument("COPY TO writer already finished".into())),
        }
        self.row_count += batch.num_rows() as u64;
        Ok(())
    }

    /// Closes and syncs the file and gives it the target name; returns the rows written.
    pub fn finish(mut self) -> Result<u64, StorageError> {
        let target = self.target.clone();
        let file = match self.sink.take() {
            Some(Sink::Parquet(w)) => w.into_inner().map_err(|e| StorageError::Parquet { path: target.clone(), source: e })?,
            Some(Sink::Csv(w)) => {
                let mut buffered = w.into_inner();
                buffered.flush().map_err(|e| StorageError::io("writing", &self.temp_path, e))?;
                buffered.into_inner().map_err(|e| StorageError::io("writing", &self.temp_path, e.into_error()))?
            }
            None => return Err(StorageError::InvalidArgument("COPY TO writer already finished".into())),
        };
        file.sync_all().map_err(|e| StorageError::io("syncing", &self.temp_path, e))?;
        drop(file);
        // link(2) never replaces: a file that appeared at the target meanwhile stays as it is.
        std::fs::hard_link(&self.temp_path, &target).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StorageError::InvalidArgument(format!("{} appeared while the query ran: COPY TO writes a new file only", target.display()))
            } else {
                StorageError::io("naming", &target, e)
            }
        })?;
        let _ = std::fs::remove_file(&self.temp_path);
        if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = crate::catalog::sync_dir(dir);
        }
        self.temp_path = PathBuf::new();
        Ok(self.row_count)
    }
}

impl Drop for ExportWriter {
    fn drop(&mut self) {
        if !self.temp_path.as_os_str().is_empty() {
            self.sink = None;
            let _ = std::fs::remove_file(&self.temp_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        RecordBatch::try_from_iter([("a", a)]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn writes_new_files_and_refuses_existing_ones_and_links() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (name, format) in [("out.parquet", ExportFormat::Parquet), ("out.csv", ExportFormat::Csv)] {
            let target = dir.path().join(name);
            assert_eq!(ExportFormat::of(&target, None).ok(), Some(format));
            let mut w = ExportWriter::create(&target, format, batch().schema()).unwrap_or_else(|e| panic!("{e}"));
            w.write(&batch()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(w.finish().unwrap_or_else(|e| panic!("{e}")), 3);
            assert!(target.is_file());
            // A second COPY to the same name is refused and leaves the file as it was.
            let before = std::fs::read(&target).unwrap_or_default();
            assert!(ExportWriter::create(&target, format, batch().schema()).is_err());
            assert_eq!(std::fs::read(&target).unwrap_or_default(), before);
        }
        // A link planted at the target (even a dangling one) is not followed or replaced.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap_or_else(|e| panic!("{e}"));
        let link = dir.path().join("planted.csv");
        std::os::unix::fs::symlink(&victim, &link).unwrap_or_else(|e| panic!("{e}"));
        assert!(ExportWriter::create(&link, ExportFormat::Csv, batch().schema()).is_err());
        assert_eq!(std::fs::read(&victim).unwrap_or_default(), b"keep");
        // An unfinished writer leaves nothing behind.
        let target = dir.path().join("dropped.parquet");
        let mut w = ExportWriter::create(&target, ExportFormat::Parquet, batch().schema()).unwrap_or_else(|e| panic!("{e}"));
        w.write(&batch()).unwrap_or_else(|e| panic!("{e}"));
        drop(w);
        let names: Vec<String> = std::fs::read_dir(dir.path()).into_iter().flatten().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        assert!(!names.iter().any(|n| n.contains("dropped")), "{names:?}");
        assert!(ExportFormat::of(Path::new("x.json"), None).is_err());
        assert_eq!(ExportFormat::of(Path::new("x"), Some("PARQUET")).ok(), Some(ExportFormat::Parquet));
    }
}
