//! SQLIO parameter files (`-F PARAMFILE`), accepted as SQLIO writes them: one target per
//! line, `path threads mask size_MB`, `#` starts a comment. Trailing columns may be left
//! out (1 thread, mask 0x0, size 0 = the existing file's size or the default). A size in
//! MB is 2^20 bytes, as SQLIO counts.

use std::path::{Path, PathBuf};

use crate::error::WorkbenchError;
use crate::spec::TargetSpec;

pub fn read(path: &Path) -> Result<Vec<TargetSpec>, WorkbenchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| WorkbenchError::ParamFileRead { path: path.to_path_buf(), source })?;
    parse(path, &text)
}

/// Parses the text of a parameter file; `path` only names the file in errors.
pub fn parse(path: &Path, text: &str) -> Result<Vec<TargetSpec>, WorkbenchError> {
    let mut targets = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let fail = |what: String| WorkbenchError::ParamFile { path: path.to_path_buf(), line_number, what };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() > 4 {
            return Err(fail(format!(
                "{} columns; expected `path threads mask size_MB` (a path with spaces is not supported)",
                fields.len()
            )));
        }
        let threads = match fields.get(1) {
            None => 1,
            Some(t) => match t.parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => return Err(fail(format!("thread count `{t}` must be a whole number above zero"))),
            },
        };
        let cpu_mask = match fields.get(2) {
            None => 0,
            Some(m) => parse_mask(m).ok_or_else(|| fail(format!("CPU mask `{m}` must be hexadecimal like 0x0 or 0x3")))?,
        };
        let size_bytes = match fields.get(3) {
            None => None,
            Some(s) => match s.parse::<u64>() {
                Ok(0) => None,
                Ok(mb) => Some(mb.checked_mul(1 << 20).ok_or_else(|| fail(format!("size `{s}` MB is too large")))?),
                Err(_) => return Err(fail(format!("size `{s}` must be a whole number of MB"))),
            },
        };
        targets.push(TargetSpec { path: PathBuf::from(fields[0]), threads, cpu_mask, size_bytes });
    }
    if targets.is_empty() {
        return Err(WorkbenchError::ParamFile {
            path: path.to_path_buf(),
            line_number: text.lines().count().max(1),
            what: "no target in the file (expected lines `path threads mask size_MB`)".into(),
        });
    }
    Ok(targets)
}

fn parse_mask(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlio_files_as_they_are() {
        // The file of the article's test 1b, with a comment and a blank line added.
        let text = "# two files, one LUN\nE:\\sqlio_test_file.dat 1 0x0 10240\n\nF:/second.dat 2 0x3 100  # trailing comment\n/data/x\n";
        let t = parse(Path::new("p.txt"), text).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].path, PathBuf::from("E:\\sqlio_test_file.dat"));
        assert_eq!(t[0].threads, 1);
        assert_eq!(t[0].cpu_mask, 0);
        assert_eq!(t[0].size_bytes, Some(10240 << 20));
        assert_eq!(t[1].threads, 2);
        assert_eq!(t[1].cpu_mask, 3);
        assert_eq!(t[1].size_bytes, Some(100 << 20));
        assert_eq!(t[2], TargetSpec { path: "/data/x".into(), threads: 1, cpu_mask: 0, size_bytes: None });
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let cases = [
            ("a 1 0x0 10\nb two 0x0 10\n", 2, "thread count"),
            ("a 0 0x0 10\n", 1, "thread count"),
            ("#c\n\na 1 0xZZ 10\n", 3, "CPU mask"),
            ("a 1 0x0 ten\n", 1, "size"),
            ("a 1 0x0 10 extra\n", 1, "columns"),
            ("# only comments\n", 1, "no target"),
        ];
        for (text, line, needle) in cases {
            let e = parse(Path::new("params.txt"), text).unwrap_err();
            let message = e.to_string();
            assert!(message.starts_with(&format!("params.txt:{line}: ")), "{message}");
            assert!(message.contains(needle), "{message}");
        }
    }
}
