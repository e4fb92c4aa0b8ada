//! Triangle meshes (SPEC §4): the checked triangle soup (`Mesh`; its files are read by
//! `io::mesh_file`), pseudonormal and winding signs (the queries are `engine::mesh`). An index out of range or
//! a mesh without triangles is an error naming the file and the problem; degenerate triangles
//! are kept (they are answered like any other).

use crate::error::{Error, Result};
use crate::math::DVec3;
use std::sync::atomic::{AtomicBool, Ordering};

/// A triangle soup with shared vertices, with their coordinates as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub vertices: Vertices,
    pub triangles: Vec<[u32; 3]>,
}

/// A mesh's vertex coordinates: in f32 where f32 holds every one exactly (binary STL always,
/// PLY of floats, float32 arrays), half the bytes of f64 for the same values (a large mesh's
/// host copy is a third of its peak memory on a CPU adapter, docs/perf-history.md); in f64 otherwise.
/// Every computation reads them as f64 (`get`).
#[derive(Clone, Debug)]
pub enum Vertices {
    F32(Vec<[f32; 3]>),
    F64(Vec<DVec3>),
}

impl Default for Vertices {
    fn default() -> Vertices {
        Vertices::F64(Vec::new())
    }
}

impl From<Vec<DVec3>> for Vertices {
    /// In f32 if that holds every coordinate exactly.
    fn from(vertices: Vec<DVec3>) -> Vertices {
        let exact = |x: f64| (x as f32) as f64 == x;
        if vertices
            .iter()
            .all(|v| exact(v.x) && exact(v.y) && exact(v.z))
        {
            Vertices::F32(vertices.iter().map(|v| v.to_f32()).collect())
        } else {
            Vertices::F64(vertices)
        }
    }
}

impl From<Vec<[f32; 3]>> for Vertices {
    fn from(vertices: Vec<[f32; 3]>) -> Vertices {
        Vertices::F32(vertices)
    }
}

