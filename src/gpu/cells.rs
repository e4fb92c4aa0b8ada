//! Candidate lists per grid cell of a resident scene (issue 16): for each cell of a uniform
//! grid around the scene's bounded shapes, every shape that can be the nearest (or tied with
//! it) to a point in the cell, grouped by kind. A query in the grid tests its cell's list, in
//! one tight loop per kind, instead of walking the BVH (whose node steps were three quarters
//! of a scene query on lavapipe, docs/perf-history.md); points outside the grid walk as before.
//!
//! Why a list holds the answer: the unsigned distance to the nearest shape, D, is 1-Lipschitz
//! (in both modes), so at any point of a cell D ≤ U = d(centre, s) + half the cell's diagonal
//! for any shape s, and only shapes whose box lies within U of the cell can reach D. d(centre,
//! s) is bounded by the farthest corner of s's box (s lies in it): boxes alone decide, so no
//! shape's geometry is needed here (the exact distance listed no fewer shapes that mattered:
//! docs/perf-history.md). The
//! bounds are taken in f64 with `slack` added, which covers the f32 error of the kernel's
//! distances and of its cell lookup, so every shape the walk could answer with (ties
//! included) is listed, and the answers are the walk's bit for bit.

use rayon::prelude::*;

use crate::bvh::shape_bounds;
use crate::shape::{Shape, ShapeKind};

/// The first word of `shape_data` when it holds cell lists (query_walk.wgsl, `scan_cells`).
pub(crate) const CELLS_MAGIC: u32 = 0xCE11_CE11;
/// Header words before the cells: magic, the grid's low corner (3 f32), cells per unit
/// length (f32), dims (3), the first cell word, the first entry word, the bounds' unit (f32),
/// 1 unused.
pub const HEADER_WORDS: usize = 12;
/// A cell is its first entry and then the ends of its kinds' runs, a byte each, four to a
/// word: two words for a BVH of at most four kinds, three for up to `MAX_KINDS`
/// (`words_per_cell`; the kernel derives the same from `BVH_KINDS`). A list holds at most 255
/// shapes; a cell whose list would be longer has `WALK` as its first entry (its points walk
/// the BVH).
pub const MAX_KINDS: u32 = 8;
const MAX_LIST: usize = 255;
pub(crate) const WALK: u32 = u32::MAX;
/// An entry: the shape's storage index in the low `INDEX_BITS` and a lower bound on its
/// distance from the cell, in `BOUND_UNITS_PER_CELL`ths of a cell and rounded down, above
/// them. Each kind's run is sorted by that bound, so a query leaves the run at the first
/// entry farther than its best answer (`beyond_best` in query_walk.wgsl).
pub(crate) const INDEX_BITS: u32 = 17;
const MAX_BOUND: u32 = (1 << (32 - INDEX_BITS)) - 1;
const BOUND_UNITS_PER_CELL: f64 = 128.0;
const _: () = assert!(MAX_CELLS / MIN_CELLS_PER_SHAPE < 1 << INDEX_BITS);
/// Cells at most (about 68 MiB of lists for the bench's 10^5 shapes), and at most this many
/// per shape: beyond a few thousand a shape, finer cells shorten no list.
const MAX_CELLS: usize = 96 * 96 * 96;
const CELLS_PER_SHAPE: usize = 1024;
/// Scenes denser than a shape per this many cells of the finest grid walk their BVH: their
/// lists would be longer than the walk's few leaves.
const MIN_CELLS_PER_SHAPE: usize = 8;
/// The grid reaches this fraction of the scene's largest extent beyond its box on each side.
const MARGIN: f64 = 0.125;
/// Blocks of at most this many cells are split further on a thread each.
const BLOCK_CELLS: usize = 4096;

type Box3 = ([f64; 3], [f64; 3]);
/// Cells `lo..hi` per axis.
type CellRange = ([usize; 3], [usize; 3]);

struct Candidate {
    /// Index of the record in the scene's storage order (the kernel's `load_shape`).
    storage: u32,
    /// The kind's run within a cell (the kind's rank among the BVH's kinds).
    slot: u8,
    bounds: Box3,
}

/// Words a cell takes for a BVH of `bvh_kinds` (query_walk.wgsl, `scan_cells`).
fn words_per_cell(bvh_kinds: u32) -> usize {
    if bvh_kinds.count_ones() > 4 { 3 } else { 2 }
}

/// Squared distance from box `b` to box `c` (0 where they overlap).
fn box_gap2(b: &Box3, c: &Box3) -> f64 {
    let gap = |k: usize| (c.0[k] - b.1[k]).max(b.0[k] - c.1[k]).max(0.0);
    let (x, y, z) = (gap(0), gap(1), gap(2));
    x * x + y * y + z * z
}

