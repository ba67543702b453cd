//! Writing a dump: the volume read in one snapshot and written as the rows arrive (memory flat in the number of entries).
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::TryStreamExt;
use serde::Serialize;

use super::{acl_of, escape, Attr, Counters, Quota, Setting, Xattr, REMOVED_KEY, TRASH_INODE};
use anyhow::Context;

use crate::meta::{shard_of, DumpNode, Meta, NodeType, Snapshot};
use crate::object::{with_retries, ObjectStore};
use crate::volume::layout::block_key;

/// What a dump wrote.
#[derive(Debug, Default, Clone, Copy)]
pub struct Dumped {
    /// Entries written (a file with n names counts n times), the roots included.
    pub entries: u64,
    /// Whether the volume's RSA key was left out (`EncryptKey` "removed").
    pub key_left_out: bool,
}

/// Writes the volume (or the tree at `subdir`) to `out` in JuiceFS's JSON
/// dump layout, calling `progress` with the entries written so far. An
/// encrypted volume's RSA key is written only with `keep_secret_key`; else
/// its `EncryptKey` says "removed", as JuiceFS writes it. `meta` is the
/// volume's (root) database; `shards` its other shards' (by number), whose
/// trees are written in place of the shard roots that name them (each
/// database read in a snapshot of its own).
pub async fn dump(
    meta: &Meta,
    shards: &[(u16, Arc<Meta>)],
    out: &mut (dyn Write + Send),
    subdir: Option<&str>,
    keep_secret_key: bool,
    objects: Option<&dyn ObjectStore>,
    mut progress: impl FnMut(u64) + Send,
) -> anyhow::Result<Dumped> {
    // how blocks are stored (fixed once the volume holds data, so read
    // before the snapshot, which holds a connection): a load elsewhere
    // must read them alike
    let stored = match meta.volume().await {
        Ok(format) => {
            let key = match format.encrypt_algo.as_str() {
                "" => String::new(),
                _ if !keep_secret_key => REMOVED_KEY.to_string(),
                _ => meta.volume_secrets().await?.encrypt_key,
            };
            Some((format.compression, format.encrypt_algo, key))
        }
        // (the snapshot says so, below)
        Err(crate::meta::MetaError::Errno(libc::ENOENT)) => None,
        Err(e) => return Err(e.into()),
    };
    let snap = meta.dump_snapshot().await?;
    let volume = snap.volume().await.map_err(|e| match e {
        crate::meta::MetaError::Errno(libc::ENOENT) => {
            anyhow::anyhow!("the database holds no volume: nothing to dump")
        }
        e => e.into(),
    })?;
    let root = match subdir.filter(|p| !p.trim_matches('/').is_empty()) {
        Some(path) => snap.resolve(path).await.map_err(|e| {
            anyhow::anyhow!("--subdir {path}: {e} (a directory path inside the volume, as /a/b)")
        })?,
        None => 1,
    };
    let (compression, encrypt_algo, encrypt_key) = stored.unwrap_or_default();
    let setting = Setting {
        compression,
        encrypt_key,
        encrypt_algo,
        name: volume.name.clone(),
        uuid: volume.uuid.clone(),
        storage: volume.storage.clone(),
        bucket: volume.bucket.clone(),
        block_size: i64::from(volume.block_size / 1024),
        capacity: volume.capacity,
        inodes: volume.inodes,
        trash_days: i64::from(volume.trash_days),
        meta_version: 1,
        enable_acl: volume.enable_acl,
        ..Setting::default()
    };
    let mut others = HashMap::new();
    let (mut used_space, mut used_inodes) = (volume.used_space, volume.used_inodes);
    for (number, shard) in shards {
        let snap = shard.dump_snapshot().await?;
        let part = snap.volume().await?;
        used_space += part.used_space;
        used_inodes += part.used_inodes;
        others.insert(*number, snap);
    }
    // small files kept in the database: their blocks written as objects
    // first, so that the dump names only blocks that exist (JuiceFS, and
    // a load, read them from the store)
    store_inline(&snap, &volume.name, objects).await?;
    for snap in others.values() {
        store_inline(snap, &volume.name, objects).await?;
    }
    let counters = Counters {
        used_space,
        used_inodes,
        next_inode: volume.next_inode,
        next_chunk: volume.next_slice,
        next_session: 0,
        next_trash: 0,
    };
    write!(out, "{{\n  \"Setting\": {},\n", indented(&setting, 2)?)?;
    writeln!(out, "  \"Counters\": {},", indented(&counters, 2)?)?;
    write!(out, "  \"Sustained\": [],\n  \"DelFiles\": [],\n")?;
    let quotas = snap.quotas().await?;
    for (key, kind) in [
        ("Quotas", "dir"),
        ("UserQuotas", "user"),
        ("GroupQuotas", "group"),
    ] {
        let of_kind: std::collections::BTreeMap<String, Quota> = quotas
            .iter()
            .filter(|q| q.kind == kind)
            .map(|q| {
                (
                    q.key.to_string(),
                    Quota {
                        max_space: q.max_space,
                        max_inodes: q.max_inodes,
                    },
                )
            })
            .collect();
        if !of_kind.is_empty() {
            writeln!(out, "  \"{key}\": {},", indented(&of_kind, 2)?)?;
        }
    }
    let mut written = Dumped {
        key_left_out: setting.encrypt_key == REMOVED_KEY,
        ..Dumped::default()
    };
    out.write_all(b"  \"FSTree\": ")?;
    write_tree(&snap, &others, root, out, &mut written, &mut progress).await?;
    if root == 1 && volume.has_trash {
        out.write_all(b",\n  \"Trash\": ")?;
        write_tree(
            &snap,
            &others,
            TRASH_INODE,
            out,
            &mut written,
            &mut progress,
        )
        .await?;
    }
    out.write_all(b"\n}\n")?;
    out.flush()?;
    snap.end().await?;
    for (_, snap) in others {
        snap.end().await?;
    }
    Ok(written)
}

