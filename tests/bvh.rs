//! Nearest-shape queries through the per-kind BVHs against the f64 brute-force reference:
//! random scenes of 1, 2, 1 000 and 100 000 shapes, and degenerate scenes (all shapes at one
//! point, all on a line, huge and tiny shapes mixed).

mod common;

use closest::bvh;
use closest::shape::ShapeKind::{self, *};
use closest::{DVec3, EngineOptions, Mode, Shape};
use common::{
    Rng, TestJobs, assert_nearest, assert_same_hits, engine, open_engine,
    subgroup_and_portable_engines, subgroup_and_portable_engines_with,
};

/// The kinds with bounds (everything but planes, lines and rays), from `ShapeKind::ALL`.
fn bounded_kinds() -> Vec<ShapeKind> {
    ShapeKind::ALL
        .into_iter()
        .filter(|&kind| {
            let mut rng = Rng::new(0);
            bounded_shape_of_kind(&mut rng, DVec3::ZERO, 1.0, kind).is_some()
        })
        .collect()
}

fn random_bounded_shape(rng: &mut Rng, c: DVec3, size: f64) -> Shape {
    let kinds = bounded_kinds();
    let kind = kinds[(rng.next_u64() % kinds.len() as u64) as usize];
    bounded_shape_of_kind(rng, c, size, kind).expect("a bounded kind")
}

/// A random shape of kind `kind` centred near `c`, `None` for the unbounded kinds (an
/// exhaustive match: a new kind does not compile until it has its arm here).
fn bounded_shape_of_kind(rng: &mut Rng, c: DVec3, size: f64, kind: ShapeKind) -> Option<Shape> {
    let h = rng.vec(0.1, 1.0) * size;
    Some(match kind {
        ShapeKind::Plane | ShapeKind::Line | ShapeKind::Ray => return None,
        ShapeKind::Sphere => Shape::Sphere {
            center: c,
            radius: h.x,
        },
        ShapeKind::Aabb => Shape::Aabb {
            min: c - h,
            max: c + h,
        },
        ShapeKind::Box => Shape::Box {
            center: c,
            half_extents: h,
            rotation: rng.quaternion(),
        },
        ShapeKind::Segment => Shape::Segment {
            a: c,
            b: c + rng.unit() * size,
        },
        ShapeKind::Triangle => Shape::Triangle {
            a: c,
            b: c + rng.unit() * size,
            c: c + rng.unit() * size,
        },
        ShapeKind::Capsule => Shape::Capsule {
            a: c,
            b: c + rng.unit() * size,
            radius: h.y,
        },
        ShapeKind::Cylinder => Shape::Cylinder {
            a: c,
            b: c + rng.unit() * size,
            radius: h.z,
        },
        ShapeKind::Wedge => Shape::Wedge {
            center: c,
            half_extents: h,
            rotation: rng.quaternion(),
        },
        ShapeKind::CornerWedge => Shape::CornerWedge {
            center: c,
            half_extents: h,
            rotation: rng.quaternion(),
        },
        ShapeKind::Cone => Shape::Cone {
            a: c,
            b: c + rng.unit() * size,
            radius: h.x,
        },
        ShapeKind::Torus => Shape::Torus {
            center: c,
            axis: rng.unit(),
            major_radius: h.x.max(h.y),
            minor_radius: h.x.min(h.y),
        },
        ShapeKind::Ellipsoid => Shape::Ellipsoid {
            center: c,
            radii: h,
            rotation: rng.quaternion(),
        },
        ShapeKind::ConvexHull => Shape::ConvexHull(
            closest::hull::ConvexHull::new((0..6).map(|_| c + rng.vec(-size, size)).collect())
                .expect("a hull"),
        ),
    })
}

fn scene(rng: &mut Rng, count: usize, spread: f64, size: f64) -> Vec<Shape> {
    (0..count)
        .map(|_| {
            let c = rng.vec(-spread, spread);
            random_bounded_shape(rng, c, size)
        })
        .collect()
}

fn points(rng: &mut Rng, count: usize, spread: f64) -> Vec<DVec3> {
    (0..count).map(|_| rng.vec(-spread, spread)).collect()
}

#[test]
fn bvh_scenes_of_1_2_and_1000_shapes_match_reference() {
    let mut rng = Rng::new(5);
    for count in [1, 2, 1000] {
        let shapes = scene(&mut rng, count, 20.0, 1.0);
        let pts = points(&mut rng, 2000, 25.0);
        for mode in [Mode::Solid, Mode::Surface] {
            assert_nearest(engine(), &shapes, &pts, mode);
        }
    }
}

#[test]
fn bvh_scene_of_100000_shapes_matches_reference() {
    let mut rng = Rng::new(6);
    let mut shapes = scene(&mut rng, 100_000, 100.0, 0.5);
    // Unbounded kinds ride along, scanned linearly, nearest to the points beyond z = ±100.
    shapes.push(Shape::Plane {
        normal: DVec3::Z,
        offset: -104.0,
    });
    shapes.push(Shape::Line {
        a: DVec3::new(0.0, 0.0, 104.0),
        b: DVec3::new(1.0, 0.0, 104.0),
    });
    let pts = points(&mut rng, 300, 110.0);
    assert_nearest(engine(), &shapes, &pts, Mode::Surface);
}

