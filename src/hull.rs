//! Convex hulls of `convex_hull` shapes (SPEC §1), built once on load in f64: the faces both
//! the oracle and the GPU walk. Point sets that span fewer than three dimensions give the
//! polygon, segment or point they span; a full hull comes from parry3d-f64's quickhull.

use crate::math::{DVec3, triangle_unit_normal};

/// Extent (relative to the points' bounding-box diagonal) below which a point set counts as
/// spanning fewer dimensions: treating such a sliver as flat moves no answer by more than this
/// fraction of the shape's size, far below SPEC §3's bound, and spares quickhull its worst case.
pub const FLAT_RELATIVE_THICKNESS: f64 = 1e-9;

/// One face triangle, counter-clockwise seen from outside, with its unit normal (zero for the
/// degenerate "triangle" of a segment or point hull).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HullFace {
    pub a: DVec3,
    pub b: DVec3,
    pub c: DVec3,
    pub normal: DVec3,
}

/// A built hull: the points as given, an anchor inside the hull (the local origin of the
/// GPU's f32 record), its face triangles, and whether it has an interior.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvexHull {
    pub points: Vec<DVec3>,
    pub anchor: DVec3,
    pub faces: Vec<HullFace>,
    /// A 3-D hull; flat, collinear and single-point hulls have no inside.
    pub solid: bool,
}

/// Why a hull cannot be built: its points (the message says why), or the memory its build
/// would take.
#[derive(Debug, Clone, PartialEq)]
pub enum HullError {
    Points(String),
    Memory(String),
}

impl std::fmt::Display for HullError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HullError::Points(why) | HullError::Memory(why) => f.write_str(why),
        }
    }
}

/// Host bytes quickhull takes per input point at most: 10^6 points on a sphere, every one a
/// vertex, grew the process by 1.25 GB (10^6 inside a ball: 123 MB).
const HULL_BUILD_BYTES_PER_POINT: u64 = 1_300;

/// Hulls of fewer points are built without asking (at most ~130 MB).
const HULL_POINTS_CHECKED: usize = 100_000;

impl ConvexHull {
    /// The hull of `points` (finite, at least one). The error says why it cannot be built.
    pub fn new(points: Vec<DVec3>) -> Result<ConvexHull, HullError> {
        let Some(&first) = points.first() else {
            return Err(HullError::Points(
                "a convex hull needs at least one point".into(),
            ));
        };
        let anchor = points.iter().fold(DVec3::ZERO, |s, &p| s + p) / points.len() as f64;
        let (lo, hi) = points
            .iter()
            .fold((first, first), |(lo, hi), &p| (lo.min(p), hi.max(p)));
        let thin = FLAT_RELATIVE_THICKNESS * (hi - lo).length();
        let farthest = |measure: &dyn Fn(DVec3) -> f64| {
            points
                .iter()
                .copied()
                .max_by(|&p, &q| measure(p).total_cmp(&measure(q)))
                .unwrap_or(first)
        };
        let degenerate = |a: DVec3, b: DVec3, c: DVec3| HullFace {
            a,
            b,
            c,
            normal: DVec3::ZERO,
        };
        let flat = |faces| ConvexHull {
            points: points.clone(),
            anchor,
            faces,
            solid: false,
        };
        // Coincident points: a point.
        let far = farthest(&|p| (p - first).length());
        if (far - first).length() <= thin {
            return Ok(flat(vec![degenerate(first, first, first)]));
        }
        // Collinear points: the segment between the extremes along the line.
        let u = (far - first).normalize_or_zero();
        let off_line = farthest(&|p| (p - first).cross(u).length());
        if (off_line - first).cross(u).length() <= thin {
            let along = |p: DVec3| (p - first).dot(u);
            let low = points
                .iter()
                .copied()
                .min_by(|&p, &q| along(p).total_cmp(&along(q)))
                .unwrap_or(first);
            let high = farthest(&along);
            return Ok(flat(vec![degenerate(low, high, high)]));
        }
        // Coplanar points: the polygon, as a fan of triangles.
        let n = u.cross(off_line - first).normalize_or_zero();
        let off_plane = farthest(&|p| (p - first).dot(n).abs());
        if (off_plane - first).dot(n).abs() <= thin {
            let v = n.cross(u);
            let ring = polygon_hull(&points, |p| ((p - first).dot(u), (p - first).dot(v)));
            let faces = (1..ring.len() - 1)
                .map(|k| HullFace {
                    a: ring[0],
                    b: ring[k],
                    c: ring[k + 1],
                    normal: n,
                })
                .collect();
            return Ok(flat(faces));
        }
        check_build_memory(points.len())?;
        let input: Vec<parry3d_f64::math::Vector3> = points
            .iter()
            .map(|p| parry3d_f64::math::Vector3::new(p.x, p.y, p.z))
            .collect();
        let (vertices, triangles) =
            parry3d_f64::transformation::try_convex_hull(&input).map_err(|e| {
                HullError::Points(format!("the hull of these points could not be built ({e})"))
            })?;
        let vertex = |i: u32| {
            let v = vertices[i as usize];
            DVec3::new(v.x, v.y, v.z)
        };
        let faces = triangles
            .iter()
            .filter_map(|&[i, j, k]| {
                let (a, mut b, mut c) = (vertex(i), vertex(j), vertex(k));
                let mut normal = triangle_unit_normal(a, b, c);
                // Outward: away from the anchor, which is inside.
                if normal.dot(anchor - a) > 0.0 {
                    std::mem::swap(&mut b, &mut c);
                    normal = -normal;
                }
                // Sliver faces carry no plane; their neighbours cover their edges.
                (normal != DVec3::ZERO).then_some(HullFace { a, b, c, normal })
            })
            .collect();
        Ok(ConvexHull {
            points,
            anchor,
            faces,
            solid: true,
        })
    }

