//! The mesh query jobs: points shifted by the mesh's centre in f64, answered, shifted back.

use super::*;

/// A mesh query: [`Engine::query_mesh`].
pub struct MeshQuery<'a> {
    pub mesh: &'a GpuMesh,
    pub points: Points<'a>,
    pub sign: Sign,
    pub fields: Fields,
}

impl Engine {
    /// A mesh query (SPEC §4): closest point, distance (signed as `job.sign` says), triangle
    /// index and normal for every point, only `job.fields` computed (and the distance, when a
    /// normal is signed by winding number: the device's sign pass reads it). `sink` as for
    /// [`Engine::query_scene`].
    pub fn query_mesh(&self, job: MeshQuery<'_>, sink: &mut dyn PackedSink) -> Result<()> {
        let MeshQuery {
            mesh,
            mut points,
            sign,
            fields,
        } = job;
        use crate::fields::DISTANCE;
        let rows = points.len();
        let sign = applied_sign(sign, fields);
        let (Some(device_sign), [part]) = (self.device_sign(mesh, sign)?, mesh.parts.as_slice())
        else {
            return self.query_mesh_parts_stream(mesh, points, sign, fields, sink);
        };
        // The device answers and signs each row; per row the host converts its point to f32
        // and shifts the closest point back to world coordinates in f64, nothing else.
        let device_fields = match device_sign {
            DeviceSign::Winding(_) => fields.with(DISTANCE),
            _ => fields,
        };
        let offset = mesh.offset;
        let mut chunk = PointChunk::default();
        let mut source = |range: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            points.write(range, offset, &mut chunk, out)
        };
        let mut finish = crate::fields::points_moved(offset, sink);
        let job = crate::gpu::plan::Job::Nearest {
            scene: &part.scene,
            sign: device_sign,
            grid: None,
        };
        let plan = job.plan(&self.gpu, device_fields, crate::Mode::Surface)?;
        self.run(&plan, rows, Inputs::points(&mut source), &mut finish)
    }
}
