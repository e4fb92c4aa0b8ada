//! Mesh queries: a mesh uploaded once (`GpuMesh`) and answered through its triangle scene,
//! shifted back and signed on the host (pseudonormals) or the device (winding numbers).

use super::Engine;
use crate::error::{Error, Result};
use crate::fields::{Columns, Family, Fields, PackedRows, PackedSink, pack_hits};
use crate::gpu::plan::DeviceSign;
use crate::gpu::{GpuHit, GpuScene, MeshRecords, write_query_points, write_query_points_iter};
use crate::math::DVec3;
use crate::mesh::{Mesh, Pseudonormals, Sign, face_normal};
use crate::winding::WindingTree;

/// A mesh uploaded once and queried many times: its triangles live on the device as a scene
/// (one BVH), moved in f64 so the mesh's centre is the origin before they are rounded to f32, so
/// a mesh far from the origin keeps its precision. Query points take the same shift.
///
/// A mesh whose triangles or hierarchy would not fit one storage binding is cut into spatial
/// parts that each do (SPEC §4 "Size"): every part is a scene of its own, each block of query
/// rows is answered by every part in turn and the nearest answer kept, ties to the lower
/// triangle index as everywhere.
pub struct GpuMesh {
    mesh: Mesh,
    offset: DVec3,
    parts: Vec<MeshPart>,
    /// The pseudonormal table on the device (`Pseudonormals::gpu_words`), uploaded on the
    /// first query that signs by pseudonormal, where it fits one binding beside a one-part
    /// mesh.
    device_normals: std::sync::OnceLock<wgpu::Buffer>,
    /// The same on the host, which signs by pseudonormal where it does not.
    normals: std::sync::OnceLock<Pseudonormals>,
    /// The winding-number hierarchy on the host, which signs by winding number where the
    /// device does not: a mesh in parts, too small for a hierarchy or uploaded without its
    /// clusters (`Engine::upload_mesh_with`).
    host_winding: std::sync::OnceLock<WindingTree>,
}

/// One part of a mesh on the device: a scene of some of its triangles.
struct MeshPart {
    scene: GpuScene,
    /// The least and greatest corner of its triangles' box, in world coordinates.
    bounds: (DVec3, DVec3),
    /// The mesh's index of each of the scene's triangles, ascending (empty: all of them, in
    /// order).
    triangles: Vec<u32>,
}

/// Device bytes per triangle that bound a part: its packed record (48 bytes) and index words
/// (8), and at most one 64-byte hierarchy node per triangle, each within one binding.
const PART_BYTES_PER_TRIANGLE: u64 = 64;

/// Texels per triangle that bound a part: its packed record (3) and at most one node (4) per
/// triangle, all within one texture.
const PART_TEXELS_PER_TRIANGLE: u64 = 7;

/// The same for indexed records: the record (1.5), at most one node (4) and at most three
/// vertices of its own (3), rounded up.
const INDEXED_PART_TEXELS_PER_TRIANGLE: u64 = 9;

/// Device bytes of indexed records per triangle (record, index words and about a quarter of a
/// hierarchy node), besides a texel (16) per vertex.
const INDEXED_BYTES_PER_TRIANGLE: u64 = 48;

/// Host bytes per triangle a scene's build holds at its peak: the sorted entries (32), the
/// leaf order (8), nodes and spans, then the packed records beside the nodes (measured on the
/// 2M-triangle torus: about 150 with 56-byte entries, about 80 since; docs/perf-history.md). Kept
/// high: it only decides whether a build is refused up front.
const BUILD_BYTES_PER_TRIANGLE: u64 = 160;

/// The most bytes a one-part mesh's pseudonormal table takes on the device (without vertex
/// indices beside `indexed` records, which hold them), built by the first query that signs
/// by pseudonormal.
fn sign_data_bytes(mesh: &Mesh, indexed: bool) -> u64 {
    Pseudonormals::max_gpu_bytes(mesh.triangles.len(), mesh.vertices.len(), !indexed)
}