/// The largest squared distance from point `p` to box `c`.
fn farthest2(p: [f64; 3], c: &Box3) -> f64 {
    let far = |k: usize| (p[k] - c.0[k]).abs().max((c.1[k] - p[k]).abs());
    let (x, y, z) = (far(0), far(1), far(2));
    x * x + y * y + z * z
}

/// The grid: its low corner, cell size and cells per axis.
struct CellGrid {
    lo: [f64; 3],
    cell: f64,
    /// Added to every bound (see the module's comment).
    slack: f64,
}

impl CellGrid {
    /// Box of cells `lo..hi` (per axis), grown by the slack.
    fn cells_box(&self, lo: [usize; 3], hi: [usize; 3]) -> Box3 {
        self.grown_cells_box(lo, hi, self.slack)
    }

    fn grown_cells_box(&self, lo: [usize; 3], hi: [usize; 3], by: f64) -> Box3 {
        (
            std::array::from_fn(|k| self.lo[k] + lo[k] as f64 * self.cell - by),
            std::array::from_fn(|k| self.lo[k] + hi[k] as f64 * self.cell + by),
        )
    }

    /// A lower bound, in `unit`s, on the kernel's distance to `c` from any point it looks up
    /// in cell `ijk`: the gap from the cell grown by the slack twice (once for the lookup,
    /// once for the distance's f32 error), rounded down.
    fn bound_units(&self, ijk: [usize; 3], c: &Candidate, unit: f64) -> u32 {
        let cell = self.grown_cells_box(ijk, ijk.map(|i| i + 1), 2.0 * self.slack);
        let units = box_gap2(&cell, &c.bounds).sqrt() / unit * (1.0 - 1e-6);
        (units.floor() as u32).min(MAX_BOUND)
    }

    /// The candidates that may be nearest to a point of box `b`.
    fn filter<'a>(&self, b: &Box3, candidates: &[&'a Candidate]) -> Vec<&'a Candidate> {
        let centre: [f64; 3] = std::array::from_fn(|k| 0.5 * (b.0[k] + b.1[k]));
        let half_diagonal = farthest2(centre, b).sqrt();
        // Every shape lies in its box, so its farthest corner bounds its distance.
        let bound2 = candidates
            .iter()
            .map(|c| farthest2(centre, &c.bounds))
            .fold(f64::INFINITY, f64::min);
        let reach = bound2.sqrt() + half_diagonal + self.slack;
        let reach2 = reach * reach;
        candidates
            .iter()
            .filter(|c| box_gap2(b, &c.bounds) <= reach2)
            .copied()
            .collect()
    }

    /// Splits cells `lo..hi` (per axis) in halves, narrowing the candidates on the way, until
    /// blocks of at most `cells` cells; `leaf` takes each block and its candidates.
    fn split<'a>(
        &self,
        (lo, hi): CellRange,
        candidates: &[&'a Candidate],
        cells: usize,
        leaf: &mut dyn FnMut(CellRange, Vec<&'a Candidate>),
    ) {
        let candidates = self.filter(&self.cells_box(lo, hi), candidates);
        let sizes: [usize; 3] = std::array::from_fn(|k| hi[k] - lo[k]);
        if sizes.iter().product::<usize>() <= cells {
            leaf((lo, hi), candidates);
            return;
        }
        let axis = (0..3).max_by_key(|&k| sizes[k]).unwrap_or(0);
        let mid = lo[axis] + sizes[axis] / 2;
        let (mut upper_lo, mut lower_hi) = (lo, hi);
        upper_lo[axis] = mid;
        lower_hi[axis] = mid;
        self.split((lo, lower_hi), &candidates, cells, leaf);
        self.split((upper_lo, hi), &candidates, cells, leaf);
    }
}