impl PartialEq for Vertices {
    /// Equal coordinates, however they are stored.
    fn eq(&self, other: &Vertices) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Vertices {
    pub fn len(&self) -> usize {
        match self {
            Vertices::F32(v) => v.len(),
            Vertices::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Vertex `k`.
    #[inline]
    pub fn get(&self, k: usize) -> DVec3 {
        match self {
            Vertices::F32(v) => {
                let [x, y, z] = v[k];
                DVec3::new(x as f64, y as f64, z as f64)
            }
            Vertices::F64(v) => v[k],
        }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = DVec3> + '_ {
        (0..self.len()).map(|k| self.get(k))
    }
}

impl Mesh {
    /// Check indices and coordinates, and that there is at least one triangle. Vertices given
    /// in f64 are kept in f32 where that holds them exactly (`Vertices`).
    pub fn new(
        vertices: impl Into<Vertices>,
        triangles: Vec<[u32; 3]>,
        file: &str,
    ) -> Result<Mesh> {
        let mesh = Mesh {
            vertices: vertices.into(),
            triangles,
        };
        match mesh.problem() {
            Some(problem) => Err(Error::BadFile {
                file: file.to_string(),
                problem,
            }),
            None => Ok(mesh),
        }
    }

    /// What makes the mesh one the engine cannot answer, if anything: no triangles, too many,
    /// a coordinate that is not a finite f32, an index out of range, or a span past
    /// [`crate::semantics::SPAN_LIMIT`]. `Mesh::new` refuses such meshes; the engine checks
    /// again on upload, since the fields are public (a mesh built by hand).
    pub fn problem(&self) -> Option<String> {
        let Mesh {
            vertices,
            triangles,
        } = self;
        if triangles.is_empty() {
            return Some(match vertices.len() {
                0 => "the mesh has no triangles".into(),
                // A scan's point cloud given as a mesh.
                n => format!(
                    "the mesh has no triangles, only {n} vertices: a point cloud, whose points \
                     can be queried against a mesh as points (`--points`)"
                ),
            });
        }
        if let Some(problem) = too_many_triangles(triangles.len()) {
            return Some(problem);
        }
        if let Some((i, v)) = vertices
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && v.max_abs() <= f32::MAX as f64))
        {
            return Some(format!(
                // `{:?}`: 1e300, where `{}` would print all 301 digits.
                "vertex {i} is ({:?}, {:?}, {:?}): coordinates must be finite f32 values",
                v.x, v.y, v.z
            ));
        }
        for (t, tri) in triangles.iter().enumerate() {
            if let Some(&k) = tri.iter().find(|&&k| k as usize >= vertices.len()) {
                return Some(format!(
                    "triangle {t} uses vertex {k}, but there are only {} vertices",
                    vertices.len()
                ));
            }
        }
        // All vertices first, in order (a large mesh's triangles read them at random); only
        // a mesh too wide by them is measured again by the vertices its triangles use.
        let span = |(lo, hi): (DVec3, DVec3)| (hi - lo).length();
        let every_vertex = vertices.iter().fold(
            (
                DVec3::new(f64::INFINITY, f64::INFINITY, f64::INFINITY),
                DVec3::new(f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY),
            ),
            |(lo, hi), v| (lo.min(v), hi.max(v)),
        );
        let limit = crate::semantics::SPAN_LIMIT;
        let too_wide = (span(every_vertex) > limit)
            .then(|| span(self.bounds()))
            .filter(|&used| used > limit);
        too_wide.map(|span| {
            format!(
                "the mesh spans {span:.3e}, beyond the {:e} its f32 kernels hold (their squares \
                 overflow past ~1.8e19); give it in larger units",
                limit
            )
        })
    }

    /// [`Mesh::problem`] as an error, for a mesh built by hand (its fields are public) on its
    /// way to the engine: the kernels would answer one past the span limit wrongly, and an
    /// index out of range would panic.
    pub fn check_built(&self) -> Result<()> {
        match self.problem() {
            Some(problem) => Err(Error::BadFile {
                file: "the mesh".into(),
                problem,
            }),
            None => Ok(()),
        }
    }

    /// Triangle `t`'s corners.
    pub fn corners(&self, t: usize) -> [DVec3; 3] {
        self.triangles[t].map(|k| self.vertices.get(k as usize))
    }

    /// The centre of the bounding box (meshes are shifted there before the f32 upload).
    pub fn centre(&self) -> DVec3 {
        let (lo, hi) = self.bounds();
        (lo + hi) * 0.5
    }

    /// The bounding box of the vertices the triangles use.
    pub fn bounds(&self) -> (DVec3, DVec3) {
        self.triangles_bounds(0..self.triangles.len() as u32)
    }

    /// What `fraction` (`--pad`) of its largest extent grows its bounding box by on each side,
    /// for the box of an SDF grid or of uniform training samples: a usage error where the
    /// fraction is not finite and ≥ 0, or where the box would have no extent along an axis
    /// (its samples would coincide there), which says what to do instead: `remedies[0]` where
    /// the mesh has an extent, `remedies[1]` where it is a point.
    pub fn pad(&self, fraction: f64, remedies: [&str; 2]) -> crate::error::Result<f64> {
        if !(fraction.is_finite() && fraction >= 0.0) {
            return Err(crate::error::Error::Usage(format!(
                "--pad must be a finite fraction ≥ 0, got {fraction}"
            )));
        }
        let (lo, hi) = self.bounds();
        let extent = hi - lo;
        let largest = extent.x.max(extent.y).max(extent.z);
        let pad = largest * fraction;
        if let Some(axis) = (0..3).find(|&a| extent.get(a) + 2.0 * pad <= 0.0) {
            let name = ["x", "y", "z"][axis];
            // A mesh that is a point has no extent a pad could be a fraction of.
            let remedy = remedies[usize::from(largest <= 0.0)];
            return Err(crate::error::Error::Usage(format!(
                "the padded box has no extent along {name}: every vertex of the mesh has \
                 {name} = {:?}, and --pad {fraction} of its largest extent ({largest:?}) adds \
                 none; {remedy}",
                lo.get(axis)
            )));
        }
        let reach = lo.max_abs().max(hi.max_abs()) + pad;
        if crate::semantics::beyond_made_point_limit(reach) {
            return Err(crate::error::Error::Usage(format!(
                "--pad {fraction:?} puts the padded box {reach:e} from the origin, beyond the {:e} \
                 that points made in f32 may reach; give a smaller --pad",
                crate::semantics::MADE_POINT_LIMIT
            )));
        }
        Ok(pad)
    }

    /// The bounding box of the corners of `triangles` (indices into `self.triangles`).
    pub fn triangles_bounds(&self, triangles: impl IntoIterator<Item = u32>) -> (DVec3, DVec3) {
        let mut lo = DVec3::new(f64::INFINITY, f64::INFINITY, f64::INFINITY);
        let mut hi = -lo;
        for k in triangles
            .into_iter()
            .flat_map(|t| self.triangles[t as usize])
        {
            let v = self.vertices.get(k as usize);
            (lo, hi) = (lo.min(v), hi.max(v));
        }
        (lo, hi)
    }

    /// Triangle `t`'s corners moved by `-offset` (meshes are uploaded shifted to their
    /// centre, `GpuMesh`).
    pub fn shifted_corners(&self, t: usize, offset: DVec3) -> [DVec3; 3] {
        self.corners(t).map(|v| v - offset)
    }
}

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
    /// The method's name, as [`Sign::parse`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Sign::None => "none",
            Sign::Pseudonormal => "pseudonormal",
            Sign::Winding => "winding",
        }
    }

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

