//! A client role's limits (`jfs.client_limits`): read-only, and the squash of owner ids, which the database enforces and a mount applies too.
use super::{Meta, Result};

/// A squash of owner ids: every request's (all squash) or root's (root
/// squash) act as `uid`/`gid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Squash {
    pub all: bool,
    pub uid: u32,
    pub gid: u32,
}

impl Squash {
    /// A squash from its `UID:GID` text.
    pub fn parse(text: &str, all: bool) -> std::result::Result<Squash, String> {
        let ids = text.split_once(':').and_then(|(uid, gid)| {
            let uid: u32 = uid.parse().ok()?;
            let gid: u32 = gid.parse().ok()?;
            (uid != u32::MAX && gid != u32::MAX).then_some((uid, gid))
        });
        match ids {
            Some((uid, gid)) => Ok(Squash { all, uid, gid }),
            None => Err(format!(
                "{text:?}: give UID:GID, each 0 .. 4294967294 (e.g. 65534:65534)"
            )),
        }
    }
}

impl std::fmt::Display for Squash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.all { "all" } else { "root" };
        write!(f, "{kind} squash to {}:{}", self.uid, self.gid)
    }
}

/// The limits `jfs.grant_client` gave this client's login role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// It may not call the procedures that write.
    pub read_only: bool,
    pub squash: Option<Squash>,
}

impl Meta {
    pub async fn client_limits(&self) -> Result<ClientLimits> {
        let row = self
            .call_one("SELECT * FROM jfs.client_limits()", &[])
            .await?;
        let kind: String = row.try_get("squash")?;
        let id = |column: &str| -> Result<u32> {
            let id: Option<i64> = row.try_get(column)?;
            Ok(id.and_then(|id| u32::try_from(id).ok()).unwrap_or(u32::MAX))
        };
        let squash = match kind.as_str() {
            "root" | "all" => Some(Squash {
                all: kind == "all",
                uid: id("squash_uid")?,
                gid: id("squash_gid")?,
            }),
            _ => None,
        };
        Ok(ClientLimits {
            read_only: row.try_get("read_only")?,
            squash,
        })
    }
}

impl Meta {
    /// Stops a mount whose role cannot call every procedure a mount may
    /// call (granted before an upgrade added some?), saying what to run
    /// (those that write are not asked of a read-only role).
    pub async fn require_client_grants(&self) -> anyhow::Result<()> {
        let client = self.pool.get().await?;
        let rows = client
            .query_typed(
                "SELECT current_user::text, count(*), \
                        string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid) \
                   FROM pg_catalog.pg_proc p \
                  WHERE p.pronamespace = 'jfs'::regnamespace AND p.prosecdef \
                    AND p.proname <> ALL (jfs.admin_procedures()) \
                    AND (p.proname <> ALL (jfs.write_procedures()) \
                         OR NOT (SELECT l.read_only FROM jfs.client_limits() l)) \
                    AND NOT pg_catalog.has_function_privilege(p.oid, 'EXECUTE')",
                &[],
            )
            .await?;
        let row = rows.first().ok_or_else(|| anyhow::anyhow!("no row"))?;
        let (role, missing): (String, i64) = (row.get(0), row.get(1));
        if missing > 0 {
            let names: Option<String> = row.get(2);
            anyhow::bail!(
                "role {role} may not call {missing} jfs procedure(s) a mount uses ({}): \
                 a superuser runs SELECT jfs.grant_client('{role}') (again after every \
                 ALTER EXTENSION jfs UPDATE)",
                names.unwrap_or_default()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_squash_is_two_ids() {
        assert_eq!(
            Squash::parse("65534:65533", false),
            Ok(Squash {
                all: false,
                uid: 65534,
                gid: 65533
            })
        );
        for bad in ["", "65534", "a:b", "1:-1", "4294967295:0", "1:2:3"] {
            assert!(Squash::parse(bad, true).is_err(), "{bad}");
        }
    }
}
