//! File-to-file jobs behind the CLI: read inputs, stream them through the engine, write the
//! output only when everything succeeded.

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Mode;
use crate::contacts::{Contact, check_radius};
use crate::error::{Error, Result};
use crate::gpu::{Engine, GpuHit, RowSource};
use crate::gpu::{GpuSegmentHit, GpuShape};
use crate::io::points::{SEGMENTS, SPHERES};
use crate::io::{
    ColumnSpec, OutputFile, PointFile, RowFile, Values, hit_columns, hit_values, load_scene,
};
use crate::math::DVec3;
use crate::mesh::{Sign, load_mesh};

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

/// `closest query --mesh M --points P [--sign S] --out O`.
pub struct MeshQueryJob<'a> {
    pub mesh: &'a Path,
    pub points: &'a Path,
    pub out: &'a Path,
    pub sign: Sign,
}

/// Run a mesh query job, streamed like [`run_query`]; the shape index is the triangle index.
pub fn run_mesh_query(
    job: &MeshQueryJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let mesh = load_mesh(job.mesh)?;
    let mut points = PointFile::open(job.points)?;
    let rows = points.len();
    let mut output = OutputFile::create(job.out, rows, &hit_columns())?;
    let engine = engine_for()?;
    let started = Instant::now();
    let mesh = engine.upload_mesh(mesh)?;
    let mut non_finite_rows = 0;
    engine.query_mesh_stream(
        &mesh,
        rows,
        &mut |range, chunk| points.read_rows(range, chunk),
        job.sign,
        &mut |first, hits| {
            non_finite_rows += hits.iter().filter(|h| h.shape < 0).count();
            output.append(hits.len(), &hit_values(hits))?;
            progress(first + hits.len(), rows);
            Ok(())
        },
    )?;
    output.commit()?;
    Ok(Summary {
        rows,
        non_finite_rows,
        elapsed: started.elapsed(),
        adapter: engine.describe(),
    })
}

/// Run a query job: points are read, queried and written chunk by chunk, so memory stays
/// bounded however many there are. `progress` is told how many rows are done after each chunk.
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
    let mut output = OutputFile::create(job.out, rows, &hit_columns())?;
    let engine = engine_for()?;
    let started = Instant::now();
    let mut non_finite_rows = 0;
    let mut sink = |first: usize, chunk: &[GpuHit]| {
        non_finite_rows += chunk.iter().filter(|h| h.shape < 0).count();
        output.append(chunk.len(), &hit_values(chunk))?;
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
    output.commit()?;
    Ok(Summary {
        rows,
        non_finite_rows,
        elapsed: started.elapsed(),
        adapter: engine.describe(),
    })
}

/// `closest segments --a A --b B --out O`: closest points between segment pairs.
pub fn run_segments(
    a_path: &Path,
    b_path: &Path,
    out: &Path,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let mut a = RowFile::open_as(a_path, SEGMENTS)?;
    let mut b = RowFile::open_as(b_path, SEGMENTS)?;
    let rows = a.len();
    if b.len() != rows {
        return Err(Error::Usage(format!(
            "{} has {rows} segments but {} has {}: segment i of A pairs with segment i of B",
            a_path.display(),
            b_path.display(),
            b.len()
        )));
    }
    let columns = [
        ColumnSpec::vector("point_a"),
        ColumnSpec::vector("point_b"),
        ColumnSpec::scalar("s"),
        ColumnSpec::scalar("t"),
        ColumnSpec::scalar("distance"),
    ];
    let mut output = OutputFile::create(out, rows, &columns)?;
    let engine = engine_for()?;
    let started = Instant::now();
    let (mut rows_a, mut rows_b) = (Vec::new(), Vec::new());
    let mut source = |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
        a.read_rows(range.clone(), &mut rows_a)?;
        b.read_rows(range, &mut rows_b)?;
        let segment = |r: &[f64; 6]| [DVec3::new(r[0], r[1], r[2]), DVec3::new(r[3], r[4], r[5])];
        let (records, _) = out.into_chunks::<{ std::mem::size_of::<GpuShape>() }>();
        records.write_iter(rows_a.iter().zip(&rows_b).map(|(ra, rb)| {
            bytemuck::cast::<GpuShape, [u8; 96]>(GpuShape::from_segment_pair(
                segment(ra),
                segment(rb),
            ))
        }));
        Ok(())
    };
    let mut non_finite_rows = 0;
    engine.segment_pairs_stream(rows, &mut source, &mut |first, hits: &[GpuSegmentHit]| {
        non_finite_rows += hits.iter().filter(|h| h.distance.is_nan()).count();
        output.append(
            hits.len(),
            &[
                Values::vector(|i| hits[i].point_a),
                Values::vector(|i| hits[i].point_b),
                Values::scalar(|i| hits[i].s),
                Values::scalar(|i| hits[i].t),
                Values::scalar(|i| hits[i].distance),
            ],
        )?;
        progress(first + hits.len(), rows);
        Ok(())
    })?;
    output.commit()?;
    Ok(Summary {
        rows,
        non_finite_rows,
        elapsed: started.elapsed(),
        adapter: engine.describe(),
    })
}

