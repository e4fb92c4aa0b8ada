//! An SDF grid of a mesh sampled on the device: no points go up, distances come back in C
//! order, signed as the rows are answered.

use super::*;

impl Engine {
    /// The distances of `grid`'s samples to `mesh`, signed by `sign`, computed wholly on the
    /// device (`gpu::grid`): the samples from the grid's corner and spacing, the signs there,
    /// each chunk's distances written in C order. `Ok(false)` where the device cannot: a mesh
    /// in parts or too small for a hierarchy, sign data that does not fit, or a z-row longer
    /// than a chunk.
    pub(crate) fn sdf_on_device(
        &self,
        mesh: &GpuMesh,
        grid: &crate::sdf::Grid,
        sign: Sign,
        sink: &mut dyn FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<bool> {
        use crate::fields::DISTANCE;
        use crate::gpu::grid::{GridRows, GridSamples};
        let samples = GridSamples {
            origin: (grid.origin - mesh.offset).to_f32(),
            spacing: grid.spacing.to_f32(),
            res: grid.res,
        };
        let [part] = mesh.parts.as_slice() else {
            return Ok(false);
        };
        if !part.scene.oriented || !samples.fits(self.gpu.chunk_rows) {
            return Ok(false);
        }
        let Some(sign) = self.device_sign(mesh, sign)? else {
            return Ok(false);
        };
        // Rows keep their triangle on the device only (`Params::kept_shapes`).
        let fields = Fields::from_bits(Family::Hits, DISTANCE);
        let mut take =
            |first: usize, rows: PackedRows<'_>| sink(first, bytemuck::cast_slice(rows.words()));
        let job = crate::gpu::plan::Job::Nearest {
            scene: &part.scene,
            sign,
            grid: Some(GridRows::Dense(samples)),
        };
        let plan = job.plan(&self.gpu, fields, crate::Mode::Surface)?;
        self.run(&plan, grid.len(), Inputs::default(), &mut take)?;
        Ok(true)
    }
}

impl Engine {
    /// The distances to `mesh`, signed by `sign`, at the centres of the 2 × 2 × 2 tiles of
    /// `tile` samples a side of each listed box of `grid` (`gpu::grid::box_record`), eight a
    /// box in Morton order (x the slowest), made on the device from the records; a tile
    /// outside its box holds no answer. `Ok(None)` where the device cannot (as
    /// [`Engine::sdf_on_device`]).
    pub(crate) fn box_tiles_on_device(
        &self,
        mesh: &GpuMesh,
        grid: &crate::sdf::Grid,
        sign: Sign,
        boxes: &[[f32; 4]],
        tile: u32,
    ) -> Result<Option<Vec<f32>>> {
        use crate::fields::DISTANCE;
        use crate::gpu::grid::{GridRows, ROWS_PER_BOX, lists_boxes};
        let [part] = mesh.parts.as_slice() else {
            return Ok(None);
        };
        if !(part.scene.oriented && lists_boxes(grid.res) && self.gpu.chunk_rows >= ROWS_PER_BOX) {
            return Ok(None);
        }
        let Some(sign) = self.device_sign(mesh, sign)? else {
            return Ok(None);
        };
        let rows = GridRows::Boxes {
            origin: (grid.origin - mesh.offset).to_f32(),
            spacing: grid.spacing.to_f32(),
            tile,
        };
        let fields = Fields::from_bits(Family::Hits, DISTANCE);
        let mut values = Vec::with_capacity(boxes.len() * ROWS_PER_BOX);
        let mut take = |_first: usize, rows: PackedRows<'_>| {
            values.extend_from_slice(bytemuck::cast_slice(rows.words()));
            Ok(())
        };
        let mut records = |range: std::ops::Range<usize>, mut out: wgpu::WriteOnly<'_, [u8]>| {
            let chunk = &boxes[range.start / ROWS_PER_BOX..range.end.div_ceil(ROWS_PER_BOX)];
            out.copy_from_slice(bytemuck::cast_slice(chunk));
            Ok(())
        };
        let job = crate::gpu::plan::Job::Nearest {
            scene: &part.scene,
            sign,
            grid: Some(rows),
        };
        let plan = job.plan(&self.gpu, fields, crate::Mode::Surface)?;
        self.run(
            &plan,
            boxes.len() * ROWS_PER_BOX,
            Inputs::points(&mut records),
            &mut take,
        )?;
        Ok(Some(values))
    }
}
