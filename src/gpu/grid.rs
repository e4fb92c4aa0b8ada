//! SDF grids sampled on the device (`GRID_SAMPLES`, shaders/grid_samples.wgsl): a chunk is a
//! box of the grid whose rows are contiguous in C order (whole x-planes, or whole z-rows of
//! one plane), and its samples are walked in bricks of 64 so the lanes of a subgroup and the
//! seeded rounds stay close together; each answer is written at its C-order row. The host
//! uploads 16 words a chunk instead of 12 bytes a sample. A narrow band lists its boxes
//! instead (`GridRows::Boxes`): 24 bytes for 8 rows.

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

/// A grid job's rows as the device makes them (`GRID_SAMPLES`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GridRows {
    /// Every sample of a grid, in chunks of whole planes or z-rows, answers in C order.
    Dense(GridSamples),
    /// Eight rows a listed box (`box_record`, in the points buffer): the centres of its
    /// 2 × 2 × 2 tiles of `tile` samples a side, in Morton order, answers in row order, each
    /// walk from the box's start node and within its bound.
    Boxes {
        origin: [f32; 3],
        spacing: [f32; 3],
        tile: u32,
    },
}

/// Rows a listed box makes.
pub const ROWS_PER_BOX: usize = 8;

/// Floats of a listed box's record (`box_record`).
pub const BOX_RECORD_FLOATS: usize = 6;

/// A listed box as the device reads it: its first sample, its extents (at most 255 a side,
/// a byte each) and the node its rows' walks start at, counted from the root
/// (`bvh::TopNodes::start_node`: below 2^12), as floats (exact below 2^24,
/// `grid_samples.wgsl`); then the square of `bound` (rounded up), the distance beyond which
/// its rows need no answer: walks open nothing farther, and a row with no triangle that near
/// answers +∞ with no shape (0: every answer).
pub fn box_record(
    first: [usize; 3],
    extent: [usize; 3],
    start_node: u32,
    bound: f64,
) -> [f32; BOX_RECORD_FLOATS] {
    debug_assert!(extent.iter().all(|&e| (1..256).contains(&e)));
    debug_assert!(start_node < 1 << 24);
    let packed = extent[0] | extent[1] << 8 | extent[2] << 16;
    [
        first[0] as f32,
        first[1] as f32,
        first[2] as f32,
        packed as f32,
        start_node as f32,
        crate::math::f32_up(bound * bound),
    ]
}

/// Whether a grid of `res` samples a side can list its boxes (`box_record`'s floats are exact).
pub fn lists_boxes(res: [usize; 3]) -> bool {
    res.iter().all(|&n| n < 1 << 24)
}

impl GridRows {
    /// The `GRID_SAMPLES` override.
    pub fn mode(&self) -> u32 {
        match self {
            GridRows::Dense(_) => 1,
            GridRows::Boxes { .. } => 2,
        }
    }

    /// The chunks of a job of `rows` rows, in row order (listed boxes: whole boxes a chunk).
    pub fn chunks(&self, chunk_rows: usize, rows: usize) -> Vec<Range<usize>> {
        match self {
            GridRows::Dense(grid) => grid.chunks(chunk_rows),
            GridRows::Boxes { .. } => {
                let step = (chunk_rows / ROWS_PER_BOX).max(1) * ROWS_PER_BOX;
                (0..rows)
                    .step_by(step)
                    .map(|start| start..(start + step).min(rows))
                    .collect()
            }
        }
    }

    /// Invocations a chunk of `rows` dispatches.
    pub fn threads(&self, rows: &Range<usize>) -> usize {
        match self {
            GridRows::Dense(grid) => grid.threads(rows),
            GridRows::Boxes { .. } => rows.len(),
        }
    }

    /// Bytes of a chunk's points buffer the host fills: none for a dense chunk, its boxes'
    /// records for listed ones.
    pub fn point_bytes(&self, rows: &Range<usize>) -> u64 {
        match self {
            GridRows::Dense(_) => 0,
            GridRows::Boxes { .. } => {
                (rows.len().div_ceil(ROWS_PER_BOX) * 4 * BOX_RECORD_FLOATS) as u64
            }
        }
    }

    /// The header of a chunk of `rows` (shaders/grid_samples.wgsl reads the same words).
    pub fn header(&self, rows: &Range<usize>) -> [u32; HEADER_WORDS] {
        match self {
            GridRows::Dense(grid) => grid.header(rows),
            GridRows::Boxes {
                origin,
                spacing,
                tile,
            } => {
                let mut header = [0; HEADER_WORDS];
                for a in 0..3 {
                    header[a] = origin[a].to_bits();
                    header[4 + a] = spacing[a].to_bits();
                }
                header[8] = *tile;
                header
            }
        }
    }
}
