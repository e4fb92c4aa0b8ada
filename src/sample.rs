//! Training samples of a mesh (SPEC §8, `closest sample`): surface samples area-weighted, near
//! samples (surface samples moved by an isotropic normal deviate of each sigma) and uniform
//! samples in the padded box. Every sample is a pure function of the seed, its kind and its
//! index (a counter-based generator), so a run is the same on any adapter, in any chunking,
//! on any number of threads; only the device's distances differ by its f32 rounding.

use crate::error::{Error, Result};
use crate::math::{DVec3, SplitMix64};
use crate::mesh::{Mesh, face_normal};

/// A sample's kind, as the `kind` column codes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SampleKind {
    Surface = 0,
    Near = 1,
    Uniform = 2,
}

/// What `closest sample` asks.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleSpec {
    pub surface: usize,
    /// Near samples in all, split evenly among the sigmas (the first ones take the rest).
    pub near: usize,
    pub sigmas: Vec<f64>,
    pub uniform: usize,
    /// The uniform samples' box: the mesh's box grown by this fraction of its largest extent.
    pub pad: f64,
    pub seed: u64,
}

impl SampleSpec {
    /// `count` area-weighted surface samples only (`closest distance --samples`).
    pub fn surface(count: usize, seed: u64) -> SampleSpec {
        SampleSpec {
            surface: count,
            near: 0,
            sigmas: Vec::new(),
            uniform: 0,
            pad: 0.0,
            seed,
        }
    }

    /// The number of samples, after checking counts, sigmas and pad; bad values are usage
    /// errors naming the flag and the value.
    pub fn total(&self) -> Result<usize> {
        if let Some(s) = self.sigmas.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(Error::Usage(format!(
                "--sigma takes finite widths > 0, got {s}"
            )));
        }
        if self.near > 0 && self.sigmas.is_empty() {
            return Err(Error::Usage(
                "--near needs --sigma: the width of the normal deviates that move surface \
                 samples off the surface (one, or several, each taking an equal share)"
                    .into(),
            ));
        }
        if !(self.pad.is_finite() && self.pad >= 0.0) {
            return Err(Error::Usage(format!(
                "--pad must be a finite fraction ≥ 0, got {}",
                self.pad
            )));
        }
        let total = self
            .surface
            .checked_add(self.near)
            .and_then(|n| n.checked_add(self.uniform))
            .filter(|&n| n <= u32::MAX as usize)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "--surface {} --near {} --uniform {} ask for more than 2^32 samples",
                    self.surface, self.near, self.uniform
                ))
            })?;
        if total == 0 {
            return Err(Error::Usage(
                "ask for samples: --surface N, --near N (with --sigma) or --uniform N".into(),
            ));
        }
        Ok(total)
    }

    /// Sample `row`'s kind, its index among that kind's, and for a near sample its sigma.
    fn locate(&self, row: usize) -> (SampleKind, usize, f64) {
        if row < self.surface {
            return (SampleKind::Surface, row, 0.0);
        }
        let near_row = row - self.surface;
        if near_row < self.near {
            let groups = self.sigmas.len();
            let (base, extra) = (self.near / groups, self.near % groups);
            // Groups 0..extra hold base + 1 samples, the rest base.
            let big = extra * (base + 1);
            let group = if near_row < big {
                near_row / (base + 1)
            } else {
                extra + (near_row - big) / base.max(1)
            };
            return (SampleKind::Near, near_row, self.sigmas[group]);
        }
        (SampleKind::Uniform, near_row - self.near, 0.0)
    }
}

impl SplitMix64 {
    /// The generator of one sample: seeded by the run's seed, the kind and the index.
    fn for_sample(seed: u64, kind: SampleKind, index: usize) -> SplitMix64 {
        let mut mix = SplitMix64(seed ^ ((kind as u64) << 56));
        let key = mix.next() ^ index as u64;
        SplitMix64(SplitMix64(key).next())
    }
}

