//! A block's bytes being assembled for upload: aligned for direct I/O, grown as writes fill it, frozen without a copy, counted in the metrics while held.
use bytes::Bytes;

use crate::metrics::Charge;

/// Where a block's bytes start in its buffer: a 4 KiB boundary, so a whole
/// block can be stored with direct I/O (see the file store).
pub(super) const BLOCK_ALIGN: usize = 4096;

/// The first allocation of a slice's buffer at least (it doubles as it
/// fills, up to the block size).
const FIRST_BUFFER: usize = 4 << 10;

/// Buffers from this size on start at a [`BLOCK_ALIGN`] boundary (a whole
/// block is stored from one); smaller ones are only ever a slice's last
/// block.
const ALIGNED_FROM: usize = 64 << 10;

/// The bytes of one block being assembled, starting at an aligned address
/// inside their allocation (as long as they stay within its capacity).
#[derive(Default)]
pub(super) struct BlockBuf {
    vec: Vec<u8>,
    start: usize,
    /// The allocation, counted in the metrics' write buffer bytes until
    /// the block is uploaded.
    charge: Charge,
}

impl BlockBuf {
    pub(super) fn with_capacity(capacity: usize) -> BlockBuf {
        if capacity < ALIGNED_FROM {
            let vec: Vec<u8> = Vec::with_capacity(capacity);
            let charge = Charge::write_buffer(vec.capacity());
            return BlockBuf {
                vec,
                start: 0,
                charge,
            };
        }
        let mut vec: Vec<u8> = Vec::with_capacity(capacity + BLOCK_ALIGN);
        let start = vec.as_ptr().align_offset(BLOCK_ALIGN).min(BLOCK_ALIGN);
        vec.resize(start, 0);
        let charge = Charge::write_buffer(vec.capacity());
        BlockBuf { vec, start, charge }
    }

    pub(super) fn is_allocated(&self) -> bool {
        self.vec.capacity() > 0
    }

    pub(super) fn len(&self) -> usize {
        self.vec.len() - self.start
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn data(&self) -> &[u8] {
        &self.vec[self.start..]
    }

    pub(super) fn extend(&mut self, bytes: &[u8]) {
        self.vec.extend_from_slice(bytes);
    }

    /// Puts `bytes` at `at` (at most its length: over its bytes or right
    /// after them), growing the allocation (aligned, doubling, to at least
    /// [`FIRST_BUFFER`] and at most `max` unless the bytes need more).
    pub(super) fn put(&mut self, at: usize, bytes: &[u8], max: usize) {
        debug_assert!(at <= self.len());
        let needed = at + bytes.len();
        if self.start + needed > self.vec.capacity() || !self.is_allocated() {
            let capacity = (self.len() * 2).max(FIRST_BUFFER).min(max).max(needed);
            let mut grown = BlockBuf::with_capacity(capacity);
            grown.extend(self.data());
            *self = grown;
        }
        let overlap = bytes.len().min(self.len() - at);
        let start = self.start + at;
        self.vec[start..start + overlap].copy_from_slice(&bytes[..overlap]);
        self.vec.extend_from_slice(&bytes[overlap..]);
    }

    pub(super) fn truncate(&mut self, len: usize) {
        self.vec.truncate(self.start + len);
    }

    /// The bytes, without a copy, and their charge (dropped once uploaded).
    pub(super) fn freeze(self) -> (Bytes, Charge) {
        let start = self.start;
        (Bytes::from(self.vec).slice(start..), self.charge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_buffers_are_aligned_and_keep_their_bytes() {
        let mut b = BlockBuf::with_capacity(ALIGNED_FROM);
        b.extend(&[1u8; 5000]);
        b.extend(&[2u8; 5000]);
        assert_eq!(b.len(), 10_000);
        b.truncate(6000);
        assert_eq!(&b.data()[4998..5002], &[1, 1, 2, 2]);
        let (frozen, _charge) = b.freeze();
        assert_eq!(frozen.len(), 6000);
        assert!((frozen.as_ptr() as usize).is_multiple_of(BLOCK_ALIGN));
        assert!(!BlockBuf::default().is_allocated());
    }

    #[test]
    fn a_buffer_grows_with_what_is_put_in_it() {
        const BLOCK: usize = 4 << 20;
        let mut b = BlockBuf::default();
        b.put(0, &[1u8; 4096], BLOCK);
        // a 4 KiB write holds about 4 KiB, not a block
        assert!(b.vec.capacity() < 2 * FIRST_BUFFER, "{}", b.vec.capacity());
        b.put(4096, &[2u8; 100], BLOCK);
        b.put(10, &[3u8; 10], BLOCK);
        b.put(4000, &[4u8; 200], BLOCK);
        assert_eq!(b.len(), 4200);
        assert_eq!(&b.data()[8..12], &[1, 1, 3, 3]);
        assert_eq!(&b.data()[3999..4001], &[1, 4]);
        assert_eq!(&b.data()[4199..4200], &[4]);
        // grown to a block, it starts aligned (it is stored whole)
        b.put(4200, &vec![5u8; BLOCK - 4200], BLOCK);
        assert_eq!(b.len(), BLOCK);
        assert!((b.data().as_ptr() as usize).is_multiple_of(BLOCK_ALIGN));
        assert_eq!(&b.data()[4199..4201], &[4, 5]);
    }
}
