//! Query coherence: a chunk's points are dispatched in Morton order, so neighbouring
//! invocations walk the BVH along similar paths, and the results are put back in row order
//! on the way out (measured in docs/PERF.md).

use std::ops::Range;

use super::rows::RowSource;
use crate::error::Result;

/// 30-bit Morton code of `p` inside the box `[lo, hi]` (10 bits an axis); points outside
/// (or NaN) are clamped to its faces.
pub fn morton_code(p: [f32; 3], lo: [f32; 3], hi: [f32; 3]) -> u32 {
    let spread = |v: u32| {
        let mut x = v & 0x3ff;
        x = (x | (x << 16)) & 0x0300_00ff;
        x = (x | (x << 8)) & 0x0300_f00f;
        x = (x | (x << 4)) & 0x030c_30c3;
        (x | (x << 2)) & 0x0924_9249
    };
    let cell = |k: usize| {
        let extent = hi[k] - lo[k];
        let t = if extent > 0.0 {
            (p[k] - lo[k]) / extent
        } else {
            0.0
        };
        // `as` maps NaN to 0.
        (t.clamp(0.0, 1.0) * 1023.0) as u32
    };
    spread(cell(0)) | (spread(cell(1)) << 1) | (spread(cell(2)) << 2)
}

/// One chunk's reordering, kept by its slot from fill to drain.
#[derive(Default)]
pub(crate) struct Reorder {
    /// Dispatch position k holds the chunk's row `order[k]`; empty when not reordered.
    order: Vec<u32>,
    points: Vec<[f32; 3]>,
    keys: Vec<u64>,
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
        self.points.clear();
        self.points.resize(range.len(), [0.0; 3]);
        source.fill(
            range,
            wgpu::WriteOnly::from(bytemuck::cast_slice_mut::<_, u8>(&mut self.points[..])),
        )?;
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
        self.keys.clear();
        self.keys.extend(
            self.points
                .iter()
                .enumerate()
                .map(|(i, &p)| (u64::from(morton_code(p, lo, hi)) << 32) | i as u64),
        );
        self.keys.sort_unstable();
        self.order.clear();
        self.order.extend(self.keys.iter().map(|&key| key as u32));
        let (rows, _) = out.into_chunks::<12>();
        rows.write_iter(
            self.order
                .iter()
                .map(|&i| bytemuck::cast::<[f32; 3], [u8; 12]>(self.points[i as usize])),
        );
        Ok(())
    }

    /// Output rows of `row_words` each, back in row order; unchanged when not reordered.
    pub fn restore<'a>(&'a mut self, words: &'a [u32], row_words: usize) -> &'a [u32] {
        if self.order.is_empty() || row_words == 0 {
            return words;
        }
        self.rows.resize(words.len(), 0);
        for (row, &original) in words.chunks_exact(row_words).zip(&self.order) {
            let at = original as usize * row_words;
            self.rows[at..at + row_words].copy_from_slice(row);
        }
        &self.rows
    }

    /// Forget the last chunk's order (the next chunk goes in row order).
    pub fn clear(&mut self) {
        self.order.clear();
    }
}
