//! ListObjectsV2 over directories: the keys under a prefix in S3's order
//! (UTF-8 bytes), from a walk that visits each directory's entries sorted
//! as their keys sort (a directory `d` as `d/`), starting at the prefix's
//! own directory and skipping subtrees that lie before the continuation
//! point. Objects are regular files; directories are only prefixes.
use crate::direct::{Direct, DirectResult};
use crate::meta::{Attr, NodeType};

/// One page of a listing.
#[derive(Debug, Default)]
pub struct Page {
    /// Keys of objects and their attributes, in order.
    pub objects: Vec<(String, Attr)>,
    /// Common prefixes (with a delimiter), in order.
    pub prefixes: Vec<String>,
    /// Where the next page starts (exclusive), when there is one.
    pub next: Option<String>,
}

/// Up to `max` keys and common prefixes of `bucket` after `after` that start
/// with `prefix`; with `by_directory` (delimiter "/"), the entries of the
/// prefix's directory only, subdirectories as common prefixes.
pub async fn page(
    d: &Direct,
    bucket: &str,
    prefix: &str,
    by_directory: bool,
    after: &str,
    max: usize,
) -> DirectResult<Page> {
    let (dir, name_prefix) = match prefix.rfind('/') {
        Some(i) => (&prefix[..=i], &prefix[i + 1..]),
        None => ("", prefix),
    };
    // no key has empty, "." or ".." parts: such a prefix matches nothing
    // (and must not walk outside the bucket)
    let no_key = dir
        .split('/')
        .rev()
        .skip(1)
        .any(|p| p.is_empty() || p == "." || p == "..")
        || prefix.contains('\0');
    if no_key || max == 0 {
        return Ok(Page::default());
    }
    let mut first = entries(d, bucket, dir).await?;
    first.retain(|(name, _)| name.starts_with(name_prefix));
    let mut page = Page::default();
    let mut last = String::new();
    let mut stack = vec![(dir.to_string(), first)];
    while let Some((base, remaining)) = stack.last_mut() {
        let Some((name, attr)) = remaining.pop() else {
            stack.pop();
            continue;
        };
        let key = format!("{base}{name}");
        let item = match attr.kind {
            NodeType::Dir => {
                let sub = key + "/";
                if by_directory {
                    if sub.as_str() <= after {
                        continue;
                    }
                    Item::Prefix(sub)
                } else {
                    // every key below starts with `sub`: all before `after`?
                    if sub.as_str() < after && !after.starts_with(&sub) {
                        continue;
                    }
                    let children = entries(d, bucket, &sub).await?;
                    stack.push((sub, children));
                    continue;
                }
            }
            NodeType::File if key.as_str() > after => Item::Object(key, attr),
            _ => continue,
        };
        if page.objects.len() + page.prefixes.len() == max {
            page.next = Some(last);
            return Ok(page);
        }
        match item {
            Item::Prefix(p) => {
                last.clone_from(&p);
                page.prefixes.push(p);
            }
            Item::Object(k, attr) => {
                last.clone_from(&k);
                page.objects.push((k, attr));
            }
        }
    }
    Ok(page)
}

enum Item {
    Prefix(String),
    Object(String, Attr),
}

/// The entries of directory `dir` (a key prefix ending in "/", or "") of
/// `bucket`, last key first (the walk pops them); none if it is missing.
async fn entries(d: &Direct, bucket: &str, dir: &str) -> DirectResult<Vec<(String, Attr)>> {
    let path = format!("/{bucket}/{dir}");
    let listed = match d.list(path.as_bytes()).await {
        Ok(listed) => listed,
        Err(libc::ENOENT | libc::ENOTDIR) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut named: Vec<(String, Attr)> = listed
        .into_iter()
        .filter_map(|(name, attr)| String::from_utf8(name).ok().map(|n| (n, attr)))
        .collect();
    named.sort_by_key(|e| std::cmp::Reverse(sort_key(e)));
    Ok(named)
}

/// How an entry's key sorts among its siblings': a directory `d` as `d/`.
fn sort_key((name, attr): &(String, Attr)) -> Vec<u8> {
    let mut key = name.as_bytes().to_vec();
    if attr.kind == NodeType::Dir {
        key.push(b'/');
    }
    key
}
