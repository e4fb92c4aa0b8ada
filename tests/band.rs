//! Narrow-band grids (SPEC §8) against the dense grid of the same mesh and sign: band samples
//! exact within SPEC §3, every other sample ±W with the dense grid's sign, and the work
//! following the surface.

mod common;

use closest::engine::{BandSlab, BandWork, SdfBand};
use closest::mesh::{Mesh, Sign};
use closest::sdf::{Grid, GridRegion};
use closest::{Engine, GpuMesh};
use common::{TestJobs, engine, open_engine};

fn shared_mesh(name: &str) -> Mesh {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/meshes")
        .join(name);
    closest::io::load_mesh(&path).unwrap()
}

/// The band grid whole (`every_value`; else only its in-band rows hold values), the in-band
/// rows, and the work.
fn band_grid(
    engine: &Engine,
    mesh: &GpuMesh,
    grid: &Grid,
    sign: Sign,
    width: f64,
    every_value: bool,
) -> (Vec<f32>, Vec<usize>, BandWork) {
    let mut values = Vec::new();
    let mut in_band = Vec::new();
    let job = SdfBand {
        mesh,
        grid,
        sign,
        width,
        every_value,
    };
    let work = engine
        .sdf_band(job, &mut |slab: BandSlab<'_>| {
            assert_eq!(slab.first, values.len(), "slabs in C order");
            in_band.extend(slab.in_band.iter().map(|&k| slab.first + k as usize));
            values.extend_from_slice(slab.values);
            if every_value {
                let nan = slab.values.iter().filter(|v| !v.is_finite()).count();
                assert_eq!(slab.non_finite, nan, "the slab's count of NaN values");
            }
            Ok(())
        })
        .unwrap();
    (values, in_band, work)
}

fn check_against_dense(name: &str, mesh: Mesh, res: [usize; 3], sign: Sign, voxels: f64) {
    check_on(engine(), name, mesh, res, sign, voxels);
}

fn check_on(engine: &Engine, name: &str, mesh: Mesh, res: [usize; 3], sign: Sign, voxels: f64) {
    let grid = Grid::new(&mesh, res, GridRegion::Pad(0.1)).unwrap();
    let scale = mesh.bounds().0.max_abs().max(mesh.bounds().1.max_abs()) * 1.2;
    let tolerance = closest::tolerance(scale) as f32;
    let gpu = engine.upload_mesh(mesh).unwrap();
    let dense = engine.sdf_values(&gpu, &grid, sign).unwrap();
    let s = grid.spacing;
    let width = voxels * s.x.max(s.y).max(s.z);
    // Boxes listed to the device (their samples made there), and the host's points.
    for on_device in [true, false] {
        engine.set_grid_on_device(on_device);
        let lists_boxes = engine.lists_boxes_on_device(&grid);
        assert!(!lists_boxes || on_device);
        let (band, in_band, work) = band_grid(engine, &gpu, &grid, sign, width, true);
        // A sparse job (the band's rows alone read): the same rows with the same bits, from
        // no more samples, and no winding number asked for signs alone.
        let (sparse, sparse_rows, sparse_work) = band_grid(engine, &gpu, &grid, sign, width, false);
        engine.set_grid_on_device(true);
        assert_eq!(sparse_rows, in_band, "{name}: the sparse job's band rows");
        for &row in &in_band {
            assert_eq!(
                sparse[row].to_bits(),
                band[row].to_bits(),
                "{name}: row {row}"
            );
        }
        assert!(
            sparse_work.samples <= work.samples,
            "{name}: {sparse_work:?}"
        );
        assert!(
            sparse_work.queries <= work.queries,
            "{name}: {sparse_work:?}"
        );
        assert_eq!(sparse_work.sign_queries, 0, "{name}: {sparse_work:?}");
        // Walks start below the root, bounded, where samples are made on the device: those
        // samples are the dense grid's, made there by walks from the root, bit for bit (a
        // grid signed by winding number is made in slabs, each from its own corner).
        for w in [&work, &sparse_work] {
            assert_eq!(w.deep_starts > 0, lists_boxes, "{name}: {w:?}");
        }
        if on_device && sign != Sign::Winding {
            for &row in &in_band {
                assert_eq!(
                    band[row].to_bits(),
                    dense[row].to_bits(),
                    "{name}: row {row}, {} against the dense grid's {}",
                    band[row],
                    dense[row]
                );
            }
        }
        let name = format!("{name}, samples made on the device: {on_device}");
        check_band(
            &name,
            &gpu,
            sign,
            &dense,
            width,
            tolerance,
            (band, in_band, work),
        );
    }
}