/// `closest contacts --shapes S --spheres P --out O`: sphere contacts with a scene, streamed
/// like [`run_query`].
pub fn run_contacts(
    shapes_path: &Path,
    spheres_path: &Path,
    out: &Path,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let shapes = load_scene(shapes_path)?;
    // Two readers: centres go to the device when a chunk is filled, radii are read again
    // when its hits come back.
    let mut centres = RowFile::open_as(spheres_path, SPHERES)?;
    let mut radii = RowFile::open_as(spheres_path, SPHERES)?;
    let rows = centres.len();
    if shapes.is_empty() && rows > 0 {
        return Err(Error::BadFile {
            file: shapes_path.display().to_string(),
            problem: "the scene has no shapes".into(),
        });
    }
    let columns = [
        ColumnSpec::vector("point"),
        ColumnSpec::scalar("depth"),
        ColumnSpec::vector("normal"),
        ColumnSpec::index("shape"),
    ];
    let mut output = OutputFile::create(out, rows, &columns)?;
    let engine = engine_for()?;
    let started = Instant::now();
    let scene = engine.upload_scene(&shapes)?;
    let file = spheres_path.display().to_string();
    let mut spheres = Vec::new();
    let mut source = |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
        let first = range.start;
        centres.read_rows(range, &mut spheres)?;
        for (k, s) in spheres.iter().enumerate() {
            // Rows are numbered from 0 as in the array.
            check_radius(first + k, s[3], &file)?;
        }
        let (values, _) = out.into_chunks::<4>();
        values.write_iter(
            spheres
                .iter()
                .flat_map(|s| [s[0], s[1], s[2]])
                .map(|x| (x as f32).to_le_bytes()),
        );
        Ok(())
    };
    let mut non_finite_rows = 0;
    let (mut chunk_spheres, mut contacts) = (Vec::new(), Vec::new());
    let mut sink = |first: usize, hits: &[GpuHit]| {
        radii.read_rows(first..first + hits.len(), &mut chunk_spheres)?;
        contacts.clear();
        contacts.extend(
            hits.iter()
                .zip(&chunk_spheres)
                .map(|(hit, s)| Contact::from_hit(hit, s[3] as f32)),
        );
        non_finite_rows += contacts.iter().filter(|c| c.shape < 0).count();
        output.append(
            hits.len(),
            &[
                Values::vector(|i| contacts[i].point),
                Values::scalar(|i| contacts[i].depth),
                Values::vector(|i| contacts[i].normal),
                Values::index(|i| contacts[i].shape),
            ],
        )?;
        progress(first + hits.len(), rows);
        Ok(())
    };
    engine.query_scene_stream(&scene, rows, &mut source, Mode::Surface, &mut sink)?;
    output.commit()?;
    Ok(Summary {
        rows,
        non_finite_rows,
        elapsed: started.elapsed(),
        adapter: engine.describe(),
    })
}

/// Where an SDF grid lies: padded around the mesh, or given outright.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GridRegion {
    /// The mesh's bounding box grown on each side by this fraction of its largest extent.
    Pad(f64),
    /// `[x0, y0, z0, x1, y1, z1]`.
    Bounds([f64; 6]),
}

/// A regular grid, corners inclusive: sample (i, j, k) lies at `origin + (i, j, k) * spacing`,
/// row `(i * ny + j) * nz + k` (C order of an (nx, ny, nz) array).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub origin: DVec3,
    pub spacing: DVec3,
    pub res: [usize; 3],
}

