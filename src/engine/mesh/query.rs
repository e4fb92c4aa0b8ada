//! The mesh query jobs: points shifted by the mesh's centre in f64, answered, shifted back.

use super::*;

/// Shift the closest points of packed `rows` (which hold the point field) from the mesh's
/// frame back to world coordinates, in f64 as `GpuMesh::finish` does.
pub(super) fn shift_points(fields: Fields, rows: &mut [u32], offset: DVec3) {
    use rayon::prelude::*;
    let at = fields.offset_words(crate::fields::POINT);
    let offset = [offset.x, offset.y, offset.z];
    rows.par_chunks_exact_mut(fields.row_words())
        .with_min_len(1024)
        .for_each(|row| {
            for (word, shift) in row[at..at + 3].iter_mut().zip(offset) {
                *word = ((f32::from_bits(*word) as f64 + shift) as f32).to_bits();
            }
        });
}

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
        use crate::fields::{DISTANCE, POINT};
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
        let mut shifted = Vec::new();
        let mut finish = |first: usize, rows: PackedRows<'_>| {
            if !device_fields.contains(POINT) {
                return sink.take(first, rows);
            }
            shifted.clear();
            shifted.extend_from_slice(rows.words());
            shift_points(device_fields, &mut shifted, offset);
            sink.take(first, PackedRows::new(device_fields, &shifted))
        };
        let job = crate::gpu::plan::Job::Nearest {
            scene: &part.scene,
            sign: device_sign,
            grid: None,
        };
        let plan = job.plan(&self.gpu, device_fields, crate::Mode::Surface)?;
        self.run(&plan, rows, Inputs::points(&mut source), &mut finish)
    }
}
