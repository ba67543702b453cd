//! The block layout, owned here and nowhere else: chunk, slice and block
//! arithmetic and the object keys of blocks; plain functions, no I/O.
//!
//! A file is cut into 64 MiB chunks; each write inside a chunk becomes a
//! slice (later slices shadow earlier ones; a slice with id 0 is a hole); a
//! slice is stored as blocks of the volume's block size, the last one
//! shorter, each an object named as JuiceFS names them:
//! `{volume}/chunks/{id / 1000000}/{id / 1000}/{id}_{index}_{length}`.
//! Besides blocks, a bucket holds `{volume}/juicefs_uuid`, naming the
//! volume its prefix belongs to (`object::claim_bucket`). Every key is
//! made by [`block_key`] and read back by [`parse_block_key`]; a slice's
//! blocks are listed by [`slice_blocks`].
use bytes::Bytes;

use crate::meta::SliceRow;

pub const CHUNK_SIZE: u64 = 64 << 20;

/// The largest file: 2^57 - 1 bytes, its last byte in chunk 2^31 - 1
/// (PostgreSQL keeps a chunk's index as an `integer`, and a file's length
/// must have one too). A write, truncate or copy ends at or before it.
pub const MAX_FILE_SIZE: u64 = (CHUNK_SIZE << 31) - 1;

/// How much of a write of `len` bytes at `offset` fits below
/// [`MAX_FILE_SIZE`]: all of it, its first part (a short write, as Linux
/// answers a write across `s_maxbytes`), or None when it starts at or past
/// the limit (EFBIG).
pub fn fits_in_file(offset: u64, len: usize) -> Option<usize> {
    let room = MAX_FILE_SIZE.checked_sub(offset).filter(|room| *room > 0)?;
    Some(len.min(usize::try_from(room).unwrap_or(usize::MAX)))
}

/// The part of a byte range that falls into one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPiece {
    pub chunk: u32,
    /// Offset inside the chunk.
    pub pos: u32,
    pub len: u32,
    /// Offset of this piece inside the whole range.
    pub range_off: usize,
}

/// Splits `[offset, offset + len)` at chunk boundaries. The range must end
/// at or before [`MAX_FILE_SIZE`] (callers cut it with [`fits_in_file`]).
pub fn split_by_chunk(offset: u64, len: usize) -> Vec<ChunkPiece> {
    assert!(
        fits_in_file(offset, len) == Some(len) || len == 0,
        "a range past the largest file: {len} bytes at {offset}"
    );
    let mut pieces = Vec::new();
    let mut done = 0usize;
    while done < len {
        let at = offset + done as u64;
        let pos = at % CHUNK_SIZE;
        let n = ((CHUNK_SIZE - pos) as usize).min(len - done);
        pieces.push(ChunkPiece {
            chunk: (at / CHUNK_SIZE) as u32,
            pos: pos as u32,
            len: n as u32,
            range_off: done,
        });
        done += n;
    }
    pieces
}

/// Size of block `index` of a slice of `slice_size` bytes.
pub fn block_len(slice_size: u32, block_size: u32, index: u32) -> u32 {
    let start = index as u64 * block_size as u64;
    (slice_size as u64 - start).min(block_size as u64) as u32
}

/// Number of blocks a slice of `slice_size` bytes is stored as.
pub fn block_count(slice_size: u32, block_size: u32) -> u32 {
    slice_size.div_ceil(block_size)
}

/// The slice id, block index and block size in a block key made by
/// [`block_key`] for `volume`; None for any other key.
pub fn parse_block_key(volume: &str, key: &str) -> Option<(u64, u32, u32)> {
    let name = key.rsplit('/').next()?;
    let mut parts = name.split('_');
    let id: u64 = parts.next()?.parse().ok()?;
    let index: u32 = parts.next()?.parse().ok()?;
    let size: u32 = parts.next()?.parse().ok()?;
    // the whole key must be exactly the one block_key makes
    if parts.next().is_some() || block_key(volume, id, index, size) != key {
        return None;
    }
    Some((id, index, size))
}

/// Where every block of `volume` is kept: `{volume}/chunks/`.
pub fn blocks_prefix(volume: &str) -> String {
    format!("{volume}/chunks/")
}

