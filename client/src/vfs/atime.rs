//! Access times: when a read of a file or a listing of a directory moves
//! the node's atime (`--atime-mode`, as Linux's noatime, relatime and
//! strictatime mount options), decided from this mount's copy of the node
//! first, so that most reads commit nothing.
use std::str::FromStr;

use super::Vfs;

/// When a read moves a node's atime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AtimeMode {
    /// Never (the default, as JuiceFS's): reads commit nothing.
    #[default]
    Noatime,
    /// When the atime is not after the mtime or the ctime, or is a day old
    /// (Linux's default): at most one commit a day for a file only read.
    Relatime,
    /// At every read, at most once a second a node.
    Strictatime,
}

impl AtimeMode {
    /// Its name, as `--atime-mode` and mount(8) say it.
    pub fn name(self) -> &'static str {
        match self {
            AtimeMode::Noatime => "noatime",
            AtimeMode::Relatime => "relatime",
            AtimeMode::Strictatime => "strictatime",
        }
    }
}

impl FromStr for AtimeMode {
    type Err = String;

    fn from_str(s: &str) -> Result<AtimeMode, String> {
        match s {
            "noatime" => Ok(AtimeMode::Noatime),
            "relatime" => Ok(AtimeMode::Relatime),
            "strictatime" => Ok(AtimeMode::Strictatime),
            other => Err(format!(
                "an atime mode is noatime, relatime or strictatime, not {other:?}"
            )),
        }
    }
}

/// A day and a second, in nanoseconds.
const DAY_NS: i64 = 86_400_000_000_000;
const SECOND_NS: i64 = 1_000_000_000;

/// Whether a read at `now` moves an atime of `atime` under `mode`, given the
/// node's `mtime` and `ctime` (all in ns since the epoch).
pub fn atime_due(mode: AtimeMode, atime: i64, mtime: i64, ctime: i64, now: i64) -> bool {
    let stale = atime < now - SECOND_NS;
    match mode {
        AtimeMode::Noatime => false,
        AtimeMode::Strictatime => stale,
        AtimeMode::Relatime => stale && (atime <= mtime || atime <= ctime || atime <= now - DAY_NS),
    }
}

/// A mount's atime keeping: its mode, noatime where the database cannot
/// move atimes for it (a read-only role; an extension before 0.2.24, whose
/// role has no `jfs.touch_atime` to call, as learnt at connect).
#[derive(Default)]
pub(super) struct AtimeKeeper {
    mode: AtimeMode,
}

impl AtimeKeeper {
    /// `may_touch`: whether the role may call `jfs.touch_atime`.
    pub(super) fn new(mode: AtimeMode, read_only: bool, may_touch: bool) -> AtimeKeeper {
        let mode = match mode {
            AtimeMode::Noatime => mode,
            _ if read_only => AtimeMode::Noatime,
            _ if !may_touch => {
                tracing::warn!(
                    "atimes are not kept: this role may not call jfs.touch_atime (an extension \
                     before 0.2.24: run ALTER EXTENSION jfs UPDATE; or a role granted \
                     jfs.grant_client before it: run it again)"
                );
                AtimeMode::Noatime
            }
            _ => mode,
        };
        AtimeKeeper { mode }
    }
}

impl Vfs {
    /// Node `inode` was read (a file) or listed (a directory): its atime
    /// moves as the mount's atime mode says. The node as this mount knows
    /// it decides first; the database decides again with the node as it
    /// is. A failure is no error of the read.
    pub(super) async fn accessed(&self, inode: u64) {
        let keeper = &self.atime;
        if keeper.mode == AtimeMode::Noatime {
            return;
        }
        let now = crate::meta::time_to_ns(std::time::SystemTime::now());
        if let Some(a) = self.ns.attrs.get(inode) {
            if !atime_due(keeper.mode, a.atime, a.mtime, a.ctime, now) {
                return;
            }
        }
        let strict = keeper.mode == AtimeMode::Strictatime;
        match self.ns.touch_atime(inode, strict).await {
            Ok(_) => self.ns.attrs.forget(inode),
            Err(e) => tracing::debug!("inode {inode}: jfs.touch_atime: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000 * DAY_NS;

    #[test]
    fn noatime_never_moves_an_atime() {
        assert!(!atime_due(AtimeMode::Noatime, 0, NOW, NOW, NOW));
    }

    #[test]
    fn relatime_moves_an_atime_not_after_the_mtime_or_ctime_or_a_day_old() {
        let r = AtimeMode::Relatime;
        // read after a write: moves
        assert!(atime_due(
            r,
            NOW - 10 * SECOND_NS,
            NOW - 5 * SECOND_NS,
            NOW - 20 * SECOND_NS,
            NOW
        ));
        // after a chmod (ctime): moves
        assert!(atime_due(
            r,
            NOW - 10 * SECOND_NS,
            NOW - DAY_NS / 2,
            NOW - 5 * SECOND_NS,
            NOW
        ));
        // read again, nothing changed since: stays
        assert!(!atime_due(
            r,
            NOW - 10 * SECOND_NS,
            NOW - 20 * SECOND_NS,
            NOW - 20 * SECOND_NS,
            NOW
        ));
        // a day old: moves
        assert!(atime_due(
            r,
            NOW - DAY_NS,
            NOW - 2 * DAY_NS,
            NOW - 2 * DAY_NS,
            NOW
        ));
        // moved less than a second ago: stays, whatever else
        assert!(!atime_due(r, NOW - SECOND_NS / 2, NOW, NOW, NOW));
    }

    #[test]
    fn strictatime_moves_an_atime_at_most_once_a_second() {
        let s = AtimeMode::Strictatime;
        assert!(atime_due(s, NOW - 2 * SECOND_NS, 0, 0, NOW));
        assert!(!atime_due(s, NOW - SECOND_NS / 2, 0, 0, NOW));
    }

    #[test]
    fn atime_modes_parse_as_mount_options_name_them() {
        assert_eq!("relatime".parse(), Ok(AtimeMode::Relatime));
        assert_eq!("strictatime".parse(), Ok(AtimeMode::Strictatime));
        assert_eq!("noatime".parse(), Ok(AtimeMode::Noatime));
        assert!("atime".parse::<AtimeMode>().is_err());
    }
}
