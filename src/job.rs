//! File-to-file jobs behind the CLI: read inputs, stream them through the engine, write the
//! output only when everything succeeded.

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Mode;
use crate::error::{Error, Result};
use crate::gpu::{Engine, GpuHit, RowSource};
use crate::io::{OutputFile, PointFile, load_scene};

/// What a finished job reports in its summary line.
#[derive(Clone, Debug)]
pub struct Summary {
    pub rows: usize,
    pub non_finite_rows: usize,
    pub elapsed: Duration,
    pub adapter: String,
}

impl Summary {
    pub fn line(&self, what: &str) -> String {
        let secs = self.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.rows as f64 / secs
        } else {
            0.0
        };
        format!(
            "{} {what} in {secs:.3} s ({:.2} M/s) on {}; {} non-finite row(s)",
            self.rows,
            rate / 1e6,
            self.adapter,
            self.non_finite_rows
        )
    }
}

/// `closest query --shapes S --points P [--paired] --out O`.
pub struct QueryJob<'a> {
    pub shapes: &'a Path,
    pub points: &'a Path,
    pub out: &'a Path,
    pub mode: Mode,
    pub paired: bool,
}

/// Points read from a file chunk by chunk and written to the GPU as f32.
fn file_points(file: &mut PointFile) -> impl RowSource + '_ {
    let mut rows = Vec::new();
    move |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
        file.read_rows(range, &mut rows)?;
        let (values, _) = out.into_chunks::<4>();
        values.write_iter(rows.iter().flatten().map(|&x| (x as f32).to_le_bytes()));
        Ok(())
    }
}

/// Run a query job. `progress` is told how many rows are done after each chunk.
pub fn run_query(
    job: &QueryJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let shapes = load_scene(job.shapes)?;
    let mut points = PointFile::open(job.points)?;
    let rows = points.len();
    if job.paired && shapes.len() != rows {
        return Err(Error::Usage(format!(
            "--paired needs one shape per point: {} has {} shapes, {} has {rows} points",
            job.shapes.display(),
            shapes.len(),
            job.points.display()
        )));
    }
    if !job.paired && shapes.is_empty() && rows > 0 {
        return Err(Error::BadFile {
            file: job.shapes.display().to_string(),
            problem: "the scene has no shapes".into(),
        });
    }
    let output = OutputFile::create(job.out)?;
    let engine = engine_for()?;
    let started = Instant::now();
    let mut hits = vec![GpuHit::default(); rows];
    let mut sink = |first: usize, chunk: &[GpuHit]| {
        hits[first..first + chunk.len()].copy_from_slice(chunk);
        progress(first + chunk.len(), rows);
        Ok(())
    };
    let mut source = file_points(&mut points);
    if job.paired {
        engine.query_paired_stream(&shapes, &mut source, job.mode, &mut sink)?;
    } else {
        let scene = engine.upload_scene(&shapes)?;
        engine.query_scene_stream(&scene, rows, &mut source, job.mode, &mut sink)?;
    }
    let elapsed = started.elapsed();
    output.commit(&hits)?;
    Ok(Summary {
        rows,
        non_finite_rows: hits.iter().filter(|h| h.shape < 0).count(),
        elapsed,
        adapter: engine.describe(),
    })
}