/// The key of block `index` (of `size` bytes) of slice `id`:
/// `{volume}/chunks/{id/1000000}/{id/1000}/{id}_{index}_{size}`, as JuiceFS names them.
pub fn block_key(volume: &str, id: u64, index: u32, size: u32) -> String {
    format!(
        "{}{}/{}/{id}_{index}_{size}",
        blocks_prefix(volume),
        id / 1_000_000,
        id / 1_000
    )
}

/// Every block of slice `id` of `size` bytes: (index, length, key).
pub fn slice_blocks(
    volume: &str,
    id: u64,
    size: u32,
    block_size: u32,
) -> impl Iterator<Item = (u32, u32, String)> + '_ {
    (0..block_count(size, block_size)).map(move |index| {
        let len = block_len(size, block_size, index);
        (index, len, block_key(volume, id, index, len))
    })
}

/// A read of part of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRead {
    pub index: u32,
    pub block_len: u32,
    pub off: u32,
    pub len: u32,
}

/// Splits a read of `len` bytes at `off` of a slice into per-block reads.
pub fn block_reads(slice_size: u32, block_size: u32, off: u32, len: u32) -> Vec<BlockRead> {
    let mut reads = Vec::new();
    let mut at = off;
    let end = off + len;
    while at < end {
        let index = at / block_size;
        let in_block = at % block_size;
        let block_len = block_len(slice_size, block_size, index);
        let n = (block_len - in_block).min(end - at);
        reads.push(BlockRead {
            index,
            block_len,
            off: in_block,
            len: n,
        });
        at += n;
    }
    reads
}

/// The stored block of slice `id` when it is kept in the database (its
/// row in `rows` says so), for a reader to take instead of an object.
pub fn inline_block(rows: &[SliceRow], id: u64) -> Option<Bytes> {
    rows.iter()
        .rev()
        .find(|r| r.id == id && r.inline.is_some())
        .and_then(|r| r.inline.clone())
}

/// What a stretch of a chunk reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Never written, truncated away, or a hole: zeros.
    Zero,
    /// Bytes of slice `id` (stored size `size`) from offset `off` on.
    Slice { id: u64, size: u32, off: u32 },
}

impl Source {
    fn advanced(self, by: u32) -> Source {
        match self {
            Source::Zero => Source::Zero,
            Source::Slice { id, size, off } => Source::Slice {
                id,
                size,
                off: off + by,
            },
        }
    }
}

/// `[start, end)` of a chunk and where its bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub start: u32,
    pub end: u32,
    pub source: Source,
}

