//! `jfs shard fsck`: the entries that cross shards, checked from both sides: each names a directory of its shard whose parent it is in, and each such directory has one name.
//!
//! Each database checks itself (`jfs fsck`, `jfs.fsck()`); what no single
//! database can see is a shard root's two halves: its name in the parent's
//! database and its node on its own shard. A crash between the two steps of
//! `jfs shard mkdir` leaves a directory without a name; one between those
//! of a removal (`jfs shard rmdir`, a mount's rmdir, `rm -rf`, `jfs rmr`:
//! the node first, then the name) leaves a name of nothing, as would a
//! shard restored from an older backup. With
//! `--repair`, names of nothing are removed, and empty directories without
//! a name; a directory without a name that holds files is left for a person.
use std::collections::HashMap;

use crate::meta::{shard_of, ShardLink, ShardRoot};

/// What is wrong with one shard root, and whether `--repair` mends it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finding {
    /// A name in shard `shard`'s database whose directory is not on its shard.
    NamesNothing { shard: u16, link: ShardLink },
    /// A name whose directory says another parent.
    OtherParent {
        shard: u16,
        link: ShardLink,
        parent: u64,
    },
    /// A directory of shard `shard` that no name in its parent's database names.
    Unnamed { shard: u16, root: ShardRoot },
    /// A directory named more than once.
    NamedTwice { inode: u64, names: usize },
}

/// The findings over every database's links and roots (`links` and
/// `roots` by the shard whose database holds them).
fn check(links: &[(u16, ShardLink)], roots: &[(u16, ShardRoot)]) -> Vec<Finding> {
    let by_inode: HashMap<u64, &ShardRoot> = roots.iter().map(|(_, r)| (r.inode, r)).collect();
    let mut names: HashMap<u64, usize> = HashMap::new();
    let mut findings = Vec::new();
    for (shard, link) in links {
        *names.entry(link.inode).or_default() += 1;
        match by_inode.get(&link.inode) {
            None => findings.push(Finding::NamesNothing {
                shard: *shard,
                link: link.clone(),
            }),
            Some(root) if root.parent != link.parent => findings.push(Finding::OtherParent {
                shard: *shard,
                link: link.clone(),
                parent: root.parent,
            }),
            Some(_) => {}
        }
    }
    for (shard, root) in roots {
        match names.get(&root.inode).copied().unwrap_or(0) {
            0 => findings.push(Finding::Unnamed {
                shard: *shard,
                root: root.clone(),
            }),
            1 => {}
            n => findings.push(Finding::NamedTwice {
                inode: root.inode,
                names: n,
            }),
        }
    }
    findings
}

pub async fn run(meta_url: &str, repair: bool) -> anyhow::Result<()> {
    let set = super::shard::open_admin(meta_url, "shard_links", "checking shards").await?;
    let (mut links, mut roots) = (Vec::new(), Vec::new());
    for shard in set.numbers() {
        let meta = set.meta(shard).await?;
        links.extend(meta.shard_links().await?.into_iter().map(|l| (shard, l)));
        roots.extend(meta.shard_roots().await?.into_iter().map(|r| (shard, r)));
    }
    println!(
        "{} shard(s): {} name(s) of directories on other shards, {} such directories",
        set.numbers().len(),
        links.len(),
        roots.len()
    );
    let findings = check(&links, &roots);
    let mut left = 0;
    for finding in &findings {
        let mended = match finding {
            Finding::NamesNothing { shard, link } => {
                println!(
                    "shard {shard}: entry {:?} of directory {} names directory {} of shard {}, \
                     which is not there",
                    String::from_utf8_lossy(&link.name),
                    link.parent,
                    link.inode,
                    shard_of(link.inode).unwrap_or(0)
                );
                match repair {
                    true => {
                        let meta = set.meta(*shard).await?;
                        meta.shard_root_unlink(link.parent, &link.name).await?;
                        true
                    }
                    false => false,
                }
            }
            Finding::Unnamed { shard, root } => {
                println!(
                    "shard {shard}: directory {} ({}) has no name in directory {} of shard {}",
                    root.inode,
                    if root.empty { "empty" } else { "holds entries" },
                    root.parent,
                    shard_of(root.parent).unwrap_or(0)
                );
                match (repair, root.empty) {
                    (true, true) => {
                        set.meta(*shard)
                            .await?
                            .shard_root_remove(root.inode)
                            .await?;
                        true
                    }
                    (true, false) => {
                        println!(
                            "  left alone: it holds entries (give it a name with SQL, or empty it)"
                        );
                        false
                    }
                    (false, _) => false,
                }
            }
            Finding::OtherParent {
                shard,
                link,
                parent,
            } => {
                println!(
                    "shard {shard}: entry {:?} of directory {} names directory {}, whose parent \
                     is {parent}",
                    String::from_utf8_lossy(&link.name),
                    link.parent,
                    link.inode
                );
                false
            }
            Finding::NamedTwice { inode, names } => {
                println!("directory {inode} has {names} names");
                false
            }
        };
        match mended {
            true => println!("  repaired"),
            false => left += 1,
        }
    }
    match (findings.is_empty(), left) {
        (true, _) => println!("the entries across shards are whole"),
        (false, 0) => println!("{} problem(s) repaired", findings.len()),
        (false, n) if repair => anyhow::bail!("{n} problem(s) left (see above)"),
        (false, n) => anyhow::bail!("{n} problem(s): run again with --repair to mend what it can"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(parent: u64, name: &str, inode: u64) -> ShardLink {
        ShardLink {
            parent,
            name: name.as_bytes().to_vec(),
            inode,
        }
    }

    fn root(inode: u64, parent: u64) -> ShardRoot {
        ShardRoot {
            inode,
            parent,
            empty: true,
        }
    }

    #[test]
    fn each_side_of_a_shard_root_is_checked_against_the_other() {
        let s1 = 1 << 48;
        let s2 = 2 << 48;
        let links = vec![
            (0, link(1, "whole", s1 + 1)),
            (0, link(1, "nothing", s1 + 2)),
            (1, link(s1 + 1, "moved", s2 + 1)),
            (0, link(1, "again", s1 + 1)),
        ];
        let roots = vec![
            (1, root(s1 + 1, 1)),
            (1, root(s1 + 3, 1)),
            (2, root(s2 + 1, s1 + 5)),
        ];
        assert_eq!(
            check(&links, &roots),
            vec![
                Finding::NamesNothing {
                    shard: 0,
                    link: link(1, "nothing", s1 + 2)
                },
                Finding::OtherParent {
                    shard: 1,
                    link: link(s1 + 1, "moved", s2 + 1),
                    parent: s1 + 5
                },
                Finding::NamedTwice {
                    inode: s1 + 1,
                    names: 2
                },
                Finding::Unnamed {
                    shard: 1,
                    root: root(s1 + 3, 1)
                },
            ]
        );
        assert!(check(&links[..1], &roots[..1]).is_empty());
    }
}
