//! Meshes cut into spatial parts that each fit one binding: every part a scene of its own,
//! each block of rows answered by every part in turn, the nearest answer kept.

use super::*;

/// Chunks of rows a many-part mesh answers per block: every part runs over the block in turn.
pub(super) const PART_BLOCK_CHUNKS: usize = 4;

/// The mesh's triangles cut into spatial parts of at most `cap` triangles each: halved at the
/// median centroid along the longest extent until they fit. Each part is ascending.
pub(super) fn spatial_parts(mesh: &Mesh, cap: usize) -> Vec<Vec<u32>> {
    let centroid = |t: u32| {
        let [a, b, c] = mesh.corners(t as usize);
        (a + b + c) * (1.0 / 3.0)
    };
    let mut parts = Vec::new();
    let mut work = vec![(0..mesh.triangles.len() as u32).collect::<Vec<u32>>()];
    while let Some(mut part) = work.pop() {
        if part.len() <= cap.max(1) {
            part.sort_unstable();
            parts.push(part);
            continue;
        }
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for &t in &part {
            let c = centroid(t);
            for k in 0..3 {
                lo[k] = lo[k].min(c.get(k));
                hi[k] = hi[k].max(c.get(k));
            }
        }
        let axis = (DVec3::from_array(hi) - DVec3::from_array(lo)).longest_axis();
        let mid = part.len() / 2;
        part.select_nth_unstable_by(mid, |&a, &b| {
            centroid(a).get(axis).total_cmp(&centroid(b).get(axis))
        });
        let right = part.split_off(mid);
        work.push(right);
        work.push(part);
    }
    parts
}

/// The vertices of the mesh's triangles `indices` (all of them if `None`), shifted by
/// `-offset` and rounded to f32, and, for a part, its triangles' corners renumbered into them
/// (the mesh's own indices otherwise).
pub(super) fn part_vertices(
    mesh: &Mesh,
    offset: DVec3,
    indices: Option<&[u32]>,
) -> (Vec<[f32; 3]>, Option<Vec<[u32; 3]>>) {
    let shifted = |v: DVec3| (v - offset).to_f32();
    let Some(indices) = indices else {
        return (mesh.vertices.iter().map(shifted).collect(), None);
    };
    let mut local = vec![u32::MAX; mesh.vertices.len()];
    let mut vertices = Vec::new();
    let corner_ids = indices
        .iter()
        .map(|&t| {
            mesh.triangles[t as usize].map(|v| {
                if local[v as usize] == u32::MAX {
                    local[v as usize] = vertices.len() as u32;
                    vertices.push(shifted(mesh.vertices.get(v as usize)));
                }
                local[v as usize]
            })
        })
        .collect();
    (vertices, Some(corner_ids))
}

/// The distance from `p` to the box `bounds` (0 inside).
pub(super) fn box_distance(bounds: (DVec3, DVec3), p: DVec3) -> f64 {
    let (lo, hi) = bounds;
    let gap = |k: usize| (lo.get(k) - p.get(k)).max(p.get(k) - hi.get(k)).max(0.0);
    DVec3::new(gap(0), gap(1), gap(2)).length()
}

/// The part whose box is nearest to `p` (the first of equals; the first for a point that is
/// not one).
pub(super) fn nearest_box(parts: &[MeshPart], p: [f64; 3]) -> usize {
    let p = DVec3::new(p[0], p[1], p[2]);
    (0..parts.len())
        .min_by(|&a, &b| {
            box_distance(parts[a].bounds, p).total_cmp(&box_distance(parts[b].bounds, p))
        })
        .unwrap_or(0)
}

