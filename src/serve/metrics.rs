//! `/metrics` in Prometheus' text format: requests by route and status, rows answered, batch
//! sizes, queue depth and request latency.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use crate::sync::lock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the latency histogram, in seconds.
const LATENCY_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0];
/// Upper bounds of the batch-size histogram, in rows.
const BATCH_BUCKETS: [f64; 8] = [1e2, 1e3, 1e4, 3e4, 1e5, 3e5, 1e6, 1e7];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], value: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; bounds.len()];
        }
        for (count, bound) in self.counts.iter_mut().zip(bounds) {
            if value <= *bound {
                *count += 1;
            }
        }
        self.sum += value;
        self.count += 1;
    }

    fn write(&self, out: &mut String, name: &str, bounds: &[f64]) {
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (k, bound) in bounds.iter().enumerate() {
            let count = self.counts.get(k).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

#[derive(Default)]
pub(crate) struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<Histogram>,
    batch_rows: Mutex<Histogram>,
    batches: AtomicU64,
    rows: AtomicU64,
}

impl Metrics {
    pub fn request(&self, route: &str, status: u16, seconds: f64) {
        *lock(&self.requests)
            .entry((route.to_string(), status))
            .or_default() += 1;
        lock(&self.latency).observe(&LATENCY_BUCKETS, seconds);
    }

    /// A shared dispatch of `rows` rows.
    pub fn batch(&self, rows: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        lock(&self.batch_rows).observe(&BATCH_BUCKETS, rows as f64);
    }

    /// The text of `/metrics`, with the service's gauges (name, value) after the counters.
    pub fn render(&self, queue_depth: usize, gauges: &[(&str, u64)]) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# TYPE closest_requests_total counter");
        for ((route, status), n) in lock(&self.requests).iter() {
            let _ = writeln!(
                out,
                "closest_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(out, "# TYPE closest_rows_total counter");
        let _ = writeln!(
            out,
            "closest_rows_total {}",
            self.rows.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# TYPE closest_batches_total counter");
        let _ = writeln!(
            out,
            "closest_batches_total {}",
            self.batches.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# TYPE closest_queue_depth gauge");
        let _ = writeln!(out, "closest_queue_depth {queue_depth}");
        for (name, value) in gauges {
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        lock(&self.batch_rows).write(&mut out, "closest_batch_rows", &BATCH_BUCKETS);
        lock(&self.latency).write(&mut out, "closest_request_seconds", &LATENCY_BUCKETS);
        out
    }
}
