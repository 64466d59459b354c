//! `--json`: the report as one JSON object (fields documented in docs/workbench.md).

use serde::Serialize;

pub fn to_json<T: Serialize>(value: &T) -> String {
    // Reports hold only numbers, strings and lists: serialization cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
