//! Query coherence: a chunk's points (or a body job's bodies) are dispatched in Morton order,
//! so neighbouring invocations walk the BVH along similar paths, and the results are put back
//! in row order on the way out (measured in docs/perf-history.md and docs/PERF.md).

use std::ops::Range;

use super::layout::GpuShape;
use super::rows::RowSource;
use crate::error::Result;

/// 30-bit Morton code of `p` inside the box `[lo, hi]` (10 bits an axis); points outside
/// (or NaN) are clamped to its faces.
pub fn morton_code(p: [f32; 3], lo: [f32; 3], hi: [f32; 3]) -> u32 {
    MortonBox::new(lo, hi).code(p)
}

/// A box's Morton cells: the per-axis scale worked out once for a chunk's points.
struct MortonBox {
    lo: [f32; 3],
    cells_per_unit: [f32; 3],
}

impl MortonBox {
    fn new(lo: [f32; 3], hi: [f32; 3]) -> MortonBox {
        let scale = |k: usize| {
            let extent = hi[k] - lo[k];
            if extent > 0.0 { 1023.0 / extent } else { 0.0 }
        };
        MortonBox {
            lo,
            cells_per_unit: [scale(0), scale(1), scale(2)],
        }
    }

    fn code(&self, p: [f32; 3]) -> u32 {
        let spread = |v: u32| {
            let mut x = v & 0x3ff;
            x = (x | (x << 16)) & 0x0300_00ff;
            x = (x | (x << 8)) & 0x0300_f00f;
            x = (x | (x << 4)) & 0x030c_30c3;
            (x | (x << 2)) & 0x0924_9249
        };
        // `as` maps NaN to 0.
        let cell =
            |k: usize| ((p[k] - self.lo[k]) * self.cells_per_unit[k]).clamp(0.0, 1023.0) as u32;
        spread(cell(0)) | (spread(cell(1)) << 1) | (spread(cell(2)) << 2)
    }
}

/// Bits of a Morton code sorted by each pass of [`sort_by_code`], and the passes its 30 bits
/// take.
const DIGIT_BITS: u32 = 10;
const PASSES: usize = (30 / DIGIT_BITS) as usize;

/// `keys` (a 30-bit code above each index) in ascending order, `spare` as scratch: a
/// least-significant-digit radix sort, three passes of 10 bits, stable, so equal codes keep
/// their index order (the order `sort_unstable` gave these unique keys).
fn sort_by_code(keys: &mut Vec<u64>, spare: &mut Vec<u64>) {
    const BUCKETS: usize = 1 << DIGIT_BITS;
    let digit = |key: u64, pass: u32| ((key >> (32 + pass * DIGIT_BITS)) as usize) & (BUCKETS - 1);
    let mut counts = vec![[0usize; BUCKETS]; PASSES];
    for &key in keys.iter() {
        for (pass, count) in counts.iter_mut().enumerate() {
            count[digit(key, pass as u32)] += 1;
        }
    }
    spare.clear();
    spare.resize(keys.len(), 0);
    for (pass, count) in counts.iter_mut().enumerate() {
        let mut start = 0;
        for bucket in count.iter_mut() {
            let n = *bucket;
            *bucket = start;
            start += n;
        }
        for &key in keys.iter() {
            let bucket = &mut count[digit(key, pass as u32)];
            spare[*bucket] = key;
            *bucket += 1;
        }
        std::mem::swap(keys, spare);
    }
}

/// Rows of `W` words from `words` written to `out` at the rows `order` names.
fn scatter_rows<const W: usize>(words: &[u32], order: &[u32], out: &mut [u32]) {
    let out: &mut [[u32; W]] = bytemuck::cast_slice_mut(out);
    let rows: &[[u32; W]] = bytemuck::cast_slice(words);
    for (row, &original) in rows.iter().zip(order) {
        out[original as usize] = *row;
    }
}

/// One chunk's reordering, kept by its slot from fill to drain.
#[derive(Default)]
pub(crate) struct Reorder {
    /// Dispatch position k holds the chunk's row `order[k]`; empty when not reordered.
    order: Vec<u32>,
    points: Vec<[f32; 3]>,
    records: Vec<GpuShape>,
    keys: Vec<u64>,
    spare_keys: Vec<u64>,
    rows: Vec<u32>,
}

impl Reorder {
    /// Read rows `range` from `source`, sort them along the Morton curve of their bounding box
    /// and write them to `out` in that order.
    pub fn fill_sorted(
        &mut self,
        source: &mut dyn RowSource,
        range: Range<usize>,
        out: wgpu::WriteOnly<'_, [u8]>,
    ) -> Result<()> {
        read_rows(&mut self.points, source, range)?;
        self.sort_points();
        write_in_order::<_, 12>(&self.order, &self.points, out);
        Ok(())
    }

