//! flashscan's SQL switches as one DataFusion config extension (prefix `flashscan`): a
//! session changes them with `SET flashscan.runtime_filters = false` and reads them with
//! `SHOW flashscan.runtime_filters` (`flashscan sql` and the server's wire alike), and the
//! planner rules and scans read the session's values from its `ConfigOptions`, never the
//! process environment.
//!
//! Each switch is on by default (but `join_order`, not yet a measured win) and exists to time
//! flashscan's way against DataFusion's side by side (same answers either way). A new session
//! starts from the environment: `FLASHSCAN_SQL_<NAME>=0` turns `flashscan.<name>` off (`=1`
//! on), as benchmarks and docs use them.
//! `from_env` is the one place those variables are read.

use datafusion::common::config::{ConfigExtension, ConfigField, ConfigOptions, ExtensionOptions, Visit};
use datafusion::common::config_namespace;

// `config_namespace!` rather than `extensions_options!`: DataFusion 55's `extensions_options!`
// lists its entries without the prefix, and `SHOW flashscan.x` looks the full key up in them.
config_namespace! {
    /// The session's flashscan switches (`SET flashscan.<name> = true|false`).
    pub struct FlashscanSettings {
        // Until the scan showed the runtime filters through `apply_expressions` the joins never
        // filled them; filled, TPC-H Q18 at SF 10 ran in 10.4 s against 30.6 s
        // (docs/benchmarks.md). The scan sets aside one that keeps most rows, so it costs
        // little where it does not pay.
        /// Scans take DataFusion's runtime filters (hash join build sides, TopK) and drop the probe rows they rule out before they are repartitioned and probed.
        pub runtime_filters: bool, transform = switch_text, default = true
        // A join planner that takes a string match for 20 % builds hash tables on the wrong
        // side (TPC-H Q9: `p_name LIKE '%green%'` keeps 5.4 %).
        /// Filter conjuncts interval analysis cannot bound are estimated from a sample of the table read at planning (off: 20 %, as DataFusion's FilterExec takes).
        pub filter_sample: bool, transform = switch_text, default = true
        /// A column store scan reports the Arrow size of the columns it hands on (off: the pages of all its table's columns).
        pub column_bytes: bool, transform = switch_text, default = true
        // Issue 13. `slices` and `views` answer what the table provider declares before any
        // scan is planned (its schema, which filters are exact), so a session's tables take
        // them when it registers them (`FlashscanTable::new`), not each query. Off, the
        // answers are the same: `cargo test -p flashscan-sql` passes either way.
        /// Column store scans decode batches straight from the segments and evaluate the query's filters themselves (off: whole row groups, DataFusion filters above the scan). Fixed per table when the session registers its tables.
        pub slices: bool, transform = switch_text, default = true
        // A row of a dictionary-coded segment is then one 16-byte view copied from its
        // entry's, no string bytes copied; DataFusion 55 carries views through filters,
        // joins, group-by and its string functions (as it does for Parquet).
        /// Column store scans hand strings on as Utf8View (off: Utf8; off with the slices too). Fixed per table when the session registers its tables.
        pub views: bool, transform = switch_text, default = true
        /// Scans evaluate LIKE patterns of several `%` pieces by one substring search per piece (off: Arrow's regular expression per row).
        pub piecewise_like: bool, transform = switch_text, default = true
        /// Partitioned hash joins build on the input with fewer estimated rows (off: DataFusion's choice).
        pub build_on_fewer_rows: bool, transform = switch_text, default = true
        /// A join's build side that gathers several partitions starts reading when the join first asks for it, so the runtime filters of the joins above it are filled first (off: when the plan starts, as DataFusion does).
        pub deferred_build: bool, transform = switch_text, default = true
        // Issue 32 item 2: DataFusion 55 joins tables in the order the query names them. Off
        // by default until it wins: at SF 1 it won Q2, Q10, Q11, Q16 (1.3-1.5x) and lost Q3,
        // Q17 (0.7-0.9x), geometric mean 1.03x and 0.99x in two noisy runs (docs/benchmarks.md).
        /// Inner-join trees of three or more relations are reordered by estimated cardinality (exhaustively up to 12 relations, greedily beyond); off by default: the order the query gives (the answers are the same either way).
        pub join_order: bool, transform = switch_text, default = false
        /// Small-domain partial aggregates over column store scans are answered in the scan by flashscan's kernel.
        pub aggregate_pushdown: bool, transform = switch_text, default = true
        /// Scans whose filters fix the leading columns of one of the table's SQL indexes read only the rows the index names (off: every scan reads the whole table; the answers are the same).
        pub index_lookups: bool, transform = switch_text, default = true
        /// `flashscan serve` plans a statement whose text differs from an earlier one only in its numbers and strings by putting them into the earlier plan (off: every statement is parsed and planned; the answers are the same).
        pub plan_shapes: bool, transform = switch_text, default = true
    }
}