fn check_band(
    name: &str,
    gpu: &GpuMesh,
    sign: Sign,
    dense: &[f32],
    width: f64,
    tolerance: f32,
    (band, in_band, work): (Vec<f32>, Vec<usize>, BandWork),
) {
    assert_eq!(band.len(), dense.len(), "{name}");
    let w = width as f32;
    let mut exact = 0;
    for (row, (&b, &d)) in band.iter().zip(dense).enumerate() {
        if d.abs() <= w - tolerance {
            exact += 1;
            assert!(
                (b - d).abs() <= tolerance,
                "{name}: row {row} in the band: {b} against the dense {d}"
            );
        } else if d.abs() >= w + tolerance {
            assert_eq!(
                b,
                if d < 0.0 { -w } else { w },
                "{name}: row {row} outside the band: {b}, dense {d}"
            );
        } else {
            // At the band's edge either answer is right, within the tolerance.
            assert!(b.abs() <= w && (b.abs() - d.abs()).abs() <= 2.0 * tolerance);
        }
    }
    // The in-band rows are the band's samples, and the band is there.
    assert!(exact > 100, "{name}: only {exact} samples in the band");
    assert!(in_band.windows(2).all(|p| p[0] < p[1]), "{name}");
    for &row in &in_band {
        assert!(band[row].abs() <= w, "{name}: row {row}");
    }
    assert_eq!(work.in_band, in_band.len());
    assert!(in_band.len() >= exact, "{name}");
    // Work follows the surface: computed samples are a small multiple of the band's (more
    // where signs vary off the surface and near bricks are computed whole).
    let signs_constant = gpu.is_closed_cycle() || sign == Sign::None;
    let multiple = if signs_constant { 3 } else { 6 };
    assert!(
        work.samples <= multiple * work.in_band,
        "{name}: {} samples computed for {} in the band",
        work.samples,
        work.in_band
    );
    if signs_constant {
        assert!(work.samples < band.len() / 3, "{name}: {work:?}");
    } else if sign == Sign::Winding {
        // Where a hole's winding number crosses ½ off the surface, far boxes are signed by
        // winding numbers alone (the rims' bound), not computed whole.
        assert!(work.sign_queries > 0, "{name}: {work:?}");
    }
    assert!(work.near_bricks < work.bricks, "{name}: {work:?}");
}

#[test]
fn band_samples_are_the_dense_grids_and_the_rest_are_plus_or_minus_the_width() {
    check_against_dense(
        "fandisk, pseudonormal",
        shared_mesh("fandisk.obj"),
        [70, 61, 53],
        Sign::Pseudonormal,
        2.0,
    );
    check_against_dense(
        "bunny, winding",
        shared_mesh("stanford-bunny.obj"),
        [96, 96, 96],
        Sign::Winding,
        1.5,
    );
    // A sphere with a wide hole: the winding number's ½ crosses the hole, off the surface.
    let (vertices, triangles) = common::octahedron_sphere(closest::DVec3::ZERO, 1.0, 4);
    let centroid_z = |t: &[u32; 3]| t.iter().map(|&k| vertices[k as usize].z).sum::<f64>() / 3.0;
    let open: Vec<[u32; 3]> = triangles
        .iter()
        .copied()
        .filter(|t| centroid_z(t) < 0.3)
        .collect();
    check_against_dense(
        "a sphere with a wide hole, winding",
        Mesh::new(vertices, open, "open sphere").unwrap(),
        [64, 64, 64],
        Sign::Winding,
        1.5,
    );
    check_against_dense(
        "fandisk, unsigned",
        shared_mesh("fandisk.obj"),
        [64, 64, 64],
        Sign::None,
        1.5,
    );
    // Far from the origin, where f32 keeps few bits of the mesh: the walks' bounds and starts
    // still hold every answer (the band's samples the dense grid's, bit for bit).
    let fandisk = shared_mesh("fandisk.obj");
    let far: Vec<closest::DVec3> = fandisk
        .vertices
        .iter()
        .map(|v| v + closest::DVec3::new(800.0, -600.0, 400.0))
        .collect();
    check_against_dense(
        "fandisk 1e3 from the origin, pseudonormal",
        Mesh::new(far, fandisk.triangles.clone(), "far fandisk").unwrap(),
        [48, 52, 44],
        Sign::Pseudonormal,
        2.0,
    );
}

