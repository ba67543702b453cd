//! The lease's transitions one by one, and a randomized run against a model
//! of the directory in PostgreSQL.
use std::collections::{HashMap, HashSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn attr(inode: u64) -> Attr {
    Attr {
        inode,
        kind: NodeType::File,
        mode: 0o644,
        uid: 0,
        gid: 0,
        atime: 0,
        mtime: 0,
        ctime: 0,
        nlink: 1,
        length: 0,
        rdev: 0,
        parent: 0,
        tier: 0,
        used: 0,
    }
}

fn leased_create(name: &[u8], inode: u64) -> LeasedCreate {
    LeasedCreate {
        name: name.to_vec(),
        inode,
        mode: 0o644,
        umask: 0o022,
        uid: 0,
        gid: 0,
        time: 0,
    }
}

fn file(inode: u64) -> LeasedEntry {
    LeasedEntry {
        inode,
        kind: NodeType::File,
        nlink: 1,
    }
}

/// A lease of a directory holding `a` (inode 10), may creates be answered.
fn lease() -> LeaseState {
    LeaseState::new([(b"a".to_vec(), file(10))], true)
}

fn create(l: &mut LeaseState, name: &[u8], inode: u64) -> Create {
    l.create(attr(inode), leased_create(name, inode))
}

fn answer(creates: usize, kept: bool, wanted: bool) -> LeaseCommitted {
    LeaseCommitted {
        unlink_errnos: Vec::new(),
        create_errnos: vec![0; creates],
        kept,
        creates: true,
        dir_times: None,
        wanted,
    }
}

const CLOSED: fn(u64) -> bool = |_| false;

#[test]
fn an_unlink_of_a_known_file_is_answered_and_sent_with_the_next_commit() {
    let mut l = lease();
    assert_eq!(l.unlink(b"a", CLOSED), Unlink::Answered { inode: 10 });
    assert_eq!(l.lookup(b"a"), Lookup::Missing);
    let commit = l.begin_commit(Keep::IfBusy);
    assert_eq!(commit.batch.unlink_names, vec![b"a".to_vec()]);
    assert_eq!(commit.batch.unlink_inodes, vec![10]);
    assert!(commit.keep, "busy: kept");
    let done = l.commit_answered(&answer(0, true, false), commit.keep);
    assert!(!done.again && !done.released && !done.refuse);
    assert!(!l.has_pending());
}

#[test]
fn unlinks_the_lease_cannot_answer_go_to_the_database() {
    let mut l = LeaseState::new(
        [
            (
                b"dir".to_vec(),
                LeasedEntry {
                    inode: 2,
                    kind: NodeType::Dir,
                    nlink: 2,
                },
            ),
            (
                b"linked".to_vec(),
                LeasedEntry {
                    inode: 3,
                    kind: NodeType::File,
                    nlink: 2,
                },
            ),
            (b"open".to_vec(), file(4)),
        ],
        true,
    );
    assert_eq!(l.unlink(b"dir", CLOSED), Unlink::ToDatabase);
    assert_eq!(l.unlink(b"linked", CLOSED), Unlink::ToDatabase);
    assert_eq!(l.unlink(b"open", |i| i == 4), Unlink::ToDatabase);
    assert_eq!(l.unlink(b"unknown", CLOSED), Unlink::ToDatabase);
    assert!(!l.has_pending());
}

#[test]
fn a_create_is_answered_once_and_its_node_is_known_until_committed() {
    let mut l = lease();
    assert_eq!(
        create(&mut l, b"new", 20),
        Create::Answered { meanwhile: false }
    );
    assert_eq!(create(&mut l, b"new", 21), Create::Exists);
    assert_eq!(create(&mut l, b"a", 22), Create::Exists);
    assert!(l.made_here(20) && !l.made_here(21) && !l.made_here(10));
    assert_eq!(l.created_as(b"new"), Some(20));
    assert_eq!(l.lookup(b"new"), Lookup::Made(attr(20)));
    assert_eq!(l.lookup(b"a"), Lookup::Known);
    let commit = l.begin_commit(Keep::IfBusy);
    assert_eq!(commit.batch.creates.len(), 1);
    assert!(commit.hold, "a batch of creates kept holds the lease");
    assert_eq!(
        l.phase(),
        Phase::Holding(Sent {
            unlinks: 0,
            creates: 1
        })
    );
    let done = l.commit_answered(&answer(1, true, false), true);
    assert_eq!(done.made.len(), 1);
    assert!(!l.made_here(20), "committed: PostgreSQL knows it");
    assert_eq!(l.lookup(b"new"), Lookup::Known);
}

#[test]
fn a_create_unlinked_before_it_was_sent_is_forgotten() {
    let mut l = lease();
    create(&mut l, b"tmp", 20);
    assert_eq!(l.unlink(b"tmp", CLOSED), Unlink::Answered { inode: 20 });
    assert!(!l.has_pending(), "nothing to commit: {l:?}");
    assert!(!l.made_here(20));
}

#[test]
fn a_create_unlinked_while_its_commit_holds_the_lease_is_unlinked_after_it() {
    let mut l = lease();
    create(&mut l, b"tmp", 20);
    let commit = l.begin_commit(Keep::IfBusy);
    assert!(matches!(l.phase(), Phase::Holding(_)));
    assert_eq!(l.unlink(b"tmp", CLOSED), Unlink::Answered { inode: 20 });
    let done = l.commit_answered(&answer(1, true, false), commit.keep);
    assert_eq!(done.made.len(), 1);
    let next = l.begin_commit(Keep::IfBusy);
    assert_eq!(next.batch.unlink_inodes, vec![20]);
}

#[test]
fn answers_wait_for_a_commit_that_may_end_the_lease() {
    let mut l = lease();
    l.begin_commit(Keep::No);
    assert!(matches!(l.phase(), Phase::Committing(_)));
    assert_eq!(l.unlink(b"a", CLOSED), Unlink::Wait);
    assert_eq!(create(&mut l, b"new", 20), Create::Wait);
    let done = l.commit_answered(&answer(0, false, false), false);
    assert!(done.released && !done.refuse, "given up as asked: {done:?}");
}

#[test]
fn creates_go_on_while_a_holding_commit_is_in_flight() {
    let mut l = lease();
    create(&mut l, b"one", 20);
    l.begin_commit(Keep::IfBusy);
    assert_eq!(
        create(&mut l, b"two", 21),
        Create::Answered { meanwhile: true }
    );
    let done = l.commit_answered(&answer(1, true, false), true);
    assert_eq!(done.made.len(), 1);
    assert!(l.made_here(21) && l.has_pending());
}

#[test]
fn a_holding_commit_asked_for_commits_again_and_gives_the_lease_up() {
    let mut l = lease();
    create(&mut l, b"one", 20);
    l.begin_commit(Keep::IfBusy);
    create(&mut l, b"two", 21);
    let done = l.commit_answered(&answer(1, true, true), true);
    assert!(done.again && done.refuse && !done.released, "{done:?}");
    assert!(!l.may_create(), "no create answered until given up");
    assert_eq!(create(&mut l, b"three", 22), Create::ToDatabase);
    let last = l.begin_commit(Keep::No);
    assert_eq!(
        last.batch.creates.len(),
        1,
        "what was answered meanwhile goes"
    );
    assert!(!last.keep && !last.hold);
    let done = l.commit_answered(&answer(1, false, false), false);
    assert!(done.released && !done.again);
}

#[test]
fn a_lease_lost_with_creates_answered_meanwhile_sends_them_before_it_ends() {
    let mut l = lease();
    create(&mut l, b"one", 20);
    l.begin_commit(Keep::IfBusy);
    create(&mut l, b"two", 21);
    let done = l.commit_answered(&answer(1, false, false), true);
    assert!(done.again && !done.released, "{done:?}");
    assert!(l.made_here(21));
}

#[test]
fn a_failed_commit_keeps_everything_and_answers_nothing_until_one_succeeds() {
    let mut l = lease();
    create(&mut l, b"new", 20);
    l.unlink(b"a", CLOSED);
    l.begin_commit(Keep::IfBusy);
    l.commit_failed();
    assert!(l.made_here(20) && l.has_pending());
    assert_eq!(l.unlink(b"new", CLOSED), Unlink::ToDatabase);
    assert_eq!(create(&mut l, b"other", 21), Create::ToDatabase);
    let again = l.begin_commit(Keep::IfBusy);
    assert_eq!(again.batch.creates.len(), 1);
    assert_eq!(again.batch.unlink_names.len(), 1);
    assert!(again.keep, "a failure counts as busy");
    l.commit_answered(&answer(1, true, false), true);
    assert_eq!(
        create(&mut l, b"other", 21),
        Create::Answered { meanwhile: false }
    );
}

#[test]
fn a_create_unlinked_while_its_failed_commit_held_the_lease_is_not_made_again() {
    // (the database takes a batch's unlinks before its creates: the create
    // and the unlink of one node in one batch would leave it made)
    let mut l = lease();
    create(&mut l, b"tmp", 20);
    l.begin_commit(Keep::IfBusy);
    assert_eq!(l.unlink(b"tmp", CLOSED), Unlink::Answered { inode: 20 });
    l.commit_failed();
    let again = l.begin_commit(Keep::IfBusy);
    assert!(again.batch.creates.is_empty(), "{again:?}");
    // (the failed commit may have made it: its answer lost)
    assert_eq!(again.batch.unlink_inodes, vec![20]);
    assert!(!l.made_here(20));
}

#[test]
fn a_refused_create_is_reported_and_its_name_forgotten() {
    let mut l = lease();
    create(&mut l, b"new", 20);
    l.begin_commit(Keep::IfBusy);
    let mut refused = answer(1, true, false);
    refused.create_errnos = vec![libc::EEXIST];
    let done = l.commit_answered(&refused, true);
    assert!(done.made.is_empty());
    assert_eq!(done.refused.len(), 1);
    assert_eq!(done.refused[0].1, libc::EEXIST);
    assert_eq!(l.lookup(b"new"), Lookup::Missing);
    assert!(!l.made_here(20));
}

#[test]
fn creates_an_answer_does_not_mention_are_reported_lost() {
    let mut l = lease();
    create(&mut l, b"new", 20);
    l.begin_commit(Keep::IfBusy);
    let done = l.commit_answered(&answer(0, true, false), true);
    assert_eq!(done.refused.len(), 1);
    assert_eq!(done.refused[0].1, libc::EIO);
}

#[test]
fn a_settle_commit_keeps_the_lease_without_holding_it() {
    let mut l = lease();
    create(&mut l, b"new", 20);
    let commit = l.begin_commit(Keep::Settle);
    assert!(commit.keep && !commit.hold);
    assert!(matches!(l.phase(), Phase::Committing(_)));
}

#[test]
fn an_idle_lease_is_given_up_by_the_committer() {
    let mut l = lease();
    let first = l.begin_commit(Keep::IfBusy);
    assert!(first.keep, "just taken: busy");
    l.commit_answered(&answer(0, true, false), true);
    let idle = l.begin_commit(Keep::IfBusy);
    assert!(!idle.keep, "nothing answered for a window");
}

#[test]
fn a_make_through_the_database_gates_the_lease() {
    let mut l = lease();
    assert_eq!(l.begin_make(b"a"), Err(libc::EEXIST));
    assert_eq!(l.begin_make(b"sub"), Ok(true));
    assert_eq!(l.unlink(b"a", CLOSED), Unlink::Wait);
    l.entry_made(
        b"sub",
        LeasedEntry {
            inode: 30,
            kind: NodeType::Dir,
            nlink: 2,
        },
    );
    l.end_gate();
    assert_eq!(l.lookup(b"sub"), Lookup::Known);
    l.unlink(b"a", CLOSED);
    assert_eq!(
        l.begin_make(b"a"),
        Ok(false),
        "its unlink pending: commit first"
    );
}

#[test]
fn a_create_alone_goes_with_its_data() {
    let mut l = lease();
    create(&mut l, b"new", 20);
    let with = l.begin_create_with_data(20).expect("alone");
    assert_eq!(with.inode, 20);
    assert_eq!(l.phase(), Phase::Gated);
    let made = l.created_with_data(20, true);
    assert_eq!(made.map(|c| c.inode), Some(20));
    assert!(!l.made_here(20) && !l.has_pending());
    // not alone: the directory's batch commits it
    create(&mut l, b"x", 21);
    create(&mut l, b"y", 22);
    assert!(l.begin_create_with_data(21).is_none());
    // refused with its data: it stays pending
    let mut l = lease();
    create(&mut l, b"new", 20);
    l.begin_create_with_data(20);
    assert!(l.created_with_data(20, false).is_none());
    assert!(l.made_here(20) && l.has_pending());
}

/// What a run of the randomized test found wrong.
type Broken = String;

/// The directory as PostgreSQL has it (name -> inode), applying batches as
/// `jfs.lease_commit` does while this mount holds the lease.
#[derive(Default)]
struct Database {
    names: HashMap<Vec<u8>, u64>,
    /// Every inode ever made, to catch one made twice.
    made: HashSet<u64>,
}

impl Database {
    fn apply(&mut self, batch: &LeaseBatch) -> Result<LeaseCommitted, Broken> {
        let mut unlink_errnos = Vec::new();
        for (name, &inode) in batch.unlink_names.iter().zip(&batch.unlink_inodes) {
            // (ENOENT for a node never made, or removed by an earlier send
            // of the batch: the end state shows whether that was right)
            match self.names.get(name) {
                Some(&i) if i == inode as u64 => {
                    self.names.remove(name);
                    unlink_errnos.push(0);
                }
                _ => unlink_errnos.push(libc::ENOENT),
            }
        }
        let mut create_errnos = Vec::new();
        for c in &batch.creates {
            if self.names.get(&c.name) == Some(&c.inode) {
                // made by an earlier send of the same batch
                create_errnos.push(0);
                continue;
            }
            if self.names.contains_key(&c.name) {
                return Err(format!("a create of a taken name {:?}", c.name));
            }
            if !self.made.insert(c.inode) {
                return Err(format!("inode {} made twice", c.inode));
            }
            self.names.insert(c.name.clone(), c.inode);
            create_errnos.push(0);
        }
        Ok(LeaseCommitted {
            unlink_errnos,
            create_errnos,
            kept: true,
            creates: true,
            dir_times: None,
            wanted: false,
        })
    }
}

/// One random run: `steps` events drawn by `seed`, checked against the
/// model after each; then everything committed, and every answer found in
/// the database.
fn random_run(seed: u64, steps: usize) -> Result<(), Broken> {
    let mut rng = StdRng::seed_from_u64(seed);
    let names: Vec<Vec<u8>> = (0..6).map(|i| vec![b'a' + i]).collect();
    let mut db = Database::default();
    let mut next_inode = 100;
    for name in &names[..2] {
        db.names.insert(name.clone(), next_inode);
        db.made.insert(next_inode);
        next_inode += 1;
    }
    let entries = db.names.iter().map(|(n, &i)| (n.clone(), file(i)));
    let mut lease = LeaseState::new(entries, true);
    // what the mount's callers were told: name -> inode
    let mut told: HashMap<Vec<u8>, u64> = db.names.clone();
    // a commit in flight: its batch and how it was sent
    let mut in_flight: Option<Commit> = None;
    let mut gated: Option<u64> = None;
    for step in 0..steps {
        let name = names[rng.gen_range(0..names.len())].clone();
        let at = |what: &str| format!("seed {seed}, step {step}: {what}");
        match rng.gen_range(0..10) {
            0..=2 => {
                let inode = next_inode;
                next_inode += 1;
                match lease.create(attr(inode), leased_create(&name, inode)) {
                    Create::Answered { .. } => {
                        if told.contains_key(&name) {
                            return Err(at("a create of a name callers were told exists"));
                        }
                        told.insert(name, inode);
                    }
                    Create::Exists if !told.contains_key(&name) => {
                        return Err(at("EEXIST for a name callers were told is gone"));
                    }
                    _ => {}
                }
            }
            3..=4 => match lease.unlink(&name, |_| false) {
                Unlink::Answered { inode } => {
                    let was = told.remove(&name);
                    if was != Some(inode) {
                        return Err(at("an unlink of another node than callers were told"));
                    }
                }
                Unlink::ToDatabase if told.contains_key(&name) && !lease.failing => {
                    // (through PostgreSQL: settled first, then removed)
                    return Err(at("a known file's unlink sent to the database"));
                }
                _ => {}
            },
            5..=6 if in_flight.is_none() && gated.is_none() => {
                let keep = [Keep::No, Keep::Settle, Keep::IfBusy][rng.gen_range(0..3)];
                in_flight = Some(lease.begin_commit(keep));
            }
            7..=8 if in_flight.is_some() => {
                let commit = in_flight.take().unwrap();
                if rng.gen_bool(0.2) {
                    if rng.gen_bool(0.5) {
                        // committed, its answer lost
                        db.apply(&commit.batch).map_err(|e| at(&e))?;
                    }
                    lease.commit_failed();
                    continue;
                }
                let mut answer = db.apply(&commit.batch).map_err(|e| at(&e))?;
                answer.kept = commit.keep;
                answer.wanted = commit.hold && rng.gen_bool(0.2);
                let done = lease.commit_answered(&answer, commit.keep);
                if !done.refused.is_empty() {
                    return Err(at("a create refused though the lease was held"));
                }
                if done.released {
                    break;
                }
                if done.again {
                    in_flight = Some(lease.begin_commit(Keep::No));
                }
            }
            9 if in_flight.is_none() && gated.is_none() => {
                let made: Vec<u64> = told
                    .values()
                    .copied()
                    .filter(|&i| lease.made_here(i))
                    .collect();
                if let Some(&inode) = made.first() {
                    if lease.begin_create_with_data(inode).is_some() {
                        gated = Some(inode);
                    }
                }
            }
            _ => {
                if let Some(inode) = gated.take() {
                    let made = rng.gen_bool(0.7);
                    if lease.created_with_data(inode, made).is_some() {
                        let name = told.iter().find(|(_, &i)| i == inode).unwrap().0.clone();
                        db.apply(&LeaseBatch {
                            creates: vec![leased_create(&name, inode)],
                            ..Default::default()
                        })
                        .map_err(|e| at(&e))?;
                    }
                }
            }
        }
        // PostgreSQL is asked only about nodes it has: every node callers
        // were told of and not made here is in the database (one made here
        // may be there too: a commit's answer lost)
        for (name, &inode) in &told {
            if !db.made.contains(&inode) && !lease.made_here(inode) {
                return Err(at(&format!(
                    "{name:?} (inode {inode}): neither in the database nor made here"
                )));
            }
            if !matches!(lease.lookup(name), Lookup::Known | Lookup::Made(_)) {
                return Err(at(&format!(
                    "{name:?}: callers were told it exists, the lease says missing"
                )));
            }
        }
    }
    // the end: what is in flight answered, the rest committed
    if let Some(inode) = gated.take() {
        lease.created_with_data(inode, false);
    }
    if let Some(commit) = in_flight.take() {
        let mut answer = db.apply(&commit.batch)?;
        answer.kept = true;
        lease.commit_answered(&answer, commit.keep);
    }
    let last = lease.begin_commit(Keep::No);
    let mut answer = db.apply(&last.batch)?;
    answer.kept = false;
    if lease.commit_answered(&answer, false).again {
        return Err(format!("seed {seed}: another commit after the last"));
    }
    // nothing answered was lost: the database holds what callers were told
    if db.names != told {
        return Err(format!(
            "seed {seed}: callers were told {told:?}, the database has {:?}",
            db.names
        ));
    }
    Ok(())
}

#[test]
fn random_runs_lose_no_create_make_none_twice_and_ask_postgresql_only_what_it_knows() {
    let first: u64 = std::env::var("JFS_LEASE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    for seed in first..first + 2_000 {
        if let Err(broken) = random_run(seed, 200) {
            panic!("{broken} (JFS_LEASE_SEED={seed} runs it again)");
        }
    }
}
