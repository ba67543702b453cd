//! The operations of the file system by family, each an `impl Vfs` block:
//! namespace (entries and attributes), files (open, read, write, close),
//! directories (listing, statfs), byte ranges (fallocate, SEEK_DATA,
//! copy_file_range), extended attributes and ACLs, locks.
mod dir;
pub use dir::ListedEntry;
mod file;
mod lock;
mod namespace;
mod range;
mod xattr;
