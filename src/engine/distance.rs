//! Mesh-to-mesh distance (SPEC §9): each mesh's vertices and area-weighted surface samples
//! queried against the other mesh on the device, reduced on the fly to the one-sided Hausdorff
//! distances and the Chamfer means, the vertices' deviations handed on chunk by chunk.

use super::{Engine, GpuMesh, MeshQuery};
use crate::auto_sign::SignChoice;
use crate::error::{Error, Result};
use crate::fields::{DISTANCE, Family, Fields, PackedRows};
use crate::mesh::{Mesh, Sign};
use crate::points::{PointChunk, PointReader, Points};
use crate::sample::{SampleSpec, Sampler};

/// The distance between two meshes: [`Engine::mesh_distance`].
pub struct MeshDistance<'a> {
    pub a: &'a GpuMesh,
    pub b: &'a GpuMesh,
    /// Area-weighted surface samples of each mesh, beside its vertices.
    pub samples: usize,
    /// The samples' seed (`sample::Sampler`: the same points on any adapter).
    pub seed: u64,
    /// Deviations signed by the target's inside (negative inside it), or unsigned.
    pub sign: SignChoice,
}

/// Where [`Engine::mesh_distance`] hands each chunk of deviations: its direction, the index
/// of its first point, the values.
pub type DeviationSink<'a> = dyn FnMut(Direction, usize, &[f32]) -> Result<()> + 'a;

/// Which way a deviation is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A's points against B.
    AToB,
    /// B's points against A.
    BToA,
}

/// One direction's deviations, summarised over every point (vertices and samples).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Deviations {
    /// Points measured: the vertices plus the samples.
    pub points: usize,
    /// The largest |deviation|: the one-sided Hausdorff distance.
    pub max: f64,
    /// The mean |deviation|.
    pub mean: f64,
    /// The mean squared deviation.
    pub mean_squared: f64,
    /// Points whose deviation is not finite (a NaN vertex), left out of the figures above.
    pub non_finite: usize,
    /// Vertices on no triangle (a file may declare them): not on the surface measured, so their
    /// deviations are NaN and left out of the figures, and the others keep the file's indices.
    pub unused_vertices: usize,
    /// The sign method applied to this direction (its target's), `Sign::None` unsigned.
    pub sign: Sign,
}

/// Both directions: [`Engine::mesh_distance`]'s answer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MeshDistanceSummary {
    pub a_to_b: Deviations,
    pub b_to_a: Deviations,
}

impl MeshDistanceSummary {
    /// The symmetric Hausdorff distance.
    pub fn hausdorff(&self) -> f64 {
        self.a_to_b.max.max(self.b_to_a.max)
    }

    /// The Chamfer distance of plain distances: the two directions' means, added.
    pub fn chamfer(&self) -> f64 {
        self.a_to_b.mean + self.b_to_a.mean
    }

    /// The Chamfer distance of squared distances (point-cloud-utils' and PyTorch3D's), added.
    pub fn chamfer_squared(&self) -> f64 {
        self.a_to_b.mean_squared + self.b_to_a.mean_squared
    }
}

impl Engine {
    /// A's points against B, then B's against A: `sink` gets each direction's deviations in
    /// order (the vertices first, then the samples), chunk by chunk with the first point's
    /// index. Memory is one chunk, however many points there are.
    pub fn mesh_distance(
        &self,
        job: MeshDistance<'_>,
        sink: &mut DeviationSink<'_>,
    ) -> Result<MeshDistanceSummary> {
        let MeshDistance {
            a,
            b,
            samples,
            seed,
            sign,
        } = job;
        let mut one_way = |direction, from: &GpuMesh, to: &GpuMesh| {
            let sign = self.resolve_sign(to, sign)?;
            let mut sink = |first: usize, values: &[f32]| sink(direction, first, values);
            self.deviations(from.mesh(), to, sign, (samples, seed), &mut sink)
        };
        Ok(MeshDistanceSummary {
            a_to_b: one_way(Direction::AToB, a, b)?,
            b_to_a: one_way(Direction::BToA, b, a)?,
        })
    }