/// Whether a part whose box is `bounds` may hold a triangle nearer to `p` than `best`, or as
/// near: its box is no farther than `best` plus twice SPEC §3's tolerance, more than the
/// device's distances ever fall below the exact ones, so a part passed over could only have
/// given a farther answer. A row without an answer to better (not a point, or a walk that
/// outgrew its stack) asks no more parts. `mesh_scale` is the mesh's largest coordinate.
pub(super) fn may_hold_nearer(
    bounds: (DVec3, DVec3),
    p: [f64; 3],
    best: &GpuHit,
    mesh_scale: f64,
) -> bool {
    if best.shape < 0 {
        return false;
    }
    let p = DVec3::new(p[0], p[1], p[2]);
    let tolerance = crate::tolerance(p.max_abs().max(mesh_scale));
    box_distance(bounds, p) <= best.distance as f64 + 2.0 * tolerance
}

/// Keep the nearer of two answers for one row, ties to the lower triangle index; an
/// overflowed traversal stays overflowed and a non-finite row stays as it is.
pub(super) fn keep_nearer(best: &mut GpuHit, candidate: GpuHit) {
    use crate::fields::TRAVERSAL_OVERFLOW;
    if best.shape == -1 || best.shape == TRAVERSAL_OVERFLOW {
        return;
    }
    if candidate.shape == TRAVERSAL_OVERFLOW
        || candidate.distance < best.distance
        || (candidate.distance == best.distance && candidate.shape < best.shape)
    {
        *best = candidate;
    }
}

impl Engine {
    /// The triangles `indices` of the mesh (all of them if `None`) as one scene on the device,
    /// with its winding `clusters` if asked, `admit` asked first with its bytes.
    pub(super) fn upload_mesh_part<E: From<Error>>(
        &self,
        mesh: &Mesh,
        offset: DVec3,
        indexed: bool,
        indices: Option<&[u32]>,
        clusters: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        let count = indices.map_or(mesh.triangles.len(), <[u32]>::len);
        let triangle = |k: usize| indices.map_or(k, |indices| indices[k] as usize);
        let corners = |k: usize| mesh.shifted_corners(triangle(k), offset);
        if !indexed {
            return crate::gpu::scene::upload_triangles(
                &self.gpu, count, &corners, clusters, admit,
            );
        }
        let (vertices, corner_ids) = part_vertices(mesh, offset, indices);
        crate::gpu::scene::upload_indexed_triangles(
            &self.gpu,
            count,
            &corners,
            &|k| corner_ids.as_ref().map_or(mesh.triangles[k], |ids| ids[k]),
            vertices,
            clusters,
            admit,
        )
    }

    /// [`Engine::query_mesh`] for a mesh of several parts, or whose sign data
    /// the device cannot hold: blocks of rows, each row answered first by the part whose box
    /// is nearest to it, then by every other part whose box could hold a nearer triangle
    /// (`may_hold_nearer`), the nearest answer kept; then signed on the host and packed with
    /// `fields`.
    pub(super) fn query_mesh_parts_stream(
        &self,
        mesh: &GpuMesh,
        mut points: Points<'_>,
        sign: Sign,
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        use rayon::prelude::*;
        let rows = points.len();
        let (mut chunk, mut scratch) = (PointChunk::default(), Vec::new());
        let (mut best, mut packed) = (Vec::new(), Vec::new());
        let (mut first_part, mut asked) = (Vec::new(), Vec::new());
        let (far, mut proxies) = (mesh.far_rows(), Vec::new());
        let mesh_scale = mesh
            .parts
            .iter()
            .map(|part| part.bounds.0.max_abs().max(part.bounds.1.max_abs()))
            .fold(0.0, f64::max);
        let block_rows = PART_BLOCK_CHUNKS * self.gpu.chunk_rows;
        for first in (0..rows).step_by(block_rows) {
            let range = first..rows.min(first + block_rows);
            let block = points.f64_rows(range.clone(), &mut chunk, &mut scratch)?;
            let walked = far.walked_from(block, sign, &mut proxies);
            best.clear();
            best.resize(block.len(), GpuHit::default());
            first_part.clear();
            first_part.par_extend(walked.par_iter().map(|&p| nearest_box(&mesh.parts, p)));
            for (k, part) in mesh.parts.iter().enumerate() {
                asked.clear();
                asked.extend((0..block.len() as u32).filter(|&i| first_part[i as usize] == k));
                self.ask_part(mesh, part, walked, &asked, &mut |i, hit| best[i] = hit)?;
            }
            for (k, part) in mesh.parts.iter().enumerate() {
                asked.clear();
                asked.extend((0..block.len() as u32).filter(|&i| {
                    let i = i as usize;
                    first_part[i] != k
                        && (self.gpu.every_part
                            || may_hold_nearer(part.bounds, walked[i], &best[i], mesh_scale))
                }));
                self.ask_part(mesh, part, walked, &asked, &mut |i, hit| {
                    keep_nearer(&mut best[i], hit)
                })?;
            }
            if sign == Sign::Winding {
                if mesh.winding_on_device() {
                    self.mark_inside_on_device(mesh, block, &mut best)?;
                } else {
                    mesh.mark_inside_on_host(block, &mut best);
                }
            }
            mesh.finish(block, &mut best, sign);
            // Whole hits are already their packed rows; fewer fields are packed once.
            if fields == Fields::all(Family::Hits) {
                sink.take(
                    range.start,
                    PackedRows::new(fields, bytemuck::cast_slice(&best)),
                )?;
            } else {
                pack_hits(fields, &best, &mut packed);
                sink.take(range.start, PackedRows::new(fields, &packed))?;
            }
        }
        Ok(())
    }

