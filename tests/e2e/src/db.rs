//! The test cluster's databases and roles: psql as the superuser or another role, META_URLs, a fresh database per volume.
use std::process::Command;

use crate::{env, ok};

/// Runs SQL in a database of the test cluster (as the superuser) and returns
/// psql's unaligned, tuples-only output.
pub fn psql(db: &str, sql: &str) -> String {
    let out =
        ok(Command::new("psql").args(["-XAtq", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// META_URL of a database of the test cluster (unix socket), as the
/// superuser: for tests about administration.
pub fn meta_url(db: &str) -> String {
    meta_url_as(db, &env("PGUSER"))
}

/// META_URL of a database of the test cluster as `role`.
pub fn meta_url_as(db: &str, role: &str) -> String {
    let host = env("PGHOST").replace('/', "%2F");
    format!("postgres://{role}@{host}:{}/{db}", env("PGPORT"))
}

/// The role the tests mount and run the CLI as: `jfs.grant_client` only.
pub const CLIENT_ROLE: &str = "jfs_e2e_client";

/// The role of administration (format, quotas, tiers): `jfs.grant_admin`.
pub const ADMIN_ROLE: &str = "jfs_e2e_admin";

/// The role people query the volume with: `jfs.grant_reader`.
pub const READER_ROLE: &str = "jfs_e2e_reader";

/// Creates the test roles (login, no other attribute) unless they exist.
pub(crate) fn create_test_roles() {
    for role in [CLIENT_ROLE, ADMIN_ROLE, READER_ROLE] {
        login_role(role);
    }
}

/// Creates login role `role` (no other attribute) unless it exists.
pub fn login_role(role: &str) {
    psql(
        "postgres",
        &format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        ),
    );
}

/// Runs SQL as `role` over the test cluster's socket, with `app_name` as
/// the connection's application_name; psql's output, or its error.
pub fn psql_as(role: &str, app_name: &str, db: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            "-XAtq",
            "-v",
            "ON_ERROR_STOP=1",
            "-U",
            role,
            "-d",
            db,
            "-c",
            sql,
        ])
        .env("PGAPPNAME", app_name)
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// The database of volume `name`.
pub(crate) fn database_name(name: &str) -> String {
    format!("jfs_e2e_{}", name.replace(['-', '.'], "_"))
}

/// Drops and makes again the (empty) database of volume `name`.
pub fn fresh_database(name: &str) -> String {
    let db = database_name(name);
    psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
    );
    psql("postgres", &format!("CREATE DATABASE {db}"));
    db
}
