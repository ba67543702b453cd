//! `jfs stats MOUNTPOINT`: what a mount does, one line per interval (like
//! `juicefs stats`): its process, FUSE requests, metadata calls, object
//! store requests and caches. The figures are the mount's metrics, asked
//! of the mount through its control file (so `--no-metrics` mounts too),
//! kept open; its requests are left out of the FUSE figures.
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use super::info::ControlFile;
use crate::metrics::CONTROL_OP;

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// A jfs mount point (or any path inside one)
    mountpoint: PathBuf,
    /// Print this many lines, then stop [default: until interrupted]
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Seconds between lines
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
}

/// One reading of a mount's metrics: each series' value by name and labels.
struct Sample {
    series: Vec<(String, HashMap<String, String>, f64)>,
    at: Instant,
}

impl Sample {
    /// Parses Prometheus's text format (the lines jfs writes).
    fn parse(text: &str) -> Sample {
        let mut series = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((key, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match key.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.trim_end_matches('}'))),
                None => (key, HashMap::new()),
            };
            series.push((name.to_string(), labels, value));
        }
        Sample {
            series,
            at: Instant::now(),
        }
    }

    /// The sum of metric `name`'s series (those whose `label` has the given
    /// value, when one is given).
    fn sum(&self, name: &str, label: Option<(&str, &str)>) -> f64 {
        self.series
            .iter()
            .filter(|(n, labels, _)| {
                n == name && label.is_none_or(|(k, v)| labels.get(k).is_some_and(|x| x == v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }
}

/// `a="x",b="y"` as a map; values are unescaped (`\\`, `\"`, `\n`).
fn parse_labels(text: &str) -> HashMap<String, String> {
    let mut labels = HashMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, escaped)) => value.push(escaped),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').to_string(), value);
        rest = &after[end..];
    }
    labels
}

/// One column: its group, title, width and decimals.
struct Column {
    group: &'static str,
    title: &'static str,
    width: usize,
    decimals: usize,
}

const fn col(group: &'static str, title: &'static str, width: usize, decimals: usize) -> Column {
    Column {
        group,
        title,
        width,
        decimals,
    }
}

const COLUMNS: [Column; 17] = [
    col("usage", "cpu%", 6, 1),
    col("usage", "rss", 6, 0),
    col("usage", "buf", 5, 0),
    col("fuse", "ops", 7, 0),
    col("fuse", "lat", 7, 2),
    col("fuse", "read", 7, 1),
    col("fuse", "write", 7, 1),
    col("meta", "ops", 7, 0),
    col("meta", "lat", 7, 2),
    col("object", "get", 6, 0),
    col("object", "put", 6, 0),
    col("object", "in", 7, 1),
    col("object", "out", 7, 1),
    col("object", "lat", 7, 2),
    col("cache", "mem%", 6, 1),
    col("cache", "disk%", 6, 1),
    col("cache", "attr%", 6, 1),
];

const MIB: f64 = (1 << 20) as f64;

/// The line's figures, in [`COLUMNS`] order (None: nothing to divide by).
fn figures(old: &Sample, new: &Sample) -> Vec<Option<f64>> {
    let secs = (new.at - old.at).as_secs_f64().max(1e-3);
    let delta = |name: &str, label: Option<(&str, &str)>| {
        (new.sum(name, label) - old.sum(name, label)).max(0.0)
    };
    // a histogram's observations in the interval (those of `label`, or
    // all but the control file's): how many per second, mean ms
    let observed = |histogram: &str, suffix: &str, label: Option<(&str, &str)>| {
        let name = format!("{histogram}_{suffix}");
        match label {
            Some(_) => delta(&name, label),
            None => delta(&name, None) - delta(&name, Some(("op", CONTROL_OP))),
        }
    };
    let count_rate = |histogram: &str, label| Some(observed(histogram, "count", label) / secs);
    let latency = |histogram: &str, label| {
        let count = observed(histogram, "count", label);
        (count > 0.0).then(|| observed(histogram, "sum", label) / count * 1000.0)
    };
    let hit_percent = |cache: &str| {
        let hits = delta("jfs_cache_hits_total", Some(("cache", cache)));
        let misses = delta("jfs_cache_misses_total", Some(("cache", cache)));
        (hits + misses > 0.0).then(|| 100.0 * hits / (hits + misses))
    };
    const FUSE: &str = "jfs_fuse_op_duration_seconds";
    const META: &str = "jfs_meta_call_duration_seconds";
    const OBJECT: &str = "jfs_object_request_duration_seconds";
    vec![
        Some(delta("jfs_process_cpu_seconds_total", None) / secs * 100.0),
        Some(new.sum("jfs_process_resident_bytes", None) / MIB),
        Some(new.sum("jfs_write_buffer_bytes", None) / MIB),
        count_rate(FUSE, None),
        latency(FUSE, None),
        Some(delta("jfs_fuse_read_bytes_total", None) / secs / MIB),
        Some(delta("jfs_fuse_written_bytes_total", None) / secs / MIB),
        count_rate(META, None),
        latency(META, None),
        count_rate(OBJECT, Some(("op", "get"))),
        count_rate(OBJECT, Some(("op", "put"))),
        Some(delta("jfs_object_bytes_total", Some(("op", "get"))) / secs / MIB),
        Some(delta("jfs_object_bytes_total", Some(("op", "put"))) / secs / MIB),
        latency(OBJECT, None),
        hit_percent(crate::metrics::MEMORY_CACHE),
        hit_percent(crate::metrics::DISK_CACHE),
        hit_percent(crate::metrics::ATTR_CACHE),
    ]
}

