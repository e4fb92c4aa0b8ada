//! Training samples of a mesh answered on the device (SPEC §8): a `sample::Sampler`'s rows,
//! a chunk at a time, with their signed distance and its gradient.

use super::{Engine, GpuMesh, MeshQuery};
use crate::error::{Error, Result};
use crate::fields::{DISTANCE, Family, Fields, NORMAL};
use crate::mesh::Sign;
use crate::points::Points;
use crate::sample::{Sample, SampleKind, Sampler};

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

impl Engine {
    /// The sampler's rows in order, chunk by chunk into `sink` with the first row's index.
    pub fn mesh_samples(
        &self,
        job: MeshSamples<'_>,
        sink: &mut dyn FnMut(usize, &SampleRows) -> Result<()>,
    ) -> Result<()> {
        let MeshSamples {
            mesh,
            sampler,
            sign,
        } = job;
        let fields = Fields::from_bits(Family::Hits, DISTANCE | NORMAL);
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
            let mut column = |name: &str| {
                answers
                    .take_f32s(name)
                    .ok_or_else(|| Error::Gpu(format!("the mesh query gave no `{name}` column")))
            };
            Ok::<_, Error>((column("distance")?, column("normal")?))
        };
        for first in (0..rows).step_by(SAMPLE_CHUNK_ROWS) {
            let count = SAMPLE_CHUNK_ROWS.min(rows - first);
            let samples: Vec<Sample> = sampler.samples(first..first + count);
            let points: Vec<[f64; 3]> = samples.iter().map(|s| s.point).collect();
            // Surface rows come first (`SampleSpec::locate`) and lie on the mesh: sdf 0 and
            // their face normal, nothing to ask the device.
            let surface = samples.partition_point(|s| s.kind == SampleKind::Surface);
            debug_assert!(
                samples[surface..]
                    .iter()
                    .all(|s| s.kind != SampleKind::Surface)
            );
            let asked = &points[surface..];
            let (distances, normals) = match caps {
                _ if asked.is_empty() => (Vec::new(), Vec::new()),
                Some(caps) => {
                    let (mut distances, mut normals) = answer(asked, Sign::Pseudonormal)?;
                    let rows: Vec<usize> = (0..asked.len()).collect();
                    let position = |row: usize| crate::DVec3::from_array(asked[row]);
                    let slack = |p: crate::DVec3| crate::tolerance(mesh_scale.max(p.max_abs()));
                    let settled = caps.settle(&rows, position, &mut distances, slack);
                    for &row in &settled.turned {
                        for n in &mut normals[3 * row..3 * row + 3] {
                            *n = -*n;
                        }
                    }
                    let doubtful = settled.walk;
                    let doubtful_points: Vec<[f64; 3]> =
                        doubtful.iter().map(|&row| asked[row]).collect();
                    if !doubtful.is_empty() {
                        let (winding, winding_normals) = answer(&doubtful_points, sign)?;
                        for (k, &row) in doubtful.iter().enumerate() {
                            distances[row] = winding[k];
                            normals[3 * row..3 * row + 3]
                                .copy_from_slice(&winding_normals[3 * k..3 * k + 3]);
                        }
                    }
                    (distances, normals)
                }
                None => answer(asked, sign)?,
            };
            let face_normals = samples[..surface]
                .iter()
                .map(|s| s.face_normal.map_or([0.0; 3], |n| n.map(|x| x as f32)));
            let chunk = SampleRows {
                points: points.iter().map(|p| p.map(|x| x as f32)).collect(),
                sdf: std::iter::repeat_n(0.0, surface).chain(distances).collect(),
                normal: face_normals
                    .chain(normals.chunks_exact(3).map(|n| [n[0], n[1], n[2]]))
                    .collect(),
                kind: samples.iter().map(|s| s.kind as u8).collect(),
            };
            sink(first, &chunk)?;
        }
        Ok(())
    }
}
