//! The namespace layer: the mount's view of names and nodes between the
//! operations (`vfs/`) and the namespace procedures. Being moved here from
//! `vfs/` (issue 55); so far it holds the directory leases: one lease's
//! state machine (`lease`) and the mount's table of them (`leases`), which
//! `vfs/leases.rs` runs against PostgreSQL.
pub mod lease;
pub mod leases;
