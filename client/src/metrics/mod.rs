//! Prometheus metrics of this process: FUSE requests, metadata procedure
//! calls, object store requests, caches, write buffers and background work.
//! A mount serves them on `--metrics ADDR` (`server`) and answers them
//! through its control file (`jfs stats`). Figures of the volume itself
//! (usage, quotas, tiers) are in SQL (view `jfs.metrics`), not here: every
//! mount would report the same numbers.
mod server;

pub use server::{bind, serve};

use std::sync::{LazyLock, OnceLock};

use prometheus::core::Collector;
use prometheus::{
    exponential_buckets, Counter, Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every metric's name starts with this.
const PREFIX: &str = "jfs_";

/// Latency buckets: 100 µs doubling up to about 6.5 s.
fn latency_buckets() -> Vec<f64> {
    exponential_buckets(0.0001, 2.0, 17).expect("valid buckets")
}

/// This process's metrics (labels are bounded: FUSE operations, procedure
/// names, object operations, cache names).
pub struct Metrics {
    pub fuse_ops: HistogramVec,
    pub fuse_errors: IntCounterVec,
    pub fuse_read_bytes: IntCounter,
    pub fuse_written_bytes: IntCounter,
    pub meta_calls: HistogramVec,
    pub meta_retries: IntCounterVec,
    pub meta_errors: IntCounterVec,
    pub object_requests: HistogramVec,
    pub object_errors: IntCounterVec,
    pub object_bytes: IntCounterVec,
    pub cache_hits: IntCounterVec,
    pub cache_misses: IntCounterVec,
    pub cache_bytes: IntGaugeVec,
    pub write_buffer_bytes: IntGauge,
    pub slices_deleted: IntCounter,
    pub objects_deleted: IntCounter,
    pub compactions: IntCounter,
    pub compacted_slices: IntCounter,
    pub sessions_cleaned: IntCounter,
    pub trash_purged: IntCounter,
    pub unlinked_freed: IntCounter,
    pub backups: IntCounter,
    /// Creates answered under a directory's lease while the commit of its
    /// batch was in flight (holding the lease).
    pub lease_creates_in_flight: IntCounter,
    /// Slices this process committed with their bytes kept in the
    /// database (`--inline-max`), and those bytes (as stored: encoded).
    pub inline_slices: IntCounter,
    pub inline_bytes: IntCounter,
    /// Seconds the hot standby a read-only mount reads is behind its
    /// primary (0: caught up; absent on a mount of a primary).
    pub replica_lag_seconds: Gauge,
    /// Reads offered to the standby that serves reads (`--meta-replica`),
    /// by outcome: served, behind (the primary answered), failed.
    pub replica_reads: IntCounterVec,
    pub process_cpu_seconds: Counter,
    pub process_resident_bytes: IntGauge,
    pub start_time_seconds: Gauge,
    pub build_info: IntGaugeVec,
}

fn name(short: &str) -> String {
    format!("{PREFIX}{short}")
}

fn histogram(short: &str, help: &str, label: &str) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name(short), help).buckets(latency_buckets()),
        &[label],
    )
    .expect("valid histogram")
}

fn counter(short: &str, help: &str) -> IntCounter {
    IntCounter::new(name(short), help).expect("valid counter")
}

fn counter_vec(short: &str, help: &str, label: &str) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name(short), help), &[label]).expect("valid counter")
}