    /// [`Engine::mesh_distance`], keeping the vertices' deviations (`a_to_b`, then `b_to_a`, the
    /// arrays of `closest distance`); `progress` hears of every chunk (points done, in all).
    pub fn mesh_distance_vertices(
        &self,
        job: MeshDistance<'_>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(MeshDistanceSummary, [Vec<f32>; 2])> {
        let vertices = [job.a, job.b].map(|m| m.mesh().vertices.len());
        let mut kept = VertexDeviations::new(vertices, job.samples, progress);
        let summary = self.mesh_distance(job, &mut |direction, first, values| {
            kept.take(direction as usize, first, values)
        })?;
        Ok((summary, kept.deviations))
    }

    /// [`Engine::mesh_distance_vertices`] of two meshes not yet on the device, which come back
    /// uploaded (A, then B): B is uploaded, then A's hierarchy is built on another thread while
    /// A's points, which need only A's host copy, are answered against B; then B's against A.
    /// A build leaves a core idle for much of its time, and a small job's time was mostly the
    /// two builds and the queries, one after the other. The two builds still take turns, so
    /// the memory a job needs at once is what it was. Ctrl-C on this thread stops the build
    /// too.
    pub fn mesh_distance_uploading(
        &self,
        (a, b): (Mesh, Mesh),
        (samples, seed, sign): (usize, u64, SignChoice),
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(MeshDistanceSummary, [Vec<f32>; 2], [GpuMesh; 2])> {
        // A's problems first, as when A was uploaded first: its build would refuse them.
        a.check_built()?;
        let vertices = [&a, &b].map(|m| m.vertices.len());
        let mut kept = VertexDeviations::new(vertices, samples, progress);
        let b = self.upload_mesh(b)?;
        let (built_a, a_to_b) = crate::interrupt::beside(
            || self.build_mesh(&a),
            || {
                let to_b = self.resolve_sign(&b, sign)?;
                let mut sink = |first: usize, values: &[f32]| kept.take(0, first, values);
                self.deviations(&a, &b, to_b, (samples, seed), &mut sink)
            },
        );
        // This side's failure first: it stopped the build.
        let a_to_b = a_to_b?;
        let a = built_a?.with_mesh(a);
        let to_a = self.resolve_sign(&a, sign)?;
        let mut sink = |first: usize, values: &[f32]| kept.take(1, first, values);
        let b_to_a = self.deviations(b.mesh(), &a, to_a, (samples, seed), &mut sink)?;
        let summary = MeshDistanceSummary { a_to_b, b_to_a };
        Ok((summary, kept.deviations, [a, b]))
    }

    /// `from`'s vertices and `samples` surface samples against `to`, signed by `sign`.
    fn deviations(
        &self,
        from: &Mesh,
        to: &GpuMesh,
        sign: Sign,
        (samples, seed): (usize, u64),
        sink: &mut dyn FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<Deviations> {
        let sampler = if samples > 0 {
            Some(Sampler::new(from, surface_samples(samples, seed)?)?)
        } else {
            None
        };
        let used = UsedVertices::of(from);
        let mut points = MeshPoints {
            mesh: from,
            used: &used,
            sampler: sampler.as_ref(),
        };
        let total = points.rows();
        if total == 0 {
            return Err(Error::Usage(
                "a mesh with no vertices has no distance to measure".into(),
            ));
        }
        let (mut max, mut sum, mut sum_squared, mut non_finite) = (0.0f64, 0.0, 0.0, 0);
        let query = MeshQuery {
            mesh: to,
            points: Points::Read(&mut points),
            sign,
            fields: Fields::from_bits(Family::Hits, DISTANCE),
        };
        self.query_mesh(query, &mut |first: usize, rows: PackedRows<'_>| {
            let distances: &[f32] = bytemuck::cast_slice(rows.words());
            for &d in distances {
                let d = f64::from(d);
                if d.is_finite() {
                    max = max.max(d.abs());
                    sum += d.abs();
                    sum_squared += d * d;
                } else {
                    non_finite += 1;
                }
            }
            sink(first, distances)
        })?;
        let finite = (total - non_finite).max(1) as f64;
        Ok(Deviations {
            points: total,
            max,
            mean: sum / finite,
            mean_squared: sum_squared / finite,
            // The unused vertices were asked as NaN rows.
            non_finite: non_finite - used.unused,
            unused_vertices: used.unused,
            sign,
        })
    }
}

/// `samples` area-weighted surface samples of a mesh, from `seed` (`--samples`, at most 2^32).
pub fn surface_samples(samples: usize, seed: u64) -> Result<SampleSpec> {
    if samples > u32::MAX as usize {
        return Err(Error::Usage(format!(
            "--samples {samples}: at most 2^32 samples a mesh"
        )));
    }
    Ok(SampleSpec::surface(samples, seed))
}

/// The vertices' deviations of both directions, kept from the chunks as they come, and the
/// progress told of every chunk (points done, in all).
struct VertexDeviations<'p> {
    vertices: [usize; 2],
    deviations: [Vec<f32>; 2],
    done: usize,
    total: usize,
    progress: &'p mut dyn FnMut(usize, usize),
}

