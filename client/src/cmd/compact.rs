//! `jfs compact PATH...`: rewrite every fragmented chunk of the files in
//! trees inside a mount as one slice each, asked of the mount that serves them.
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use super::info::{ask_mount, node_token};

#[derive(Args, Debug)]
pub struct CompactArgs {
    /// Files or directories inside a mounted jfs
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// The mount's answer to one "compact" request.
struct Step {
    chunks: u64,
    slices: u64,
    remaining: u64,
}

fn parse_step(answer: &str) -> Option<Step> {
    // "compacted CHUNKS SLICES remaining N"
    let w: Vec<&str> = answer.split_whitespace().collect();
    match w[..] {
        ["compacted", chunks, slices, "remaining", remaining] => Some(Step {
            chunks: chunks.parse().ok()?,
            slices: slices.parse().ok()?,
            remaining: remaining.parse().ok()?,
        }),
        _ => None,
    }
}

pub fn run(a: CompactArgs) -> anyhow::Result<()> {
    for path in &a.paths {
        let node = node_token(path)?;
        let started = Instant::now();
        let (mut chunks, mut slices) = (0u64, 0u64);
        loop {
            let answer = ask_mount(path, &format!("compact {node}\n"))?;
            let step = parse_step(&answer)
                .with_context(|| format!("unexpected answer from the mount: {answer:?}"))?;
            chunks += step.chunks;
            slices += step.slices;
            eprint!(
                "\r{}: {chunks} chunks compacted ({slices} slices), {} to go   ",
                path.display(),
                step.remaining
            );
            if step.remaining == 0 {
                break;
            }
            if step.chunks == 0 {
                eprintln!();
                anyhow::bail!(
                    "{}: {} fragmented chunks changed while they were compacted \
                     (files being written?); run jfs compact again later",
                    path.display(),
                    step.remaining
                );
            }
        }
        eprintln!(
            "\r{}: {chunks} chunks compacted ({slices} slices into {chunks}) in {:.2} s",
            path.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mounts_answer() {
        let s = parse_step("compacted 3 450 remaining 7\n").unwrap();
        assert_eq!((s.chunks, s.slices, s.remaining), (3, 450, 7));
        assert!(parse_step("error: nope").is_none());
    }
}
