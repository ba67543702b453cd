//! The jfs client as a library: the metadata calls (`meta`), object stores
//! (`object`), the virtual file system (`vfs`) and what opens a volume and
//! attaches a session to it (`volume`). The `jfs` command (`cmd`, its FUSE
//! mount in `fuse`) the S3 gateway (`gateway`) and the Python package (`python/`) are built
//! on it.
pub mod attach;
pub mod cmd;
pub mod direct;
pub mod dump;
pub mod fuse;
pub mod gateway;
pub mod meta;
pub mod metrics;
pub mod ns;
pub mod object;
pub mod sync;
pub mod vfs;
pub mod volume;