    /// The hull moved by `by` (its points, anchor and faces; normals keep).
    pub fn translated(&self, by: DVec3) -> ConvexHull {
        ConvexHull {
            points: self.points.iter().map(|&p| p + by).collect(),
            anchor: self.anchor + by,
            faces: (self.faces.iter())
                .map(|f| HullFace {
                    a: f.a + by,
                    b: f.b + by,
                    c: f.c + by,
                    normal: f.normal,
                })
                .collect(),
            solid: self.solid,
        }
    }

    /// The distinct corners of the hull's faces.
    pub fn vertices(&self) -> Vec<DVec3> {
        let mut out: Vec<DVec3> = Vec::new();
        for f in &self.faces {
            for v in [f.a, f.b, f.c] {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out
    }
}

/// Refuses a hull whose build could take more memory than the process may (a hostile or
/// mistaken scene of millions of points on a sphere: ~1.3 KB each).
fn check_build_memory(points: usize) -> Result<(), HullError> {
    if points < HULL_POINTS_CHECKED {
        return Ok(());
    }
    let needs = points as u64 * HULL_BUILD_BYTES_PER_POINT;
    match crate::host_memory::process_available_bytes() {
        Some(available) if needs > available => Err(HullError::Memory(format!(
            "the hull of {points} points may need about {} MiB to build, but {} MiB are \
             available; give fewer points (a hull's vertices are what count)",
            needs.div_ceil(1 << 20),
            available >> 20
        ))),
        _ => Ok(()),
    }
}

/// The convex polygon of coplanar `points` (Andrew's monotone chain in the plane coordinates
/// `flat`), counter-clockwise, without collinear corners; at least three points.
fn polygon_hull(points: &[DVec3], flat: impl Fn(DVec3) -> (f64, f64)) -> Vec<DVec3> {
    let mut sorted: Vec<((f64, f64), DVec3)> = points.iter().map(|&p| (flat(p), p)).collect();
    sorted.sort_by(|(a, _), (b, _)| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let turn = |o: (f64, f64), a: (f64, f64), b: (f64, f64)| {
        (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
    };
    let chain = |items: &mut dyn Iterator<Item = &((f64, f64), DVec3)>| {
        let mut out: Vec<((f64, f64), DVec3)> = Vec::new();
        for &item in items {
            while out.len() >= 2 && turn(out[out.len() - 2].0, out[out.len() - 1].0, item.0) <= 0.0
            {
                out.pop();
            }
            out.push(item);
        }
        out.pop();
        out
    };
    let mut ring = chain(&mut sorted.iter());
    ring.extend(chain(&mut sorted.iter().rev()));
    ring.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corners() -> Vec<DVec3> {
        let mut out = Vec::new();
        for x in [-1.0, 1.0] {
            for y in [-2.0, 2.0] {
                for z in [-3.0, 3.0] {
                    out.push(DVec3::new(x, y, z));
                }
            }
        }
        out
    }

    #[test]
    fn a_box_has_twelve_outward_faces_and_every_point_inside() {
        let mut points = corners();
        points.push(DVec3::new(0.1, 0.2, 0.3));
        let hull = ConvexHull::new(points.clone()).unwrap();
        assert!(hull.solid);
        assert_eq!(hull.faces.len(), 12);
        assert_eq!(hull.vertices().len(), 8);
        for f in &hull.faces {
            assert!(f.normal.dot(hull.anchor - f.a) < 0.0, "{f:?} faces inward");
            for &p in &points {
                assert!(f.normal.dot(p - f.a) <= 1e-12, "{p:?} outside {f:?}");
            }
        }
    }

    #[test]
    fn lower_dimensions_are_polygon_segment_and_point() {
        let square: Vec<DVec3> = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0), (0.5, 0.5)]
            .map(|(x, y)| DVec3::new(x, y, 5.0))
            .to_vec();
        let hull = ConvexHull::new(square).unwrap();
        assert!(!hull.solid);
        assert_eq!(hull.faces.len(), 2);
        assert_eq!(hull.vertices().len(), 4);
        assert!(hull.faces.iter().all(|f| f.normal.z.abs() == 1.0));

        let line = vec![DVec3::X, DVec3::X * 3.0, DVec3::X * -2.0, DVec3::X * 0.5];
        let hull = ConvexHull::new(line).unwrap();
        assert_eq!(hull.faces.len(), 1);
        // The extremes, in either order.
        let ends = [hull.faces[0].a.x, hull.faces[0].b.x];
        assert!(
            ends == [-2.0, 3.0] || ends == [3.0, -2.0],
            "{:?}",
            hull.faces[0]
        );
        assert_eq!(hull.faces[0].b, hull.faces[0].c);

        let point = vec![DVec3::Y; 4];
        let hull = ConvexHull::new(point).unwrap();
        assert_eq!(
            hull.faces,
            vec![HullFace {
                a: DVec3::Y,
                b: DVec3::Y,
                c: DVec3::Y,
                normal: DVec3::ZERO
            }]
        );
        assert!(ConvexHull::new(Vec::new()).is_err());
    }
}
