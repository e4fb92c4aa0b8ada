//! SDF grids (SPEC §4): a mesh's distances at every sample of a `sdf::Grid`, streamed in C
//! order; only distances come back from the device.

use super::{Engine, GpuMesh, MeshQuery};
use crate::DVec3;
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
        // winding number's (`HoleCaps::pseudonormal_sign_holds`): slab by slab, a pseudonormal
        // grid, then its doubtful samples asked again with the winding walk (one query at a
        // time: a query is not asked from inside another's sink).
        let corner = grid.point(grid.len().saturating_sub(1));
        let slack = crate::tolerance(
            grid.origin
                .max_abs()
                .max(DVec3::from_array(corner).max_abs()),
        );
        let [nx, ny, nz] = grid.res;
        let planes = (self.gpu.chunk_rows / (ny * nz).max(1)).clamp(1, nx.max(1));
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
            let doubtful: Vec<usize> = (0..values.len())
                .into_par_iter()
                .filter(|&k| {
                    let p = DVec3::from_array(grid.point(first + k));
                    !caps.pseudonormal_sign_holds(p, 0.0, f64::from(values[k].abs()), slack)
                })
                .collect();
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
