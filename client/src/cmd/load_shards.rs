//! `jfs load ROOT_URL FILE --shard N=URL...`: a sharded volume's dump loaded into shards, each node into the database of the shard its inode names (the root's tree into ROOT_URL), each database made a shard of the volume, mapped, and the shard roots linked in their parents' databases, as `jfs shard mkdir` leaves them.
use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::Path;

use anyhow::Context;

use super::dump::Progress;
use super::load::{begin, finish, report_left_out, request_of, spawn_parser};
use crate::meta::{redact_url, shard_of, FormatRequest, Loader, Meta, Staged};

/// A database the load goes into: shard 0 is the volume's root.
struct Target {
    url: String,
    meta: Meta,
    loader: Loader,
}

/// The entry of a shard root: (parent, name, inode), the parent in
/// another database than the node.
type ShardLink = (i64, Vec<u8>, i64);

pub async fn run(
    root_url: &str,
    specs: &[String],
    file: &Path,
    force: bool,
    input: Box<dyn Read + Send>,
) -> anyhow::Result<()> {
    let mut urls = BTreeMap::from([(0u16, root_url.to_string())]);
    for spec in specs {
        let (number, url) = spec
            .split_once('=')
            .and_then(|(n, url)| Some((n.parse::<u16>().ok()?, url)))
            .filter(|(n, _)| (1..=32766).contains(n))
            .with_context(|| {
                format!("--shard {spec:?}: give N=URL, N a shard number 1 to 32766")
            })?;
        anyhow::ensure!(
            urls.insert(number, url.to_string()).is_none(),
            "--shard {number} given twice"
        );
    }
    let mut targets = BTreeMap::new();
    let mut identities = BTreeMap::new();
    for (&number, url) in &urls {
        let meta = Meta::connect_for_format(url).await?;
        if let Some(other) = identities.insert(meta.database_identity().await?, number) {
            anyhow::bail!(
                "shard {number} and shard {other} are one database ({})",
                redact_url(url)
            );
        }
        let loader = begin(&meta, url).await?;
        let url = url.clone();
        targets.insert(number, Target { url, meta, loader });
    }

    let (mut rx, parser) = spawn_parser(input, true);
    let mut progress = Progress::new("loading");
    let mut links = Vec::new();
    let mut shard_dirs = HashSet::new();
    let routed = async {
        while let Some(batch) = rx.recv().await {
            for (number, mut staged) in route(batch, &mut links, &mut shard_dirs) {
                let target = targets.get(&number).with_context(|| {
                    format!(
                        "the dump holds nodes of shard {number}: give --shard {number}=URL (or \
                         load it into one database, without --shard)"
                    )
                })?;
                target.loader.stage(&mut staged).await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    // (the parser stops once nothing receives)
    drop(rx);
    let parsed = parser.await.context("the dump parser failed")?;
    routed?;
    let parsed = parsed?;
    if let Some((parent, name, inode)) = links.iter().find(|l| !shard_dirs.contains(&l.2)) {
        anyhow::bail!(
            "entry {:?} of directory {parent} names node {inode} of another shard, which is no \
             directory the dump holds: only a shard root's entry crosses shards (load it into \
             one database, without --shard)",
            String::from_utf8_lossy(name)
        );
    }
    let request = request_of(&parsed, file, force)?;
    let uuid = request.uuid.clone().with_context(|| {
        format!(
            "{} names no volume uuid: a dump without one loads into one database",
            file.display()
        )
    })?;
    eprintln!(
        "read {} entries in {:.2} s; moving them into {} databases",
        parsed.entries,
        progress.seconds(),
        targets.len()
    );

    // each shard's database made that shard of the volume, then the root
    // loaded (formatted with the dump's volume), then each shard
    let mut targets = targets.into_iter();
    let (_, root) = targets.next().context("no root database")?;
    let shards: Vec<(u16, Target)> = targets.collect();
    for (number, shard) in &shards {
        make_shard(shard, *number, &request, &uuid)
            .await
            .with_context(|| format!("shard {number} at {}", redact_url(&shard.url)))?;
    }
    let loaded = finish(root.loader, &request)
        .await
        .with_context(|| format!("loading the root database {}", redact_url(&root.url)))?;
    let mut totals = (loaded.nodes, loaded.entries, loaded.slices);
    let mut metas = BTreeMap::from([(0u16, root.meta)]);
    for (number, shard) in shards {
        let loaded = finish(shard.loader, &request)
            .await
            .with_context(|| format!("loading shard {number} at {}", redact_url(&shard.url)))?;
        totals = (
            totals.0 + loaded.nodes,
            totals.1 + loaded.entries,
            totals.2 + loaded.slices,
        );
        let (errno, message) = metas[&0]
            .shard_add(number, &super::shard::without_credentials(&shard.url))
            .await?;
        anyhow::ensure!(
            errno == 0 || errno == libc::EEXIST,
            "adding shard {number} to the map: {message}"
        );
        metas.insert(number, shard.meta);
    }
    // the shard roots' names, in their parents' databases, last: until
    // then each is a directory of its shard that no name reaches
    for (parent, name, inode) in &links {
        let number = shard_of(*parent as u64).unwrap_or(0);
        metas[&number]
            .shard_root_link(*parent as u64, name, *inode as u64)
            .await
            .with_context(|| {
                format!(
                    "linking shard root {:?} (inode {inode}) in directory {parent} of shard {number}",
                    String::from_utf8_lossy(name)
                )
            })?;
        totals.1 += 1;
    }
    progress.update(parsed.entries);
    eprintln!(
        "loaded {} nodes, {} entries, {} slices into the root and {} shard(s), {} shard root(s) \
         linked, in {:.2} s ({:.0} entries/s)",
        totals.0,
        totals.1,
        totals.2,
        metas.len() - 1,
        links.len(),
        progress.seconds(),
        progress.rate(parsed.entries)
    );
    report_left_out(&parsed);
    Ok(())
}

/// Makes `shard`'s database (empty, or left so by an earlier run) shard
/// `number` of the volume the dump holds, as `jfs shard add` does.
async fn make_shard(
    shard: &Target,
    number: u16,
    request: &crate::meta::LoadRequest,
    uuid: &str,
) -> anyhow::Result<()> {
    let format = FormatRequest {
        name: request.name.clone(),
        storage: request.storage.clone(),
        bucket: request.bucket.clone(),
        block_size: request.block_size as u32,
        trash_days: 0,
        capacity: 0,
        inodes: 0,
        meta_durability: "fsync".to_string(),
        uuid: Some(uuid.to_string()),
        force: false,
        keys: None,
        compression: Some(request.compression.clone()),
        encryption: request.encryption.clone(),
    };
    let (errno, message) = shard.meta.format(&format).await?;
    let again = errno == libc::EEXIST && shard.meta.volume().await?.uuid == uuid;
    anyhow::ensure!(
        errno == 0 || again,
        "cannot format it as a shard: {message}"
    );
    let (errno, message) = shard.meta.shard_init(uuid, number).await?;
    anyhow::ensure!(errno == 0, "{message}");
    Ok(())
}

/// `batch`'s rows by the database each goes to: a node's (with its
/// slices, target, xattrs and ACLs) is its inode's shard, an entry's its
/// parent's. A shard root's entry goes to its node's shard too (its
/// parent there) and into `links`, to be made in the parent's database
/// once both are loaded; the directories of shards other than the root's
/// go into `shard_dirs` (a shard root is one).
fn route(
    batch: Staged,
    links: &mut Vec<ShardLink>,
    shard_dirs: &mut HashSet<i64>,
) -> BTreeMap<u16, Staged> {
    let shard = |inode: i64| shard_of(inode as u64).unwrap_or(0);
    let mut out: BTreeMap<u16, Staged> = BTreeMap::new();
    for node in batch.nodes {
        if node.kind == 2 && shard(node.inode) != 0 {
            shard_dirs.insert(node.inode);
        }
        out.entry(shard(node.inode)).or_default().nodes.push(node);
    }
    for (parent, name, inode) in batch.edges {
        let (from, to) = (shard(parent), shard(inode));
        if from != to {
            links.push((parent, name.clone(), inode));
        }
        out.entry(to).or_default().edges.push((parent, name, inode));
    }
    for slice in batch.slices {
        out.entry(shard(slice.inode))
            .or_default()
            .slices
            .push(slice);
    }
    for row in batch.symlinks {
        out.entry(shard(row.0)).or_default().symlinks.push(row);
    }
    for row in batch.xattrs {
        out.entry(shard(row.0)).or_default().xattrs.push(row);
    }
    for row in batch.acls {
        out.entry(shard(row.0)).or_default().acls.push(row);
    }
    for row in batch.quotas {
        let to = if row.0 == "dir" { shard(row.1) } else { 0 };
        out.entry(to).or_default().quotas.push(row);
    }
    out
}