/// The most bytes a mesh's winding clusters take on the device if it has them: twelve words a
/// node, fewer nodes than triangles.
fn cluster_bytes(mesh: &Mesh, clusters: bool) -> u64 {
    if clusters {
        48 * mesh.triangles.len() as u64
    } else {
        0
    }
}

/// Chunks of rows a many-part mesh answers per block: every part runs over the block in turn.
const PART_BLOCK_CHUNKS: usize = 4;

/// The mesh's triangles cut into spatial parts of at most `cap` triangles each: halved at the
/// median centroid along the longest extent until they fit. Each part is ascending.
fn spatial_parts(mesh: &Mesh, cap: usize) -> Vec<Vec<u32>> {
    let centroid = |t: u32| {
        let [a, b, c] = mesh.corners(t as usize);
        (a + b + c) * (1.0 / 3.0)
    };
    let mut parts = Vec::new();
    let mut work = vec![(0..mesh.triangles.len() as u32).collect::<Vec<u32>>()];
    while let Some(mut part) = work.pop() {
        if part.len() <= cap.max(1) {
            part.sort_unstable();
            parts.push(part);
            continue;
        }
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for &t in &part {
            let c = centroid(t);
            for k in 0..3 {
                lo[k] = lo[k].min(c.get(k));
                hi[k] = hi[k].max(c.get(k));
            }
        }
        let axis = (DVec3::from_array(hi) - DVec3::from_array(lo)).longest_axis();
        let mid = part.len() / 2;
        part.select_nth_unstable_by(mid, |&a, &b| {
            centroid(a).get(axis).total_cmp(&centroid(b).get(axis))
        });
        let right = part.split_off(mid);
        work.push(right);
        work.push(part);
    }
    parts
}

/// Device bytes of the mesh's triangles, stored indexed or packed (hierarchy included).
fn mesh_device_estimate(mesh: &Mesh, indexed: bool) -> u64 {
    let triangles = mesh.triangles.len() as u64;
    if indexed {
        triangles * INDEXED_BYTES_PER_TRIANGLE + 16 * mesh.vertices.len() as u64
    } else {
        triangles * PART_BYTES_PER_TRIANGLE
    }
}

/// The vertices of the mesh's triangles `indices` (all of them if `None`), shifted by
/// `-offset` and rounded to f32, and, for a part, its triangles' corners renumbered into them
/// (the mesh's own indices otherwise).
fn part_vertices(
    mesh: &Mesh,
    offset: DVec3,
    indices: Option<&[u32]>,
) -> (Vec<[f32; 3]>, Option<Vec<[u32; 3]>>) {
    let shifted = |v: DVec3| (v - offset).to_f32();
    let Some(indices) = indices else {
        return (mesh.vertices.iter().map(shifted).collect(), None);
    };
    let mut local = vec![u32::MAX; mesh.vertices.len()];
    let mut vertices = Vec::new();
    let corner_ids = indices
        .iter()
        .map(|&t| {
            mesh.triangles[t as usize].map(|v| {
                if local[v as usize] == u32::MAX {
                    local[v as usize] = vertices.len() as u32;
                    vertices.push(shifted(mesh.vertices.get(v as usize)));
                }
                local[v as usize]
            })
        })
        .collect();
    (vertices, Some(corner_ids))
}

/// How a mesh goes up (`Engine::plan_mesh`).
struct MeshPlan {
    /// Its triangles are stored indexed, not packed.
    indexed: bool,
    /// It fits one binding: one scene, and its sign data may go on the device.
    one_part: bool,
    /// The most triangles a part holds otherwise.
    cap: u64,
    /// Bytes its pseudonormal table may take on the device (`sign_data_bytes`; 0 for a mesh in
    /// parts).
    sign_data: u64,
}

