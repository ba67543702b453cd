//! Subcommands, shaped like JuiceFS's: format, mount, umount, status, info, rmr, clone, compact, gc, quota, restore, tier, config, changelog, dump, load, fsck, bench, objbench, gateway, warmup, summary, destroy, debug, sync, shard.
mod bench;
mod changelog;
mod clone;
mod clone_copy;
mod compact;
mod config;
mod debug;
mod destroy;
mod dump;
mod format;
mod fsck;
mod gateway;
mod gc;
mod info;
mod load;
mod load_shards;
mod mount;
pub mod mount_helper;
mod objbench;
mod quota;
mod restore;
mod rmr;
mod shard;
mod shard_fsck;
mod shard_sql;
mod stats;
mod status;
mod summary;
mod sync;
mod tier;
mod umount;
mod warmup;

use clap::{Parser, Subcommand};

/// jfs: a POSIX file system whose metadata lives in PostgreSQL and whose file
/// data lives in object storage.
///
/// META_URL is a PostgreSQL URL: postgres://user:password@host:port/database
/// (a unix-socket directory works as ?host=/run/postgresql). The password can
/// also come from the META_PASSWORD environment variable.
#[derive(Parser, Debug)]
#[command(name = "jfs", version = crate::meta::VERSION_TEXT, about, long_about)]
pub struct Cli {
    /// Log more (repeat for more detail); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a volume in a database (installs the jfs extension if allowed)
    Format(format::FormatArgs),
    /// Mount a volume with FUSE
    Mount(mount::MountArgs),
    /// Unmount a mounted volume
    Umount(umount::UmountArgs),
    /// Show a volume's settings, usage, extension version and mounted clients
    Status(status::StatusArgs),
    /// Show what a mount does, one line per second: FUSE, metadata, object store, caches
    Stats(stats::StatsArgs),
    /// Show the inode, chunks, slices and objects of paths inside a mount
    Info(info::InfoArgs),
    /// Remove whole trees inside a mount, server-side in bounded transactions
    Rmr(rmr::RmrArgs),
    /// Clone a file or a whole tree inside a mount: one transaction, a snapshot, data shared
    Clone(clone::CloneArgs),
    /// Rewrite the fragmented chunks of files in trees inside a mount as one slice each
    Compact(compact::CompactArgs),
    /// Find (and with --delete remove) objects no slice references and freed slices' objects
    Gc(gc::GcArgs),
    /// Set, show, remove and check quotas of the volume, directories, users and groups
    Quota(quota::QuotaArgs),
    /// Put what the trash holds back where it was
    Restore(restore::RestoreArgs),
    /// Shards: a volume over several databases (add a shard, list them, make a directory on one)
    Shard(shard::ShardArgs),
    /// Storage tiers: set a tree's tier (moving its objects), restore archived objects, status
    Tier(tier::TierArgs),
    /// Change a volume's settings: the storage class of a tier id, ACLs, the change log's retention
    Config(config::ConfigArgs),
    /// Write the volume's metadata as a JSON dump (JuiceFS's layout), from one snapshot
    Dump(dump::DumpArgs),
    /// Load a jfs or JuiceFS JSON dump into an empty volume
    Load(load::LoadArgs),
    /// Check the volume's invariants (and with --check-objects that every block exists)
    Fsck(fsck::FsckArgs),
    /// Measure a directory (a mount): big and small files written and read, stat
    Bench(bench::BenchArgs),
    /// Measure the volume's object store: put, get, head, list and delete
    Objbench(objbench::ObjbenchArgs),
    /// Print the volume's changes from its change log, oldest first (--follow for new ones)
    Changelog(changelog::ChangelogArgs),
    /// Serve the volume as an S3 endpoint (buckets are its top-level directories)
    Gateway(gateway::GatewayArgs),
    /// Fetch files' blocks into a mount's disk cache (or drop them: --evict; count them: --check)
    Warmup(warmup::WarmupArgs),
    /// Sizes and counts of trees inside a mount, from the database's per-directory figures
    Summary(summary::SummaryArgs),
    /// Remove a volume: its objects, then its metadata (asks for its uuid)
    Destroy(destroy::DestroyArgs),
    /// Mirror a tree between local directories, jfs volumes (no mount) and S3, copying what differs
    Sync(sync::SyncArgs),
    /// Pack what a bug report needs about a mount into one archive (no secrets)
    Debug(debug::DebugArgs),
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "jfs=info",
        1 => "jfs=debug",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // (a log that cannot be written, its disk full, loses lines: the
    // subscriber's own report of that would panic, ending the mount)
    let _ = tracing_subscriber::fmt()
        .log_internal_errors(false)
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    init_logging(cli.verbose);
    match cli.command {
        Command::Format(a) => runtime()?.block_on(format::run(a)),
        Command::Mount(a) => mount::run(a),
        Command::Umount(a) => umount::run(a),
        Command::Status(a) => runtime()?.block_on(status::run(a)),
        Command::Stats(a) => stats::run(a),
        Command::Info(a) => info::run(a),
        Command::Rmr(a) => rmr::run(a),
        Command::Clone(a) => clone::run(a),
        Command::Compact(a) => compact::run(a),
        Command::Gc(a) => runtime()?.block_on(gc::run(a)),
        Command::Quota(a) => runtime()?.block_on(quota::run(a)),
        Command::Restore(a) => runtime()?.block_on(restore::run(a)),
        Command::Shard(a) => runtime()?.block_on(shard::run(a)),
        Command::Tier(a) => runtime()?.block_on(tier::run(a)),
        Command::Config(a) => runtime()?.block_on(config::run(a)),
        Command::Dump(a) => runtime()?.block_on(dump::run(a)),
        Command::Load(a) => runtime()?.block_on(load::run(a)),
        Command::Fsck(a) => runtime()?.block_on(fsck::run(a)),
        Command::Bench(a) => bench::run(a),
        Command::Objbench(a) => runtime()?.block_on(objbench::run(a)),
        Command::Changelog(a) => runtime()?.block_on(changelog::run(a)),
        Command::Gateway(a) => gateway::run(a),
        Command::Warmup(a) => warmup::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Destroy(a) => runtime()?.block_on(destroy::run(a)),
        Command::Debug(a) => debug::run(a),
        Command::Sync(a) => sync::run(a),
    }
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("jfs")
        .build()?)
}