/// Triangle `t`'s unit normal (zero if degenerate), computed from its f64 corners.
pub fn face_normal(mesh: &Mesh, t: usize) -> DVec3 {
    let [a, b, c] = mesh.corners(t);
    crate::math::triangle_unit_normal(a, b, c)
}

/// Angle-weighted pseudonormals of a mesh's faces, edges and vertices (f64, not normalised
/// except the faces'). The vertex sums are stored, and the sums of edges with more than two
/// faces; face normals are recomputed from the corners and other edges' sums from their one or
/// two faces, so the bits are those of stored sums (24 bytes a triangle on a closed mesh
/// instead of 84: 2M triangles, 170 → 48 MiB).
pub struct Pseudonormals {
    vertex: Vec<DVec3>,
    /// Per half-edge h = 3t + k (corner k to corner k + 1 of triangle t), the next half-edge
    /// of the same undirected edge in ascending order, cyclically (h itself on a boundary).
    next_on_edge: Vec<u32>,
    /// The sums of edges with more than two faces (a walk around them per row could cost as
    /// many steps as the mesh has triangles), by each of their half-edges.
    crowded_edges: std::collections::HashMap<u32, DVec3>,
}

/// The angle-weighted sums of face normals at every vertex, in f64.
fn vertex_sums(mesh: &Mesh) -> Vec<DVec3> {
    // One band: its sums are taken whole, not copied.
    let mut vertex = Vec::new();
    for_each_vertex_band(mesh, mesh.vertices.len(), &NEVER_STOPPED, |_, sums| {
        vertex = std::mem::take(sums)
    });
    vertex
}

/// The vertices a band of [`for_each_vertex_band`] and [`for_each_edge`] holds: an
/// eighth of the mesh's, and at least `VERTEX_BAND_FLOOR` (fewer passes over a small mesh).
/// A band holds 24 bytes a vertex either way: its f64 sums, or about six half-edges.
pub(crate) fn band_len(vertices: usize) -> usize {
    vertices.div_ceil(8).max(VERTEX_BAND_FLOOR)
}

