//! `jfs sync`'s engine: a tree mirrored from one endpoint (a local
//! directory, a jfs volume without a mount, an S3 prefix) to another —
//! both listed, compared (`plan`), and what differs copied by parallel
//! workers (`copy`), each file written under a temporary name and renamed
//! into place, so an interrupted run leaves no partial file and the next
//! run copies only what is left.
pub mod copy;
pub mod endpoint;
pub mod plan;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use anyhow::Context;

pub use endpoint::S3Options;
pub use plan::Rules;

/// How a sync runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub rules: Rules,
    /// Print what would be done, change nothing.
    pub dry_run: bool,
    /// Files copied at once.
    pub threads: usize,
    pub s3: S3Options,
}

/// What a sync did (or, in a dry run, would do).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub scanned: u64,
    pub copied: u64,
    pub copied_bytes: u64,
    pub dirs_made: u64,
    pub skipped: u64,
    pub deleted: u64,
    /// Each failure's path and cause.
    pub failures: Vec<(String, String)>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "scanned {}, copied {} ({} bytes), directories made {}, skipped {}, deleted {}, failed {}",
            self.scanned,
            self.copied,
            self.copied_bytes,
            self.dirs_made,
            self.skipped,
            self.deleted,
            self.failures.len()
        )
    }
}

/// Mirrors the tree of endpoint `src` onto endpoint `dst`.
pub async fn run(src: &str, dst: &str, o: &Options) -> anyhow::Result<Summary> {
    endpoint::refuse_overlap(src, dst)?;
    let source = endpoint::open(src, &o.s3, false)
        .await
        .context("the source (SRC)")?;
    let result = with_source(source.as_ref(), dst, o).await;
    source.close().await;
    result
}

async fn with_source(
    source: &dyn endpoint::Endpoint,
    dst: &str,
    o: &Options,
) -> anyhow::Result<Summary> {
    source
        .prepare(false)
        .await
        .with_context(|| format!("the source {}", source.describe()))?;
    let target = endpoint::open(dst, &o.s3, !o.dry_run)
        .await
        .context("the destination (DST)")?;
    let result = between(source, target.as_ref(), o).await;
    target.close().await;
    result
}

async fn between(
    src: &dyn endpoint::Endpoint,
    dst: &dyn endpoint::Endpoint,
    o: &Options,
) -> anyhow::Result<Summary> {
    if !o.dry_run {
        dst.prepare(true)
            .await
            .with_context(|| format!("the destination {}", dst.describe()))?;
    }
    let (src_entries, dst_entries) = tokio::join!(src.list(), async {
        match dst.prepare(false).await {
            // (a dry run to a destination not made yet: it is empty)
            Err(e) if o.dry_run => {
                eprintln!("the destination {}: {e:#}; taken as empty", dst.describe());
                Ok(Vec::new())
            }
            _ => dst.list().await,
        }
    });
    let src_entries = src_entries?;
    let dst_entries = dst_entries?;
    // (an S3 prefix mistyped, a directory not mounted: not a reason to
    // delete everything)
    anyhow::ensure!(
        !(o.rules.delete_dst && src_entries.is_empty() && !dst_entries.is_empty()),
        "the source {} lists nothing: refusing to delete everything at the destination \
         (--delete-dst); check the source, or remove the destination's files yourself",
        src.describe()
    );
    let sides = plan::Sides {
        attrs: src.keeps_attrs() && dst.keeps_attrs(),
        tree: dst.keeps_tree(),
    };
    let plan = plan::plan(&src_entries, &dst_entries, o.rules, sides);
    for (path, why) in &plan.left_out {
        eprintln!("left out {path}: {why}");
    }
    if o.dry_run {
        return Ok(dry_run(&plan));
    }
    let tally = Arc::new(copy::Tally::default());
    copy::execute(src, dst, &plan, o.threads, &tally).await;
    let failures = std::mem::take(&mut *tally.failures.lock().unwrap());
    Ok(Summary {
        scanned: plan.scanned,
        copied: tally.copied.load(Relaxed),
        copied_bytes: tally.copied_bytes.load(Relaxed),
        dirs_made: tally.dirs_made.load(Relaxed),
        skipped: plan.skipped + plan.left_out.len() as u64 + tally.same_content.load(Relaxed),
        deleted: tally.deleted.load(Relaxed),
        failures,
    })
}

/// Prints what `plan` would do; the summary of a run that did it.
fn dry_run(plan: &plan::Plan) -> Summary {
    for d in &plan.mkdirs {
        println!("would make directory {}", d.path);
    }
    for c in &plan.copies {
        let how = if c.compare_first {
            "compare and maybe copy"
        } else {
            "copy"
        };
        println!("would {how} {} ({} bytes)", c.entry.path, c.entry.size);
    }
    for l in &plan.symlinks {
        println!("would make symlink {}", l.path);
    }
    for d in &plan.deletes {
        println!("would delete {}", d.path);
    }
    for t in &plan.temps {
        println!("would remove old temporary {}", t.path);
    }
    Summary {
        scanned: plan.scanned,
        copied: (plan.copies.len() + plan.symlinks.len()) as u64,
        copied_bytes: plan.bytes(),
        dirs_made: plan.mkdirs.len() as u64,
        skipped: plan.skipped + plan.left_out.len() as u64,
        deleted: plan.deletes.len() as u64,
        failures: plan.conflicts.clone(),
    }
}