/// Scenes of at most four kinds, which get cell lists (`gpu::cells`): each of `count` shapes
/// takes its kind from `kinds` in turn.
fn scene_of_kinds(
    rng: &mut Rng,
    kinds: &[ShapeKind],
    count: usize,
    (centre, spread): (DVec3, f64),
    size: f64,
) -> Vec<Shape> {
    (0..count)
        .map(|i| {
            let c = centre + rng.vec(-spread, spread);
            bounded_shape_of_kind(rng, c, size, kinds[i % kinds.len()]).expect("bounded")
        })
        .collect()
}

/// Points on the shapes' features: sphere and box surfaces, segment and triangle corners and
/// edges (where ties and inside/outside flips are likeliest).
fn feature_points(shapes: &[Shape]) -> Vec<DVec3> {
    let mut out = Vec::new();
    for shape in shapes.iter().take(300) {
        match shape {
            Shape::Sphere { center, radius } => out.push(*center + DVec3::X * *radius),
            Shape::Aabb { min, max } => {
                out.extend([*min, *max, (*min + *max) * 0.5 + DVec3::Y * 1e-3])
            }
            Shape::Segment { a, b }
            | Shape::Capsule { a, b, .. }
            | Shape::Cylinder { a, b, .. } => out.extend([*a, *b, (*a + *b) * 0.5]),
            Shape::Triangle { a, b, c } => out.extend([*a, (*b + *c) * 0.5, (*a + *b + *c) / 3.0]),
            Shape::Box { center, .. }
            | Shape::Ellipsoid { center, .. }
            | Shape::Torus { center, .. } => out.push(*center),
            _ => {}
        }
    }
    out
}

/// Cell lists answer every row as the walk does, bit for bit, in both kernels and modes:
/// scenes of four kinds, near the origin and millimetre shapes at 10^4,
/// duplicates (ties to the lowest index), points on features, beyond the grid (walked) and
/// non-finite rows.
#[test]
fn cell_lists_answer_every_row_as_the_walk_does() {
    let [subgroup, portable] = subgroup_and_portable_engines(1000);
    let [walk_subgroup, walk_portable] = subgroup_and_portable_engines_with(EngineOptions {
        chunk_rows: Some(1000),
        walk_only: true,
        ..Default::default()
    });
    let mut rng = Rng::new(61);
    let offset = DVec3::new(1e4, -1e4, 5e3);
    // (name, shapes, points, whether the scene gets cell lists)
    let mut cases: Vec<(&str, Vec<Shape>, Vec<DVec3>, bool)> = Vec::new();
    for (name, kinds) in [
        (
            "spheres, boxes, capsules, triangles",
            &[Sphere, Box, Capsule, Triangle][..],
        ),
        (
            "cylinders, tori, ellipsoids, spheres",
            &[Cylinder, Torus, Ellipsoid, Sphere],
        ),
        (
            "aabbs, segments, wedges, cones",
            &[Aabb, Segment, Wedge, Cone],
        ),
        // Hulls are left to the walk (`gpu::cells`); the "eleven kinds" scene has them.
        (
            "corner wedges, ellipsoids, aabbs, spheres",
            &[CornerWedge, Ellipsoid, Aabb, Sphere],
        ),
        // More than four kinds: a third word a cell.
        (
            "eight kinds",
            &[
                Torus,
                Aabb,
                Box,
                Segment,
                Triangle,
                Capsule,
                Cylinder,
                CornerWedge,
            ],
        ),
    ] {
        let mut shapes = scene_of_kinds(&mut rng, kinds, 1200, (DVec3::ZERO, 30.0), 1.0);
        shapes.extend(shapes[..100].to_vec());
        let mut pts = points(&mut rng, 3000, 45.0);
        pts.extend(feature_points(&shapes));
        cases.push((name, shapes, pts, true));
    }
    // More than eight kinds: no lists (the walk answers, as tested elsewhere).
    let every_kind = scene_of_kinds(&mut rng, &bounded_kinds(), 1200, (DVec3::ZERO, 30.0), 1.0);
    assert!(
        !subgroup.upload_scene(&every_kind).unwrap().has_cell_lists(),
        "every bounded kind: cell lists"
    );
    // Metre shapes 10^4 from the origin; millimetre ones there, whose cells f32 could not
    // tell apart at 10^4 (no cell lists, before scenes were answered in their own frame: now
    // they have lists); huge shapes among tiny ones.
    for (name, spread, size, cells) in [
        ("metre shapes at 10^4", 60.0, 1.0, true),
        ("millimetre shapes at 10^4", 0.05, 0.001, true),
    ] {
        let shapes = scene_of_kinds(
            &mut rng,
            &[Sphere, Box, Triangle],
            800,
            (offset, spread),
            size,
        );
        let mut pts: Vec<DVec3> = points(&mut rng, 2000, spread * 1.2)
            .into_iter()
            .map(|p| p + offset)
            .collect();
        pts.extend(feature_points(&shapes));
        cases.push((name, shapes, pts, cells));
    }
    let mut mixed_sizes = scene_of_kinds(&mut rng, &[Sphere, Aabb], 600, (DVec3::ZERO, 20.0), 0.01);
    mixed_sizes.extend(scene_of_kinds(
        &mut rng,
        &[Sphere, Aabb],
        5,
        (DVec3::ZERO, 20.0),
        15.0,
    ));
    let pts = points(&mut rng, 3000, 30.0);
    cases.push(("huge among tiny", mixed_sizes, pts, true));
    for (name, shapes, pts, cells) in &cases {
        let mut pts: Vec<[f32; 3]> = pts.iter().map(|p| p.to_f32()).collect();
        for row in [0, 9, 1000] {
            pts[row] = [f32::NAN, 0.0, f32::INFINITY];
        }
        let engines = [&subgroup, &portable, &walk_subgroup, &walk_portable];
        let scenes: Vec<_> = engines
            .iter()
            .zip([*cells, *cells, false, false])
            .map(|(e, cells)| {
                let scene = e.upload_scene(shapes).unwrap();
                assert_eq!(scene.has_cell_lists(), cells, "{name}: cell lists");
                scene
            })
            .collect();
        for mode in [Mode::Solid, Mode::Surface] {
            let hits: Vec<Vec<closest::gpu::GpuHit>> = engines
                .iter()
                .zip(&scenes)
                .map(|(e, scene)| e.scene_hits(scene, &pts, mode).unwrap())
                .collect();
            for (k, what) in [(0, "subgroup"), (1, "portable")] {
                assert_same_hits(
                    &hits[k],
                    &hits[2],
                    &format!("{name}, {mode:?}, {what} cells vs walk"),
                );
            }
            assert_same_hits(&hits[3], &hits[2], &format!("{name}, {mode:?}, the walks"));
        }
    }
}

