//! `jfs objbench META_URL`: the volume's object store measured (like `juicefs objbench`): blocks and small objects put, got, headed, listed and deleted under a scratch prefix, with a summary table.
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use futures_util::stream::{self, StreamExt, TryStreamExt};

use crate::object::ObjectStore;
use crate::volume::{open_volume, BucketCheck};

#[derive(Args, Debug)]
pub struct ObjbenchArgs {
    /// PostgreSQL URL of the metadata database (its volume's object store is measured)
    meta_url: String,
    /// Size of each block object, in KiB (the volume's block size by default)
    #[arg(long)]
    block_size: Option<usize>,
    /// Block objects
    #[arg(long, default_value_t = 64)]
    blocks: usize,
    /// Size of each small object, in KiB
    #[arg(long, default_value_t = 128)]
    small_size: usize,
    /// Small objects
    #[arg(long, default_value_t = 100)]
    small_objects: usize,
    /// Requests in flight
    #[arg(short = 'p', long, default_value_t = 4)]
    threads: usize,
}

/// Runs `op` on every key, `threads` at a time; returns the wall time.
async fn timed<F, Fut>(keys: &[String], threads: usize, op: F) -> anyhow::Result<Duration>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    stream::iter(keys.iter().cloned().map(op))
        .buffer_unordered(threads.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(started.elapsed())
}

/// One line of the table.
struct Line {
    item: String,
    requests: usize,
    bytes: usize,
    elapsed: Duration,
}

pub async fn run(a: ObjbenchArgs) -> anyhow::Result<()> {
    let v = open_volume(&a.meta_url, 2, BucketCheck::Required).await?;
    let store: Arc<dyn ObjectStore> = v.store.clone();
    let block = a
        .block_size
        .map_or(v.volume.block_size as usize, |k| k << 10);
    let small = a.small_size << 10;
    let prefix = format!("{}/objbench-{}/", v.volume.name, std::process::id());
    let block_keys: Vec<String> = (0..a.blocks)
        .map(|i| format!("{prefix}block-{i}"))
        .collect();
    let small_keys: Vec<String> = (0..a.small_objects)
        .map(|i| format!("{prefix}small-{i}"))
        .collect();
    let block_data = Bytes::from((0..block).map(|i| (i * 31) as u8).collect::<Vec<u8>>());
    let small_data = block_data.slice(..small.min(block));
    let small = small_data.len();
    eprintln!("measuring {} under {prefix}", store.describe());
    let result = measure(
        &a,
        &store,
        &block_keys,
        &small_keys,
        &block_data,
        &small_data,
    )
    .await;
    // whatever happened, the scratch objects go
    for k in block_keys.iter().chain(&small_keys) {
        let _ = store.delete(k).await;
    }
    let lines = result?;
    println!(
        "jfs objbench of {}: {} block objects of {} KiB, {} small objects of {} KiB, {} in flight",
        store.describe(),
        a.blocks,
        block >> 10,
        a.small_objects,
        small >> 10,
        a.threads
    );
    let rule = format!("+{}+{}+{}+", "-".repeat(22), "-".repeat(18), "-".repeat(17));
    println!("{rule}");
    println!("| {:<20} | {:>16} | {:>15} |", "ITEM", "VALUE", "COST");
    println!("{rule}");
    for l in &lines {
        let secs = l.elapsed.as_secs_f64().max(1e-9);
        let value = if l.bytes > 0 {
            format!("{:.2} MiB/s", l.bytes as f64 / (1 << 20) as f64 / secs)
        } else {
            format!("{:.1} ops/s", l.requests as f64 / secs)
        };
        let cost = secs * a.threads.max(1) as f64 / l.requests.max(1) as f64 * 1000.0;
        println!(
            "| {:<20} | {value:>16} | {:>15} |",
            l.item,
            format!("{cost:.2} ms/op")
        );
    }
    println!("{rule}");
    Ok(())
}

async fn measure(
    a: &ObjbenchArgs,
    store: &Arc<dyn ObjectStore>,
    block_keys: &[String],
    small_keys: &[String],
    block_data: &Bytes,
    small_data: &Bytes,
) -> anyhow::Result<Vec<Line>> {
    let p = a.threads;
    let mut lines = Vec::new();
    let mut line = |item: &str, requests: usize, bytes: usize, elapsed: Duration| {
        lines.push(Line {
            item: item.to_string(),
            requests,
            bytes,
            elapsed,
        })
    };
    let put = |data: Bytes| {
        move |k: String| {
            let (store, data) = (store.clone(), data.clone());
            async move {
                store
                    .put(&k, data, "")
                    .await
                    .map_err(|e| anyhow::anyhow!("put {k}: {e}"))
            }
        }
    };
    let get = |data: Bytes| {
        move |k: String| {
            let (store, data) = (store.clone(), data.clone());
            async move {
                let got = store
                    .get(&k, 0, data.len())
                    .await
                    .map_err(|e| anyhow::anyhow!("get {k}: {e}"))?;
                anyhow::ensure!(got == data, "{k} reads back other bytes than were put");
                Ok(())
            }
        }
    };
    let blocks_bytes = block_keys.len() * block_data.len();
    let small_bytes = small_keys.len() * small_data.len();
    let t = timed(block_keys, p, put(block_data.clone())).await?;
    line("Put block", block_keys.len(), blocks_bytes, t);
    let t = timed(block_keys, p, get(block_data.clone())).await?;
    line("Get block", block_keys.len(), blocks_bytes, t);
    let t = timed(small_keys, p, put(small_data.clone())).await?;
    line("Put small object", small_keys.len(), small_bytes, t);
    let t = timed(small_keys, p, get(small_data.clone())).await?;
    line("Get small object", small_keys.len(), small_bytes, t);
    let t = timed(small_keys, p, |k: String| {
        let store = store.clone();
        async move {
            store
                .head(&k)
                .await
                .map_err(|e| anyhow::anyhow!("head {k}: {e}"))?;
            Ok(())
        }
    })
    .await?;
    line("Head object", small_keys.len(), 0, t);
    let prefix = small_keys
        .first()
        .and_then(|k| k.rsplit_once('/'))
        .map(|(p, _)| format!("{p}/"))
        .unwrap_or_default();
    let started = Instant::now();
    let listed = store.list(&prefix).await?;
    anyhow::ensure!(
        listed.len() == block_keys.len() + small_keys.len(),
        "listing {prefix} gave {} objects, not {}",
        listed.len(),
        block_keys.len() + small_keys.len()
    );
    line("List objects", 1, 0, started.elapsed());
    let all: Vec<String> = block_keys.iter().chain(small_keys).cloned().collect();
    let t = timed(&all, p, |k: String| {
        let store = store.clone();
        async move {
            store
                .delete(&k)
                .await
                .map_err(|e| anyhow::anyhow!("delete {k}: {e}"))
        }
    })
    .await?;
    line("Delete object", all.len(), 0, t);
    Ok(lines)
}
