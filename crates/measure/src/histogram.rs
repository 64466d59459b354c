//! Latency accounting: an HdrHistogram in nanoseconds for percentiles (never derived from
//! means), plus exact SQLIO-style millisecond buckets. Recording allocates nothing: the
//! histogram's range is fixed up front and values past it saturate to its top (the true
//! maximum is kept apart, exactly).
//!
//! Error bound: 3 significant digits means every recorded value is off by at most 0.1%
//! of itself, so p99 = 812.0 µs is exact to within ±0.8 µs.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Buckets 0..=23 hold I/Os that took k ms (k ≤ latency < k+1); the last holds 24 ms and more.
pub const MS_BUCKET_COUNT: usize = 25;
/// Largest latency the histogram resolves (ten minutes); longer ones count at the top.
const LATENCY_NS_TRACKABLE_MAX: u64 = 600 * 1_000_000_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "HistogramRecord", try_from = "HistogramRecord")]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    ms_buckets: [u64; MS_BUCKET_COUNT],
    latency_ns_max: u64,
    latency_ns_sum: u128,
}

/// Percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    pub mean: f64,
}

/// A histogram as plain numbers, to pass it between processes (`--sweep processes=`):
/// every recorded (value, count) pair, so percentiles merged in the parent are exact.
#[derive(Serialize, Deserialize)]
struct HistogramRecord {
    values_ns_counts: Vec<(u64, u64)>,
    ms_buckets: Vec<u64>,
    latency_ns_max: u64,
    latency_ns_sum: u128,
}

impl From<LatencyHistogram> for HistogramRecord {
    fn from(h: LatencyHistogram) -> HistogramRecord {
        HistogramRecord {
            values_ns_counts: h.histogram.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect(),
            ms_buckets: h.ms_buckets.to_vec(),
            latency_ns_max: h.latency_ns_max,
            latency_ns_sum: h.latency_ns_sum,
        }
    }
}

impl TryFrom<HistogramRecord> for LatencyHistogram {
    type Error = String;
    fn try_from(r: HistogramRecord) -> Result<LatencyHistogram, String> {
        let mut h = LatencyHistogram::new();
        if r.ms_buckets.len() != MS_BUCKET_COUNT {
            return Err(format!("{} millisecond buckets, expected {MS_BUCKET_COUNT}", r.ms_buckets.len()));
        }
        for (value_ns, count) in r.values_ns_counts {
            h.histogram.saturating_record_n(value_ns.clamp(1, LATENCY_NS_TRACKABLE_MAX), count);
        }
        h.ms_buckets.copy_from_slice(&r.ms_buckets);
        h.latency_ns_max = r.latency_ns_max;
        h.latency_ns_sum = r.latency_ns_sum;
        Ok(h)
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        // Bounds are constants that hdrhistogram accepts; a failure here is a bug in them.
        let histogram = Histogram::new_with_bounds(1, LATENCY_NS_TRACKABLE_MAX, 3).expect("constant histogram bounds are valid");
        LatencyHistogram { histogram, ms_buckets: [0; MS_BUCKET_COUNT], latency_ns_max: 0, latency_ns_sum: 0 }
    }

