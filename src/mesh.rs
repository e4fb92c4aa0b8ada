//! Triangle meshes (SPEC §4): the checked triangle soup (`Mesh`; its files are read by
//! `io::mesh`), pseudonormal and winding signs, and the mesh queries. An index out of range or
//! a mesh without triangles is an error naming the file and the problem; degenerate triangles
//! are kept (they are answered like any other).

use crate::error::{Error, Result};
use crate::fields::{Columns, Family, Fields, PackedRows, pack_hits};
use crate::gpu::{Engine, GpuHit, PackedSink};
use crate::math::DVec3;
use crate::shape::Shape;

/// A triangle soup with shared vertices, in f64 as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub vertices: Vec<DVec3>,
    pub triangles: Vec<[u32; 3]>,
}

impl Mesh {
    /// Check indices and coordinates, and that there is at least one triangle.
    pub fn new(vertices: Vec<DVec3>, triangles: Vec<[u32; 3]>, file: &str) -> Result<Mesh> {
        let bad = |problem: String| Error::BadFile {
            file: file.to_string(),
            problem,
        };
        if triangles.is_empty() {
            return Err(bad("the mesh has no triangles".into()));
        }
        if let Some((i, v)) = vertices
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && v.max_abs() <= f32::MAX as f64))
        {
            return Err(bad(format!(
                "vertex {i} is ({}, {}, {}): coordinates must be finite f32 values",
                v.x, v.y, v.z
            )));
        }
        for (t, tri) in triangles.iter().enumerate() {
            if let Some(&k) = tri.iter().find(|&&k| k as usize >= vertices.len()) {
                return Err(bad(format!(
                    "triangle {t} uses vertex {k}, but there are only {} vertices",
                    vertices.len()
                )));
            }
        }
        Ok(Mesh {
            vertices,
            triangles,
        })
    }

    /// Triangle `t`'s corners.
    pub fn corners(&self, t: usize) -> [DVec3; 3] {
        self.triangles[t].map(|k| self.vertices[k as usize])
    }

    /// The centre of the bounding box (meshes are shifted there before the f32 upload).
    pub fn centre(&self) -> DVec3 {
        let (lo, hi) = self.bounds();
        (lo + hi) * 0.5
    }

    /// The bounding box of the vertices the triangles use.
    pub fn bounds(&self) -> (DVec3, DVec3) {
        let mut lo = DVec3::new(f64::INFINITY, f64::INFINITY, f64::INFINITY);
        let mut hi = -lo;
        for &k in self.triangles.iter().flatten() {
            let v = self.vertices[k as usize];
            lo = DVec3::new(lo.x.min(v.x), lo.y.min(v.y), lo.z.min(v.z));
            hi = DVec3::new(hi.x.max(v.x), hi.y.max(v.y), hi.z.max(v.z));
        }
        (lo, hi)
    }

    /// The triangles as scene shapes, moved by `-offset` (shape i is triangle i).
    pub fn shapes(&self, offset: DVec3) -> Vec<Shape> {
        (0..self.triangles.len())
            .map(|t| {
                let [a, b, c] = self.corners(t).map(|v| v - offset);
                Shape::Triangle { a, b, c }
            })
            .collect()
    }
}

pub use crate::io::mesh::load_mesh;

/// How a mesh query signs its distances (SPEC §4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sign {
    /// Unsigned distance.
    #[default]
    None,
    /// Negative inside, by the angle-weighted pseudonormal of the closest feature (Bærentzen &
    /// Aanæs): exact for closed, consistently wound manifold meshes.
    Pseudonormal,
    /// Negative where the generalized winding number exceeds ½ (hierarchical, within 0.01 of
    /// the exact sum): robust on meshes with holes and self-intersections.
    Winding,
}

impl Sign {
    /// A sign method by name (`none`, `pseudonormal`, `winding`), as the Python package and the
    /// service take it; anything else is a usage error listing the names.
    pub fn parse(name: &str) -> Result<Sign> {
        match name {
            "none" => Ok(Sign::None),
            "pseudonormal" => Ok(Sign::Pseudonormal),
            "winding" => Ok(Sign::Winding),
            other => Err(Error::Usage(format!(
                "sign: unknown sign `{other}`; the valid ones are none, pseudonormal, winding"
            ))),
        }
    }
}

