//! Directory leases (sql/lease.sql): take_lease, lease_commit, lease_unlink, want_lease.
use tokio_postgres::types::ToSql;

use super::journal::{Entry, Redo};
use super::{check_errno, Meta, NewNode, NodeType, Result};

/// An entry of a leased directory, as the lease found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedEntry {
    pub inode: u64,
    pub kind: NodeType,
    pub nlink: u32,
}

/// A create answered under a directory's lease, to commit (a regular file).
#[derive(Debug, Clone)]
pub struct LeasedCreate {
    pub name: Vec<u8>,
    pub inode: u64,
    /// Permission bits asked for, and the umask to take from them.
    pub mode: u32,
    pub umask: u32,
    pub uid: u32,
    pub gid: u32,
    /// When it was answered (ns since the epoch): its times.
    pub time: i64,
}

/// What a mount answered under a directory's lease and has not committed:
/// its unlinks (each name, and the inode it named) and its creates, in
/// order.
#[derive(Debug, Clone, Default)]
pub struct LeaseBatch {
    pub unlink_names: Vec<Vec<u8>>,
    pub unlink_inodes: Vec<i64>,
    pub creates: Vec<LeasedCreate>,
}

impl LeasedCreate {
    /// The node it makes, as `jfs.mknod` is asked for it.
    pub fn node(&self) -> NewNode<'static> {
        NewNode {
            kind: NodeType::File,
            mode: self.mode,
            umask: self.umask,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            target: None,
        }
    }
}

/// A file made under directory `dir`'s lease and not yet committed, whose
/// creation goes with its data's first commit (`jfs.mknod_with_slices`).
#[derive(Debug, Clone)]
pub struct CreateWithData {
    pub dir: u64,
    pub create: LeasedCreate,
}

/// What `jfs.lease_commit` answered.
#[derive(Debug)]
pub struct LeaseCommitted {
    /// Per unlink: 0, or ENOENT (it named another node, or none, by then).
    pub unlink_errnos: Vec<i32>,
    /// Per create: 0, or why not (EEXIST: the lease was lost meanwhile).
    pub create_errnos: Vec<i32>,
    /// Whether the session holds the lease now.
    pub kept: bool,
    /// Whether it may go on answering creates in the directory.
    pub creates: bool,
    /// The directory's mtime and ctime after the commit (None: gone, or
    /// not told).
    pub dir_times: Option<(i64, i64)>,
    /// Another session asked for the lease, which a held commit kept: the
    /// next commit gives it up.
    pub wanted: bool,
}

