//! SDF grids sampled on the device (`GRID_SAMPLES`, shaders/grid_samples.wgsl): a chunk is a
//! box of the grid whose rows are contiguous in C order (whole x-planes, or whole z-rows of
//! one plane), and its samples are walked in bricks of 64 so the lanes of a subgroup and the
//! seeded rounds stay close together; each answer is written at its C-order row. The host
//! uploads 16 words a chunk instead of 12 bytes a sample.

use std::ops::Range;

/// Samples a brick holds: 4 × 4 × 4, or 1 × 8 × 8 in a chunk thinner than 4 planes.
const BRICK: usize = 64;

/// Words of a chunk's header (`grid_samples.wgsl`).
pub const HEADER_WORDS: usize = 16;

/// A grid as the device samples it: `res` samples an axis, sample (i, j, k) at
/// `origin + (i, j, k) * spacing`, already moved like the mesh and rounded to f32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridSamples {
    pub origin: [f32; 3],
    pub spacing: [f32; 3],
    pub res: [usize; 3],
}

/// A chunk's box: planes `i0 .. i0 + di`, rows `j0 .. j0 + dj` of each, every z-sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChunkBox {
    i0: usize,
    j0: usize,
    di: usize,
    dj: usize,
}

impl GridSamples {
    /// Whether chunks of at most `chunk_rows` rows can be boxes (a z-row fits one).
    pub fn fits(&self, chunk_rows: usize) -> bool {
        self.res[2] <= chunk_rows
    }

    /// The chunks, in row order: as many whole planes as fit `chunk_rows`, or where one plane
    /// does not, as many whole z-rows of one plane.
    pub fn chunks(&self, chunk_rows: usize) -> Vec<Range<usize>> {
        let [nx, ny, nz] = self.res;
        let plane = ny * nz;
        let mut chunks = Vec::new();
        if plane <= chunk_rows {
            let planes = chunk_rows / plane;
            for i in (0..nx).step_by(planes) {
                chunks.push(i * plane..(i + planes).min(nx) * plane);
            }
        } else {
            let rows = (chunk_rows / nz).max(1);
            for i in 0..nx {
                for j in (0..ny).step_by(rows) {
                    chunks.push((i * ny + j) * nz..(i * ny + (j + rows).min(ny)) * nz);
                }
            }
        }
        chunks
    }

    fn chunk_box(&self, rows: &Range<usize>) -> ChunkBox {
        let [_, ny, nz] = self.res;
        let (first, last) = (rows.start / nz, (rows.end - 1) / nz);
        let (i0, j0) = (first / ny, first % ny);
        let (i1, j1) = (last / ny, last % ny);
        if i0 == i1 {
            ChunkBox {
                i0,
                j0,
                di: 1,
                dj: j1 + 1 - j0,
            }
        } else {
            ChunkBox {
                i0,
                j0: 0,
                di: i1 + 1 - i0,
                dj: ny,
            }
        }
    }

    /// log2 of a brick's extent along x: 4 × 4 × 4 bricks in boxes of 4 planes or more,
    /// 1 × 8 × 8 in thinner ones.
    fn brick_i_bits(chunk: ChunkBox) -> u32 {
        if chunk.di >= 4 { 2 } else { 0 }
    }

    /// Bricks of `chunk` along y and z.
    fn bricks_jk(&self, chunk: ChunkBox) -> [usize; 2] {
        let side = 1usize << ((6 - Self::brick_i_bits(chunk)) / 2);
        [chunk.dj.div_ceil(side), self.res[2].div_ceil(side)]
    }

    /// Invocations a chunk of `rows` dispatches: whole bricks, some of them partly outside.
    pub fn threads(&self, rows: &Range<usize>) -> usize {
        let chunk = self.chunk_box(rows);
        let depth = 1usize << Self::brick_i_bits(chunk);
        let [bj, bk] = self.bricks_jk(chunk);
        chunk.di.div_ceil(depth) * bj * bk * BRICK
    }

    /// The header of a chunk of `rows` (shaders/grid_samples.wgsl reads the same words).
    pub fn header(&self, rows: &Range<usize>) -> [u32; HEADER_WORDS] {
        let chunk = self.chunk_box(rows);
        let [bj, bk] = self.bricks_jk(chunk);
        let f = f32::to_bits;
        let u = |x: usize| x as u32;
        [
            f(self.origin[0]),
            f(self.origin[1]),
            f(self.origin[2]),
            u(self.res[1]),
            f(self.spacing[0]),
            f(self.spacing[1]),
            f(self.spacing[2]),
            u(self.res[2]),
            u(chunk.i0),
            u(chunk.j0),
            u(chunk.di),
            u(chunk.dj),
            Self::brick_i_bits(chunk),
            u(bj),
            u(bk),
            0,
        ]
    }
}