/// The distance from `p` to the box `bounds` (0 inside).
fn box_distance(bounds: (DVec3, DVec3), p: DVec3) -> f64 {
    let (lo, hi) = bounds;
    let gap = |k: usize| (lo.get(k) - p.get(k)).max(p.get(k) - hi.get(k)).max(0.0);
    DVec3::new(gap(0), gap(1), gap(2)).length()
}

/// The part whose box is nearest to `p` (the first of equals; the first for a point that is
/// not one).
fn nearest_box(parts: &[MeshPart], p: [f64; 3]) -> usize {
    let p = DVec3::new(p[0], p[1], p[2]);
    (0..parts.len())
        .min_by(|&a, &b| {
            box_distance(parts[a].bounds, p).total_cmp(&box_distance(parts[b].bounds, p))
        })
        .unwrap_or(0)
}

/// Whether a part whose box is `bounds` may hold a triangle nearer to `p` than `best`, or as
/// near: its box is no farther than `best` plus twice SPEC §3's tolerance, more than the
/// device's distances ever fall below the exact ones, so a part passed over could only have
/// given a farther answer. A row without an answer to better (not a point, or a walk that
/// outgrew its stack) asks no more parts. `mesh_scale` is the mesh's largest coordinate.
fn may_hold_nearer(bounds: (DVec3, DVec3), p: [f64; 3], best: &GpuHit, mesh_scale: f64) -> bool {
    if best.shape < 0 {
        return false;
    }
    let p = DVec3::new(p[0], p[1], p[2]);
    let tolerance = crate::tolerance(p.max_abs().max(mesh_scale));
    box_distance(bounds, p) <= best.distance as f64 + 2.0 * tolerance
}

/// Keep the nearer of two answers for one row, ties to the lower triangle index; an
/// overflowed traversal stays overflowed and a non-finite row stays as it is.
fn keep_nearer(best: &mut GpuHit, candidate: GpuHit) {
    use crate::fields::TRAVERSAL_OVERFLOW;
    if best.shape == -1 || best.shape == TRAVERSAL_OVERFLOW {
        return;
    }
    if candidate.shape == TRAVERSAL_OVERFLOW
        || candidate.distance < best.distance
        || (candidate.distance == best.distance && candidate.shape < best.shape)
    {
        *best = candidate;
    }
}

impl GpuMesh {
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// Bytes it holds on the device, its winding clusters and its pseudonormal table counted
    /// whether or not a query has built the table yet (a budget must not be overrun later by a
    /// signed query).
    pub fn device_bytes(&self) -> u64 {
        let sign_data = match self.parts.as_slice() {
            [part] => sign_data_bytes(&self.mesh, part.scene.indexed),
            _ => 0,
        };
        self.triangle_bytes() + sign_data
    }

