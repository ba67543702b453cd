//! jfs extension glue: loads the file-system schema and procedures from `sql/`, in dependency order.
//!
//! All of jfs's server logic is SQL and PL/pgSQL in the repository's `sql/`
//! directory, readable on its own; this crate only ships it as an extension.
//! This build's install script is generated from `sql/`; released versions
//! are frozen in `migrations/` with the upgrade scripts between them.
//!
//! `requires` names, for each file, the files whose functions, types and
//! views it uses, and each file uses only what loads before it
//! (`tests/lint/sql_call_order.py` checks every call against this list).
//! Procedures that call each other in a cycle live in one file: rename
//! moves what it replaces into the trash, and moving into the trash is a
//! rename (rename.sql).
pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../../sql/schema.sql", name = "schema", bootstrap);
pgrx::extension_sql_file!("../../sql/usage.sql", name = "usage", requires = ["schema"]);
pgrx::extension_sql_file!(
    "../../sql/quota_chain.sql",
    name = "quota_chain",
    requires = ["usage"]
);
pgrx::extension_sql_file!(
    "../../sql/charge.sql",
    name = "charge",
    requires = ["usage", "quota_chain"]
);
pgrx::extension_sql_file!(
    "../../sql/internal.sql",
    name = "internal",
    requires = ["schema", "charge"]
);
pgrx::extension_sql_file!(
    "../../sql/chunk_data.sql",
    name = "chunk_data",
    requires = ["internal"]
);
pgrx::extension_sql_file!(
    "../../sql/acl_rules.sql",
    name = "acl_rules",
    requires = ["internal"]
);
pgrx::extension_sql_file!(
    "../../sql/namespace.sql",
    name = "namespace",
    requires = ["internal", "charge", "acl_rules"]
);
pgrx::extension_sql_file!(
    "../../sql/rename.sql",
    name = "rename",
    requires = ["internal", "charge", "namespace"]
);
pgrx::extension_sql_file!(
    "../../sql/remove.sql",
    name = "remove",
    requires = ["internal", "charge", "rename"]
);
pgrx::extension_sql_file!(
    "../../sql/readdir.sql",
    name = "readdir",
    requires = ["schema", "internal"]
);
pgrx::extension_sql_file!(
    "../../sql/setattr.sql",
    name = "setattr",
    requires = ["internal", "charge", "chunk_data"]
);
pgrx::extension_sql_file!(
    "../../sql/xattr.sql",
    name = "xattr",
    requires = ["internal"]
);
pgrx::extension_sql_file!(
    "../../sql/data.sql",
    name = "data",
    requires = ["internal", "charge", "chunk_data", "setattr"]
);
pgrx::extension_sql_file!(
    "../../sql/session.sql",
    name = "session",
    requires = ["internal"]
);
pgrx::extension_sql_file!(
    "../../sql/batch.sql",
    name = "batch",
    requires = ["internal", "charge", "namespace", "rename", "remove"]
);
pgrx::extension_sql_file!(
    "../../sql/clone.sql",
    name = "clone",
    requires = ["internal", "charge"]
);
pgrx::extension_sql_file!(
    "../../sql/people.sql",
    name = "people",
    requires = ["schema", "batch", "clone"]
);
pgrx::extension_sql_file!(
    "../../sql/trash.sql",
    name = "trash",
    requires = ["namespace", "rename", "batch", "people"]
);
pgrx::extension_sql_file!(
    "../../sql/quota.sql",
    name = "quota",
    requires = ["charge", "people"]
);
pgrx::extension_sql_file!(
    "../../sql/volume.sql",
    name = "volume",
    requires = ["internal", "charge", "quota"]
);
pgrx::extension_sql_file!(
    "../../sql/shard.sql",
    name = "shard",
    requires = ["internal", "charge", "volume"]
);
pgrx::extension_sql_file!(
    "../../sql/compact.sql",
    name = "compact",
    requires = ["internal", "people", "chunk_data"]
);
pgrx::extension_sql_file!(
    "../../sql/tier.sql",
    name = "tier",
    requires = ["internal", "people"]
);
pgrx::extension_sql_file!(
    "../../sql/fsck.sql",
    name = "fsck",
    requires = ["charge", "people", "quota", "range"]
);
pgrx::extension_sql_file!(
    "../../sql/acl.sql",
    name = "acl",
    requires = ["internal", "people", "acl_rules"]
);
pgrx::extension_sql_file!(
    "../../sql/changelog.sql",
    name = "changelog",
    requires = ["schema", "people", "trash"]
);
pgrx::extension_sql_file!(
    "../../sql/lock.sql",
    name = "lock",
    requires = ["internal", "people"]
);
pgrx::extension_sql_file!(
    "../../sql/range.sql",
    name = "range",
    requires = ["internal", "charge", "chunk_data"]
);
pgrx::extension_sql_file!(
    "../../sql/dump.sql",
    name = "dump",
    requires = ["trash", "range", "quota", "volume"]
);
pgrx::extension_sql_file!(
    "../../sql/metrics.sql",
    name = "metrics",
    requires = ["quota", "tier", "trash"]
);
pgrx::extension_sql_file!(
    "../../sql/lease.sql",
    name = "lease",
    requires = ["internal", "batch", "session", "data"]
);
pgrx::extension_sql_file!("../../sql/security.sql", name = "security", finalize);
