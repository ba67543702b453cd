//! Data at rest: volumes formatted with `--compress` and `--encrypt-rsa-key`
//! store blocks in JuiceFS's object format (checked by an implementation
//! of that format apart from jfs: tests/e2e/scripts/juicefs_object.py, on
//! liblz4, libzstd and OpenSSL), read them back under every combination,
//! refuse a wrong key or passphrase before serving anything, and never
//! return a block whose bytes were changed.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use jfs_e2e::{jfs, ok, pattern, venv_python, Volume};

const PASSPHRASE: &str = "jfs-test-passphrase";

/// A test key of the client's codec tests.
fn key(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../client/src/object/testdata");
    p.join(name).to_str().unwrap().to_string()
}

/// Bytes that compress (text) and bytes that do not, 50 kB of each in turn.
fn content(len: usize, seed: u64) -> Vec<u8> {
    const PART: usize = 50_000;
    let mut out = Vec::with_capacity(len + PART);
    for part in 0.. {
        if out.len() >= len {
            break;
        }
        if part % 2 == 0 {
            let start = out.len();
            while out.len() - start < PART {
                out.extend_from_slice(format!("line {} of file {seed}\n", out.len()).as_bytes());
            }
        } else {
            out.extend(pattern(seed * 1000 + part, PART));
        }
    }
    out.truncate(len);
    out
}

/// The block objects of `v` (under NAME/chunks/), with the length each key names.
fn blocks(v: &Volume) -> Vec<(PathBuf, usize)> {
    v.objects()
        .into_iter()
        .filter(|p| p.to_str().unwrap().contains("/chunks/"))
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            let len = name.rsplit('_').next().unwrap().parse().unwrap();
            (p, len)
        })
        .collect()
}

/// Decodes a stored block with the independent implementation.
fn decode_apart(object: &Path, pem: &str, compression: &str, len: usize) -> Vec<u8> {
    let out = object.with_extension("decoded");
    ok(Command::new(venv_python())
        .env("JFS_RSA_PASSPHRASE", PASSPHRASE)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/juicefs_object.py"))
        .args(["open", pem, compression, &len.to_string()])
        .arg(object)
        .arg(&out));
    let data = fs::read(&out).unwrap();
    fs::remove_file(&out).unwrap();
    data
}

/// Format arguments for `compression` and `cipher` ("" = none) with `pem`.
fn format_args<'a>(compression: &'a str, cipher: &'a str, pem: &'a str) -> Vec<&'a str> {
    let mut args = vec!["--block-size", "64", "--compress", compression];
    if !cipher.is_empty() {
        args.extend(["--encrypt-rsa-key", pem, "--encrypt-algo", cipher]);
    }
    args
}

#[test]
fn every_combination_round_trips_in_juicefs_object_format() {
    let pem = key("rsa2048.pem");
    for (i, compression) in ["none", "lz4", "zstd"].into_iter().enumerate() {
        for (j, cipher) in ["", "aes256gcm-rsa", "chacha20-rsa"]
            .into_iter()
            .enumerate()
        {
            let what = format!("compression {compression}, encryption {cipher:?}");
            let name = format!("rest-{i}{j}");
            let v = Volume::with_options(&name, &format_args(compression, cipher, &pem));
            let m = v.mount("a", &[]);
            // a file of one whole block, and one of many blocks and a tail
            let one = content(64 << 10, 1);
            let many = content((1 << 20) + 12_345, 2);
            fs::write(m.p("one"), &one).unwrap();
            fs::write(m.p("many"), &many).unwrap();
            m.unmount();

            // what is stored is what the format says, read apart from jfs
            let stored = blocks(&v);
            let total: usize = stored.iter().map(|b| b.1).sum();
            assert_eq!(total, one.len() + many.len(), "{what}: {stored:?}");
            let seal = if cipher.is_empty() { "-" } else { pem.as_str() };
            let mut found_one = false;
            for (object, len) in &stored {
                let raw = fs::read(object).unwrap();
                let data = decode_apart(object, seal, compression, *len);
                assert_eq!(data.len(), *len, "{what}");
                if data == one {
                    found_one = true;
                }
                if compression == "none" && cipher.is_empty() {
                    assert_eq!(raw, data, "{what}: stored as is");
                } else {
                    assert_ne!(raw, data, "{what}: stored in clear");
                }
            }
            assert!(
                found_one,
                "{what}: no stored block decodes to the one-block file"
            );

            // a fresh mount (nothing cached) reads every byte back, whole
            // and in pieces
            let m = v.mount("b", &[]);
            assert!(fs::read(m.p("one")).unwrap() == one, "{what}");
            assert!(fs::read(m.p("many")).unwrap() == many, "{what}");
            let f = fs::File::open(m.p("many")).unwrap();
            let mut piece = vec![0u8; 1000];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut piece, 700_000).unwrap();
            assert!(piece == many[700_000..701_000], "{what}");
            let fsck = ok(jfs().args(["fsck", &v.admin_url, "--check-objects"]));
            let said = String::from_utf8_lossy(&fsck.stderr);
            assert!(said.contains(": 0 missing"), "{what}: {said}");
        }
    }
}