/// Cell lists against the f64 reference: the bench's four kinds, points in and around it.
#[test]
fn cell_list_scenes_match_reference() {
    let mut rng = Rng::new(62);
    let shapes = scene_of_kinds(
        &mut rng,
        &[Sphere, Box, Capsule, Triangle],
        5000,
        (DVec3::ZERO, 40.0),
        0.8,
    );
    assert!(engine().upload_scene(&shapes).unwrap().has_cell_lists());
    let mut pts = points(&mut rng, 4000, 55.0);
    pts.extend(feature_points(&shapes));
    for mode in [Mode::Solid, Mode::Surface] {
        assert_nearest(engine(), &shapes, &pts, mode);
    }
}

#[test]
fn degenerate_bvh_scenes_match_reference() {
    let mut rng = Rng::new(7);
    let c = DVec3::new(3.0, -2.0, 1.0);
    // All shapes at one point: every centroid equal, so every split is a median split.
    let same: Vec<Shape> = (0..500)
        .map(|i| Shape::Sphere {
            center: c,
            radius: 0.1 + (i % 7) as f64 * 0.1,
        })
        .collect();
    // All on a line.
    let line: Vec<Shape> = (0..500)
        .map(|i| Shape::Segment {
            a: c + DVec3::X * i as f64,
            b: c + DVec3::X * (i as f64 + 0.5),
        })
        .collect();
    // Huge and tiny mixed, far from the origin.
    let far = DVec3::new(1e4, 1e4, -1e4);
    let mut mixed = Vec::new();
    for i in 0..405 {
        let (reach, size) = if i < 400 { (1.0, 1e-3) } else { (1e3, 300.0) };
        let c = far + rng.vec(-reach, reach);
        mixed.push(random_bounded_shape(&mut rng, c, size));
    }
    for (name, shapes, spread, centre) in [
        ("one point", same, 3.0, c),
        ("line", line, 600.0, c),
        ("huge and tiny", mixed, 2.0, far),
    ] {
        let pts: Vec<DVec3> = points(&mut rng, 1500, spread)
            .into_iter()
            .map(|p| p + centre)
            .collect();
        eprintln!("scene: {name}");
        assert_nearest(engine(), &shapes, &pts, Mode::Solid);
    }
}

#[test]
fn bvh_depth_stays_within_the_stack_and_leaves_hold_one_kind() {
    // Identical bounds force median splits; depth must stay far below the kernel's stack, and
    // kinds mixed at one point must still end in single-kind leaves.
    let items: Vec<bvh::Item> = (0..200_000)
        .map(|i| bvh::Item {
            bounds: bvh::Bounds {
                min: DVec3::ZERO,
                max: DVec3::ZERO,
            },
            kind: (i % 3) as u32,
        })
        .collect();
    let built = bvh::build(&items, bvh::LEAF_SIZE, 0, 0);
    assert!(built.depth < bvh::STACK_SIZE / 2, "depth {}", built.depth);
    let mut order = built.order.clone();
    order.sort();
    assert_eq!(order, (0..200_000).collect::<Vec<_>>());
    let mut leaf_shapes = 0;
    for child in built.nodes.iter().flat_map(|n| n.children) {
        if child.count == 0 {
            continue;
        }
        let (n, kind) = (
            child.count & ((1 << bvh::LEAF_KIND_SHIFT) - 1),
            child.count >> bvh::LEAF_KIND_SHIFT,
        );
        assert!((1..=4).contains(&n), "leaf of {n} shapes");
        for k in child.first..child.first + n {
            assert_eq!(
                items[built.order[k as usize] as usize].kind, kind,
                "leaf {child:?}"
            );
        }
        leaf_shapes += n;
    }
    assert_eq!(leaf_shapes, 200_000);
}