/// The visible layout of `[start, end)` of a chunk: the slices painted in
/// commit order, each over what was there before. The segments tile the
/// range in a map by start, so each slice costs O(log n) plus the segments
/// it covers: a chunk of 30,000 slices is laid out in milliseconds.
pub fn visible(slices: &[SliceRow], start: u32, end: u32) -> Vec<Segment> {
    use std::collections::BTreeMap;
    if start >= end {
        return Vec::new();
    }
    let mut tiles: BTreeMap<u32, (u32, Source)> = BTreeMap::new();
    tiles.insert(start, (end, Source::Zero));
    // cuts the tile that spans `at` in two, so that a tile starts at `at`
    let split = |tiles: &mut BTreeMap<u32, (u32, Source)>, at: u32| {
        if let Some((&s, &(e, source))) = tiles.range(..=at).next_back() {
            if s < at && at < e {
                tiles.insert(s, (at, source));
                tiles.insert(at, (e, source.advanced(at - s)));
            }
        }
    };
    for s in slices {
        let a = s.pos.max(start);
        let b = (s.pos + s.len).min(end);
        if a >= b {
            continue;
        }
        split(&mut tiles, a);
        split(&mut tiles, b);
        let covered: Vec<u32> = tiles.range(a..b).map(|(&k, _)| k).collect();
        for k in covered {
            tiles.remove(&k);
        }
        let source = if s.id == 0 {
            Source::Zero
        } else {
            Source::Slice {
                id: s.id,
                size: s.size,
                off: s.off + (a - s.pos),
            }
        };
        tiles.insert(a, (b, source));
    }
    tiles
        .into_iter()
        .map(|(start, (end, source))| Segment { start, end, source })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_end_at_the_largest_file_size() {
        assert_eq!(MAX_FILE_SIZE, (1 << 57) - 1);
        assert_eq!(fits_in_file(0, 10), Some(10));
        assert_eq!(fits_in_file(MAX_FILE_SIZE - 10, 10), Some(10));
        assert_eq!(fits_in_file(MAX_FILE_SIZE - 2, 3), Some(2));
        for past in [MAX_FILE_SIZE, MAX_FILE_SIZE + 1, 1 << 58, 1 << 63, u64::MAX] {
            assert_eq!(fits_in_file(past, 1), None, "at {past}");
        }
        // the last chunk's index is the largest PostgreSQL's integer holds
        let last = split_by_chunk(MAX_FILE_SIZE - 1, 1);
        assert_eq!(last[0].chunk, i32::MAX as u32);
        assert_eq!(last[0].pos as u64, CHUNK_SIZE - 2);
    }

    fn slice(pos: u32, id: u64, size: u32, off: u32, len: u32) -> SliceRow {
        SliceRow {
            pos,
            id,
            size,
            off,
            len,
            inline: None,
        }
    }

    #[test]
    fn ranges_split_at_chunk_boundaries() {
        assert_eq!(
            split_by_chunk(10, 100),
            vec![ChunkPiece {
                chunk: 0,
                pos: 10,
                len: 100,
                range_off: 0
            }]
        );
        let p = split_by_chunk(CHUNK_SIZE - 4, 10);
        assert_eq!(
            p,
            vec![
                ChunkPiece {
                    chunk: 0,
                    pos: (CHUNK_SIZE - 4) as u32,
                    len: 4,
                    range_off: 0
                },
                ChunkPiece {
                    chunk: 1,
                    pos: 0,
                    len: 6,
                    range_off: 4
                },
            ]
        );
        let p = split_by_chunk(3 * CHUNK_SIZE, (2 * CHUNK_SIZE) as usize);
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].chunk, p[1].chunk, p[1].range_off),
            (3, 4, CHUNK_SIZE as usize)
        );
        assert!(split_by_chunk(5, 0).is_empty());
    }

    #[test]
    fn blocks_of_a_slice() {
        assert_eq!(block_count(10, 4), 3);
        assert_eq!(block_count(8, 4), 2);
        assert_eq!((block_len(10, 4, 0), block_len(10, 4, 2)), (4, 2));
        assert_eq!(
            block_reads(10, 4, 3, 6),
            vec![
                BlockRead {
                    index: 0,
                    block_len: 4,
                    off: 3,
                    len: 1
                },
                BlockRead {
                    index: 1,
                    block_len: 4,
                    off: 0,
                    len: 4
                },
                BlockRead {
                    index: 2,
                    block_len: 2,
                    off: 0,
                    len: 1
                },
            ]
        );
    }

    #[test]
    fn later_slices_shadow_earlier_ones() {
        // 0..100 from slice 1, then 20..30 overwritten by slice 2
        let slices = [slice(0, 1, 100, 0, 100), slice(20, 2, 10, 0, 10)];
        assert_eq!(
            visible(&slices, 0, 120),
            vec![
                Segment {
                    start: 0,
                    end: 20,
                    source: Source::Slice {
                        id: 1,
                        size: 100,
                        off: 0
                    }
                },
                Segment {
                    start: 20,
                    end: 30,
                    source: Source::Slice {
                        id: 2,
                        size: 10,
                        off: 0
                    }
                },
                Segment {
                    start: 30,
                    end: 100,
                    source: Source::Slice {
                        id: 1,
                        size: 100,
                        off: 30
                    }
                },
                Segment {
                    start: 100,
                    end: 120,
                    source: Source::Zero
                },
            ]
        );
    }

    #[test]
    fn holes_and_windows() {
        // a write, then a truncate hole from 50 on, viewed through 40..60
        let slices = [slice(0, 7, 100, 0, 100), slice(50, 0, 0, 0, 50)];
        assert_eq!(
            visible(&slices, 40, 60),
            vec![
                Segment {
                    start: 40,
                    end: 50,
                    source: Source::Slice {
                        id: 7,
                        size: 100,
                        off: 40
                    }
                },
                Segment {
                    start: 50,
                    end: 60,
                    source: Source::Zero
                },
            ]
        );
        // a slice read from its middle (slice_off), partly outside the window
        let slices = [slice(10, 3, 1000, 500, 20)];
        assert_eq!(
            visible(&slices, 15, 40),
            vec![
                Segment {
                    start: 15,
                    end: 30,
                    source: Source::Slice {
                        id: 3,
                        size: 1000,
                        off: 505
                    }
                },
                Segment {
                    start: 30,
                    end: 40,
                    source: Source::Zero
                },
            ]
        );
        assert_eq!(
            visible(&[], 0, 8),
            vec![Segment {
                start: 0,
                end: 8,
                source: Source::Zero
            }]
        );
    }

    #[test]
    fn an_old_slice_split_in_three_keeps_its_offsets() {
        let slices = [
            slice(0, 1, 300, 0, 300),
            slice(100, 2, 50, 0, 50),
            slice(120, 3, 10, 0, 10),
        ];
        let v = visible(&slices, 0, 300);
        assert_eq!(v.len(), 5);
        assert_eq!(
            v[3],
            Segment {
                start: 130,
                end: 150,
                source: Source::Slice {
                    id: 2,
                    size: 50,
                    off: 30
                }
            }
        );
        assert_eq!(
            v[4],
            Segment {
                start: 150,
                end: 300,
                source: Source::Slice {
                    id: 1,
                    size: 300,
                    off: 150
                }
            }
        );
    }

    /// visible() against a painter that keeps, for every byte, the slice
    /// and offset it reads from: thousands of random slices and windows.
    #[test]
    fn visible_matches_painting_byte_by_byte() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = |n: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as u32
        };
        for _round in 0..50 {
            let span = 1 + rand(3000);
            let mut slices = Vec::new();
            let mut painted: Vec<Option<(u64, u32)>> = vec![None; span as usize];
            for i in 0..1 + rand(400) {
                let pos = rand(span);
                let len = 1 + rand(span - pos);
                let hole = rand(5) == 0;
                let id = if hole { 0 } else { i as u64 + 1 };
                let off = rand(50);
                slices.push(slice(pos, id, off + len, off, len));
                for b in pos..pos + len {
                    painted[b as usize] = (!hole).then_some((id, off + (b - pos)));
                }
            }
            let start = rand(span);
            let end = start + rand(span - start + 1);
            let segs = visible(&slices, start, end);
            let mut at = start;
            for seg in &segs {
                assert_eq!(seg.start, at, "segments tile the range");
                for b in seg.start..seg.end {
                    let got = match seg.source {
                        Source::Zero => None,
                        Source::Slice { id, off, .. } => Some((id, off + (b - seg.start))),
                    };
                    assert_eq!(got, painted[b as usize], "byte {b}");
                }
                at = seg.end;
            }
            assert_eq!(at.max(start), end.max(start));
        }
    }

    #[test]
    fn block_keys_follow_juicefs_layout() {
        assert_eq!(
            block_key("vol", 1, 0, 4194304),
            "vol/chunks/0/0/1_0_4194304"
        );
        assert_eq!(
            block_key("myjfs", 1234567, 3, 1000),
            "myjfs/chunks/1/1234/1234567_3_1000"
        );
    }

    #[test]
    fn block_keys_parse_back() {
        let key = block_key("vol", 12_345_678, 3, 4_194_304);
        assert_eq!(key, "vol/chunks/12/12345/12345678_3_4194304");
        assert_eq!(
            parse_block_key("vol", &key),
            Some((12_345_678, 3, 4_194_304))
        );
        assert_eq!(parse_block_key("other", &key), None);
        assert_eq!(
            parse_block_key("vol", "vol/chunks/0/0/7_0_4096.tmp.1.2"),
            None
        );
        assert_eq!(parse_block_key("vol", "vol/chunks/9/9/7_0_4096"), None);
        assert_eq!(parse_block_key("vol", "vol/chunks/0/0/7_0"), None);
    }

    #[test]
    fn a_slice_is_listed_block_by_block() {
        let blocks: Vec<_> = slice_blocks("v", 5, 10_000, 4096).collect();
        assert_eq!(
            blocks,
            vec![
                (0, 4096, "v/chunks/0/0/5_0_4096".to_string()),
                (1, 4096, "v/chunks/0/0/5_1_4096".to_string()),
                (2, 1808, "v/chunks/0/0/5_2_1808".to_string()),
            ]
        );
        assert_eq!(slice_blocks("v", 5, 0, 4096).count(), 0);
    }
}
