//! `jfs status`: a volume's settings, usage, extension version, whether the
//! server is a hot standby (and its lag), and mounted clients (each one's
//! mount point, client version and metrics address).
use clap::Args;

use crate::meta::Meta;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

pub async fn run(a: StatusArgs) -> anyhow::Result<()> {
    let meta = Meta::connect(&a.meta_url, 2).await?;
    let v = crate::volume::read_volume(&meta, &a.meta_url).await?;
    let s = meta.statfs(1).await?;
    println!("volume      {} ({})", v.name, v.uuid);
    println!("storage     {} {}", v.storage, v.bucket);
    println!("block size  {} KiB", v.block_size / 1024);
    let sealed = match v.encrypt_algo.as_str() {
        "" => "not encrypted".to_string(),
        algo => format!("encrypted ({algo})"),
    };
    println!("blocks      compression {}, {sealed}", v.compression);
    println!("durability  {}", v.meta_durability);
    println!("trash days  {}", v.trash_days);
    let shard = meta.shard_number().await?;
    let shards = meta.shards().await?.len();
    if shard != 0 {
        println!(
            "shard       {shard} of the volume: the usage and sessions below are this \
             database's (jfs status and jfs shard list of its root show the rest)"
        );
    } else if shards > 0 {
        println!(
            "shards      {shards} besides this root database: the usage and sessions below are \
             the root's (jfs shard list shows each shard's; df of a mount, the sum)"
        );
    }
    let used = s.total_space - s.avail_space;
    println!(
        "space       {} used of {}{}",
        gib(used),
        gib(s.total_space),
        if v.capacity == 0 {
            " (no capacity set)"
        } else {
            ""
        }
    );
    println!(
        "inodes      {} used, {} free{}",
        s.used_inodes,
        s.avail_inodes,
        if v.inodes == 0 { " (no limit set)" } else { "" }
    );
    if let Some(q) = meta.delete_queue().await? {
        // (the store still holds them: the space above counts them)
        let cap = match q.cap {
            0 => "no cap".to_string(),
            cap => format!("cap {}", gib(cap)),
        };
        let oldest = q
            .oldest
            .map_or(String::new(), |t| format!(", the oldest freed {t}"));
        println!(
            "deleting    {} in {} freed slices{oldest} ({cap}, kept at least {})",
            gib(q.bytes),
            q.slices,
            q.retain
        );
    }
    if let Some(u) = meta.inline_usage().await? {
        let max = match u.inline_max {
            0 => "off for new writes".to_string(),
            max => format!("files of at most {max} bytes"),
        };
        println!(
            "inline      {} files, {} slices, {} bytes kept in the database ({max})",
            u.files, u.slices, u.bytes
        );
    }
    let extension = meta.installed_version().await?.unwrap_or_default();
    println!(
        "versions    extension {extension}, this client {}",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(lag) = meta.replay_lag().await? {
        println!(
            "server      a hot standby, {lag:.1} s behind its primary (mounts of it are read-only)"
        );
    }
    let sessions = meta.sessions().await?;
    println!("sessions    {}", sessions.len());
    for x in sessions {
        let info: serde_json::Value = serde_json::from_str(&x.info).unwrap_or_default();
        let field = |name: &str| match info.get(name).and_then(|v| v.as_str()) {
            Some("") | None => "-".to_string(),
            Some(v) => v.to_string(),
        };
        let replica = match field("meta_replica").as_str() {
            "-" => String::new(),
            url => format!("  reads from {url}"),
        };
        println!(
            "  {:>4}  {}:{}  {}  client {}  metrics {}  started {}  heartbeat {}  open-unlinked {}{replica}",
            x.sid,
            x.host,
            x.pid,
            field("mountpoint"),
            field("version"),
            field("metrics"),
            x.started,
            x.heartbeat,
            x.sustained
        );
    }
    Ok(())
}