/// The leaf-order range under `child` of a hierarchy built at `shape_offset` and
/// `node_offset`, found by walking its subtree (each leaf's range must follow the last).
fn walked_span(
    built: &bvh::Bvh,
    child: bvh::GpuBvhChild,
    shape_offset: u32,
    node_offset: u32,
) -> (usize, usize) {
    if child.count != 0 {
        let first = (child.first - shape_offset) as usize;
        return (
            first,
            first + (child.count & ((1 << bvh::LEAF_KIND_SHIFT) - 1)) as usize,
        );
    }
    let node = built.nodes[(child.first - node_offset) as usize];
    let [left, right] = node
        .children
        .map(|c| walked_span(built, c, shape_offset, node_offset));
    assert_eq!(left.1, right.0, "a node's sides are consecutive");
    (left.0, right.1)
}

#[test]
fn every_child_span_is_the_leaf_order_below_it() {
    // Large enough that subtrees are built on their own threads and joined, at offsets in
    // shared buffers as scenes place them.
    let mut rng = Rng::new(41);
    let items: Vec<bvh::Item> = (0..100_000)
        .map(|i| {
            let c = rng.vec(-100.0, 100.0);
            bvh::Item {
                bounds: bvh::Bounds {
                    min: c,
                    max: c + rng.vec(0.0, 2.0),
                },
                kind: (i % 2) as u32,
            }
        })
        .collect();
    let (shape_offset, node_offset) = (7, 3);
    let built = bvh::build(&items, bvh::LEAF_SIZE, shape_offset, node_offset);
    assert_eq!(built.spans.len(), built.nodes.len());
    for (node, spans) in built.nodes.iter().zip(&built.spans) {
        for (child, &span) in node.children.iter().zip(spans) {
            assert_eq!(span, walked_span(&built, *child, shape_offset, node_offset));
        }
    }
    let root = &built.spans[0];
    assert_eq!((root[0].0, root[1].1), (0, items.len()));
    // The same build under a stop flag: never set, the same hierarchy; set, none at all (the
    // caller was interrupted and would throw it away).
    let item = |i: usize| items[i];
    let flag = std::sync::atomic::AtomicBool::new(false);
    let (count, leaf) = (items.len(), bvh::LEAF_SIZE);
    let build_until = |flag| bvh::build_until(count, &item, leaf, shape_offset, node_offset, flag);
    let until = build_until(&flag).expect("a build never stopped");
    assert_eq!((until.nodes, until.order), (built.nodes, built.order));
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(build_until(&flag).is_none());
}

#[test]
fn bvh_path_equals_the_brute_force_gpu_path() {
    let mut rng = Rng::new(8);
    let shapes = scene(&mut rng, 3000, 30.0, 1.0);
    let pts: Vec<[f32; 3]> = points(&mut rng, 5000, 35.0)
        .iter()
        .map(|p| p.to_f32())
        .collect();
    let with_bvh = engine().upload_scene(&shapes).unwrap();
    let brute = engine().upload_scene_brute_force(&shapes).unwrap();
    for mode in [Mode::Solid, Mode::Surface] {
        let a = engine().scene_hits(&with_bvh, &pts, mode).unwrap();
        let b = engine().scene_hits(&brute, &pts, mode).unwrap();
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            // Both run the same f32 code per shape: the same answer, bit for bit, unless two
            // shapes tie exactly and only the visiting order differs (the index rule decides).
            assert_eq!(
                x.distance.abs(),
                y.distance.abs(),
                "row {i}: {x:?} vs {y:?}"
            );
            assert_eq!(x.shape, y.shape, "row {i}: {x:?} vs {y:?}");
        }
    }
}