/// The feature of a triangle a closest point lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Face,
    /// Between corners i and j of the triangle (0, 1, 2).
    Edge(usize, usize),
    Vertex(usize),
}

/// Closest point of triangle `[a, b, c]` to `p` in f64, and the feature it lies on (Voronoi
/// regions of the corners, then the edges, then the face). Degenerate triangles are answered
/// by their edges.
pub fn closest_feature(p: DVec3, [a, b, c]: [DVec3; 3]) -> (DVec3, Feature) {
    if crate::math::triangle_unit_normal(a, b, c) == DVec3::ZERO {
        return closest_on_edges(p, [a, b, c]);
    }
    let (ab, ac, ap) = (b - a, c - a, p - a);
    let (d1, d2) = (ab.dot(ap), ac.dot(ap));
    if d1 <= 0.0 && d2 <= 0.0 {
        return (a, Feature::Vertex(0));
    }
    let bp = p - b;
    let (d3, d4) = (ab.dot(bp), ac.dot(bp));
    if d3 >= 0.0 && d4 <= d3 {
        return (b, Feature::Vertex(1));
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return (a + ab * (d1 / (d1 - d3)), Feature::Edge(0, 1));
    }
    let cp = p - c;
    let (d5, d6) = (ab.dot(cp), ac.dot(cp));
    if d6 >= 0.0 && d5 <= d6 {
        return (c, Feature::Vertex(2));
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return (a + ac * (d2 / (d2 - d6)), Feature::Edge(0, 2));
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return (b + (c - b) * w, Feature::Edge(1, 2));
    }
    let denom = va + vb + vc;
    if denom <= 0.0 {
        return closest_on_edges(p, [a, b, c]);
    }
    (a + ab * (vb / denom) + ac * (vc / denom), Feature::Face)
}

