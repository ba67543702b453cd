//! A tree's sizes and counts for `jfs summary`: from the database's
//! per-directory figures in one query (`jfs.summary_of`), the rows shown
//! only where the caller could have listed them.
use std::collections::HashSet;
use std::fmt::Write as _;

use super::access::{Requester, READ, SEARCH};
use super::control_auth::hex_encode;
use super::Vfs;
use crate::meta::{Attr, NodeType};

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
        let rows = self
            .ns
            .meta_of(attr.inode)
            .summary_of(attr.inode, depth.clamp(0, 1000))
            .await
            .map_err(|e| e.to_string())?;
        let Some(root) = rows.iter().find(|r| r.depth == 0) else {
            return Err(std::io::Error::from_raw_os_error(libc::ENOENT).to_string());
        };
        let prefix = if root.path == "/" {
            "/".to_string()
        } else {
            format!("{}/", root.path)
        };
        // the directories whose entries the caller may see, level by level
        let mut listable: HashSet<&str> = HashSet::new();
        let mut out = String::new();
        let mut rows: Vec<_> = rows.iter().collect();
        rows.sort_by_key(|r| r.depth);
        for row in rows {
            let rel = if row.depth == 0 {
                ""
            } else {
                row.path.strip_prefix(&prefix).unwrap_or(&row.path)
            };
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
