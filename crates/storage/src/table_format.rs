//! How a table's rows sit on disk, as one enum: the heap formats (slotted 8 KB pages,
//! plain, row- or page-compressed) and the column store (row groups, optionally archived
//! with zstd). The catalog keeps the format's name (`TableMeta::format`, a string so older
//! catalogs and other tools read it); code decides by this enum, never by comparing or
//! prefix-matching the string.

use crate::error::StorageError;
use crate::heap::page_encoder::HeapFormat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Heap(HeapFormat),
    ColumnStore { archive: bool },
}

/// Every format, in the order of seed 001's table (heap, row, page, columnstore, archive).
pub const TABLE_FORMATS: [TableFormat; 5] = [
    TableFormat::Heap(HeapFormat::Plain),
    TableFormat::Heap(HeapFormat::Row),
    TableFormat::Heap(HeapFormat::Page),
    TableFormat::ColumnStore { archive: false },
    TableFormat::ColumnStore { archive: true },
];

impl TableFormat {
    /// Parses a `--compression` name: `none|row|page|columnstore|columnstore_archive`.
    pub fn parse(s: &str) -> Result<TableFormat, StorageError> {
        let s = s.to_ascii_lowercase();
        TABLE_FORMATS
            .into_iter()
            .find(|f| f.compression_name() == s)
            .ok_or_else(|| StorageError::InvalidArgument(format!("--compression {s:?}: choose none, row, page, columnstore or columnstore_archive")))
    }

    /// The format a catalog records (`heap`, `heap_row`, `heap_page`, `columnstore`,
    /// `columnstore_archive`).
    pub fn from_catalog_name(table: &str, name: &str) -> Result<TableFormat, StorageError> {
        TABLE_FORMATS
            .into_iter()
            .find(|f| f.catalog_name() == name)
            .ok_or_else(|| StorageError::UnknownTableFormat { table: table.to_string(), format: name.to_string() })
    }

    /// The name the catalog records.
    pub fn catalog_name(self) -> &'static str {
        match self {
            TableFormat::Heap(format) => format.catalog_name(),
            TableFormat::ColumnStore { archive: false } => "columnstore",
            TableFormat::ColumnStore { archive: true } => "columnstore_archive",
        }
    }

    /// The name `--compression` takes.
    pub fn compression_name(self) -> &'static str {
        match self {
            TableFormat::Heap(HeapFormat::Plain) => "none",
            TableFormat::Heap(HeapFormat::Row) => "row",
            TableFormat::Heap(HeapFormat::Page) => "page",
            TableFormat::ColumnStore { archive: false } => "columnstore",
            TableFormat::ColumnStore { archive: true } => "columnstore_archive",
        }
    }

    pub fn is_column_store(self) -> bool {
        matches!(self, TableFormat::ColumnStore { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for f in TABLE_FORMATS {
            assert_eq!(TableFormat::parse(f.compression_name()).unwrap(), f);
            assert_eq!(TableFormat::from_catalog_name("t", f.catalog_name()).unwrap(), f);
            assert_eq!(f.is_column_store(), f.catalog_name().starts_with("columnstore"));
        }
        assert_eq!(TableFormat::parse("COLUMNSTORE").unwrap(), TableFormat::ColumnStore { archive: false });
        assert!(TableFormat::parse("heap").is_err());
        assert!(TableFormat::from_catalog_name("t", "none").is_err());
        assert!(TableFormat::from_catalog_name("t", "columnstore_v9").is_err());
    }
}