impl ConfigExtension for FlashscanSettings {
    const PREFIX: &'static str = "flashscan";
}

impl ExtensionOptions for FlashscanSettings {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> datafusion::common::Result<()> {
        ConfigField::set(self, key, value)
    }

    /// Keys with the prefix (`flashscan.runtime_filters`), as `SHOW` and
    /// `information_schema.df_settings` name them.
    fn entries(&self) -> Vec<datafusion::common::config::ConfigEntry> {
        struct Entries(Vec<datafusion::common::config::ConfigEntry>);
        impl Visit for Entries {
            fn some<V: std::fmt::Display>(&mut self, key: &str, value: V, description: &'static str) {
                self.0.push(datafusion::common::config::ConfigEntry { key: key.to_string(), value: Some(value.to_string()), description });
            }
            fn none(&mut self, key: &str, description: &'static str) {
                self.0.push(datafusion::common::config::ConfigEntry { key: key.to_string(), value: None, description });
            }
        }
        let mut entries = Entries(Vec::new());
        ConfigField::visit(self, &mut entries, Self::PREFIX, "");
        entries.0
    }
}

/// The environment variable that sets a new session's `key` (`runtime_filters` →
/// `FLASHSCAN_SQL_RUNTIME_FILTERS`).
pub fn env_var_of(key: &str) -> String {
    format!("FLASHSCAN_SQL_{}", key.to_ascii_uppercase())
}

/// A switch's value in the environment that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?}: not a switch value (use 1 or 0, true or false, on or off)")]
pub struct SettingsError {
    pub variable: String,
    pub value: String,
}

/// A switch's value as DataFusion's bool parser takes it: `1`/`0` (as the environment
/// variables always took them) and `on`/`off` (as PostgreSQL clients write them) become
/// `true`/`false`; anything else goes on as it is, and the parser refuses all but
/// `true`/`false` (any case) rather than guess. The one parsing of a switch: the
/// environment, `SET` in `flashscan sql` and `SET` over the wire all go through it.
fn switch_text(value: &str) -> String {
    let value = value.trim().trim_matches('\'').to_ascii_lowercase();
    match value.as_str() {
        "1" | "on" => "true".into(),
        "0" | "off" => "false".into(),
        _ => value,
    }
}

impl FlashscanSettings {
    /// The defaults a new session starts from: the built-in ones, each overridden by its
    /// `FLASHSCAN_SQL_<NAME>` when set. A value that is not a switch is an error naming it.
    pub fn from_env() -> Result<FlashscanSettings, SettingsError> {
        // Not UTF-8: shown lossily, and refused as any other value that is not a switch.
        FlashscanSettings::from_lookup(|variable| std::env::var_os(variable).map(|v| v.to_string_lossy().into_owned()))
    }

