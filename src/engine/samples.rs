//! Training samples of a mesh answered on the device (SPEC §8): a `sample::Sampler`'s rows,
//! a chunk at a time, with their signed distance and its gradient.

use super::{Engine, GpuMesh, MeshQuery};
use crate::error::{Error, Result};
use crate::fields::{DISTANCE, Family, Fields, SHAPE, UNIQUE_NEAREST_SHAPE_BIT};
use crate::mesh::Sign;
use crate::points::Points;
use crate::sample::{SampleColumns, Sampler};

/// Samples made, answered and handed on a chunk at a time.
const SAMPLE_CHUNK_ROWS: usize = 1 << 20;

/// A mesh's training samples: [`Engine::mesh_samples`].
pub struct MeshSamples<'a> {
    pub mesh: &'a GpuMesh,
    pub sampler: &'a Sampler<'a>,
    pub sign: Sign,
}

/// A chunk of answered samples, the columns of `closest sample`'s output.
#[derive(Default)]
pub struct SampleRows {
    pub points: Vec<[f32; 3]>,
    /// The signed distance; 0 for surface samples, which lie on the surface by construction.
    pub sdf: Vec<f32>,
    /// The distance's gradient; a surface sample's face normal.
    pub normal: Vec<[f32; 3]>,
    pub kind: Vec<u8>,
}

impl SampleRows {
    /// `chunk`'s rows after these (moved, not copied, when these are none).
    pub fn append(&mut self, chunk: SampleRows) {
        if self.kind.is_empty() {
            *self = chunk;
            return;
        }
        self.points.extend(chunk.points);
        self.sdf.extend(chunk.sdf);
        self.normal.extend(chunk.normal);
        self.kind.extend(chunk.kind);
    }
}

/// What a sample job asks of the mesh query: each row's signed distance (for its sign) and
/// nearest triangle.
pub fn sample_fields() -> Fields {
    Fields::from_bits(Family::Hits, DISTANCE | SHAPE)
}

impl Engine {
    /// The sampler's rows in order, chunk by chunk into `sink` with the first row's index.
    pub fn mesh_samples(
        &self,
        job: MeshSamples<'_>,
        sink: &mut dyn FnMut(usize, SampleRows) -> Result<()>,
    ) -> Result<()> {
        let MeshSamples {
            mesh,
            sampler,
            sign,
        } = job;
        // The device finds each row's nearest triangle and its sign; the distance and its
        // gradient are then measured to that triangle in f64 (`finish_in_f64`), so that every
        // adapter writes the same file, whatever its f32 arithmetic.
        // The walk marks the rows whose triangle no other comes near (the rest are settled
        // in f64), where the mark's bit is free in the triangle indices.
        let marked = sampler.mesh().triangles.len() < UNIQUE_NEAREST_SHAPE_BIT as usize;
        let fields = if marked {
            sample_fields().with_unique_nearest()
        } else {
            sample_fields()
        };
        let rows = sampler.len();
        // Winding numbers are walked only where the holes' caps leave the pseudonormal sign
        // in doubt: the sample's nearest point may be on a rim, or a cap's solid angle large.
        let caps = match sign {
            Sign::Winding => self.winding_by_pseudonormal(mesh)?,
            _ => None,
        };
        let mesh_scale = mesh.scale();
        // Built for the first chunk with a row to settle.
        let rings = std::sync::OnceLock::new();
        let answer = |points: &[[f64; 3]], sign: Sign| {
            let query = MeshQuery {
                mesh,
                points: Points::F64(points),
                sign,
                fields,
            };
            let mut answers =
                crate::Columns::collect(fields, points.len(), |sink| self.query_mesh(query, sink))?;
            let distances = answers
                .take_f32s("distance")
                .ok_or_else(|| Error::Gpu("the mesh query gave no `distance` column".into()))?;
            let shapes = answers
                .i32s("shape")
                .ok_or_else(|| Error::Gpu("the mesh query gave no `shape` column".into()))?
                .to_vec();
            Ok::<_, Error>((distances, shapes))
        };
        for first in (0..rows).step_by(SAMPLE_CHUNK_ROWS) {
            let count = SAMPLE_CHUNK_ROWS.min(rows - first);
            let SampleColumns {
                points,
                kinds,
                face_normals,
            } = sampler.columns(first..first + count);
            // Surface rows come first and lie on the mesh: sdf 0 and their face normal,
            // nothing to ask the device.
            let surface = face_normals.len();
            let asked = &points[surface..];
            let (distances, shapes) = match caps {
                _ if asked.is_empty() => (Vec::new(), Vec::new()),
                Some(caps) => {
                    let (mut distances, mut shapes) = answer(asked, Sign::Pseudonormal)?;
                    let rows: Vec<usize> = (0..asked.len()).collect();
                    let position = |row: usize| crate::DVec3::from_array(asked[row]);
                    let slack = |p: crate::DVec3| crate::tolerance(mesh_scale.max(p.max_abs()));
                    let doubtful = caps.settle(&rows, position, &mut distances, slack);
                    let doubtful_points: Vec<[f64; 3]> =
                        doubtful.iter().map(|&row| asked[row]).collect();
                    if !doubtful.is_empty() {
                        let (winding, winding_shapes) = answer(&doubtful_points, sign)?;
                        for (k, &row) in doubtful.iter().enumerate() {
                            distances[row] = winding[k];
                            shapes[row] = winding_shapes[k];
                        }
                    }
                    (distances, shapes)
                }
                None => answer(asked, sign)?,
            };
            let (distances, normals) =
                finish_in_f64(sampler.mesh(), &rings, asked, &distances, &shapes, marked);
            let chunk = SampleRows {
                points: points.iter().map(|p| p.map(|x| x as f32)).collect(),
                sdf: std::iter::repeat_n(0.0, surface).chain(distances).collect(),
                normal: face_normals
                    .iter()
                    .map(|n| n.map(|x| x as f32))
                    .chain(normals)
                    .collect(),
                kind: kinds.iter().map(|&k| k as u8).collect(),
            };
            sink(first, chunk)?;
        }
        Ok(())
    }
}