    /// [`Reorder::fill_sorted`] for rows of shape records (a body job's bodies), sorted by
    /// their anchors.
    pub fn fill_sorted_records(
        &mut self,
        source: &mut dyn RowSource,
        range: Range<usize>,
        out: wgpu::WriteOnly<'_, [u8]>,
    ) -> Result<()> {
        read_rows(&mut self.records, source, range)?;
        self.points.clear();
        self.points.extend(
            self.records
                .iter()
                .map(|r| [r.anchor[0], r.anchor[1], r.anchor[2]]),
        );
        self.sort_points();
        write_in_order::<_, { std::mem::size_of::<GpuShape>() }>(&self.order, &self.records, out);
        Ok(())
    }

    /// `order` from `points`: along the Morton curve of their (finite) bounding box.
    fn sort_points(&mut self) {
        let (mut lo, mut hi) = ([f32::MAX; 3], [f32::MIN; 3]);
        for p in self
            .points
            .iter()
            .filter(|p| p.iter().all(|x| x.is_finite()))
        {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let cells = MortonBox::new(lo, hi);
        self.keys.clear();
        self.keys.extend(
            self.points
                .iter()
                .enumerate()
                .map(|(i, &p)| (u64::from(cells.code(p)) << 32) | i as u64),
        );
        sort_by_code(&mut self.keys, &mut self.spare_keys);
        self.order.clear();
        self.order.extend(self.keys.iter().map(|&key| key as u32));
    }

    /// Output rows of `row_words` each, back in row order; unchanged when not reordered.
    pub fn restore<'a>(&'a mut self, words: &'a [u32], row_words: usize) -> &'a [u32] {
        if self.order.is_empty() || row_words == 0 {
            return words;
        }
        self.rows.resize(words.len(), 0);
        // Rows of a known width copy as whole arrays, not through `memmove` calls.
        let (order, out) = (&self.order, &mut self.rows[..]);
        match row_words {
            1 => scatter_rows::<1>(words, order, out),
            2 => scatter_rows::<2>(words, order, out),
            3 => scatter_rows::<3>(words, order, out),
            4 => scatter_rows::<4>(words, order, out),
            5 => scatter_rows::<5>(words, order, out),
            6 => scatter_rows::<6>(words, order, out),
            7 => scatter_rows::<7>(words, order, out),
            8 => scatter_rows::<8>(words, order, out),
            _ => {
                for (row, &original) in words.chunks_exact(row_words).zip(order) {
                    let at = original as usize * row_words;
                    out[at..at + row_words].copy_from_slice(row);
                }
            }
        }
        &self.rows
    }

    /// Forget the last chunk's order (the next chunk goes in row order).
    pub fn clear(&mut self) {
        self.order.clear();
    }
}

/// Rows `range` of `source` into `rows`, as they come.
fn read_rows<T: bytemuck::Pod>(
    rows: &mut Vec<T>,
    source: &mut dyn RowSource,
    range: Range<usize>,
) -> Result<()> {
    rows.clear();
    rows.resize(range.len(), T::zeroed());
    source.fill(
        range,
        wgpu::WriteOnly::from(bytemuck::cast_slice_mut::<_, u8>(&mut rows[..])),
    )
}

/// `rows` (of `N` bytes each) into `out` in dispatch order: position k gets row `order[k]`.
fn write_in_order<T: bytemuck::Pod, const N: usize>(
    order: &[u32],
    rows: &[T],
    out: wgpu::WriteOnly<'_, [u8]>,
) {
    let (chunks, _) = out.into_chunks::<N>();
    chunks.write_iter(
        order
            .iter()
            .map(|&i| bytemuck::cast::<T, [u8; N]>(rows[i as usize])),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_orders_codes_as_a_comparison_sort_does() {
        // Few distinct codes, so many ties (which must keep their index order), and the
        // extremes of every digit.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let codes: Vec<u32> = (0..5000)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                match i % 5 {
                    0 => 0,
                    1 => (1 << 30) - 1,
                    _ => (state as u32 >> 2) & 0x3030_0c03,
                }
            })
            .collect();
        let mut keys: Vec<u64> = codes
            .iter()
            .enumerate()
            .map(|(i, &c)| (u64::from(c) << 32) | i as u64)
            .collect();
        let mut expected = keys.clone();
        expected.sort_unstable();
        sort_by_code(&mut keys, &mut Vec::new());
        assert_eq!(keys, expected);
    }

    #[test]
    fn rows_go_back_to_the_order_they_came_in() {
        for row_words in [1, 3, 8, 11] {
            let order = [2u32, 0, 3, 1];
            let dispatched: Vec<u32> = order
                .iter()
                .flat_map(|&row| (0..row_words as u32).map(move |w| 100 * row + w))
                .collect();
            let mut reorder = Reorder {
                order: order.to_vec(),
                ..Reorder::default()
            };
            let restored = reorder.restore(&dispatched, row_words);
            let expected: Vec<u32> = (0..4u32)
                .flat_map(|row| (0..row_words as u32).map(move |w| 100 * row + w))
                .collect();
            assert_eq!(restored, expected, "{row_words} words a row");
        }
    }
}