/// `value` as indented JSON whose lines after the first are shifted by `by` spaces.
fn indented(value: &impl Serialize, by: usize) -> anyhow::Result<String> {
    let text = serde_json::to_string_pretty(value)?;
    Ok(text.replace('\n', &format!("\n{}", " ".repeat(by))))
}

/// Writes the entry of `root` with everything below it, depth first, as the rows arrive.
async fn write_tree(
    snap: &Snapshot,
    others: &HashMap<u16, Snapshot>,
    root: i64,
    out: &mut (dyn Write + Send),
    written: &mut Dumped,
    progress: &mut (impl FnMut(u64) + Send),
) -> anyhow::Result<()> {
    // one flag per open directory: whether an entry was written in it yet
    let mut open: Vec<bool> = Vec::new();
    let mut tree = Tree {
        others,
        out,
        written,
        progress,
        open: &mut open,
    };
    tree.rows(snap, root, 0, None).await?;
    while tree.open.pop().is_some() {
        close_dir(tree.out, tree.open.len())?;
    }
    (tree.progress)(tree.written.entries);
    Ok(())
}

/// Writes the blocks of the slices `snap` keeps in its database as the
/// objects they would have been (`volume`'s keys, encoded as its blocks);
/// without `objects` (no store opened), refuses when there are any.
async fn store_inline(
    snap: &Snapshot,
    volume: &str,
    objects: Option<&dyn ObjectStore>,
) -> anyhow::Result<()> {
    let mut after = 0;
    loop {
        let page = snap.inline_blocks(after, 1000).await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.0;
        let Some(store) = objects else {
            anyhow::bail!(
                "the volume keeps small files in the database (jfs format --inline-max): \
                 a dump writes them as objects, and needs the object store for that"
            );
        };
        for (id, size, stored) in page {
            // (one block, shorter than the block size)
            let key = block_key(volume, id, 0, size);
            let block = store
                .decode_block(&key, stored)
                .with_context(|| format!("{key}, kept in the database, does not open"))?;
            with_retries(&format!("put {key}"), || {
                store.put_block(&key, block.clone(), "")
            })
            .await
            .with_context(|| format!("writing {key} to {}", store.describe()))?;
        }
    }
}

/// A tree being written: what its rows are written into, and the shards'
/// snapshots whose trees go in place of their shard roots.
struct Tree<'a, P> {
    others: &'a HashMap<u16, Snapshot>,
    out: &'a mut (dyn Write + Send),
    written: &'a mut Dumped,
    progress: &'a mut P,
    /// One flag per open directory: whether an entry was written in it yet.
    open: &'a mut Vec<bool>,
}

