//! File layout procedures: write_slice(s), read_chunk, compaction and the delslice queue.
use std::sync::LazyLock;

use bytes::Bytes;

use super::durability::{Incarnation, INCARNATION_SQL};
use super::journal::Redo;
use super::namespace::given_time;
use super::{
    attr_from_row, check_errno, Attr, CreateWithData, Epoch, Meta, MetaError, Result, SetAttr,
};

/// `jfs.write_slices` (see [`Meta::write_slices`]); with `inline`, the
/// slices' bytes kept in the database go as $15.
fn write_slices_sql(inline: bool) -> String {
    let inline = if inline { ", $15" } else { "" };
    format!(
        "SELECT 0 AS create_errno, w.committed, w.attr_errno, (w.a).* \
           FROM jfs.write_slices($1, $2, $3, $4, $5, $6, $7, NULL, \
                                 $8, $9, $10, $11, $12, $13, $14{inline}) w"
    )
}

/// `jfs.mknod_with_slices` (see [`Meta::mknod_with_slices`]): the
/// parameters of [`write_slices_sql`] but the bytes, then the create's;
/// with `inline`, the bytes as $21.
fn mknod_with_slices_sql(inline: bool) -> String {
    let inline = if inline { ", $21" } else { "" };
    format!(
        "SELECT w.create_errno, w.committed, w.attr_errno, (w.a).* \
           FROM jfs.mknod_with_slices($1, $2, $3, $4, $5, $6, $7, NULL, \
                                      $8, $9, $10, $11, $12, $13, $14, \
                                      $15, $16, $17, $18, $19, $20{inline}) w"
    )
}

/// The commits of slices: indexed by [`commit_sql`].
static COMMIT_SQL: LazyLock<[String; 8]> = LazyLock::new(|| {
    std::array::from_fn(|i| {
        let (made, durable, inline) = (i & 4 != 0, i & 2 != 0, i & 1 != 0);
        let sql = match made {
            true => mknod_with_slices_sql(inline),
            false => write_slices_sql(inline),
        };
        match durable {
            true => durably(&sql),
            false => sql,
        }
    })
});

/// Which of [`COMMIT_SQL`] commits slices (of a file made with them, in a
/// durable commit, some of them kept in the database).
fn commit_sql(made: bool, durable: bool, inline: bool) -> &'static str {
    &COMMIT_SQL[(made as usize) << 2 | (durable as usize) << 1 | inline as usize]
}

/// `commit` committed durably, with the incarnation of the server it ran
/// on (a durable commit vouches only for that server's commits). The
/// procedure turned `synchronous_commit` off for its transaction in
/// 'fsync' mode; the select list, evaluated once the procedure has run,
/// turns it on again, so the statement's commit waits for the WAL flush
/// (and the synchronous standbys), which covers every earlier commit on
/// that server, as `jfs.sync()` does.
fn durably(commit: &str) -> String {
    format!(
        "SELECT w.*, i.*, \
                CASE WHEN pg_catalog.current_setting('synchronous_commit') = 'off' \
                     THEN pg_catalog.set_config('synchronous_commit', 'on', true) END \
                  AS made_durable \
           FROM ({commit}) w, \
                ({INCARNATION_SQL}) i(incarnation, timeline, clean_start)"
    )
}

/// One slice of a chunk as `jfs.read_chunk` returns it (id 0 = a hole).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SliceRow {
    pub pos: u32,
    pub id: u64,
    pub size: u32,
    pub off: u32,
    pub len: u32,
    /// A slice kept in the database (`inline_data`): its one block as its
    /// object would hold it (encoded: [`crate::object::ObjectStore::decode_block`]).
    pub inline: Option<Bytes>,
}

impl SliceRow {
    /// A row with pos, slice_id, slice_size, slice_off and len columns
    /// (and inline, from 0.2.32 on).
    fn from_row(row: &tokio_postgres::Row) -> Result<SliceRow> {
        let inline = match row.columns().iter().any(|c| c.name() == "inline") {
            true => row
                .try_get::<_, Option<Vec<u8>>>("inline")?
                .map(Bytes::from),
            false => None,
        };
        Ok(SliceRow {
            pos: row.try_get::<_, i32>("pos")? as u32,
            id: row.try_get::<_, i64>("slice_id")? as u64,
            size: row.try_get::<_, i32>("slice_size")? as u32,
            off: row.try_get::<_, i32>("slice_off")? as u32,
            len: row.try_get::<_, i32>("len")? as u32,
            inline,
        })
    }
}

