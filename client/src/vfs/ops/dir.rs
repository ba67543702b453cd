//! Directory operations: opendir, readdir (pages of entries with their
//! attributes), releasedir; statfs.
use crate::meta::{Attr, NodeType, Statfs};
use crate::ns::listings::MAX_LISTED;
use crate::vfs::handles::{DirPage, Handle, ListingRead};
use crate::vfs::{errno, Vfs, VfsResult, VOLUME_ROOT};

/// Entries fetched from the database per readdir round trip.
const READDIR_PAGE: i32 = 500;

/// A directory entry as readdir gives it to the kernel: FUSE offset, name, attributes.
pub struct ListedEntry {
    pub offset: u64,
    pub name: Vec<u8>,
    pub attr: Attr,
}

impl Vfs {
    pub async fn opendir(&self, inode: u64) -> VfsResult<u64> {
        // a listing shows what PostgreSQL holds: unlinks answered here first
        drop(self.ns.settle_dir(inode).await?);
        let attr = self.ns.getattr_replicable(inode).await;
        let attr = attr.map_err(errno)?;
        if attr.kind != NodeType::Dir {
            return Err(libc::ENOTDIR);
        }
        let fh = self.add_handle(Handle::Dir {
            inode,
            page: tokio::sync::Mutex::new(DirPage::default()),
            losses_seen: self.ns.meta_of(inode).losses().into(),
            opened_as: attr,
        });
        Ok(fh)
    }

    /// Entries after FUSE `offset` (0 = start, which adds "." and "..");
    /// `fill` takes entries until it returns false (the kernel's buffer is full).
    pub async fn readdir<F>(&self, fh: u64, offset: u64, mut fill: F) -> VfsResult<()>
    where
        F: FnMut(&ListedEntry) -> bool,
    {
        let handle = self.file_handle(fh)?;
        let Handle::Dir { inode, page, .. } = &*handle else {
            return Err(libc::ENOTDIR);
        };
        let inode = *inode;
        let mut page = page.lock().await;
        if offset < 2 {
            if offset == 0 {
                // (before the attributes the listing gives for ".")
                self.accessed(inode).await;
            }
            let dir = self.getattr(inode).await?;
            if offset == 0 {
                page.ceiling = None;
                page.listing = Some(ListingRead {
                    started: self.ns.listings.start(),
                    parent: dir.parent,
                    names: Vec::new(),
                    next: 0,
                });
                let dot = ListedEntry {
                    offset: 1,
                    name: b".".to_vec(),
                    attr: dir.clone(),
                };
                if !fill(&dot) {
                    return Ok(());
                }
            }
            let parent = self
                .getattr(if dir.parent == 0 { inode } else { dir.parent })
                .await
                .unwrap_or_else(|_| dir.clone());
            let dotdot = ListedEntry {
                offset: 2,
                name: b"..".to_vec(),
                attr: parent,
            };
            if !fill(&dotdot) {
                return Ok(());
            }
        }
        let mut cookie = if offset <= 2 { 0 } else { offset };
        loop {
            if cookie < page.after {
                // a seek backwards (rewinddir): the cached page does not cover it
                page.entries.clear();
            }
            page.entries.retain(|e| e.cookie > cookie);
            page.after = page.after.max(cookie);
            if let Some(fetched) = page.fetched.filter(|t| *t != self.ns.attrs.ticket()) {
                // entries kept from an earlier call, of which one changed
                // since: read again (the kernel keeps what it is given)
                let changed = |e: &crate::meta::DirEntry| {
                    self.ns.attrs.forgot_since(e.attr.inode, fetched)
                        || self.ns.attrs.entry_forgot_since(inode, &e.name, fetched)
                };
                if page.entries.iter().any(changed) {
                    page.entries.clear();
                }
            }
            if page.entries.is_empty() {
                // (unlinks answered here since the listing began go first)
                let listing = self.ns.settle_dir(inode).await?;
                if cookie > 0 && page.ceiling.is_none() {
                    page.ceiling = self.ns.meta_of(inode).listing_ceiling().await;
                }
                let ticket = self.ns.attrs.ticket();
                let mut entries = self
                    .ns
                    .readdirplus(&listing, inode, cookie, READDIR_PAGE)
                    .await
                    .map_err(errno)?;
                if let Some(ceiling) = page.ceiling {
                    // (made, or renamed in, after the listing went past
                    // its first page: the next listing's)
                    entries.retain(|e| e.cookie <= ceiling);
                }
                for e in &entries {
                    self.ns.attrs.put_entry(inode, &e.name, &e.attr, ticket);
                    self.ns.attrs.put_xattrs(e.attr.inode, e.xattrs, ticket);
                }
                let read = page.listing.take();
                if entries.is_empty() {
                    if let Some(read) = read.filter(|r| r.next == cookie) {
                        self.ns
                            .listings
                            .install(inode, read.parent, read.started, read.names);
                    }
                    return Ok(());
                }
                page.listing = read.filter(|r| r.next == cookie).and_then(|mut r| {
                    r.names.extend(entries.iter().map(|e| e.name.clone()));
                    r.next = entries.last().map_or(cookie, |e| e.cookie);
                    (r.names.len() <= MAX_LISTED).then_some(r)
                });
                page.after = cookie;
                page.entries = entries;
                page.fetched = Some(ticket);
            }
            let entries = std::mem::take(&mut page.entries);
            for (i, e) in entries.iter().enumerate() {
                let listed = ListedEntry {
                    offset: e.cookie,
                    name: e.name.clone(),
                    attr: self.overlay(e.attr.clone()).await,
                };
                if !fill(&listed) {
                    // the kernel's buffer is full; keep the rest for the next
                    // call, which asks from `cookie` unless it seeks back
                    // (rewinddir, seekdir, a caller's buffer that took less
                    // than the kernel was given): then it fetches again
                    page.entries = entries[i..].to_vec();
                    page.after = cookie;
                    return Ok(());
                }
                cookie = e.cookie;
            }
        }
    }

    pub fn releasedir(&self, fh: u64) {
        self.handles.lock().unwrap().remove(&fh);
    }

    /// The space and inodes of the mount: of its directory's quota, or of
    /// the whole volume (summed over its shards).
    pub async fn statfs(&self) -> VfsResult<Statfs> {
        let root = self.config.root;
        let here = self.ns.meta_of(root).statfs(root).await.map_err(errno)?;
        let parts = self.ns.parts().all();
        if root != VOLUME_ROOT || parts.len() == 1 {
            return Ok(here);
        }
        let mut shards = Vec::with_capacity(parts.len() - 1);
        for part in &parts[1..] {
            shards.push(part.meta.statfs(VOLUME_ROOT).await.map_err(errno)?);
        }
        Ok(crate::vfs::space::statfs_over_shards(here, &shards))
    }
}
