//! `jfs` command line: the entry point of the jfs client.
use clap::Parser;

/// jfs: a POSIX file system whose metadata lives in PostgreSQL and whose file
/// data lives in object storage.
///
/// The volume is created and inspected from SQL for now (`CREATE EXTENSION
/// jfs; SELECT * FROM jfs.format('myjfs')`); format, mount, umount, status and
/// info arrive with the client.
#[derive(Parser, Debug)]
#[command(name = "jfs", version, about, long_about)]
struct Cli {}

fn main() {
    Cli::parse();
}
