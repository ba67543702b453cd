//! What a sync does, decided from the two listings alone: which directories
//! to make, which files and symlinks to copy (or compare first), what to
//! delete, which temporaries of an earlier run to clean, and which
//! directories' mode and mtime to set once their entries are written.
use std::collections::BTreeSet;

use super::endpoint::{is_temp, split_parent, Entry, Kind};

/// How entries are compared.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rules {
    /// Copy only when the source is newer than the destination (or missing).
    pub update: bool,
    /// Compare the content of files of the same size.
    pub checksum: bool,
    /// Delete what the destination has and the source has not.
    pub delete_dst: bool,
}

/// What the endpoints keep, which decides what is compared and made.
#[derive(Debug, Clone, Copy)]
pub struct Sides {
    /// Both keep mode and mtime: mtimes are compared and set.
    pub attrs: bool,
    /// The destination keeps directories and symlinks.
    pub tree: bool,
}

/// A file to copy, and whether to compare contents first (same size,
/// `--checksum`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub entry: Entry,
    pub compare_first: bool,
}

#[derive(Debug, Default)]
pub struct Plan {
    /// Source entries seen (temporaries of earlier runs left out).
    pub scanned: u64,
    pub mkdirs: Vec<Entry>,
    pub copies: Vec<Copy>,
    pub symlinks: Vec<Entry>,
    /// Destination entries to delete: files and symlinks, then directories
    /// deepest first.
    pub deletes: Vec<Entry>,
    /// Temporaries an interrupted run left at the destination.
    pub temps: Vec<Entry>,
    /// Source directories whose mode and mtime are set at the end, deepest
    /// first.
    pub dir_attrs: Vec<Entry>,
    /// Entries already in sync.
    pub skipped: u64,
    /// Entries that cannot be synced, with why.
    pub conflicts: Vec<(String, String)>,
    /// Entries left out on purpose, with why (symlinks to S3).
    pub left_out: Vec<(String, String)>,
}

impl Plan {
    pub fn bytes(&self) -> u64 {
        self.copies.iter().map(|c| c.entry.size).sum()
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::File => "a file",
        Kind::Dir => "a directory",
        Kind::Symlink => "a symlink",
    }
}

/// The plan that makes `dst` (sorted by path) mirror `src` (sorted by path).
pub fn plan(src: &[Entry], dst: &[Entry], rules: Rules, sides: Sides) -> Plan {
    let mut p = Plan::default();
    // (only a destination that keeps a tree has temporaries: S3 has none)
    let (dst, temps): (Vec<&Entry>, Vec<&Entry>) =
        dst.iter().partition(|e| !(sides.tree && is_temp(&e.path)));
    p.temps = temps.into_iter().cloned().collect();
    let (src, src_temps): (Vec<&Entry>, Vec<&Entry>) = src.iter().partition(|e| !is_temp(&e.path));
    for t in src_temps {
        p.left_out
            .push((t.path.clone(), "an unfinished copy's temporary".to_string()));
    }
    p.scanned = src.len() as u64;
    // directories whose entries change (their mtime is set again after)
    let mut touched = BTreeSet::new();
    // source directories the destination has a file or symlink in place
    // of: nothing is written below them (a write would follow the symlink
    // out of the tree)
    let mut blocked: BTreeSet<String> = BTreeSet::new();
    let (mut i, mut j) = (0, 0);
    while i < src.len() || j < dst.len() {
        if let Some(s) = src.get(i) {
            if !blocked.is_empty() && under_any(&s.path, &blocked) {
                i += 1;
                continue;
            }
        }
        let order = match (src.get(i), dst.get(j)) {
            (Some(s), Some(d)) => s.path.cmp(&d.path),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                entry_missing(&mut p, src[i], sides, &mut touched);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                if rules.delete_dst && (sides.tree || dst[j].kind != Kind::Dir) {
                    touched.insert(split_parent(&dst[j].path).0.to_string());
                    p.deletes.push(dst[j].clone());
                }
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                if sides.tree && src[i].kind == Kind::Dir && dst[j].kind != Kind::Dir {
                    blocked.insert(src[i].path.clone());
                }
                entry_present(&mut p, src[i], dst[j], rules, sides, &mut touched);
                i += 1;
                j += 1;
            }
        }
    }
    for t in &p.temps {
        touched.insert(split_parent(&t.path).0.to_string());
    }
    // files before the directories that held them, deepest directories first
    p.deletes.sort_by(|a, b| {
        (a.kind == Kind::Dir)
            .cmp(&(b.kind == Kind::Dir))
            .then(b.path.cmp(&a.path))
    });
    if sides.attrs && sides.tree {
        let same: BTreeSet<&str> = dst
            .iter()
            .filter(|d| d.kind == Kind::Dir)
            .map(|d| d.path.as_str())
            .collect();
        let mut dirs: Vec<Entry> = src
            .iter()
            .filter(|s| s.kind == Kind::Dir)
            .filter(|s| !blocked.contains(&s.path) && !under_any(&s.path, &blocked))
            .filter(|s| {
                touched.contains(&s.path)
                    || !same.contains(s.path.as_str())
                    || dst
                        .binary_search_by(|d| d.path.cmp(&s.path))
                        .is_ok_and(|k| dst[k].mode != s.mode || dst[k].mtime != s.mtime)
            })
            .map(|s| (*s).clone())
            .collect();
        dirs.reverse();
        p.dir_attrs = dirs;
    }
    p
}