/// `shape_data`'s words for a scene's cell lists, or `None` where the scene does not suit them
/// (no BVH, hulls or more than `MAX_KINDS` kinds in it, too many shapes, a grid finer than
/// f32 resolves, lists over `binding_bytes`).
/// `bvh` holds the storage order's user indices of the BVH's shapes.
pub fn cell_lists(
    shapes: &[Shape],
    bvh: &[u32],
    bvh_kinds: u32,
    binding_bytes: u64,
) -> Option<Vec<u32>> {
    // A hull's faces are loaded by the subgroup's lanes together (query_subgroup.wgsl),
    // which a cell list's lanes, each on its own shape, cannot do.
    let hulls = bvh_kinds & (1 << ShapeKind::ConvexHull as u32) != 0;
    if bvh.is_empty()
        || hulls
        || bvh_kinds.count_ones() > MAX_KINDS
        || bvh.len() * MIN_CELLS_PER_SHAPE > MAX_CELLS
    {
        return None;
    }
    let candidates: Vec<Candidate> = bvh
        .iter()
        .enumerate()
        .map(|(storage, &user)| {
            let shape = &shapes[user as usize];
            let kind = shape.kind() as u32;
            let b = shape_bounds(shape)?;
            Some(Candidate {
                storage: storage as u32,
                slot: (bvh_kinds & ((1 << kind) - 1)).count_ones() as u8,
                bounds: (b.min.to_array(), b.max.to_array()),
            })
        })
        .collect::<Option<_>>()?;
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for c in &candidates {
        for k in 0..3 {
            lo[k] = lo[k].min(c.bounds.0[k]);
            hi[k] = hi[k].max(c.bounds.1[k]);
        }
    }
    let extent = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
    if !(extent > 0.0 && extent.is_finite()) {
        return None;
    }
    let margin = MARGIN * extent;
    // Cubic cells, as many as the budget allows over the grid's box.
    let sides: [f64; 3] = std::array::from_fn(|k| hi[k] - lo[k] + 2.0 * margin);
    let target = (bvh.len() * CELLS_PER_SHAPE).min(MAX_CELLS) as f64;
    let cell = (sides[0] * sides[1] * sides[2] / target)
        .cbrt()
        .max(extent * 1e-3);
    if !cell.is_finite() {
        return None;
    }
    let lo = lo.map(|x| x - margin);
    let dims: [usize; 3] =
        std::array::from_fn(|k| (((hi[k] + margin - lo[k]) / cell).ceil() as usize).max(1));
    let scale = (0..3)
        .map(|k| lo[k].abs().max((lo[k] + dims[k] as f64 * cell).abs()))
        .fold(extent, f64::max);
    let grid = CellGrid {
        lo,
        cell,
        slack: 1e-5 * scale,
    };
    // Far from the origin f32 cannot tell cells apart: every list would hold every shape
    // (a compact scene far away is moved into its own frame first, `scene::scene_frame`).
    if grid.slack > 0.1 * cell {
        return None;
    }
    // Blocks of cells narrowed on one thread, then each block's cells on all of them.
    let mut blocks = Vec::new();
    let everything: Vec<&Candidate> = candidates.iter().collect();
    grid.split(([0; 3], dims), &everything, BLOCK_CELLS, &mut |cells, c| {
        blocks.push((cells, c))
    });
    let unit = f64::from((cell / BOUND_UNITS_PER_CELL) as f32);
    // Per cell: its index and its list as (slot, bound, storage) in the order of the runs.
    type List = Vec<(u8, u32, u32)>;
    let lists: Vec<Vec<(usize, List)>> = blocks
        .par_iter()
        .map(|(cells, candidates)| {
            let mut lists = Vec::new();
            grid.split(*cells, candidates, 1, &mut |(ijk, _), list| {
                let mut list: List = list
                    .iter()
                    .map(|c| (c.slot, grid.bound_units(ijk, c, unit), c.storage))
                    .collect();
                list.sort_unstable();
                lists.push(((ijk[0] * dims[1] + ijk[1]) * dims[2] + ijk[2], list));
            });
            lists
        })
        .collect();
    let cell_count = dims.iter().product::<usize>();
    let cell_words = words_per_cell(bvh_kinds);
    let first_cell = HEADER_WORDS;
    let first_entry = first_cell + cell_words * cell_count;
    let mut words = vec![0u32; first_entry];
    words[..HEADER_WORDS].copy_from_slice(&[
        CELLS_MAGIC,
        (lo[0] as f32).to_bits(),
        (lo[1] as f32).to_bits(),
        (lo[2] as f32).to_bits(),
        ((1.0 / cell) as f32).to_bits(),
        dims[0] as u32,
        dims[1] as u32,
        dims[2] as u32,
        first_cell as u32,
        first_entry as u32,
        (unit as f32).to_bits(),
        0,
    ]);
    for (cell, list) in lists.into_iter().flatten() {
        let at = first_cell + cell_words * cell;
        if list.len() > MAX_LIST {
            words[at] = WALK;
            continue;
        }
        words[at] = (words.len() - first_entry) as u32;
        // Byte s % 4 of the cell's word 1 + s / 4: where slot s's run ends, counted from the
        // cell's first entry.
        for slot in 0..bvh_kinds.count_ones() {
            let end = list.iter().filter(|c| u32::from(c.0) <= slot).count() as u32;
            words[at + 1 + slot as usize / 4] |= end << (8 * (slot % 4));
        }
        words.extend(
            list.iter()
                .map(|&(_, bound, storage)| storage | bound << INDEX_BITS),
        );
    }
    // `shape_data` is read as vec4s.
    words.resize(words.len().next_multiple_of(4), 0);
    (4 * words.len() as u64 <= binding_bytes).then_some(words)
}
