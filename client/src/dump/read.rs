//! Reading a dump: a streaming parse (no tree in memory) that hands the rows it finds to the loader in batches.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::Read;

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};

use super::{
    acl_rows, type_code, unescape, Acl, Attr, Chunk, Counters, Quota, Setting, Xattr, CHUNK_SIZE,
};
use crate::meta::{Staged, StagedSlice};

/// Rows handed over at a time.
const BATCH_ROWS: usize = 20_000;

/// Bits of an inode below its shard's number (`meta::SHARD_SHIFT`), and the
/// number the trash's inode carries (no shard's).
const SHARD_SHIFT: u32 = crate::meta::SHARD_SHIFT;
const NO_SHARD: i64 = 0x7FFF;

/// What a dump holds besides its tree (which went to `send` as it was read).
#[derive(Debug, Default)]
pub struct Parsed {
    pub setting: Option<Setting>,
    pub counters: Option<Counters>,
    /// Entries read (a file with n names counts n times).
    pub entries: u64,
    /// Files waiting for deletion in the dumped volume (not loaded).
    pub deleted_files: u64,
}

/// Parses the dump in `input`, handing its rows to `send` in batches and
/// calling `progress` with the entries read so far. `send` fails when the
/// loader stopped; the parse then stops too. Nodes of a sharded volume's
/// other shards take free numbers of the root's (one database holds them).
pub fn parse(
    input: impl Read,
    send: impl FnMut(Staged) -> Result<(), String>,
    progress: impl FnMut(u64),
) -> anyhow::Result<Parsed> {
    parse_into(input, false, send, progress)
}

/// [`parse`], keeping the inode numbers of other shards' nodes when
/// `keep_shard_ids` (the load goes into shards: each node to its own).
pub fn parse_into(
    input: impl Read,
    keep_shard_ids: bool,
    send: impl FnMut(Staged) -> Result<(), String>,
    progress: impl FnMut(u64),
) -> anyhow::Result<Parsed> {
    let mut sink = Sink {
        keep_shard_ids,
        staged: Staged::default(),
        send: Box::new(send),
        progress: Box::new(progress),
        linked: HashSet::new(),
        root: None,
        renumbered: HashMap::new(),
        parsed: Parsed::default(),
    };
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, input));
    DumpSeed { sink: &mut sink }
        .deserialize(&mut de)
        .map_err(|e| anyhow::anyhow!("reading the dump: {e}"))?;
    de.end()
        .map_err(|e| anyhow::anyhow!("reading the dump: {e}"))?;
    sink.flush().map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(
        !keep_shard_ids || sink.root.is_none_or(|top| top == 1),
        "the dump is of a subdirectory (jfs dump --subdir): it loads into one database, not \
         into shards"
    );
    (sink.progress)(sink.parsed.entries);
    if let Some(counters) = &mut sink.parsed.counters {
        counters.next_inode += sink.renumbered.len() as i64;
    }
    Ok(sink.parsed)
}

struct Sink<'a> {
    /// Nodes of other shards keep their numbers (see [`parse_into`]).
    keep_shard_ids: bool,
    staged: Staged,
    send: Box<dyn FnMut(Staged) -> Result<(), String> + 'a>,
    progress: Box<dyn FnMut(u64) + 'a>,
    /// Files with several names already staged (their other names add an entry only).
    linked: HashSet<i64>,
    /// The dumped tree's top inode (a `--subdir` dump's), loaded as the root.
    root: Option<i64>,
    /// The new inodes of nodes a sharded volume's shards made (their ids
    /// carry another shard's number, which in this database would say the
    /// node is elsewhere): numbered on from the dump's next inode.
    renumbered: HashMap<i64, i64>,
    parsed: Parsed,
}