/// Each row's signed distance and its gradient, measured in f64 to its nearest triangle and
/// signed as the device signed it (`signed`'s sign bit), then rounded once to f32. The
/// triangle is the device's (`shapes`) where the walk marked it unique (`marked`): no other
/// within f32's rounding, so every adapter finds it; elsewhere the one `settle_nearest` finds
/// from it in f64, which adapters whose roundings picked two near-tied triangles agree on. So
/// every adapter writes the same bits. A row with no triangle keeps the device's answer, and
/// no gradient.
fn finish_in_f64(
    mesh: &crate::mesh::Mesh,
    rings: &std::sync::OnceLock<crate::mesh::CornerRings>,
    points: &[[f64; 3]],
    signed: &[f32],
    shapes: &[i32],
    marked: bool,
) -> (Vec<f32>, Vec<[f32; 3]>) {
    use rayon::prelude::*;
    points
        .par_iter()
        .zip(signed.par_iter().zip(shapes))
        .with_min_len(4096)
        .map(|(&p, (&signed, &shape))| {
            let Ok(shape) = u32::try_from(shape) else {
                return (signed, [f32::NAN; 3]);
            };
            let p = crate::DVec3::from_array(p);
            let unique = marked && shape & UNIQUE_NEAREST_SHAPE_BIT != 0;
            let found = if marked {
                shape & !UNIQUE_NEAREST_SHAPE_BIT
            } else {
                shape
            } as usize;
            let (t, q) = if unique {
                let q = crate::mesh::closest_feature(p, mesh.corners(found)).0;
                (found, q)
            } else {
                let rings = rings.get_or_init(|| crate::mesh::CornerRings::new(mesh));
                settle_nearest(mesh, rings, p, found)
            };
            let distance = (p - q).length();
            // On the surface the gradient is the face's outward normal, whatever the sign.
            if distance == 0.0 {
                let [a, b, c] = mesh.corners(t);
                let normal = crate::math::triangle_unit_normal(a, b, c);
                return (0.0, normal.to_array().map(|x| x as f32));
            }
            let normal = (p - q) * (1.0 / distance);
            let (distance, normal) = if signed.is_sign_negative() {
                (-distance, -normal)
            } else {
                (distance, normal)
            };
            (distance as f32, normal.to_array().map(|x| x as f32))
        })
        .unzip()
}