    /// Add every part's winding number at rows `rows` of `block` (coarse, or `fine`) to
    /// `total`, walked on the device over the part's clusters.
    pub(super) fn add_part_winding_numbers(
        &self,
        mesh: &GpuMesh,
        block: &[[f64; 3]],
        rows: &[u32],
        fine: bool,
        total: &mut [f64],
    ) -> Result<()> {
        use crate::fields::DISTANCE;
        if rows.is_empty() {
            return Ok(());
        }
        let fields = Fields::from_bits(Family::Hits, DISTANCE);
        for part in &mesh.parts {
            let mut source = |range: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
                let points = rows[range].iter().map(|&i| block[i as usize]);
                write_query_points_iter(points, mesh.offset, out);
                Ok(())
            };
            let mut add = |at: usize, answers: PackedRows<'_>| {
                for (&i, &w) in rows[at..].iter().zip(answers.words()) {
                    total[i as usize] += f32::from_bits(w) as f64;
                }
                Ok(())
            };
            let job = crate::gpu::plan::Job::WindingNumbers {
                scene: &part.scene,
                fine,
            };
            let plan = job.plan(&self.gpu, fields, crate::Mode::Surface)?;
            self.run(&plan, rows.len(), Inputs::points(&mut source), &mut add)?;
        }
        Ok(())
    }

    /// Rows `asked` of `block` answered by `part`, unsigned, with every field: `take` gets
    /// each answer with its row in the block, its triangle index the mesh's.
    pub(super) fn ask_part(
        &self,
        mesh: &GpuMesh,
        part: &MeshPart,
        block: &[[f64; 3]],
        asked: &[u32],
        take: &mut dyn FnMut(usize, GpuHit),
    ) -> Result<()> {
        if asked.is_empty() {
            return Ok(());
        }
        let mut source = |rows: std::ops::Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            let points = asked[rows].iter().map(|&i| block[i as usize]);
            write_query_points_iter(points, mesh.offset, out);
            Ok(())
        };
        let mut keep = |at: usize, answers: PackedRows<'_>| {
            let hits = answers.as_hits().expect("every hit field");
            for (&i, &hit) in asked[at..].iter().zip(hits) {
                let mut hit = hit;
                if hit.shape >= 0 && !part.triangles.is_empty() {
                    hit.shape = part.triangles[hit.shape as usize] as i32;
                }
                take(i as usize, hit);
            }
            Ok(())
        };
        let job = crate::gpu::plan::Job::Nearest {
            scene: &part.scene,
            sign: DeviceSign::None,
            grid: None,
        };
        let plan = job.plan(&self.gpu, Fields::all(Family::Hits), crate::Mode::Surface)?;
        self.run(&plan, asked.len(), Inputs::points(&mut source), &mut keep)
    }
}
