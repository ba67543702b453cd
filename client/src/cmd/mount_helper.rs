//! `mount.jfs`: the helper mount(8) runs for `mount -t jfs META_URL DIR -o OPTIONS` and fstab lines of type jfs, turned into `jfs mount META_URL DIR -d --OPTION VALUE...`.
use std::ffi::OsString;

/// mount(8)'s own options, which say nothing to jfs ("dev" and "suid"
/// become --dev and --suid; nodev and nosuid are a mount's defaults).
const GENERIC: [&str; 12] = [
    "defaults", "rw", "auto", "noauto", "user", "nouser", "users", "nofail", "_netdev", "nodev",
    "nosuid", "exec",
];

/// The name mount(8) runs the helper by.
pub const HELPER_NAME: &str = "mount.jfs";

/// `jfs mount` arguments for `mount.jfs SPEC DIR [-sfnv] [-N NS] [-o OPTIONS]`.
/// Options become flags (`cache-size=1024` → `--cache-size 1024`,
/// `allow_other` → `--allow-other`, `ro` → `--read-only`, `relatime` →
/// `--atime-mode relatime`, as `strictatime` and `noatime`); mount(8)'s own
/// and `x-*` ones are dropped. `password-file=FILE` reads the database
/// password from FILE (it goes on no command line; META_PASSWORD in the
/// environment works too).
pub fn mount_args(helper_args: &[OsString]) -> anyhow::Result<Vec<OsString>> {
    let mut positional = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut it = helper_args.iter().skip(1);
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("-o") => {
                let value = it
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("mount.jfs: -o needs options"))?;
                options.extend(value.to_string_lossy().split(',').map(str::to_string));
            }
            Some("-N" | "-t") => {
                it.next();
            }
            Some(flag) if flag.starts_with('-') && flag.len() > 1 => {} // -s -f -n -v
            _ => positional.push(arg.clone()),
        }
    }
    let [spec, dir] = <[OsString; 2]>::try_from(positional).map_err(|p| {
        anyhow::anyhow!(
            "usage: mount.jfs META_URL MOUNTPOINT [-o OPTIONS] (got {} paths)",
            p.len()
        )
    })?;
    let mut spec = spec;
    let mut args: Vec<OsString> = vec![
        "jfs".into(),
        "mount".into(),
        OsString::new(),
        dir,
        "-d".into(),
    ];
    for option in options.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
        let (key, value) = match option.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (option, None),
        };
        if GENERIC.contains(&key) || key.starts_with("x-") || key == "fstype" {
            continue;
        }
        match (key, value) {
            ("ro", None) => args.push("--read-only".into()),
            ("noatime" | "relatime" | "strictatime", None) => {
                args.push("--atime-mode".into());
                args.push(key.into());
            }
            ("password-file", Some(file)) => {
                let password = std::fs::read_to_string(file)
                    .map_err(|e| anyhow::anyhow!("mount.jfs: reading password-file {file}: {e}"))?;
                // into the URL this process parses (a background mount gets
                // it through its environment: it is on no command line)
                let mut url = url::Url::parse(&spec.to_string_lossy())
                    .map_err(|e| anyhow::anyhow!("mount.jfs: META_URL: {e}"))?;
                url.set_password(Some(password.trim_end_matches(['\n', '\r'])))
                    .map_err(|_| anyhow::anyhow!("mount.jfs: META_URL takes no password"))?;
                spec = url.to_string().into();
            }
            (key, value) => {
                args.push(format!("--{}", key.replace('_', "-")).into());
                if let Some(v) = value {
                    args.push(v.into());
                }
            }
        }
    }
    args[2] = spec;
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn fstab_options_become_flags() {
        let args: Vec<OsString> = [
            "/sbin/mount.jfs",
            "postgres://jfs@db/vol",
            "/mnt/jfs",
            "-o",
            "rw,_netdev,allow_other,nodev,cache-size=1024,x-systemd.automount,ro,dev,suid,relatime,cache-dir=/var/cache/jfs",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(
            strings(&mount_args(&args).unwrap()),
            [
                "jfs",
                "mount",
                "postgres://jfs@db/vol",
                "/mnt/jfs",
                "-d",
                "--allow-other",
                "--cache-size",
                "1024",
                "--read-only",
                "--dev",
                "--suid",
                "--atime-mode",
                "relatime",
                "--cache-dir",
                "/var/cache/jfs"
            ]
        );
    }

    #[test]
    fn mount_flags_are_skipped_and_paths_counted() {
        let args: Vec<OsString> = ["mount.jfs", "-v", "url", "-n", "/m", "-t", "jfs"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            strings(&mount_args(&args).unwrap()),
            ["jfs", "mount", "url", "/m", "-d"]
        );
        let one: Vec<OsString> = ["mount.jfs", "url"].iter().map(OsString::from).collect();
        assert!(mount_args(&one).unwrap_err().to_string().contains("usage"));
    }

    #[test]
    fn the_password_comes_from_a_file_into_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pass");
        std::fs::write(&file, "s3cr3t\n").unwrap();
        let args: Vec<OsString> = vec![
            "mount.jfs".into(),
            "postgres://jfs@db:5432/vol".into(),
            "/m".into(),
            "-o".into(),
            format!("password-file={},allow_other", file.display()).into(),
        ];
        let got = strings(&mount_args(&args).unwrap());
        assert_eq!(got[2], "postgres://jfs:s3cr3t@db:5432/vol");
        assert_eq!(got[5], "--allow-other");
    }
}