fn gauge(short: &str, help: &str) -> IntGauge {
    IntGauge::new(name(short), help).expect("valid gauge")
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            fuse_ops: histogram(
                "fuse_op_duration_seconds",
                "FUSE requests by operation: how long each took",
                "op",
            ),
            fuse_errors: counter_vec(
                "fuse_errors_total",
                "FUSE requests answered with an errno (a lookup's ENOENT too, unless the \
                 mount answers a missing name from its cache), by operation",
                "op",
            ),
            fuse_read_bytes: counter("fuse_read_bytes_total", "Bytes read through the mount"),
            fuse_written_bytes: counter(
                "fuse_written_bytes_total",
                "Bytes written through the mount",
            ),
            meta_calls: histogram(
                "meta_call_duration_seconds",
                "Calls of jfs.* procedures by procedure: how long each took (retries included)",
                "procedure",
            ),
            meta_retries: counter_vec(
                "meta_retries_total",
                "Procedure calls retried after a serialization failure or deadlock",
                "procedure",
            ),
            meta_errors: counter_vec(
                "meta_errors_total",
                "Procedure calls that failed (database errors, not errno answers)",
                "procedure",
            ),
            object_requests: histogram(
                "object_request_duration_seconds",
                "Object store requests by operation: how long each took",
                "op",
            ),
            object_errors: counter_vec(
                "object_errors_total",
                "Object store requests that failed, by operation",
                "op",
            ),
            object_bytes: counter_vec(
                "object_bytes_total",
                "Bytes moved to (put) and from (get) the object store",
                "op",
            ),
            cache_hits: counter_vec(
                "cache_hits_total",
                "Reads a cache answered: memory and disk block caches, attribute cache",
                "cache",
            ),
            cache_misses: counter_vec(
                "cache_misses_total",
                "Reads a cache could not answer",
                "cache",
            ),
            cache_bytes: IntGaugeVec::new(
                Opts::new(name("cache_bytes"), "Bytes a block cache holds now"),
                &["cache"],
            )
            .expect("valid gauge"),
            write_buffer_bytes: gauge(
                "write_buffer_bytes",
                "Bytes of written data held in memory until uploaded",
            ),
            slices_deleted: counter(
                "slices_deleted_total",
                "Freed slices whose objects this process deleted",
            ),
            objects_deleted: counter(
                "objects_deleted_total",
                "Objects of freed slices this process deleted",
            ),
            compactions: counter("compactions_total", "Chunks compacted"),
            compacted_slices: counter("compacted_slices_total", "Slices merged away by compaction"),
            sessions_cleaned: counter(
                "sessions_cleaned_total",
                "Dead sessions of other mounts this mount cleaned up",
            ),
            trash_purged: counter("trash_purged_total", "Expired trash entries purged"),
            unlinked_freed: counter(
                "unlinked_freed_total",
                "Removed files kept for other mounts, freed",
            ),
            backups: counter("backups_total", "Metadata backups this mount wrote"),
            lease_creates_in_flight: counter(
                "lease_creates_in_flight_total",
                "Creates answered under a directory's lease while the commit of its batch was \
                 in flight",
            ),
            inline_slices: counter(
                "inline_slices_total",
                "Slices this process committed with their bytes kept in the database (--inline-max)",
            ),
            inline_bytes: counter(
                "inline_bytes_total",
                "Bytes this process kept in the database with the slices it committed (as stored)",
            ),
            process_cpu_seconds: Counter::new(
                name("process_cpu_seconds_total"),
                "CPU time this process used (user and system)",
            )
            .expect("valid counter"),
            process_resident_bytes: gauge(
                "process_resident_bytes",
                "Resident memory of this process",
            ),
            replica_lag_seconds: Gauge::new(
                name("replica_lag_seconds"),
                "How far behind its primary the hot standby this mount reads replays (0: caught up)",
            )
            .expect("valid gauge"),
            replica_reads: counter_vec(
                "replica_reads_total",
                "Metadata reads offered to the standby of --meta-replica: served by it, or by the \
                 primary because it was behind or failed",
                "outcome",
            ),
            start_time_seconds: Gauge::new(
                name("process_start_time_seconds"),
                "When this process started, seconds since the epoch",
            )
            .expect("valid gauge"),
            build_info: IntGaugeVec::new(
                Opts::new(name("build_info"), "This client's version (value 1)"),
                &["version"],
            )
            .expect("valid gauge"),
        };
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        if let Some(started) = process_start_time() {
            m.start_time_seconds.set(started);
        }
        m
    }

    fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.fuse_ops.clone()),
            Box::new(self.fuse_errors.clone()),
            Box::new(self.fuse_read_bytes.clone()),
            Box::new(self.fuse_written_bytes.clone()),
            Box::new(self.meta_calls.clone()),
            Box::new(self.meta_retries.clone()),
            Box::new(self.replica_reads.clone()),
            Box::new(self.meta_errors.clone()),
            Box::new(self.object_requests.clone()),
            Box::new(self.object_errors.clone()),
            Box::new(self.object_bytes.clone()),
            Box::new(self.cache_hits.clone()),
            Box::new(self.cache_misses.clone()),
            Box::new(self.cache_bytes.clone()),
            Box::new(self.write_buffer_bytes.clone()),
            Box::new(self.slices_deleted.clone()),
            Box::new(self.objects_deleted.clone()),
            Box::new(self.compactions.clone()),
            Box::new(self.compacted_slices.clone()),
            Box::new(self.sessions_cleaned.clone()),
            Box::new(self.trash_purged.clone()),
            Box::new(self.unlinked_freed.clone()),
            Box::new(self.backups.clone()),
            Box::new(self.lease_creates_in_flight.clone()),
            Box::new(self.inline_slices.clone()),
            Box::new(self.inline_bytes.clone()),
            Box::new(self.process_cpu_seconds.clone()),
            Box::new(self.process_resident_bytes.clone()),
            Box::new(self.start_time_seconds.clone()),
            Box::new(self.build_info.clone()),
        ]
    }

    /// Reads this process's CPU time and resident memory from /proc.
    fn refresh_process(&self) {
        if let (Some(user), Some(system)) = (proc_stat_field(14), proc_stat_field(15)) {
            // a counter only goes up: add what was used since the last reading
            let used = (user + system) / USER_HZ - self.process_cpu_seconds.get();
            if used > 0.0 {
                self.process_cpu_seconds.inc_by(used);
            }
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            let resident_kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok());
            if let Some(kib) = resident_kib {
                self.process_resident_bytes.set(kib * 1024);
            }
        }
    }
}

/// Clock ticks per second of the times in /proc (USER_HZ: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Field `n` (counted from 1, as in proc(5)) of /proc/self/stat.
fn proc_stat_field(n: usize) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // the command (field 2) is in parentheses and may hold spaces
    let after = stat.rsplit_once(')')?.1;
    after
        .split_whitespace()
        .nth(n.checked_sub(3)?)?
        .parse()
        .ok()
}

