//! `GET /metrics`: the server's counters in the Prometheus text format (version 0.0.4), every
//! name prefixed `ajs_`. The counters live in the server's state (one [`Metrics`] per server),
//! never in a global.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The `Content-Type` of `GET /metrics`.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The values of `ajs_runs_total`'s `outcome` label: `ok`, `suspended`, then every error kind's
/// name ([`ajs::ErrorKind::name`]); a kind not listed counts as `other`.
pub const OUTCOMES: [&str; 12] = [
    "ok",
    "suspended",
    "guest",
    "outOfFuel",
    "timeout",
    "quota",
    "callDepth",
    "boundary",
    "cancelled",
    "input",
    "hostPanic",
    "other",
];

/// Upper bounds (seconds) of `ajs_run_duration_seconds`' buckets.
pub const RUN_SECONDS_BUCKETS: [f64; 13] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];

/// Upper bounds (seconds) of `ajs_store_seconds`' buckets.
pub const STORE_SECONDS_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A histogram of durations: a count per bucket (not cumulative; summed when rendered), the
/// count and the sum in nanoseconds.
struct Histogram {
    bounds: &'static [f64],
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }

    fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = self.bounds.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// `name_bucket{labels,le="…"}` lines, `_sum` and `_count`; `labels` is `k="v",` or empty.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (b, n) in self.bounds.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let bare = labels.trim_end_matches(',');
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(bare));
        let _ = writeln!(out, "{name}_count{} {count}", braces(bare));
    }
}

/// The server's counters.
pub struct Metrics {
    runs: [AtomicU64; OUTCOMES.len()],
    fuel_milli: AtomicU64,
    run_seconds: Histogram,
    suspended: AtomicI64,
    in_flight: AtomicI64,
    store: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            runs: std::array::from_fn(|_| AtomicU64::new(0)),
            fuel_milli: AtomicU64::new(0),
            run_seconds: Histogram::new(&RUN_SECONDS_BUCKETS),
            suspended: AtomicI64::new(0),
            in_flight: AtomicI64::new(0),
            store: Mutex::new(BTreeMap::new()),
        }
    }
}

/// A run executing: counted in `ajs_runs_in_flight` until dropped.
pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn outcome_index(label: &str) -> usize {
    OUTCOMES
        .iter()
        .position(|l| *l == label)
        .unwrap_or(OUTCOMES.len() - 1)
}

impl Metrics {
    /// Counts a run as executing until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// Records a run that ended (or stopped) with `outcome` (one of [`OUTCOMES`]), having
    /// spent `fuel` and taken `took`.
    pub fn record_run(&self, outcome: &str, fuel: f64, took: Duration) {
        self.runs[outcome_index(outcome)].fetch_add(1, Ordering::Relaxed);
        if fuel.is_finite() && fuel > 0.0 {
            self.fuel_milli
                .fetch_add((fuel * 1000.0).round() as u64, Ordering::Relaxed);
        }
        self.run_seconds.observe(took);
    }

    /// Records a finished run's outcome.
    pub fn record_outcome(&self, out: &ajs::Outcome, took: Duration) {
        let label = out.error.as_ref().map_or("ok", |e| e.kind.name());
        self.record_run(label, out.fuel_used, took);
    }

    /// Sets `ajs_runs_suspended`: the runs waiting for a decision.
    pub fn set_suspended(&self, n: u64) {
        self.suspended
            .store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// Records one store operation `op` (`insert`, `claim`, …) that took `took`, in
    /// `ajs_store_seconds{op="…"}`.
    pub fn observe_store(&self, op: &'static str, took: Duration) {
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        store
            .entry(op)
            .or_insert_with(|| Histogram::new(&STORE_SECONDS_BUCKETS))
            .observe(took);
    }

    /// The Prometheus text exposition of every counter.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP ajs_runs_total Runs ended (or suspended), by outcome kind.\n");
        out.push_str("# TYPE ajs_runs_total counter\n");
        for (label, n) in OUTCOMES.iter().zip(&self.runs) {
            let _ = writeln!(
                out,
                "ajs_runs_total{{outcome=\"{label}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP ajs_fuel_used_total Fuel spent by runs.\n");
        out.push_str("# TYPE ajs_fuel_used_total counter\n");
        let fuel = self.fuel_milli.load(Ordering::Relaxed) as f64 / 1000.0;
        let _ = writeln!(out, "ajs_fuel_used_total {fuel}");
        out.push_str("# HELP ajs_run_duration_seconds Time from a run's start to its end.\n");
        out.push_str("# TYPE ajs_run_duration_seconds histogram\n");
        self.run_seconds
            .render(&mut out, "ajs_run_duration_seconds", "");
        out.push_str("# HELP ajs_runs_suspended Runs waiting for a decision.\n");
        out.push_str("# TYPE ajs_runs_suspended gauge\n");
        let _ = writeln!(
            out,
            "ajs_runs_suspended {}",
            self.suspended.load(Ordering::Relaxed)
        );
        out.push_str("# HELP ajs_runs_in_flight Runs executing now.\n");
        out.push_str("# TYPE ajs_runs_in_flight gauge\n");
        let _ = writeln!(
            out,
            "ajs_runs_in_flight {}",
            self.in_flight.load(Ordering::Relaxed)
        );
        out.push_str("# HELP ajs_store_seconds Time of run-store operations, by operation.\n");
        out.push_str("# TYPE ajs_store_seconds histogram\n");
        let store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        for (op, h) in store.iter() {
            h.render(&mut out, "ajs_store_seconds", &format!("op=\"{op}\","));
        }
        out
    }
}
