//! The hierarchical winding number against the exact sum, on a closed mesh and on the bunny
//! (which has holes), at random points and at points just off the surface.

use std::path::Path;

use closest::io::load_mesh;
use closest::mesh::{Mesh, winding_number};
use closest::winding::{ACCURACY, COARSE_ACCURACY, SIGN_MARGIN, WindingTree};
use closest::{DVec3, reference};
use rayon::prelude::*;

fn shared(name: &str) -> Mesh {
    load_mesh(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/meshes")
            .join(name),
    )
    .unwrap()
}

/// Random points over the padded box, and points 1e-3 of the size off sampled faces.
fn probes(mesh: &Mesh, count: usize) -> Vec<DVec3> {
    let (lo, hi) = mesh.bounds();
    let span = hi - lo;
    let mut state = 7u64;
    let mut unit = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut points: Vec<DVec3> = (0..count)
        .map(|_| {
            lo - span * 0.2
                + DVec3::new(
                    span.x * 1.4 * unit(),
                    span.y * 1.4 * unit(),
                    span.z * 1.4 * unit(),
                )
        })
        .collect();
    let size = span.length();
    for t in (0..mesh.triangles.len()).step_by(mesh.triangles.len() / (count / 2) + 1) {
        let [a, b, c] = mesh.corners(t);
        let n = reference::triangle_unit_normal(a, b, c);
        let centre = (a + b + c) * (1.0 / 3.0);
        points.push(centre + n * (1e-3 * size));
        points.push(centre - n * (1e-3 * size));
    }
    points
}

/// Largest |fast − exact| over the probes, clusters taken whole past `accuracy` radii.
fn worst_error(mesh: &Mesh, count: usize, accuracy: f64) -> (f64, usize) {
    let tree = WindingTree::new(mesh);
    let points = probes(mesh, count);
    let worst = points
        .par_iter()
        .map(|&p| (tree.winding_number_within(mesh, p, accuracy) - winding_number(mesh, p)).abs())
        .reduce(|| 0.0, f64::max);
    (worst, points.len())
}

#[test]
fn hierarchical_winding_number_is_within_0_01_of_the_exact_sum() {
    for name in ["fandisk.obj", "stanford-bunny.obj"] {
        let mesh = shared(name);
        let (worst, n) = worst_error(&mesh, 400, ACCURACY);
        assert!(
            worst < closest::winding::ERROR,
            "{name}: worst error {worst} over {n} points"
        );
        eprintln!("{name}: worst |fast - exact| = {worst:.2e} over {n} points");
    }
}

/// Signs take the coarse number where it is farther than `SIGN_MARGIN` from ½: its error must
/// stay well under the margin (half of it here), so that such a sign is the fine number's.
#[test]
fn coarse_winding_number_errs_by_under_half_the_sign_margin() {
    for name in ["fandisk.obj", "stanford-bunny.obj"] {
        let mesh = shared(name);
        let (worst, n) = worst_error(&mesh, 400, COARSE_ACCURACY);
        assert!(
            worst < SIGN_MARGIN / 2.0,
            "{name}: coarse worst error {worst} over {n} points"
        );
        eprintln!("{name}: coarse worst |fast - exact| = {worst:.2e} over {n} points");
    }
}

/// `is_inside` (coarse, then fine near ½) decides as the fine winding number does, on the
/// probes and on a grid around each mesh (the bunny's holes included).
#[test]
fn is_inside_decides_as_the_fine_winding_number() {
    for name in ["fandisk.obj", "stanford-bunny.obj"] {
        let mesh = shared(name);
        let tree = WindingTree::new(&mesh);
        let grid = closest::sdf::Grid::new(&mesh, [24; 3], closest::sdf::GridRegion::Pad(0.1))
            .expect("a grid");
        let mut points = probes(&mesh, 400);
        points.extend((0..grid.len()).map(|row| {
            let p = grid.point(row);
            DVec3::new(p[0], p[1], p[2])
        }));
        let (decided, differ) = points
            .par_iter()
            .filter_map(|&p| {
                let w = tree.winding_number(&mesh, p);
                ((w - 0.5).abs() > 1e-4).then(|| usize::from(tree.is_inside(&mesh, p) != (w > 0.5)))
            })
            .fold(|| (0, 0), |(n, d), x| (n + 1, d + x))
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert_eq!(differ, 0, "{name}: {differ} of {decided} signs differ");
        assert!(decided > points.len() * 9 / 10, "{name}: {decided} decided");
    }
}

#[test]
fn winding_number_is_one_inside_and_zero_outside_a_closed_mesh() {
    let mesh = shared("fandisk.obj");
    let tree = WindingTree::new(&mesh);
    let (lo, hi) = mesh.bounds();
    let far = hi + (hi - lo);
    assert!(tree.winding_number(&mesh, far).abs() < 0.01);
    let points = probes(&mesh, 200);
    for p in points {
        let w = tree.winding_number(&mesh, p);
        assert!(w.abs() < 0.01 || (w - 1.0).abs() < 0.01, "{p:?}: {w}");
    }
    // A single triangle (normal +z): half a turn, negative on the side its normal points to
    // (outside, for an outward-wound mesh), positive behind it.
    let one = Mesh::new(
        vec![DVec3::ZERO, DVec3::X, DVec3::Y],
        vec![[0, 1, 2]],
        "one",
    )
    .unwrap();
    let tree = WindingTree::new(&one);
    let above = tree.winding_number(&one, DVec3::new(0.3, 0.3, 1e-9));
    let below = tree.winding_number(&one, DVec3::new(0.3, 0.3, -1e-9));
    assert!(
        (above + 0.5).abs() < 1e-6 && (below - 0.5).abs() < 1e-6,
        "{above} {below}"
    );
}
