//! File-to-file jobs behind the CLI: read inputs, stream them through the engine, write the
//! output only when everything succeeded.

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Engine;
use crate::Mode;
use crate::auto_sign::{SignChoice, describe_signs};
use crate::contacts::check_radius;
use crate::engine::GpuMesh;
use crate::engine::{
    MeshQuery, PairedQuery, SceneQuery, SdfGrid, SegmentPairs, SegmentReader, SegmentRows,
    SphereContacts, SphereReader, Spheres,
};
use crate::error::{Error, Result};
use crate::fields::{Family, Fields, PackedRows};
use crate::io::load_mesh;
use crate::io::output::PendingFile;
use crate::io::row_files::{SEGMENTS, SPHERES};
use crate::io::{
    ColumnSpec, OutputFile, PointFile, RowFile, Values, field_columns, field_values, load_scene,
};
use crate::math::DVec3;
use crate::mesh::{Mesh, Sign};
use crate::points::Points;
use crate::sdf::{Grid, GridRegion, write_preview, write_vti};

/// What a finished job reports in its summary line.
#[derive(Clone, Debug)]
pub struct Summary {
    pub rows: usize,
    pub non_finite_rows: usize,
    /// The queries' time, from the first chunk to the committed output.
    pub elapsed: Duration,
    pub adapter: String,
    /// A mesh job's time before its first query, reported apart.
    pub mesh_setup: Option<MeshSetup>,
    /// The device's time in the compute passes of the job's last run, where the adapter has
    /// timestamp queries (`JobTiming::device`).
    pub device: Option<Duration>,
}

/// Where a mesh job's time went before its first query.
#[derive(Clone, Debug, Default)]
pub struct MeshSetup {
    /// Reading and checking the file.
    pub load: Duration,
    /// Hierarchy build and upload, and the sign data the device signs a query job's rows by.
    pub build: Duration,
    /// What the mesh's triangles and hierarchy hold on the device, and whether they are
    /// indexed.
    pub device_bytes: u64,
    pub indexed: bool,
    /// The sign method the job applied, and for `--sign auto` why (`describe_signs`).
    pub signs: String,
}

impl Summary {
    pub fn line(&self, what: &str) -> String {
        let secs = self.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.rows as f64 / secs
        } else {
            0.0
        };
        let mut line = format!(
            "{} {what} in {secs:.3} s ({:.2} M/s) on {}; {} non-finite row(s)",
            self.rows,
            rate / 1e6,
            self.adapter,
            self.non_finite_rows
        );
        if let Some(setup) = &self.mesh_setup {
            line += &format!(
                "; mesh load {:.3} s, build {:.3} s; triangles {:.1} MiB on the device ({})",
                setup.load.as_secs_f64(),
                setup.build.as_secs_f64(),
                setup.device_bytes as f64 / f64::from(1 << 20),
                if setup.indexed { "indexed" } else { "packed" },
            );
            line += &format!("; signs: {}", setup.signs);
        }
        if let Some(device) = self.device {
            line += &format!("; device {:.1} ms", device.as_secs_f64() * 1e3);
        }
        line
    }
}

/// The output side every streamed job shares: each chunk's rows appended to the output as it
/// comes back, progress reported, non-finite rows counted, then the file committed and the job
/// summarised.
struct JobOutput<'a> {
    output: OutputFile,
    rows: usize,
    non_finite_rows: usize,
    progress: &'a mut dyn FnMut(usize, usize),
    started: Instant,
    mesh_setup: Option<MeshSetup>,
}

impl<'a> JobOutput<'a> {
    /// Start timing a job whose output is laid out; `progress` hears of every chunk.
    fn new(output: OutputFile, rows: usize, progress: &'a mut dyn FnMut(usize, usize)) -> Self {
        JobOutput {
            output,
            rows,
            non_finite_rows: 0,
            progress,
            started: Instant::now(),
            mesh_setup: None,
        }
    }

    /// Upload `mesh` (read in `load`), reporting the load and the build apart, and time the
    /// queries from then. `sign` is decided for the mesh first (`auto` checks it; the check
    /// counts as load time), and the sign data the job's one query (computing `fields`) needs
    /// is built too, and the host's copy of the mesh released where the device answers alone.
    fn upload_mesh(
        &mut self,
        engine: &Engine,
        mesh: Mesh,
        load: Duration,
        sign: SignChoice,
        fields: Fields,
    ) -> Result<(GpuMesh, Sign)> {
        let checking = Instant::now();
        let (sign, auto_reason) = sign.resolve(&mesh);
        let load = load + checking.elapsed();
        let building = Instant::now();
        let mesh = engine.upload_mesh_for_job(mesh, sign, fields)?;
        self.mesh_setup = Some(MeshSetup {
            load,
            build: building.elapsed(),
            device_bytes: mesh.triangle_bytes(),
            indexed: mesh.records() == crate::MeshRecords::Indexed,
            signs: describe_signs(sign, auto_reason.as_deref()),
        });
        self.started = Instant::now();
        Ok((mesh, sign))
    }