#[test]
fn a_wrong_key_or_passphrase_stops_the_mount_before_it_serves() {
    let protected = key("rsa2048-encrypted.pem");
    // format itself needs the passphrase to check the key
    let v = Volume::unformatted("rest-keys");
    let bucket = v.bucket();
    let format = |env: &[(&str, &str)]| {
        jfs()
            .envs(env.iter().copied())
            .args([
                "format",
                &v.admin_url,
                "rest-keys",
                "--storage",
                "file",
                "--bucket",
            ])
            .arg(&bucket)
            .args(["--compress", "lz4", "--encrypt-rsa-key", &protected])
            .output()
            .unwrap()
    };
    let out = format(&[]);
    assert!(
        !out.status.success(),
        "formatted without the key's passphrase"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("JFS_RSA_PASSPHRASE"), "{err}");
    let out = format(&[("JFS_RSA_PASSPHRASE", PASSPHRASE)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let with_pass = [("JFS_RSA_PASSPHRASE", PASSPHRASE)];
    let m = v.mount_with_env("a", &[], &with_pass);
    fs::write(m.p("f"), content(100_000, 3)).unwrap();
    m.unmount();

    let refused = |env: &[(&str, &str)], why: &str| {
        let dir = v.dir.path().join("mnt-refused");
        fs::create_dir_all(&dir).unwrap();
        let out = jfs()
            .envs(env.iter().copied())
            .args(["mount", &v.url])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(!out.status.success(), "mounted with {why}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = refused(&[], "no passphrase");
    assert!(err.contains("JFS_RSA_PASSPHRASE"), "{err}");
    let err = refused(&[("JFS_RSA_PASSPHRASE", "wrong")], "a wrong passphrase");
    assert!(err.contains("wrong passphrase"), "{err}");
    // another key put in the volume behind its back: the volume's mark
    // does not open with it, so nothing is served
    let other = fs::read_to_string(key("other2048.pem")).unwrap();
    v.sql(&format!(
        "UPDATE jfs.secret SET encrypt_key = $k${other}$k$"
    ));
    let err = refused(&with_pass, "another key");
    assert!(
        err.contains("not the one its objects were sealed with"),
        "{err}"
    );
}

#[test]
fn a_changed_block_is_an_error_never_data() {
    let pem = key("rsa2048.pem");
    let v = Volume::with_options("rest-tamper", &format_args("zstd", "aes256gcm-rsa", &pem));
    let m = v.mount("a", &[]);
    let data = content(200_000, 4);
    fs::write(m.p("f"), &data).unwrap();
    m.unmount();
    // one byte of one block's ciphertext changed in the bucket
    let (object, _) = blocks(&v).into_iter().next().unwrap();
    let mut raw = fs::read(&object).unwrap();
    let at = raw.len() / 2;
    raw[at] ^= 0x01;
    fs::write(&object, &raw).unwrap();

    let m = v.mount("b", &[]);
    let e = fs::read(m.p("f")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let key_name = object.file_name().unwrap().to_str().unwrap();
    assert!(
        eventually_logged(&m, key_name),
        "the mount did not log the changed block {key_name}:\n{}",
        m.log_tail(20)
    );
}

/// Whether the mount's log names `what` within a few seconds.
fn eventually_logged(m: &jfs_e2e::Mount, what: &str) -> bool {
    jfs_e2e::eventually(5, || m.log_text().contains(what))
}

#[test]
fn a_sealed_disk_cache_holds_no_plain_text_and_serves_blocks() {
    let pem = key("rsa2048.pem");
    let v = Volume::with_options("rest-cache", &format_args("lz4", "aes256gcm-rsa", &pem));
    let cache = v.dir.path().join("cache");
    let cache_arg = cache.to_str().unwrap();
    let cache_args = ["--cache-dir", cache_arg, "--cache-sealed"];
    let m = v.mount("a", &[]);
    let marker = b"a marker line that must stay off every disk\n".repeat(3000);
    fs::write(m.p("f"), &marker).unwrap();
    m.unmount();

    let m = v.mount("b", &cache_args);
    assert!(fs::read(m.p("f")).unwrap() == marker);
    // (blocks are cached in the background of the read)
    let cached_files = || {
        let mut cached = Vec::new();
        let mut stack = vec![cache.clone()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                match e.file_type().unwrap().is_dir() {
                    true => stack.push(e.path()),
                    false if !e.file_name().to_string_lossy().contains(".tmp.") => {
                        cached.push(fs::read(e.path()).unwrap_or_default())
                    }
                    false => {}
                }
            }
        }
        cached
    };
    let stored = blocks(&v).len();
    assert!(
        jfs_e2e::eventually(20, || cached_files().len() >= stored),
        "{} of {stored} blocks cached",
        cached_files().len()
    );
    m.unmount();
    let cached = cached_files();
    for bytes in &cached {
        assert!(
            !bytes.windows(24).any(|w| w == &marker[..24]),
            "plain text in the disk cache"
        );
    }
    // the blocks gone from the bucket, the cache serves them
    for (object, _) in blocks(&v) {
        fs::remove_file(object).unwrap();
    }
    let m = v.mount("c", &cache_args);
    assert!(fs::read(m.p("f")).unwrap() == marker);
    m.unmount();

    // a volume that is not encrypted has no key to seal a cache with
    let plain = Volume::with_options("rest-cache-plain", &["--compress", "lz4"]);
    let dir = plain.dir.path().join("mnt-refused");
    fs::create_dir_all(&dir).unwrap();
    let out = jfs()
        .args(["mount", &plain.url])
        .arg(&dir)
        .args(cache_args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a cache sealed with no key");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not encrypted"), "{err}");
}

#[test]
fn format_force_adds_encryption_to_an_empty_volume_and_keeps_how_blocks_are_stored() {
    let pem = key("rsa2048.pem");
    let v = Volume::with_options("rest-force", &["--compress", "lz4"]);
    let force = |extra: &[&str]| {
        let mut cmd = jfs();
        cmd.args([
            "format",
            &v.admin_url,
            "rest-force",
            "--storage",
            "file",
            "--bucket",
        ])
        .arg(v.bucket())
        .arg("--force")
        .args(extra);
        ok(&mut cmd);
    };
    // no data yet: encryption may come in (the volume's mark is sealed anew)
    force(&["--compress", "lz4", "--encrypt-rsa-key", &pem]);
    assert_eq!(
        v.sql("SELECT compression, encrypt_algo FROM jfs.setting"),
        "lz4|aes256gcm-rsa"
    );
    let m = v.mount("a", &[]);
    fs::write(m.p("f"), content(100_000, 5)).unwrap();
    m.unmount();
    // with data, other settings change without restating compression or key
    force(&["--trash-days", "3"]);
    assert_eq!(
        v.sql("SELECT compression, encrypt_algo, trash_days FROM jfs.setting"),
        "lz4|aes256gcm-rsa|3"
    );
    let m = v.mount("b", &[]);
    assert!(fs::read(m.p("f")).unwrap() == content(100_000, 5));
}
