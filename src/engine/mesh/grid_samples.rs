//! An SDF grid of a mesh sampled on the device: no points go up (a narrow band lists its boxes
//! instead), distances come back in row order, signed as the rows are answered.

use super::*;
use crate::gpu::grid::{BOX_RECORD_FLOATS, GridRows, GridSamples, ROWS_PER_BOX, lists_boxes};

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
        let samples = GridSamples {
            origin: (grid.origin - mesh.offset).to_f32(),
            spacing: grid.spacing.to_f32(),
            res: grid.res,
        };
        if !samples.fits(self.gpu.chunk_rows) {
            return Ok(false);
        }
        let rows = GridRows::Dense(samples);
        self.grid_rows_on_device(mesh, sign, rows, grid.len(), Inputs::default(), sink)
    }

    /// Whether a narrow band of `grid` lists its boxes to the device, which makes their samples
    /// there (`Engine::box_tiles_on_device`): off where samples are made on the host, where the
    /// grid is too large for a box's records (2^24 a side), or where chunks hold less than a box.
    pub fn lists_boxes_on_device(&self, grid: &crate::sdf::Grid) -> bool {
        self.samples_grids_on_device()
            && lists_boxes(grid.res)
            && self.gpu.chunk_rows >= ROWS_PER_BOX
    }

    /// The distances to `mesh`, signed by `sign`, at the centres of the 2 × 2 × 2 tiles of
    /// `tile` samples a side of each listed box of `grid` (`gpu::grid::box_record`), eight a
    /// box in Morton order (x the slowest), made on the device from the records; a tile
    /// outside its box holds no answer. A row farther than its box's bound may come back +∞
    /// (the walks open nothing farther). `Ok(None)` where the device cannot (as
    /// [`Engine::sdf_on_device`], or chunks too small for a box).
    pub(crate) fn box_tiles_on_device(
        &self,
        mesh: &GpuMesh,
        grid: &crate::sdf::Grid,
        sign: Sign,
        boxes: &[[f32; BOX_RECORD_FLOATS]],
        tile: u32,
    ) -> Result<Option<Vec<f32>>> {
        if !self.lists_boxes_on_device(grid) {
            return Ok(None);
        }
        let rows = GridRows::Boxes {
            origin: (grid.origin - mesh.offset).to_f32(),
            spacing: grid.spacing.to_f32(),
            tile,
        };
        let mut values = Vec::with_capacity(boxes.len() * ROWS_PER_BOX);
        let mut records = |range: std::ops::Range<usize>, mut out: wgpu::WriteOnly<'_, [u8]>| {
            let chunk = &boxes[range.start / ROWS_PER_BOX..range.end.div_ceil(ROWS_PER_BOX)];
            out.copy_from_slice(bytemuck::cast_slice(chunk));
            Ok(())
        };
        let done = self.grid_rows_on_device(
            mesh,
            sign,
            rows,
            boxes.len() * ROWS_PER_BOX,
            Inputs::points(&mut records),
            &mut |_first: usize, answers: &[f32]| {
                values.extend_from_slice(answers);
                Ok(())
            },
        )?;
        Ok(done.then_some(values))
    }

    /// `count` rows made on the device as `rows` says, their distances (only) into `sink` in
    /// row order; `Ok(false)` where the device cannot: a mesh in parts or too small for a
    /// hierarchy, or sign data that does not fit.
    fn grid_rows_on_device(
        &self,
        mesh: &GpuMesh,
        sign: Sign,
        rows: GridRows,
        count: usize,
        inputs: Inputs<'_>,
        sink: &mut dyn FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<bool> {
        use crate::fields::DISTANCE;
        let [part] = mesh.parts.as_slice() else {
            return Ok(false);
        };
        if !part.scene.oriented {
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
            grid: Some(rows),
        };
        let plan = job.plan(&self.gpu, fields, crate::Mode::Surface)?;
        self.run(&plan, count, inputs, &mut take)?;
        Ok(true)
    }
}
