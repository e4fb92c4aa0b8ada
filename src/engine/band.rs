//! Narrow-band SDF grids (SPEC §8): samples within `width` of the surface get their exact
//! signed distance, every other sample ±`width` with its sign; the work follows the surface.
//!
//! Three levels, each culled by a conservative bound before the next is computed: the signed
//! distance at the centre of every brick of 8³ samples (one job for the whole grid); at the
//! centre of every cell of 2³ samples in the bricks that can hold a band sample; at every
//! sample of the cells that can. A box whose centre is farther than `width` plus its
//! half-diagonal (plus SPEC §3's tolerance) from the surface holds no band sample, and since it
//! meets no surface, every sample in it has its centre's sign where the mesh is a closed cycle
//! (every edge used as often each way, `GpuMesh::is_closed_cycle`: the winding number is then
//! constant off the surface, and so is the pseudonormal's inside). Where it is not (a hole:
//! the winding number's ½ crosses it off the surface), winding signs hold in a box that meets
//! neither the mesh nor the holes' caps and where the caps bound the winding number away from
//! ½ (`auto_sign::HoleCaps`, a proof); other boxes are computed whole. Pseudonormal signs have
//! no such bound: a far brick takes its centre's sign only when the eight corners of its box,
//! evaluated on a shared lattice, agree with it (a sample), and near bricks are computed
//! whole. Slabs of 8 x-planes are finished in turn, so memory stays
//! bounded at any resolution and the sink gets the grid in C order.

use super::{Engine, GpuMesh, MeshQuery};
use crate::DVec3;
use crate::error::{Error, Result};
use crate::fields::{DISTANCE, Family, Fields, PackedRows};
use crate::mesh::Sign;
use crate::points::Points;
use crate::sdf::Grid;

/// Samples a side of a brick, the first level's boxes (and the x-planes of a slab).
pub const BRICK: usize = 8;
/// Samples a side of a cell, the second level's boxes.
pub const CELL: usize = 2;

/// A narrow-band grid of a mesh: [`Engine::sdf_band`].
pub struct SdfBand<'a> {
    pub mesh: &'a GpuMesh,
    pub grid: &'a Grid,
    pub sign: Sign,
    /// The band's half-width in world units (`--band W --band-units voxels` is W times the
    /// largest spacing).
    pub width: f64,
}

/// Some whole x-planes of a band grid, in C order.
pub struct BandSlab<'a> {
    /// The grid row of `values[0]`.
    pub first: usize,
    /// Every sample: its exact signed distance within the band, ±width outside.
    pub values: &'a [f32],
    /// The samples computed and found within the band (`|d| ≤ width`), as indices into
    /// `values`, ascending: a sparse grid's samples.
    pub in_band: &'a [u32],
}

/// How much of a band grid was computed, level by level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BandWork {
    pub bricks: usize,
    pub near_bricks: usize,
    pub near_cells: usize,
    /// Samples whose distance was computed (those of the near cells).
    pub samples: usize,
    /// Samples found within the band.
    pub in_band: usize,
}

/// A box of samples: `lo[k] .. hi[k]` along each axis.
#[derive(Clone, Copy, Debug)]
struct SampleBox {
    lo: [usize; 3],
    hi: [usize; 3],
}

impl SampleBox {
    /// The boxes of `side` samples a side that tile `self` (smaller at its far faces).
    fn tiles(self, side: usize) -> impl Iterator<Item = SampleBox> {
        let starts = move |k: usize| (self.lo[k]..self.hi[k]).step_by(side);
        starts(0).flat_map(move |i| {
            starts(1).flat_map(move |j| {
                starts(2).map(move |k| {
                    let lo = [i, j, k];
                    SampleBox {
                        lo,
                        hi: std::array::from_fn(|a| (lo[a] + side).min(self.hi[a])),
                    }
                })
            })
        })
    }

    /// The midpoint of its first and last samples, and the distance from there to either.
    fn centre_and_radius(self, grid: &Grid) -> ([f64; 3], f64) {
        let at = |a: usize, index: f64| grid.origin.get(a) + index * grid.spacing.get(a);
        let mut radius_squared = 0.0;
        let centre = std::array::from_fn(|a| {
            let (first, last) = (self.lo[a] as f64, (self.hi[a] - 1) as f64);
            let half = 0.5 * (last - first) * grid.spacing.get(a);
            radius_squared += half * half;
            at(a, 0.5 * (first + last))
        });
        (centre, radius_squared.sqrt())
    }
}

