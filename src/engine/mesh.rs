//! Mesh queries: a mesh uploaded once (`GpuMesh`) and answered through its triangle scene,
//! shifted back and signed on the host (pseudonormals) or the device (winding numbers).

use super::Engine;
use crate::error::{Error, Result};
use crate::fields::{Columns, Family, Fields, PackedRows, PackedSink, pack_hits};
use crate::gpu::{GpuHit, GpuScene, write_query_points};
use crate::math::DVec3;
use crate::mesh::{Mesh, Pseudonormals, Sign};
use crate::winding::WindingTree;

/// A mesh uploaded once and queried many times: its triangles live on the device as a scene
/// (one BVH), moved in f64 so the mesh's centre is the origin before they are rounded to f32, so
/// a mesh far from the origin keeps its precision. Query points take the same shift.
pub struct GpuMesh {
    mesh: Mesh,
    offset: DVec3,
    scene: GpuScene,
    /// Built on the first query that signs at all.
    normals: std::sync::OnceLock<Pseudonormals>,
    /// The winding-number hierarchy on the device (`WindingTree::gpu_words`), uploaded on the
    /// first query that signs by winding number.
    winding: std::sync::OnceLock<wgpu::Buffer>,
}

impl GpuMesh {
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// Bytes it holds on the device, its winding tree's counted whether or not a query has
    /// built it yet (a budget must not be overrun later by a winding query).
    pub fn device_bytes(&self) -> u64 {
        self.scene.device_bytes() + WindingTree::max_gpu_bytes(self.mesh.triangles.len())
    }

    /// Shift a chunk's answers back to world coordinates and sign them. `points` are the
    /// chunk's query points as given.
    fn finish(&self, points: &[[f64; 3]], hits: &mut [GpuHit], sign: Sign) {
        use rayon::prelude::*;
        // Built on first use: an unsigned query needs none.
        let normals = (sign != Sign::None)
            .then(|| self.normals.get_or_init(|| Pseudonormals::new(&self.mesh)));
        hits.par_iter_mut()
            .zip(points.par_iter())
            .with_min_len(1024)
            .for_each(|(hit, p)| {
                if hit.shape < 0 {
                    return;
                }
                let q = DVec3::new(
                    hit.point[0] as f64,
                    hit.point[1] as f64,
                    hit.point[2] as f64,
                ) + self.offset;
                hit.point = q.to_f32();
                let Some(normals) = normals else {
                    return;
                };
                let t = hit.shape as usize;
                let (s, normal) = if sign == Sign::Winding {
                    // The device marked the inside by the distance's sign bit (−0 on the
                    // surface) and left the rest as it was.
                    let inside = hit.distance.is_sign_negative();
                    hit.distance = hit.distance.abs();
                    (if inside { -1.0 } else { 1.0 }, normals.face(t))
                } else {
                    normals.sign(&self.mesh, t, DVec3::new(p[0], p[1], p[2]))
                };
                hit.distance *= s as f32;
                hit.normal = if hit.distance != 0.0 {
                    hit.normal.map(|x| x * s as f32)
                } else {
                    normal.to_f32()
                };
            });
    }

    /// The winding tree on the device, built and uploaded on first use.
    fn winding_buffer(&self, engine: &Engine) -> Result<&wgpu::Buffer> {
        if let Some(buffer) = self.winding.get() {
            return Ok(buffer);
        }
        let words = WindingTree::new(&self.mesh).gpu_words(&self.mesh, self.offset);
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let max = engine.gpu.limits.max_storage_buffer_binding_size;
        if bytes.len() as u64 > max {
            return Err(Error::Usage(format!(
                "the mesh's winding-number hierarchy takes {} bytes, more than one storage \
                 binding holds on this adapter ({max} bytes); use --sign pseudonormal",
                bytes.len()
            )));
        }
        let buffer = engine
            .gpu
            .checked(|| engine.gpu.storage_buffer("winding tree", bytes))?;
        Ok(self.winding.get_or_init(|| buffer))
    }
}

/// Fills rows `range` of a job's query points, f64 as read, into the vector (cleared first).
pub type PointRows<'a> = dyn FnMut(std::ops::Range<usize>, &mut Vec<[f64; 3]>) -> Result<()> + 'a;

