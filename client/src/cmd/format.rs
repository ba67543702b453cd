//! `jfs format`: create (or, with --force, update) a volume.
use anyhow::Context;
use bytes::Bytes;
use clap::Args;

use crate::meta::{FormatRequest, Meta, MetaError};
use crate::object;
use crate::volume;

/// The data cipher when --encrypt-algo is not given (JuiceFS's default).
const DEFAULT_ALGO: &str = "aes256gcm-rsa";

#[derive(Args, Debug)]
pub struct FormatArgs {
    /// PostgreSQL URL of the metadata database
    meta_url: String,
    /// Volume name: 3-63 lower-case letters, digits and "-"
    name: String,
    /// Object storage: file (a local directory) or s3
    #[arg(long, default_value = "file")]
    storage: String,
    /// Where blocks go: a directory for file, http(s)://host:port/bucket for s3
    #[arg(long)]
    bucket: Option<String>,
    /// Access key of the object store (stored in the volume; else the AWS environment)
    #[arg(long, env = "ACCESS_KEY", hide_env_values = true)]
    access_key: Option<String>,
    /// Secret key of the object store (prefer the SECRET_KEY environment variable)
    #[arg(long, env = "SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    /// Block size in KiB
    #[arg(long, default_value_t = 4096)]
    block_size: u32,
    /// Files no longer than this many KiB keep their bytes in the database,
    /// written with their metadata in one commit, instead of as objects
    /// (0 = never; at most 128)
    #[arg(long, value_name = "KiB", default_value_t = 0)]
    inline_max: u32,
    /// Days deleted files stay in the trash (0 = no trash)
    #[arg(long, default_value_t = 0)]
    trash_days: i32,
    /// Volume capacity in GiB (0 = unlimited)
    #[arg(long, default_value_t = 0)]
    capacity: u64,
    /// Number of inodes (0 = unlimited)
    #[arg(long, default_value_t = 0)]
    inodes: u64,
    /// fsync: operations are atomic and durable within a fraction of a second,
    /// fully at fsync/close; always: every operation is durable when it returns
    #[arg(long, default_value = "fsync")]
    meta_durability: String,
    /// Store and enforce POSIX ACLs (getfacl/setfacl, default ACLs); once
    /// on, they stay on
    #[arg(long)]
    enable_acl: bool,
    /// Compress blocks: none, lz4 or zstd (as JuiceFS's --compress; fixed
    /// once the volume holds data) [default: none, or what the volume has]
    #[arg(long)]
    compress: Option<String>,
    /// Encrypt every object with a key of its own wrapped by this RSA
    /// private key (a PEM file, e.g. `openssl genrsa -aes256 -out key.pem
    /// 2048`; its passphrase from JFS_RSA_PASSPHRASE), as JuiceFS's
    /// --encrypt-rsa-key; the key is kept in the volume
    #[arg(long, value_name = "PEM")]
    encrypt_rsa_key: Option<std::path::PathBuf>,
    /// The data cipher with --encrypt-rsa-key: aes256gcm-rsa or chacha20-rsa
    #[arg(long, requires = "encrypt_rsa_key", value_name = "ALGO")]
    encrypt_algo: Option<String>,
    /// Change the settings of an existing volume
    #[arg(long)]
    force: bool,
}

fn default_bucket() -> String {
    if running_as_root() {
        "/var/jfs".to_string()
    } else {
        format!(
            "{}/.jfs/local",
            std::env::var("HOME").unwrap_or_else(|_| "/tmp".into())
        )
    }
}

/// The owner of /proc/self is the effective uid.
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