/// An attribute change made with the commit of a file's slices: the change
/// (no length), and the mode it was answered over, if it sets one (the
/// database keeps a mode someone else set meanwhile).
#[derive(Debug, Clone, Copy)]
pub struct DeferredAttrs {
    pub change: SetAttr,
    pub base_mode: Option<u32>,
}

/// What `jfs.write_slices` answered (see [`Meta::write_slices`]).
#[derive(Debug)]
pub struct CommittedSlices {
    /// How many slices were committed, from the first.
    pub committed: usize,
    /// The file's attributes after them, or the errno of the refused one.
    pub attr: std::result::Result<Attr, i32>,
    /// The attribute change's errno (0: made), None when not tried.
    pub attrs_errno: Option<i32>,
    /// The epoch the call was sent in.
    pub sent_in: Epoch,
    /// Its commit was durable, in the current epoch: every commit this
    /// client made before it is too (see [`Meta::committed_durably`]).
    pub durable: bool,
}

impl Meta {
    /// Commits a stored slice into a chunk of a file; returns the file's
    /// attributes and the epoch the commit was sent in.
    pub async fn write_slice(
        &self,
        inode: u64,
        chunk: u32,
        slice: &SliceRow,
    ) -> Result<(Attr, Epoch)> {
        let (mut rows, sent_in) = self
            .call_journaled_by_caller(
                "SELECT * FROM jfs.write_slice($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &(inode as i64),
                    &(chunk as i32),
                    &(slice.pos as i32),
                    &(slice.id as i64),
                    &(slice.size as i32),
                    &(slice.off as i32),
                    &(slice.len as i32),
                ],
            )
            .await?;
        let row = rows.pop().ok_or(MetaError::Errno(libc::EIO))?;
        let attr = attr_from_row(&row)?;
        self.journal_slices(inode, &[(chunk, slice.clone())], None, sent_in);
        Ok((attr, sent_in))
    }

    /// Keeps slices committed in `sent_in` (and the attribute change made
    /// with them) in the journal.
    fn journal_slices(
        &self,
        inode: u64,
        slices: &[(u32, SliceRow)],
        attrs: Option<&DeferredAttrs>,
        sent_in: Epoch,
    ) {
        if !slices.is_empty() {
            let slices = slices.to_vec();
            let attrs = attrs.copied();
            self.journal_redo(
                sent_in,
                Redo::Slices {
                    inode,
                    slices,
                    attrs,
                },
            );
        }
    }

    /// Commits stored slices (each with its chunk) of a file in order, in
    /// one call (`jfs.write_slices`), and then, when every one is committed,
    /// the attribute change `attrs` (no length) in the same transaction.
    /// Returns how many were committed, then the file's attributes after
    /// the last of them (and the change), or the errno of the slice that
    /// was refused (the ones before it are committed); the change's errno
    /// (0: made; None: not tried, a slice was refused); and the epoch the
    /// call was sent in. With `durable` (in 'fsync' durability mode) the
    /// commit waits for the WAL flush, as a sync does, and so covers every
    /// earlier commit of this client on that server.
    pub async fn write_slices(
        &self,
        inode: u64,
        slices: &[(u32, SliceRow)],
        attrs: Option<&DeferredAttrs>,
        durable: bool,
    ) -> Result<CommittedSlices> {
        self.commit_slices(inode, None, slices, attrs, durable)
            .await
    }

    /// [`Meta::write_slices`] for a file made under a directory's lease and
    /// not yet committed (`jfs.mknod_with_slices`): it is made first, in
    /// the same transaction (or found made by an earlier send of the same
    /// call). A refused create is its errno, with nothing committed. The
    /// create is journaled as the mknod it is.
    pub async fn mknod_with_slices(
        &self,
        made: &CreateWithData,
        slices: &[(u32, SliceRow)],
        attrs: Option<&DeferredAttrs>,
        durable: bool,
    ) -> Result<CommittedSlices> {
        let inode = made.create.inode;
        self.commit_slices(inode, Some(made), slices, attrs, durable)
            .await
    }

    /// [`Meta::write_slices`], or [`Meta::mknod_with_slices`] with `made`.
    async fn commit_slices(
        &self,
        inode: u64,
        made: Option<&CreateWithData>,
        slices: &[(u32, SliceRow)],
        attrs: Option<&DeferredAttrs>,
        durable: bool,
    ) -> Result<CommittedSlices> {
        let durable = durable && self.incarnations.async_commits();
        let column = |f: fn(&(u32, SliceRow)) -> i32| slices.iter().map(f).collect::<Vec<i32>>();
        let ids: Vec<i64> = slices.iter().map(|(_, s)| s.id as i64).collect();
        let change = attrs.map(|d| d.change).unwrap_or_default();
        let base_mode = attrs.and_then(|d| d.base_mode).map(|m| m as i32);
        // (a sync's mark: the commits before it that this one covers)
        let mark = self.incarnations.mark();
        let inline: Vec<Option<&[u8]>> = slices.iter().map(|(_, s)| s.inline.as_deref()).collect();
        let with_inline = inline.iter().any(Option::is_some);
        let sql = commit_sql(made.is_some(), durable, with_inline);
        let (chunks, pos, sizes) = (
            column(|(c, _)| *c as i32),
            column(|(_, s)| s.pos as i32),
            column(|(_, s)| s.size as i32),
        );
        let (offs, lens) = (column(|(_, s)| s.off as i32), column(|(_, s)| s.len as i32));
        let (mode, uid, gid) = (
            change.mode.map(|m| m as i32),
            change.uid.map(|u| u as i64),
            change.gid.map(|g| g as i64),
        );
        let (atime, mtime) = (given_time(change.atime), given_time(change.mtime));
        let inode_param = inode as i64;
        let mask = change.mask();
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            &inode_param,
            &chunks,
            &pos,
            &ids,
            &sizes,
            &offs,
            &lens,
            &mask,
            &mode,
            &uid,
            &gid,
            &atime,
            &mtime,
            &base_mode,
        ];
        // (the create's parameters, sent only with one)
        let (dir, node_mode, umask, node_uid, node_gid) = made
            .map(|m| {
                let c = &m.create;
                let umask = (c.umask & 0o7777) as i32;
                (
                    m.dir as i64,
                    c.mode as i32,
                    umask,
                    c.uid as i64,
                    c.gid as i64,
                )
            })
            .unwrap_or_default();
        let name: &[u8] = made.map_or(&[], |m| &m.create.name);
        if made.is_some() {
            params.extend_from_slice(&[&dir, &name, &node_mode, &umask, &node_uid, &node_gid]);
        }
        if with_inline {
            params.push(&inline);
        }
        let (mut rows, sent_in) = self.call_journaled_by_caller(sql, &params).await?;
        let row = rows.pop().ok_or(MetaError::Errno(libc::EIO))?;
        let create_errno = row.try_get::<_, i32>("create_errno")?;
        if create_errno != 0 {
            return Err(MetaError::Errno(create_errno));
        }
        if let Some(m) = made {
            self.journal_created(m, sent_in);
        }
        let committed = row.try_get::<_, i32>("committed")? as usize;
        // (a transaction that wrote nothing does not wait for the flush)
        let durable = durable && committed > 0 && {
            self.incarnations.observe(Incarnation {
                id: row.try_get("incarnation")?,
                timeline: row.try_get("timeline")?,
                clean_start: row.try_get::<_, String>("clean_start")? == "true",
            });
            self.incarnations.synced(mark, sent_in);
            sent_in == self.epoch()
        };
        let attrs_errno = row.try_get::<_, Option<i32>>("attr_errno")?;
        let journaled_attrs = attrs.filter(|_| attrs_errno == Some(0));
        let done = &slices[..committed.min(slices.len())];
        self.journal_slices(inode, done, journaled_attrs, sent_in);
        let attr = match attr_from_row(&row) {
            Ok(attr) => Ok(attr),
            Err(MetaError::Errno(errno)) => Err(errno),
            Err(e) => return Err(e),
        };
        Ok(CommittedSlices {
            committed,
            attr,
            attrs_errno,
            sent_in,
            durable,
        })
    }

    /// Keeps the creation of a file made with its data's commit in
    /// `sent_in` in the journal (before its slices).
    fn journal_created(&self, made: &CreateWithData, sent_in: Epoch) {
        let c = &made.create;
        self.journal_redo(sent_in, Redo::mknod(made.dir, &c.name, &c.node(), c.inode));
    }

    /// The slices of one chunk, oldest first.
    pub async fn read_chunk(&self, inode: u64, chunk: u32) -> Result<Vec<SliceRow>> {
        let rows = self
            .call(
                "SELECT * FROM jfs.read_chunk($1, $2)",
                &[&(inode as i64), &(chunk as i32)],
            )
            .await?;
        let mut slices = Vec::with_capacity(rows.len());
        for row in rows {
            check_errno(&row)?;
            slices.push(SliceRow::from_row(&row)?);
        }
        Ok(slices)
    }

    /// A chunk's slices for compaction (`jfs.compaction_slices`, with the
    /// bytes of those kept in the database from `jfs.read_chunk`): the
    /// rows, the seq of the last one and the file's length (None: no
    /// slices).
    pub async fn compaction_slices(
        &self,
        inode: u64,
        chunk: u32,
    ) -> Result<Option<(Vec<SliceRow>, i64, u64)>> {
        let rows = self
            .call(
                "SELECT * FROM jfs.compaction_slices($1, $2)",
                &[&(inode as i64), &(chunk as i32)],
            )
            .await?;
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        let last_seq: i64 = last.try_get("seq")?;
        let length = last.try_get::<_, i64>("file_length")? as u64;
        let mut slices: Vec<SliceRow> =
            rows.iter().map(SliceRow::from_row).collect::<Result<_>>()?;
        // the bytes of slices kept in the database come with read_chunk
        // (a slice's id names the same bytes for as long as it exists)
        let kept: std::collections::HashMap<u64, Bytes> = self
            .read_chunk(inode, chunk)
            .await?
            .into_iter()
            .filter_map(|r| Some((r.id, r.inline?)))
            .collect();
        if !kept.is_empty() {
            for s in &mut slices {
                s.inline = kept.get(&s.id).cloned();
            }
        }
        Ok(Some((slices, last_seq, length)))
    }

    /// Swaps a chunk's `rows` slices (the last with seq `last_seq`) for one
    /// stored slice of `size` bytes at `pos` (`jfs.compact_chunk`). Errno
    /// EAGAIN: the chunk changed since it was read.
    #[allow(clippy::too_many_arguments)]
    pub async fn compact_chunk(
        &self,
        inode: u64,
        chunk: u32,
        rows: usize,
        last_seq: i64,
        slice_id: u64,
        size: u32,
        pos: u32,
    ) -> Result<()> {
        let row = self
            .call_one(
                "SELECT jfs.compact_chunk($1, $2, $3, $4, $5, $6, $7) AS errno",
                &[
                    &(inode as i64),
                    &(chunk as i32),
                    &(rows as i32),
                    &last_seq,
                    &(slice_id as i64),
                    &(size as i32),
                    &(pos as i32),
                ],
            )
            .await?;
        check_errno(&row)
    }

    /// Chunks of files at or below `root` with at least `min_slices` slices:
    /// (inode, chunk, slices).
    pub async fn fragmented_chunks(
        &self,
        root: u64,
        min_slices: i32,
    ) -> Result<Vec<(u64, u32, i64)>> {
        let rows = self
            .call(
                "SELECT * FROM jfs.fragmented_chunks($1, $2)",
                &[&(root as i64), &min_slices],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<_, i64>("inode")? as u64,
                    r.try_get::<_, i32>("chunk_index")? as u32,
                    r.try_get::<_, i64>("slices")?,
                ))
            })
            .collect()
    }

    /// Slices whose objects are to be deleted: (id, size).
    pub async fn pending_delslices(
        &self,
        min_age_secs: u64,
        limit: i32,
    ) -> Result<Vec<(u64, u32)>> {
        let age = format!("{min_age_secs} seconds");
        let rows = self
            .call(
                "SELECT * FROM jfs.pending_delslices($1::text::interval, $2)",
                &[&age, &limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<_, i64>("slice_id")? as u64,
                    r.try_get::<_, i32>("size")? as u32,
                ))
            })
            .collect()
    }

    pub async fn forget_delslices(&self, ids: &[i64]) -> Result<()> {
        self.call("SELECT jfs.forget_delslices($1)", &[&ids])
            .await?;
        Ok(())
    }

    /// What the database says of each slice id: "referenced", "pending"
    /// (queued for deletion) or "unreferenced".
    pub async fn slice_states(&self, ids: &[i64]) -> Result<Vec<(u64, String)>> {
        let rows = self
            .call("SELECT * FROM jfs.slice_states($1)", &[&ids])
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<_, i64>("slice_id")? as u64, r.try_get("state")?)))
            .collect()
    }

    /// After a commit of `slices` (in commit order) to `inode` whose answer
    /// was lost: how many of them, from the first, the database has
    /// (referenced, or committed and freed since: a slice id is committed
    /// once, so one it has never seen was not), and the epoch of the server
    /// that said so (a sync there covers them: they are in its WAL). The
    /// others were not committed and can be sent again. `made`: the file's
    /// creation, sent with them (`Meta::mknod_with_slices`).
    pub async fn settle_slices(
        &self,
        inode: u64,
        slices: &[(u32, SliceRow)],
        attrs: Option<&DeferredAttrs>,
        made: Option<&CreateWithData>,
    ) -> Result<(usize, Epoch)> {
        let ids: Vec<i64> = slices.iter().map(|(_, s)| s.id as i64).collect();
        let (rows, seen_in) = self
            .call_stamped("SELECT * FROM jfs.slice_states($1)", &[&ids])
            .await?;
        let mut known = std::collections::HashSet::new();
        for r in &rows {
            if r.try_get::<_, String>("state")? != "unreferenced" {
                known.insert(r.try_get::<_, i64>("slice_id")?);
            }
        }
        let committed = ids.iter().take_while(|id| known.contains(id)).count();
        // (the change was made with the last slice, in its transaction)
        let attrs = attrs.filter(|_| committed == slices.len());
        if let Some(made) = made.filter(|_| committed > 0) {
            // (made in the transaction of the first slice)
            self.journal_created(made, seen_in);
        }
        self.journal_slices(inode, &slices[..committed], attrs, seen_in);
        Ok((committed, seen_in))
    }

    /// How many freed slices wait in the delslice queue (all of them:
    /// `pending_delslices` pages at most 100,000).
    pub async fn pending_delslice_count(&self) -> Result<u64> {
        let row = self
            .call_one("SELECT jfs.delslice_count() AS n", &[])
            .await?;
        Ok(row.try_get::<_, i64>("n")? as u64)
    }

    /// Sets how long freed objects are kept at the least (`jfs.set_retain_deleted`;
    /// a PostgreSQL interval such as '14 days'); returns the setting as text.
    pub async fn set_retain_deleted(&self, duration: &str) -> Result<String> {
        let row = self
            .call_one(
                "SELECT jfs.set_retain_deleted($1::text::interval)::text AS kept",
                &[&duration],
            )
            .await?;
        Ok(row.try_get("kept")?)
    }

    /// What waits for deletion (`jfs.delete_queue`); None from an extension
    /// before 0.2.24, or a role not granted it again since.
    pub async fn delete_queue(&self) -> Result<Option<DeleteQueue>> {
        let rows = match self
            .call(
                "SELECT slices, bytes, oldest::text AS oldest, cap, retain::text AS retain \
                 FROM jfs.delete_queue()",
                &[],
            )
            .await
        {
            Ok(rows) => rows,
            Err(e) if e.is_undefined_or_denied() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(DeleteQueue {
            slices: row.try_get::<_, i64>("slices")? as u64,
            bytes: row.try_get::<_, i64>("bytes")? as u64,
            oldest: row.try_get("oldest")?,
            cap: row.try_get::<_, i64>("cap")? as u64,
            retain: row.try_get("retain")?,
        }))
    }

    /// Sets the cap on the bytes waiting for deletion
    /// (`jfs.set_delete_queue_cap`, administration; 0: none); returns it.
    pub async fn set_delete_queue_cap(&self, bytes: u64) -> Result<u64> {
        let bytes = i64::try_from(bytes).map_err(|_| MetaError::Errno(libc::EINVAL))?;
        let row = self
            .call_one("SELECT jfs.set_delete_queue_cap($1) AS cap", &[&bytes])
            .await?;
        Ok(row.try_get::<_, i64>("cap")? as u64)
    }
}

/// What waits for deletion, as `jfs.delete_queue` says.
#[derive(Debug, Clone)]
pub struct DeleteQueue {
    pub slices: u64,
    pub bytes: u64,
    /// Since when the oldest waits (None: none does).
    pub oldest: Option<String>,
    /// Past this many bytes, freed data goes once its freeing commit is
    /// durable (0: no cap).
    pub cap: u64,
    /// How long freed data is kept at the least (the volume's setting).
    pub retain: String,
}