/// f64 query points from a host slice, copied chunk by chunk (the shift and the f32
/// conversion come after, in `write_query_points`).
fn f64_points_from_slice(
    points: &[[f64; 3]],
) -> impl FnMut(std::ops::Range<usize>, &mut Vec<[f64; 3]>) -> Result<()> + '_ {
    move |range, chunk| {
        chunk.clear();
        chunk.extend_from_slice(&points[range]);
        Ok(())
    }
}

impl Engine {
    /// Upload a mesh: its BVH is built once, on the CPU, and stays on the device.
    pub fn upload_mesh(&self, mesh: Mesh) -> Result<GpuMesh> {
        self.upload_mesh_admitted(mesh, |_| Ok(()))
    }

    /// [`Engine::upload_mesh`], asking `admit` first with the device bytes the mesh will take
    /// ([`GpuMesh::device_bytes`]), before any is allocated; its refusal is returned.
    pub fn upload_mesh_admitted<E: From<Error>>(
        &self,
        mesh: Mesh,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuMesh, E> {
        let offset = mesh.centre();
        let winding = WindingTree::max_gpu_bytes(mesh.triangles.len());
        let scene =
            self.upload_scene_admitted(&mesh.shapes(offset), |bytes| admit(bytes + winding))?;
        Ok(GpuMesh {
            normals: std::sync::OnceLock::new(),
            winding: std::sync::OnceLock::new(),
            mesh,
            offset,
            scene,
        })
    }

    /// Closest point, distance (signed as asked), triangle index and normal for every point.
    pub fn query_mesh(
        &self,
        mesh: &GpuMesh,
        points: &[[f64; 3]],
        sign: Sign,
    ) -> Result<Vec<GpuHit>> {
        let mut out = vec![GpuHit::default(); points.len()];
        self.query_mesh_stream(
            mesh,
            points.len(),
            &mut f64_points_from_slice(points),
            sign,
            &mut |first: usize, hits: &[GpuHit]| {
                out[first..first + hits.len()].copy_from_slice(hits);
                Ok(())
            },
        )?;
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
            let mut source = f64_points_from_slice(points);
            self.query_mesh_fields_stream(mesh, points.len(), &mut source, sign, fields, sink)
        })
    }

    /// [`Engine::query_mesh_stream`] computing only `fields`: `sink` takes each chunk's rows
    /// packed with the fields asked for and those the job needs on the way (the triangle
    /// index always: the rounds seed from it and signs start from it; the distance when a
    /// signed normal is asked for).
    pub fn query_mesh_fields_stream(
        &self,
        mesh: &GpuMesh,
        rows: usize,
        points: &mut PointRows<'_>,
        sign: Sign,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        use crate::fields::{DISTANCE, NORMAL, SHAPE};
        // Signs change only distances and normals.
        let sign = if fields.contains(DISTANCE | NORMAL) {
            sign
        } else {
            Sign::None
        };
        let mut device_fields = fields.with(SHAPE);
        if sign != Sign::None {
            device_fields = device_fields.with(DISTANCE);
        }
        // Each chunk's points wait here from fill to drain (at most two chunks are in flight).
        let pending = std::cell::RefCell::new(std::collections::VecDeque::new());
        let offset = mesh.offset;
        let mut source = |range: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            let mut chunk = Vec::with_capacity(range.len());
            points(range, &mut chunk)?;
            write_query_points(chunk.iter().copied(), offset, out);
            pending.borrow_mut().push_back(chunk);
            Ok(())
        };
        let (mut answers, mut packed) = (Vec::new(), Vec::new());
        let mut finish = |first: usize, rows: PackedRows<'_>| {
            let chunk = pending
                .borrow_mut()
                .pop_front()
                .expect("every chunk was filled before it is drained");
            answers.clear();
            match rows.as_hits() {
                Some(hits) => answers.extend_from_slice(hits),
                None => answers.extend((0..rows.len()).map(|i| rows.hit(i))),
            }
            mesh.finish(&chunk, &mut answers, sign);
            if device_fields.is_all() {
                return sink.take(
                    first,
                    PackedRows::new(device_fields, bytemuck::cast_slice(&answers)),
                );
            }
            pack_hits(device_fields, &answers, &mut packed);
            sink.take(first, PackedRows::new(device_fields, &packed))
        };
        let winding = match sign {
            Sign::Winding => Some(mesh.winding_buffer(self)?),
            _ => None,
        };
        self.query_scene_signed_stream(
            &mesh.scene,
            winding,
            rows,
            &mut source,
            crate::Mode::Surface,
            device_fields,
            &mut finish,
        )
    }
}
