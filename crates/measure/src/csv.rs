//! The one CSV writer of every report (workbench, benchmarks): a header and rows of
//! cells, RFC 4180 quoting where a cell needs it. Printers format the numbers; this only
//! joins them, so every CSV in flashscan quotes and ends lines alike.

/// A cell as CSV: quoted (with doubled quotes) when it holds a comma, a quote or a newline.
pub fn quote(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_string() }
}

/// One line of cells, quoted where needed, without the line end.
pub fn line<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> String {
    cells.into_iter().map(|c| quote(c.as_ref())).collect::<Vec<_>>().join(",")
}

/// A whole CSV: the header line, then each row, every line ending in `\n`.
pub fn document<S: AsRef<str>>(header: &[&str], rows: impl IntoIterator<Item = Vec<S>>) -> String {
    let mut out = line(header.iter().copied());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_cells_that_need_it() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(line(["x", "1,2", ""]), "x,\"1,2\",");
        assert_eq!(document(&["a", "b"], [vec!["1", "2"], vec!["3", "4"]]), "a,b\n1,2\n3,4\n");
    }
}