/// Chunks of 1000 rows (the last one partial) go to the device in Morton order; every row
/// must come back where it was, with the same bits as a dispatch in row order.
fn assert_morton_order_changes_nothing(shapes: &[Shape], rng: &mut Rng) {
    let mut pts: Vec<[f32; 3]> = points(rng, 4321, 35.0).iter().map(|p| p.to_f32()).collect();
    // Non-finite rows, among them rows that seed others in triangle scenes (mesh.wgsl).
    for row in [17, 2500, 3000, 3064, 4320] {
        pts[row] = [f32::NAN, 0.0, f32::INFINITY];
    }
    let chunked = open_engine(EngineOptions {
        chunk_rows: Some(1000),
        ..Default::default()
    });
    let scene = chunked.upload_scene(shapes).unwrap();
    let reordered = chunked.scene_hits(&scene, &pts, Mode::Solid).unwrap();
    chunked.set_reorder_queries(false);
    let in_row_order = chunked.scene_hits(&scene, &pts, Mode::Solid).unwrap();
    for (i, (a, b)) in reordered.iter().zip(&in_row_order).enumerate() {
        assert_eq!(
            bytemuck::bytes_of(a),
            bytemuck::bytes_of(b),
            "row {i}: {a:?} vs {b:?}"
        );
    }
    for row in [17, 2500, 3000, 3064, 4320] {
        assert_eq!(reordered[row].shape, -1);
    }
    assert_nearest(&chunked, shapes, &points(rng, 300, 35.0), Mode::Surface);
}

#[test]
fn morton_ordered_dispatch_returns_rows_in_order() {
    let mut rng = Rng::new(12);
    let shapes = scene(&mut rng, 2000, 30.0, 1.0);
    assert_morton_order_changes_nothing(&shapes, &mut rng);
}

fn triangle_soup(rng: &mut Rng, count: usize, centre: DVec3, spread: f64, size: f64) -> Vec<Shape> {
    (0..count)
        .map(|_| {
            let a = centre + rng.vec(-spread, spread);
            let b = a + rng.unit() * size * rng.range(0.01, 1.0);
            let c = a + rng.unit() * size * rng.range(0.01, 1.0);
            Shape::Triangle { a, b, c }
        })
        .collect()
}

#[test]
fn triangle_scenes_answer_rows_in_any_order_alike() {
    // Triangle scenes run mesh.wgsl, whose rows start from the answers of earlier rows.
    let mut rng = Rng::new(15);
    let shapes = triangle_soup(&mut rng, 2000, DVec3::ZERO, 30.0, 2.0);
    assert_morton_order_changes_nothing(&shapes, &mut rng);
}

#[test]
fn triangle_scenes_equal_the_brute_force_gpu_path_with_ties_to_the_lowest_index() {
    // Every triangle twice (i and i + n): exact ties everywhere, which the lower index wins.
    let mut rng = Rng::new(16);
    let once = triangle_soup(&mut rng, 1500, DVec3::ZERO, 20.0, 2.0);
    let shapes: Vec<Shape> = once.iter().chain(&once).cloned().collect();
    let pts: Vec<[f32; 3]> = points(&mut rng, 4000, 25.0)
        .iter()
        .map(|p| p.to_f32())
        .collect();
    let with_bvh = engine().upload_scene(&shapes).unwrap();
    let brute = engine().upload_scene_brute_force(&shapes).unwrap();
    let a = engine().scene_hits(&with_bvh, &pts, Mode::Surface).unwrap();
    let b = engine().scene_hits(&brute, &pts, Mode::Surface).unwrap();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (0..once.len() as i32).contains(&x.shape),
            "row {i}: {x:?} is not the lower copy"
        );
        assert_eq!(
            bytemuck::bytes_of(x),
            bytemuck::bytes_of(y),
            "row {i}: {x:?} vs {y:?}"
        );
    }
}

#[test]
fn triangle_soups_get_oriented_boxes_and_stay_exact() {
    // A scene of triangles only gets boxes that follow the triangles (as meshes do): random
    // slivers, tiny and large triangles in every orientation, near and far from the origin.
    let mut rng = Rng::new(14);
    for (centre, spread, size) in [
        (DVec3::ZERO, 20.0, 1.0),
        (DVec3::new(3e4, -1e4, 2e4), 5.0, 0.01),
    ] {
        let shapes = triangle_soup(&mut rng, 3000, centre, spread, size);
        let pts: Vec<DVec3> = points(&mut rng, 1500, spread * 1.2)
            .into_iter()
            .map(|p| p + centre)
            .collect();
        assert_nearest(engine(), &shapes, &pts, Mode::Surface);
    }
}

/// The kernel's view of a packed child box (mesh.wgsl `child_entry`), in f64: the f16 half
/// extents decoded by moving their bits into an f32, the snorm16 quaternion used unnormalised.
fn packed_box_distance(words: &[[u32; 4]], node: usize, side: usize, scale: f32, p: DVec3) -> f64 {
    let head = words[4 * node + side];
    let shape = words[4 * node + 2 + side];
    let f16 = |bits: u32| (f32::from_bits((bits << 13) + (112 << 23)) * scale) as f64;
    let half = [f16(shape[0] & 0xffff), f16(shape[0] >> 16), f16(shape[1])];
    let snorm = |bits: u32| ((bits as i32) >> 16) as f32 as f64 / 32767.0;
    let q = [
        snorm(shape[2] << 16),
        snorm(shape[2]),
        snorm(shape[3] << 16),
        snorm(shape[3]),
    ];
    let centre = DVec3::new(
        f32::from_bits(head[0]) as f64,
        f32::from_bits(head[1]) as f64,
        f32::from_bits(head[2]) as f64,
    );
    // rotate(conjugate(q), p − centre) as the kernel computes it.
    let u = DVec3::new(-q[0], -q[1], -q[2]);
    let v = p - centre;
    let t = u.cross(v) * 2.0;
    let local = v + t * q[3] + u.cross(t);
    let outside = |k: usize| (local.get(k).abs() - half[k]).max(0.0);
    (outside(0).powi(2) + outside(1).powi(2) + outside(2).powi(2)).sqrt()
}

