//! The Python package (`python/`, built and installed into the test venv by
//! scripts/test.sh): the pytest suites of tests/python/ run against a volume
//! with a FUSE mount of it beside them, as the client role.
use std::path::Path;
use std::process::Command;

use jfs_e2e::*;

/// Runs tests/python/`file` with pytest against a fresh volume and a mount
/// of it; fails with pytest's report.
fn pytest(name: &str, file: &str) {
    let v = Volume::new(name);
    let m = v.mount("m", &[]);
    let suite = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../python")
        .join(file);
    let out = Command::new(venv_python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"])
        .arg(&suite)
        .env("JFS_META_URL", &v.url)
        .env("JFS_TEST_ADMIN_URL", &v.admin_url)
        .env("JFS_TEST_READER_URL", meta_url_as(&v.db, READER_ROLE))
        .env("JFS_TEST_MOUNT", m.p(""))
        .output()
        .expect("running pytest in the test venv");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest {file} failed ({}):\n{report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // a suite that ran nothing proves nothing
    assert!(report.contains(" passed"), "pytest {file}: {report}");
    assert!(
        !report.contains(" skipped"),
        "pytest {file} skipped tests: {report}"
    );
}

#[test]
fn fsspec_conformance_and_the_api_pipelines_use() {
    pytest("py-fsspec", "test_fsspec.py");
}

#[test]
fn the_package_and_a_mount_see_each_others_files_and_locks() {
    pytest("py-mount", "test_mount.py");
}

#[test]
fn data_loader_workers_read_10000_files_in_forked_and_spawned_processes() {
    pytest("py-loader", "test_loader.py");
}

#[test]
fn the_package_refuses_what_permissions_and_quotas_refuse() {
    pytest("py-access", "test_access.py");
}
