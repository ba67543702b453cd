//! The Python package (`python/`, built and installed into the test venv by
//! scripts/test.sh): the pytest suites of tests/python/ run against a volume
//! with a FUSE mount of it beside them, as the client role.
use std::path::Path;
use std::process::Command;

use jfs_e2e::*;

/// Runs tests/python/`file` with pytest against a fresh volume and a mount
/// of it; fails with pytest's report.
fn pytest(name: &str, file: &str) {
    pytest_on(Volume::new(name), &[], file);
}

/// Runs tests/python/`file` against volume `v` and a mount of it with
/// `mount_args`.
fn pytest_on(v: Volume, mount_args: &[&str], file: &str) {
    let m = v.mount("m", mount_args);
    pytest_with(&v, &m, file, &[]);
}

/// Runs tests/python/`file` against `v` and its mount `m`, with `env` too.
fn pytest_with(v: &Volume, m: &Mount, file: &str, env: &[(&str, String)]) {
    let mut all = vec![
        ("JFS_META_URL", v.url.clone()),
        ("JFS_TEST_ADMIN_URL", v.admin_url.clone()),
        ("JFS_TEST_READER_URL", meta_url_as(&v.db, READER_ROLE)),
    ];
    all.extend(env.iter().cloned());
    pytest_in(m, file, &all);
}

/// Runs tests/python/`file` beside mount `m`, with `env` naming the
/// volume (JFS_META_URL...); fails with pytest's report.
fn pytest_in(m: &Mount, file: &str, env: &[(&str, String)]) {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../python")
        .join(file);
    let out = Command::new(venv_python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"])
        .arg(&suite)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("JFS_TEST_MOUNT", m.p(""))
        .envs(env.iter().map(|(k, v)| (k, v.as_str())))
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
    // (with ACLs on: the package checks them as the kernel does for other
    // users of the mount)
    pytest_on(
        Volume::with_options("py-access", &["--enable-acl"]),
        &["--allow-other"],
        "test_access.py",
    );
}

#[test]
fn hostile_arguments_through_the_package_answer_as_the_mount_does() {
    pytest("py-hostile", "test_hostile.py");
}

/// Runs tests/python/`file` against a gateway of a fresh volume and a
/// mount of it (JFS_TEST_S3_ENDPOINT, JFS_TEST_S3_KEYS, JFS_TEST_BLOCKS);
/// the gateway's session ends with it.
fn gateway_pytest(name: &str, file: &str) {
    gateway_pytest_on(Volume::new(name), file);
}

/// [`gateway_pytest`] on volume `v`.
fn gateway_pytest_on(v: Volume, file: &str) {
    let m = v.mount("m", &[]);
    let gateway = Gateway::start(&v);
    let env = [
        ("JFS_TEST_S3_ENDPOINT", gateway.endpoint.clone()),
        (
            "JFS_TEST_S3_KEYS",
            format!("{}:{}", GATEWAY_KEYS.0, GATEWAY_KEYS.1),
        ),
        ("JFS_TEST_BLOCKS", v.bucket().display().to_string()),
    ];
    pytest_with(&v, &m, file, &env);
    let sessions =
        || v.sql("SELECT count(*) FROM jfs.session WHERE info->>'client' LIKE 'gateway%'");
    assert_eq!(sessions(), "1");
    drop(gateway);
    assert_eq!(sessions(), "0", "the gateway's session ends with it");
}

#[test]
fn the_s3_gateway_serves_boto3_and_the_aws_cli() {
    gateway_pytest("py-gateway", "test_gateway.py");
}

/// The package, the gateway and a mount of a volume whose small files
/// keep their bytes in the database (`--inline-max 16`): each reads what
/// the others wrote.
#[test]
fn the_package_and_the_gateway_read_and_write_small_files_kept_in_the_database() {
    let v = Volume::with_options("py-inline", &["--inline-max", "16"]);
    let m = v.mount("m", &[]);
    pytest_with(&v, &m, "test_mount.py", &[]);
    drop(m);
    let kept = v.sql("SELECT count(*) FROM jfs.inline_data");
    assert_ne!(
        kept, "0",
        "no file the package wrote was kept in the database"
    );
    let v = Volume::with_options("py-gateway-inline", &["--inline-max", "16"]);
    gateway_pytest_on(v, "test_gateway.py");
}

#[test]
fn hostile_arguments_through_the_gateway_answer_as_the_mount_does() {
    gateway_pytest("py-gateway-hostile", "test_gateway_hostile.py");
}

/// The package attached to a volume over three clusters (shard roots /a on
/// shard 1 and /c on shard 2), beside a mount of it.
#[test]
fn the_package_spans_the_shards_of_a_volume() {
    let v = ShardedVolume::new("py-shards", 2, &[("/a", 1), ("/c", 2)]);
    let m = v.mount("m", &[]);
    pytest_in(
        &m,
        "test_shards.py",
        &[
            ("JFS_META_URL", v.url.clone()),
            ("JFS_TEST_ADMIN_URL", v.admin_url.clone()),
            ("JFS_TEST_SHARDS", "a:1 c:2".into()),
        ],
    );
    drop(m);
    v.assert_whole();
}