#[test]
fn packed_oriented_boxes_hold_their_triangles_as_the_kernel_sees_them() {
    // Every corner of every triangle below a child is inside that child's packed box, as the
    // kernel decodes it (slivers, tiny and large triangles, near and far from the origin).
    let mut rng = Rng::new(17);
    for (centre, spread, size) in [
        (DVec3::ZERO, 20.0, 1.0),
        (DVec3::new(3e4, -1e4, 2e4), 5.0, 0.01),
        (DVec3::new(-7.0, 2.0, 1.0), 1e-3, 1e-5),
    ] {
        let shapes = triangle_soup(&mut rng, 3000, centre, spread, size);
        let layout = closest::gpu::scene_layout::scene_layout(&shapes, true);
        assert!(layout.oriented);
        let packed = bvh::pack_oriented(&layout.nodes);
        // The triangles below each child, by walking the hierarchy.
        fn below(nodes: &[bvh::GpuBvhNode], child: &bvh::GpuBvhChild, out: &mut Vec<usize>) {
            let count = child.count & ((1 << bvh::LEAF_KIND_SHIFT) - 1);
            if count > 0 {
                out.extend(child.first as usize..(child.first + count) as usize);
            } else {
                for grandchild in &nodes[child.first as usize].children {
                    below(nodes, grandchild, out);
                }
            }
        }
        let mut checked = 0;
        for (n, node) in layout.nodes.iter().enumerate() {
            for (side, child) in node.children.iter().enumerate() {
                let mut slots = Vec::new();
                below(&layout.nodes, child, &mut slots);
                for slot in slots {
                    let Shape::Triangle { a, b, c } = shapes[layout.shapes[slot].index as usize]
                    else {
                        unreachable!("a triangle soup")
                    };
                    for corner in [a, b, c] {
                        let d =
                            packed_box_distance(&packed.words, n, side, packed.half_scale, corner);
                        assert!(
                            d == 0.0,
                            "node {n} side {side}: a corner {d} outside its box"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 3000 * 3 * 5, "only {checked} corners checked");
    }
}

#[test]
fn subgroup_scene_kernel_answers_exactly_as_the_portable_one() {
    // Chunks of 1000 rows: the last chunk is partial, and so are the last subgroups.
    let [subgroup, portable] = subgroup_and_portable_engines(1000);
    let mut rng = Rng::new(43);
    // Every bounded kind in a BVH, unbounded kinds scanned linearly, ties from duplicates.
    let mut mixed = scene(&mut rng, 1500, 30.0, 1.5);
    mixed.extend(mixed[..200].to_vec());
    mixed.extend([
        Shape::Plane {
            normal: DVec3::new(0.0, 0.0, 1.0),
            offset: -40.0,
        },
        Shape::Line {
            a: DVec3::new(50.0, 0.0, 0.0),
            b: DVec3::new(50.0, 1.0, 0.0),
        },
        Shape::Ray {
            origin: DVec3::new(-50.0, 0.0, 0.0),
            direction: DVec3::new(0.0, -1.0, 0.0),
        },
    ]);
    let spheres: Vec<Shape> = (0..3)
        .map(|i| Shape::Sphere {
            center: DVec3::new(i as f64 * 4.0, 0.0, 0.0),
            radius: 1.0,
        })
        .collect();
    let mut pts: Vec<[f32; 3]> = points(&mut rng, 4321, 45.0)
        .iter()
        .map(|p| p.to_f32())
        .collect();
    for row in [0, 9, 1000, 4320] {
        pts[row] = [f32::NAN, 0.0, f32::INFINITY];
    }
    for (name, shapes, brute) in [
        ("mixed scene", &mixed, false),
        ("mixed scene, no BVH", &mixed, true),
        ("three spheres", &spheres, true),
        ("no shapes", &Vec::new(), false),
    ] {
        for mode in [Mode::Solid, Mode::Surface] {
            let [a, b] = [&subgroup, &portable].map(|e| {
                let scene = if brute {
                    e.upload_scene_brute_force(shapes)
                } else {
                    e.upload_scene(shapes)
                };
                e.scene_hits(&scene.unwrap(), &pts, mode).unwrap()
            });
            assert_same_hits(&a, &b, &format!("{name}, {mode:?}"));
            assert_eq!(a[9].shape, -1, "{name}: a non-finite row");
        }
    }
}

/// A mesh's scene is built straight from its corners (`scene_layout::triangle_bindings`); it must
/// be the scene the general path builds from its triangle shapes, byte for byte: random
/// soups (with degenerate and repeated triangles), one triangle (no hierarchy), and a shared
/// mesh. Meshes of 2 to 12 triangles differ on purpose: a scene of so few is scanned linearly,
/// a mesh has its hierarchy however small (the device signs its rows only there).
#[test]
fn triangle_bindings_are_the_general_layouts_bytes() {
    use closest::gpu::scene_layout::{scene_layout, triangle_bindings};
    let mut rng = Rng::new(23);
    let mut soups: Vec<Vec<[DVec3; 3]>> = Vec::new();
    for count in [1, 5, 12, 13, 100, 5_000] {
        let soup = (0..count)
            .map(|i| {
                let c = rng.vec(-50.0, 50.0);
                match i % 7 {
                    // A point, a sliver, and a triangle repeated.
                    0 => [c, c, c],
                    1 => [
                        c,
                        c + DVec3::new(1.0, 0.0, 0.0),
                        c + DVec3::new(2.0, 0.0, 0.0),
                    ],
                    _ => [c, c + rng.unit() * 0.5, c + rng.unit() * 0.5],
                }
            })
            .collect();
        soups.push(soup);
    }
    let fandisk = closest::io::load_mesh(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes/fandisk.obj"),
    )
    .unwrap();
    let offset = fandisk.centre();
    soups.push(
        (0..fandisk.triangles.len())
            .map(|t| fandisk.corners(t).map(|v| v - offset))
            .collect(),
    );
    for soup in &soups {
        let shapes: Vec<Shape> = soup
            .iter()
            .map(|&[a, b, c]| Shape::Triangle { a, b, c })
            .collect();
        let general = scene_layout(&shapes, true).into_bindings();
        let direct = triangle_bindings(soup.len(), &|i| soup[i], false).unwrap();
        let what = format!("{} triangles", soup.len());
        if (2..=12).contains(&soup.len()) {
            assert!(
                !general.oriented,
                "{what}: a scene of so few is scanned linearly"
            );
            let direct = triangle_bindings(soup.len(), &|i| soup[i], true).unwrap();
            assert!(
                direct.oriented,
                "{what}: a mesh has its hierarchy however small"
            );
            assert_eq!(
                direct.clusters.len(),
                12 * direct.ranges.last().unwrap()[1] as usize
            );
            continue;
        }
        // Winding clusters come beside the same bindings: twelve words a node.
        let clustered = triangle_bindings(soup.len(), &|i| soup[i], true).unwrap();
        assert!(direct.clusters.is_empty(), "{what}: clusters not asked for");
        assert!(clustered.records == direct.records && clustered.nodes == direct.nodes);
        let nodes = if direct.oriented {
            direct.ranges.last().unwrap()[1]
        } else {
            0
        };
        assert_eq!(
            clustered.clusters.len(),
            12 * nodes as usize,
            "{what}: clusters"
        );
        assert_eq!(direct.oriented, general.oriented, "{what}: oriented");
        assert_eq!(direct.ranges, general.ranges, "{what}: ranges");
        assert!(direct.records == general.records, "{what}: records differ");
        assert!(direct.nodes == general.nodes, "{what}: nodes differ");
        assert_eq!(direct.data, general.data, "{what}: shape data");
    }
}

/// A walk that outgrows its stack is reported with its row, never answered wrongly (README,
/// How it works): with the stacks held to a few entries (`EngineOptions::walk_stack_entries`),
/// each kernel either answers every row of a mixed scene and of a triangle soup (the mesh
/// walk) bit for bit as with the whole stack, or fails naming the stack and a row; with one
/// entry every walk that opens two children overflows.
#[test]
fn walks_that_outgrow_their_stack_are_reported_never_answered() {
    let mut rng = Rng::new(71);
    let mixed = scene(&mut rng, 1500, 30.0, 1.5);
    let soup: Vec<Shape> = (0..2000)
        .map(|_| {
            let a = rng.vec(-30.0, 30.0);
            Shape::Triangle {
                a,
                b: a + rng.vec(-2.0, 2.0),
                c: a + rng.vec(-2.0, 2.0),
            }
        })
        .collect();
    let pts: Vec<[f32; 3]> = points(&mut rng, 3000, 45.0)
        .iter()
        .map(|p| p.to_f32())
        .collect();
    let whole = &subgroup_and_portable_engines(1000)[0];
    let expected = [&mixed, &soup].map(|shapes| {
        let scene = whole.upload_scene(shapes).unwrap();
        whole.scene_hits(&scene, &pts, Mode::Solid).unwrap()
    });
    for entries in [1, 4] {
        let engines = subgroup_and_portable_engines_with(EngineOptions {
            chunk_rows: Some(1000),
            walk_stack_entries: Some(entries),
            ..Default::default()
        });
        for (engine, kernels) in engines.iter().zip(["subgroup", "portable"]) {
            for (shapes, expected, name) in [
                (&mixed, &expected[0], "mixed scene"),
                (&soup, &expected[1], "triangle soup"),
            ] {
                let what = format!("{name}, {kernels} kernels, {entries} stack entries");
                let scene = engine.upload_scene(shapes).unwrap();
                match engine.scene_hits(&scene, &pts, Mode::Solid) {
                    Ok(hits) => {
                        assert!(entries > 1, "{what}: no overflow reported");
                        assert_same_hits(&hits, expected, &what);
                    }
                    Err(error) => {
                        let message = error.to_string();
                        let named = format!("overflowed its stack of {entries} entries at row ");
                        assert!(message.contains(&named), "{what}: {message}");
                    }
                }
            }
        }
    }
}

/// A wedge of slivers meeting at a point (a slice of a fan, as a cylinder's cap triangulated
/// from its centre) gets a box along the wedge, whatever the wedge's direction: no wider than
/// twice the wedge across it and no taller than the plane's thickness, holding every corner.
/// Boxes at fixed angles about the normal left it a fifth of its length wide, and every walk
/// near a fan opened most of its leaves.
#[test]
fn a_wedge_of_slivers_gets_a_box_along_it() {
    let mut rng = Rng::new(48);
    for case in 0..200 {
        let rotation = rng.quaternion();
        let [u, v, w] = Shape::axes(rotation);
        let centre = rng.vec(-1e3, 1e3);
        let length = 10f64.powf(rng.range(-3.0, 3.0));
        let (first, slivers) = (rng.range(0.0, std::f64::consts::TAU), 1 + case % 6);
        let step = std::f64::consts::TAU / 20_000.0;
        let rim = |k: usize| {
            let angle = first + k as f64 * step;
            centre + (u * angle.cos() + v * angle.sin()) * length
        };
        let corners: Vec<DVec3> = (0..slivers)
            .flat_map(|k| [centre, rim(k), rim(k + 1)])
            .collect();
        let fitted = bvh::fit_oriented_box(&corners, w).expect("a box");
        let axes = Shape::axes(fitted.rotation);
        for p in &corners {
            for (k, axis) in axes.iter().enumerate() {
                let reach = axis.dot(*p - fitted.centre).abs();
                assert!(
                    reach <= fitted.half.get(k) + 1e-12 * (length + centre.max_abs()),
                    "case {case}: corner {p:?} outside the box along axis {k}"
                );
            }
        }
        let wedge_width = length * (slivers as f64 * step);
        let mut halves = [fitted.half.x, fitted.half.y, fitted.half.z];
        halves.sort_by(f64::total_cmp);
        assert!(
            halves[0] <= 1e-9 * (length + centre.max_abs()),
            "case {case}: {halves:?} thick across the plane"
        );
        assert!(
            2.0 * halves[1] <= 2.0 * wedge_width + 1e-9 * (length + centre.max_abs()),
            "case {case}: {} wide for a wedge {wedge_width} wide",
            2.0 * halves[1]
        );
        assert!(
            2.0 * halves[2] <= length * 1.01,
            "case {case}: {halves:?} long"
        );
    }
}

/// The fit projects the points once onto the plane and measures each direction two points at a
/// time: every point of a set of any size (odd sizes leave one point out of the pairs), near or
/// far from the origin, tiny or huge, lies in the box, and the box is no larger than the one
/// measured directly with the fit's first fixed frame.
#[test]
fn an_oriented_fit_holds_every_point_of_sets_of_any_size() {
    let mut rng = Rng::new(49);
    for case in 0..600usize {
        let count = 1 + case % 33;
        let centre = rng.vec(-1e3, 1e3) * 10f64.powi((case % 3) as i32 - 1);
        let size = 10f64.powf(rng.range(-4.0, 3.0));
        let points: Vec<DVec3> = (0..count).map(|_| centre + rng.vec(-size, size)).collect();
        let normal = rng.vec(-1.0, 1.0);
        let Some(fitted) = bvh::fit_oriented_box(&points, normal) else {
            panic!("case {case}: no box for {count} points");
        };
        let scale = size + centre.max_abs();
        let axes = Shape::axes(fitted.rotation);
        for p in &points {
            for (k, axis) in axes.iter().enumerate() {
                let reach = axis.dot(*p - fitted.centre).abs();
                assert!(
                    reach <= fitted.half.get(k) + 1e-12 * scale,
                    "case {case}: {count} points, {p:?} outside the box along axis {k}"
                );
            }
        }
        // The first fixed frame (angle 0), measured point by point.
        let w = normal.normalize_or_zero();
        let u = closest::math::any_perpendicular(w);
        let frame = [u, w.cross(u), w];
        let volume = |half: [f64; 3]| half.iter().map(|h| h + 1e-12).product::<f64>();
        let direct = frame.map(|axis| {
            let (lo, hi) = points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                    (lo.min(axis.dot(*p)), hi.max(axis.dot(*p)))
                });
            (hi - lo) * 0.5
        });
        let fitted_half = [fitted.half.x, fitted.half.y, fitted.half.z];
        assert!(
            volume(fitted_half) <= volume(direct.map(|h| h + 1e-12 * scale)),
            "case {case}: {fitted_half:?} larger than the first frame's {direct:?}"
        );
    }
}
