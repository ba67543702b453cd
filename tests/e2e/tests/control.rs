//! The control file as an attacker sees it: any local user of an
//! `--allow-other` mount can write requests to `.jfs.control`, so each is
//! checked for the writer's uid, gid and groups as the system calls it
//! stands for would be (rm -rf, cp -r, write, search on the path), and an
//! inode outside the mount's `--subdir` is refused for everyone.
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use jfs_e2e::Volume;

const ALICE: u32 = 1001;
const BOB: u32 = 1002;
/// A group BOB is given as a supplementary group only.
const TEAM: u32 = 1003;

/// Sends one control request through the mount rooted at `mount` as `uid`
/// (its own gid, supplementary groups `groups`), with the system's Python
/// (readable by everyone); returns the answer.
fn ask_as(uid: u32, groups: &[u32], mount: &Path, request: &str) -> String {
    let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid", &uid.to_string(), "--regid", &uid.to_string()]);
    match groups.is_empty() {
        true => cmd.arg("--clear-groups"),
        false => cmd.args(["--groups", &groups.join(",")]),
    };
    let out = cmd
        .args([
            "/usr/bin/python3",
            "-c",
            "import sys\n\
             with open(sys.argv[1], 'r+b', buffering=0) as f:\n\
             \x20   f.write(sys.argv[2].encode()); f.seek(0); sys.stdout.write(f.read().decode())",
        ])
        .arg(mount.join(".jfs.control"))
        .arg(format!("{request}\n"))
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "uid {uid} could not use the control file for {request:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ino(path: &Path) -> u64 {
    fs::metadata(path).unwrap().ino()
}

/// How a request names a node: a directory by its inode, anything else as
/// PARENT_INODE:NAME_IN_HEX (as the `jfs` commands do).
fn node(path: &Path) -> String {
    match fs::symlink_metadata(path).unwrap().is_dir() {
        true => ino(path).to_string(),
        false => format!(
            "{}:{}",
            ino(path.parent().unwrap()),
            hex(path.file_name().unwrap().to_str().unwrap())
        ),
    }
}

fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Makes directory `path` with `mode`, owned by uid:gid.
fn dir(path: &Path, mode: u32, uid: u32, gid: u32) {
    fs::create_dir(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Makes file `path` with `mode`, owned by uid:gid.
fn file(path: &Path, mode: u32, uid: u32, gid: u32) {
    fs::write(path, format!("{}\n", path.display())).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn refused(answer: &str) -> bool {
    answer.starts_with("error:") && answer.contains("ermission denied")
}

#[test]
fn control_requests_are_checked_as_the_system_calls_they_stand_for() {
    let v = Volume::new("control-auth");
    let m = v.mount("a", &["--allow-other"]);
    let p = |rel: &str| m.p(rel);
    dir(&p("home"), 0o755, 0, 0);
    dir(&p("home/alice"), 0o700, ALICE, ALICE);
    file(&p("home/alice/secret"), 0o600, ALICE, ALICE);
    dir(&p("home/alice/sub"), 0o755, ALICE, ALICE);
    file(&p("home/alice/sub/notes"), 0o644, ALICE, ALICE);
    dir(&p("home/bob"), 0o755, BOB, BOB);
    dir(&p("home/bob/tree"), 0o755, BOB, BOB);
    dir(&p("home/bob/tree/sub"), 0o755, BOB, BOB);
    file(&p("home/bob/tree/sub/file"), 0o644, BOB, BOB);
    dir(&p("home/bob/mixed"), 0o755, BOB, BOB);
    file(&p("home/bob/mixed/mine"), 0o644, BOB, BOB);
    dir(&p("home/bob/mixed/hers"), 0o755, ALICE, ALICE);
    file(&p("home/bob/mixed/hers/f"), 0o644, ALICE, ALICE);
    dir(&p("shared"), 0o1777, 0, 0);
    dir(&p("shared/alices"), 0o755, ALICE, ALICE);
    file(&p("shared/alices/f"), 0o666, ALICE, ALICE);
    dir(&p("team"), 0o770, 0, TEAM);
    dir(&p("team/work"), 0o770, 0, TEAM);
    file(&p("team/work/f"), 0o660, 0, TEAM);
    let bob = |request: String| ask_as(BOB, &[], &m.path, &request);

    // rmr as rm -rf: bob may not remove alice's home (no write on /home),
    // nor what is hers in a sticky directory, nor enter what he cannot read
    let answer = bob(format!("rmr {} {}", ino(&p("home")), hex("alice")));
    assert!(refused(&answer), "rmr of another user's home: {answer}");
    let answer = bob(format!("rmr {} {}", ino(&p("shared")), hex("alices")));
    assert!(refused(&answer), "rmr in a sticky directory: {answer}");
    let answer = bob(format!("rmr {} {}", ino(&p("home/alice")), hex("sub")));
    assert!(
        refused(&answer),
        "rmr below a directory he cannot search: {answer}"
    );
    assert!(p("home/alice/secret").exists() && p("shared/alices/f").exists());
    assert!(p("home/alice/sub/notes").exists());
    // in a tree of his holding a directory of hers, he removes what rm -rf
    // would: his file; hers and the way to it are left, and said so
    let answer = bob(format!("rmr {} {}", ino(&p("home/bob")), hex("mixed")));
    assert!(
        refused(&answer) && answer.contains("removed 1; left 1"),
        "rmr of a tree with another user's directory: {answer}"
    );
    assert!(!p("home/bob/mixed/mine").exists());
    assert!(p("home/bob/mixed/hers/f").exists());

    // clone as cp -r: a tree with a directory he cannot read, a file he
    // cannot read, or a destination he cannot write is refused
    for (src, dst) in [
        ("home", "home/bob"),
        ("home/alice", "home/bob"),
        ("home/alice/secret", "home/bob"),
        ("home/bob/tree", "home/alice"),
    ] {
        let answer = bob(format!(
            "clone {} {} {}",
            node(&p(src)),
            ino(&p(dst)),
            hex("copy")
        ));
        assert!(refused(&answer), "clone of {src} into {dst}: {answer}");
    }
    assert!(!p("home/bob/copy").exists());

    // info needs search on the path; compact needs write on the file
    let answer = bob(format!("info {}", node(&p("home/alice/secret"))));
    assert!(
        refused(&answer),
        "info below a directory he cannot search: {answer}"
    );
    let answer = bob(format!("compact {}", node(&p("shared/alices/f"))));
    assert!(
        answer.starts_with("compacted"),
        "compact of a file he may write: {answer}"
    );
    let answer = bob(format!("compact {}", ino(&p("home/bob/tree/sub"))));
    assert!(answer.starts_with("compacted"), "{answer}");
    let answer = bob(format!("compact {}", node(&p("home/alice/sub/notes"))));
    assert!(
        refused(&answer),
        "compact of a file he may not write: {answer}"
    );

    // what he may do, he still can: a group he has only as a supplementary
    // group counts (from the writer's process)
    let answer = ask_as(
        BOB,
        &[TEAM],
        &m.path,
        &format!("rmr {} {}", ino(&p("team")), hex("work")),
    );
    assert!(
        answer.contains("done"),
        "rmr through a supplementary group: {answer}"
    );
    assert!(!p("team/work").exists());
    let answer = bob(format!(
        "clone {} {} {}",
        ino(&p("home/bob/tree")),
        ino(&p("home/bob")),
        hex("copy")
    ));
    assert!(
        answer.starts_with("cloned"),
        "clone of his own tree: {answer}"
    );
    assert_eq!(
        fs::metadata(p("home/bob/copy/sub/file")).unwrap().uid(),
        BOB
    );
    let answer = bob(format!("rmr {} {}", ino(&p("home/bob")), hex("tree")));
    assert!(answer.contains("done"), "rmr of his own tree: {answer}");
    assert!(!p("home/bob/tree").exists());
    let answer = ask_as(
        ALICE,
        &[],
        &m.path,
        &format!("rmr {} {}", ino(&p("home/alice")), hex("sub")),
    );
    assert!(
        answer.contains("done"),
        "alice removes her own tree: {answer}"
    );
    let answer = bob(format!("info {}", node(&p("home/bob/copy/sub/file"))));
    assert!(answer.contains("type: File"), "{answer}");
}

#[test]
fn control_requests_stay_inside_the_mounted_subdir() {
    let v = Volume::new("control-subdir");
    let whole = v.mount("whole", &[]);
    dir(&whole.p("a"), 0o755, 0, 0);
    dir(&whole.p("b"), 0o755, 0, 0);
    file(&whole.p("b/kept"), 0o644, 0, 0);
    let b = ino(&whole.p("b"));
    let a = v.mount("a", &["--allow-other", "--subdir", "/a"]);
    for request in [
        format!("rmr {b} {}", hex("kept")),
        format!("info {}", node(&whole.p("b/kept"))),
        format!("info {}", ino(&whole.p("b/kept"))),
        format!("compact {}", node(&whole.p("b/kept"))),
        format!("info {b}"),
        format!("clone {b} 1 {}", hex("stolen")),
    ] {
        for uid in [0, BOB] {
            let answer = ask_as(uid, &[], &a.path, &request);
            assert!(
                answer.starts_with("error:"),
                "uid {uid}: {request:?} through a mount of /a: {answer}"
            );
        }
    }
    assert!(whole.p("b/kept").exists());
    assert!(!whole.p("a/stolen").exists());
}

#[test]
fn debug_reports_and_warmups_of_unreadable_files_are_refused_to_other_users() {
    let v = Volume::new("control-debug");
    let cache = v.dir.path().join("cache");
    let m = v.mount(
        "a",
        &["--allow-other", "--cache-dir", cache.to_str().unwrap()],
    );
    fs::write(m.p("secret"), b"s").unwrap();
    fs::set_permissions(m.p("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(m.p("open"), b"o").unwrap();
    fs::set_permissions(m.p("open"), fs::Permissions::from_mode(0o644)).unwrap();
    let root = m.p("");
    let answer = ask_as(ALICE, &[], &root, "debug");
    assert!(answer.starts_with("error: debug: only root"), "{answer}");
    let secret = format!("warmup {} check", node(&m.p("secret")));
    let answer = ask_as(ALICE, &[], &root, &secret);
    assert!(answer.contains("no read permission"), "{answer}");
    // what she may read she may warm
    let open = format!("warmup {} fetch", node(&m.p("open")));
    let answer = ask_as(ALICE, &[], &root, &open);
    assert!(answer.starts_with("blocks 1 1 bytes 1 1"), "{answer}");
}

#[test]
fn summaries_show_other_users_only_what_they_could_list() {
    let v = Volume::new("control-summary");
    let m = v.mount("a", &["--allow-other"]);
    let p = |rel: &str| m.p(rel);
    dir(&p("home"), 0o755, 0, 0);
    dir(&p("home/alice"), 0o700, ALICE, ALICE);
    dir(&p("home/alice/private"), 0o755, ALICE, ALICE);
    file(&p("home/alice/private/f"), 0o644, ALICE, ALICE);
    dir(&p("home/bob"), 0o755, BOB, BOB);
    dir(&p("home/bob/work"), 0o755, BOB, BOB);
    let bob = |request: String| ask_as(BOB, &[], &m.path, &request);
    // a directory he may not read is not summed for him
    let answer = bob(format!("summary {} 0", ino(&p("home/alice"))));
    assert!(
        refused(&answer),
        "summary of an unreadable directory: {answer}"
    );
    // of /home he sees alice's total (as a quota would show it), not the
    // names inside her home
    let answer = bob(format!("summary {} 3", ino(&p("home"))));
    let rows: Vec<&str> = answer
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert!(rows.contains(&hex("alice").as_str()), "{answer}");
    assert!(rows.contains(&hex("bob/work").as_str()), "{answer}");
    assert!(
        !rows.contains(&hex("alice/private").as_str()),
        "a name inside a directory he cannot list: {answer}"
    );
    // root sees every row
    let answer = ask_as(0, &[], &m.path, &format!("summary {} 3", ino(&p("home"))));
    assert!(
        answer.contains(&format!(" {}\n", hex("alice/private"))),
        "{answer}"
    );
}

/// On a volume with ACLs on, a request is checked against the access ACLs
/// as the kernel checks the system calls it stands for: a named entry
/// refuses what the mode bits alone would grant, and grants what they
/// alone would refuse.
#[test]
fn control_requests_are_checked_against_posix_acls() {
    let v = Volume::with_options("control-acl", &["--enable-acl"]);
    let m = v.mount("a", &["--allow-other"]);
    let p = |rel: &str| m.p(rel);
    let setfacl = |spec: &str, rel: &str| {
        let out = Command::new("setfacl")
            .args(["-m", spec])
            .arg(p(rel))
            .output()
            .unwrap();
        assert!(out.status.success(), "setfacl {spec} {rel}: {out:?}");
    };
    let bob = |request: String| ask_as(BOB, &[], &m.path, &request);
    // bits that grant BOB everything, entries that refuse him
    dir(&p("open"), 0o777, 0, 0);
    file(&p("open/x"), 0o666, 0, 0);
    setfacl(&format!("u:{BOB}:r-x"), "open");
    dir(&p("hidden"), 0o755, 0, 0);
    dir(&p("hidden/sub"), 0o777, 0, 0);
    file(&p("hidden/sub/f"), 0o666, 0, 0);
    setfacl(&format!("u:{BOB}:---"), "hidden");
    file(&p("readonly"), 0o666, 0, 0);
    setfacl(&format!("u:{BOB}:r--"), "readonly");
    dir(&p("unreadable"), 0o755, 0, 0);
    file(&p("unreadable/f"), 0o644, 0, 0);
    setfacl(&format!("u:{BOB}:---"), "unreadable");
    dir(&p("bobs"), 0o755, BOB, BOB);

    let answer = bob(format!("rmr {} {}", ino(&p("open")), hex("x")));
    assert!(refused(&answer), "rmr where an ACL refuses write: {answer}");
    assert!(p("open/x").exists());
    let answer = bob(format!("info {}", node(&p("hidden/sub/f"))));
    assert!(
        refused(&answer),
        "info below an ACL refusing search: {answer}"
    );
    let answer = bob(format!("rmr {} {}", ino(&p("hidden/sub")), hex("f")));
    assert!(
        refused(&answer),
        "rmr below an ACL refusing search: {answer}"
    );
    let answer = bob(format!("compact {}", node(&p("readonly"))));
    assert!(
        refused(&answer),
        "compact where an ACL refuses write: {answer}"
    );
    let answer = bob(format!(
        "clone {} {} {}",
        ino(&p("unreadable")),
        ino(&p("bobs")),
        hex("copy")
    ));
    assert!(
        refused(&answer),
        "clone where an ACL refuses read: {answer}"
    );
    assert!(!p("bobs/copy").exists());

    // bits that refuse BOB, an entry that grants him
    file(&p("granted"), 0o600, 0, 0);
    setfacl(&format!("u:{BOB}:rw-"), "granted");
    let answer = bob(format!("compact {}", node(&p("granted"))));
    assert!(
        answer.starts_with("compacted"),
        "compact where an ACL grants write: {answer}"
    );
    dir(&p("team"), 0o700, 0, 0);
    file(&p("team/f"), 0o600, 0, 0);
    setfacl(&format!("u:{BOB}:rwx"), "team");
    let answer = bob(format!("rmr {} {}", ino(&p("team")), hex("f")));
    assert!(
        answer.contains("done"),
        "rmr where an ACL grants write: {answer}"
    );
    assert!(!p("team/f").exists());
}