/// Most steps `settle_nearest` takes from the device's triangle.
const SETTLE_STEPS: usize = 16;

/// Most triangles around a corner that `settle_nearest` looks through. A corner with more (a
/// fan's centre: a disk or a cylinder's cap triangulated from its middle, thousands of
/// slivers) is passed over: looking through it for every row near the fan would cost rows ×
/// slivers. The slivers sharing an edge with the row's triangle are still met around its
/// other corners, so a near-tie between neighbouring slivers is still settled.
const SETTLE_RING_LIMIT: usize = 64;

#[cfg(test)]
thread_local! {
    /// Triangles `settle_nearest` measured on this thread, for the tests of its bound.
    static SETTLE_MEASURED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The triangle nearest `p` in f64 (the lower index at a tie) among `found` and the
/// triangles sharing a corner with it (around corners of at most `SETTLE_RING_LIMIT`),
/// stepped again from there until none is nearer, and its closest point. The device's f32
/// walk finds a triangle within its rounding of the nearest; two adapters may find two (a
/// near-tie, nearly always between neighbours), and both settle on the same one here.
fn settle_nearest(
    mesh: &crate::mesh::Mesh,
    rings: &crate::mesh::CornerRings,
    p: crate::DVec3,
    found: usize,
) -> (usize, crate::DVec3) {
    let q = crate::mesh::closest_feature(p, mesh.corners(found)).0;
    let mut best = (found, (p - q).length_squared());
    for _ in 0..SETTLE_STEPS {
        let centre = best.0;
        let corners = mesh.triangles[centre];
        let looked = corners.map(|v| rings.around(v).len() <= SETTLE_RING_LIMIT);
        for (k, &v) in corners.iter().enumerate() {
            if !looked[k] {
                continue;
            }
            for &t in rings.around(v) {
                let t = t as usize;
                let indices = mesh.triangles[t];
                // Each neighbour once: a triangle around an earlier corner looked through
                // was met there.
                let met = (0..k).any(|j| looked[j] && indices.contains(&corners[j]));
                if t == centre || met {
                    continue;
                }
                #[cfg(test)]
                SETTLE_MEASURED.with(|count| count.set(count.get() + 1));
                if let Some(distance2) = nearer_than(p, mesh.corners(t), best.1) {
                    if distance2 < best.1 || (distance2 == best.1 && t < best.0) {
                        best = (t, distance2);
                    }
                }
            }
        }
        if best.0 == centre {
            break;
        }
    }
    let q = if best.0 == found {
        q
    } else {
        crate::mesh::closest_feature(p, mesh.corners(best.0)).0
    };
    (best.0, q)
}

/// The squared distance from `p` to triangle `[a, b, c]`, unless its plane is farther than
/// `bound2` (then so is the triangle). The plane's test is kept on the safe side of rounding.
fn nearer_than(p: crate::DVec3, [a, b, c]: [crate::DVec3; 3], bound2: f64) -> Option<f64> {
    let n = (b - a).cross(c - a);
    let height = n.dot(p - a);
    if height * height > bound2 * n.length_squared() * (1.0 + 1e-9) {
        return None;
    }
    let q = crate::mesh::closest_feature(p, [a, b, c]).0;
    Some((p - q).length_squared())
}

#[cfg(test)]
mod tests {
    use super::settle_nearest;
    use crate::math::{DVec3, SplitMix64};
    use crate::mesh::{CornerRings, Mesh};

    /// A bumpy height field of `n` × `n` cells, two triangles each.
    fn bumpy(n: u32, rng: &mut SplitMix64) -> Mesh {
        let vertices = (0..=n)
            .flat_map(|i| (0..=n).map(move |j| (i, j)))
            .map(|(i, j)| DVec3::new(i as f64, j as f64, 0.0))
            .map(|v| v + DVec3::new(0.0, 0.0, 0.05 * rng.unit()))
            .collect::<Vec<_>>();
        let at = |i: u32, j: u32| i * (n + 1) + j;
        let triangles = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .flat_map(|(i, j)| {
                [
                    [at(i, j), at(i + 1, j), at(i + 1, j + 1)],
                    [at(i, j), at(i + 1, j + 1), at(i, j + 1)],
                ]
            })
            .collect();
        Mesh::new(vertices, triangles, "bumpy").unwrap()
    }

    /// From the nearest triangle or any triangle sharing a corner with it, the settle ends at
    /// the nearest by brute force in f64 (the lower index at a tie); so two adapters whose
    /// walks found two neighbours agree. Points are taken near edges and vertices, where
    /// neighbours tie or nearly tie.
    #[test]
    fn the_settle_ends_at_the_nearest_from_every_neighbour_of_it() {
        let mut rng = SplitMix64(7);
        let mesh = bumpy(8, &mut rng);
        let rings = CornerRings::new(&mesh);
        let distance2 = |p: DVec3, t: usize| {
            (p - crate::mesh::closest_feature(p, mesh.corners(t)).0).length_squared()
        };
        let mut moved = 0;
        for k in 0..2000 {
            // On a grid line or vertex for some, within 1e-9 of one for others, off the
            // surface.
            let mut coordinate = |kind: u32| {
                let x = 1.0 + 6.0 * rng.unit();
                match kind {
                    0 => x.round(),
                    1 => x.round() + 1e-9 * (rng.unit() - 0.5),
                    _ => x,
                }
            };
            let (x, y) = (coordinate(k % 3), coordinate((k / 3) % 3));
            let p = DVec3::new(x, y, 0.3 * rng.unit() - 0.1);
            let nearest = (0..mesh.triangles.len())
                .min_by(|&a, &b| distance2(p, a).total_cmp(&distance2(p, b)).then(a.cmp(&b)))
                .unwrap();
            for &v in &mesh.triangles[nearest] {
                for &start in rings.around(v) {
                    let (t, q) = settle_nearest(&mesh, &rings, p, start as usize);
                    assert_eq!(t, nearest, "point {p:?} from triangle {start}");
                    let exact = crate::mesh::closest_feature(p, mesh.corners(nearest)).0;
                    assert_eq!(q, exact);
                    moved += usize::from(start as usize != nearest);
                }
            }
        }
        assert!(moved > 1000, "{moved} settles moved");
    }

    /// Rows above a fan of 20,000 slivers about one centre (a disk triangulated from its
    /// middle): the settle from a sliver next to the nearest ends at the nearest, and it
    /// measures a bounded number of triangles, not every sliver around the centre for
    /// every row.
    #[test]
    fn the_settle_about_a_fan_ends_at_the_nearest_without_measuring_every_sliver() {
        let slivers = 20_000u32;
        let vertices: Vec<DVec3> = std::iter::once(DVec3::ZERO)
            .chain((0..slivers).map(|k| {
                let angle = std::f64::consts::TAU * f64::from(k) / f64::from(slivers);
                DVec3::new(angle.cos(), angle.sin(), 0.0)
            }))
            .collect();
        let triangles = (0..slivers)
            .map(|k| [0, 1 + k, 1 + (k + 1) % slivers])
            .collect();
        let mesh = Mesh::new(vertices, triangles, "fan").unwrap();
        let rings = CornerRings::new(&mesh);
        let mut rng = SplitMix64(3);
        let distance2 = |p: DVec3, t: usize| {
            (p - crate::mesh::closest_feature(p, mesh.corners(t)).0).length_squared()
        };
        for _ in 0..200 {
            let (radius, angle) = (0.2 + 0.7 * rng.unit(), std::f64::consts::TAU * rng.unit());
            let p = DVec3::new(radius * angle.cos(), radius * angle.sin(), 0.3 * rng.unit());
            let nearest = (0..mesh.triangles.len())
                .min_by(|&a, &b| distance2(p, a).total_cmp(&distance2(p, b)).then(a.cmp(&b)))
                .unwrap();
            let n = mesh.triangles.len();
            for start in [(nearest + 1) % n, (nearest + n - 1) % n] {
                super::SETTLE_MEASURED.with(|count| count.set(0));
                let (t, _) = settle_nearest(&mesh, &rings, p, start);
                let measured = super::SETTLE_MEASURED.with(|count| count.get());
                assert_eq!(t, nearest, "point {p:?} from sliver {start}");
                assert!(measured < 100, "{measured} triangles measured for one row");
            }
        }
    }
}