impl Meta {
    /// Takes directory `dir`'s lease for session `sid`: its entries (name
    /// order) and whether creates may be answered there, or the errno
    /// saying why not (EAGAIN:
    /// another session holds it and was asked for it; EFBIG: more than
    /// `limit` entries).
    pub async fn take_lease(
        &self,
        sid: i64,
        dir: u64,
        limit: i32,
    ) -> Result<(Vec<(Vec<u8>, LeasedEntry)>, bool)> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.take_lease($1, $2, $3)",
                &[&sid, &(dir as i64), &limit],
            )
            .await?;
        check_errno(&row)?;
        let names: Vec<Vec<u8>> = row.try_get("names")?;
        let inodes: Vec<i64> = row.try_get("inodes")?;
        let types: Vec<i16> = row.try_get("types")?;
        let nlinks: Vec<i32> = row.try_get("nlinks")?;
        let creates = row.try_get::<_, Option<bool>>("creates")?.unwrap_or(false);
        let entries = names
            .into_iter()
            .zip(inodes)
            .zip(types.into_iter().zip(nlinks))
            .map(|((name, inode), (kind, nlink))| {
                let entry = LeasedEntry {
                    inode: inode as u64,
                    kind: NodeType::from_code(kind),
                    nlink: nlink.max(0) as u32,
                };
                (name, entry)
            })
            .collect();
        Ok((entries, creates))
    }

    /// Commits unlinks answered under directory `dir`'s lease: each name is
    /// removed while it names its inode (`open`: the inodes this session
    /// has open). The lease is kept if `keep` and nobody asked for it.
    /// Returns an errno per name (0, or ENOENT: it named another node or
    /// none by then) and whether the lease is still held. Unlinks committed
    /// are journaled as changes that cannot be told again.
    pub async fn lease_unlink(
        &self,
        sid: i64,
        dir: u64,
        names: &[Vec<u8>],
        inodes: &[i64],
        open: &[i64],
        keep: bool,
    ) -> Result<(Vec<i32>, bool)> {
        let (mut rows, sent_in) = self
            .call_journaled_by_caller(
                "SELECT * FROM jfs.lease_unlink($1, $2, $3, $4, $5, $6)",
                &[&sid, &(dir as i64), &names, &inodes, &open, &keep],
            )
            .await?;
        let row = rows.pop().ok_or(super::MetaError::Errno(libc::EIO))?;
        // (a lease renewed or given up, nothing removed: nothing to lose)
        if !names.is_empty() && !self.in_replay {
            self.incarnations.record(sent_in, Entry::Opaque);
        }
        Ok((row.try_get("errnos")?, row.try_get("kept")?))
    }

    /// Commits, in one transaction, `batch`'s unlinks (`open`: the inodes
    /// this session has open) and then its creates, answered under
    /// directory `dir`'s lease; the lease is kept if `keep` and nobody
    /// asked for it; with `hold`, even if asked for within the last second
    /// (`wanted` then). Each create is journaled as the mknod it is (sent
    /// again to a server that lost it).
    pub async fn lease_commit(
        &self,
        sid: i64,
        dir: u64,
        batch: &LeaseBatch,
        open: &[i64],
        keep: bool,
        hold: bool,
    ) -> Result<LeaseCommitted> {
        let creates = &batch.creates;
        let column = |f: fn(&LeasedCreate) -> i64| creates.iter().map(f).collect::<Vec<i64>>();
        let column32 = |f: fn(&LeasedCreate) -> i32| creates.iter().map(f).collect::<Vec<i32>>();
        let create_names: Vec<&[u8]> = creates.iter().map(|c| c.name.as_slice()).collect();
        let (inodes, uids, gids, times) = (
            column(|c| c.inode as i64),
            column(|c| c.uid as i64),
            column(|c| c.gid as i64),
            column(|c| c.time),
        );
        let (modes, umasks) = (
            column32(|c| c.mode as i32),
            column32(|c| (c.umask & 0o7777) as i32),
        );
        let dir_id = dir as i64;
        let params: Vec<&(dyn ToSql + Sync)> = vec![
            &sid,
            &dir_id,
            &batch.unlink_names,
            &batch.unlink_inodes,
            &open,
            &create_names,
            &inodes,
            &modes,
            &umasks,
            &uids,
            &gids,
            &times,
            &keep,
            &hold,
        ];
        let sql = "SELECT * FROM jfs.lease_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
        let (mut rows, sent_in) = self.call_journaled_by_caller(sql, &params).await?;
        let row = rows.pop().ok_or(super::MetaError::Errno(libc::EIO))?;
        let committed = LeaseCommitted {
            unlink_errnos: row.try_get("unlink_errnos")?,
            create_errnos: row.try_get("errnos")?,
            kept: row.try_get("kept")?,
            creates: row.try_get("creates")?,
            dir_times: row
                .try_get::<_, Option<i64>>("dir_mtime")?
                .zip(row.try_get::<_, Option<i64>>("dir_ctime")?),
            wanted: row.try_get("wanted")?,
        };
        if !self.in_replay {
            if !batch.unlink_names.is_empty() {
                self.incarnations.record(sent_in, Entry::Opaque);
            }
            for (create, _) in creates
                .iter()
                .zip(&committed.create_errnos)
                .filter(|(_, e)| **e == 0)
            {
                let redo = Redo::mknod(dir, &create.name, &create.node(), create.inode);
                self.incarnations.record(sent_in, Entry::Redo(redo));
            }
        }
        Ok(committed)
    }

    /// Asks for directory `dir`'s lease after a call was refused for it;
    /// true when it is free now.
    pub(super) async fn want_lease(&self, dir: u64) -> Result<bool> {
        let row = self
            .call_one("SELECT jfs.want_lease($1)", &[&(dir as i64)])
            .await?;
        Ok(row.try_get(0)?)
    }
}
