//! SDF grids (SPEC §4): a mesh's distances at every sample of a `sdf::Grid`, streamed in C
//! order; only distances come back from the device.

use super::{Engine, GpuMesh, MeshQuery};
use crate::error::Result;
use crate::fields::{DISTANCE, Family, Fields, PackedRows};
use crate::mesh::Sign;
use crate::sdf::Grid;

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