/// Calls `band(first, sums)` (which may take them) with the angle-weighted sums of face
/// normals (f64) of vertices `first..first + sums.len()`, in ascending bands of at most
/// `band_len` vertices: each band is a pass over the triangles touching it, so only a band's
/// sums are held at a time. Built on all cores where it pays; every sum adds its terms in
/// triangle order, so the result depends on neither threads nor bands. Once `stop` is set,
/// no more bands are made (the caller throws away what it has).
fn for_each_vertex_band(
    mesh: &Mesh,
    band_len: usize,
    stop: &AtomicBool,
    mut band: impl FnMut(usize, &mut Vec<DVec3>),
) {
    use rayon::prelude::*;
    let count = mesh.triangles.len();
    let mut batch: Vec<(usize, DVec3, [f64; 3])> = Vec::new();
    let mut sums = Vec::new();
    for first in (0..mesh.vertices.len()).step_by(band_len.max(1)) {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let vertices = first as u32..(first + band_len).min(mesh.vertices.len()) as u32;
        let in_band = |v: u32| v.wrapping_sub(vertices.start) < vertices.len() as u32;
        sums.clear();
        sums.resize(vertices.len(), DVec3::ZERO);
        for batch_first in (0..count).step_by(NORMAL_BATCH) {
            let last = (batch_first + NORMAL_BATCH).min(count);
            // The batch's triangles with a corner in the band, in triangle order.
            batch.clear();
            batch.par_extend(
                (batch_first..last)
                    .into_par_iter()
                    .with_min_len(4096)
                    .filter(|&t| mesh.triangles[t].into_iter().any(in_band))
                    .map(|t| {
                        let corners = mesh.corners(t);
                        let angles = std::array::from_fn(|k| {
                            let (u, v) = (
                                corners[(k + 1) % 3] - corners[k],
                                corners[(k + 2) % 3] - corners[k],
                            );
                            u.cross(v).length().atan2(u.dot(v))
                        });
                        (t, face_normal(mesh, t), angles)
                    }),
            );
            for &(t, face, angles) in &batch {
                for (k, &v) in mesh.triangles[t].iter().enumerate() {
                    if in_band(v) {
                        let sum = &mut sums[(v - vertices.start) as usize];
                        *sum += face * angles[k];
                    }
                }
            }
        }
        band(first, &mut sums);
    }
}

/// The triangles around each vertex (those with it as a corner), in triangle order: a
/// counting sort of the corners, 4 bytes a corner and a vertex.
pub struct CornerRings {
    /// Vertex v's triangles are `triangles[first[v]..first[v + 1]]`.
    first: Vec<u32>,
    triangles: Vec<u32>,
}

impl CornerRings {
    pub fn new(mesh: &Mesh) -> CornerRings {
        let mut first = vec![0u32; mesh.vertices.len() + 1];
        for &v in mesh.triangles.iter().flatten() {
            first[v as usize + 1] += 1;
        }
        for v in 0..mesh.vertices.len() {
            first[v + 1] += first[v];
        }
        let mut next = first.clone();
        let mut triangles = vec![0u32; 3 * mesh.triangles.len()];
        for (t, tri) in mesh.triangles.iter().enumerate() {
            for &v in tri {
                let slot = &mut next[v as usize];
                triangles[*slot as usize] = t as u32;
                *slot += 1;
            }
        }
        CornerRings { first, triangles }
    }

    pub fn around(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.triangles[self.first[v] as usize..self.first[v + 1] as usize]
    }
}

/// The stop flag of band loops nobody stops.
pub(crate) static NEVER_STOPPED: AtomicBool = AtomicBool::new(false);

/// Most triangles a mesh may have: its half-edges (three a triangle) are numbered in 32 bits
/// (the sign tables, auto's edge counts).
pub const MAX_TRIANGLES: usize = u32::MAX as usize / 3;

/// Why a mesh of `count` triangles cannot be loaded, if it cannot.
fn too_many_triangles(count: usize) -> Option<String> {
    (count > MAX_TRIANGLES).then(|| {
        format!("{count} triangles: at most {MAX_TRIANGLES} are supported (half-edges are numbered in 32 bits)")
    })
}