    /// Bytes its triangles, hierarchies and winding clusters hold on the device (the
    /// pseudonormal table aside).
    pub fn triangle_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.scene.device_bytes()).sum()
    }

    /// How its triangles are stored on the device: `Packed` or `Indexed` (never `Auto`).
    pub fn records(&self) -> MeshRecords {
        if self.parts.iter().any(|p| p.scene.indexed) {
            MeshRecords::Indexed
        } else {
            MeshRecords::Packed
        }
    }

    /// Storage bindings the triangles are spread over (one, unless the mesh is larger than
    /// one binding holds).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// Shift a chunk's answers back to world coordinates and sign them as `sign` asks, on the
    /// host (meshes in parts, or whose sign data the device cannot hold; winding rows come
    /// marked by `mark_inside_on_host`). `points` are the chunk's query points as given.
    fn finish(&self, points: &[[f64; 3]], hits: &mut [GpuHit], sign: Sign) {
        use rayon::prelude::*;
        // Built on first use: only pseudonormal signs on the host need them.
        let normals = (sign == Sign::Pseudonormal)
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
                let t = hit.shape as usize;
                let (s, normal) = match (sign, normals) {
                    (Sign::Winding, _) => {
                        // The device marked the inside by the distance's sign bit (−0 on the
                        // surface) and left the rest as it was.
                        let inside = hit.distance.is_sign_negative();
                        hit.distance = hit.distance.abs();
                        (if inside { -1.0 } else { 1.0 }, face_normal(&self.mesh, t))
                    }
                    (_, Some(normals)) => normals.sign(&self.mesh, t, DVec3::new(p[0], p[1], p[2])),
                    (_, None) => return,
                };
                hit.distance *= s as f32;
                hit.normal = if hit.distance != 0.0 {
                    hit.normal.map(|x| x * s as f32)
                } else {
                    normal.to_f32()
                };
            });
    }

    /// The pseudonormal table on the device, built and uploaded on first use; `None` where the
    /// mesh has several parts, is too small for a hierarchy (query.wgsl scans it, unsigned) or
    /// the table would not fit one binding: the host signs then.
    fn pseudonormal_buffer(&self, engine: &Engine) -> Result<Option<&wgpu::Buffer>> {
        if let Some(buffer) = self.device_normals.get() {
            return Ok(Some(buffer));
        }
        let max = engine.gpu.binding_bytes;
        let (triangles, vertices) = (self.mesh.triangles.len(), self.mesh.vertices.len());
        let [part] = self.parts.as_slice() else {
            return Ok(None);
        };
        // Indexed records hold the mesh's vertex indices; the table then leaves them out.
        let vertex_indices = !part.scene.indexed;
        if !part.scene.oriented
            || Pseudonormals::max_gpu_bytes(triangles, vertices, vertex_indices) > max
        {
            return Ok(None);
        }
        let words = Pseudonormals::gpu_words(&self.mesh, vertex_indices);
        let buffer = engine
            .gpu
            .checked(|| engine.gpu.storage_buffer_words("pseudonormals", words))?;
        Ok(Some(self.device_normals.get_or_init(|| buffer)))
    }

    /// The f64 twin of its winding clusters on the device (hierarchies of the same parts),
    /// which signs by winding number where the device does not; built on first use.
    pub fn host_winding(&self) -> &WindingTree {
        self.host_winding
            .get_or_init(|| match self.parts.as_slice() {
                [_] => WindingTree::new(&self.mesh),
                parts => {
                    let parts: Vec<&[u32]> = parts.iter().map(|p| p.triangles.as_slice()).collect();
                    WindingTree::in_parts(&self.mesh, &parts)
                }
            })
    }

    /// Mark the rows inside by winding number on the host, as the device does: the distance's
    /// sign bit set (−0 on the surface).
    fn mark_inside_on_host(&self, points: &[[f64; 3]], hits: &mut [GpuHit]) {
        use rayon::prelude::*;
        let tree = self.host_winding();
        hits.par_iter_mut()
            .zip(points.par_iter())
            .with_min_len(256)
            .for_each(|(hit, p)| {
                let p = DVec3::new(p[0], p[1], p[2]);
                if hit.shape >= 0 && tree.is_inside(&self.mesh, p) {
                    hit.distance = -hit.distance;
                }
            });
    }
}

/// The sign a query of `fields` applies: signs change only distances and normals.
fn applied_sign(sign: Sign, fields: Fields) -> Sign {
    use crate::fields::{DISTANCE, NORMAL};
    if fields.contains(DISTANCE | NORMAL) {
        sign
    } else {
        Sign::None
    }
}

/// Shift the closest points of packed `rows` (which hold the point field) from the mesh's
/// frame back to world coordinates, in f64 as `GpuMesh::finish` does.
fn shift_points(fields: Fields, rows: &mut [u32], offset: DVec3) {
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
fn f64_points_from_slice(
    points: &[[f64; 3]],
) -> impl FnMut(std::ops::Range<usize>, &mut Vec<[f64; 3]>) -> Result<()> + '_ {
    move |range, chunk| {
        chunk.clear();
        chunk.extend_from_slice(&points[range]);
        Ok(())
    }
}

