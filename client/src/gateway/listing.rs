//! What ListObjects and ListObjectsV2 share: their arguments checked, a
//! page of `list::page`, and the page's objects and prefixes as S3 lists
//! them.
use s3s::dto::{CommonPrefix, Object, ObjectStorageClass};
use s3s::{s3_error, S3Result};

use super::{list, modified, s3_error, xml_char, Gateway, MAX_KEYS};
use crate::meta::Attr;

impl Gateway {
    /// A listing page of `bucket` (delimiter "/" or none) after `after`.
    pub(super) async fn page(
        &self,
        bucket: &str,
        prefix: Option<&str>,
        delimiter: Option<&str>,
        after: Option<&str>,
        max_keys: Option<i32>,
    ) -> S3Result<(list::Page, i32)> {
        let by_directory = match delimiter {
            None | Some("") => false,
            Some("/") => true,
            Some(other) => {
                return Err(s3_error!(
                    NotImplemented,
                    "delimiter {other:?}: only \"/\" is (keys are paths)"
                ))
            }
        };
        for (what, text) in [("prefix", prefix), ("start point", after)] {
            if let Some(bad) = text.and_then(|t| t.chars().find(|&c| !xml_char(c))) {
                // (an answer echoes them, in XML, which cannot carry them)
                return Err(s3_error!(
                    InvalidArgument,
                    "the listing's {what} holds {bad:?}, which no key of this gateway does"
                ));
            }
        }
        self.bucket(bucket).await?;
        let max = max_keys
            .unwrap_or(MAX_KEYS as i32)
            .clamp(0, MAX_KEYS as i32);
        let prefix = prefix.unwrap_or("");
        let page = list::page(
            &self.d,
            bucket,
            prefix,
            by_directory,
            after.unwrap_or(""),
            max as usize,
        )
        .await
        .map_err(|e| s3_error(e, prefix))?;
        Ok((page, max))
    }
}

/// A page's objects and prefixes as S3 lists them (ETags are left out:
/// finding them would cost a call per key).
pub(super) fn listed(
    objects: Vec<(String, Attr)>,
    prefixes: Vec<String>,
) -> (Vec<Object>, Vec<CommonPrefix>) {
    let contents = objects
        .into_iter()
        .map(|(key, attr)| Object {
            key: Some(key),
            size: Some(attr.length as i64),
            last_modified: Some(modified(&attr)),
            storage_class: Some(ObjectStorageClass::from_static(
                ObjectStorageClass::STANDARD,
            )),
            ..Default::default()
        })
        .collect();
    let prefixes = prefixes
        .into_iter()
        .map(|p| CommonPrefix { prefix: Some(p) })
        .collect();
    (contents, prefixes)
}