pub async fn run(a: FormatArgs) -> anyhow::Result<()> {
    let bucket = match (&a.bucket, a.storage.as_str()) {
        (Some(b), _) => b.clone(),
        (None, "file") => default_bucket(),
        (None, _) => anyhow::bail!("--bucket is required for --storage {}", a.storage),
    };
    let keys = match (&a.access_key, &a.secret_key) {
        (Some(ak), Some(sk)) => Some((ak.clone(), sk.clone())),
        (None, None) => None,
        _ => anyhow::bail!("give both --access-key and --secret-key, or neither"),
    };
    if a.storage == "s3" {
        object::S3Store::new(&bucket, keys.clone())
            .await?
            .ensure_bucket()
            .await
            .with_context(|| format!("cannot reach or create the bucket {bucket}"))?;
    }
    if let Some(c) = &a.compress {
        object::Compression::parse(c)?;
    }
    // the key must open (with its passphrase) before anything is written
    let encryption = match &a.encrypt_rsa_key {
        Some(path) => {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the RSA key {}", path.display()))?;
            let algo = a
                .encrypt_algo
                .clone()
                .unwrap_or_else(|| DEFAULT_ALGO.into());
            volume::sealer(&algo, &pem).with_context(|| format!("{}", path.display()))?;
            Some((pem, algo))
        }
        None => None,
    };
    let meta = Meta::connect_for_format(&a.meta_url).await?;
    let existing = match meta.volume().await {
        Ok(v) => Some(v),
        Err(MetaError::Errno(libc::ENOENT)) => None,
        Err(e) => return Err(e.into()),
    };
    let existing_sealer = match &existing {
        Some(v) => volume::sealer(&v.encrypt_algo, &meta.volume_secrets().await?.encrypt_key)?,
        None => None,
    };
    // compression and key as given, else as the volume has them
    let compression = a.compress.clone().unwrap_or_else(|| match &existing {
        Some(v) => v.compression.clone(),
        None => "none".into(),
    });
    let (sealer, sealed_anew) = match &encryption {
        Some((pem, algo)) => (volume::sealer(algo, pem)?, true),
        None => (existing_sealer.clone(), false),
    };
    let plain = object::open(&a.storage, &bucket, keys.clone()).await?;
    // the bucket's mark reads as the volume stores objects now; it is
    // written as it will store them
    let existing_store = match (&existing, sealed_anew) {
        (Some(v), true) => {
            volume::encoded_store(plain.clone(), &a.name, &v.compression, existing_sealer)?
        }
        _ => volume::encoded_store(plain.clone(), &a.name, &compression, sealer.clone())?,
    };
    let store = volume::encoded_store(plain, &a.name, &compression, sealer)?;
    // the bucket must take, give back and delete an object before we promise anything
    let probe = format!("{}/.jfs-probe-{}", a.name, std::process::id());
    store
        .put(&probe, Bytes::from_static(b"jfs"), "")
        .await
        .with_context(|| format!("cannot write to {}", store.describe()))?;
    let back = store
        .get(&probe, 0, 3)
        .await
        .with_context(|| format!("cannot read from {}", store.describe()))?;
    anyhow::ensure!(
        &back[..] == b"jfs",
        "{} returned other bytes than stored",
        store.describe()
    );
    store.delete(&probe).await?;

    // the bucket's place for this name may be another volume's
    if let Some(owner) = object::bucket_owner(existing_store.as_ref(), &a.name).await? {
        let ours = existing.as_ref().map(|v| v.uuid.as_str());
        if ours != Some(owner.as_str()) {
            anyhow::bail!(
                "{}/{}/ holds volume {owner} of another database: two volumes in one place \
                 would overwrite each other's blocks; choose another --bucket or name \
                 (or remove the old volume's objects first)",
                store.describe(),
                a.name
            );
        }
    }
    let req = FormatRequest {
        name: a.name.clone(),
        storage: a.storage.clone(),
        bucket: bucket.clone(),
        block_size: a
            .block_size
            .checked_mul(1024)
            .context("--block-size too large")?,
        trash_days: a.trash_days,
        capacity: a
            .capacity
            .checked_mul(1 << 30)
            .context("--capacity too large")?,
        inodes: a.inodes,
        meta_durability: a.meta_durability.clone(),
        uuid: None,
        force: a.force,
        keys,
        compression: a.compress.clone(),
        encryption,
    };
    let (errno, message) = meta.format(&req).await?;
    match errno {
        0 => {
            if a.enable_acl {
                meta.enable_acl().await?;
            }
            meta.set_inline_max(inline_max_bytes(a.inline_max)?).await?;
            let volume = meta.volume().await?;
            // (checked above to be this volume's, or no one's)
            object::mark_bucket(store.as_ref(), &volume.name, &volume.uuid).await?;
            println!("{message}; blocks in {}", store.describe());
            Ok(())
        }
        libc::EEXIST => anyhow::bail!("{message} (jfs format --force)"),
        _ => anyhow::bail!("{message}"),
    }
}

/// `--inline-max` (KiB) in bytes, checked to be at most 128 KiB.
pub fn inline_max_bytes(kib: u32) -> anyhow::Result<u32> {
    anyhow::ensure!(
        kib <= 128,
        "--inline-max is at most 128 (KiB: a file kept in the database stays a row PostgreSQL \
         stores comfortably), not {kib}"
    );
    Ok(kib * 1024)
}
