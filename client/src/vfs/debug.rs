//! What a mount tells `jfs debug` about itself: its process, version,
//! volume, options, the volume's sessions and a `jfs.fsck()` summary (no
//! secret: no key, no password).
use std::fmt::Write as _;

use super::Vfs;

/// Problems of `jfs.fsck()` listed one by one at most (the rest counted).
const FSCK_LISTED: usize = 50;

impl Vfs {
    /// The report (plain text, in sections).
    pub(super) async fn debug_report(&self) -> String {
        let mut r = String::new();
        let v = &self.volume;
        let c = &self.config;
        let _ = writeln!(r, "== mount");
        let _ = writeln!(r, "version   {}", env!("CARGO_PKG_VERSION"));
        let _ = writeln!(r, "pid       {}", std::process::id());
        let _ = writeln!(r, "session   {}", self.sid());
        let _ = writeln!(r, "volume    {} ({})", v.name, v.uuid);
        let _ = writeln!(r, "storage   {} {}", v.storage, v.bucket);
        let _ = writeln!(
            r,
            "blocks    {} KiB, compression {}, encryption {}",
            v.block_size / 1024,
            v.compression,
            if v.encrypt_algo.is_empty() {
                "none"
            } else {
                &v.encrypt_algo
            }
        );
        let _ = writeln!(
            r,
            "metadata  durability {}, acl {}, trash days {}",
            v.meta_durability, v.enable_acl, v.trash_days
        );
        let _ = writeln!(
            r,
            "options   root inode {}, attr {:?}, entry {:?}, dir entry {:?}, follows changes {}, \
             buffer {} MiB, read-only {}, squash {}, disk cache {}, compact at {}",
            c.root,
            c.attr_ttl,
            c.entry_ttl,
            c.dir_entry_ttl,
            c.follow_changes,
            c.buffer_size >> 20,
            c.read_only,
            c.squash.map_or("none".to_string(), |s| s.to_string()),
            if c.disk_cache.is_some() { "on" } else { "off" },
            c.compact_at
        );
        let _ = writeln!(r, "\n== sessions of the volume");
        match self.ns.meta_of_mount().sessions().await {
            Ok(sessions) => {
                for s in sessions {
                    let mine = if s.sid == self.sid() {
                        "  (this mount)"
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        r,
                        "{} {}:{} started {} heartbeat {} open-unlinked {} {}{mine}",
                        s.sid, s.host, s.pid, s.started, s.heartbeat, s.sustained, s.info
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(r, "not read: {e}");
            }
        }
        let _ = writeln!(r, "\n== jfs.fsck()");
        match self.ns.meta_of_mount().fsck().await {
            Ok(problems) if problems.is_empty() => {
                let _ = writeln!(r, "no problems");
            }
            Ok(problems) => {
                let _ = writeln!(r, "{} problems", problems.len());
                for p in problems.iter().take(FSCK_LISTED) {
                    let inode = p.inode.map_or("-".to_string(), |i| i.to_string());
                    let _ = writeln!(r, "{} inode {inode}: {}", p.problem, p.detail);
                }
            }
            Err(e) => {
                let _ = writeln!(
                    r,
                    "not run: {e} (the mount's role may lack jfs.grant_admin; run `jfs fsck` \
                     as an administrator)"
                );
            }
        }
        r
    }
}