/// Calls `edge` with the half-edges of every undirected edge of `triangles` (over
/// `vertex_count` vertices), in ascending order (half-edge h = 3t + k runs from corner k to
/// corner k + 1 of triangle t), grouped in ascending bands of
/// at most `band_len` lower vertices (4 bytes a half-edge), each band two passes over the
/// half-edges. Once `stop` is set, no more bands are made (the caller throws away what it has).
pub(crate) fn for_each_edge(
    vertex_count: usize,
    triangles: &[[u32; 3]],
    band_len: usize,
    stop: &AtomicBool,
    mut edge: impl FnMut(&[u32]),
) {
    use rayon::prelude::*;
    // `ends(h)` is half-edge h's edge: its (lower, upper) vertex. The half-edges are grouped by
    // lower vertex (a counting sort), each group sorted by upper vertex, then by h.
    let ends = |h: u32| {
        let tri = triangles[h as usize / 3];
        let k = h as usize % 3;
        let (i, j) = (tri[k], tri[(k + 1) % 3]);
        (i.min(j), i.max(j))
    };
    // Half-edges are numbered in u32 (`lower_ends`, the runs): `Mesh::new` refuses more.
    debug_assert!(triangles.len() <= MAX_TRIANGLES);
    // Each half-edge h = 3t + k with its lower vertex, a triangle at a time.
    let lower_ends = || {
        triangles.iter().enumerate().flat_map(|(t, tri)| {
            [(0, 1), (1, 2), (2, 0)]
                .into_iter()
                .map(move |(k, next)| ((3 * t + k) as u32, tri[k].min(tri[next]) as usize))
        })
    };
    let (mut start, mut grouped) = (Vec::new(), Vec::new());
    for first in (0..vertex_count).step_by(band_len.max(1)) {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let vertices = first..(first + band_len).min(vertex_count);
        let in_band = |v: usize| v.wrapping_sub(first) < vertices.len();
        // start[v - first]: the first of vertex v's half-edges in the band's grouped order.
        start.clear();
        start.resize(vertices.len() + 1, 0u32);
        for (_, lower) in lower_ends() {
            if in_band(lower) {
                start[lower - first + 1] += 1;
            }
        }
        for v in 1..start.len() {
            start[v] += start[v - 1];
        }
        grouped.clear();
        grouped.resize(start[vertices.len()] as usize, 0u32);
        for (h, lower) in lower_ends() {
            if in_band(lower) {
                let slot = &mut start[lower - first];
                grouped[*slot as usize] = h;
                *slot += 1;
            }
        }
        if vertices.end == vertex_count {
            // The last band's starts are done with: free them before its edges' work (with
            // one band, a start per vertex of the mesh).
            start = Vec::new();
        }
        grouped
            .par_chunk_by_mut(|&a, &b| ends(a).0 == ends(b).0)
            .for_each(|group| group.sort_unstable_by_key(|&h| (ends(h).1, h)));
        for run in grouped.chunk_by(|&a, &b| ends(a) == ends(b)) {
            edge(run);
        }
    }
}

/// The sum of the unit normals of the faces on an edge of more than two, its half-edges
/// `run` in ascending (triangle) order.
fn crowded_sum(mesh: &Mesh, run: &[u32]) -> DVec3 {
    run.iter().fold(DVec3::ZERO, |sum, &h| {
        sum + face_normal(mesh, h as usize / 3)
    })
}

/// `Pseudonormals::gpu_words`: an edge of one face.
pub const EDGE_BOUNDARY: u32 = u32::MAX;
/// `Pseudonormals::gpu_words`: the flag of an edge of more than two faces, whose sum is stored.
pub const EDGE_CROWDED: u32 = 1 << 31;

/// Triangles whose face normals and angles are computed together before they are summed.
const NORMAL_BATCH: usize = 1 << 16;

/// `Pseudonormals::gpu_words` takes the vertices in bands of an eighth of a large mesh's, and
/// of at least this many (3 MiB of sums or half-edges), each band a pass over the mesh
/// (docs/perf-history.md, "bands").
const VERTEX_BAND_FLOOR: usize = 1 << 17;

impl Pseudonormals {
    /// The host's f64 sums and edge links (the device's table is [`Pseudonormals::gpu_words`]).
    pub fn new(mesh: &Mesh) -> Pseudonormals {
        let vertex = vertex_sums(mesh);
        let mut next_on_edge = vec![0u32; 3 * mesh.triangles.len()];
        let mut crowded_edges = std::collections::HashMap::new();
        for_each_edge(
            mesh.vertices.len(),
            &mesh.triangles,
            band_len(mesh.vertices.len()),
            &NEVER_STOPPED,
            |run| {
                for (at, &h) in run.iter().enumerate() {
                    next_on_edge[h as usize] = run[(at + 1) % run.len()];
                }
                if run.len() > 2 {
                    let sum = crowded_sum(mesh, run);
                    crowded_edges.extend(run.iter().map(|&h| (h, sum)));
                }
            },
        );
        Pseudonormals {
            vertex,
            next_on_edge,
            crowded_edges,
        }
    }

