//! SDF grids (SPEC §4): a mesh's distances at every sample of a `sdf::Grid`, streamed in C
//! order; only distances come back from the device.

use super::{Engine, GpuMesh};
use crate::error::Result;
use crate::fields::{DISTANCE, Family, Fields, PackedRows};
use crate::mesh::Sign;
use crate::sdf::Grid;

use crate::points::{PointChunk, PointReader, Points};

impl Engine {
    /// The distances of `grid`'s samples to `mesh`, signed by `sign`, chunk by chunk in row
    /// order (only distances come back from the device).
    pub fn sdf_stream(
        &self,
        mesh: &GpuMesh,
        grid: &Grid,
        sign: Sign,
        sink: &mut dyn FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<()> {
        if self.samples_grids_on_device() && self.sdf_on_device(mesh, grid, sign, sink)? {
            return Ok(());
        }
        self.query_mesh_fields_stream(
            mesh,
            Points::Read(&mut GridPoints(grid)),
            sign,
            Fields::from_bits(Family::Hits, DISTANCE),
            // Distance-only rows are the column itself.
            &mut |first: usize, rows: PackedRows<'_>| {
                sink(first, bytemuck::cast_slice(rows.words()))
            },
        )
    }

    /// Every sample of `grid`, in C order of an (nx, ny, nz) array.
    pub fn sdf(&self, mesh: &GpuMesh, grid: &Grid, sign: Sign) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(grid.len());
        self.sdf_stream(mesh, grid, sign, &mut |_first, values| {
            out.extend_from_slice(values);
            Ok(())
        })?;
        Ok(out)
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
