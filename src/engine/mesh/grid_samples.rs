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
        use crate::gpu::grid::GridSamples;
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
            grid: Some(samples),
        };
        let plan = job.plan(&self.gpu, fields, crate::Mode::Surface)?;
        self.run(&plan, grid.len(), Inputs::default(), &mut take)?;
        Ok(true)
    }
}
