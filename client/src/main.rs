//! `jfs` command line: the entry point of the jfs client.
use clap::Parser;

/// jfs: a POSIX file system whose metadata lives in PostgreSQL and whose data
/// lives in object storage.
#[derive(Parser, Debug)]
#[command(name = "jfs", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    println!(
        "jfs {}: the mount and volume commands arrive with the client issue; see README.md",
        env!("CARGO_PKG_VERSION")
    );
}