#[test]
fn a_band_width_that_is_not_positive_and_finite_is_a_usage_error() {
    let engine = engine();
    let mesh = shared_mesh("fandisk.obj");
    let grid = Grid::new(&mesh, [8, 8, 8], GridRegion::Pad(0.1)).unwrap();
    let gpu = engine.upload_mesh(mesh).unwrap();
    for width in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let job = SdfBand {
            mesh: &gpu,
            grid: &grid,
            sign: Sign::Pseudonormal,
            width,
            every_value: true,
        };
        let error = engine.sdf_band(job, &mut |_| Ok(())).unwrap_err();
        assert!(
            matches!(error, closest::Error::Usage(_)) && error.to_string().contains("--band"),
            "{width}: {error}"
        );
    }
}

/// Chunks of 100 rows (not a multiple of a box's 8): listed boxes split across many chunks,
/// each with its own records, seeded rounds and winding pass. Chunks of 4 rows hold less than
/// a listed box: the band's samples are made from points on the host, with no start node or
/// bound counted for walks that never use them.
#[test]
fn band_grids_in_small_chunks_are_the_dense_grids() {
    let cases = [
        (100, "fandisk.obj", [61, 53, 47], Sign::Pseudonormal),
        (100, "stanford-bunny.obj", [45, 45, 45], Sign::Winding),
        (4, "fandisk.obj", [41, 37, 33], Sign::Pseudonormal),
    ];
    for (chunk_rows, mesh, res, sign) in cases {
        let engine = open_engine(closest::EngineOptions {
            chunk_rows: Some(chunk_rows),
            ..Default::default()
        });
        let name = format!("{mesh} in chunks of {chunk_rows}, {}", sign.name());
        check_on(&engine, &name, shared_mesh(mesh), res, sign, 1.5);
    }
}

/// A sparse job's walks are bounded on the device (a row farther than its bound may answer +∞):
/// the same band rows with the same bits as the dense job's on the portable kernel (one lane a
/// walk), on indexed records, and in one dispatch without seeded rounds.
#[test]
fn sparse_band_walks_bounded_on_every_kernel_keep_the_dense_band() {
    let engines = [
        (
            "portable kernels",
            closest::EngineOptions {
                portable_kernels: true,
                ..Default::default()
            },
        ),
        (
            "indexed records",
            closest::EngineOptions {
                mesh_records: closest::MeshRecords::Indexed,
                ..Default::default()
            },
        ),
        (
            "no seeded rounds",
            closest::EngineOptions {
                seeded_mesh_rounds: Some(false),
                ..Default::default()
            },
        ),
    ];
    for (name, options) in engines {
        let engine = open_engine(options);
        check_on(
            &engine,
            &format!("fandisk, pseudonormal, {name}"),
            shared_mesh("fandisk.obj"),
            [70, 61, 53],
            Sign::Pseudonormal,
            2.0,
        );
        check_on(
            &engine,
            &format!("bunny, winding, {name}"),
            shared_mesh("stanford-bunny.obj"),
            [48, 48, 48],
            Sign::Winding,
            1.5,
        );
    }
}

