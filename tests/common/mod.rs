//! The one GPU-vs-reference harness: SPEC §3's bound (`closest::tolerance`) is applied here
//! and nowhere else.
#![allow(dead_code)]

use std::sync::OnceLock;

use closest::mesh::Mesh;
use closest::reference::{self, Hit};
use closest::shape::ShapeKind;
use closest::{DVec3, Engine, EngineOptions, GpuHit, Mode, Shape};

/// The shared engine. Without an adapter this fails loudly: GPU tests never skip.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| open_engine(EngineOptions::default()))
}

pub fn open_engine(options: EngineOptions) -> Engine {
    Engine::new(&options).unwrap_or_else(|e| {
        panic!(
            "GPU tests need an adapter and found none.\n{e}\n\
             On Debian/Ubuntu: `sudo apt-get install -y mesa-vulkan-drivers` (lavapipe)."
        )
    })
}

/// Two engines with chunks of `chunk_rows` rows: the default one, which on lavapipe with 8-lane
/// subgroups (256-bit vectors; 4 lanes without AVX) must run the subgroup kernels, and one held to the portable kernels; tests
/// compare their answers bit for bit.
pub fn subgroup_and_portable_engines(chunk_rows: usize) -> [Engine; 2] {
    subgroup_and_portable_engines_with(EngineOptions {
        chunk_rows: Some(chunk_rows),
        ..Default::default()
    })
}

/// [`subgroup_and_portable_engines`] with `options` otherwise.
pub fn subgroup_and_portable_engines_with(options: EngineOptions) -> [Engine; 2] {
    let info = engine().adapter_info();
    let lavapipe = info.backend == wgpu::Backend::Vulkan
        && info.device_type == wgpu::DeviceType::Cpu
        && (info.subgroup_min_size, info.subgroup_max_size) == (8, 8);
    if lavapipe {
        // Were it not, the comparison would be of the portable kernels with themselves.
        assert!(
            engine().subgroup_kernels(),
            "lavapipe with 8-lane subgroups runs the subgroup kernels"
        );
    }
    let engines = [false, true].map(|portable_kernels| {
        open_engine(EngineOptions {
            portable_kernels,
            ..options.clone()
        })
    });
    assert!(!engines[1].subgroup_kernels());
    engines
}

/// Rows `a` and `b` are the same bits.
pub fn assert_same_hits(a: &[GpuHit], b: &[GpuHit], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: row counts");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(
            bytemuck::bytes_of(x),
            bytemuck::bytes_of(y),
            "{what}, row {i}: {x:?} vs {y:?}"
        );
    }
}

/// Deterministic splitmix64 generator, so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn vec(&mut self, lo: f64, hi: f64) -> DVec3 {
        DVec3::new(self.range(lo, hi), self.range(lo, hi), self.range(lo, hi))
    }
    pub fn unit(&mut self) -> DVec3 {
        loop {
            let v = self.vec(-1.0, 1.0);
            let l = v.length();
            if l > 0.1 && l <= 1.0 {
                return v / l;
            }
        }
    }
    pub fn quaternion(&mut self) -> [f64; 4] {
        let u = self.unit();
        let w = self.range(-1.0, 1.0);
        let s = (1.0 - w * w).sqrt();
        [u.x * s, u.y * s, u.z * s, w]
    }
}

pub fn f32_points(points: &[DVec3]) -> Vec<[f32; 3]> {
    points.iter().map(|p| p.to_f32()).collect()
}

fn hit_point(h: &GpuHit) -> DVec3 {
    DVec3::new(h.point[0] as f64, h.point[1] as f64, h.point[2] as f64)
}

fn hit_normal(h: &GpuHit) -> DVec3 {
    DVec3::new(h.normal[0] as f64, h.normal[1] as f64, h.normal[2] as f64)
}

/// `x ≤ bound`, false for NaN (so a NaN result always fails a check).
pub fn within(x: f64, bound: f64) -> bool {
    x <= bound
}