impl Sink<'_> {
    /// The inode a dumped inode becomes: the dumped top is the root, a
    /// node of another shard takes the next free number.
    fn inode(&mut self, dumped: i64) -> i64 {
        if Some(dumped) == self.root {
            return 1;
        }
        match dumped >> SHARD_SHIFT {
            0 | NO_SHARD => dumped,
            _ if self.keep_shard_ids => dumped,
            _ => {
                let next = self
                    .parsed
                    .counters
                    .as_ref()
                    .map_or(2, |c| c.next_inode.max(2))
                    + self.renumbered.len() as i64;
                *self.renumbered.entry(dumped).or_insert(next)
            }
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        if !self.staged.is_empty() {
            (self.send)(std::mem::take(&mut self.staged))?;
        }
        Ok(())
    }

    fn maybe_flush(&mut self) -> Result<(), String> {
        if self.staged.len() >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }
}

struct DumpSeed<'s, 'a> {
    sink: &'s mut Sink<'a>,
}

impl<'de> DeserializeSeed<'de> for DumpSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DumpSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JuiceFS or jfs JSON dump (an object with Setting, Counters and FSTree)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let sink = self.sink;
        let mut tree = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "Setting" => sink.parsed.setting = Some(map.next_value()?),
                "Counters" => sink.parsed.counters = Some(map.next_value()?),
                "DelFiles" => {
                    let files: Vec<IgnoredAny> = map.next_value()?;
                    sink.parsed.deleted_files = files.len() as u64;
                }
                "Quotas" | "UserQuotas" | "GroupQuotas" => {
                    let kind = match key.as_str() {
                        "Quotas" => "dir",
                        "UserQuotas" => "user",
                        _ => "group",
                    };
                    let quotas: BTreeMap<String, Quota> = map.next_value()?;
                    for (k, q) in quotas {
                        let id = k.parse::<i64>().map_err(|_| {
                            A::Error::custom(format!("{key}: key {k:?} is not a number"))
                        })?;
                        sink.staged
                            .quotas
                            .push((kind.to_string(), id, q.max_space, q.max_inodes));
                    }
                }
                "FSTree" => {
                    tree = true;
                    map.next_value_seed(EntrySeed {
                        sink: &mut *sink,
                        parent: None,
                        name: Vec::new(),
                    })?
                }
                "Trash" => map.next_value_seed(EntrySeed {
                    sink: &mut *sink,
                    parent: Some(1),
                    name: b".trash".to_vec(),
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !tree {
            return Err(A::Error::custom(
                "no FSTree: not a JuiceFS or jfs JSON dump",
            ));
        }
        Ok(())
    }
}