/// Where a sparse band's walks start (`bvh::TopNodes::start_node`) holds every triangle within
/// the radius asked, checked by brute force (no twin) on fandisk's oriented hierarchy for points
/// on, near and far from the surface, at radii from none to a tenth of the mesh, from the root
/// and from a start found for a ball holding the asked one.
#[test]
fn a_walk_start_holds_every_triangle_within_its_radius() {
    use closest::DVec3;
    use closest::bvh::{TopNodes, WalkStart};
    let mesh = shared_mesh("fandisk.obj");
    let count = mesh.triangles.len();
    let item = |i: usize| {
        let [a, b, c] = mesh.corners(i);
        closest::bvh::Item {
            bounds: closest::bvh::shape_bounds(&closest::shape::Shape::Triangle { a, b, c })
                .unwrap(),
            kind: closest::shape::ShapeKind::Triangle as u32,
        }
    };
    let mut built = closest::bvh::build_with(count, &item, closest::bvh::TRIANGLE_LEAF_SIZE, 0, 0);
    built.orient(&|members: &[u32]| {
        let [a, b, c] = mesh.corners(members[0] as usize);
        let corners: Vec<_> = members
            .iter()
            .flat_map(|&t| mesh.corners(t as usize))
            .collect();
        closest::bvh::fit_oriented_box(&corners, (b - a).cross(c - a))
    });
    let top = TopNodes::of(&built.nodes);
    let mut position = vec![0; count];
    for (slot, &t) in built.order.iter().enumerate() {
        position[t as usize] = slot;
    }
    let (lo, hi) = mesh.bounds();
    let extent = (hi - lo).max_abs();
    let mut random = 0x9e37_79b9_7f4a_7c15u64;
    let mut unit = move || {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        (random >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut deep = 0;
    for k in 0..300 {
        let [a, b, c] = mesh.corners(k * 7 % count);
        let on_surface = (a + b + c) / 3.0;
        let offset = DVec3::new(unit() - 0.5, unit() - 0.5, unit() - 0.5);
        let p = on_surface + offset * extent * [0.0, 0.01, 0.1, 1.0][k % 4];
        let radius = extent * 0.1 * unit().powi(3);
        let outer = top.start_node(WalkStart::ROOT, p, 2.0 * radius);
        for start in [
            top.start_node(WalkStart::ROOT, p, radius),
            top.start_node(outer, p, radius),
        ] {
            let node = start.node as usize;
            let span = built.spans[node][0].0..built.spans[node][1].1;
            assert!(start.node == 0 || start.depth > 0);
            deep += usize::from(start.depth >= 3);
            for (t, slot) in position.iter().enumerate() {
                let q = closest::mesh::closest_feature(p, mesh.corners(t)).0;
                if (q - p).length() <= radius {
                    assert!(
                        span.contains(slot),
                        "point {k}: triangle {t} within {radius} lies outside start {start:?}"
                    );
                }
            }
        }
    }
    assert!(
        deep > 150,
        "only {deep} of 600 starts 3 levels deep or more"
    );
}

/// A grid of more than 2^32 samples streams (SPEC §8: any resolution): an octahedron (8
/// triangles) at the far corner of a 4097 × 1025 × 1025 grid of unit spacing, 4.3e9 samples,
/// its sparse band found whole and exact against the f64 reference, every band row past 2^32.
/// Sides past 2^24 samples and x-planes past 2^29 are refused, naming `--res`.
#[test]
fn grids_of_more_than_2_32_samples_stream_their_band() {
    use closest::reference;
    use closest::{DVec3, Mode, Shape};
    let engine = engine();
    let (vertices, triangles) = common::octahedron_sphere(DVec3::ZERO, 1.0, 0);
    let mesh = Mesh::new(vertices.clone(), triangles.clone(), "octahedron").unwrap();
    let res = [4097, 1025, 1025];
    let far_corner = GridRegion::Bounds([-4094.0, -1020.0, -1020.0, 2.0, 4.0, 4.0]);
    let grid = Grid::new(&mesh, res, far_corner).unwrap();
    assert!(grid.len() > 1 << 32);
    for (refused, what) in [
        ([(1 << 24) + 1, 2, 2], "samples an axis"),
        ([2, 1 << 15, 1 << 15], "x-plane"),
    ] {
        let error = Grid::new(&mesh, refused, far_corner).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, closest::Error::Usage(_))
                && message.contains("--res")
                && message.contains(what),
            "{refused:?}: {message}"
        );
    }
    Grid::new(&mesh, [2, 1 << 14, 1 << 15], far_corner).expect("an x-plane of 2^29 samples");

    let gpu = engine.upload_mesh(mesh).unwrap();
    let width = 2.5;
    let mut band = std::collections::HashMap::new();
    let job = SdfBand {
        mesh: &gpu,
        grid: &grid,
        sign: Sign::Pseudonormal,
        width,
        every_value: false,
    };
    engine
        .sdf_band(job, &mut |slab: BandSlab<'_>| {
            for &k in slab.in_band {
                band.insert(slab.first + k as usize, slab.values[k as usize]);
            }
            Ok(())
        })
        .unwrap();
    // The octahedron is convex: its signed distance is the nearest face's distance, negative
    // behind every face's plane.
    let faces: Vec<[DVec3; 3]> = triangles
        .iter()
        .map(|t| t.map(|v| vertices[v as usize]))
        .collect();
    let exact = |p: DVec3| {
        let distance = faces
            .iter()
            .map(|&[a, b, c]| {
                reference::query_shape(&Shape::Triangle { a, b, c }, 0, p, Mode::Surface).distance
            })
            .fold(f64::INFINITY, f64::min);
        let inside = faces
            .iter()
            .all(|&[a, b, c]| (p - a).dot(reference::triangle_unit_normal(a, b, c)) < 0.0);
        if inside { -distance } else { distance }
    };
    // Every sample lies within 4 of the origin where the band can be; integer positions.
    let tolerance = closest::tolerance(4.0);
    let [_, ny, nz] = res;
    let mut in_box = 0;
    for i in 4090..4097 {
        for j in 1016..1025 {
            for k in 1016..1025 {
                let row = (i * ny + j) * nz + k;
                let d = exact(DVec3::from_array(grid.point(row)));
                match band.get(&row) {
                    Some(&value) => {
                        in_box += 1;
                        assert!(row > 1 << 32);
                        assert!(
                            d.abs() <= width + tolerance,
                            "row {row}: {d} is off the band"
                        );
                        let error = (f64::from(value) - d).abs();
                        assert!(error <= tolerance, "row {row}: {value} against {d}");
                    }
                    None => assert!(d.abs() > width - tolerance, "row {row} ({d}) is missing"),
                }
            }
        }
    }
    assert!(in_box > 100, "{in_box} band samples");
    assert_eq!(
        in_box,
        band.len(),
        "band samples outside the octahedron's box"
    );
}