/// The two header lines: groups over their columns, then the titles.
fn header() -> String {
    let (mut groups, mut titles) = (String::new(), String::new());
    let mut i = 0;
    while i < COLUMNS.len() {
        let group = COLUMNS[i].group;
        let members: Vec<&Column> = COLUMNS[i..]
            .iter()
            .take_while(|c| c.group == group)
            .collect();
        let width: usize = members.iter().map(|c| c.width + 1).sum::<usize>() - 1;
        let sep = if i == 0 { "" } else { " | " };
        groups.push_str(&format!("{sep}{group:-^width$}"));
        titles.push_str(sep);
        for (k, c) in members.iter().enumerate() {
            let space = if k == 0 { "" } else { " " };
            titles.push_str(&format!("{space}{:>w$}", c.title, w = c.width));
        }
        i += members.len();
    }
    format!("{groups}\n{titles}\n")
}

fn line(values: &[Option<f64>]) -> String {
    let mut out = String::new();
    for (i, (c, v)) in COLUMNS.iter().zip(values).enumerate() {
        if i > 0 {
            out.push_str(if COLUMNS[i - 1].group != c.group {
                " | "
            } else {
                " "
            });
        }
        match v {
            Some(v) => out.push_str(&format!("{v:>w$.d$}", w = c.width, d = c.decimals)),
            None => out.push_str(&format!("{:>w$}", "-", w = c.width)),
        }
    }
    out
}

fn sample(control: &mut ControlFile) -> anyhow::Result<Sample> {
    Ok(Sample::parse(&control.ask("stats\n")?))
}

pub fn run(a: StatsArgs) -> anyhow::Result<()> {
    let interval = Duration::try_from_secs_f64(a.interval)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--interval {}: give a number of seconds above 0",
                a.interval
            )
        })?;
    let mut control = ControlFile::open(&a.mountpoint)?;
    let mut old = sample(&mut control)?;
    let mut out = std::io::stdout().lock();
    write!(
        out,
        "{}: cpu% rss/buf MiB, ops/s, lat ms, read/write/in/out MiB/s, cache hit %\n{}",
        a.mountpoint.display(),
        header()
    )?;
    let mut printed = 0;
    while a.count.is_none_or(|n| printed < n) {
        std::thread::sleep(interval);
        let new = sample(&mut control)?;
        writeln!(out, "{}", line(&figures(&old, &new)))?;
        out.flush()?;
        old = new;
        printed += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP jfs_x x\n\
        jfs_fuse_op_duration_seconds_sum{op=\"read\",mountpoint=\"/m \\\"q\\\" {a,b}\\\\\",volume=\"v\"} 0.5\n\
        jfs_fuse_op_duration_seconds_count{op=\"read\",mountpoint=\"/m \\\"q\\\" {a,b}\\\\\",volume=\"v\"} 100\n\
        jfs_fuse_op_duration_seconds_count{op=\"write\",mountpoint=\"/m\",volume=\"v\"} 50\n\
        jfs_fuse_op_duration_seconds_sum{op=\"control\",mountpoint=\"/m\",volume=\"v\"} 9\n\
        jfs_fuse_op_duration_seconds_count{op=\"control\",mountpoint=\"/m\",volume=\"v\"} 10\n\
        jfs_write_buffer_bytes{mountpoint=\"/m\",volume=\"v\"} 2097152\n";

    #[test]
    fn series_are_summed_by_name_and_label() {
        let s = Sample::parse(TEXT);
        assert_eq!(s.sum("jfs_fuse_op_duration_seconds_count", None), 160.0);
        assert_eq!(s.series[0].1["mountpoint"], "/m \"q\" {a,b}\\");
        assert_eq!(s.series[0].1["volume"], "v");
        assert_eq!(
            s.sum("jfs_fuse_op_duration_seconds_count", Some(("op", "read"))),
            100.0
        );
        assert_eq!(s.sum("jfs_write_buffer_bytes", None), 2097152.0);
        assert_eq!(s.sum("jfs_nothing", None), 0.0);
    }

    #[test]
    fn a_line_has_a_figure_or_a_dash_under_each_title() {
        let old = Sample::parse("");
        let mut new = Sample::parse(TEXT);
        new.at = old.at + Duration::from_secs(2);
        let values = figures(&old, &new);
        assert_eq!(
            values[3],
            Some(75.0),
            "fuse ops/s, the control file's left out"
        );
        let latency_ms = values[4].unwrap();
        assert!(
            (latency_ms - 500.0 / 150.0).abs() < 1e-9,
            "0.5 s over 150 ops: {latency_ms}"
        );
        assert_eq!(values[2], Some(2.0), "buffer MiB");
        assert_eq!(values[14], None, "no block read: no hit ratio");
        let text = line(&values);
        let head = header();
        let titles = head.lines().nth(1).unwrap();
        assert_eq!(text.len(), titles.len(), "{titles}\n{text}");
        assert_eq!(head.lines().next().unwrap().len(), titles.len());
        assert_eq!(text.split_whitespace().filter(|w| *w == "|").count(), 4);
    }
}