    /// The sum of the unit normals of the faces on half-edge `h`'s edge, added in ascending
    /// order of their half-edges (triangle order).
    fn edge_sum(&self, mesh: &Mesh, h: u32) -> DVec3 {
        let other = self.next_on_edge[h as usize];
        let face = |h: u32| face_normal(mesh, h as usize / 3);
        if other == h {
            return DVec3::ZERO + face(h);
        }
        if self.next_on_edge[other as usize] == h {
            let (first, second) = (h.min(other), h.max(other));
            return DVec3::ZERO + face(first) + face(second);
        }
        self.crowded_edges[&h]
    }

    /// The table the device signs by (shaders/pseudonormal.wgsl, whose f64 twin is
    /// [`Pseudonormals::sign`]): a 4-word header (first vertex word, first crowded-edge word,
    /// words per triangle, [`Pseudonormals::far_radius`] as f32 bits), per triangle its vertex indices unless the device's triangle
    /// records hold them already (`vertex_indices` false: indexed records, whose indices are
    /// the mesh's own) and per edge k (corner k to k + 1) the triangle across it,
    /// [`EDGE_BOUNDARY`] or [`EDGE_CROWDED`] | its stored sum; then the unit vertex
    /// pseudonormals and the unit sums of the edges of more than two faces, three f32 each.
    /// Faces' and two-face edges' normals are the device's own f32 face normals.
    ///
    /// Written straight from the sums, without a [`Pseudonormals`]: at its peak it holds the
    /// table and a band of either the f64 vertex sums or the half-edges grouped by edge.
    pub fn gpu_words(mesh: &Mesh, vertex_indices: bool) -> Vec<u32> {
        Self::gpu_words_until(mesh, vertex_indices, &NEVER_STOPPED)
            .expect("a table never stopped is made")
    }

    /// [`Pseudonormals::gpu_words`], or `None` once `stop` is set (the caller was interrupted:
    /// the table of a mesh of millions of triangles takes seconds).
    pub fn gpu_words_until(
        mesh: &Mesh,
        vertex_indices: bool,
        stop: &AtomicBool,
    ) -> Option<Vec<u32>> {
        let band = band_len(mesh.vertices.len());
        let words = Self::gpu_words_in_bands_until(mesh, vertex_indices, band, stop);
        (!stop.load(Ordering::Relaxed)).then_some(words)
    }

    /// [`Pseudonormals::gpu_words`] with the vertex sums and the half-edges taken in bands of
    /// at most `band` vertices (the same words whatever the bands: tests/mesh.rs).
    #[doc(hidden)]
    pub fn gpu_words_in_bands(mesh: &Mesh, vertex_indices: bool, band: usize) -> Vec<u32> {
        Self::gpu_words_in_bands_until(mesh, vertex_indices, band, &NEVER_STOPPED)
    }

