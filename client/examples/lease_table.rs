//! What the mount's table of leases costs its hottest readers, as built
//! (one mutex, `ns::leases::Leases`) and as a task that owns the table and
//! answers requests over channels would cost them (issue 55, item 3):
//! the three questions a lookup or getattr asks while a lease is held (is
//! the name one the lease knows, is the inode one made here and not
//! committed, must it be settled), asked of a lease of 1,000 entries from
//! a thread that blocks on its own runtime, as a FUSE thread does. Run by
//! bench/lease_table/run; prints nanoseconds per lookup, medians of
//! rounds.
use std::sync::Arc;
use std::time::Instant;

use jfs_client::meta::{LeasedEntry, NodeType};
use jfs_client::ns::lease::LeaseState;
use jfs_client::ns::leases::Leases;
use tokio::sync::{mpsc, oneshot};

const DIR: u64 = 7;
const ENTRIES: u64 = 1_000;

/// A question for the task that owns the table, with where to answer.
type Ask = (Vec<u8>, u64, oneshot::Sender<bool>);

fn table() -> Leases {
    let leases = Leases::default();
    let entries = (0..ENTRIES).map(|i| {
        let entry = LeasedEntry {
            inode: 1_000 + i,
            kind: NodeType::File,
            nlink: 1,
        };
        (format!("f{i}").into_bytes(), entry)
    });
    leases.taken(DIR, LeaseState::new(entries, true));
    leases
}

/// The three questions of a lookup, asked of `leases` directly.
fn ask(leases: &Leases, name: &[u8], inode: u64) -> bool {
    let known = leases.with(DIR, |l| l.lookup(name)).is_some();
    let made = leases.created_attr(inode).is_some();
    let settle = leases.maker_of(inode).is_some();
    known && !made && !settle
}

/// Nanoseconds per lookup over `n` lookups asked through `lookup`.
fn per_lookup(n: u64, mut lookup: impl FnMut(Vec<u8>, u64) -> bool) -> f64 {
    let started = Instant::now();
    for i in 0..n {
        let name = format!("f{}", i % ENTRIES).into_bytes();
        assert!(lookup(name, 1_000 + i % ENTRIES), "lookup {i}");
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("JFS_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let n: u64 = 200_000;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a runtime");
    let shared = Arc::new(table());
    // the task: owns a table of its own, answers each question in turn
    let (asks, mut asked) = mpsc::unbounded_channel::<Ask>();
    runtime.spawn(async move {
        let owned = table();
        while let Some((name, inode, answer)) = asked.recv().await {
            let _ = answer.send(ask(&owned, &name, inode));
        }
    });
    // (a FUSE thread blocks on a runtime of its own)
    let fuse_thread = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a thread's runtime");
    let (mut mutex, mut task) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        mutex.push(per_lookup(n, |name, inode| ask(&shared, &name, inode)));
        task.push(per_lookup(n, |name, inode| {
            let (answer, answered) = oneshot::channel();
            asks.send((name, inode, answer)).expect("the task runs");
            fuse_thread.block_on(answered).expect("the task answers")
        }));
    }
    let (mutex, task) = (median(mutex), median(task));
    println!("a lookup's questions to a lease of {ENTRIES} entries (median of {rounds} x {n}):");
    println!("  one mutex (as built)          {mutex:>8.0} ns");
    println!("  a task over channels          {task:>8.0} ns");
    println!("  task / mutex                  {:>8.1}x", task / mutex);
}
