//! `closest distance A B`: how far two meshes deviate from each other (SPEC §9). Each mesh's
//! vertices and `--samples` area-weighted surface samples are answered against the other mesh
//! on the device; the figures are reduced as the chunks come, and only the vertices'
//! deviations (the output arrays) are kept.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{PREVIEW_IS_PNG, load_mesh_timed};
use crate::auto_sign::SignChoice;
use crate::engine::{Engine, MeshDistanceSummary, surface_samples};
use crate::error::{Error, Result};
use crate::io::output::check_target;
use crate::io::{ColumnSpec, Constant, OutputFile, Values};
use crate::mesh::{Mesh, Sign};

/// `closest distance A B [--samples N] [--seed K] [--sign S] [--out X.npz] [--preview P.png]`.
pub struct DistanceJob<'a> {
    pub a: &'a Path,
    pub b: &'a Path,
    pub samples: usize,
    pub seed: u64,
    pub sign: SignChoice,
    pub out: Option<&'a Path>,
    pub preview: Option<&'a Path>,
}

/// What a distance job found, and what it took.
pub struct DistanceReport {
    pub summary: MeshDistanceSummary,
    pub elapsed: Duration,
    pub adapter: String,
}

impl DistanceReport {
    /// The summary's lines: the figures, then the work.
    pub fn lines(&self) -> String {
        let s = &self.summary;
        let (ab, ba) = (&s.a_to_b, &s.b_to_a);
        let signs = match (ab.sign, ba.sign) {
            (Sign::None, Sign::None) => String::new(),
            (to_b, to_a) => format!(
                ", signed (A to B by {}, B to A by {})",
                to_b.name(),
                to_a.name()
            ),
        };
        let points = ab.points + ba.points;
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "Hausdorff {:.6e} (A to B {:.6e}, B to A {:.6e}); Chamfer {:.6e} (means {:.6e} + \
             {:.6e}), squared {:.6e}\n  {} + {} points{} in {:.3} s ({:.2} M/s) on {}{}",
            s.hausdorff(),
            ab.max,
            ba.max,
            s.chamfer(),
            ab.mean,
            ba.mean,
            s.chamfer_squared(),
            ab.points,
            ba.points,
            signs,
            secs,
            points as f64 / secs / 1e6,
            self.adapter,
            match ab.non_finite + ba.non_finite {
                0 => String::new(),
                n => format!("; {n} point(s) without a finite deviation, left out"),
            } + &match ab.unused_vertices + ba.unused_vertices {
                0 => String::new(),
                n => format!("; {n} vertices on no triangle, NaN in the arrays and left out"),
            }
        )
    }
}

/// Run a distance job: both meshes loaded and uploaded, both directions answered, then the
/// `.npz` (`a_to_b` (VA,), `b_to_a` (VB,) f32 and the figures as f64 scalars) and the preview
/// written beside their targets and moved into place.
pub fn run_distance(
    job: &DistanceJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<DistanceReport> {
    if job.out.is_none() && job.preview.is_none() {
        return Err(Error::Usage(
            "distance needs --out X.npz, --preview P.png or both".into(),
        ));
    }
    if let Some(out) = job.out {
        let problem = "distance results (arrays of two lengths and scalars) are an .npz";
        check_target(out, &["npz"], problem)?;
    }
    if let Some(preview) = job.preview {
        check_target(preview, &["png"], PREVIEW_IS_PNG)?;
    }
    let (a, _) = load_mesh_timed(job.a)?;
    let (b, _) = load_mesh_timed(job.b)?;
    for (path, mesh) in [(job.a, &a), (job.b, &b)] {
        check_samples(mesh, job.samples, job.seed).map_err(|e| match e {
            Error::Usage(problem) => Error::BadFile {
                file: path.display().to_string(),
                problem,
            },
            other => other,
        })?;
    }
    let engine = engine_for()?;
    let started = Instant::now();
    let asked = (job.samples, job.seed, job.sign);
    let (summary, deviations, [a, _]) = engine.mesh_distance_uploading((a, b), asked, progress)?;
    let elapsed = started.elapsed();
    let npz = job
        .out
        .map(|out| write_npz(out, &summary, &deviations, job))
        .transpose()?;
    let preview = job
        .preview
        .map(|path| {
            crate::io::output::PendingFile::write(path, |w| {
                crate::deviation_map::write_turntable(
                    a.mesh(),
                    &deviations[0],
                    summary.a_to_b.sign,
                    w,
                )
            })
        })
        .transpose()?;
    if let Some(npz) = npz {
        npz.commit()?;
    }
    if let Some(preview) = preview {
        preview.commit()?;
    }
    Ok(DistanceReport {
        summary,
        elapsed,
        adapter: engine.describe(),
    })
}

/// The output file, written beside `out` (committed by the caller).
fn write_npz(
    out: &Path,
    s: &MeshDistanceSummary,
    deviations: &[Vec<f32>; 2],
    job: &DistanceJob<'_>,
) -> Result<OutputFile> {
    let scalar = Constant::f64_scalar;
    let constants = [
        scalar("hausdorff", s.hausdorff()),
        scalar("hausdorff_a_to_b", s.a_to_b.max),
        scalar("hausdorff_b_to_a", s.b_to_a.max),
        scalar("chamfer", s.chamfer()),
        scalar("chamfer_squared", s.chamfer_squared()),
        scalar("mean_a_to_b", s.a_to_b.mean),
        scalar("mean_b_to_a", s.b_to_a.mean),
        scalar("mean_squared_a_to_b", s.a_to_b.mean_squared),
        scalar("mean_squared_b_to_a", s.b_to_a.mean_squared),
        Constant::i64_scalar("samples", job.samples as i64),
    ];
    let column = |name, len: usize| ColumnSpec {
        shape: Some(vec![len]),
        ..ColumnSpec::scalar(name)
    };
    let columns = [
        column("a_to_b", deviations[0].len()),
        column("b_to_a", deviations[1].len()),
    ];
    let mut output = OutputFile::create_with_constants(out, 0, &columns, &constants)?;
    for (k, values) in deviations.iter().enumerate() {
        output.append_column(k, values.len(), &Values::f32_column(values, 1))?;
    }
    Ok(output)
}

/// A mesh can give `samples` surface samples (it has area, and they are not too many): checked
/// per mesh before the upload, so the refusal names its file.
fn check_samples(mesh: &Mesh, samples: usize, seed: u64) -> Result<()> {
    if samples > 0 {
        crate::sample::Sampler::new(mesh, surface_samples(samples, seed)?)?;
    }
    Ok(())
}