    /// `from_env` over any lookup (tests pass a map instead of changing the process).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<FlashscanSettings, SettingsError> {
        let mut settings = FlashscanSettings::default();
        for entry in ExtensionOptions::entries(&settings) {
            let key = entry.key.strip_prefix("flashscan.").unwrap_or(&entry.key);
            let variable = env_var_of(key);
            let Some(value) = lookup(&variable) else { continue };
            if ConfigField::set(&mut settings, key, &value).is_err() {
                return Err(SettingsError { variable, value });
            }
        }
        Ok(settings)
    }

    /// The session's settings from its config; the built-in defaults when the config has
    /// none registered (a context made without `FlashscanSession`, as unit tests make).
    pub fn of(config: &ConfigOptions) -> FlashscanSettings {
        config.extensions.get::<FlashscanSettings>().cloned().unwrap_or_default()
    }

    /// Column store strings as views: needs the slices too (the old path is unchanged).
    pub fn string_views(&self) -> bool {
        self.slices && self.views
    }

    /// The keys that shape the tables a session registers (their schema, which filters the
    /// scan takes over): a change takes effect when the tables are registered again.
    pub const TABLE_KEYS: [&'static str; 2] = ["slices", "views"];
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from_map(pairs: &[(&str, &str)]) -> Result<FlashscanSettings, SettingsError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        FlashscanSettings::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn every_switch_but_join_order_is_on_without_the_environment() {
        let s = from_map(&[]).unwrap();
        let entries = ExtensionOptions::entries(&s);
        assert_eq!(entries.len(), 12);
        let on = |e: &datafusion::common::config::ConfigEntry| e.value.as_deref() == Some(if e.key == "flashscan.join_order" { "false" } else { "true" });
        assert!(entries.iter().all(|e| e.key.starts_with("flashscan.") && on(e)), "{entries:?}");
        assert!(from_map(&[("FLASHSCAN_SQL_JOIN_ORDER", "1")]).unwrap().join_order);
    }

    #[test]
    fn each_variable_sets_its_own_switch() {
        let s = from_map(&[("FLASHSCAN_SQL_RUNTIME_FILTERS", "0"), ("FLASHSCAN_SQL_BUILD_ON_FEWER_ROWS", "false"), ("FLASHSCAN_SQL_VIEWS", "1"), ("FLASHSCAN_SQL_DEFERRED_BUILD", "0")]).unwrap();
        assert!(!s.deferred_build);
        assert!(!s.runtime_filters);
        assert!(!s.build_on_fewer_rows);
        assert!(s.views && s.slices && s.filter_sample && s.column_bytes && s.piecewise_like && s.aggregate_pushdown);
        let s = from_map(&[("FLASHSCAN_SQL_SLICES", "0")]).unwrap();
        assert!(s.views && !s.string_views(), "views need the slices");
    }

    #[test]
    fn a_bad_value_is_a_one_line_error_naming_the_variable() {
        let e = from_map(&[("FLASHSCAN_SQL_FILTER_SAMPLE", "yes please")]).unwrap_err();
        assert_eq!(e.variable, "FLASHSCAN_SQL_FILTER_SAMPLE");
        let text = e.to_string();
        assert!(text.contains("FLASHSCAN_SQL_FILTER_SAMPLE=\"yes please\"") && !text.contains('\n'), "{text}");
    }

    #[test]
    fn the_config_extension_takes_set_and_shows_under_its_prefix() {
        let mut config = ConfigOptions::new();
        config.extensions.insert(FlashscanSettings::default());
        config.set("flashscan.piecewise_like", "false").unwrap();
        assert!(!FlashscanSettings::of(&config).piecewise_like);
        config.set("flashscan.piecewise_like", "ON").unwrap();
        assert!(FlashscanSettings::of(&config).piecewise_like);
        config.set("flashscan.column_bytes", "'0'").unwrap();
        assert!(!FlashscanSettings::of(&config).column_bytes);
        assert!(config.set("flashscan.no_such_switch", "false").is_err());
        assert!(config.set("flashscan.runtime_filters", "maybe").is_err());
        let shown: Vec<_> = config.entries().into_iter().filter(|e| e.key.starts_with("flashscan.")).collect();
        assert_eq!(shown.len(), ExtensionOptions::entries(&FlashscanSettings::default()).len(), "every switch shows");
        assert!(shown.iter().any(|e| e.key == "flashscan.column_bytes" && e.value.as_deref() == Some("false")), "{shown:?}");
    }
}
