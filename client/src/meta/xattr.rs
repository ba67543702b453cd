//! Extended attribute procedures: getxattr, setxattr, listxattr, removexattr.
use super::{check_errno, Meta, MetaError, Result};

impl Meta {
    pub async fn getxattr(&self, inode: u64, name: &[u8]) -> Result<Vec<u8>> {
        let row = self
            .call_one(
                "SELECT * FROM jfs.getxattr($1, $2)",
                &[&(inode as i64), &name],
            )
            .await?;
        check_errno(&row)?;
        Ok(row.try_get("value")?)
    }

    /// flags: 1 XATTR_CREATE, 2 XATTR_REPLACE.
    pub async fn setxattr(&self, inode: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        let send = || async {
            let row = self
                .call_one(
                    "SELECT jfs.setxattr($1, $2, $3, $4) AS errno",
                    &[&(inode as i64), &name, &value, &flags],
                )
                .await?;
            check_errno(&row)
        };
        match self.sent_again("setxattr", send, libc::EEXIST).await? {
            Some(()) => Ok(()),
            // (XATTR_CREATE) there now: made by the first call if it is the value
            None => match self.getxattr(inode, name).await? {
                v if v == value => Ok(()),
                _ => Err(MetaError::Errno(libc::EEXIST)),
            },
        }
    }

    pub async fn listxattr(&self, inode: u64) -> Result<Vec<Vec<u8>>> {
        let row = self
            .call_one("SELECT * FROM jfs.listxattr($1)", &[&(inode as i64)])
            .await?;
        check_errno(&row)?;
        Ok(row.try_get("names")?)
    }

    pub async fn removexattr(&self, inode: u64, name: &[u8]) -> Result<()> {
        let send = || async {
            let row = self
                .call_one(
                    "SELECT jfs.removexattr($1, $2) AS errno",
                    &[&(inode as i64), &name],
                )
                .await?;
            check_errno(&row)
        };
        // gone when asked again: removed by the first call
        self.sent_again("removexattr", send, libc::ENODATA).await?;
        Ok(())
    }
}