fn closest_on_edges(p: DVec3, corners: [DVec3; 3]) -> (DVec3, Feature) {
    let mut best: Option<(DVec3, Feature)> = None;
    for (i, j) in [(0, 1), (1, 2), (0, 2)] {
        let (a, b) = (corners[i], corners[j]);
        let ab = b - a;
        let len2 = ab.length_squared();
        let t = if len2 > 0.0 {
            ((p - a).dot(ab) / len2).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let candidate = match t {
            0.0 => (a, Feature::Vertex(i)),
            1.0 => (b, Feature::Vertex(j)),
            _ => (a + ab * t, Feature::Edge(i, j)),
        };
        if best.is_none_or(|(q, _)| (p - candidate.0).length_squared() < (p - q).length_squared()) {
            best = Some(candidate);
        }
    }
    best.expect("three edges")
}

/// Angle-weighted pseudonormals of a mesh's faces, edges and vertices (f64, not normalised
/// except the faces').
pub struct Pseudonormals {
    face: Vec<DVec3>,
    vertex: Vec<DVec3>,
    edge: std::collections::HashMap<(u32, u32), DVec3>,
}

impl Pseudonormals {
    pub fn new(mesh: &Mesh) -> Pseudonormals {
        let mut vertex = vec![DVec3::ZERO; mesh.vertices.len()];
        let mut edge = std::collections::HashMap::with_capacity(mesh.triangles.len() * 3 / 2);
        let mut face = Vec::with_capacity(mesh.triangles.len());
        for (t, tri) in mesh.triangles.iter().enumerate() {
            let corners = mesh.corners(t);
            let n = crate::math::triangle_unit_normal(corners[0], corners[1], corners[2]);
            face.push(n);
            for k in 0..3 {
                let (u, v) = (
                    corners[(k + 1) % 3] - corners[k],
                    corners[(k + 2) % 3] - corners[k],
                );
                let angle = u.cross(v).length().atan2(u.dot(v));
                vertex[tri[k] as usize] = vertex[tri[k] as usize] + n * angle;
                let (i, j) = (tri[k], tri[(k + 1) % 3]);
                let key = (i.min(j), i.max(j));
                let sum = edge.entry(key).or_insert(DVec3::ZERO);
                *sum = *sum + n;
            }
        }
        Pseudonormals { face, vertex, edge }
    }

    /// The sign of `p` against triangle `t` of `mesh`, with the unit pseudonormal of the
    /// feature nearest to `p` (zero where it vanishes, e.g. on a degenerate sliver).
    pub fn sign(&self, mesh: &Mesh, t: usize, p: DVec3) -> (f64, DVec3) {
        let (q, feature) = closest_feature(p, mesh.corners(t));
        let tri = mesh.triangles[t];
        let normal = match feature {
            Feature::Face => self.face[t],
            Feature::Vertex(k) => self.vertex[tri[k] as usize],
            Feature::Edge(i, j) => {
                let (u, v) = (tri[i], tri[j]);
                self.edge[&(u.min(v), u.max(v))]
            }
        }
        .normalize_or_zero();
        let sign = if (p - q).dot(normal) < 0.0 { -1.0 } else { 1.0 };
        (sign, normal)
    }
}

/// A mesh uploaded once and queried many times: its triangles live on the device as a scene
/// (one BVH), moved in f64 so the mesh's centre is the origin before they are rounded to f32, so
/// a mesh far from the origin keeps its precision. Query points take the same shift.
pub struct GpuMesh {
    mesh: Mesh,
    offset: DVec3,
    scene: crate::gpu::GpuScene,
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
        self.scene.device_bytes()
            + crate::winding::WindingTree::max_gpu_bytes(self.mesh.triangles.len())
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
                    (if inside { -1.0 } else { 1.0 }, normals.face[t])
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
        let words = crate::winding::WindingTree::new(&self.mesh).gpu_words(&self.mesh, self.offset);
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let max = engine.limits().max_storage_buffer_binding_size;
        if bytes.len() as u64 > max {
            return Err(Error::Usage(format!(
                "the mesh's winding-number hierarchy takes {} bytes, more than one storage \
                 binding holds on this adapter ({max} bytes); use --sign pseudonormal",
                bytes.len()
            )));
        }
        let buffer = engine.checked(|| engine.storage_buffer("winding tree", bytes))?;
        Ok(self.winding.get_or_init(|| buffer))
    }
}

/// Fills rows `range` of a job's query points, f64 as read, into the vector (cleared first).
pub type PointRows<'a> = dyn FnMut(std::ops::Range<usize>, &mut Vec<[f64; 3]>) -> Result<()> + 'a;

/// Query points from a host slice, copied chunk by chunk.
fn points_from_slice(
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
        let winding = crate::winding::WindingTree::max_gpu_bytes(mesh.triangles.len());
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
            &mut points_from_slice(points),
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
            let mut source = points_from_slice(points);
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
            let (values, _) = out.into_chunks::<4>();
            values.write_iter(chunk.iter().flat_map(|p| {
                [p[0] - offset.x, p[1] - offset.y, p[2] - offset.z]
                    .map(|x| (x as f32).to_le_bytes())
            }));
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

/// Generalized winding number of `mesh` at `p` in f64: the sum of the triangles' signed solid
/// angles over 4π (Van Oosterom & Strackee). About 1 inside a closed, outward-wound mesh, 0
/// outside, and a smooth in-between across holes. The exact sum, one term per triangle (see
/// `winding::WindingTree` for the fast one).
pub fn winding_number(mesh: &Mesh, p: DVec3) -> f64 {
    (0..mesh.triangles.len())
        .map(|t| triangle_winding_number(mesh.corners(t), p))
        .sum()
}

/// One triangle's signed solid angle at `p`, over 4π.
pub fn triangle_winding_number(corners: [DVec3; 3], p: DVec3) -> f64 {
    let [a, b, c] = corners.map(|v| v - p);
    let (la, lb, lc) = (a.length(), b.length(), c.length());
    let numerator = a.dot(b.cross(c));
    let denominator = la * lb * lc + a.dot(b) * lc + b.dot(c) * la + c.dot(a) * lb;
    numerator.atan2(denominator) / (2.0 * std::f64::consts::PI)
}