/// Whether a box whose centre lies `distance` from the surface, `radius` from its farthest
/// sample, can hold a sample within `width`: the bound allows the device's rounding (`slack`).
fn may_hold_band(distance: f32, radius: f64, width: f64, slack: f64) -> bool {
    f64::from(distance.abs()) - radius - slack <= width
}

/// ±width with the sign of `distance` (−0 counts as inside, as the device marks it).
fn clamped(distance: f32, width: f32) -> f32 {
    if distance.is_sign_negative() {
        -width
    } else {
        width
    }
}

impl Engine {
    /// The narrow-band grid `job` asks, slab by slab in C order into `sink`; returns how much
    /// was computed.
    pub fn sdf_band(
        &self,
        job: SdfBand<'_>,
        sink: &mut dyn FnMut(BandSlab<'_>) -> Result<()>,
    ) -> Result<BandWork> {
        let SdfBand {
            mesh,
            grid,
            sign,
            width,
        } = job;
        if !(width.is_finite() && width > 0.0) {
            return Err(Error::Usage(format!(
                "--band must be a finite width > 0, got {width}"
            )));
        }
        let [nx, ny, nz] = grid.res;
        let corner = grid.origin
            + crate::DVec3::new(
                (nx - 1) as f64 * grid.spacing.x,
                (ny - 1) as f64 * grid.spacing.y,
                (nz - 1) as f64 * grid.spacing.z,
            );
        let slack = crate::semantics::tolerance(grid.origin.max_abs().max(corner.max_abs()));
        let width_f32 = width as f32;
        let distances = |points: &[[f64; 3]]| -> Result<Vec<f32>> {
            if points.is_empty() {
                return Ok(Vec::new());
            }
            let mut values = Vec::with_capacity(points.len());
            let query = MeshQuery {
                mesh,
                points: Points::F64(points),
                sign,
                fields: Fields::from_bits(Family::Hits, DISTANCE),
            };
            self.query_mesh(query, &mut |_first: usize, rows: PackedRows<'_>| {
                values.extend_from_slice(bytemuck::cast_slice(rows.words()));
                Ok(())
            })?;
            Ok(values)
        };
        let whole = SampleBox {
            lo: [0; 3],
            hi: grid.res,
        };
        let bricks: Vec<SampleBox> = whole.tiles(BRICK).collect();
        let brick_centres: Vec<[f64; 3]> =
            bricks.iter().map(|b| b.centre_and_radius(grid).0).collect();
        let brick_distances = distances(&brick_centres)?;
        drop(brick_centres);
        let mut work = BandWork {
            bricks: bricks.len(),
            ..BandWork::default()
        };
        // Where the sign may change off the surface (the winding number across a hole), a box
        // takes its centre's sign only where the holes' caps bound the winding number away
        // from ½ (`HoleCaps`, a proof); pseudonormal signs have no such bound, so a far brick
        // takes its centre's sign there only if the corners of its box agree (a sample), and
        // the other bricks are computed whole.
        let signs_vary = sign != Sign::None && !mesh.is_closed_cycle();
        let caps = (signs_vary && sign == Sign::Winding).then(|| mesh.hole_caps());
        let centre_sign_holds = |b: &SampleBox| match caps {
            Some(caps) => {
                let (centre, radius) = b.centre_and_radius(grid);
                caps.sign_constant_in_ball(DVec3::from_array(centre), radius + slack)
            }
            None => !signs_vary,
        };
        let lattice = [nx, ny, nz].map(|n| n.div_ceil(BRICK) + 1);
        let corner_signs: Vec<bool> = if signs_vary && caps.is_none() {
            let corners: Vec<[f64; 3]> = (0..lattice[0])
                .flat_map(|i| {
                    (0..lattice[1]).flat_map(move |j| (0..lattice[2]).map(move |k| [i, j, k]))
                })
                .map(|m| {
                    std::array::from_fn(|a| {
                        grid.origin.get(a)
                            + (m[a] as f64 * BRICK as f64 - 0.5) * grid.spacing.get(a)
                    })
                })
                .collect();
            distances(&corners)?
                .iter()
                .map(|d| d.is_sign_negative())
                .collect()
        } else {
            Vec::new()
        };
        let corners_agree = |brick: &SampleBox, inside: bool| {
            let m = brick.lo.map(|x| x / BRICK);
            (0..8).all(|c: usize| {
                let [i, j, k] = [m[0] + (c & 1), m[1] + (c >> 1 & 1), m[2] + (c >> 2 & 1)];
                corner_signs[(i * lattice[1] + j) * lattice[2] + k] == inside
            })
        };
        let bricks_a_slab = ny.div_ceil(BRICK) * nz.div_ceil(BRICK);
        let mut values = Vec::new();
        let mut in_band = Vec::new();
        for (slab, slab_bricks) in bricks.chunks(bricks_a_slab).enumerate() {
            let i0 = slab * BRICK;
            let planes = BRICK.min(nx - i0);
            let local = |[i, j, k]: [usize; 3]| ((i - i0) * ny + j) * nz + k;
            values.clear();
            values.resize(planes * ny * nz, 0.0f32);
            // Far bricks take their centre's sign; near ones are split into cells (or, where
            // signs vary off the surface, computed whole, as are far ones whose corners
            // disagree).
            let mut near_cells = Vec::new();
            let mut whole_boxes = Vec::new();
            for (brick, &d) in slab_bricks
                .iter()
                .zip(&brick_distances[slab * bricks_a_slab..])
            {
                let (_, radius) = brick.centre_and_radius(grid);
                let near = may_hold_band(d, radius, width, slack);
                if near {
                    work.near_bricks += 1;
                }
                let holds = centre_sign_holds(brick)
                    || (caps.is_none() && !near && corners_agree(brick, d.is_sign_negative()));
                if !holds {
                    whole_boxes.push(*brick);
                } else if near {
                    near_cells.extend(brick.tiles(CELL));
                } else {
                    fill_box(&mut values, *brick, local, clamped(d, width_f32));
                }
            }
            let cell_centres: Vec<[f64; 3]> = near_cells
                .iter()
                .map(|c| c.centre_and_radius(grid).0)
                .collect();
            let cell_distances = distances(&cell_centres)?;
            let mut samples = Vec::new();
            let mut sample_rows = Vec::new();
            let mut add_samples = |b: SampleBox| {
                for sample in b.tiles(1) {
                    let index = sample.lo;
                    samples.push(std::array::from_fn(|a| {
                        grid.origin.get(a) + index[a] as f64 * grid.spacing.get(a)
                    }));
                    sample_rows.push(local(index) as u32);
                }
            };
            for (cell, &d) in near_cells.iter().zip(&cell_distances) {
                let (_, radius) = cell.centre_and_radius(grid);
                if !may_hold_band(d, radius, width, slack) {
                    fill_box(&mut values, *cell, local, clamped(d, width_f32));
                    continue;
                }
                work.near_cells += 1;
                add_samples(*cell);
            }
            for b in whole_boxes {
                add_samples(b);
            }
            let sample_distances = distances(&samples)?;
            work.samples += samples.len();
            in_band.clear();
            for (&row, &d) in sample_rows.iter().zip(&sample_distances) {
                // NaN (a sample the device could not answer) stays NaN, out of the band.
                if f64::from(d.abs()) <= width {
                    values[row as usize] = d;
                    in_band.push(row);
                } else if d.is_nan() {
                    values[row as usize] = d;
                } else {
                    values[row as usize] = clamped(d, width_f32);
                }
            }
            in_band.sort_unstable();
            work.in_band += in_band.len();
            sink(BandSlab {
                first: i0 * ny * nz,
                values: &values,
                in_band: &in_band,
            })?;
        }
        Ok(work)
    }
}

/// Set every sample of `b` in a slab's `values` to `value`.
fn fill_box(values: &mut [f32], b: SampleBox, local: impl Fn([usize; 3]) -> usize, value: f32) {
    for i in b.lo[0]..b.hi[0] {
        for j in b.lo[1]..b.hi[1] {
            let start = local([i, j, b.lo[2]]);
            values[start..start + (b.hi[2] - b.lo[2])].fill(value);
        }
    }
}
