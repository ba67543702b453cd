//! A tree's sizes and counts for `jfs summary`: from the database's
//! per-directory figures in one query (`jfs.summary_of`), the rows shown
//! only where the caller could have listed them.
use std::collections::HashSet;
use std::fmt::Write as _;

use super::access::{Requester, READ, SEARCH};
use super::control_auth::hex_encode;
use super::Vfs;
use futures_util::future::BoxFuture;

use crate::meta::{Attr, NodeType, SummaryRow};

impl Vfs {
    /// The summary of `attr`'s tree and of its directories down to `depth`
    /// levels: one line per row, "row DEPTH DIRS FILES LENGTH SPACE
    /// PATH_IN_HEX" (the path relative to `attr`, "-" for itself). A
    /// directory needs read and search to be summed, as `du` needs them;
    /// a row below it is shown when the caller may list the directory
    /// holding it (its figures cover all of its subtree, as a quota's do).
    pub(super) async fn summary(
        &self,
        attr: &Attr,
        depth: i32,
        who: &Requester,
    ) -> Result<String, String> {
        if attr.kind == NodeType::Dir && !who.may(attr, READ | SEARCH) {
            return Err(format!(
                "no read and search permission on the directory (inode {}): {}",
                attr.inode,
                std::io::Error::from_raw_os_error(libc::EACCES)
            ));
        }
        let rows = self.summary_rows(attr.inode, depth.clamp(0, 1000)).await?;
        if !rows.iter().any(|r| r.depth == 0) {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT).to_string());
        }
        // the directories whose entries the caller may see, level by level
        let mut listable: HashSet<&str> = HashSet::new();
        let mut out = String::new();
        let mut rows: Vec<_> = rows.iter().collect();
        // (by level, the largest first, as jfs.summary_of orders them)
        rows.sort_by_key(|r| (r.depth, std::cmp::Reverse(r.length)));
        for row in rows {
            let rel = row.path.as_str();
            if row.depth > 0 {
                let parent = rel.rsplit_once('/').map_or("", |(p, _)| p);
                if !listable.contains(parent) {
                    continue;
                }
            }
            if row.depth < depth {
                let a = self.getattr(row.inode).await;
                if a.is_ok_and(|a| who.may(&a, READ | SEARCH)) {
                    listable.insert(rel);
                }
            }
            let shown = if rel.is_empty() {
                "-".to_string()
            } else {
                hex_encode(rel.as_bytes())
            };
            let _ = writeln!(
                out,
                "row {} {} {} {} {} {shown}",
                row.depth, row.dirs, row.files, row.length, row.space
            );
        }
        Ok(out)
    }
}

impl Vfs {
    /// `inode`'s summary rows down to `depth` levels, each row's path
    /// relative to `inode` ("" for itself), with the subtrees of the shard
    /// roots below it (whose nodes its database does not hold) summed in
    /// from their shards: their figures added to every row above them,
    /// their own rows and those below them (within `depth`) from there.
    fn summary_rows(
        &self,
        inode: u64,
        depth: i32,
    ) -> BoxFuture<'_, Result<Vec<SummaryRow>, String>> {
        Box::pin(async move {
            let meta = self.ns.meta_of(inode);
            let mut rows = meta
                .summary_of(inode, depth)
                .await
                .map_err(|e| e.to_string())?;
            let Some(top) = rows.iter().find(|r| r.depth == 0).cloned() else {
                return Ok(rows);
            };
            let relative = |path: &str, depth: i32| -> String {
                let prefix = if top.path == "/" {
                    "/".to_string()
                } else {
                    format!("{}/", top.path)
                };
                match depth {
                    0 => String::new(),
                    _ => path.strip_prefix(&prefix).unwrap_or(path).to_string(),
                }
            };
            for r in &mut rows {
                r.path = relative(&r.path, r.depth);
            }
            if self.ns.parts().all().len() == 1 || top.dirs == 0 {
                return Ok(rows);
            }
            // the shard roots anywhere below it in this database
            let here = self.ns.parts().index_of(inode);
            let every = meta
                .summary_of(inode, EVERY_LEVEL)
                .await
                .map_err(|e| e.to_string())?;
            let shard_roots = every
                .iter()
                .filter(|r| r.depth > 0 && self.ns.parts().index_of(r.inode) != here);
            for root in shard_roots {
                let at = relative(&root.path, root.depth);
                let below = self
                    .summary_rows(root.inode, (depth - root.depth).max(0))
                    .await?;
                let Some(whole) = below.iter().find(|r| r.depth == 0).cloned() else {
                    continue;
                };
                // (in its parent's database a shard root is a directory of
                // no entries whose own entry is not counted: the shard's
                // figures replace it)
                let above = |r: &SummaryRow| {
                    r.depth < root.depth
                        && (r.path.is_empty() || at.starts_with(&format!("{}/", r.path)))
                };
                for r in rows.iter_mut().filter(|r| above(r)) {
                    r.dirs += whole.dirs - 1;
                    r.files += whole.files + 1;
                    r.length += whole.length - 4096;
                    r.space += whole.space;
                }
                rows.retain(|r| r.inode != root.inode);
                rows.extend(
                    below
                        .into_iter()
                        .filter(|b| root.depth + b.depth <= depth)
                        .map(|mut b| {
                            b.path = match b.path.is_empty() {
                                true => at.clone(),
                                false => format!("{at}/{}", b.path),
                            };
                            b.depth += root.depth;
                            b
                        }),
                );
            }
            Ok(rows)
        })
    }
}

/// A depth that reaches every directory of a tree.
const EVERY_LEVEL: i32 = 1 << 20;