/// Whether `path` is below one of `roots` (a descendant, not a root itself).
fn under_any(path: &str, roots: &BTreeSet<String>) -> bool {
    let mut at = path;
    while let Some((parent, _)) = at.rsplit_once('/') {
        if roots.contains(parent) {
            return true;
        }
        at = parent;
    }
    false
}

fn entry_missing(p: &mut Plan, s: &Entry, sides: Sides, touched: &mut BTreeSet<String>) {
    let parent = split_parent(&s.path).0.to_string();
    match s.kind {
        Kind::Dir if sides.tree => {
            touched.insert(parent);
            p.mkdirs.push(s.clone());
        }
        // S3 has no directories: its keys imply them
        Kind::Dir => p.skipped += 1,
        Kind::File => {
            touched.insert(parent);
            p.copies.push(Copy {
                entry: s.clone(),
                compare_first: false,
            });
        }
        Kind::Symlink if sides.tree => {
            touched.insert(parent);
            p.symlinks.push(s.clone());
        }
        Kind::Symlink => p
            .left_out
            .push((s.path.clone(), "a symlink: S3 keeps none".to_string())),
    }
}

fn entry_present(
    p: &mut Plan,
    s: &Entry,
    d: &Entry,
    rules: Rules,
    sides: Sides,
    touched: &mut BTreeSet<String>,
) {
    let parent = split_parent(&s.path).0.to_string();
    match (s.kind, d.kind) {
        (Kind::Dir, Kind::Dir) => p.skipped += 1,
        (Kind::File, Kind::File) => {
            let copy = if rules.update {
                s.mtime > d.mtime
            } else {
                s.size != d.size || (sides.attrs && s.mtime != d.mtime)
            };
            let compare_first = rules.checksum && s.size == d.size && !rules.update;
            if copy || compare_first {
                touched.insert(parent);
                p.copies.push(Copy {
                    entry: s.clone(),
                    compare_first,
                });
            } else {
                p.skipped += 1;
            }
        }
        (Kind::Symlink, Kind::Symlink) if s.target == d.target => p.skipped += 1,
        // a symlink replaces a file or a symlink, as a file replaces a symlink
        (Kind::Symlink, Kind::Symlink | Kind::File) if sides.tree => {
            touched.insert(parent);
            p.symlinks.push(s.clone());
        }
        (Kind::File, Kind::Symlink) => {
            touched.insert(parent);
            p.copies.push(Copy {
                entry: s.clone(),
                compare_first: false,
            });
        }
        (Kind::Symlink, _) if !sides.tree => p
            .left_out
            .push((s.path.clone(), "a symlink: S3 keeps none".to_string())),
        // on S3, a key "a" and keys "a/..." live side by side
        (Kind::Dir, _) | (_, Kind::Dir) if !sides.tree => {
            if s.kind == Kind::File {
                p.copies.push(Copy {
                    entry: s.clone(),
                    compare_first: false,
                });
            } else {
                p.skipped += 1;
            }
        }
        (sk, dk) => p.conflicts.push((
            s.path.clone(),
            format!(
                "the source has {} and the destination {}: remove the destination's",
                kind_name(sk),
                kind_name(dk)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::endpoint::temp_name;

    fn file(path: &str, size: u64, mtime: i64) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::File,
            size,
            mtime,
            mode: 0o644,
            target: None,
        }
    }

    fn dir(path: &str, mtime: i64) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::Dir,
            size: 0,
            mtime,
            mode: 0o755,
            target: None,
        }
    }

    fn link(path: &str, target: &str) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::Symlink,
            size: 0,
            mtime: 0,
            mode: 0o777,
            target: Some(target.as_bytes().to_vec()),
        }
    }

    const TREE: Sides = Sides {
        attrs: true,
        tree: true,
    };

    fn copied(p: &Plan) -> Vec<&str> {
        p.copies.iter().map(|c| c.entry.path.as_str()).collect()
    }

    #[test]
    fn what_differs_is_copied_and_the_rest_skipped() {
        let src = [
            dir("a", 5),
            file("a/new", 1, 1),
            file("a/same", 2, 2),
            file("a/size", 3, 3),
            file("a/time", 4, 4),
            link("l", "a/same"),
        ];
        let dst = [
            dir("a", 5),
            file("a/same", 2, 2),
            file("a/size", 30, 3),
            file("a/time", 4, 40),
            file("extra", 1, 1),
        ];
        let p = plan(&src, &dst, Rules::default(), TREE);
        assert_eq!(p.scanned, 6);
        assert_eq!(copied(&p), ["a/new", "a/size", "a/time"]);
        assert_eq!(p.symlinks, [link("l", "a/same")]);
        assert_eq!(p.skipped, 2);
        assert!(p.deletes.is_empty(), "deleted without --delete-dst");
        // a changed directory gets its mtime back
        assert_eq!(p.dir_attrs, [dir("a", 5)]);
        // without mtimes on one side, only sizes count
        let sizes_only = Sides {
            attrs: false,
            tree: true,
        };
        let p = plan(&src, &dst, Rules::default(), sizes_only);
        assert_eq!(copied(&p), ["a/new", "a/size"]);
        assert!(p.dir_attrs.is_empty());
    }

    #[test]
    fn update_copies_only_newer_sources() {
        let src = [file("old", 1, 1), file("new", 1, 9), file("gone", 5, 1)];
        let dst = [file("new", 2, 5), file("old", 2, 5)];
        let mut src = src.to_vec();
        src.sort_by(|a, b| a.path.cmp(&b.path));
        let rules = Rules {
            update: true,
            ..Rules::default()
        };
        let p = plan(&src, &dst, rules, TREE);
        assert_eq!(copied(&p), ["gone", "new"]);
        assert_eq!(p.skipped, 1);
    }

    #[test]
    fn checksum_compares_files_of_the_same_size() {
        let src = [file("a", 1, 1), file("b", 2, 1)];
        let dst = [file("a", 1, 1), file("b", 3, 1)];
        let rules = Rules {
            checksum: true,
            ..Rules::default()
        };
        let p = plan(&src, &dst, rules, TREE);
        assert_eq!(
            p.copies.iter().map(|c| c.compare_first).collect::<Vec<_>>(),
            [true, false]
        );
    }

    #[test]
    fn delete_dst_removes_files_before_their_directories() {
        let src = [file("keep", 1, 1)];
        let dst = [
            dir("d", 1),
            dir("d/e", 1),
            file("d/e/f", 1, 1),
            file("d/g", 1, 1),
            file("keep", 1, 1),
        ];
        let rules = Rules {
            delete_dst: true,
            ..Rules::default()
        };
        let p = plan(&src, &dst, rules, TREE);
        let order: Vec<&str> = p.deletes.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(order, ["d/g", "d/e/f", "d/e", "d"]);
        assert_eq!(p.skipped, 1);
    }

    #[test]
    fn temporaries_are_cleaned_not_compared() {
        let t = temp_name("d/f");
        let src = [dir("d", 1), file("d/f", 1, 1)];
        let dst = [dir("d", 1), file(&t, 1, 1)];
        let p = plan(&src, &dst, Rules::default(), TREE);
        assert_eq!(copied(&p), ["d/f"]);
        assert_eq!(p.temps.len(), 1);
        assert_eq!(p.temps[0].path, t);
    }

    #[test]
    fn s3_destinations_leave_out_symlinks_and_directories() {
        let s3 = Sides {
            attrs: false,
            tree: false,
        };
        let src = [dir("d", 1), file("d/f", 1, 1), link("l", "d")];
        let p = plan(&src, &[], Rules::default(), s3);
        assert!(p.mkdirs.is_empty() && p.symlinks.is_empty());
        assert_eq!(copied(&p), ["d/f"]);
        assert_eq!(p.left_out.len(), 1);
    }

    #[test]
    fn a_file_where_a_directory_is_conflicts() {
        let src = [file("x", 1, 1)];
        let dst = [dir("x", 1)];
        let p = plan(&src, &dst, Rules::default(), TREE);
        assert_eq!(p.conflicts.len(), 1);
        assert!(p.copies.is_empty());
    }

    #[test]
    fn nothing_is_written_below_a_symlink_or_file_where_a_directory_is() {
        // the destination's "a" is a symlink (to /etc, say), its "b" a file
        let src = [
            dir("a", 1),
            file("a-b", 1, 1),
            dir("a/d", 1),
            file("a/d/passwd", 5, 1),
            file("a/passwd", 5, 1),
            dir("b", 1),
            file("b/f", 1, 1),
        ];
        let dst = [link("a", "/etc"), file("b", 1, 1)];
        let p = plan(&src, &dst, Rules::default(), TREE);
        assert_eq!(p.conflicts.len(), 2, "{:?}", p.conflicts);
        assert_eq!(copied(&p), ["a-b"]);
        assert!(p.mkdirs.is_empty(), "{:?}", p.mkdirs);
        assert!(p.dir_attrs.is_empty(), "{:?}", p.dir_attrs);
    }
}
