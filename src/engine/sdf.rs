//! SDF grids (SPEC §4): a mesh's distances at every sample of a `sdf::Grid`, streamed in C
//! order; only distances come back from the device.

use super::{Engine, GpuMesh, MeshQuery};
use crate::DVec3;
use crate::auto_sign::HoleCaps;
use crate::error::Result;
use crate::fields::{DISTANCE, Family, Fields, PackedRows};
use crate::mesh::Sign;
use crate::sdf::Grid;
use rayon::prelude::*;

use crate::points::{PointChunk, PointReader, Points};

/// An SDF grid of a mesh: [`Engine::sdf`].
pub struct SdfGrid<'a> {
    pub mesh: &'a GpuMesh,
    pub grid: &'a Grid,
    pub sign: Sign,
}

impl Engine {
    /// The distances of `job.grid`'s samples to `job.mesh`, signed by `job.sign`, chunk by
    /// chunk in C order of an (nx, ny, nz) array: `sink` gets each chunk's first sample and
    /// values (collect them into a `Vec`, or write them out as they come).
    pub fn sdf(
        &self,
        job: SdfGrid<'_>,
        sink: &mut dyn FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<()> {
        let SdfGrid { mesh, grid, sign } = job;
        let stand_in = match sign {
            Sign::Winding => self.winding_by_pseudonormal(mesh)?,
            _ => None,
        };
        let Some(caps) = stand_in else {
            return self.sdf_signed(mesh, grid, sign, sink);
        };
        // Signed by winding number where the holes' caps prove the pseudonormal sign the
        // winding number's (`doubtful_samples`): slab by slab, a pseudonormal grid, then its
        // doubtful samples settled by the caps' exact winding number (`HoleCaps::settle`) or,
        // where a cap may be nearer than the mesh, asked again with the winding walk (one
        // query at a time: a query is not asked from inside another's sink). Slabs of several
        // chunks, so that the caps' boxes of samples stay cubes.
        let corner = grid.point(grid.len().saturating_sub(1));
        let slack = crate::tolerance(
            grid.origin
                .max_abs()
                .max(DVec3::from_array(corner).max_abs()),
        );
        let [nx, ny, nz] = grid.res;
        let planes = (4 * self.gpu.chunk_rows / (ny * nz).max(1)).clamp(1, nx.max(1));
        for i0 in (0..nx).step_by(planes) {
            let slab = Grid {
                origin: DVec3::from_array(grid.point(i0 * ny * nz)),
                spacing: grid.spacing,
                res: [planes.min(nx - i0), ny, nz],
            };
            let first = i0 * ny * nz;
            let mut values = Vec::with_capacity(slab.len());
            self.sdf_signed(mesh, &slab, Sign::Pseudonormal, &mut |_, chunk| {
                values.extend_from_slice(chunk);
                Ok(())
            })?;
            let doubtful = doubtful_samples(caps, &slab, &values, slack);
            let position = |k: usize| DVec3::from_array(grid.point(first + k));
            let doubtful = caps.settle(&doubtful, position, &mut values, |_| slack);
            let points: Vec<[f64; 3]> = doubtful.iter().map(|&k| grid.point(first + k)).collect();
            let query = MeshQuery {
                mesh,
                points: Points::F64(&points),
                sign,
                fields: Fields::from_bits(Family::Hits, DISTANCE),
            };
            let mut at = 0;
            if !points.is_empty() {
                self.query_mesh(query, &mut |_first: usize, rows: PackedRows<'_>| {
                    for &d in bytemuck::cast_slice::<u32, f32>(rows.words()) {
                        values[doubtful[at]] = d;
                        at += 1;
                    }
                    Ok(())
                })?;
            }
            sink(first, &values)?;
        }
        Ok(())
    }

    /// [`Engine::sdf`] with every sample signed by `sign`.
    fn sdf_signed(
        &self,
        mesh: &GpuMesh,
        grid: &Grid,
        sign: Sign,
        sink: &mut dyn FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<()> {
        if self.samples_grids_on_device() && self.sdf_on_device(mesh, grid, sign, sink)? {
            return Ok(());
        }
        let query = MeshQuery {
            mesh,
            points: Points::Read(&mut GridPoints(grid)),
            sign,
            fields: Fields::from_bits(Family::Hits, DISTANCE),
        };
        // Distance-only rows are the column itself.
        self.query_mesh(query, &mut |first: usize, rows: PackedRows<'_>| {
            sink(first, bytemuck::cast_slice(rows.words()))
        })
    }
}

