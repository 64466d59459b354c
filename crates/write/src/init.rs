//! `flashscan init DB [--volumes DIR,…] [--wal-dir DIR]`: an empty database that takes
//! writes: its catalog (with the log's identity and redo point) and its write-ahead log.

use std::path::{Path, PathBuf};

use flashscan_storage::{Catalog, WriteMeta};
use flashscan_wal::files::read_control;
use flashscan_wal::{DatabaseIdentity, Wal, WalConfig, FIRST_RECORD_LSN};

use crate::error::{file_err, WriteError};

/// The log directory inside the database when no `--wal-dir` is given.
pub const DEFAULT_WAL_DIR_NAME: &str = "wal";

#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// Directories new data files go to; the database directory when empty.
    pub volumes: Vec<PathBuf>,
    /// The log on another volume: an existing, empty directory.
    pub wal_dir: Option<PathBuf>,
    /// Log segment size (tests use small ones); the log's default when `None`.
    pub segment_size_bytes: Option<u64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct InitReport {
    pub db: PathBuf,
    pub wal_dir: PathBuf,
    pub database_id: String,
    pub volumes: Vec<PathBuf>,
}

fn absolute(p: &Path) -> Result<PathBuf, WriteError> {
    std::path::absolute(p).map_err(file_err(p))
}

/// Names the first entry of a non-empty directory.
fn first_entry(dir: &Path) -> Result<Option<String>, WriteError> {
    let mut entries = std::fs::read_dir(dir).map_err(file_err(dir))?;
    Ok(entries.next().map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()).unwrap_or_else(|_| "?".into())))
}

pub fn init_database(db_dir: &Path, options: &InitOptions) -> Result<InitReport, WriteError> {
    if Catalog::exists(db_dir) {
        return Err(WriteError::InvalidArgument(format!("{} is already a flashscan database: choose a new directory", db_dir.display())));
    }
    let created_db_dir = if db_dir.exists() {
        if !db_dir.is_dir() {
            return Err(WriteError::InvalidArgument(format!("{} exists and is not a directory: choose a new directory", db_dir.display())));
        }
        if let Some(name) = first_entry(db_dir)? {
            return Err(WriteError::InvalidArgument(format!(
                "{} is not empty (it holds {name}): flashscan makes databases only in new or empty directories",
                db_dir.display()
            )));
        }
        false
    } else {
        true
    };
    let mut volumes = Vec::with_capacity(options.volumes.len());
    for v in &options.volumes {
        if !v.is_dir() {
            return Err(WriteError::InvalidArgument(format!("volume {} is not a directory: create it first", v.display())));
        }
        volumes.push(absolute(v)?);
    }
    let (wal_path, wal_dir_in_catalog) = match &options.wal_dir {
        Some(w) => {
            if !w.is_dir() {
                return Err(WriteError::InvalidArgument(format!("--wal-dir {} does not exist: create it first (an empty directory)", w.display())));
            }
            if let Ok(control) = read_control(w) {
                return Err(WriteError::InvalidArgument(format!(
                    "--wal-dir {} holds the write-ahead log of another database ({:?}): give an empty directory",
                    w.display(),
                    control.identity.label
                )));
            }
            if let Some(name) = first_entry(w)? {
                return Err(WriteError::InvalidArgument(format!("--wal-dir {} is not empty (it holds {name}): give an empty directory", w.display())));
            }
            let abs = absolute(w)?;
            (abs.clone(), abs.to_string_lossy().into_owned())
        }
        None => (db_dir.join(DEFAULT_WAL_DIR_NAME), DEFAULT_WAL_DIR_NAME.to_string()),
    };
    if created_db_dir {
        std::fs::create_dir_all(db_dir).map_err(file_err(db_dir))?;
    }
    let id: u128 = rand::random();
    let label = absolute(db_dir)?.to_string_lossy().into_owned();
    let result = (|| {
        let mut config = WalConfig::new(&wal_path);
        if let Some(s) = options.segment_size_bytes {
            config.segment_size_bytes = s;
        }
        Wal::create(config, DatabaseIdentity { id, label })?.close()?;
        let mut catalog = Catalog {
            generation: 0,
            next_file_id: 1,
            next_lsn: 1,
            write: Some(WriteMeta {
                database_id: format!("{id:032x}"),
                wal_dir: wal_dir_in_catalog,
                volumes: volumes.iter().map(|v| v.to_string_lossy().into_owned()).collect(),
                redo_lsn: FIRST_RECORD_LSN.0,
                next_table_id: 1,
                table_ids: Default::default(),
            }),
            ..Catalog::default()
        };
        // Volumes are declared the way loads declare them (marker file, canonical path), so
        // the catalog's path confinement accepts the checkpoint's files there.
        flashscan_storage::load::declare_volumes(&mut catalog, db_dir, &volumes)?;
        catalog.write_atomic(db_dir)?;
        Ok::<_, WriteError>(())
    })();
    if let Err(e) = result {
        // Nothing half-made stays visible: without its catalog the directory is no
        // database; remove what this call created (only that).
        if created_db_dir {
            let _ = std::fs::remove_dir_all(db_dir);
        } else if options.wal_dir.is_none() {
            let _ = std::fs::remove_dir_all(&wal_path);
        }
        return Err(e);
    }
    Ok(InitReport { db: db_dir.to_path_buf(), wal_dir: wal_path, database_id: format!("{id:032x}"), volumes })
}
