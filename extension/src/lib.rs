//! jfs extension glue: loads the file-system schema and procedures from `sql/`, in order.
//!
//! All of jfs's server logic is SQL and PL/pgSQL in the repository's `sql/`
//! directory, readable on its own; this crate only ships it as an extension.
pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../../sql/schema.sql", name = "schema", bootstrap);
pgrx::extension_sql_file!(
    "../../sql/internal.sql",
    name = "internal",
    requires = ["schema"]
);
pgrx::extension_sql_file!(
    "../../sql/usage.sql",
    name = "usage",
    requires = ["internal"]
);
pgrx::extension_sql_file!(
    "../../sql/volume.sql",
    name = "volume",
    requires = ["usage"]
);
pgrx::extension_sql_file!(
    "../../sql/namespace.sql",
    name = "namespace",
    requires = ["volume"]
);
pgrx::extension_sql_file!(
    "../../sql/rename.sql",
    name = "rename",
    requires = ["namespace"]
);
pgrx::extension_sql_file!(
    "../../sql/readdir.sql",
    name = "readdir",
    requires = ["namespace"]
);
pgrx::extension_sql_file!(
    "../../sql/setattr.sql",
    name = "setattr",
    requires = ["namespace"]
);
pgrx::extension_sql_file!(
    "../../sql/xattr.sql",
    name = "xattr",
    requires = ["namespace"]
);
pgrx::extension_sql_file!("../../sql/data.sql", name = "data", requires = ["setattr"]);
pgrx::extension_sql_file!(
    "../../sql/session.sql",
    name = "session",
    requires = ["namespace"]
);
pgrx::extension_sql_file!(
    "../../sql/batch.sql",
    name = "batch",
    requires = ["namespace"]
);
pgrx::extension_sql_file!("../../sql/clone.sql", name = "clone", requires = ["batch"]);
pgrx::extension_sql_file!(
    "../../sql/people.sql",
    name = "people",
    requires = ["clone"]
);
pgrx::extension_sql_file!("../../sql/trash.sql", name = "trash", requires = ["people"]);
pgrx::extension_sql_file!("../../sql/quota.sql", name = "quota", requires = ["trash"]);
pgrx::extension_sql_file!("../../sql/tier.sql", name = "tier", requires = ["quota"]);
pgrx::extension_sql_file!("../../sql/fsck.sql", name = "fsck", requires = ["tier"]);
pgrx::extension_sql_file!("../../sql/security.sql", name = "security", finalize);
