//! `jfs sync SRC DST`: mirror a tree between local directories, jfs volumes
//! (no mount needed) and S3 prefixes, copying only what differs.
use clap::Args;

use crate::sync::{Options, Rules, S3Options};

/// SRC and DST are each a local directory (/data/dir), a directory of a jfs
/// volume (`jfs+` before the META_URL, the directory after `#`:
/// jfs+postgres://user@host:5432/db?host=/run/postgresql#/projects/a) or an
/// S3 prefix (s3://bucket/prefix). The tree under SRC is mirrored under DST:
/// a file is copied when DST lacks it or its size (or, where both sides keep
/// one, its mtime) differs; each file is written under a temporary name and
/// renamed into place, so an interrupted run can simply be run again.
/// Directories, modes, mtimes and symlinks are kept between local and jfs
/// sides; S3 keeps only files (symlinks are left out with a note).
#[derive(Args, Debug)]
pub struct SyncArgs {
    /// Where to copy from: a local directory (/data/dir), a volume's directory
    /// (jfs+postgres://user@host:port/db?options#/dir) or an S3 prefix (s3://bucket/prefix)
    src: String,
    /// Where to copy to, in the same forms (made if missing)
    dst: String,
    /// Copy only files newer at SRC than at DST (or missing there)
    #[arg(short, long)]
    update: bool,
    /// Compare the content of files of the same size (read both sides)
    #[arg(long)]
    checksum: bool,
    /// Delete what DST has and SRC has not
    #[arg(long)]
    delete_dst: bool,
    /// Print what would be done and change nothing
    #[arg(long)]
    dry_run: bool,
    /// Files copied in parallel
    #[arg(short = 'p', long, default_value_t = 10)]
    threads: usize,
    /// The S3-compatible server of s3:// sides, http(s)://host:port (path-style
    /// addressing); keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
    #[arg(long, env = "AWS_ENDPOINT_URL", value_name = "URL")]
    s3_endpoint: Option<String>,
}

pub fn run(a: SyncArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.threads > 0, "--threads must be at least 1");
    let options = Options {
        rules: Rules {
            update: a.update,
            checksum: a.checksum,
            delete_dst: a.delete_dst,
        },
        dry_run: a.dry_run,
        threads: a.threads,
        s3: S3Options {
            endpoint: a.s3_endpoint.clone(),
        },
    };
    let summary = super::runtime()?.block_on(crate::sync::run(&a.src, &a.dst, &options))?;
    for (path, cause) in &summary.failures {
        eprintln!("failed: {path}: {cause}");
    }
    println!("{summary}");
    let failed = summary.failures.len();
    anyhow::ensure!(
        failed == 0,
        "{failed} failed (each listed above with its cause); once they are seen to, \
         the same command copies what is left"
    );
    Ok(())
}