/// Grids of small x-planes finish several brick layers a slab: a slab costs a few dispatches,
/// and a 300,000 × 4 × 4 grid took 37,500 of them (23.6 s, against 0.8 s along z). The band
/// is still the dense grid's, signed by pseudonormal and by winding number.
#[test]
fn grids_of_small_planes_finish_many_brick_layers_a_slab() {
    let (vertices, triangles) = common::octahedron_sphere(closest::DVec3::ZERO, 1.0, 3);
    let ball = Mesh::new(vertices, triangles, "ball").unwrap();
    let res = [2000, 32, 32];
    check_against_dense(
        "a ball, thin planes",
        ball.clone(),
        res,
        Sign::Pseudonormal,
        1.5,
    );
    check_against_dense("a ball, thin planes", ball.clone(), res, Sign::Winding, 1.5);
    let engine = engine();
    let grid = Grid::new(&ball, res, GridRegion::Pad(0.1)).unwrap();
    let gpu = engine.upload_mesh(ball).unwrap();
    let mut slabs = 0;
    let job = SdfBand {
        mesh: &gpu,
        grid: &grid,
        sign: Sign::Pseudonormal,
        width: 0.1,
        every_value: true,
    };
    engine
        .sdf_band(job, &mut |_| {
            slabs += 1;
            Ok(())
        })
        .unwrap();
    // 2 M samples in slabs of about 2^20: 2, where slabs of 8 planes were 250.
    assert!(slabs <= 8, "{slabs} slabs");
}

/// A band job lists the whole grid's bricks with their distances: a grid of 2^44 bricks (sides
/// up to 2^24 may ask for one) took memory until the system ended the process. It is refused
/// before any work where the host cannot hold them, naming `--res` and the memory.
#[test]
fn a_band_grid_whose_bricks_the_host_cannot_hold_is_refused_up_front() {
    let (vertices, triangles) = common::octahedron_sphere(closest::DVec3::ZERO, 1.0, 0);
    let mesh = Mesh::new(vertices, triangles, "octahedron").unwrap();
    let refused = |engine: &Engine, res: [usize; 3]| {
        let grid = Grid::new(&mesh, res, GridRegion::Pad(0.1)).unwrap();
        let gpu = engine.upload_mesh(mesh.clone()).unwrap();
        let job = SdfBand {
            mesh: &gpu,
            grid: &grid,
            sign: Sign::Pseudonormal,
            width: 0.1,
            every_value: false,
        };
        let mut slabs = 0;
        let error = engine
            .sdf_band(job, &mut |_| {
                slabs += 1;
                Ok(())
            })
            .unwrap_err();
        assert_eq!(slabs, 0, "{res:?}: work before the refusal");
        let message = error.to_string();
        assert!(
            matches!(error, closest::Error::OutOfMemory(_))
                && message.contains("--res")
                && message.contains("host memory"),
            "{res:?}: {message}"
        );
    };
    refused(engine(), [1 << 24, 1 << 14, 1 << 15]);
    let small = open_engine(closest::EngineOptions {
        memory_bytes: Some(64 << 20),
        ..Default::default()
    });
    refused(&small, [4097, 1025, 1025]);
}