    /// A chunk of packed rows, written as the output's `fields`.
    fn append_rows(&mut self, first: usize, fields: Fields, rows: PackedRows<'_>) -> Result<()> {
        let count = rows.len();
        self.append(
            first,
            count,
            rows.non_finite_rows(),
            &field_values(fields, &rows),
        )
    }

    /// Rows `first .. first + count`, `non_finite` of them answered with NaN.
    fn append(
        &mut self,
        first: usize,
        count: usize,
        non_finite: usize,
        values: &[Values<'_>],
    ) -> Result<()> {
        self.output.append(count, values)?;
        self.non_finite_rows += non_finite;
        (self.progress)(first + count, self.rows);
        Ok(())
    }

    /// Commit the output and summarise the job.
    fn finish(self, engine: &Engine) -> Result<Summary> {
        self.output.commit()?;
        Ok(Summary {
            rows: self.rows,
            non_finite_rows: self.non_finite_rows,
            elapsed: self.started.elapsed(),
            adapter: engine.describe(),
            mesh_setup: self.mesh_setup,
            device: engine.last_timing().device,
        })
    }
}

/// A mesh file loaded, and the time that took.
fn load_mesh_timed(path: &Path) -> Result<(Mesh, Duration)> {
    let loading = Instant::now();
    let mesh = load_mesh(path)?;
    Ok((mesh, loading.elapsed()))
}

/// `closest query --shapes S --points P [--paired] --out O`.
pub struct QueryJob<'a> {
    pub shapes: &'a Path,
    pub points: &'a Path,
    pub out: &'a Path,
    pub mode: Mode,
    pub paired: bool,
    /// The arrays computed and written (`--fields`).
    pub fields: Fields,
}

/// `closest query --mesh M --points P [--sign S] --out O`.
pub struct MeshQueryJob<'a> {
    pub mesh: &'a Path,
    pub points: &'a Path,
    pub out: &'a Path,
    pub sign: SignChoice,
    pub fields: Fields,
}

/// Run a mesh query job, streamed like [`run_query`]; the shape index is the triangle index.
pub fn run_mesh_query(
    job: &MeshQueryJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let (mesh, load) = load_mesh_timed(job.mesh)?;
    let mut points = PointFile::open(job.points)?;
    let rows = points.len();
    let output = OutputFile::create(job.out, rows, &field_columns(job.fields))?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(output, rows, progress);
    let (mesh, sign) = out.upload_mesh(&engine, mesh, load, job.sign, job.fields)?;
    let query = MeshQuery {
        mesh: &mesh,
        points: Points::Read(&mut points),
        sign,
        fields: job.fields,
    };
    engine.query_mesh(query, &mut |first: usize, rows: PackedRows<'_>| {
        out.append_rows(first, job.fields, rows)
    })?;
    out.finish(&engine)
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
    let output = OutputFile::create(job.out, rows, &field_columns(job.fields))?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(output, rows, progress);
    let mut sink = |first: usize, chunk: PackedRows<'_>| out.append_rows(first, job.fields, chunk);
    let points = Points::Read(&mut points);
    let (mode, fields) = (job.mode, job.fields);
    if job.paired {
        let shapes = &shapes;
        let query = PairedQuery {
            shapes,
            points,
            mode,
            fields,
        };
        engine.query_paired(query, &mut sink)?;
    } else {
        let scene = &engine.upload_scene_for_rows(&shapes, rows)?;
        let query = SceneQuery {
            scene,
            points,
            mode,
            fields,
        };
        engine.query_scene(query, &mut sink)?;
    }
    out.finish(&engine)
}

/// `closest segments --a A --b B --out O`: closest points between segment pairs.
pub fn run_segments(
    a_path: &Path,
    b_path: &Path,
    out: &Path,
    fields: Fields,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let a = RowFile::open_as(a_path, SEGMENTS)?;
    let b = RowFile::open_as(b_path, SEGMENTS)?;
    let rows = a.len();
    if b.len() != rows {
        return Err(Error::Usage(format!(
            "{} has {rows} segments but {} has {}: segment i of A pairs with segment i of B",
            a_path.display(),
            b_path.display(),
            b.len()
        )));
    }
    let output = OutputFile::create(out, rows, &field_columns(fields))?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(output, rows, progress);
    let mut files = SegmentFiles { a, b };
    let job = SegmentPairs {
        pairs: SegmentRows::Read(&mut files),
        fields,
    };
    engine.segment_pairs(job, &mut |first: usize, rows: PackedRows<'_>| {
        out.append_rows(first, fields, rows)
    })?;
    out.finish(&engine)
}