/// Samples a side of the boxes `doubtful_samples` starts from (halved down to one sample).
const CAP_TILE: usize = 16;

/// The indices of `grid`'s samples whose pseudonormal sign (`values`, the pseudonormal grid)
/// the holes' caps cannot prove the winding number's: boxes of samples, each judged whole by
/// its ball and its farthest distance and halved until it passes or is one sample. Far from
/// the holes a box of thousands of samples costs one check.
fn doubtful_samples(caps: &HoleCaps, grid: &Grid, values: &[f32], slack: f64) -> Vec<usize> {
    let [nx, ny, nz] = grid.res;
    let tiles = |n: usize| {
        (0..n)
            .step_by(CAP_TILE)
            .map(move |a| (a, (a + CAP_TILE).min(n)))
    };
    let boxes: Vec<([usize; 3], [usize; 3])> = tiles(nx)
        .flat_map(|(i0, i1)| {
            tiles(ny).flat_map(move |(j0, j1)| {
                tiles(nz).map(move |(k0, k1)| ([i0, j0, k0], [i1, j1, k1]))
            })
        })
        .collect();
    boxes
        .into_par_iter()
        .flat_map_iter(|(lo, hi)| {
            let mut doubtful = Vec::new();
            doubtful_in_box(caps, grid, values, slack, lo, hi, &mut doubtful);
            doubtful
        })
        .collect()
}

/// `doubtful_samples` in the box of samples `lo..hi` (indices an axis).
fn doubtful_in_box(
    caps: &HoleCaps,
    grid: &Grid,
    values: &[f32],
    slack: f64,
    lo: [usize; 3],
    hi: [usize; 3],
    doubtful: &mut Vec<usize>,
) {
    let [_, ny, nz] = grid.res;
    let index = |[i, j, k]: [usize; 3]| (i * ny + j) * nz + k;
    let mut farthest = 0.0f32;
    for i in lo[0]..hi[0] {
        for j in lo[1]..hi[1] {
            for v in &values[index([i, j, lo[2]])..index([i, j, hi[2]])] {
                // A NaN distance makes the box's farthest NaN for good (f32::max would drop
                // it): no proof.
                farthest = if v.is_nan() || farthest.is_nan() {
                    f32::NAN
                } else {
                    farthest.max(v.abs())
                };
            }
        }
    }
    let near = DVec3::from_array(grid.point(index(lo)));
    let far = DVec3::from_array(grid.point(index(hi.map(|h| h - 1))));
    let (centre, radius) = ((near + far) * 0.5, (far - near).length() * 0.5);
    if caps.pseudonormal_sign_holds_within(centre, radius, f64::from(farthest), slack) {
        return;
    }
    if (0..3).all(|a| hi[a] - lo[a] == 1) {
        doubtful.push(index(lo));
        return;
    }
    // Halve every axis longer than one sample.
    let halves = |a: usize| {
        let mid = lo[a] + (hi[a] - lo[a]).div_ceil(2);
        [(lo[a], mid), (mid, hi[a])]
            .into_iter()
            .filter(|(l, h)| l < h)
    };
    for (i0, i1) in halves(0) {
        for (j0, j1) in halves(1) {
            for (k0, k1) in halves(2) {
                doubtful_in_box(
                    caps,
                    grid,
                    values,
                    slack,
                    [i0, j0, k0],
                    [i1, j1, k1],
                    doubtful,
                );
            }
        }
    }
}

/// A grid's samples as query points, made chunk by chunk (the host's path to a grid).
struct GridPoints<'a>(&'a Grid);

impl PointReader for GridPoints<'_> {
    fn rows(&self) -> usize {
        self.0.len()
    }

    fn read(&mut self, range: std::ops::Range<usize>, chunk: &mut PointChunk) -> Result<()> {
        chunk.f64_rows().extend(range.map(|row| self.0.point(row)));
        Ok(())
    }
}
