//! Narrow-band SDF grids (SPEC §8): samples within `width` of the surface get their exact
//! signed distance, every other sample ±`width` with its sign; the work follows the surface.
//!
//! Levels, each culled by a conservative bound before the next is computed: the signed
//! distance at the centre of every block of 32³ samples, then of every brick of 8³ samples
//! (one job each for the whole grid); at the centre of every cell of 2³ samples in the bricks
//! that can hold a band sample; at every sample of the cells that can. A box inside one whose
//! centre lies d from the surface is at least d less its offset and radius from it, so bricks
//! (and a near brick's boxes of 4³) that this rules out are never asked. Cells and samples are
//! made on the device from their boxes' records (`Engine::box_tiles_on_device`, 24 bytes for
//! 8 rows) where it can, from f64 points otherwise; there each box's walks start below the root
//! and stop at a bound from the level above (`list_box`). A box whose centre is farther than
//! `width` plus its half-diagonal (plus SPEC §3's tolerance) from the surface holds no band
//! sample, and since it
//! meets no surface, every sample in it has its centre's sign where the mesh is a closed cycle
//! (every edge used as often each way, `GpuMesh::is_closed_cycle`: the winding number is then
//! constant off the surface, and so is the pseudonormal's inside). Where it is not (a hole:
//! the winding number's ½ crosses it off the surface), winding signs hold in a box that meets
//! neither the mesh nor the holes' caps and where the caps bound the winding number away from
//! ½ (`auto_sign::HoleCaps`, a proof); other boxes that hold no band sample need signs alone
//! (`SignsByRims`: the winding number at a box's centre, kept across it by the rims' bound on
//! its gradient, else halved down to samples), and near bricks there are culled as elsewhere,
//! their cells' centres asked unsigned. Pseudonormal signs have
//! no such bound: a far brick takes its centre's sign only when the eight corners of its box,
//! evaluated on a shared lattice, agree with it (a sample), and near bricks are computed
//! whole. Slabs of 8 x-planes (more where the planes are small) are finished in turn, so
//! memory stays bounded at any resolution and the sink gets the grid in C order.

use super::{Engine, GpuMesh, MeshQuery};
use crate::DVec3;
use crate::bvh::WalkStart;
use crate::error::{Error, Result};
use crate::fields::{DISTANCE, Family, Fields, PackedRows};
use crate::gpu::grid::box_record;
use crate::mesh::Sign;
use crate::points::Points;
use crate::sdf::Grid;

/// Samples a side of a block, the coarsest level's boxes: they cull bricks unasked.
pub const BLOCK: usize = 32;
/// Samples a side of a brick, the first level whose boxes are all known (and the x-planes of
/// a slab).
pub const BRICK: usize = 8;
/// Samples a side of a cell, the second level's boxes.
pub const CELL: usize = 2;

/// Host bytes a band job holds for each brick of the whole grid at most: its box, distance
/// and flags, its centre where asked, and its corner's sign where signs vary.
const BAND_BYTES_A_BRICK: u64 = 128;

/// Samples a slab of several brick layers holds at most (a slab of one layer holds any
/// number: 8 planes).
const SLAB_SAMPLES: usize = 1 << 20;

/// A narrow-band grid of a mesh: [`Engine::sdf_band`].
pub struct SdfBand<'a> {
    pub mesh: &'a GpuMesh,
    pub grid: &'a Grid,
    pub sign: Sign,
    /// The band's half-width in world units (`--band W --band-units voxels` is W times the
    /// largest spacing).
    pub width: f64,
    /// Whether the sink reads every sample's value (a dense grid). Where it reads only the
    /// band's (`BandSlab::in_band`, a sparse grid), nothing outside the band is filled or
    /// signed: the levels above the samples are asked unsigned (their signs only fill far
    /// boxes), far bricks are never computed, and no winding number is asked for signs alone.
    pub every_value: bool,
}

