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

/// Fills rows `range` of a job's query points, f64 as read, into the vector (cleared first).
pub type PointRows<'a> = dyn FnMut(std::ops::Range<usize>, &mut Vec<[f64; 3]>) -> Result<()> + 'a;

/// f64 query points from a host slice, copied chunk by chunk (the shift and the f32
/// conversion come after, in `write_query_points`).
pub(super) fn f64_points_from_slice(
    points: &[[f64; 3]],
) -> impl FnMut(std::ops::Range<usize>, &mut Vec<[f64; 3]>) -> Result<()> + '_ {
    move |range, chunk| {
        chunk.clear();
        chunk.extend_from_slice(&points[range]);
        Ok(())
    }
}

/// Where a mesh query's points come from: a slice, read in place, or a caller's rows.
pub(super) enum MeshPoints<'a, 'b> {
    Slice(&'a [[f64; 3]]),
    Rows(&'a mut PointRows<'b>),
}

impl MeshPoints<'_, '_> {
    /// Rows `range`: borrowed from the slice, or filled into `scratch`.
    fn rows<'s>(
        &'s mut self,
        range: std::ops::Range<usize>,
        scratch: &'s mut Vec<[f64; 3]>,
    ) -> Result<&'s [[f64; 3]]> {
        match self {
            MeshPoints::Slice(points) => Ok(&points[range]),
            MeshPoints::Rows(fill) => {
                fill(range, scratch)?;
                Ok(scratch)
            }
        }
    }
}

impl Engine {
    /// Closest point, distance (signed as asked), triangle index and normal for every point.
    pub fn query_mesh(
        &self,
        mesh: &GpuMesh,
        points: &[[f64; 3]],
        sign: Sign,
    ) -> Result<Vec<GpuHit>> {
        let mut out = vec![GpuHit::default(); points.len()];
        let all = Fields::all(Family::Hits);
        let mut sink = |first: usize, rows: PackedRows<'_>| {
            let hits = rows.as_hits().expect("every hit field");
            out[first..first + hits.len()].copy_from_slice(hits);
            Ok(())
        };
        let rows = points.len();
        self.query_mesh_points(mesh, rows, MeshPoints::Slice(points), sign, all, &mut sink)?;
        Ok(out)
    }

    /// [`Engine::query_mesh`] for any number of points: `points` fills a chunk's rows (f64, as
    /// read), `sink` takes each chunk's answers in row order.
    pub fn query_mesh_stream(
        &self,
        mesh: &GpuMesh,
        rows: usize,
        points: &mut PointRows<'_>,
        sign: Sign,
        sink: &mut dyn FnMut(usize, &[GpuHit]) -> Result<()>,
    ) -> Result<()> {
        let all = Fields::all(Family::Hits);
        self.query_mesh_fields_stream(mesh, rows, points, sign, all, &mut |first,
                                                                           rows: PackedRows<
            '_,
        >| {
            sink(first, rows.as_hits().expect("every hit field"))
        })
    }

    /// [`Engine::query_mesh`] computing and moving back only `fields`.
    pub fn query_mesh_fields(
        &self,
        mesh: &GpuMesh,
        points: &[[f64; 3]],
        sign: Sign,
        fields: Fields,
    ) -> Result<Columns> {
        Columns::collect(fields, points.len(), |sink| {
            let rows = points.len();
            self.query_mesh_points(mesh, rows, MeshPoints::Slice(points), sign, fields, sink)
        })
    }

    /// [`Engine::query_mesh_stream`] computing only `fields`: `sink` takes each chunk's rows
    /// packed with the fields asked for (and the distance, when a normal is signed by winding
    /// number: the device's sign pass reads it).
    pub fn query_mesh_fields_stream(
        &self,
        mesh: &GpuMesh,
        rows: usize,
        points: &mut PointRows<'_>,
        sign: Sign,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        self.query_mesh_points(mesh, rows, MeshPoints::Rows(points), sign, fields, sink)
    }

    pub(super) fn query_mesh_points(
        &self,
        mesh: &GpuMesh,
        rows: usize,
        mut points: MeshPoints<'_, '_>,
        sign: Sign,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        use crate::fields::{DISTANCE, POINT};
        let sign = applied_sign(sign, fields);
        let (Some(device_sign), [part]) = (self.device_sign(mesh, sign)?, mesh.parts.as_slice())
        else {
            return match points {
                MeshPoints::Slice(slice) => {
                    let mut source = f64_points_from_slice(slice);
                    self.query_mesh_parts_stream(mesh, rows, &mut source, sign, fields, sink)
                }
                MeshPoints::Rows(source) => {
                    self.query_mesh_parts_stream(mesh, rows, source, sign, fields, sink)
                }
            };
        };
        // The device answers and signs each row; per row the host converts its point to f32
        // and shifts the closest point back to world coordinates in f64, nothing else.
        let device_fields = match device_sign {
            DeviceSign::Winding(_) => fields.with(DISTANCE),
            _ => fields,
        };
        let offset = mesh.offset;
        let mut chunk = Vec::new();
        let mut source = |range: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            write_query_points(points.rows(range, &mut chunk)?, offset, out);
            Ok(())
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
        self.query_scene_signed_stream(
            &part.scene,
            device_sign,
            rows,
            &mut source,
            crate::Mode::Surface,
            device_fields,
            &mut finish,
        )
    }
}