/// `closest contacts --shapes S --spheres P --out O`: sphere contacts with a scene, streamed
/// like [`run_query`].
pub fn run_contacts(
    shapes_path: &Path,
    spheres_path: &Path,
    out: &Path,
    fields: Fields,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let shapes = load_scene(shapes_path)?;
    let spheres = RowFile::open_as(spheres_path, SPHERES)?;
    let rows = spheres.len();
    if shapes.is_empty() && rows > 0 {
        return Err(Error::BadFile {
            file: shapes_path.display().to_string(),
            problem: "the scene has no shapes".into(),
        });
    }
    let output = OutputFile::create(out, rows, &field_columns(fields))?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(output, rows, progress);
    let scene = engine.upload_scene_for_rows(&shapes, rows)?;
    let mut spheres = SphereFile {
        file: spheres,
        name: spheres_path.display().to_string(),
    };
    let job = SphereContacts {
        scene: &scene,
        spheres: Spheres::Read(&mut spheres),
        fields,
    };
    engine.sphere_contacts(job, &mut |first: usize, rows: PackedRows<'_>| {
        out.append_rows(first, fields, rows)
    })?;
    out.finish(&engine)
}

/// A spheres file, its radii checked as each chunk is read.
struct SphereFile {
    file: RowFile<4>,
    name: String,
}

impl SphereReader for SphereFile {
    fn rows(&self) -> usize {
        self.file.len()
    }

    fn read(&mut self, range: Range<usize>, spheres: &mut Vec<[f64; 4]>) -> Result<()> {
        let first = range.start;
        self.file.read_rows(range, spheres)?;
        for (k, s) in spheres.iter().enumerate() {
            // Rows are numbered from 0 as in the array.
            check_radius(first + k, s[3], &self.name)?;
        }
        Ok(())
    }
}

/// Two segment files, segment i of A paired with segment i of B.
struct SegmentFiles {
    a: RowFile<6>,
    b: RowFile<6>,
}

impl SegmentReader for SegmentFiles {
    fn rows(&self) -> usize {
        self.a.len()
    }

    fn read(
        &mut self,
        range: Range<usize>,
        a: &mut Vec<[f64; 6]>,
        b: &mut Vec<[f64; 6]>,
    ) -> Result<()> {
        self.a.read_rows(range.clone(), a)?;
        self.b.read_rows(range, b)
    }
}

/// `closest sdf MESH --res … --out O`: a signed-distance grid, streamed like a query job.
pub struct SdfJob<'a> {
    pub mesh: &'a Path,
    pub res: [usize; 3],
    pub region: GridRegion,
    pub sign: SignChoice,
    pub out: &'a Path,
    /// A VTK ImageData copy of the grid (`.vti`).
    pub vti: Option<&'a Path>,
    /// A PNG of the middle z-slice.
    pub preview: Option<&'a Path>,
}

/// Run an SDF job: samples are generated, queried and written chunk by chunk. `.npz` gets
/// `sdf` (nx, ny, nz) f32, `origin` and `spacing` (3,) f64; `.csv` gets x, y, z, sdf rows.
pub fn run_sdf(
    job: &SdfJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let (mesh, load) = load_mesh_timed(job.mesh)?;
    let grid = Grid::new(&mesh, job.res, job.region)?;
    let rows = grid.len();
    let csv = OutputFile::is_csv(job.out);
    if csv && (job.vti.is_some() || job.preview.is_some()) {
        return Err(Error::Usage(
            "--vti and --preview are made from the grid in an .npz output: use --out X.npz".into(),
        ));
    }
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
    let output = OutputFile::create_with_constants(
        job.out,
        rows,
        &columns,
        if csv { &[] } else { &constants },
    )?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(output, rows, progress);
    // Grid jobs ask distances alone (`Engine::sdf`), on the device where it can.
    let distances = Fields::from_bits(Family::Hits, crate::fields::DISTANCE);
    let (mesh, sign) = out.upload_mesh(&engine, mesh, load, job.sign, distances)?;
    let sdf_job = SdfGrid {
        mesh: &mesh,
        grid: &grid,
        sign,
    };
    engine.sdf(sdf_job, &mut |first, distances: &[f32]| {
        let sdf = Values::f32_column(distances, 1);
        let count = distances.len();
        if csv {
            let at = |i: usize, k: usize| grid.point(first + i)[k] as f32;
            let xyz = [0, 1, 2].map(|k| Values::scalar(move |i| at(i, k)));
            let [x, y, z] = xyz;
            out.append(first, count, 0, &[x, y, z, sdf])
        } else {
            out.append(first, count, 0, &[sdf])
        }
    })?;
    // Derived files are written from the finished array, then everything moves into place.
    let vti = job
        .vti
        .map(|path| PendingFile::write(path, |w| write_vti(&mut out.output, 0, &grid, w)))
        .transpose()?;
    let preview = job
        .preview
        .map(|path| PendingFile::write(path, |w| write_preview(&mut out.output, 0, &grid, w)))
        .transpose()?;
    let summary = out.finish(&engine)?;
    for file in [vti, preview].into_iter().flatten() {
        file.commit()?;
    }
    Ok(summary)
}