/// When this process started, in seconds since the epoch: its start in
/// ticks after boot (field 22 of /proc/self/stat) plus the boot time.
fn process_start_time() -> Option<f64> {
    let boot: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(boot + proc_stat_field(22)? / USER_HZ)
}

/// The caches in the metrics' `cache` label: blocks in memory and on the
/// local disk, attributes and names.
pub const MEMORY_CACHE: &str = "memory";
pub const DISK_CACHE: &str = "disk";
pub const ATTR_CACHE: &str = "attr";
pub const ENTRY_CACHE: &str = "entry";
/// Nodes known to have no xattrs (getxattr answered without asking).
pub const XATTR_CACHE: &str = "xattr";

/// The `op` of reads and writes of the control file (`jfs stats`, `jfs
/// info`...): apart, and their bytes not counted, so that watching a mount
/// does not show up as its work.
pub const CONTROL_OP: &str = "control";

/// Counts a read of cache `cache` as a hit or a miss.
pub fn cache_read(cache: &str, hit: bool) {
    let counter = if hit {
        &METRICS.cache_hits
    } else {
        &METRICS.cache_misses
    };
    counter.with_label_values(&[cache]).inc();
}

/// This process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The registry a mount exposes: every metric, labelled with the volume
/// and the mount point.
static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// Labels every metric with `volume` and `mountpoint` (once per process:
/// a mount).
pub fn install(volume: &str, mountpoint: &str) {
    registry(volume, mountpoint);
}

/// Adds the replication lag (`jfs_replica_lag_seconds`) to what a mount of a
/// hot standby serves.
pub fn install_replica_lag(volume: &str, mountpoint: &str) {
    let _ = registry(volume, mountpoint).register(Box::new(METRICS.replica_lag_seconds.clone()));
}

fn registry(volume: &str, mountpoint: &str) -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let labels = [
            ("volume".to_string(), volume.to_string()),
            ("mountpoint".to_string(), mountpoint.to_string()),
        ]
        .into();
        let registry = Registry::new_custom(None, Some(labels)).expect("valid registry labels");
        for c in METRICS.collectors() {
            registry.register(c).expect("metric names are unique");
        }
        registry
    })
}

/// Every metric in Prometheus's text format.
pub fn text() -> String {
    METRICS.refresh_process();
    let families = match REGISTRY.get() {
        Some(registry) => registry.gather(),
        None => {
            let registry = Registry::new();
            for c in METRICS.collectors() {
                let _ = registry.register(c);
            }
            registry.gather()
        }
    };
    let mut out = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
        tracing::warn!("encoding the metrics: {e}");
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The procedure a metadata statement calls (`jfs.NAME(`), for labels.
pub fn procedure_of(sql: &str) -> &str {
    let Some(start) = sql.find("jfs.").map(|i| i + 4) else {
        return "other";
    };
    let rest = &sql[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    if end == 0 {
        "other"
    } else {
        &rest[..end]
    }
}

/// Bytes counted in a gauge while this value lives (a write buffer's
/// memory, say): added when made, taken away when dropped.
#[derive(Default)]
pub struct Charge {
    bytes: i64,
}

impl Charge {
    pub fn write_buffer(bytes: usize) -> Charge {
        METRICS.write_buffer_bytes.add(bytes as i64);
        Charge {
            bytes: bytes as i64,
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes != 0 {
            METRICS.write_buffer_bytes.sub(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_labelled_by_their_procedure() {
        assert_eq!(procedure_of("SELECT * FROM jfs.getattr($1)"), "getattr");
        assert_eq!(
            procedure_of("SELECT jfs.changelog_prune($1) AS pruned"),
            "changelog_prune"
        );
        assert_eq!(procedure_of("SELECT 1"), "other");
    }

    #[test]
    fn the_text_holds_every_family_once_used() {
        METRICS
            .fuse_ops
            .with_label_values(&["lookup"])
            .observe(0.001);
        METRICS.object_bytes.with_label_values(&["put"]).inc_by(5);
        {
            let _held = Charge::write_buffer(4096);
            assert!(METRICS.write_buffer_bytes.get() >= 4096);
        }
        let text = text();
        assert!(
            text.contains("jfs_fuse_op_duration_seconds_count{op=\"lookup\"}"),
            "{text}"
        );
        assert!(
            text.contains("jfs_object_bytes_total{op=\"put\"}"),
            "{text}"
        );
        assert!(text.contains("jfs_process_resident_bytes"), "{text}");
        assert!(text.contains("jfs_build_info{version="), "{text}");
    }

    #[test]
    fn the_process_figures_come_from_proc() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = process_start_time().expect("a start time");
        assert!(
            started <= now + 1.0 && started > now - 3600.0,
            "{started} vs {now}"
        );
        let ticks = proc_stat_field(14).expect("utime") + proc_stat_field(15).expect("stime");
        assert!(ticks >= 0.0);
        METRICS.refresh_process();
        assert!(METRICS.process_resident_bytes.get() > 1 << 20);
    }
}
