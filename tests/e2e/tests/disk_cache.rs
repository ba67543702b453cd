//! The local disk cache (`--cache-dir`): private to the mount's user, and a
//! cached block whose bytes changed on disk is never served: the mount
//! drops it and reads the object store.
use std::fs;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use jfs_e2e::{eventually, pattern, Volume};

/// Every file below `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        match e.path().is_dir() {
            true => found.extend(files(&e.path())),
            false => found.push(e.path()),
        }
    }
    found
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_corrupted_cached_block_is_read_again_from_the_store() {
    let v = Volume::new("disk-cache");
    let cache = v.dir.path().join("cache");
    let cache_arg = cache.to_str().unwrap().to_string();
    let data = pattern(7, 9 << 20);
    {
        let m = v.mount("a", &["--cache-dir", &cache_arg]);
        fs::write(m.p("f"), &data).unwrap();
        assert!(fs::read(m.p("f")).unwrap() == data);
        assert!(
            eventually(10, || files(&cache).len() == 3),
            "cached: {:?}",
            files(&cache)
        );
    }
    // other local users cannot read other users' file data in it
    assert_eq!(mode(&cache), 0o700);
    for f in files(&cache) {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
        assert_eq!(mode(f.parent().unwrap()), 0o700, "{}", f.display());
        // one byte of each block changed behind the mount's back
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&f)
            .unwrap();
        let len = file.metadata().unwrap().len();
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, len / 2).unwrap();
        file.write_all_at(&[byte[0] ^ 0xff], len / 2).unwrap();
    }
    {
        let m = v.mount("b", &["--cache-dir", &cache_arg]);
        assert!(
            fs::read(m.p("f")).unwrap() == data,
            "the corrupted cache was served"
        );
        assert!(
            m.log_text().contains("does not match its checksum"),
            "{}",
            m.log_tail(20)
        );
        // and cached again, good
        assert!(eventually(10, || files(&cache).len() == 3));
    }
    let again = v.mount("c", &["--cache-dir", &cache_arg]);
    assert!(fs::read(again.p("f")).unwrap() == data);
    assert!(!again.log_text().contains("checksum"));
}
