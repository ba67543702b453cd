//! The namespace layer: the mount's view of names and nodes between the
//! operations (`vfs/`) and the namespace procedures. Being moved here from
//! `vfs/` (issue 55); so far it holds the caches of attributes and entries
//! (`attrs`) and of whole listings (`listings`), one directory lease's
//! state machine (`lease`) and the mount's table of leases (`leases`),
//! which `vfs/` fills and runs against PostgreSQL.
pub mod attrs;
pub mod lease;
pub mod leases;
pub mod listings;