impl Grid {
    /// The grid over `region` of `mesh` with `res` samples an axis (each at least 2).
    pub fn new(mesh: &crate::mesh::Mesh, res: [usize; 3], region: GridRegion) -> Result<Grid> {
        if res.iter().any(|&n| n < 2) {
            return Err(Error::Usage(format!(
                "--res needs at least 2 samples an axis (corners inclusive), got {res:?}"
            )));
        }
        let samples = res.iter().try_fold(1usize, |n, &r| n.checked_mul(r));
        if samples.is_none_or(|n| n > u32::MAX as usize) {
            return Err(Error::Usage(format!(
                "--res {res:?} asks for more than 2^32 samples"
            )));
        }
        let (lo, hi) = match region {
            GridRegion::Pad(fraction) => {
                if !(fraction.is_finite() && fraction >= 0.0) {
                    return Err(Error::Usage(format!(
                        "--pad must be a finite fraction ≥ 0, got {fraction}"
                    )));
                }
                let (lo, hi) = mesh.bounds();
                let extent = hi - lo;
                let pad = extent.x.max(extent.y).max(extent.z) * fraction;
                let pad = DVec3::new(pad, pad, pad);
                (lo - pad, hi + pad)
            }
            GridRegion::Bounds(b) => {
                let (lo, hi) = (DVec3::new(b[0], b[1], b[2]), DVec3::new(b[3], b[4], b[5]));
                if !(lo.is_finite() && hi.is_finite() && lo.x < hi.x && lo.y < hi.y && lo.z < hi.z)
                {
                    return Err(Error::Usage(format!(
                        "--bounds must be finite x0,y0,z0,x1,y1,z1 with x0 < x1, y0 < y1, \
                         z0 < z1; got {b:?}"
                    )));
                }
                (lo, hi)
            }
        };
        let steps = |k: usize| (res[k] - 1) as f64;
        Ok(Grid {
            origin: lo,
            spacing: DVec3::new(
                (hi.x - lo.x) / steps(0),
                (hi.y - lo.y) / steps(1),
                (hi.z - lo.z) / steps(2),
            ),
            res,
        })
    }

    pub fn len(&self) -> usize {
        self.res.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of sample `row` (C order).
    pub fn point(&self, row: usize) -> [f64; 3] {
        let [_, ny, nz] = self.res;
        let (i, j, k) = (row / (ny * nz), (row / nz) % ny, row % nz);
        [
            self.origin.x + i as f64 * self.spacing.x,
            self.origin.y + j as f64 * self.spacing.y,
            self.origin.z + k as f64 * self.spacing.z,
        ]
    }
}

/// `closest sdf MESH --res … --out O`: a signed-distance grid, streamed like a query job.
pub struct SdfJob<'a> {
    pub mesh: &'a Path,
    pub res: [usize; 3],
    pub region: GridRegion,
    pub sign: Sign,
    pub out: &'a Path,
}

/// Run an SDF job: samples are generated, queried and written chunk by chunk. `.npz` gets
/// `sdf` (nx, ny, nz) f32, `origin` and `spacing` (3,) f64; `.csv` gets x, y, z, sdf rows.
pub fn run_sdf(
    job: &SdfJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let mesh = load_mesh(job.mesh)?;
    let grid = Grid::new(&mesh, job.res, job.region)?;
    let rows = grid.len();
    let csv = OutputFile::is_csv(job.out);
    let columns = if csv {
        vec![
            ColumnSpec::scalar("x"),
            ColumnSpec::scalar("y"),
            ColumnSpec::scalar("z"),
            ColumnSpec::scalar("sdf"),
        ]
    } else {
        vec![ColumnSpec {
            shape: Some(job.res.to_vec()),
            ..ColumnSpec::scalar("sdf")
        }]
    };
    let v = |d: DVec3| vec![d.x, d.y, d.z];
    let constants = [("origin", v(grid.origin)), ("spacing", v(grid.spacing))];
    let mut output = OutputFile::create_with_constants(
        job.out,
        rows,
        &columns,
        if csv { &[] } else { &constants },
    )?;
    let engine = engine_for()?;
    let started = Instant::now();
    let mesh = engine.upload_mesh(mesh)?;
    engine.query_mesh_stream(
        &mesh,
        rows,
        &mut |range, chunk| {
            chunk.clear();
            chunk.extend(range.map(|row| grid.point(row)));
            Ok(())
        },
        job.sign,
        &mut |first, hits| {
            let sdf = Values::scalar(|i| hits[i].distance);
            if csv {
                let at = |i: usize, k: usize| grid.point(first + i)[k] as f32;
                output.append(
                    hits.len(),
                    &[
                        Values::scalar(|i| at(i, 0)),
                        Values::scalar(|i| at(i, 1)),
                        Values::scalar(|i| at(i, 2)),
                        sdf,
                    ],
                )?;
            } else {
                output.append(hits.len(), &[sdf])?;
            }
            progress(first + hits.len(), rows);
            Ok(())
        },
    )?;
    output.commit()?;
    Ok(Summary {
        rows,
        non_finite_rows: 0,
        elapsed: started.elapsed(),
        adapter: engine.describe(),
    })
}