    /// [`Pseudonormals::gpu_words_in_bands`], its passes cut short once `stop` is set.
    fn gpu_words_in_bands_until(
        mesh: &Mesh,
        vertex_indices: bool,
        band: usize,
        stop: &AtomicBool,
    ) -> Vec<u32> {
        let count = mesh.triangles.len();
        let stride = if vertex_indices { 6 } else { 3 };
        let vertex_word = 4 + stride * count;
        let crowded_word = vertex_word + 3 * mesh.vertices.len();
        let mut words = vec![0u32; crowded_word];
        let far = (Self::far_radius(mesh) as f32).to_bits();
        words[..4].copy_from_slice(&[vertex_word as u32, crowded_word as u32, stride as u32, far]);
        let unit_words = |v: &DVec3| v.normalize_or_zero().to_f32().map(f32::to_bits);
        for_each_vertex_band(mesh, band, stop, |first, sums| {
            let at = vertex_word + 3 * first;
            for (out, sum) in words[at..at + 3 * sums.len()].chunks_exact_mut(3).zip(sums) {
                out.copy_from_slice(&unit_words(sum));
            }
        });
        let edge_word = |h: u32| 4 + stride * (h as usize / 3) + stride - 3 + h as usize % 3;
        // Crowded edges are numbered in the order of their lowest half-edge, once all are found.
        let mut crowded = Vec::new();
        for_each_edge(
            mesh.vertices.len(),
            &mesh.triangles,
            band,
            stop,
            |run| match run {
                [h] => words[edge_word(*h)] = EDGE_BOUNDARY,
                [a, b] => {
                    words[edge_word(*a)] = b / 3;
                    words[edge_word(*b)] = a / 3;
                }
                _ => crowded.push((run.to_vec(), crowded_sum(mesh, run))),
            },
        );
        crowded.sort_unstable_by_key(|(run, _)| run[0]);
        for (index, (run, _)) in crowded.iter().enumerate() {
            for &h in run {
                words[edge_word(h)] = EDGE_CROWDED | index as u32;
            }
        }
        if vertex_indices {
            for (t, tri) in mesh.triangles.iter().enumerate() {
                words[4 + 6 * t..7 + 6 * t].copy_from_slice(tri);
            }
        }
        words.extend(crowded.iter().flat_map(|(_, sum)| unit_words(sum)));
        words
    }

    /// How far from the centre of `mesh`'s box a point signed by pseudonormal on the device
    /// walks from its proxy instead (pseudonormal.wgsl, `walk_for`): [`FAR_RADII`] times the
    /// box's half diagonal. There the proxy's nearest triangle is within R / (2 FAR_RADII) of
    /// the point's own nearest distance, under SPEC §3's bound (1e-5 of a scale of at least
    /// FAR_RADII · R / (2√3)), and f32 at the proxy tells apart features 1e-4 R apart.
    pub fn far_radius(mesh: &Mesh) -> f64 {
        let (lo, hi) = mesh.bounds();
        FAR_RADII * 0.5 * (hi - lo).length()
    }

    /// The most bytes [`Pseudonormals::gpu_words`] takes for a mesh of `triangles` and
    /// `vertices` (at most one crowded edge per three half-edges), with or without its
    /// `vertex_indices`.
    pub fn max_gpu_bytes(triangles: usize, vertices: usize, vertex_indices: bool) -> u64 {
        let per_triangle = if vertex_indices { 9 } else { 6 };
        4 * (4 + per_triangle * triangles as u64 + 3 * vertices as u64)
    }

    /// The sign of `p` against triangle `t` of `mesh`, with the unit pseudonormal of the
    /// feature nearest to `p` (zero where it vanishes, e.g. on a degenerate sliver).
    pub fn sign(&self, mesh: &Mesh, t: usize, p: DVec3) -> (f64, DVec3) {
        let (q, feature) = closest_feature(p, mesh.corners(t));
        let normal = self.feature_normal(mesh, t, feature);
        let sign = if (p - q).dot(normal) < 0.0 { -1.0 } else { 1.0 };
        (sign, normal)
    }

    /// The unit pseudonormal of `feature` of triangle `t` (zero where it vanishes).
    pub fn feature_normal(&self, mesh: &Mesh, t: usize, feature: Feature) -> DVec3 {
        let tri = mesh.triangles[t];
        match feature {
            Feature::Face => face_normal(mesh, t),
            Feature::Vertex(k) => self.vertex[tri[k] as usize],
            Feature::Edge(i, j) => {
                // The edge between corners i and j is the half-edge from the one before the
                // other (k to k + 1, cyclically).
                let k = if (i + 1) % 3 == j { i } else { j };
                self.edge_sum(mesh, (3 * t + k) as u32)
            }
        }
        .normalize_or_zero()
    }
}

/// Far rows' proxies lie this many times the mesh's radius from its centre
/// ([`Pseudonormals::far_radius`]).
pub const FAR_RADII: f64 = 1024.0;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_triangles_than_half_edge_numbers_are_refused() {
        assert_eq!(too_many_triangles(MAX_TRIANGLES), None);
        let problem = too_many_triangles(MAX_TRIANGLES + 1).expect("refused");
        assert!(
            problem.starts_with("1431655766 triangles: at most 1431655765"),
            "{problem}"
        );
    }
}
