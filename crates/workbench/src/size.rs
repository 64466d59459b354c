//! Sizes and durations as people type them: `8K`, `256K`, `1M`, `2G`, `512` (bytes);
//! `5`, `5s`, `500ms`, `2m` (durations). Binary multiples (K = 1024), as SQLIO and fio use.

use std::time::Duration;

/// Parses a byte count with an optional K/M/G/T suffix (optionally followed by `B` or `iB`).
pub fn parse_size_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits_end);
    if number.is_empty() {
        return Err(format!("`{text}` is not a size (use a number with an optional K, M, G or T suffix, e.g. 8K)"));
    }
    let value: u64 = number.parse().map_err(|_| format!("`{text}` is too large"))?;
    let multiplier: u64 = match suffix.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => return Err(format!("`{text}`: unknown size suffix `{suffix}` (use K, M, G or T)")),
    };
    value.checked_mul(multiplier).ok_or_else(|| format!("`{text}` is too large"))
}

/// Parses a duration: plain seconds, or a number with `ms`, `s`, `m` or `h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let number_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(number_end);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (use seconds, or a number with ms, s, m or h, e.g. 30s)"))?;
    let seconds = match suffix {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("`{text}`: unknown duration unit `{suffix}` (use ms, s, m or h)")),
    };
    if !seconds.is_finite() || seconds < 0.0 || seconds > 1e9 {
        return Err(format!("`{text}` is not a usable duration"));
    }
    // Whole microseconds: a saved job (`duration_us`) then replays the very same duration.
    Ok(Duration::from_micros((seconds * 1e6).round() as u64))
}

/// A comma-separated list of sizes: `8K,64K,256K`.
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, String> {
    text.split(',').map(parse_size_bytes).collect()
}

/// A comma-separated list of counts: `1,2,4,8`.
pub fn parse_count_list(text: &str, what: &str) -> Result<Vec<u32>, String> {
    text.split(',')
        .map(|p| p.trim().parse::<u32>().map_err(|_| format!("`{p}` is not a valid {what} (a whole number, or a comma-separated list)")))
        .collect()
}

/// Human form of a byte count, for messages: 8K, 1M, 1.5G.
pub fn format_size_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return if bytes % size == 0 { format!("{}{unit}", bytes / size) } else { format!("{:.1}{unit}", bytes as f64 / size as f64) };
        }
    }
    format!("{bytes}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("512"), Ok(512));
        assert_eq!(parse_size_bytes("8K"), Ok(8192));
        assert_eq!(parse_size_bytes("8k"), Ok(8192));
        assert_eq!(parse_size_bytes("256KB"), Ok(256 * 1024));
        assert_eq!(parse_size_bytes("1M"), Ok(1 << 20));
        assert_eq!(parse_size_bytes("2GiB"), Ok(2 << 30));
        assert!(parse_size_bytes("").is_err());
        assert!(parse_size_bytes("K").is_err());
        assert!(parse_size_bytes("8Q").is_err());
        assert!(parse_size_bytes("-1").is_err());
        assert!(parse_size_bytes("99999999999999999999").is_err());
        assert!(parse_size_bytes("99999999999T").is_err());
        assert_eq!(parse_size_list("8K,64K,256K"), Ok(vec![8192, 65536, 262144]));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("-5").is_err());
    }

    #[test]
    fn lists_and_format() {
        assert_eq!(parse_count_list("1,2,4", "queue depth"), Ok(vec![1, 2, 4]));
        assert!(parse_count_list("1,x", "queue depth").is_err());
        assert_eq!(format_size_bytes(8192), "8K");
        assert_eq!(format_size_bytes(1 << 20), "1M");
        assert_eq!(format_size_bytes(1536), "1.5K");
        assert_eq!(format_size_bytes(100), "100");
    }
}