/// Rows of samples as columns ([`Sampler::columns`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleColumns {
    pub points: Vec<[f64; 3]>,
    pub kinds: Vec<SampleKind>,
    /// The face normals of the surface rows, which come first: row k's, for k below its
    /// length.
    pub face_normals: Vec<[f64; 3]>,
}

/// A mesh's samples, made row by row.
pub struct Sampler<'m> {
    mesh: &'m Mesh,
    spec: SampleSpec,
    /// Running sums of the triangles' areas.
    cumulative_area: Vec<f64>,
    /// For each of as many equal slices of the total area as there are triangles, how many
    /// running sums lie at or below the slice's start: a surface sample's triangle is searched
    /// for within its slice, not the whole list (a search of 10^5 sums missed the cache at
    /// every step).
    area_guide: Vec<u32>,
    box_lo: DVec3,
    box_size: DVec3,
}

/// One sample: where it is, its kind, and for a surface sample its face normal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub point: [f64; 3],
    pub kind: SampleKind,
    pub face_normal: Option<[f64; 3]>,
}

impl<'m> Sampler<'m> {
    /// The mesh it samples (a host copy kept beside an upload that may release its own).
    pub fn mesh(&self) -> &'m Mesh {
        self.mesh
    }

    pub fn new(mesh: &'m Mesh, spec: SampleSpec) -> Result<Sampler<'m>> {
        spec.total()?;
        let mut sum = 0.0;
        let cumulative_area: Vec<f64> = (0..mesh.triangles.len())
            .map(|t| {
                let [a, b, c] = mesh.corners(t);
                sum += 0.5 * (b - a).cross(c - a).length();
                sum
            })
            .collect();
        if (spec.surface > 0 || spec.near > 0) && !(sum > 0.0 && sum.is_finite()) {
            return Err(Error::Usage(format!(
                "the mesh's triangles have no area ({sum}): nothing to sample on its surface"
            )));
        }
        // A normal deviate here is at most sqrt(-2 ln 2^-53) ≈ 8.6 sigmas (`SplitMix64::normal`).
        if spec.near > 0 {
            let (lo, hi) = mesh.bounds();
            let widest = spec.sigmas.iter().fold(0.0, |w: f64, &s| w.max(s));
            let reach = lo.max_abs().max(hi.max_abs()) + MAX_NORMAL_DEVIATE * widest * 3f64.sqrt();
            if crate::semantics::beyond_made_point_limit(reach) {
                return Err(Error::Usage(format!(
                    "--sigma {widest:?} may move near samples {reach:e} from the origin, beyond \
                     the {:e} that points made in f32 may reach; give a smaller --sigma",
                    crate::semantics::MADE_POINT_LIMIT
                )));
            }
        }
        let area_guide = area_guide(&cumulative_area);
        // Uniform samples fill the padded box, which must have a volume (a flat one would
        // put them all on one plane); without them no box is needed.
        let pad = if spec.uniform > 0 {
            let remedies = [
                "give --pad > 0",
                "ask no --uniform samples of a mesh that is a point",
            ];
            mesh.pad(spec.pad, remedies)?
        } else {
            0.0
        };
        let (lo, hi) = mesh.bounds();
        let pad = DVec3::new(pad, pad, pad);
        Ok(Sampler {
            mesh,
            spec,
            cumulative_area,
            area_guide,
            box_lo: lo - pad,
            box_size: (hi - lo) + pad * 2.0,
        })
    }

    pub fn len(&self) -> usize {
        self.spec.surface + self.spec.near + self.spec.uniform
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `row` (surface samples first, then near ones sigma by sigma, then uniform).
    pub fn sample(&self, row: usize) -> Sample {
        let mut one = [UNSET_SAMPLE];
        self.fill_batch(row, &mut one, true);
        one[0]
    }

    /// The points of samples `rows`, in order, on every core, after those `out` holds:
    /// [`Sampler::sample`]'s points, without the face normals a distance job never reads.
    pub fn points_into(&self, rows: std::ops::Range<usize>, out: &mut Vec<[f64; 3]>) {
        use rayon::prelude::*;
        let first = out.len();
        out.resize(first + rows.len(), [0.0; 3]);
        out[first..]
            .par_chunks_mut(SAMPLE_BATCH)
            .enumerate()
            .for_each(|(batch, points)| {
                let mut samples = [UNSET_SAMPLE; SAMPLE_BATCH];
                let samples = &mut samples[..points.len()];
                self.fill_batch(rows.start + batch * SAMPLE_BATCH, samples, false);
                for (point, sample) in points.iter_mut().zip(samples.iter()) {
                    *point = sample.point;
                }
            });
    }

    /// Samples `rows`, in order, on every core, as columns: [`Sampler::sample`] of each.
    pub fn columns(&self, rows: std::ops::Range<usize>) -> SampleColumns {
        use rayon::prelude::*;
        // Surface rows come first (`SampleSpec::locate`): the only ones with a face normal.
        let surface = rows.end.min(self.spec.surface).max(rows.start) - rows.start;
        let mut points = vec![[0.0; 3]; rows.len()];
        let mut kinds = vec![SampleKind::Uniform; rows.len()];
        let mut face_normals = vec![[0.0; 3]; surface];
        let (surface_points, other_points) = points.split_at_mut(surface);
        let (surface_kinds, other_kinds) = kinds.split_at_mut(surface);
        // Each batch made on the stack and scattered into the columns: a column of `Sample`s
        // was 64 bytes a row of fresh memory, its page faults a tenth of a call's time.
        let fill = |first: usize,
                    points: &mut [[f64; 3]],
                    kinds: &mut [SampleKind],
                    normals: Option<&mut [[f64; 3]]>| {
            let mut batch = [UNSET_SAMPLE; SAMPLE_BATCH];
            let batch = &mut batch[..points.len()];
            self.fill_batch(first, batch, normals.is_some());
            for (k, sample) in batch.iter().enumerate() {
                (points[k], kinds[k]) = (sample.point, sample.kind);
            }
            for (normal, sample) in normals.into_iter().flatten().zip(batch.iter()) {
                *normal = sample.face_normal.unwrap_or([0.0; 3]);
            }
        };
        let start = rows.start;
        surface_points
            .par_chunks_mut(SAMPLE_BATCH)
            .zip(surface_kinds.par_chunks_mut(SAMPLE_BATCH))
            .zip(face_normals.par_chunks_mut(SAMPLE_BATCH))
            .enumerate()
            .for_each(|(batch, ((points, kinds), normals))| {
                fill(start + batch * SAMPLE_BATCH, points, kinds, Some(normals))
            });
        other_points
            .par_chunks_mut(SAMPLE_BATCH)
            .zip(other_kinds.par_chunks_mut(SAMPLE_BATCH))
            .enumerate()
            .for_each(|(batch, (points, kinds))| {
                fill(start + surface + batch * SAMPLE_BATCH, points, kinds, None)
            });
        SampleColumns {
            points,
            kinds,
            face_normals,
        }
    }

    /// Samples `first ..` into `out` (at most `SAMPLE_BATCH` of them), in steps over the whole
    /// batch: each step's loads (the area guide, the running sums, the triangle, its corners)
    /// are independent across rows, so the processor overlaps their cache misses, where a row
    /// at a time waited for each (igea's 250,000 samples: 90–120 ms, four misses a row).
    /// Surface samples' face normals are made only `with_normals`.
    fn fill_batch(&self, first: usize, out: &mut [Sample], with_normals: bool) {
        debug_assert!(out.len() <= SAMPLE_BATCH);
        let total = *self.cumulative_area.last().unwrap_or(&0.0);
        // The rows on the surface (uniform ones are made at once): each one's generator,
        // sigma, and where it lies along the running area.
        let mut surface_rows = [0; SAMPLE_BATCH];
        let mut surface_count = 0;
        let mut rngs = [const { SplitMix64(0) }; SAMPLE_BATCH];
        let mut sigmas = [0.0; SAMPLE_BATCH];
        let mut targets = [0.0; SAMPLE_BATCH];
        for (k, sample) in out.iter_mut().enumerate() {
            let (kind, index, sigma) = self.spec.locate(first + k);
            let mut rng = SplitMix64::for_sample(self.spec.seed, kind, index);
            if kind == SampleKind::Uniform {
                let u = DVec3::new(rng.unit(), rng.unit(), rng.unit());
                let p = self.box_lo
                    + DVec3::new(
                        u.x * self.box_size.x,
                        u.y * self.box_size.y,
                        u.z * self.box_size.z,
                    );
                *sample = Sample {
                    point: p.to_array(),
                    kind,
                    face_normal: None,
                };
                continue;
            }
            // A point uniform over the surface: a triangle by area, then a point in it.
            sample.kind = kind;
            targets[k] = rng.unit() * total;
            (rngs[k], sigmas[k]) = (rng, sigma);
            surface_rows[surface_count] = k;
            surface_count += 1;
        }
        let surface_rows = &surface_rows[..surface_count];
        let mut spans = [(0, 0); SAMPLE_BATCH];
        for &k in surface_rows {
            spans[k] = guide_span(&self.cumulative_area, &self.area_guide, targets[k]);
        }
        let mut triangles = [0; SAMPLE_BATCH];
        for &k in surface_rows {
            triangles[k] = span_triangle(&self.cumulative_area, spans[k], targets[k]);
        }
        let mut corner_ids = [[0; 3]; SAMPLE_BATCH];
        for &k in surface_rows {
            corner_ids[k] = self.mesh.triangles[triangles[k]];
        }
        for &k in surface_rows {
            let [a, b, c] = corner_ids[k].map(|v| self.mesh.vertices.get(v as usize));
            let rng = &mut rngs[k];
            let (r1, r2) = (rng.unit().sqrt(), rng.unit());
            let p = a * (1.0 - r1) + b * (r1 * (1.0 - r2)) + c * (r1 * r2);
            let sample = &mut out[k];
            if sample.kind == SampleKind::Surface {
                sample.point = p.to_array();
                if with_normals {
                    sample.face_normal = Some(face_normal(self.mesh, triangles[k]).to_array());
                }
            } else {
                let moved = p + DVec3::new(rng.normal(), rng.normal(), rng.normal()) * sigmas[k];
                sample.point = moved.to_array();
            }
        }
    }
}

/// The largest normal deviate `SplitMix64::normal` makes: sqrt(-2 ln 2^-53), rounded up.
const MAX_NORMAL_DEVIATE: f64 = 8.6;

/// Rows [`Sampler::columns`] makes in step.
const SAMPLE_BATCH: usize = 32;

/// A slot for a sample not yet made.
const UNSET_SAMPLE: Sample = Sample {
    point: [0.0; 3],
    kind: SampleKind::Uniform,
    face_normal: None,
};

/// Where slice `slice` of `slices` equal slices of `total` starts.
fn slice_start(total: f64, slice: usize, slices: usize) -> f64 {
    total * (slice as f64 / slices as f64)
}

/// The triangle whose span of the running area `sums` holds `target` (the first sum above it;
/// the last triangle for the total itself), found within its slice of `guide`.
#[cfg(test)]
fn triangle_at(sums: &[f64], guide: &[u32], target: f64) -> usize {
    span_triangle(sums, guide_span(sums, guide, target), target)
}

/// The running sums that may first pass `target`: those of the slice holding it.
fn guide_span(sums: &[f64], guide: &[u32], target: f64) -> (usize, usize) {
    let (slices, total) = (sums.len(), *sums.last().unwrap_or(&0.0));
    // The slice holding `target`: the sums at or below its start come before every sum that
    // can pass `target`, those above its end after.
    let mut slice = ((target / total * slices as f64) as usize).min(slices - 1);
    while slice > 0 && slice_start(total, slice, slices) > target {
        slice -= 1;
    }
    while slice + 1 < slices && slice_start(total, slice + 1, slices) <= target {
        slice += 1;
    }
    (guide[slice] as usize, guide[slice + 1] as usize)
}

/// [`triangle_at`] within the span `guide_span` found.
fn span_triangle(sums: &[f64], (first, end): (usize, usize), target: f64) -> usize {
    (first + sums[first..end].partition_point(|&s| s <= target)).min(sums.len() - 1)
}

/// `Sampler::area_guide` of the running sums `sums`: one entry a slice and one past the last.
fn area_guide(sums: &[f64]) -> Vec<u32> {
    let (slices, total) = (sums.len(), *sums.last().unwrap_or(&0.0));
    let mut below = 0;
    (0..=slices)
        .map(|slice| {
            let start = slice_start(total, slice, slices);
            while below < slices && sums[below] <= start {
                below += 1;
            }
            below as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SampleSpec {
        SampleSpec {
            surface: 5,
            near: 7,
            sigmas: vec![0.1, 0.01],
            uniform: 3,
            pad: 0.1,
            seed: 7,
        }
    }

    #[test]
    fn rows_are_laid_out_surface_near_by_sigma_uniform() {
        let s = spec();
        let kinds: Vec<(SampleKind, usize, f64)> = (0..15).map(|r| s.locate(r)).collect();
        assert!(kinds[..5].iter().all(|k| k.0 == SampleKind::Surface));
        // 7 near samples over two sigmas: 4 then 3.
        let sigmas: Vec<f64> = kinds[5..12].iter().map(|k| k.2).collect();
        assert_eq!(sigmas, [0.1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01]);
        assert!(kinds[12..].iter().all(|k| k.0 == SampleKind::Uniform));
        assert_eq!(kinds[14].1, 2);
    }

    #[test]
    fn the_guided_search_finds_the_triangle_the_whole_search_finds() {
        // Areas of every scale, zero areas (equal sums) among them, in runs.
        let areas: Vec<f64> = (0..2000)
            .map(|t: u64| match t % 7 {
                0 | 1 => 0.0,
                2 => 1e-9 * (t + 1) as f64,
                3 => 1e3,
                _ => ((t * 2654435761) % 1000) as f64 / 997.0,
            })
            .collect();
        let sums: Vec<f64> = areas
            .iter()
            .scan(0.0, |sum, a| {
                *sum += a;
                Some(*sum)
            })
            .collect();
        let guide = area_guide(&sums);
        let total = *sums.last().unwrap();
        let mut targets: Vec<f64> = sums
            .iter()
            .flat_map(|&s| [s, s.next_down(), s.next_up()])
            .chain((0..5000).map(|k| total * (k as f64 / 5000.0)))
            .chain((0..=sums.len()).map(|k| slice_start(total, k, sums.len())))
            .filter(|&x| (0.0..=total).contains(&x))
            .collect();
        targets.extend([0.0, total, total.next_down()]);
        for target in targets {
            let whole = sums.partition_point(|&s| s <= target).min(sums.len() - 1);
            assert_eq!(triangle_at(&sums, &guide, target), whole, "target {target}");
        }
    }

    #[test]
    fn bad_specs_name_the_flag_and_value() {
        let bad = |change: &dyn Fn(&mut SampleSpec), needle: &str| {
            let mut s = spec();
            change(&mut s);
            let message = s.total().unwrap_err().to_string();
            assert!(message.contains(needle), "{message}");
        };
        bad(&|s| s.sigmas = vec![0.1, 0.0], "--sigma");
        bad(&|s| s.sigmas = vec![f64::NAN], "--sigma");
        bad(&|s| s.sigmas.clear(), "--near needs --sigma");
        bad(&|s| s.surface = usize::MAX, "2^32");
        bad(&|s| s.pad = -1.0, "--pad");
        bad(
            &|s| {
                s.surface = 0;
                s.near = 0;
                s.uniform = 0
            },
            "ask for samples",
        );
    }
}