    #[inline]
    pub fn record(&mut self, latency_ns: u64) {
        self.histogram.saturating_record(latency_ns.clamp(1, LATENCY_NS_TRACKABLE_MAX));
        let ms = (latency_ns / 1_000_000) as usize;
        self.ms_buckets[ms.min(MS_BUCKET_COUNT - 1)] += 1;
        self.latency_ns_max = self.latency_ns_max.max(latency_ns);
        self.latency_ns_sum += latency_ns as u128;
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Empties the histogram, keeping its memory (a new interval starts).
    pub fn reset(&mut self) {
        self.histogram.reset();
        self.ms_buckets = [0; MS_BUCKET_COUNT];
        self.latency_ns_max = 0;
        self.latency_ns_sum = 0;
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so `add` cannot fail; saturate rather than panic anyway.
        if self.histogram.add(&other.histogram).is_err() {
            for v in other.histogram.iter_recorded() {
                self.histogram.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        for (a, b) in self.ms_buckets.iter_mut().zip(other.ms_buckets.iter()) {
            *a += b;
        }
        self.latency_ns_max = self.latency_ns_max.max(other.latency_ns_max);
        self.latency_ns_sum += other.latency_ns_sum;
    }

    pub fn summary(&self) -> LatencySummary {
        if self.count() == 0 {
            return LatencySummary::default();
        }
        // A bucket's reported value is its top, which can pass the exact maximum by the
        // histogram's 0.1 %: cap percentiles at the maximum so p99 <= max always holds.
        let us = |q: f64| self.histogram.value_at_quantile(q).min(self.latency_ns_max.max(1)) as f64 / 1000.0;
        LatencySummary {
            p50: us(0.50),
            p90: us(0.90),
            p99: us(0.99),
            p99_9: us(0.999),
            max: self.latency_ns_max as f64 / 1000.0,
            mean: self.latency_ns_sum as f64 / self.count() as f64 / 1000.0,
        }
    }

    /// Percentage of I/Os in each millisecond bucket (SQLIO's `-LS` histogram).
    pub fn ms_bucket_pcts(&self) -> Vec<f64> {
        let total: u64 = self.ms_buckets.iter().sum();
        self.ms_buckets.iter().map(|&c| if total == 0 { 0.0 } else { c as f64 * 100.0 / total as f64 }).collect()
    }

    pub fn ms_bucket_counts(&self) -> &[u64; MS_BUCKET_COUNT] {
        &self.ms_buckets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_a_thousand_microseconds() {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000u64 {
            h.record(us * 1000);
        }
        let s = h.summary();
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.001 + 0.001;
        assert!(close(s.p50, 500.0), "{s:?}");
        assert!(close(s.p90, 900.0), "{s:?}");
        assert!(close(s.p99, 990.0), "{s:?}");
        assert!(close(s.p99_9, 999.0), "{s:?}");
        assert_eq!(s.max, 1000.0);
        assert!(close(s.mean, 500.5), "{s:?}");
        assert!(s.p99_9 <= s.max);
        // One odd value: every percentile is that value, never above the max.
        let mut one = LatencyHistogram::new();
        one.record(123_456_789);
        let o = one.summary();
        assert!(o.p50 <= o.max && o.p99_9 <= o.max && (o.p50 - 123_456.789).abs() < 124.0, "{o:?}");
    }

    #[test]
    fn a_slow_tail_moves_p99_not_p50() {
        let mut h = LatencyHistogram::new();
        for _ in 0..980 {
            h.record(100_000);
        }
        for _ in 0..20 {
            h.record(50_000_000);
        }
        let s = h.summary();
        assert!((s.p50 - 100.0).abs() < 0.2);
        assert!((s.p99 - 50_000.0).abs() < 50.0);
        assert_eq!(s.max, 50_000.0);
    }

    #[test]
    fn ms_buckets_split_at_whole_milliseconds() {
        let mut h = LatencyHistogram::new();
        for ns in [0, 999_999, 1_000_000, 1_500_000, 2_000_000, 23_999_999, 24_000_000, 3_000_000_000] {
            h.record(ns);
        }
        let c = h.ms_bucket_counts();
        assert_eq!(c[0], 2);
        assert_eq!(c[1], 2);
        assert_eq!(c[2], 1);
        assert_eq!(c[23], 1);
        assert_eq!(c[24], 2);
        assert_eq!(c.iter().sum::<u64>(), 8);
        let p = h.ms_bucket_pcts();
        assert_eq!(p.len(), 25);
        assert!((p[0] - 25.0).abs() < 1e-9);
        assert!((p.iter().sum::<f64>() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_histogram_survives_json_exactly() {
        let mut h = LatencyHistogram::new();
        for ns in [1u64, 999, 12_345, 1_500_000, 30_000_000, 3_000_000_000] {
            h.record(ns);
        }
        let back: LatencyHistogram = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back.count(), h.count());
        assert_eq!(back.summary(), h.summary());
        assert_eq!(back.ms_bucket_counts(), h.ms_bucket_counts());
        h.reset();
        assert_eq!(h.count(), 0);
        assert_eq!(h.summary(), LatencySummary::default());
    }

    #[test]
    fn merge_adds_counts_and_keeps_the_max() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record(1_000);
        b.record(5_000_000);
        b.record(2_000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.summary().max, 5000.0);
        assert_eq!(a.ms_bucket_counts()[5], 1);
        let empty = LatencyHistogram::new();
        assert_eq!(empty.summary(), LatencySummary::default());
        assert!(empty.ms_bucket_pcts().iter().all(|p| *p == 0.0));
    }
}
