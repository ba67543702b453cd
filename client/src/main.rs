//! `jfs` command line: the entry point of the jfs client.
mod cmd;
mod dump;
mod fuse;
mod meta;
mod object;
mod vfs;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jfs: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