/// One entry: its node (once per node), its name in `parent`, and what is below it.
struct EntrySeed<'s, 'a> {
    sink: &'s mut Sink<'a>,
    /// None for the dumped tree's top.
    parent: Option<i64>,
    name: Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an entry object (attr, chunks, entries ...)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let sink = self.sink;
        let what = || String::from_utf8_lossy(&self.name).into_owned();
        // the node's inode once its attr is read, and whether this name only adds an entry
        let mut inode: Option<i64> = None;
        let mut link_only = false;
        let mut target = None;
        let mut xattrs: Vec<Xattr> = Vec::new();
        let mut acls: Vec<(char, Acl)> = Vec::new();
        let mut chunks: Vec<Chunk> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "attr" => {
                    let attr: Attr = map.next_value()?;
                    let kind = type_code(&attr.kind).ok_or_else(|| {
                        A::Error::custom(format!(
                            "entry {:?}: unknown type {:?}",
                            what(),
                            attr.kind
                        ))
                    })?;
                    if self.parent.is_none() {
                        sink.root = Some(attr.inode);
                    }
                    let ino = sink.inode(attr.inode);
                    inode = Some(ino);
                    if let Some(parent) = self.parent {
                        sink.staged.edges.push((parent, self.name.clone(), ino));
                    }
                    link_only = kind != 2 && attr.nlink > 1 && !sink.linked.insert(ino);
                    if !link_only {
                        sink.staged.nodes.push(attr.to_row(ino, kind));
                    }
                    sink.parsed.entries += 1;
                    if sink.parsed.entries.is_multiple_of(10_000) {
                        (sink.progress)(sink.parsed.entries);
                    }
                }
                "symlink" => target = Some(unescape(&map.next_value::<String>()?)),
                "xattrs" => xattrs = map.next_value::<Option<Vec<Xattr>>>()?.unwrap_or_default(),
                "posix_acl_access" | "posix_acl_default" => {
                    if let Some(acl) = map.next_value::<Option<Acl>>()? {
                        acls.push((if key == "posix_acl_access" { 'a' } else { 'd' }, acl));
                    }
                }
                "chunks" => chunks = map.next_value::<Option<Vec<Chunk>>>()?.unwrap_or_default(),
                "entries" => {
                    let Some(dir) = inode else {
                        return Err(A::Error::custom(format!(
                            "entry {:?}: its entries come before its attr (attr must come first)",
                            what()
                        )));
                    };
                    map.next_value_seed(EntriesSeed {
                        sink: &mut *sink,
                        parent: dir,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let Some(ino) = inode else {
            return Err(A::Error::custom(format!("entry {:?} has no attr", what())));
        };
        if !link_only {
            stage_parts(sink, ino, target, xattrs, acls, chunks).map_err(A::Error::custom)?;
        }
        sink.maybe_flush().map_err(A::Error::custom)
    }
}

/// Stages a node's symlink target, xattrs, ACL rows and slices.
fn stage_parts(
    sink: &mut Sink<'_>,
    inode: i64,
    target: Option<Vec<u8>>,
    xattrs: Vec<Xattr>,
    acls: Vec<(char, Acl)>,
    chunks: Vec<Chunk>,
) -> Result<(), String> {
    let staged = &mut sink.staged;
    if let Some(t) = target {
        staged.symlinks.push((inode, t));
    }
    for x in xattrs {
        staged
            .xattrs
            .push((inode, x.name.into_bytes(), unescape(&x.value)));
    }
    for (kind, acl) in acls {
        staged
            .acls
            .extend(acl_rows(&acl, kind).into_iter().map(|r| (inode, r)));
    }
    let int = |v: i64, what: &str| {
        i32::try_from(v).map_err(|_| format!("inode {inode}: slice {what} {v} out of range"))
    };
    for c in chunks {
        if c.index < 0 || c.index > i64::from(i32::MAX) || c.index * CHUNK_SIZE < 0 {
            return Err(format!(
                "inode {inode}: chunk index {} out of range",
                c.index
            ));
        }
        for (ord, s) in c.slices.into_iter().enumerate() {
            staged.slices.push(StagedSlice {
                inode,
                chunk_index: c.index as i32,
                ord: ord as i32,
                id: if s.id == 0 { s.chunkid } else { s.id },
                size: int(s.size, "size")?,
                off: int(s.off, "off")?,
                len: int(s.len, "len")?,
                pos: int(s.pos, "pos")?,
            });
        }
    }
    Ok(())
}

/// A directory's `entries`: name → entry.
struct EntriesSeed<'s, 'a> {
    sink: &'s mut Sink<'a>,
    parent: i64,
}

impl<'de> DeserializeSeed<'de> for EntriesSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a directory's entries (an object of name: entry)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key::<String>()? {
            map.next_value_seed(EntrySeed {
                sink: &mut *self.sink,
                parent: Some(self.parent),
                name: unescape(&name),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::TRASH_INODE;

    const SAMPLE: &str = r#"{
      "Setting": {"Name": "myjfs", "UUID": "2b3c6a0e-7f1d-4e55-9a51-0c1d2e3f4a5b", "Storage": "file",
                  "Bucket": "/var/jfs/", "BlockSize": 4096, "TrashDays": 1, "EnableACL": false, "Unknown": {"x": 1}},
      "Counters": {"usedSpace": 1, "usedInodes": 4, "nextInodes": 6, "nextChunk": 3, "nextSession": 1, "nextTrash": 0},
      "Sustained": [], "DelFiles": [{"inode": 9, "length": 1, "expire": 1}],
      "Quotas": {"2": {"maxSpace": 1073741824, "maxInodes": 10000}},
      "FSTree": {"attr": {"inode": 1, "type": "directory", "mode": 511, "nlink": 3},
        "entries": {
          "data": {"attr": {"inode": 2, "type": "directory", "mode": 493, "mtime": 5, "mtimensec": 7},
            "entries": {
              "hl-a": {"attr": {"inode": 4, "type": "regular", "mode": 420, "nlink": 2, "length": 12},
                       "xattrs": [{"name": "user.k", "value": "v%00"}],
                       "chunks": [{"index": 0, "slices": [{"id": 2, "size": 12, "len": 12}]}]}}},
          "hl-b": {"attr": {"inode": 4, "type": "regular", "mode": 420, "nlink": 2, "length": 12},
                   "chunks": [{"index": 0, "slices": [{"id": 2, "size": 12, "len": 12}]}]},
          "b%FFd": {"attr": {"inode": 5, "type": "symlink", "mode": 511}, "symlink": "data/hl-a"}}},
      "Trash": {"attr": {"inode": 9223372032828243968, "type": "directory", "mode": 365}, "entries": {}}
    }"#;

    #[test]
    fn parses_a_juicefs_dump_with_links_once() {
        let mut batches = Vec::new();
        let parsed = parse(
            SAMPLE.as_bytes(),
            |s| {
                batches.push(s);
                Ok(())
            },
            |_| (),
        )
        .unwrap();
        assert_eq!(parsed.entries, 6);
        assert_eq!(parsed.deleted_files, 1);
        assert_eq!(parsed.setting.unwrap().block_size, 4096);
        assert_eq!(parsed.counters.unwrap().next_chunk, 3);
        let s = &batches[0];
        let inodes: Vec<i64> = s.nodes.iter().map(|n| n.inode).collect();
        assert_eq!(inodes, [1, 2, 4, 5, TRASH_INODE]);
        assert_eq!(s.nodes[1].mtime, 5_000_000_007);
        assert_eq!(s.edges.len(), 5);
        assert!(s.edges.contains(&(1, b"b\xffd".to_vec(), 5)));
        assert!(s.edges.contains(&(1, b".trash".to_vec(), TRASH_INODE)));
        assert_eq!(s.slices.len(), 1, "a hard link's slices are staged once");
        assert_eq!(s.xattrs, [(4, b"user.k".to_vec(), b"v\0".to_vec())]);
        assert_eq!(s.quotas, [("dir".to_string(), 2, 1 << 30, 10000)]);
    }

    #[test]
    fn the_nodes_of_other_shards_are_numbered_on_from_the_next_inode() {
        let dump = r#"{"Setting": {}, "Counters": {"nextInodes": 6, "nextChunk": 3},
          "FSTree": {"attr": {"inode": 1, "type": "directory", "mode": 511, "nlink": 3},
            "entries": {
              "big": {"attr": {"inode": 281474976710657, "type": "directory", "mode": 493, "nlink": 2},
                "entries": {
                  "a": {"attr": {"inode": 281474976710660, "type": "regular", "mode": 420, "nlink": 2},
                        "chunks": [{"index": 0, "slices": [{"id": 281474976710661, "size": 4, "len": 4}]}]},
                  "b": {"attr": {"inode": 281474976710660, "type": "regular", "mode": 420, "nlink": 2}}}},
              "f": {"attr": {"inode": 5, "type": "regular", "mode": 420, "nlink": 1}}}}}"#;
        let mut batches = Vec::new();
        let parsed = parse(
            dump.as_bytes(),
            |s| {
                batches.push(s);
                Ok(())
            },
            |_| (),
        )
        .unwrap();
        let s = &batches[0];
        let inodes: Vec<i64> = s.nodes.iter().map(|n| n.inode).collect();
        assert_eq!(inodes, [1, 6, 7, 5], "a hard link keeps one new number");
        assert!(s.edges.contains(&(6, b"b".to_vec(), 7)));
        assert_eq!(s.slices.len(), 1);
        assert_eq!(s.slices[0].inode, 7);
        assert_eq!(
            s.slices[0].id, 281474976710661,
            "slices keep their ids (and objects)"
        );
        assert_eq!(parsed.counters.unwrap().next_inode, 8);
    }

    #[test]
    fn entries_before_attr_is_an_error() {
        let dump = r#"{"Setting": {}, "Counters": {}, "FSTree": {"entries": {}, "attr": {"inode": 1, "type": "directory"}}}"#;
        let e = parse(dump.as_bytes(), |_| Ok(()), |_| ()).unwrap_err();
        assert!(e.to_string().contains("attr must come first"), "{e}");
    }
}