impl<'p> VertexDeviations<'p> {
    fn new(
        vertices: [usize; 2],
        samples: usize,
        progress: &'p mut dyn FnMut(usize, usize),
    ) -> VertexDeviations<'p> {
        VertexDeviations {
            vertices,
            deviations: [Vec::new(), Vec::new()],
            done: 0,
            total: vertices[0] + vertices[1] + 2 * samples,
            progress,
        }
    }

    /// Side `side`'s chunk from point `first` (its vertices first, then its samples).
    fn take(&mut self, side: usize, first: usize, values: &[f32]) -> Result<()> {
        if first < self.vertices[side] {
            let count = values.len().min(self.vertices[side] - first);
            self.deviations[side].extend_from_slice(&values[..count]);
        }
        self.done += values.len();
        (self.progress)(self.done, self.total);
        Ok(())
    }
}

/// Which of a mesh's vertices some triangle uses, one bit each.
struct UsedVertices {
    bits: Vec<u64>,
    unused: usize,
}

impl UsedVertices {
    fn of(mesh: &Mesh) -> UsedVertices {
        let mut bits = vec![0u64; mesh.vertices.len().div_ceil(64)];
        for &v in mesh.triangles.iter().flatten() {
            bits[v as usize / 64] |= 1 << (v % 64);
        }
        let used: usize = bits.iter().map(|w| w.count_ones() as usize).sum();
        UsedVertices {
            bits,
            unused: mesh.vertices.len() - used,
        }
    }

    fn contains(&self, vertex: usize) -> bool {
        self.bits[vertex / 64] & (1 << (vertex % 64)) != 0
    }
}

/// A mesh's vertices (NaN rows for those on no triangle), then its surface samples, as query
/// points.
struct MeshPoints<'a> {
    mesh: &'a Mesh,
    used: &'a UsedVertices,
    sampler: Option<&'a Sampler<'a>>,
}

impl PointReader for MeshPoints<'_> {
    fn rows(&self) -> usize {
        self.mesh.vertices.len() + self.sampler.map_or(0, Sampler::len)
    }

    fn read(&mut self, range: std::ops::Range<usize>, chunk: &mut PointChunk) -> Result<()> {
        use rayon::prelude::*;
        let vertices = self.mesh.vertices.len();
        let rows = chunk.f64_rows();
        let vertex_rows = range.start.min(vertices)..range.end.min(vertices);
        rows.par_extend(
            vertex_rows
                .into_par_iter()
                .map(|row| match self.used.contains(row) {
                    true => self.mesh.vertices.get(row).to_array(),
                    false => [f64::NAN; 3],
                }),
        );
        if range.end > vertices {
            let sampler = self.sampler.expect("rows past the vertices are samples");
            sampler.points_into(
                range.start.max(vertices) - vertices..range.end - vertices,
                rows,
            );
        }
        Ok(())
    }
}
