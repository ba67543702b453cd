//! A mount's Prometheus metrics, read as a scraper reads them.
use std::io::{Read, Write};

/// A free port on loopback for a mount's metrics (`--metrics ADDR`).
pub fn free_metrics_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The text a mount serves at http://ADDR/metrics (None when it does not answer).
pub fn metrics_text(addr: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The sum of metric `name`'s samples whose labels contain `label` (e.g.
/// `outcome="served"`, or "" for all); None when the mount does not answer.
pub fn metric_sum(addr: &str, name: &str, label: &str) -> Option<f64> {
    let text = metrics_text(addr)?;
    let sum = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']))
                && l.contains(label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Some(sum)
}

/// Calls of procedure `name` the mount whose metrics are at `addr` made so
/// far (0 before the first).
pub fn procedure_calls(addr: &str, name: &str) -> f64 {
    metric_sum(
        addr,
        "jfs_meta_call_duration_seconds_count",
        &format!("procedure=\"{name}\""),
    )
    .unwrap_or(0.0)
}

/// FUSE requests of kind `op` (lookup, getattr, readdirplus...) the mount
/// whose metrics are at `addr` was sent so far (0 before the first).
pub fn fuse_requests(addr: &str, op: &str) -> f64 {
    metric_sum(
        addr,
        "jfs_fuse_op_duration_seconds_count",
        &format!("op=\"{op}\""),
    )
    .unwrap_or(0.0)
}