/// Signed distance of `q` to the shape's boundary (surface mode), by the reference.
fn surface_distance(shape: &Shape, q: DVec3) -> f64 {
    reference::query_shape(shape, 0, q, Mode::Surface).distance
}

/// Check one GPU hit for point `p` against `shape` (which the GPU chose, or was paired with)
/// and the reference's answer `expected`. Returns a description of every violation.
pub fn check_hit(
    shape: &Shape,
    p: DVec3,
    gpu: &GpuHit,
    expected: &Hit,
    mode: Mode,
) -> Result<(), String> {
    if !closest::is_queryable(p) {
        let all_nan = gpu
            .point
            .iter()
            .chain(gpu.normal.iter())
            .all(|x| x.is_nan())
            && gpu.distance.is_nan();
        return if gpu.shape == -1 && all_nan {
            Ok(())
        } else {
            Err(format!(
                "non-finite row must give NaN and shape -1, got {gpu:?}"
            ))
        };
    }
    let tol = closest::tolerance(shape.scale().max(p.max_abs()));
    let q = hit_point(gpu);
    let d = gpu.distance as f64;
    let mut problems = Vec::new();
    if !within((d - expected.distance).abs(), tol) {
        problems.push(format!(
            "distance {d} vs reference {} (|diff| {:e} > tol {tol:e})",
            expected.distance,
            (d - expected.distance).abs()
        ));
    }
    // q must lie on the shape (in it, for solids in solid mode) …
    let on_shape = surface_distance(shape, q);
    let solid = mode == Mode::Solid && shape.kind().is_solid();
    let off_shape = if solid {
        on_shape.max(0.0)
    } else {
        on_shape.abs()
    };
    if !within(off_shape, tol) {
        problems.push(format!(
            "q = {q:?} is {off_shape:e} off the shape (tol {tol:e})"
        ));
    }
    // … and be a closest point: the reference's q, or at a near tie another one as close.
    let same_q = (q - expected.point).length() <= tol;
    let as_close = ((p - q).length() - expected.distance.abs()).abs() <= tol;
    if !(same_q || as_close) {
        problems.push(format!(
            "q = {q:?} vs reference {:?} (|diff| {:e}) and not as close to p",
            expected.point,
            (q - expected.point).length()
        ));
    }
    let n = hit_normal(gpu);
    let n_len = n.length();
    if !(n_len == 0.0 || (n_len - 1.0).abs() <= 1e-4) {
        problems.push(format!("normal {n:?} is neither unit nor zero"));
    }
    // Where d is well above the bound, the gradient is well defined and must match.
    if same_q && expected.distance.abs() > 100.0 * tol {
        let allowed = 10.0 * tol / expected.distance.abs() + 1e-4;
        if !within((n - expected.normal).length(), allowed) {
            problems.push(format!("normal {n:?} vs reference {:?}", expected.normal));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Point i against shape i on the GPU, checked row by row against the reference.
/// Panics with every failing row (up to 20) named by `label(i)`.
pub fn assert_paired(
    shapes: &[Shape],
    points: &[DVec3],
    mode: Mode,
    label: impl Fn(usize) -> String,
) {
    let hits = engine()
        .paired_hits(shapes, &f32_points(points), mode)
        .expect("paired query");
    assert_eq!(hits.len(), points.len());
    let mut failures = Vec::new();
    for (i, ((shape, p), hit)) in shapes.iter().zip(points).zip(&hits).enumerate() {
        let expected = reference::query_shape(shape, i, *p, mode);
        if closest::is_queryable(*p) && hit.shape != i as i32 {
            failures.push(format!(
                "{}: shape index {} instead of {i}",
                label(i),
                hit.shape
            ));
        }
        if let Err(e) = check_hit(shape, *p, hit, &expected, mode) {
            failures.push(format!("{} [{mode:?}] {shape:?} p = {p:?}: {e}", label(i)));
        }
    }
    assert_no_failures(&failures, points.len());
}

/// Nearest shape of `shapes` for every point, checked against the reference.
pub fn assert_nearest(engine: &Engine, shapes: &[Shape], points: &[DVec3], mode: Mode) {
    let scene = engine.upload_scene(shapes).expect("upload scene");
    let hits = engine
        .scene_hits(&scene, &f32_points(points), mode)
        .expect("scene query");
    let mut failures = Vec::new();
    for (p, hit) in points.iter().zip(&hits) {
        let expected = reference::nearest(shapes, *p, mode);
        if !closest::is_queryable(*p) {
            if let Err(e) = check_hit(&shapes[0], *p, hit, &expected, mode) {
                failures.push(e);
            }
            continue;
        }
        let Some(chosen) = usize::try_from(hit.shape)
            .ok()
            .filter(|&i| i < shapes.len())
        else {
            failures.push(format!("p = {p:?}: shape index {} out of range", hit.shape));
            continue;
        };
        let best = &shapes[expected.shape as usize];
        let tol = closest::tolerance(best.scale().max(shapes[chosen].scale()).max(p.max_abs()));
        // A different shape is fine only at a near tie.
        let own = reference::query_shape(&shapes[chosen], chosen, *p, mode);
        if chosen as i64 != expected.shape
            && !within((own.distance.abs() - expected.distance.abs()).abs(), tol)
        {
            failures.push(format!(
                "p = {p:?}: chose shape {chosen} at {} but shape {} is at {}",
                own.distance, expected.shape, expected.distance
            ));
            continue;
        }
        if let Err(e) = check_hit(&shapes[chosen], *p, hit, &own, mode) {
            failures.push(format!("p = {p:?} (shape {chosen}): {e}"));
        }
    }
    assert_no_failures(&failures, points.len());
}

/// Fail with the first 20 failing rows, if any.
fn assert_no_failures(failures: &[String], rows: usize) {
    assert!(
        failures.is_empty(),
        "{} of {rows} rows fail:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// `count` shapes of every kind in `ShapeKind::ALL` in turn, around the origin (an exhaustive
/// match: a new kind does not compile until it has its arm here).
pub fn mixed_scene(rng: &mut Rng, count: usize, spread: f64) -> Vec<Shape> {
    (0..count)
        .map(|i| {
            let c = rng.vec(-spread, spread);
            let s = rng.range(0.05, 1.0);
            match ShapeKind::ALL[i % ShapeKind::ALL.len()] {
                ShapeKind::Sphere => Shape::Sphere {
                    center: c,
                    radius: s,
                },
                ShapeKind::Aabb => Shape::Aabb {
                    min: c - DVec3::new(s, s, s),
                    max: c + DVec3::new(s, 2.0 * s, s),
                },
                ShapeKind::Box => Shape::Box {
                    center: c,
                    half_extents: rng.vec(0.05, 1.0),
                    rotation: rng.quaternion(),
                },
                ShapeKind::Plane => Shape::Plane {
                    normal: rng.unit(),
                    offset: rng.range(-spread, spread) * 3.0,
                },
                ShapeKind::Segment => Shape::Segment {
                    a: c,
                    b: c + rng.vec(-1.0, 1.0),
                },
                ShapeKind::Line => Shape::Line {
                    a: c,
                    b: c + rng.vec(-1.0, 1.0),
                },
                ShapeKind::Ray => Shape::Ray {
                    origin: c,
                    direction: rng.unit(),
                },
                ShapeKind::Triangle => Shape::Triangle {
                    a: c,
                    b: c + rng.vec(-1.0, 1.0),
                    c: c + rng.vec(-1.0, 1.0),
                },
                ShapeKind::Capsule => Shape::Capsule {
                    a: c,
                    b: c + rng.vec(-1.0, 1.0),
                    radius: s,
                },
                ShapeKind::Cylinder => Shape::Cylinder {
                    a: c,
                    b: c + rng.vec(-1.0, 1.0),
                    radius: s,
                },
                ShapeKind::Wedge => Shape::Wedge {
                    center: c,
                    half_extents: rng.vec(0.05, 1.0),
                    rotation: rng.quaternion(),
                },
                ShapeKind::CornerWedge => Shape::CornerWedge {
                    center: c,
                    half_extents: rng.vec(0.05, 1.0),
                    rotation: rng.quaternion(),
                },
                ShapeKind::Cone => Shape::Cone {
                    a: c,
                    b: c + rng.vec(-1.0, 1.0),
                    radius: s,
                },
                ShapeKind::Torus => Shape::Torus {
                    center: c,
                    axis: rng.unit(),
                    major_radius: s,
                    minor_radius: s * rng.range(0.1, 1.0),
                },
                ShapeKind::Ellipsoid => Shape::Ellipsoid {
                    center: c,
                    radii: rng.vec(0.05, 1.0),
                    rotation: rng.quaternion(),
                },
                ShapeKind::ConvexHull => Shape::ConvexHull(
                    closest::hull::ConvexHull::new((0..6).map(|_| c + rng.vec(-s, s)).collect())
                        .expect("a hull"),
                ),
            }
        })
        .collect()
}

/// A small mesh with five faces on edge 0–1 (four whose normals sum to other bits in another
/// order, and one whose corners lie on a line), boundary edges and a triangle listing one vertex
/// twice: the cases pseudonormal tables get wrong first.
pub fn odd_mesh() -> Mesh {
    let v = |x: f64, y: f64, z: f64| DVec3::new(x, y, z);
    Mesh::new(
        vec![
            v(0.0, 0.0, 0.0),
            v(1.0, 0.0, 0.0),
            v(0.32482480805757574, 1.0, 0.7344315366398247),
            v(0.3461577641341791, -1.0, 0.6190916545212678),
            v(0.3798145817171963, 0.503585382873625, 1.0),
            v(0.48429910370513374, 0.5535912187285604, -1.0),
            v(2.0, 0.0, 0.0),
        ],
        vec![
            [0, 1, 2],
            [1, 0, 3],
            [0, 1, 4],
            [1, 0, 5],
            [1, 1, 2],
            [0, 1, 6],
            [2, 4, 3],
        ],
        "odd",
    )
    .unwrap()
}

/// Each job collected, as the tests ask them: whole hits, or the columns of some fields. The
/// engine has one method per job (a request value and a sink); these are the tests' own
/// shorthand for "collect all of it".
pub trait TestJobs {
    fn scene_hits<'p>(
        &self,
        scene: &'p closest::GpuScene,
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
    ) -> closest::Result<Vec<GpuHit>>;
    fn scene_columns<'p>(
        &self,
        scene: &'p closest::GpuScene,
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns>;
    fn paired_hits<'p>(
        &self,
        shapes: &'p [Shape],
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
    ) -> closest::Result<Vec<GpuHit>>;
    fn paired_columns<'p>(
        &self,
        shapes: &'p [Shape],
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns>;
    fn mesh_hits<'p>(
        &self,
        mesh: &'p closest::GpuMesh,
        points: impl Into<closest::Points<'p>>,
        sign: closest::mesh::Sign,
    ) -> closest::Result<Vec<GpuHit>>;
    fn mesh_columns<'p>(
        &self,
        mesh: &'p closest::GpuMesh,
        points: impl Into<closest::Points<'p>>,
        sign: closest::mesh::Sign,
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns>;
    fn segment_hits(
        &self,
        a: &[[DVec3; 2]],
        b: &[[DVec3; 2]],
    ) -> closest::Result<Vec<closest::GpuSegmentHit>>;
    fn segment_columns(
        &self,
        a: &[[DVec3; 2]],
        b: &[[DVec3; 2]],
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns>;
    fn contacts(
        &self,
        scene: &closest::GpuScene,
        spheres: &[[f32; 4]],
    ) -> closest::Result<Vec<closest::Contact>>;
    fn contact_columns(
        &self,
        scene: &closest::GpuScene,
        spheres: &[[f32; 4]],
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns>;
    fn sdf_values(
        &self,
        mesh: &closest::GpuMesh,
        grid: &closest::sdf::Grid,
        sign: closest::mesh::Sign,
    ) -> closest::Result<Vec<f32>>;
}

fn all_hits() -> closest::Fields {
    closest::Fields::all(closest::Family::Hits)
}

impl TestJobs for Engine {
    fn scene_hits<'p>(
        &self,
        scene: &'p closest::GpuScene,
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
    ) -> closest::Result<Vec<GpuHit>> {
        let mut hits = Vec::new();
        let job = closest::engine::SceneQuery {
            scene,
            points: points.into(),
            mode,
            fields: all_hits(),
        };
        self.query_scene(job, &mut hits).map(|()| hits)
    }

    fn scene_columns<'p>(
        &self,
        scene: &'p closest::GpuScene,
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns> {
        let points = points.into();
        let rows = points.len();
        let job = closest::engine::SceneQuery {
            scene,
            points,
            mode,
            fields,
        };
        closest::Columns::collect(fields, rows, |sink| self.query_scene(job, sink))
    }

    fn paired_hits<'p>(
        &self,
        shapes: &'p [Shape],
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
    ) -> closest::Result<Vec<GpuHit>> {
        let mut hits = Vec::new();
        let job = closest::engine::PairedQuery {
            shapes,
            points: points.into(),
            mode,
            fields: all_hits(),
        };
        self.query_paired(job, &mut hits).map(|()| hits)
    }

    fn paired_columns<'p>(
        &self,
        shapes: &'p [Shape],
        points: impl Into<closest::Points<'p>>,
        mode: Mode,
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns> {
        let points = points.into();
        let rows = points.len();
        let job = closest::engine::PairedQuery {
            shapes,
            points,
            mode,
            fields,
        };
        closest::Columns::collect(fields, rows, |sink| self.query_paired(job, sink))
    }

    fn mesh_hits<'p>(
        &self,
        mesh: &'p closest::GpuMesh,
        points: impl Into<closest::Points<'p>>,
        sign: closest::mesh::Sign,
    ) -> closest::Result<Vec<GpuHit>> {
        let mut hits = Vec::new();
        let job = closest::engine::MeshQuery {
            mesh,
            points: points.into(),
            sign,
            fields: all_hits(),
        };
        self.query_mesh(job, &mut hits).map(|()| hits)
    }

    fn mesh_columns<'p>(
        &self,
        mesh: &'p closest::GpuMesh,
        points: impl Into<closest::Points<'p>>,
        sign: closest::mesh::Sign,
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns> {
        let points = points.into();
        let rows = points.len();
        let job = closest::engine::MeshQuery {
            mesh,
            points,
            sign,
            fields,
        };
        closest::Columns::collect(fields, rows, |sink| self.query_mesh(job, sink))
    }

    fn segment_hits(
        &self,
        a: &[[DVec3; 2]],
        b: &[[DVec3; 2]],
    ) -> closest::Result<Vec<closest::GpuSegmentHit>> {
        let mut hits = Vec::new();
        let job = closest::engine::SegmentPairs {
            pairs: closest::engine::SegmentRows::Slices(a, b),
            fields: closest::Fields::all(closest::Family::Segments),
        };
        self.segment_pairs(job, &mut hits).map(|()| hits)
    }

    fn segment_columns(
        &self,
        a: &[[DVec3; 2]],
        b: &[[DVec3; 2]],
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns> {
        let job = closest::engine::SegmentPairs {
            pairs: closest::engine::SegmentRows::Slices(a, b),
            fields,
        };
        closest::Columns::collect(fields, a.len(), |sink| self.segment_pairs(job, sink))
    }

    fn contacts(
        &self,
        scene: &closest::GpuScene,
        spheres: &[[f32; 4]],
    ) -> closest::Result<Vec<closest::Contact>> {
        let fields = closest::Fields::all(closest::Family::Contacts);
        let columns = self.contact_columns(scene, spheres, fields)?;
        let f = |name: &str| columns.f32s(name).expect("every contact field").to_vec();
        let (point, depth, normal) = (f("point"), f("depth"), f("normal"));
        let shape = columns.get("shape").expect("every contact field");
        Ok((0..spheres.len())
            .map(|i| closest::Contact {
                point: [point[3 * i], point[3 * i + 1], point[3 * i + 2]],
                depth: depth[i],
                normal: [normal[3 * i], normal[3 * i + 1], normal[3 * i + 2]],
                shape: shape[i] as i32,
            })
            .collect())
    }

    fn contact_columns(
        &self,
        scene: &closest::GpuScene,
        spheres: &[[f32; 4]],
        fields: closest::Fields,
    ) -> closest::Result<closest::Columns> {
        let job = closest::engine::SphereContacts {
            scene,
            spheres: closest::engine::Spheres::Slice(spheres),
            fields,
        };
        closest::Columns::collect(fields, spheres.len(), |sink| {
            self.sphere_contacts(job, sink)
        })
    }

    fn sdf_values(
        &self,
        mesh: &closest::GpuMesh,
        grid: &closest::sdf::Grid,
        sign: closest::mesh::Sign,
    ) -> closest::Result<Vec<f32>> {
        let mut values = Vec::new();
        let job = closest::engine::SdfGrid { mesh, grid, sign };
        self.sdf(job, &mut |_first, chunk: &[f32]| {
            values.extend_from_slice(chunk);
            Ok(())
        })
        .map(|()| values)
    }
}

/// A closed, outward-wound sphere of `radius` around `centre`: an octahedron subdivided
/// `levels` times, its vertices pushed onto the sphere.
pub fn octahedron_sphere(centre: DVec3, radius: f64, levels: usize) -> (Vec<DVec3>, Vec<[u32; 3]>) {
    let mut vertices = vec![
        DVec3::X,
        -DVec3::X,
        DVec3::Y,
        -DVec3::Y,
        DVec3::new(0.0, 0.0, 1.0),
        DVec3::new(0.0, 0.0, -1.0),
    ];
    let mut triangles: Vec<[u32; 3]> = vec![
        [0, 2, 4],
        [2, 1, 4],
        [1, 3, 4],
        [3, 0, 4],
        [2, 0, 5],
        [1, 2, 5],
        [3, 1, 5],
        [0, 3, 5],
    ];
    for _ in 0..levels {
        let mut midpoints = std::collections::HashMap::new();
        let mut midpoint = |a: u32, b: u32, vertices: &mut Vec<DVec3>| {
            *midpoints.entry((a.min(b), a.max(b))).or_insert_with(|| {
                let m = (vertices[a as usize] + vertices[b as usize]) * 0.5;
                vertices.push(m.normalize_or_zero());
                vertices.len() as u32 - 1
            })
        };
        triangles = triangles
            .iter()
            .flat_map(|&[a, b, c]| {
                let ab = midpoint(a, b, &mut vertices);
                let bc = midpoint(b, c, &mut vertices);
                let ca = midpoint(c, a, &mut vertices);
                [[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]]
            })
            .collect();
    }
    let vertices = vertices.iter().map(|&v| centre + v * radius).collect();
    (vertices, triangles)
}

/// An `.npz` array's raw little-endian bytes (after its `.npy` header).
pub fn npz_array(path: &std::path::Path, name: &str) -> Vec<u8> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut entry = zip.by_name(&format!("{name}.npy")).unwrap();
    let mut bytes = Vec::new();
    entry.read_to_end(&mut bytes).unwrap();
    let header = closest::io::npy::read_header(&mut bytes.as_slice()).unwrap();
    bytes[header.data_offset as usize..].to_vec()
}

/// Every convex kind, around `centre`, about `size` across, turned by `rng`.
pub fn convex_kinds(rng: &mut Rng, centre: DVec3, size: f64) -> Vec<Shape> {
    let rotation = rng.quaternion();
    let mut at = |spread: f64| centre + rng.vec(-spread, spread) * size;
    let (a, b, c) = (at(0.5), at(0.5), at(0.5));
    let h = DVec3::new(0.5, 0.3, 0.2) * size;
    let hull_points: Vec<DVec3> = (0..12).map(|_| at(0.5)).collect();
    vec![
        Shape::Sphere {
            center: a,
            radius: 0.4 * size,
        },
        Shape::Capsule {
            a,
            b,
            radius: 0.2 * size,
        },
        Shape::Segment { a, b },
        Shape::Triangle { a, b, c },
        Shape::Aabb {
            min: centre - h,
            max: centre + h,
        },
        Shape::Box {
            center: centre,
            half_extents: h,
            rotation,
        },
        Shape::Wedge {
            center: centre,
            half_extents: h,
            rotation,
        },
        Shape::CornerWedge {
            center: centre,
            half_extents: h,
            rotation,
        },
        Shape::Cylinder {
            a,
            b,
            radius: 0.3 * size,
        },
        Shape::Cone {
            a,
            b,
            radius: 0.3 * size,
        },
        Shape::Ellipsoid {
            center: centre,
            radii: h,
            rotation,
        },
        Shape::ConvexHull(closest::hull::ConvexHull::new(hull_points).unwrap()),
    ]
}

/// A random shape of `kind` about `c`, of size about `s` (every kind: a new one does not compile
/// until it has its arm here).
pub fn random_shape(kind: ShapeKind, rng: &mut Rng, c: DVec3, s: f64) -> Shape {
    let point = |rng: &mut Rng| c + rng.vec(-s, s);
    match kind {
        ShapeKind::Sphere => Shape::Sphere {
            center: c,
            radius: rng.range(0.1, 1.0) * s,
        },
        ShapeKind::Aabb => {
            let h = rng.vec(0.05, 1.0) * s;
            Shape::Aabb {
                min: c - h,
                max: c + h,
            }
        }
        ShapeKind::Box => Shape::Box {
            center: c,
            half_extents: rng.vec(0.05, 1.0) * s,
            rotation: rng.quaternion(),
        },
        ShapeKind::Plane => {
            let normal = rng.unit();
            Shape::Plane {
                normal,
                offset: normal.dot(c),
            }
        }
        ShapeKind::Segment => Shape::Segment {
            a: point(rng),
            b: point(rng),
        },
        ShapeKind::Line => Shape::Line {
            a: point(rng),
            b: point(rng),
        },
        ShapeKind::Ray => Shape::Ray {
            origin: point(rng),
            direction: rng.unit() * rng.range(0.1, 10.0),
        },
        ShapeKind::Triangle => Shape::Triangle {
            a: point(rng),
            b: point(rng),
            c: point(rng),
        },
        ShapeKind::Capsule => Shape::Capsule {
            a: point(rng),
            b: point(rng),
            radius: rng.range(0.05, 0.5) * s,
        },
        ShapeKind::Cylinder => Shape::Cylinder {
            a: point(rng),
            b: point(rng),
            radius: rng.range(0.05, 0.5) * s,
        },
        ShapeKind::Wedge => Shape::Wedge {
            center: c,
            half_extents: rng.vec(0.05, 1.0) * s,
            rotation: rng.quaternion(),
        },
        ShapeKind::CornerWedge => Shape::CornerWedge {
            center: c,
            half_extents: rng.vec(0.05, 1.0) * s,
            rotation: rng.quaternion(),
        },
        ShapeKind::Cone => Shape::Cone {
            a: point(rng),
            b: point(rng),
            radius: rng.range(0.05, 1.0) * s,
        },
        ShapeKind::Torus => {
            let major_radius = rng.range(0.2, 1.0) * s;
            Shape::Torus {
                center: c,
                axis: rng.unit(),
                major_radius,
                minor_radius: major_radius * rng.range(0.05, 1.0),
            }
        }
        ShapeKind::Ellipsoid => Shape::Ellipsoid {
            center: c,
            radii: rng.vec(0.05, 1.0) * s,
            rotation: rng.quaternion(),
        },
        ShapeKind::ConvexHull => {
            let n = 4 + (rng.next_u64() % 21) as usize;
            let points = (0..n).map(|_| point(rng)).collect();
            Shape::ConvexHull(closest::hull::ConvexHull::new(points).expect("a hull"))
        }
    }
}
