//! Lookups that read ahead: when callers stat a directory's names one by
//! one (find, du, ls -l and rsync walk a listing and stat each name), a
//! lookup the caches miss brings the next names' attributes with it
//! (`jfs.lookup_ahead`, in listing order and in name order), so a walk of
//! a big directory costs a round trip per thousand names, not one per name.
//! What it brings goes into the attribute cache like a readdirplus page,
//! kept exact the same way (tickets, the change log).
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::attrs::Ticket;
use super::Namespace;
use crate::meta::Attr;

/// Misses in one directory, each within [`WALK_GAP`] of the one before,
/// after which a lookup there reads ahead.
const WALK_AFTER: u32 = 8;

/// The longest pause between two misses of one walk.
const WALK_GAP: Duration = Duration::from_secs(1);

/// Entries a lookup reads ahead in each order, unless `--lookup-ahead` says.
pub const LOOKUP_AHEAD: u32 = 1000;

/// Directories whose misses are counted at once (past it, counting starts
/// again).
const MAX_WALKS: usize = 1024;

/// Recent lookup misses by directory: which directories are being walked.
#[derive(Default)]
pub struct Walks(Mutex<HashMap<u64, (u32, Instant)>>);

impl Walks {
    /// Counts a miss in `dir`; whether a walk of it is going on.
    fn missed(&self, dir: u64) -> bool {
        let mut walks = self.0.lock().unwrap();
        if walks.len() >= MAX_WALKS && !walks.contains_key(&dir) {
            walks.clear();
        }
        let now = Instant::now();
        let (misses, last) = walks.entry(dir).or_insert((0, now));
        if now.duration_since(*last) > WALK_GAP {
            *misses = 0;
        }
        *misses += 1;
        *last = now;
        *misses >= WALK_AFTER
    }
}

impl Namespace {
    /// Entry `name` of `parent` with the names after it, when `parent` is
    /// being walked and the attribute cache keeps what it is given; None
    /// when this lookup does not read ahead, or the name was not among
    /// what came back (the caller looks it up alone).
    pub(super) async fn lookup_ahead(
        &self,
        parent: u64,
        name: &[u8],
        ticket: Ticket,
    ) -> Option<Attr> {
        let ahead = self.lookup_ahead.min(10_000) as i32;
        if ahead == 0 || !self.attrs.keeps() || !self.walks.missed(parent) {
            return None;
        }
        let entries = match self.meta_of(parent).lookup_ahead(parent, name, ahead).await {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!("lookup_ahead in {parent}: {e}; looking up alone");
                return None;
            }
        };
        let mut found = None;
        for (entry, attr) in entries {
            self.attrs.put_entry(parent, &entry, &attr, ticket);
            if entry == name {
                found = Some(attr);
            }
        }
        found
    }
}
