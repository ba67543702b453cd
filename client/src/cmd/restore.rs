//! `jfs restore META_URL [HOUR...]`: put what the trash holds back where it
//! was (all of it, or the given hours, "YYYY-MM-DD-HH" as in /.trash).
use clap::Args;

use crate::meta::Meta;

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Trash hours to restore (default: all)
    hours: Vec<String>,
}

pub async fn run(a: RestoreArgs) -> anyhow::Result<()> {
    let meta = Meta::connect(&a.meta_url, 1).await?;
    let mut rows = Vec::new();
    if a.hours.is_empty() {
        rows = meta.restore(None).await?;
    } else {
        for hour in &a.hours {
            rows.extend(meta.restore(Some(hour)).await?);
        }
    }
    let mut left = 0;
    for r in &rows {
        if r.errno == 0 {
            println!("restored  {}  ({})", r.path, r.hour);
        } else {
            left += 1;
            println!(
                "kept      {}  ({}): {}",
                r.path,
                r.hour,
                std::io::Error::from_raw_os_error(r.errno)
            );
        }
    }
    println!("{} restored, {left} left in the trash", rows.len() - left);
    Ok(())
}
