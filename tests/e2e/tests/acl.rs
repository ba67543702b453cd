//! POSIX ACLs on a volume formatted with `--enable-acl`: getfacl/setfacl
//! round trips, the mode kept in step with the mask, default ACLs inherited
//! by new entries (the umask then ignored), and the kernel enforcing named
//! entries for another user.
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use jfs_e2e::{jfs, ok, Volume};

/// An ordinary user the named entries are about.
const OTHER_UID: &str = "1000";

fn getfacl(path: &Path) -> String {
    let out = ok(Command::new("getfacl")
        .args(["--omit-header", "--numeric"])
        .arg(path));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn setfacl(args: &[&str], path: &Path) {
    ok(Command::new("setfacl").args(args).arg(path));
}

/// Runs `sh -c script` as OTHER_UID (gid OTHER_UID, no supplementary groups).
fn as_other(script: &str) -> Output {
    Command::new("setpriv")
        .args([
            "--reuid",
            OTHER_UID,
            "--regid",
            OTHER_UID,
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap()
}

fn mode(path: &Path) -> String {
    format!("{:o}", fs::metadata(path).unwrap().mode() & 0o7777)
}

#[test]
fn access_acls_round_trip_follow_chmod_and_are_enforced() {
    let v = Volume::with_options("acl-access", &["--enable-acl"]);
    let m = v.mount("a", &["--allow-other"]);
    let f = m.p("secret");
    fs::write(&f, b"for 1000's eyes\n").unwrap();
    ok(Command::new("chmod").arg("0600").arg(&f));
    let cat = format!("cat {}", f.display());
    assert!(
        !as_other(&cat).status.success(),
        "0600 root file read by uid 1000"
    );

    setfacl(&["-m", &format!("u:{OTHER_UID}:r")], &f);
    assert_eq!(
        getfacl(&f),
        format!("user::rw-\nuser:{OTHER_UID}:r--\ngroup::---\nmask::r--\nother::---")
    );
    assert_eq!(mode(&f), "640", "the group bits are the mask");
    let ls = ok(Command::new("ls").arg("-l").arg(&f));
    assert!(
        String::from_utf8_lossy(&ls.stdout).starts_with("-rw-r-----+"),
        "ls -l marks the ACL: {}",
        String::from_utf8_lossy(&ls.stdout)
    );
    let read = as_other(&cat);
    assert!(read.status.success(), "the named entry grants reading");
    assert_eq!(read.stdout, b"for 1000's eyes\n");
    assert!(
        !as_other(&format!("echo x >> {}", f.display()))
            .status
            .success(),
        "but not writing"
    );

    // chmod sets the mask, and the mask limits the named entry
    ok(Command::new("chmod").arg("0600").arg(&f));
    assert_eq!(
        getfacl(&f),
        format!(
            "user::rw-\nuser:{OTHER_UID}:r--\t#effective:---\ngroup::---\nmask::---\nother::---"
        )
    );
    assert!(
        !as_other(&cat).status.success(),
        "mask --- denies the named entry"
    );

    // another mount sees the same ACL, from the database
    let b = v.mount("b", &["--allow-other"]);
    ok(Command::new("chmod").arg("0640").arg(&f));
    assert_eq!(
        getfacl(&b.p("secret")),
        format!("user::rw-\nuser:{OTHER_UID}:r--\ngroup::---\nmask::r--\nother::---")
    );
    assert_eq!(
        v.reader_sql("SELECT count(*) FROM jfs.acls"),
        "2",
        "people see the rows"
    );

    // removing the ACL leaves the mode
    setfacl(&["-b"], &f);
    assert_eq!(getfacl(&f), "user::rw-\ngroup::---\nother::---");
    assert_eq!(mode(&f), "600");
    assert_eq!(v.sql("SELECT count(*) FROM jfs.acl"), "0");
    assert!(!as_other(&cat).status.success());

    // malformed ACLs are refused and leave the old one
    setfacl(&["-m", &format!("g:{OTHER_UID}:rw")], &f);
    let bad = Command::new("python3")
        .args([
            "-c",
            "import os,struct,sys\n\
             # a named user without a mask\n\
             acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in \
             [(1, 6, 0xffffffff), (2, 6, 7), (4, 4, 0xffffffff), (0x20, 4, 0xffffffff)])\n\
             try:\n    os.setxattr(sys.argv[1], 'system.posix_acl_access', acl)\n\
             except OSError as e:\n    print(e.errno)\n",
        ])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&bad.stdout).trim(), "22", "EINVAL");
    assert!(getfacl(&f).contains(&format!("group:{OTHER_UID}:rw-")));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

#[test]
fn default_acls_are_inherited_and_replace_the_umask() {
    let v = Volume::with_options("acl-default", &["--enable-acl"]);
    let m = v.mount("a", &["--allow-other"]);
    let d = m.p("team");
    fs::create_dir(&d).unwrap();
    ok(Command::new("chmod").arg("0750").arg(&d));
    setfacl(
        &[
            "-m",
            &format!("u:{OTHER_UID}:rwx,d:u:{OTHER_UID}:rwx,d:g::r-x,d:o::---"),
        ],
        &d,
    );
    assert_eq!(
        getfacl(&d),
        format!(
            "user::rwx\nuser:{OTHER_UID}:rwx\ngroup::r-x\nmask::rwx\nother::---\n\
             default:user::rwx\ndefault:user:{OTHER_UID}:rwx\ndefault:group::r-x\n\
             default:mask::rwx\ndefault:other::---"
        )
    );

    // a umask of 077 would leave 0600; the default ACL decides instead
    ok(Command::new("sh").args([
        "-c",
        &format!(
            "umask 077 && echo made-by-root > {d}/file && mkdir {d}/sub",
            d = d.display()
        ),
    ]));
    let file = d.join("file");
    assert_eq!(
        getfacl(&file),
        format!("user::rw-\nuser:{OTHER_UID}:rwx\t#effective:rw-\ngroup::r-x\t#effective:r--\nmask::rw-\nother::---")
    );
    assert_eq!(mode(&file), "660");
    let sub = d.join("sub");
    assert_eq!(
        getfacl(&sub),
        format!(
            "user::rwx\nuser:{OTHER_UID}:rwx\ngroup::r-x\nmask::rwx\nother::---\n\
             default:user::rwx\ndefault:user:{OTHER_UID}:rwx\ndefault:group::r-x\n\
             default:mask::rwx\ndefault:other::---"
        )
    );
    assert_eq!(mode(&sub), "770");
    // uid 1000 writes through its inherited entry and makes its own files
    let wrote = as_other(&format!(
        "echo appended >> {d}/file && echo mine > {d}/sub/own",
        d = d.display()
    ));
    assert!(
        wrote.status.success(),
        "{}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    assert_eq!(fs::read(&file).unwrap(), b"made-by-root\nappended\n");
    let own = sub.join("own");
    assert_eq!(fs::metadata(&own).unwrap().uid(), 1000);
    assert!(getfacl(&own).contains(&format!("user:{OTHER_UID}:rwx")));

    // a directory without a default ACL applies the umask as always
    fs::create_dir(m.p("plain")).unwrap();
    ok(Command::new("sh").args([
        "-c",
        &format!("umask 027 && touch {}/f", m.p("plain").display()),
    ]));
    assert_eq!(mode(&m.p("plain/f")), "640");
    assert_eq!(
        getfacl(&m.p("plain/f")),
        "user::rw-\ngroup::r--\nother::---"
    );

    // a clone keeps the ACLs; removing everything leaves no rows behind
    ok(jfs().arg("clone").arg(&d).arg(m.p("team-copy")));
    assert_eq!(getfacl(&m.p("team-copy/file")), getfacl(&file));
    assert_eq!(getfacl(&m.p("team-copy/sub")), getfacl(&sub));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
    ok(Command::new("rm").arg("-rf").arg(&d).arg(m.p("team-copy")));
    assert!(jfs_e2e::eventually(10, || v
        .sql("SELECT count(*) FROM jfs.acl")
        == "0"));
    assert_eq!(v.sql("SELECT count(*) FROM jfs.fsck()"), "0");
}

/// Runs `sh -c script` as OTHER_UID with primary group OTHER_UID and
/// supplementary groups `groups` (comma-separated; "" for none).
fn as_other_in(groups: &str, script: &str) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid", OTHER_UID, "--regid", OTHER_UID]);
    match groups {
        "" => cmd.arg("--clear-groups"),
        g => cmd.args(["--groups", g]),
    };
    cmd.args(["sh", "-c", script]).output().unwrap()
}

/// An access ACL sets the mode as chmod does: written by an owner outside
/// the file's group it clears the setgid bit (xfstests generic/375), by
/// an owner in the group (its own or a supplementary one) or by root it
/// keeps it; on a volume with ACLs on and, through the minimal ACL that
/// stands for a mode, with ACLs off.
#[test]
fn an_acl_set_by_an_owner_outside_the_group_clears_setgid() {
    for (label, format) in [("on", &["--enable-acl"][..]), ("off", &[][..])] {
        let v = Volume::with_options(&format!("acl-sgid-{label}"), format);
        let m = v.mount("a", &["--allow-other"]);
        // OTHER_UID's files in group 5000 (not its own) and in group OTHER_UID
        let sgid_file = |name: &str, group: &str| {
            let f = m.p(name);
            fs::write(&f, b"#!/bin/sh\n").unwrap();
            ok(Command::new("chown")
                .arg(format!("{OTHER_UID}:{group}"))
                .arg(&f));
            ok(Command::new("chmod").arg("2755").arg(&f));
            assert_eq!(mode(&f), "2755");
            f
        };
        let set_acl = |f: &Path, groups: &str| {
            // (an ACL that changes the mode: setfacl writes nothing otherwise)
            let out = as_other_in(
                groups,
                &format!("setfacl -m u::rwx,g::rwx,o::r-x {}", f.display()),
            );
            assert!(
                out.status.success(),
                "{label}: setfacl by the owner: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };

        let outside = sgid_file("outside", "5000");
        set_acl(&outside, "");
        assert_eq!(mode(&outside), "775", "{label}: owner outside group 5000");

        let own_group = sgid_file("own-group", OTHER_UID);
        set_acl(&own_group, "");
        assert_eq!(mode(&own_group), "2775", "{label}: owner in its own group");

        let supplementary = sgid_file("supplementary", "5000");
        set_acl(&supplementary, "5000");
        assert_eq!(
            mode(&supplementary),
            "2775",
            "{label}: owner in group 5000 by a supplementary group"
        );

        let by_root = sgid_file("by-root", "5000");
        setfacl(&["-m", "u::rwx,g::rwx,o::r-x"], &by_root);
        assert_eq!(mode(&by_root), "2775", "{label}: root");

        // what the mount answered is what the database holds
        let b = v.mount("b", &[]);
        assert_eq!(mode(&b.p("outside")), "775", "{label}: another mount");
        assert_eq!(
            mode(&b.p("supplementary")),
            "2775",
            "{label}: another mount"
        );
    }
}
