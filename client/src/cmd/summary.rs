//! `jfs summary PATH...`: sizes and counts of trees inside a mount, from
//! the database's per-directory figures in one query (JuiceFS walks the
//! tree): what `du -s --apparent-size` and `find | wc -l` count (but a
//! file with several names counts once per name), and with `--depth N` the
//! directories below, largest first.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::info::{ask_mount, node_token};

/// The deepest `--depth` a mount is asked for.
const MAX_DEPTH: u32 = 1000;

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// Files or directories inside a mount
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Also show the directories this many levels below each path
    #[arg(short, long, default_value_t = 0)]
    depth: u32,
    /// Print JSON (one object per row, exact byte counts) instead of a table
    #[arg(long)]
    json: bool,
    /// Print exact byte counts instead of KiB/MiB/GiB
    #[arg(short, long, conflicts_with = "json")]
    bytes: bool,
}

/// One row of a mount's answer.
#[derive(Debug, Clone)]
struct Row {
    depth: u32,
    dirs: i64,
    files: i64,
    length: i64,
    space: i64,
    /// Relative to the path asked about ("" for itself).
    rel: String,
}

pub fn run(a: SummaryArgs) -> anyhow::Result<()> {
    let mut json = Vec::new();
    let depth = a.depth.min(MAX_DEPTH);
    for path in &a.paths {
        let answer = ask_mount(path, &format!("summary {} {depth}\n", node_token(path)?))?;
        let rows =
            parse(&answer).with_context(|| format!("the mount's answer for {}", path.display()))?;
        if a.json {
            json.extend(rows.iter().map(|r| to_json(path, r)));
        } else {
            print_table(path, &rows, a.bytes);
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(())
}

fn parse(answer: &str) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for line in answer.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || anyhow::anyhow!("unexpected line {line:?}");
        if f.len() != 7 || f[0] != "row" {
            return Err(bad());
        }
        let rel = match f[6] {
            "-" => String::new(),
            h => String::from_utf8_lossy(&unhex(h).ok_or_else(bad)?).into_owned(),
        };
        rows.push(Row {
            depth: f[1].parse()?,
            dirs: f[2].parse()?,
            files: f[3].parse()?,
            length: f[4].parse()?,
            space: f[5].parse()?,
            rel,
        });
    }
    anyhow::ensure!(!rows.is_empty(), "no rows");
    Ok(rows)
}

fn unhex(h: &str) -> Option<Vec<u8>> {
    (0..h.len())
        .step_by(2)
        .map(|i| h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

fn shown_path(path: &Path, rel: &str) -> String {
    if rel.is_empty() {
        path.display().to_string()
    } else {
        path.join(rel).display().to_string()
    }
}

fn to_json(path: &Path, r: &Row) -> serde_json::Value {
    serde_json::json!({
        "path": shown_path(path, &r.rel),
        "depth": r.depth,
        "dirs": r.dirs,
        "files": r.files,
        "length": r.length,
        "space": r.space,
    })
}

/// Bytes as KiB, MiB, GiB, TiB (or exact).
fn size(n: i64, exact: bool) -> String {
    if exact || n < 1024 {
        return n.to_string();
    }
    let mut v = n as f64;
    for unit in ["KiB", "MiB", "GiB", "TiB", "PiB"] {
        v /= 1024.0;
        if v < 1024.0 || unit == "PiB" {
            return format!("{v:.1} {unit}");
        }
    }
    unreachable!()
}

/// The rows as a tree: each directory, then its subdirectories largest first.
fn print_table(path: &Path, rows: &[Row], exact: bool) {
    let mut children: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.depth > 0) {
        let parent = r.rel.rsplit_once('/').map_or("", |(p, _)| p);
        children.entry(parent).or_default().push(r);
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| b.length.cmp(&a.length).then(a.rel.cmp(&b.rel)));
    }
    let mut ordered = Vec::new();
    let mut stack: Vec<&Row> = rows.iter().filter(|r| r.depth == 0).collect();
    while let Some(r) = stack.pop() {
        ordered.push(r);
        if let Some(list) = children.get(r.rel.as_str()) {
            stack.extend(list.iter().rev());
        }
    }
    let names: Vec<String> = ordered
        .iter()
        .map(|r| {
            format!(
                "{}{}",
                "  ".repeat(r.depth as usize),
                shown_path(path, &r.rel)
            )
        })
        .collect();
    let width = names.iter().map(String::len).max().unwrap_or(4).max(4);
    println!(
        "{:<width$}  {:>12}  {:>12}  {:>10}  {:>10}",
        "PATH", "SIZE", "SPACE", "DIRS", "FILES"
    );
    for (name, r) in names.iter().zip(&ordered) {
        println!(
            "{name:<width$}  {:>12}  {:>12}  {:>10}  {:>10}",
            size(r.length, exact),
            size(r.space, exact),
            r.dirs,
            r.files
        );
    }
}