/// Some whole x-planes of a band grid, in C order.
pub struct BandSlab<'a> {
    /// The grid row of `values[0]`.
    pub first: usize,
    /// Every sample: its exact signed distance within the band, ±width outside (where the job
    /// asked for `every_value`; else only the `in_band` rows hold anything).
    pub values: &'a [f32],
    /// The samples computed and found within the band (`|d| ≤ width`), as indices into
    /// `values`, ascending: a sparse grid's samples.
    pub in_band: &'a [u32],
    /// The samples whose value is NaN (the device could not answer), among those `values`
    /// holds.
    pub non_finite: usize,
}

/// How much of a band grid was computed, level by level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BandWork {
    pub bricks: usize,
    pub near_bricks: usize,
    pub near_cells: usize,
    /// Samples whose distance was computed (those of the near cells).
    pub samples: usize,
    /// Distances asked of the device at every level (block, brick and cell centres, corners,
    /// samples).
    pub queries: usize,
    /// Samples found within the band.
    pub in_band: usize,
    /// Winding numbers asked for signs alone: far boxes where a hole's ½ may cross
    /// (`SignsByRims`), their centres and the samples they were split down to.
    pub sign_queries: usize,
    /// Near cells whose samples' walks start below the root (`GpuMesh::walk_start`), and the
    /// sum of their start nodes' depths.
    pub deep_starts: usize,
    pub start_depths: usize,
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

    /// Its 2 × 2 × 2 tiles of `side` samples a side, in Morton order (x the slowest), as
    /// the device lists them (`grid_samples.wgsl`): `None` for those outside it.
    fn tiles8(self, side: usize) -> [Option<SampleBox>; 8] {
        std::array::from_fn(|t| {
            let lo: [usize; 3] = std::array::from_fn(|a| self.lo[a] + (t >> (2 - a) & 1) * side);
            (0..3).all(|a| lo[a] < self.hi[a]).then(|| SampleBox {
                lo,
                hi: std::array::from_fn(|a| (lo[a] + side).min(self.hi[a])),
            })
        })
    }

    fn len(self) -> usize {
        (0..3).map(|a| self.hi[a] - self.lo[a]).product()
    }

    fn is_one_sample(self) -> bool {
        (0..3).all(|a| self.hi[a] - self.lo[a] == 1)
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

/// Whether a box inside a box whose centre lies `distance` from the surface can hold a band
/// sample, by that distance alone: the inner box's samples lie within `offset` (centre to
/// centre) plus `radius` of the outer centre, so they are at least `|distance|` less that from
/// the surface. One that cannot lies in the outer centre's surface-free ball and has its sign
/// wherever that ball's sign is constant.
fn inner_may_hold_band(distance: f32, offset: f64, radius: f64, width: f64, slack: f64) -> bool {
    may_hold_band(distance, offset + radius, width, slack)
}

fn centre_offset(a: [f64; 3], b: [f64; 3]) -> f64 {
    (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f64>().sqrt()
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
            every_value,
        } = job;
        if !(width.is_finite() && width > 0.0) {
            return Err(Error::Usage(format!(
                "--band must be a finite width > 0, got {width}"
            )));
        }
        let [nx, ny, nz] = grid.res;
        // The whole grid's bricks are listed with their distances, and a slab's values held:
        // a grid of 2^44 bricks (sides up to 2^24 may ask for one) took memory until the
        // system ended the process. Refused up front where the host cannot hold them.
        let bricks = grid.res.iter().fold(1u64, |n, &side| {
            n.saturating_mul(side.div_ceil(BRICK) as u64)
        });
        // A slab is one layer of bricks (8 x-planes), or as many layers as make about
        // `SLAB_SAMPLES` where the planes are small: each slab costs a few dispatches, and
        // a grid of 300,000 × 4 × 4 took 37,500 of them (23.6 s against 0.8 s along z).
        let layers = (SLAB_SAMPLES / (BRICK * ny * nz).max(1)).max(1);
        let slab_samples = layers * BRICK * ny * nz;
        let _held = self.gpu.reserve_memory(
            &format!(
                "--res {:?}: a band grid's {bricks} bricks and slabs",
                grid.res
            ),
            0,
            bricks
                .saturating_mul(BAND_BYTES_A_BRICK)
                .saturating_add((slab_samples as u64).saturating_mul(5)),
        )?;
        let corner = grid.origin
            + crate::DVec3::new(
                (nx - 1) as f64 * grid.spacing.x,
                (ny - 1) as f64 * grid.spacing.y,
                (nz - 1) as f64 * grid.spacing.z,
            );
        let slack = crate::semantics::tolerance(grid.origin.max_abs().max(corner.max_abs()));
        let width_f32 = width as f32;
        let distances_signed = |points: &[[f64; 3]], sign: Sign| -> Result<Vec<f32>> {
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
        // Signed by winding number, a near brick's cells and samples take the pseudonormal
        // sign where the holes' caps prove it the winding number's in the brick's whole ball
        // (`HoleCaps::pseudonormal_sign_holds`): no winding walk there.
        let stand_in = match sign {
            Sign::Winding => self.winding_by_pseudonormal(mesh)?,
            _ => None,
        };
        let pseudonormal_holds = |b: &SampleBox, d: f32| {
            stand_in.is_some_and(|caps| {
                let (centre, radius) = b.centre_and_radius(grid);
                caps.pseudonormal_sign_holds(
                    DVec3::from_array(centre),
                    radius,
                    f64::from(d.abs()),
                    slack,
                )
            })
        };
        // Points alone (blocks' and bricks' centres) likewise, each judged by its own distance:
        // a pseudonormal pass, the caps' exact winding number where they lie farther than the
        // mesh, and the winding walk where they do not (`HoleCaps::settle`).
        let distances = |points: &[[f64; 3]]| -> Result<Vec<f32>> {
            if !every_value {
                return distances_signed(points, Sign::None);
            }
            let Some(caps) = stand_in else {
                return distances_signed(points, sign);
            };
            let mut values = distances_signed(points, Sign::Pseudonormal)?;
            let rows: Vec<usize> = (0..points.len()).collect();
            let position = |k: usize| DVec3::from_array(points[k]);
            let doubtful = caps.settle(&rows, position, &mut values, |_| slack);
            let doubtful_points: Vec<[f64; 3]> = doubtful.iter().map(|&k| points[k]).collect();
            for (&k, d) in doubtful
                .iter()
                .zip(distances_signed(&doubtful_points, sign)?)
            {
                values[k] = d;
            }
            Ok(values)
        };

        // Eight a box: made on the device from the boxes' records where it can (no points go
        // up), from the tiles' centres otherwise. Starts and bounds serve only the device's
        // walks of the boxes it lists.
        let boxes_on_device = self.lists_boxes_on_device(grid);
        let tile_distances = |boxes: &[ListedBox], tile: usize, sign: Sign| -> Result<Vec<f32>> {
            if boxes.is_empty() {
                return Ok(Vec::new());
            }
            if boxes_on_device {
                let records: Vec<_> = boxes
                    .iter()
                    .map(|b| {
                        let (lo, hi) = (b.samples.lo, b.samples.hi);
                        box_record(
                            lo,
                            std::array::from_fn(|a| hi[a] - lo[a]),
                            b.start.node,
                            b.bound,
                        )
                    })
                    .collect();
                if let Some(values) =
                    self.box_tiles_on_device(mesh, grid, sign, &records, tile as u32)?
                {
                    return Ok(values);
                }
            }
            let tiles: Vec<Option<SampleBox>> =
                boxes.iter().flat_map(|b| b.samples.tiles8(tile)).collect();
            let centres: Vec<[f64; 3]> = tiles
                .iter()
                .flatten()
                .map(|t| t.centre_and_radius(grid).0)
                .collect();
            let mut answers = distances_signed(&centres, sign)?.into_iter();
            Ok(tiles
                .iter()
                .map(|t| t.and_then(|_| answers.next()).unwrap_or(f32::NAN))
                .collect())
        };
        // A listed box's rows (its tiles of `tile` samples) need no answer beyond `upper`, a
        // bound on their distances from the level above (+∞: none), nor, in a sparse job,
        // beyond where a tile may hold a band sample (`width`, its radius and the slack, with
        // a margin: an answer beyond may come back +∞, which decides the same). Their walks
        // open nothing farther, and start at the deepest node holding every triangle within
        // the bound of any row (`GpuMesh::walk_start`), searched from `within`'s where that
        // box's ball holds this one's.
        let reach = |tile: usize| {
            let tile_radius = SampleBox {
                lo: [0; 3],
                hi: [tile; 3],
            }
            .centre_and_radius(grid)
            .1;
            (width + tile_radius + 2.0 * slack) * 1.000_001
        };
        let (sample_reach, cell_reach) = (reach(1), reach(CELL));
        let list_box = |samples: SampleBox, tile: usize, upper: f64, within: Option<&ListedBox>| {
            let reach = if tile == 1 { sample_reach } else { cell_reach };
            let bound = if every_value { upper } else { upper.min(reach) };
            let (centre, radius) = samples.centre_and_radius(grid);
            let mut listed = ListedBox {
                samples,
                start: WalkStart::ROOT,
                bound: 0.0,
                ball: (centre, f64::INFINITY),
            };
            if bound.is_finite() && boxes_on_device {
                let ball_radius = (bound + radius + 2.0 * slack) * 1.0001;
                let from = within
                    .filter(|w| centre_offset(centre, w.ball.0) + ball_radius <= w.ball.1)
                    .map_or(WalkStart::ROOT, |w| w.start);
                listed.start = mesh.walk_start(from, DVec3::from_array(centre), ball_radius);
                listed.bound = bound;
                listed.ball.1 = ball_radius;
            }
            listed
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
        let by_rims = caps
            .filter(|_| mesh.winding_on_device())
            .map(|caps| SignsByRims {
                engine: self,
                mesh,
                grid,
                caps,
                width: width_f32,
            });
        let whole = SampleBox {
            lo: [0; 3],
            hi: grid.res,
        };
        // Blocks bound their bricks: a brick that cannot hold a band sample by its block's
        // distance alone is not asked, and takes the block's sign with its distance less the
        // offset (a lower bound) where the block's sign holds.
        let blocks: Vec<SampleBox> = whole.tiles(BLOCK).collect();
        let block_centres: Vec<[f64; 3]> =
            blocks.iter().map(|b| b.centre_and_radius(grid).0).collect();
        let block_distances = distances(&block_centres)?;
        let block_signs_hold: Vec<bool> = blocks.iter().map(centre_sign_holds).collect();
        let blocks_along = [ny, nz].map(|n| n.div_ceil(BLOCK));
        let block_of = |b: &SampleBox| {
            let m = b.lo.map(|x| x / BLOCK);
            (m[0] * blocks_along[0] + m[1]) * blocks_along[1] + m[2]
        };
        let bricks: Vec<SampleBox> = whole.tiles(BRICK).collect();
        let mut brick_distances = vec![0.0f32; bricks.len()];
        // Whether a brick's distance is its centre's (else a lower bound from its block's).
        let mut brick_measured = vec![false; bricks.len()];
        let mut asked = Vec::new();
        for (k, brick) in bricks.iter().enumerate() {
            let (centre, radius) = brick.centre_and_radius(grid);
            let b = block_of(brick);
            let (d, offset) = (block_distances[b], centre_offset(centre, block_centres[b]));
            let sign_known = block_signs_hold[b] || !every_value;
            if sign_known && !inner_may_hold_band(d, offset, radius, width, slack) {
                brick_distances[k] = ((f64::from(d.abs()) - offset) as f32).copysign(d);
            } else {
                asked.push(k);
            }
        }
        let asked_centres: Vec<[f64; 3]> = asked
            .iter()
            .map(|&k| bricks[k].centre_and_radius(grid).0)
            .collect();
        for (&k, d) in asked.iter().zip(distances(&asked_centres)?) {
            brick_distances[k] = d;
            brick_measured[k] = true;
        }
        let mut work = BandWork {
            bricks: bricks.len(),
            queries: blocks.len() + asked.len(),
            ..BandWork::default()
        };
        drop((block_centres, asked, asked_centres));
        let lattice = [nx, ny, nz].map(|n| n.div_ceil(BRICK) + 1);
        let corner_signs: Vec<bool> = if signs_vary && caps.is_none() && every_value {
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
            work.queries += corners.len();
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
        let bricks_a_slab = ny.div_ceil(BRICK) * nz.div_ceil(BRICK) * layers;
        let mut values = Vec::new();
        let mut in_band = Vec::new();
        // A slab's band rows as bits, read out in row order (sorting them instead cost
        // fandisk's sparse 512³ band job ~10 %, docs/PERF.md).
        let mut in_band_bits: Vec<u64> = Vec::new();
        for (slab, slab_bricks) in bricks.chunks(bricks_a_slab).enumerate() {
            let i0 = slab * layers * BRICK;
            let planes = (layers * BRICK).min(nx - i0);
            let local = |[i, j, k]: [usize; 3]| ((i - i0) * ny + j) * nz + k;
            if every_value {
                values.clear();
            }
            // A sparse job's values are read at its band's rows only, all written below.
            values.resize(planes * ny * nz, 0.0f32);
            let mut non_finite = 0;
            let fill = |values: &mut Vec<f32>, b: SampleBox, value: f32| {
                if every_value {
                    fill_box(values, b, local, value);
                }
            };
            let samples_before = work.samples;
            // Far bricks take their centre's sign; near ones are split into cells (or, where
            // signs vary off the surface, computed whole, as are far ones whose corners
            // disagree).
            // Samples twice: [signed by the job's sign, by pseudonormal in its place]; the
            // parents of cells also unsigned, where their cells' signs are settled apart (each
            // with the way its samples are signed).
            let mut cell_parents: [Vec<(ListedBox, usize)>; 3] = Default::default();
            let mut sample_boxes: [Vec<ListedBox>; 2] = Default::default();
            let mut sign_boxes = Vec::new();
            let slab_range = slab * bricks_a_slab..;
            for ((brick, &d), &measured) in slab_bricks
                .iter()
                .zip(&brick_distances[slab_range.clone()])
                .zip(&brick_measured[slab_range])
            {
                let (centre, radius) = brick.centre_and_radius(grid);
                let near = may_hold_band(d, radius, width, slack);
                if near {
                    work.near_bricks += 1;
                }
                // A sparse job fills nothing outside the band, so needs no sign there.
                let holds = !every_value
                    || centre_sign_holds(brick)
                    || (caps.is_none() && !near && corners_agree(brick, d.is_sign_negative()));
                let way = usize::from(pseudonormal_holds(brick, d));
                // Its centre's distance less the slack: a surface-free ball about it.
                let free = (centre, f64::from(d.abs()) - slack);
                if !holds && !near && by_rims.is_some() {
                    sign_boxes.push(SignBox {
                        samples: *brick,
                        free,
                    });
                } else if !holds && by_rims.is_none() {
                    let listed = brick
                        .tiles(CELL)
                        .map(|cell| list_box(cell, 1, f64::INFINITY, None));
                    sample_boxes[way].extend(listed);
                } else if near {
                    // Boxes of 2 × 2 × 2 cells that cannot hold a band sample by the brick's
                    // distance alone are not asked: they take its sign where it holds in its
                    // ball, and need signs alone where it may not.
                    for parent in brick.tiles(2 * CELL) {
                        let (parent_centre, parent_radius) = parent.centre_and_radius(grid);
                        let offset = centre_offset(parent_centre, centre);
                        if inner_may_hold_band(d, offset, parent_radius, width, slack) {
                            let centres_way = if holds && every_value { way } else { UNSIGNED };
                            // Its cells' centres lie within its radius of its centre.
                            let upper = if measured {
                                f64::from(d.abs()) + offset + parent_radius + 2.0 * slack
                            } else {
                                f64::INFINITY
                            };
                            let listed = list_box(parent, CELL, upper, None);
                            cell_parents[centres_way].push((listed, way));
                        } else if holds {
                            fill(&mut values, parent, clamped(d, width_f32));
                        } else {
                            sign_boxes.push(SignBox {
                                samples: parent,
                                free,
                            });
                        }
                    }
                } else {
                    fill(&mut values, *brick, clamped(d, width_f32));
                }
            }
            let signs = [sign, Sign::Pseudonormal, Sign::None];
            for (centres_way, parents) in cell_parents.iter().enumerate() {
                let boxes: Vec<ListedBox> = parents.iter().map(|&(parent, _)| parent).collect();
                let cell_distances = tile_distances(&boxes, CELL, signs[centres_way])?;
                let holds = centres_way != UNSIGNED;
                for (&(parent, way), distances) in parents.iter().zip(cell_distances.chunks(8)) {
                    for (cell, &d) in parent.samples.tiles8(CELL).iter().zip(distances) {
                        let Some(cell) = *cell else { continue };
                        work.queries += 1;
                        let (centre, radius) = cell.centre_and_radius(grid);
                        if may_hold_band(d, radius, width, slack) {
                            work.near_cells += 1;
                            let upper = f64::from(d.abs()) + radius + 2.0 * slack;
                            let listed = list_box(cell, 1, upper, Some(&parent));
                            work.deep_starts += usize::from(listed.start.depth > 0);
                            work.start_depths += listed.start.depth;
                            sample_boxes[way].push(listed);
                        } else if holds {
                            fill(&mut values, cell, clamped(d, width_f32));
                        } else if every_value {
                            sign_boxes.push(SignBox {
                                samples: cell,
                                free: (centre, f64::from(d.abs()) - slack),
                            });
                        }
                    }
                }
            }
            in_band_bits.clear();
            in_band_bits.resize((planes * ny * nz).div_ceil(64), 0);
            for way in 0..2 {
                let sample_distances = tile_distances(&sample_boxes[way], 1, signs[way])?;
                for (cell, distances) in sample_boxes[way].iter().zip(sample_distances.chunks(8)) {
                    for (sample, &d) in cell.samples.tiles8(1).iter().zip(distances) {
                        let Some(sample) = sample else { continue };
                        work.samples += 1;
                        let row = local(sample.lo) as u32;
                        // NaN (a sample the device could not answer) stays NaN, out of the band.
                        if f64::from(d.abs()) <= width {
                            values[row as usize] = d;
                            in_band_bits[row as usize / 64] |= 1 << (row % 64);
                        } else if d.is_nan() {
                            values[row as usize] = d;
                            non_finite += 1;
                        } else {
                            values[row as usize] = clamped(d, width_f32);
                        }
                    }
                }
            }
            work.queries += work.samples - samples_before;
            if let Some(rims) = &by_rims {
                let (asked, unanswered) = rims.settle(sign_boxes, &mut values, local)?;
                work.sign_queries += asked;
                non_finite += unanswered;
            }
            in_band.clear();
            for (word, &bits) in in_band_bits.iter().enumerate() {
                let mut bits = bits;
                while bits != 0 {
                    in_band.push(64 * word as u32 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
            work.in_band += in_band.len();
            sink(BandSlab {
                first: i0 * ny * nz,
                values: &values,
                in_band: &in_band,
                non_finite,
            })?;
        }
        Ok(work)
    }
}

/// A box whose rows the device makes (`box_record`), each walk from `start` and needing no
/// answer beyond `bound` (0: every answer); `ball` holds every triangle within the bound of
/// any row (`start` was found for it; radius +∞ for the root).
#[derive(Clone, Copy)]
struct ListedBox {
    samples: SampleBox,
    start: WalkStart,
    bound: f64,
    ball: ([f64; 3], f64),
}

/// `sdf_band`'s list of cells' parents whose centres are asked unsigned.
const UNSIGNED: usize = 2;

/// A box of samples that need signs alone, inside a ball that meets no triangle.
#[derive(Clone, Copy)]
struct SignBox {
    samples: SampleBox,
    free: ([f64; 3], f64),
}

/// Signs alone, where a hole's winding number may cross ½ off the surface: a box takes the
/// winding number's side at its centre where the rims bound its change across the box
/// (`HoleCaps::winding_sign_holds_in_ball`); the others are halved, down to samples, which
/// take their own. Few winding numbers are asked except along the ½ surface.
struct SignsByRims<'a> {
    engine: &'a Engine,
    mesh: &'a GpuMesh,
    grid: &'a Grid,
    caps: &'a crate::auto_sign::HoleCaps,
    width: f32,
}

impl SignsByRims<'_> {
    /// Fill the samples of `boxes` in a slab's `values` with ±width by their sign (NaN where
    /// the device could not answer); returns the winding numbers asked and the samples filled
    /// with NaN. Each level's centres
    /// are asked coarse, and fine where the coarse number proves too little, as the device
    /// signs a point.
    fn settle(
        &self,
        boxes: Vec<SignBox>,
        values: &mut [f32],
        local: impl Fn([usize; 3]) -> usize,
    ) -> Result<(usize, usize)> {
        let mut asked = 0;
        let mut unanswered = 0;
        let mut level = boxes;
        while !level.is_empty() {
            let centres: Vec<[f64; 3]> = level
                .iter()
                .map(|b| b.samples.centre_and_radius(self.grid).0)
                .collect();
            // Coarse numbers first; fine ones where they decide too little.
            let mut windings = self.windings(&centres, false)?;
            let mut decided: Vec<bool> = (0..level.len())
                .map(|k| self.decides(&level[k], centres[k], windings[k], false))
                .collect();
            let unsure: Vec<usize> = (0..level.len()).filter(|&k| !decided[k]).collect();
            let unsure_centres: Vec<[f64; 3]> = unsure.iter().map(|&k| centres[k]).collect();
            for (&k, w) in unsure.iter().zip(self.windings(&unsure_centres, true)?) {
                windings[k] = w;
                decided[k] = self.decides(&level[k], centres[k], w, true);
            }
            asked += centres.len() + unsure.len();
            let mut next = Vec::new();
            for ((b, w), decided) in level.iter().zip(windings).zip(decided) {
                if decided {
                    // Only a sample is decided by NaN (the device could not answer).
                    let value = match w {
                        w if w.is_nan() => {
                            unanswered += b.samples.len();
                            f32::NAN
                        }
                        w if w > 0.5 => -self.width,
                        _ => self.width,
                    };
                    fill_box(values, b.samples, &local, value);
                } else {
                    let side = (0..3)
                        .map(|a| b.samples.hi[a] - b.samples.lo[a])
                        .max()
                        .unwrap_or(1)
                        .div_ceil(2);
                    next.extend(
                        b.samples
                            .tiles(side)
                            .map(|samples| SignBox { samples, ..*b }),
                    );
                }
            }
            level = next;
        }
        Ok((asked, unanswered))
    }

    fn windings(&self, points: &[[f64; 3]], fine: bool) -> Result<Vec<f64>> {
        if points.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .engine
            .winding_numbers(self.mesh, points, fine)?
            .expect("a mesh whose winding numbers the device walks"))
    }

    /// Whether the winding number `w` at the centre of `b` (`fine` or coarse) signs all of it:
    /// a sample as the device signs it (coarse beyond `SIGN_MARGIN` of ½, else fine, NaN
    /// included), a larger box where it lies inside its surface-free ball and the rims prove
    /// its sign (never by NaN).
    fn decides(&self, b: &SignBox, centre: [f64; 3], w: f64, fine: bool) -> bool {
        if b.samples.is_one_sample() {
            return fine || (w - 0.5).abs() > crate::winding::SIGN_MARGIN;
        }
        let (_, radius) = b.samples.centre_and_radius(self.grid);
        let (free_centre, free_radius) = b.free;
        centre_offset(centre, free_centre) + radius < free_radius
            && self
                .caps
                .winding_sign_holds_in_ball(DVec3::from_array(centre), radius, w, fine)
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
