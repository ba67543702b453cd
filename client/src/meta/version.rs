//! Which versions of the jfs extension this client works with, checked when it connects.
//!
//! The extension's SQL surface moves only through upgrade scripts
//! (`migrations/jfs--A--B.sql`), and its version is the workspace version
//! this client is built with. A client calls procedures as they are from
//! [`EXTENSION_MIN`] on, and knows nothing newer than its own version: an
//! older database is upgraded with `ALTER EXTENSION jfs UPDATE`, a newer
//! one needs a newer client.
use std::fmt;

use super::error::ConnectError;
use super::{redact_url, Meta};

/// The oldest extension version whose procedures this client can call (a
/// macro so that [`VERSION_TEXT`] can spell it out at compile time).
macro_rules! extension_min {
    () => {
        "0.2.22"
    };
}

/// The oldest extension version whose procedures this client can call.
pub const EXTENSION_MIN: &str = extension_min!();

/// The extension version this client is built with (the workspace version):
/// the newest whose SQL surface it knows.
pub const EXTENSION_BUILT: &str = env!("CARGO_PKG_VERSION");

/// What `jfs --version` prints: the client's version and the extension
/// versions it works with.
pub const VERSION_TEXT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (works with the jfs extension ",
    extension_min!(),
    " up to ",
    env!("CARGO_PKG_VERSION_MAJOR"),
    ".",
    env!("CARGO_PKG_VERSION_MINOR"),
    ".x)"
);

/// A `major.minor.patch` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// Parses `major.minor.patch` (a pre-release or build suffix is ignored).
    pub fn parse(text: &str) -> Option<Version> {
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
        let version = Version {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(version)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Says whether this client works with extension version `installed`, and
/// what to do when it does not. A patch release of the version the client
/// is built with keeps its SQL surface, so it is accepted.
pub fn check_extension_version(installed: &str) -> Result<(), String> {
    check_between(installed, EXTENSION_MIN, EXTENSION_BUILT)
}

fn check_between(installed: &str, min: &str, built: &str) -> Result<(), String> {
    let min = Version::parse(min).expect("EXTENSION_MIN is a version");
    let built = Version::parse(built).expect("the crate version is a version");
    let Some(have) = Version::parse(installed) else {
        return Err(format!(
            "database has jfs extension version '{installed}', which this client (jfs {built}) \
             cannot read as a version: install a jfs release and run ALTER EXTENSION jfs UPDATE"
        ));
    };
    if have < min {
        return Err(format!(
            "database has jfs {have}; this client needs >= {min}: \
             run ALTER EXTENSION jfs UPDATE in that database (as its owner, after installing \
             this jfs build's extension files with scripts/install-extension.sh)"
        ));
    }
    if (have.major, have.minor) > (built.major, built.minor) {
        return Err(format!(
            "database has jfs {have}; this client (jfs {built}) supports {min} to {}.{}.x: \
             upgrade this client to jfs {}.{} or newer",
            built.major, built.minor, have.major, have.minor
        ));
    }
    Ok(())
}

impl Meta {
    /// Connects (a first connection tells whether the database is reachable)
    /// and returns the installed jfs extension's version, if any.
    pub(super) async fn extension_version(
        &self,
        meta_url: &str,
    ) -> Result<Option<String>, ConnectError> {
        // a first connection, to say so when the database is unreachable
        drop(
            self.pool
                .get()
                .await
                .map_err(|e| ConnectError::unreachable(meta_url, e))?,
        );
        Ok(self.installed_version().await?)
    }

    /// The installed jfs extension's version, if any.
    pub async fn installed_version(&self) -> super::Result<Option<String>> {
        let client = self.pool.get().await?;
        // (unnamed statements here and below: see `unnamed_statements`)
        let rows = client
            .query_typed(
                "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'jfs'",
                &[],
            )
            .await?;
        Ok(rows.first().map(|r| r.get(0)))
    }

    /// Stops with what to do when this client does not work with `version`.
    pub(super) fn require_version(
        &self,
        meta_url: &str,
        version: &str,
    ) -> Result<(), ConnectError> {
        check_extension_version(version).map_err(|why| ConnectError::Version {
            url: redact_url(meta_url),
            why,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!(
            Version::parse("0.12.3"),
            Some(Version {
                major: 0,
                minor: 12,
                patch: 3
            })
        );
        assert_eq!(
            Version::parse("1.2.3-dev").map(|v| v.to_string()),
            Some("1.2.3".into())
        );
        assert_eq!(Version::parse("1.2"), None);
        assert_eq!(Version::parse("1.2.3.4"), None);
        assert_eq!(Version::parse("x.y.z"), None);
    }

    #[test]
    fn accepts_the_supported_range() {
        assert!(check_between("0.2.0", "0.2.0", "0.3.1").is_ok());
        assert!(check_between("0.3.0", "0.2.0", "0.3.1").is_ok());
        // a patch release of the built version keeps the SQL surface
        assert!(check_between("0.3.7", "0.2.0", "0.3.1").is_ok());
    }

    #[test]
    fn refuses_an_older_extension_with_the_update_command() {
        let err = check_between("0.1.0", "0.2.0", "0.3.0").unwrap_err();
        assert!(err.starts_with("database has jfs 0.1.0; this client needs >= 0.2.0: run ALTER EXTENSION jfs UPDATE"), "{err}");
    }

    #[test]
    fn refuses_a_newer_extension_asking_for_a_newer_client() {
        let err = check_between("0.4.0", "0.2.0", "0.3.0").unwrap_err();
        assert!(err.contains("database has jfs 0.4.0"), "{err}");
        assert!(
            err.contains("upgrade this client to jfs 0.4 or newer"),
            "{err}"
        );
        let err = check_between("1.0.0", "0.2.0", "0.3.0").unwrap_err();
        assert!(err.contains("upgrade this client"), "{err}");
    }

    #[test]
    fn refuses_an_unreadable_version() {
        let err = check_between("devel", "0.2.0", "0.3.0").unwrap_err();
        assert!(err.contains("'devel'"), "{err}");
    }

    #[test]
    fn the_supported_range_is_not_empty() {
        assert!(check_extension_version(EXTENSION_MIN).is_ok());
        assert!(check_extension_version(EXTENSION_BUILT).is_ok());
    }
}
