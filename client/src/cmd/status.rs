//! `jfs status`: a volume's settings, usage and mounted clients.
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
    let v = meta.volume().await?;
    let s = meta.statfs(1).await?;
    println!("volume      {} ({})", v.name, v.uuid);
    println!("storage     {} {}", v.storage, v.bucket);
    println!("block size  {} KiB", v.block_size / 1024);
    println!("durability  {}", v.meta_durability);
    println!("trash days  {}", v.trash_days);
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
    let sessions = meta.sessions().await?;
    println!("sessions    {}", sessions.len());
    for x in sessions {
        println!(
            "  {:>4}  {}:{}  {}  started {}  heartbeat {}  open-unlinked {}",
            x.sid, x.host, x.pid, x.info, x.started, x.heartbeat, x.sustained
        );
    }
    Ok(())
}
