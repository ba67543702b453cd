//! `jfs` command line: the entry point of the jfs client.
use clap::Parser;
use jfs_client::cmd;

fn main() -> std::process::ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let as_helper = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|name| name == cmd::mount_helper::HELPER_NAME);
    // run by mount(8) as /sbin/mount.jfs: `jfs mount` with the options as flags
    let cli = if as_helper {
        match cmd::mount_helper::mount_args(&argv) {
            Ok(args) => cmd::Cli::parse_from(args),
            Err(e) => {
                eprintln!("{e:#}");
                return std::process::ExitCode::FAILURE;
            }
        }
    } else {
        cmd::Cli::parse()
    };
    match cmd::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jfs: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
