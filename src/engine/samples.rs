//! Training samples of a mesh answered on the device (SPEC §8): a `sample::Sampler`'s rows,
//! a chunk at a time, with their signed distance and its gradient.

use super::{Engine, GpuMesh, MeshQuery};
use crate::error::{Error, Result};
use crate::fields::{DISTANCE, Family, Fields, SHAPE};
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
        let fields = sample_fields();
        let rows = sampler.len();
        // Winding numbers are walked only where the holes' caps leave the pseudonormal sign
        // in doubt: the sample's nearest point may be on a rim, or a cap's solid angle large.
        let caps = match sign {
            Sign::Winding => self.winding_by_pseudonormal(mesh)?,
            _ => None,
        };
        let mesh_scale = mesh.scale();
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
            let (distances, normals) = finish_in_f64(sampler.mesh(), asked, &distances, &shapes);
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

/// Each row's signed distance and its gradient, measured in f64 to the triangle the device
/// found nearest (`shapes`) and signed as the device signed it (`signed`'s sign bit), then
/// rounded once to f32: the same bits on every adapter wherever the adapters find the same
/// triangle. A row with no triangle keeps the device's answer, and no gradient.
fn finish_in_f64(
    mesh: &crate::mesh::Mesh,
    points: &[[f64; 3]],
    signed: &[f32],
    shapes: &[i32],
) -> (Vec<f32>, Vec<[f32; 3]>) {
    use rayon::prelude::*;
    points
        .par_iter()
        .zip(signed.par_iter().zip(shapes))
        .with_min_len(4096)
        .map(|(&p, (&signed, &shape))| {
            let Ok(t) = usize::try_from(shape) else {
                return (signed, [f32::NAN; 3]);
            };
            let [a, b, c] = mesh.corners(t);
            let p = crate::DVec3::from_array(p);
            let q = crate::mesh::closest_feature(p, [a, b, c]).0;
            let distance = (p - q).length();
            // On the surface the gradient is the face's outward normal, whatever the sign.
            if distance == 0.0 {
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