impl<P: FnMut(u64) + Send> Tree<'_, P> {
    /// Writes the rows of `snap`'s tree under `root`, at `base` levels
    /// below the top, the top named `top_name` (a shard root's name in its
    /// parent's database).
    fn rows<'s>(
        &'s mut self,
        snap: &'s Snapshot,
        root: i64,
        base: usize,
        top_name: Option<Vec<u8>>,
    ) -> BoxFuture<'s, anyhow::Result<()>> {
        Box::pin(async move {
            let rows = snap.tree(root).await?;
            futures_util::pin_mut!(rows);
            let mut top_name = top_name;
            while let Some(mut node) = rows.try_next().await? {
                let depth = base + node.depth as usize;
                if node.depth == 0 && base > 0 {
                    node.name = top_name.take();
                }
                if node.elsewhere {
                    let shard = shard_of(node.attr.inode as u64).unwrap_or(0);
                    let Some(other) = self.others.get(&shard) else {
                        anyhow::bail!(
                            "entry {:?} names directory {} of shard {shard}, which the shard map \
                             lacks",
                            String::from_utf8_lossy(node.name.as_deref().unwrap_or_default()),
                            node.attr.inode
                        );
                    };
                    self.rows(other, node.attr.inode, depth, node.name.take())
                        .await?;
                    continue;
                }
                self.node(&node, depth)?;
            }
            Ok(())
        })
    }

    /// Writes one row at `depth`: its name, fields and, for a directory,
    /// the opening of its entries.
    fn node(&mut self, node: &DumpNode, depth: usize) -> anyhow::Result<()> {
        let out = &mut *self.out;
        while self.open.len() > depth {
            close_dir(out, self.open.len() - 1)?;
            self.open.pop();
        }
        if depth == 0 && node.attr.kind != NodeType::Dir as i16 {
            anyhow::bail!("--subdir: inode {} is not a directory", node.attr.inode);
        }
        if depth > 0 {
            let first = !std::mem::replace(&mut self.open[depth - 1], true);
            let name = escape(node.name.as_deref().unwrap_or_default());
            write!(
                out,
                "{}\n{}{}: {{",
                if first { "" } else { "," },
                pad(key_indent(depth)),
                serde_json::to_string(&name)?
            )?;
        } else {
            out.write_all(b"{")?;
        }
        write_fields(out, node, depth)?;
        if node.attr.kind == NodeType::Dir as i16 {
            write!(out, ",\n{}\"entries\": {{", pad(key_indent(depth) + 2))?;
            self.open.push(false);
        } else {
            write!(out, "\n{}}}", pad(key_indent(depth)))?;
        }
        self.written.entries += 1;
        if self.written.entries.is_multiple_of(10_000) {
            (self.progress)(self.written.entries);
        }
        Ok(())
    }
}

/// The indentation of the name of an entry at `depth` (its fields: 2 more).
fn key_indent(depth: usize) -> usize {
    2 + 4 * depth
}

fn pad(n: usize) -> String {
    " ".repeat(n)
}

/// Closes the `entries` of the directory at `depth`, then its entry.
fn close_dir(out: &mut (dyn Write + Send), depth: usize) -> std::io::Result<()> {
    write!(
        out,
        "\n{}}}\n{}}}",
        pad(key_indent(depth) + 2),
        pad(key_indent(depth))
    )
}

/// An entry's fields but `entries`: attr, symlink, xattrs, ACLs, chunks.
fn write_fields(out: &mut (dyn Write + Send), node: &DumpNode, depth: usize) -> anyhow::Result<()> {
    let at = pad(key_indent(depth) + 2);
    let attr = Attr::of_row(&node.attr);
    write!(out, "\n{at}\"attr\": {}", serde_json::to_string(&attr)?)?;
    if let Some(target) = &node.target {
        write!(
            out,
            ",\n{at}\"symlink\": {}",
            serde_json::to_string(&escape(target))?
        )?;
    }
    if !node.xattrs.is_empty() {
        let xattrs: Vec<Xattr> = node
            .xattrs
            .iter()
            .map(|(name, value)| Xattr {
                name: String::from_utf8_lossy(name).into_owned(),
                value: escape(value),
            })
            .collect();
        write!(
            out,
            ",\n{at}\"xattrs\": {}",
            serde_json::to_string(&xattrs)?
        )?;
    }
    for (key, kind) in [("posix_acl_access", 'a'), ("posix_acl_default", 'd')] {
        if let Some(acl) = acl_of(&node.acl, kind, node.attr.mode) {
            write!(out, ",\n{at}\"{key}\": {}", serde_json::to_string(&acl)?)?;
        }
    }
    if let Some(chunks) = &node.chunks_json {
        write!(out, ",\n{at}\"chunks\": {chunks}")?;
    }
    Ok(())
}