/// Where a mesh query's points come from: a slice, read in place, or a caller's rows.
enum MeshPoints<'a, 'b> {
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
    /// Upload a mesh: its BVH is built once, on the CPU, and stays on the device, ready for
    /// queries of any sign.
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
        self.upload_mesh_with(mesh, true, admit)
    }

    /// [`Engine::upload_mesh_admitted`], with the winding clusters over its hierarchy only if
    /// `clusters` (a one-shot job that signs otherwise does not need them; winding signs are
    /// then the host's).
    pub(crate) fn upload_mesh_with<E: From<Error>>(
        &self,
        mesh: Mesh,
        clusters: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuMesh, E> {
        let offset = mesh.centre();
        let MeshPlan {
            indexed,
            one_part,
            cap,
            sign_data,
        } = self.plan_mesh(&mesh, clusters)?;
        // Parts are built one at a time: the build's peak is the largest part's.
        let parts = if one_part {
            let scene = self.upload_mesh_part(&mesh, offset, indexed, None, clusters, |bytes| {
                admit(bytes + sign_data)
            })?;
            vec![MeshPart {
                scene,
                bounds: mesh.bounds(),
                triangles: Vec::new(),
            }]
        } else {
            // Admitted by the bound before anything is built: the parts' sizes are known only
            // once each is.
            admit(mesh_device_estimate(&mesh, indexed) + cluster_bytes(&mesh, clusters))?;
            let mut parts = Vec::new();
            for indices in spatial_parts(&mesh, cap as usize) {
                let scene = self.upload_mesh_part(
                    &mesh,
                    offset,
                    indexed,
                    Some(&indices),
                    clusters,
                    |_| Ok::<(), Error>(()),
                )?;
                parts.push(MeshPart {
                    scene,
                    bounds: mesh.triangles_bounds(indices.iter().copied()),
                    triangles: indices,
                });
            }
            parts
        };
        Ok(GpuMesh {
            device_normals: std::sync::OnceLock::new(),
            normals: std::sync::OnceLock::new(),
            host_winding: std::sync::OnceLock::new(),
            mesh,
            offset,
            parts,
        })
    }

    /// How the mesh goes up stored `indexed` or packed: in one part or in parts of at most
    /// `cap` triangles, and the pseudonormal table's bytes beside a one-part mesh.
    fn mesh_layout(&self, mesh: &Mesh, indexed: bool) -> MeshPlan {
        let binding = self.gpu.binding_bytes;
        let triangles = mesh.triangles.len() as u64;
        let max_texels = self.gpu.max_texels;
        // Records and nodes are texels, the index tables one binding (`scene::upload_bindings`).
        let nodes_fit = triangles <= binding / PART_BYTES_PER_TRIANGLE
            && triangles <= max_texels / PART_TEXELS_PER_TRIANGLE;
        let (one_part, texels_per_triangle) = if indexed {
            // Records, at most one node a triangle, and the vertices.
            let record_texels =
                crate::gpu::scene_layout::triangle_record_words(mesh.triangles.len(), true) / 4;
            let texels = (record_texels + mesh.vertices.len()) as u64 + 4 * triangles;
            (
                nodes_fit && texels <= max_texels,
                INDEXED_PART_TEXELS_PER_TRIANGLE,
            )
        } else {
            (nodes_fit, PART_TEXELS_PER_TRIANGLE)
        };
        MeshPlan {
            indexed,
            one_part,
            cap: (binding / PART_BYTES_PER_TRIANGLE)
                .min(max_texels / texels_per_triangle)
                .max(1),
            sign_data: if one_part {
                sign_data_bytes(mesh, indexed)
            } else {
                0
            },
        }
    }

    /// The mesh's plan as `EngineOptions::mesh_records` asks, once the memory there is has
    /// been checked for it (and for its winding `clusters`, if asked).
    fn plan_mesh(&self, mesh: &Mesh, clusters: bool) -> Result<MeshPlan> {
        let check = |indexed: bool| {
            let plan = self.mesh_layout(mesh, indexed);
            let triangles = mesh.triangles.len() as u64;
            self.gpu
                .check_memory(
                    &format!("a mesh of {triangles} triangles"),
                    mesh_device_estimate(mesh, indexed)
                        + plan.sign_data
                        + cluster_bytes(mesh, clusters),
                    triangles.min(plan.cap) * BUILD_BYTES_PER_TRIANGLE,
                )
                .map(|()| plan)
        };
        match self.gpu.mesh_records {
            MeshRecords::Packed => check(false),
            MeshRecords::Indexed => check(true),
            MeshRecords::Auto
                if self.gpu.device_memory_is_hosts()
                    && mesh.triangles.len() >= MeshRecords::AUTO_INDEXED_TRIANGLES =>
            {
                check(true)
            }
            MeshRecords::Auto => check(false).or_else(|packed| check(true).map_err(|_| packed)),
        }
    }

    /// The triangles `indices` of the mesh (all of them if `None`) as one scene on the device,
    /// with its winding `clusters` if asked, `admit` asked first with its bytes.
    fn upload_mesh_part<E: From<Error>>(
        &self,
        mesh: &Mesh,
        offset: DVec3,
        indexed: bool,
        indices: Option<&[u32]>,
        clusters: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        let count = indices.map_or(mesh.triangles.len(), <[u32]>::len);
        let triangle = |k: usize| indices.map_or(k, |indices| indices[k] as usize);
        let corners = |k: usize| mesh.shifted_corners(triangle(k), offset);
        if !indexed {
            return crate::gpu::scene::upload_triangles(
                &self.gpu, count, &corners, clusters, admit,
            );
        }
        let (vertices, corner_ids) = part_vertices(mesh, offset, indices);
        crate::gpu::scene::upload_indexed_triangles(
            &self.gpu,
            count,
            &corners,
            &|k| corner_ids.as_ref().map_or(mesh.triangles[k], |ids| ids[k]),
            vertices,
            clusters,
            admit,
        )
    }

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

    fn query_mesh_points(
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

    /// Upload `mesh` for a one-shot job (the CLI's query or grid) whose one query signs by
    /// `sign` and computes `fields`: with the winding clusters only if it signs by winding
    /// number; with the sign data the device needs to answer alone built now; and with the
    /// host's copy of the mesh released where the device does answer alone. Kept where the
    /// host takes part: a mesh in parts, or sign data the device cannot hold (a grid the device
    /// cannot sample is answered from host-made rows on the same device path). On a CPU
    /// adapter the first dispatch, whose shader compilation takes tens of MiB when the
    /// driver's cache is cold, comes when everything else is resident (docs/perf-history.md, issue
    /// 14). The mesh must then be queried with that sign and fields only.
    pub(crate) fn upload_mesh_for_job(
        &self,
        mesh: Mesh,
        sign: Sign,
        fields: Fields,
    ) -> Result<GpuMesh> {
        let sign = applied_sign(sign, fields);
        let mut mesh =
            self.upload_mesh_with(mesh, sign == Sign::Winding, |_| Ok::<(), Error>(()))?;
        if mesh.parts.len() == 1 && self.device_sign(&mesh, sign)?.is_some() {
            mesh.mesh = Mesh::default();
        }
        Ok(mesh)
    }

    /// How the device signs `mesh`'s rows by `sign`: `None` where it cannot, for a mesh in
    /// parts or whose sign data does not fit one binding (the host signs then).
    fn device_sign<'a>(&self, mesh: &'a GpuMesh, sign: Sign) -> Result<Option<DeviceSign<'a>>> {
        if mesh.parts.len() > 1 {
            return Ok(None);
        }
        Ok(match sign {
            Sign::None => Some(DeviceSign::None),
            Sign::Winding => mesh.parts[0]
                .scene
                .clusters
                .as_ref()
                .map(DeviceSign::Winding),
            Sign::Pseudonormal => mesh
                .pseudonormal_buffer(self)?
                .map(DeviceSign::Pseudonormal),
        })
    }

    /// The distances of `grid`'s samples to `mesh`, signed by `sign`, computed wholly on the
    /// device (`gpu::grid`): the samples from the grid's corner and spacing, the signs there,
    /// each chunk's distances written in C order. `Ok(false)` where the device cannot: a mesh
    /// in parts or too small for a hierarchy, sign data that does not fit, or a z-row longer
    /// than a chunk.
    pub(super) fn sdf_on_device(
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
        crate::gpu::stream::run(
            &self.gpu,
            &self.slots,
            &job.plan(&self.gpu, fields)?,
            grid.len(),
            None,
            None,
            crate::Mode::Surface,
            fields,
            &mut take,
        )?;
        Ok(true)
    }

    /// [`Engine::query_mesh_fields_stream`] for a mesh of several parts, or whose sign data
    /// the device cannot hold: blocks of rows, each row answered first by the part whose box
    /// is nearest to it, then by every other part whose box could hold a nearer triangle
    /// (`may_hold_nearer`), the nearest answer kept; then signed on the host and packed with
    /// `fields`.
    fn query_mesh_parts_stream(
        &self,
        mesh: &GpuMesh,
        rows: usize,
        points: &mut PointRows<'_>,
        sign: Sign,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        use rayon::prelude::*;
        let (mut block, mut best, mut packed) = (Vec::new(), Vec::new(), Vec::new());
        let (mut first_part, mut asked) = (Vec::new(), Vec::new());
        let mesh_scale = mesh
            .parts
            .iter()
            .map(|part| part.bounds.0.max_abs().max(part.bounds.1.max_abs()))
            .fold(0.0, f64::max);
        let block_rows = PART_BLOCK_CHUNKS * self.gpu.chunk_rows;
        for first in (0..rows).step_by(block_rows) {
            let range = first..rows.min(first + block_rows);
            points(range.clone(), &mut block)?;
            best.clear();
            best.resize(block.len(), GpuHit::default());
            first_part.clear();
            first_part.par_extend(block.par_iter().map(|&p| nearest_box(&mesh.parts, p)));
            for (k, part) in mesh.parts.iter().enumerate() {
                asked.clear();
                asked.extend((0..block.len() as u32).filter(|&i| first_part[i as usize] == k));
                self.ask_part(mesh, part, &block, &asked, &mut |i, hit| best[i] = hit)?;
            }
            for (k, part) in mesh.parts.iter().enumerate() {
                asked.clear();
                asked.extend((0..block.len() as u32).filter(|&i| {
                    let i = i as usize;
                    first_part[i] != k
                        && (self.gpu.every_part
                            || may_hold_nearer(part.bounds, block[i], &best[i], mesh_scale))
                }));
                self.ask_part(mesh, part, &block, &asked, &mut |i, hit| {
                    keep_nearer(&mut best[i], hit)
                })?;
            }
            if sign == Sign::Winding {
                if mesh.parts.iter().all(|part| part.scene.clusters.is_some()) {
                    self.mark_inside_on_device(mesh, &block, &mut best)?;
                } else {
                    mesh.mark_inside_on_host(&block, &mut best);
                }
            }
            mesh.finish(&block, &mut best, sign);
            pack_hits(fields, &best, &mut packed);
            sink.take(range.start, PackedRows::new(fields, &packed))?;
        }
        Ok(())
    }

    /// Mark the rows of `block` inside by the sum of the parts' winding numbers, walked on the
    /// device, as the host's `WindingTree::is_inside` decides over the same parts: the coarse
    /// sum, and the fine one for the rows whose coarse sum lies within `SIGN_MARGIN` of ½. The
    /// distance's sign bit is set (−0 on the surface); a row whose walk outgrew its stack in
    /// any part becomes an overflow row, as on the device.
    fn mark_inside_on_device(
        &self,
        mesh: &GpuMesh,
        block: &[[f64; 3]],
        best: &mut [GpuHit],
    ) -> Result<()> {
        use crate::winding::SIGN_MARGIN;
        let rows: Vec<u32> = (0..block.len() as u32)
            .filter(|&i| best[i as usize].shape >= 0)
            .collect();
        let mut total = vec![0f64; block.len()];
        self.add_part_winding_numbers(mesh, block, &rows, false, &mut total)?;
        let unsure: Vec<u32> = rows
            .iter()
            .copied()
            // NaN (a walk that outgrew its stack) included: the fine walk tells.
            .filter(|&i| {
                (total[i as usize] - 0.5).abs() <= SIGN_MARGIN || total[i as usize].is_nan()
            })
            .collect();
        for &i in &unsure {
            total[i as usize] = 0.0;
        }
        self.add_part_winding_numbers(mesh, block, &unsure, true, &mut total)?;
        for &i in &rows {
            let (w, hit) = (total[i as usize], &mut best[i as usize]);
            if w.is_nan() {
                *hit = GpuHit {
                    shape: crate::fields::TRAVERSAL_OVERFLOW,
                    ..GpuHit::default()
                };
            } else if w > 0.5 {
                hit.distance = -hit.distance;
            }
        }
        Ok(())
    }

    /// Add every part's winding number at rows `rows` of `block` (coarse, or `fine`) to
    /// `total`, walked on the device over the part's clusters.
    fn add_part_winding_numbers(
        &self,
        mesh: &GpuMesh,
        block: &[[f64; 3]],
        rows: &[u32],
        fine: bool,
        total: &mut [f64],
    ) -> Result<()> {
        use crate::fields::DISTANCE;
        if rows.is_empty() {
            return Ok(());
        }
        let fields = Fields::from_bits(Family::Hits, DISTANCE);
        for part in &mesh.parts {
            let mut source = |range: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
                let points = rows[range].iter().map(|&i| block[i as usize]);
                write_query_points_iter(points, mesh.offset, out);
                Ok(())
            };
            let mut add = |at: usize, answers: PackedRows<'_>| {
                for (&i, &w) in rows[at..].iter().zip(answers.words()) {
                    total[i as usize] += f32::from_bits(w) as f64;
                }
                Ok(())
            };
            let job = crate::gpu::plan::Job::WindingNumbers {
                scene: &part.scene,
                fine,
            };
            crate::gpu::stream::run(
                &self.gpu,
                &self.slots,
                &job.plan(&self.gpu, fields)?,
                rows.len(),
                Some(&mut source),
                None,
                crate::Mode::Surface,
                fields,
                &mut add,
            )?;
        }
        Ok(())
    }

    /// Rows `asked` of `block` answered by `part`, unsigned, with every field: `take` gets
    /// each answer with its row in the block, its triangle index the mesh's.
    fn ask_part(
        &self,
        mesh: &GpuMesh,
        part: &MeshPart,
        block: &[[f64; 3]],
        asked: &[u32],
        take: &mut dyn FnMut(usize, GpuHit),
    ) -> Result<()> {
        if asked.is_empty() {
            return Ok(());
        }
        let mut source = |rows: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            let points = asked[rows].iter().map(|&i| block[i as usize]);
            write_query_points_iter(points, mesh.offset, out);
            Ok(())
        };
        let mut keep = |at: usize, answers: PackedRows<'_>| {
            let hits = answers.as_hits().expect("every hit field");
            for (&i, &hit) in asked[at..].iter().zip(hits) {
                let mut hit = hit;
                if hit.shape >= 0 && !part.triangles.is_empty() {
                    hit.shape = part.triangles[hit.shape as usize] as i32;
                }
                take(i as usize, hit);
            }
            Ok(())
        };
        self.query_scene_signed_stream(
            &part.scene,
            DeviceSign::None,
            asked.len(),
            &mut source,
            crate::Mode::Surface,
            Fields::all(Family::Hits),
            &mut keep,
        )
    }
}
