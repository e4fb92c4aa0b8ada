//! File-to-file jobs behind the CLI: read inputs, stream them through the engine, write the
//! output only when everything succeeded.

mod distance;
pub use distance::{DistanceJob, DistanceReport, run_distance};

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Engine;
use crate::GpuScene;
use crate::Mode;
use crate::auto_sign::{SignChoice, describe_signs};
use crate::contacts::check_radius;
use crate::engine::{
    BandSlab, BandWork, GpuMesh, SdfBand, sample_fields, torus_conflict, torus_refusal,
};
use crate::engine::{
    BodyContacts, BodyPairs, MeshQuery, PairedQuery, SceneQuery, SdfGrid, SegmentPairs,
    SegmentReader, SegmentRows, SphereContacts, SphereReader, Spheres,
};
use crate::error::{Error, Result};
use crate::fields::{Family, Fields, PackedRows};
use crate::io::load_mesh;
use crate::io::output::{PendingFile, check_table_target, check_target};
use crate::io::row_files::{SEGMENTS, SPHERES};
use crate::io::scene::SceneShapes;
use crate::io::scene_text::SceneText;
use crate::io::zarr::ZarrLayout;
use crate::io::{
    ColumnSpec, Constant, OutputFile, PointFile, RowFile, Values, field_columns, field_values,
    load_scene,
};
use crate::mesh::{Mesh, Sign};
use crate::points::Points;
use crate::sdf::{Grid, GridRegion, write_preview, write_vti};
use crate::shape::Shape;

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
    /// A band grid's work, level by level.
    pub band: Option<BandWork>,
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
        if let Some(work) = self.band {
            line += &format!(
                "; band: {} of {} samples computed ({:.2} %), {} within the band; near bricks {} \
                 of {}, near cells {}; {} distances asked, {} winding numbers for signs alone",
                work.samples,
                self.rows,
                100.0 * work.samples as f64 / self.rows.max(1) as f64,
                work.in_band,
                work.near_bricks,
                work.bricks,
                work.near_cells,
                work.queries,
                work.sign_queries
            );
            if work.deep_starts > 0 {
                line += &format!(
                    "; the samples of {} cells walk from below the root (depth {:.1} on average)",
                    work.deep_starts,
                    work.start_depths as f64 / work.deep_starts as f64
                );
            }
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
    /// `None` where a job writes its own files (a band grid's sparse output alone).
    output: Option<OutputFile>,
    rows: usize,
    non_finite_rows: usize,
    progress: &'a mut dyn FnMut(usize, usize),
    started: Instant,
    /// The engine's device time when the job started (`Engine::device_time_total`).
    device_before: Option<Duration>,
    mesh_setup: Option<MeshSetup>,
}

impl<'a> JobOutput<'a> {
    /// Start timing a job on `engine` whose output is laid out; `progress` hears of every
    /// chunk.
    fn new(
        engine: &Engine,
        output: OutputFile,
        rows: usize,
        progress: &'a mut dyn FnMut(usize, usize),
    ) -> Self {
        JobOutput::maybe(engine, Some(output), rows, progress)
    }

    fn maybe(
        engine: &Engine,
        output: Option<OutputFile>,
        rows: usize,
        progress: &'a mut dyn FnMut(usize, usize),
    ) -> Self {
        JobOutput {
            output,
            rows,
            non_finite_rows: 0,
            progress,
            started: Instant::now(),
            device_before: engine.device_time_total(),
            mesh_setup: None,
        }
    }

    /// Upload `mesh` (read in `load`), reporting the load and the build apart, and time the
    /// queries from then. `sign` is decided for the mesh (`auto` checks it beside the build,
    /// or first on a mesh too large for that, as load time), and the sign data the job's one
    /// query (computing `fields`) needs is built too, and the host's copy of the mesh released
    /// where the device answers alone.
    fn upload_mesh(
        &mut self,
        engine: &Engine,
        mesh: Mesh,
        load: Duration,
        sign: SignChoice,
        fields: Fields,
    ) -> Result<(GpuMesh, Sign)> {
        // `auto` is checked beside the build where the mesh allows (its time is then the
        // build's), else first, as load time.
        let (mesh, sign, auto, load, building) = match sign {
            SignChoice::Auto if engine.checks_auto_beside_build(&mesh) => {
                let building = Instant::now();
                let (mesh, auto) = engine.upload_mesh_for_auto_job(mesh, fields)?;
                (mesh, auto.sign, Some(auto), load, building)
            }
            _ => {
                let checking = Instant::now();
                let (sign, auto) = sign.resolve(&mesh);
                let load = load + checking.elapsed();
                let building = Instant::now();
                let closed_cycle = auto.as_ref().map(|auto| auto.closed_cycle);
                let mesh = engine.upload_mesh_for_job(mesh, sign, fields, closed_cycle)?;
                (mesh, sign, auto, load, building)
            }
        };
        self.mesh_setup = Some(MeshSetup {
            load,
            build: building.elapsed(),
            device_bytes: mesh.triangle_bytes(),
            indexed: mesh.records() == crate::MeshRecords::Indexed,
            signs: describe_signs(sign, auto.as_ref().map(|auto| auto.reason.as_str())),
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
        if let Some(output) = &mut self.output {
            output.append(count, values)?;
        }
        self.non_finite_rows += non_finite;
        (self.progress)(first + count, self.rows);
        Ok(())
    }

    /// Commit the output and summarise the job.
    fn finish(self, engine: &Engine) -> Result<Summary> {
        if let Some(output) = self.output {
            output.commit()?;
        }
        Ok(Summary {
            rows: self.rows,
            non_finite_rows: self.non_finite_rows,
            elapsed: self.started.elapsed(),
            adapter: engine.describe(),
            mesh_setup: self.mesh_setup,
            device: engine
                .device_time_total()
                .map(|total| total.saturating_sub(self.device_before.unwrap_or_default())),
            band: None,
        })
    }

    /// A Zarr grid's `sign` (the method applied) and `band` (its width, or null) attributes.
    fn set_grid_attributes(&mut self, sign: Sign, band: Option<f64>) {
        if let Some(output) = &mut self.output {
            output.set_attribute("sign", sign.name().into());
            output.set_attribute("band", band.into());
        }
    }

    /// The dense output, which grid jobs always have but band jobs may not.
    fn grid_output(&mut self) -> &mut OutputFile {
        self.output.as_mut().expect("a dense grid output")
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
    check_table_target(job.out)?;
    let (mesh, load) = load_mesh_timed(job.mesh)?;
    let mut points = PointFile::open(job.points)?;
    let rows = points.len();
    let output = OutputFile::create(job.out, rows, &field_columns(job.fields))?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(&engine, output, rows, progress);
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
    check_table_target(job.out)?;
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
    let mut out = JobOutput::new(&engine, output, rows, progress);
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
    check_table_target(out)?;
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
    let mut out = JobOutput::new(&engine, output, rows, progress);
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
    check_table_target(out)?;
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
    let mut out = JobOutput::new(&engine, output, rows, progress);
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

/// What `closest contacts --bodies` answers the bodies against.
#[derive(Clone, Copy, Debug)]
pub enum BodyTargets<'a> {
    /// A scene file (SPEC §1); with `paired`, body i against shape i.
    Scene { path: &'a Path, paired: bool },
    /// A mesh file: each body's nearest triangle.
    Mesh(&'a Path),
}

/// `closest contacts (--shapes S [--paired] | --mesh M) --bodies B --out O` (SPEC §9).
pub struct BodyJob<'a> {
    pub bodies: &'a Path,
    pub targets: BodyTargets<'a>,
    pub out: &'a Path,
    /// Fields of the `Bodies` family.
    pub fields: Fields,
    /// How many bodies (and paired targets) are read and answered at a time:
    /// [`BODY_CHUNK`], or fewer where a test crosses chunks with a few bodies.
    pub chunk_bodies: usize,
}

/// Bodies against a scene or a mesh: the targets and the first chunk of bodies (and of paired
/// targets) are read and checked before anything runs, then each chunk's rows stream into the
/// output; a fault in a later chunk stops the job with no output.
pub fn run_body_contacts(
    job: &BodyJob<'_>,
    engine_for: impl FnOnce() -> Result<Engine>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    check_table_target(job.out)?;
    let body_text = SceneText::read(job.bodies)?;
    let body_file = job.bodies.display().to_string();
    let chunk = job.chunk_bodies.max(1);
    let mut bodies = ShapeChunks::new(&body_text, &body_file, "bodies", chunk)?;
    bodies.read_next()?;
    let rows = bodies.shapes.len();
    let fields = job.fields;
    match job.targets {
        BodyTargets::Scene { path, paired: true } => {
            let target_text = SceneText::read(path)?;
            let target_file = path.display().to_string();
            let mut targets = ShapeChunks::new(&target_text, &target_file, "shapes", chunk)?;
            if targets.shapes.len() != rows {
                return Err(Error::BadFile {
                    file: target_file.clone(),
                    problem: format!(
                        "--paired needs one shape per body: {} shapes for {rows} bodies",
                        targets.shapes.len()
                    ),
                });
            }
            targets.read_next()?;
            targets.check_paired_tori(&bodies)?;
            let output = OutputFile::create(job.out, rows, &field_columns(fields))?;
            let engine = engine_for()?;
            let out = JobOutput::new(&engine, output, rows, progress);
            let answer =
                |targets: &ShapeChunks<'_>, bodies: &ShapeChunks<'_>, out: &mut JobOutput<'_>| {
                    let first = bodies.first;
                    let pairs = BodyPairs {
                        bodies: &bodies.chunk,
                        targets: &targets.chunk,
                        fields,
                    };
                    engine.body_pairs(pairs, &mut |k: usize, packed: PackedRows<'_>| {
                        let mut values = field_values(fields, &packed);
                        // A pair's `shape` is its target's index in the file, where the chunk's
                        // count from 0.
                        if let Some(column) = fields.selected().position(|f| f.is_index) {
                            let offset = i32::try_from(first).unwrap_or(i32::MAX);
                            let packed = &packed;
                            values[column] = Values::index(move |i| {
                                let target = packed.get(i, crate::fields::SHAPE)[0] as i32;
                                match target >= 0 {
                                    true => target.saturating_add(offset),
                                    false => target,
                                }
                            });
                        }
                        out.append(first + k, packed.len(), packed.non_finite_rows(), &values)
                    })
                };
            // The paired targets are read in step with the bodies.
            let next = |targets: &mut ShapeChunks<'_>, bodies: &ShapeChunks<'_>| {
                targets.read_next()?;
                targets.check_paired_tori(bodies)
            };
            stream_body_chunks(&engine, &mut targets, bodies, out, answer, next)
        }
        BodyTargets::Scene {
            path,
            paired: false,
        } => {
            let shapes = load_scene(path)?;
            let bad_targets = |problem: String| Error::BadFile {
                file: path.display().to_string(),
                problem,
            };
            if shapes.is_empty() && rows > 0 {
                return Err(bad_targets("the scene has no shapes".into()));
            }
            crate::engine::check_body_scale(&shapes, "shapes").map_err(|e| match e {
                Error::Usage(problem) => bad_targets(problem),
                other => other,
            })?;
            let check_tori =
                |bodies: &ShapeChunks<'_>| match torus_conflict(&bodies.chunk, &shapes, false) {
                    Some((torus, body)) => Err(bad_targets(torus_refusal(
                        torus,
                        bodies.first + body,
                        bodies.chunk[body].kind(),
                    ))),
                    None => Ok(()),
                };
            check_tori(&bodies)?;
            let output = OutputFile::create(job.out, rows, &field_columns(fields))?;
            let engine = engine_for()?;
            let out = JobOutput::new(&engine, output, rows, progress);
            let mut targets = engine.upload_body_targets(&shapes)?;
            let answer = nearest_of(&engine, fields);
            let next = |_: &mut GpuScene, bodies: &ShapeChunks<'_>| check_tori(bodies);
            stream_body_chunks(&engine, &mut targets, bodies, out, answer, next)
        }
        BodyTargets::Mesh(path) => {
            let mesh = load_mesh(path)?;
            crate::engine::check_mesh_body_scale(&mesh).map_err(|e| match e {
                Error::Usage(problem) => Error::BadFile {
                    file: path.display().to_string(),
                    problem,
                },
                other => other,
            })?;
            let output = OutputFile::create(job.out, rows, &field_columns(fields))?;
            let engine = engine_for()?;
            let out = JobOutput::new(&engine, output, rows, progress);
            let mut targets = engine.upload_mesh_body_targets(&mesh)?;
            drop(mesh);
            let answer = nearest_of(&engine, fields);
            stream_body_chunks(&engine, &mut targets, bodies, out, answer, |_, _| Ok(()))
        }
    }
}

/// Each chunk of `bodies` (the first already read and checked) answered against `targets`
/// into `out`; `next` checks each later chunk (and reads paired targets in step with it).
fn stream_body_chunks<T>(
    engine: &Engine,
    targets: &mut T,
    mut bodies: ShapeChunks<'_>,
    mut out: JobOutput<'_>,
    mut answer: impl FnMut(&T, &ShapeChunks<'_>, &mut JobOutput<'_>) -> Result<()>,
    mut next: impl FnMut(&mut T, &ShapeChunks<'_>) -> Result<()>,
) -> Result<Summary> {
    loop {
        answer(targets, &bodies, &mut out)?;
        if bodies.done() {
            break;
        }
        bodies.read_next()?;
        next(targets, &bodies)?;
    }
    out.finish(engine)
}

/// Each body's nearest shape among uploaded targets, its rows appended to the output.
fn nearest_of<'e>(
    engine: &'e Engine,
    fields: Fields,
) -> impl FnMut(&GpuScene, &ShapeChunks<'_>, &mut JobOutput<'_>) -> Result<()> + 'e {
    move |targets, bodies, out| {
        let first = bodies.first;
        let nearest = BodyContacts {
            targets,
            bodies: &bodies.chunk,
            fields,
        };
        engine.body_contacts(nearest, &mut |k: usize, packed: PackedRows<'_>| {
            out.append_rows(first + k, fields, packed)
        })
    }
}

/// The shapes a body job holds at once from a bodies file (and from a paired targets file):
/// ~40 MB of them, where 2,000,000 boxes held whole took 530 MB beside their text.
pub const BODY_CHUNK: usize = 1 << 18;

/// A scene file of bodies or paired targets, read a chunk at a time, each chunk checked as a
/// body job's shapes are as it is read.
struct ShapeChunks<'t> {
    shapes: SceneShapes<'t>,
    file: &'t str,
    /// `bodies` or `shapes`, as messages name them.
    what: &'static str,
    chunk: Vec<Shape>,
    /// How many shapes a chunk holds (the last may hold fewer).
    chunk_len: usize,
    /// The index of the chunk's first shape in the file.
    first: usize,
}

impl<'t> ShapeChunks<'t> {
    fn new(
        text: &'t SceneText,
        file: &'t str,
        what: &'static str,
        chunk_len: usize,
    ) -> Result<Self> {
        Ok(ShapeChunks {
            shapes: SceneShapes::of_file(text, file)?,
            file,
            what,
            chunk: Vec::new(),
            chunk_len,
            first: 0,
        })
    }

    /// Read the next chunk and check it: bodies must be of a body's kind, and every shape
    /// within the scale body jobs answer.
    fn read_next(&mut self) -> Result<()> {
        self.first = self.shapes.position();
        self.shapes.next_chunk(self.chunk_len, &mut self.chunk)?;
        let in_file = |e: Error| match e {
            Error::Usage(problem) => Error::BadFile {
                file: self.file.to_string(),
                problem,
            },
            other => other,
        };
        if self.what == "bodies" {
            crate::engine::check_bodies_from(&self.chunk, self.first, self.what)
                .map_err(in_file)?;
        }
        crate::engine::check_body_scale_from(&self.chunk, self.first, self.what).map_err(in_file)
    }

    /// Whether the chunk held is the file's last.
    fn done(&self) -> bool {
        self.shapes.position() == self.shapes.len()
    }

    /// Refuse a torus among these paired targets facing a body other than a sphere.
    fn check_paired_tori(&self, bodies: &ShapeChunks<'_>) -> Result<()> {
        match torus_conflict(&bodies.chunk, &self.chunk, true) {
            Some((torus, body)) => Err(Error::BadFile {
                file: self.file.to_string(),
                problem: torus_refusal(
                    self.first + torus,
                    bodies.first + body,
                    bodies.chunk[body].kind(),
                ),
            }),
            None => Ok(()),
        }
    }
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
    /// The dense grid (`.npz`, `.zarr` or `.csv`); a band grid may have only `sparse`.
    pub out: Option<&'a Path>,
    /// `--band W [--band-units …]`: a narrow-band grid (SPEC §8).
    pub band: Option<BandArg>,
    /// Samples a side of a `.zarr` output's chunks (`--chunk`).
    pub chunk: usize,
    /// `--sparse X.npz`: a band grid's samples within the band only.
    pub sparse: Option<&'a Path>,
    /// A VTK ImageData copy of the grid (`.vti`).
    pub vti: Option<&'a Path>,
    /// A PNG of the middle z-slice.
    pub preview: Option<&'a Path>,
}

/// An SDF job's files, checked before its mesh's load: the dense grid (`.npz`, `.zarr`, or
/// `.csv` where there is no band), the band's `--sparse` `.npz`, the `.vti` and the preview.
fn check_sdf_targets(job: &SdfJob<'_>) -> Result<()> {
    if let Some(out) = job.out {
        if job.band.is_some() {
            let problem = "a band grid is written as .npz or .zarr (dense) or with --sparse X.npz";
            check_target(out, &["npz", "zarr"], problem)?;
        } else {
            let problem = "the output must end in .npz, .zarr or .csv";
            check_target(out, &["npz", "zarr", "csv"], problem)?;
        }
    }
    if let Some(sparse) = job.sparse {
        check_target(sparse, &["npz"], "--sparse writes an .npz")?;
    }
    if let Some(vti) = job.vti {
        check_target(vti, &["vti"], "--vti writes VTK ImageData: end it in .vti")?;
    }
    if let Some(preview) = job.preview {
        check_target(preview, &["png"], PREVIEW_IS_PNG)?;
    }
    Ok(())
}

/// Run an SDF job: samples are generated, queried and written chunk by chunk. `.npz` gets
/// `sdf` (nx, ny, nz) f32, `origin` and `spacing` (3,) f64; `.csv` gets x, y, z, sdf rows.
pub fn run_sdf<E: std::ops::Deref<Target = Engine>>(
    job: &SdfJob<'_>,
    engine_for: impl FnOnce() -> Result<E>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    check_sdf_targets(job)?;
    let (mesh, load) = load_mesh_timed(job.mesh)?;
    let grid = Grid::new(&mesh, job.res, job.region)?;
    if let Some(band) = job.band {
        return run_sdf_band(job, band, (mesh, load), grid, engine_for, progress);
    }
    if job.sparse.is_some() {
        return Err(Error::Usage(
            "--sparse writes a band grid's samples: give --band W too".into(),
        ));
    }
    let Some(out_path) = job.out else {
        return Err(Error::Usage(
            "sdf needs --out (or --band W with --sparse)".into(),
        ));
    };
    let rows = grid.len();
    let csv = OutputFile::is_csv(out_path);
    let output = if csv {
        refuse_derived_files(job, "an .npz output")?;
        let columns = ["x", "y", "z", "sdf"].map(ColumnSpec::scalar);
        OutputFile::create(out_path, rows, &columns)?
    } else {
        grid_output(job, out_path, &grid, None)?
    };
    let engine = engine_for()?;
    let mut out = JobOutput::new(&engine, output, rows, progress);
    // Grid jobs ask distances alone (`Engine::sdf`), on the device where it can.
    let distances = Fields::from_bits(Family::Hits, crate::fields::DISTANCE);
    let (mesh, sign) = out.upload_mesh(&engine, mesh, load, job.sign, distances)?;
    out.set_grid_attributes(sign, None);
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
    let derived = derived_files(job, &mut out, &grid)?;
    let summary = out.finish(&engine)?;
    for file in derived {
        file.commit()?;
    }
    Ok(summary)
}

/// A grid's dense output: a Zarr store for `.zarr` (a band grid's fill value is +W, and its
/// chunks all at +W are left out), else an `.npz` with `origin` and `spacing` beside `sdf`.
fn grid_output(
    job: &SdfJob<'_>,
    path: &Path,
    grid: &Grid,
    band_width: Option<f64>,
) -> Result<OutputFile> {
    let constants = grid.constants();
    if crate::io::zarr::is_zarr(path) {
        refuse_derived_files(job, "an .npz output")?;
        let layout = ZarrLayout::sdf_grid(grid.res, job.chunk, band_width);
        return OutputFile::create_zarr(path, layout, &constants);
    }
    let column = ColumnSpec {
        shape: Some(grid.res.to_vec()),
        ..ColumnSpec::scalar("sdf")
    };
    OutputFile::create_with_constants(path, grid.len(), &[column], &constants)
}

/// Why a `--preview` that does not end in `.png` is refused.
pub(crate) const PREVIEW_IS_PNG: &str = "--preview writes a PNG: end it in .png";

/// `--vti` and `--preview` are read back from an `.npz` grid: refused up front elsewhere.
fn refuse_derived_files(job: &SdfJob<'_>, needs: &str) -> Result<()> {
    if job.vti.is_some() || job.preview.is_some() {
        return Err(Error::Usage(format!(
            "--vti and --preview are made from the grid in {needs}: use --out X.npz"
        )));
    }
    Ok(())
}

/// The `--vti` and `--preview` files of a finished dense grid, written beside their targets
/// (committed by the caller once the grid itself is).
fn derived_files(
    job: &SdfJob<'_>,
    out: &mut JobOutput<'_>,
    grid: &Grid,
) -> Result<Vec<PendingFile>> {
    let mut files = Vec::new();
    if let Some(path) = job.vti {
        files.push(PendingFile::write(path, |w| {
            write_vti(out.grid_output(), 0, grid, w)
        })?);
    }
    if let Some(path) = job.preview {
        files.push(PendingFile::write(path, |w| {
            write_preview(out.grid_output(), 0, grid, w)
        })?);
    }
    Ok(files)
}

/// `--band-units`: what `--band W` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BandUnits {
    /// Grid steps: W times the largest spacing.
    Voxels,
    World,
}

/// `--band W --band-units U`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandArg {
    pub width: f64,
    pub units: BandUnits,
}

impl BandArg {
    /// The band's half-width in world units on `grid`; a width that is not finite and > 0 is a
    /// usage error naming the flag and the value.
    pub fn world_width(self, grid: &Grid) -> Result<f64> {
        if !(self.width.is_finite() && self.width > 0.0) {
            return Err(Error::Usage(format!(
                "--band must be a finite width > 0, got {}",
                self.width
            )));
        }
        Ok(match self.units {
            BandUnits::World => self.width,
            BandUnits::Voxels => {
                let s = grid.spacing;
                self.width * s.x.max(s.y).max(s.z)
            }
        })
    }
}

/// Rows a sparse grid's columns are written to its `.npz` in (from memory or its temporary files).
const SPARSE_COPY_ROWS: usize = 1 << 20;

/// A narrow-band grid job: the dense grid (band samples exact, the rest ±W) to `--out` as
/// it comes, the band's samples to `--sparse` once their count is known (`SparseColumns`),
/// both committed only when everything succeeded.
fn run_sdf_band<E: std::ops::Deref<Target = Engine>>(
    job: &SdfJob<'_>,
    band: BandArg,
    (mesh, load): (Mesh, Duration),
    grid: Grid,
    engine_for: impl FnOnce() -> Result<E>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let width = band.world_width(&grid)?;
    if job.out.is_none() && job.sparse.is_none() {
        return Err(Error::Usage(
            "--band needs --out X.npz, --sparse X.npz or both".into(),
        ));
    }
    if job.out.is_none() {
        refuse_derived_files(job, "a dense .npz output")?;
    }
    let rows = grid.len();
    let constants = grid.constants();
    let dense = job
        .out
        .map(|path| grid_output(job, path, &grid, Some(width)))
        .transpose()?;
    let mut sparse = job
        .sparse
        .map(|path| SparseColumns::create(path, SPARSE_MEMORY_ROWS))
        .transpose()?;
    let engine = engine_for()?;
    let mut out = JobOutput::maybe(&engine, dense, rows, progress);
    let distances = Fields::from_bits(Family::Hits, crate::fields::DISTANCE);
    let (mesh, sign) = out.upload_mesh(&engine, mesh, load, job.sign, distances)?;
    out.set_grid_attributes(sign, Some(width));
    let band_job = SdfBand {
        mesh: &mesh,
        grid: &grid,
        sign,
        width,
        every_value: job.out.is_some(),
    };
    let [_, ny, nz] = grid.res;
    let work = engine.sdf_band(band_job, &mut |slab: BandSlab<'_>| {
        if let Some(sparse) = &mut sparse {
            sparse.append(&slab, ny, nz)?;
        }
        out.append(
            slab.first,
            slab.values.len(),
            slab.non_finite,
            &[Values::f32_column(slab.values, 1)],
        )
    })?;
    let derived = derived_files(job, &mut out, &grid)?;
    let sparse = sparse
        .map(|sparse| sparse.finish(&grid, width, &constants))
        .transpose()?;
    let mut summary = out.finish(&engine)?;
    summary.band = Some(work);
    for file in derived {
        file.commit()?;
    }
    if let Some(sparse) = sparse {
        sparse.commit()?;
    }
    Ok(summary)
}

/// A sparse grid being gathered: each band sample's index and value, held in memory up to
/// `memory_rows` rows and from there appended to two temporary files beside the target, then
/// written to the `.npz` once their count is known. (Spooling every row to files cost a
/// 512³ band job of fandisk ~8 % of its time writing and reading 69 MB twice, docs/PERF.md.)
struct SparseColumns {
    target: std::path::PathBuf,
    memory_rows: usize,
    index: Vec<[i32; 3]>,
    sdf: Vec<u32>,
    spilled: Option<SpilledColumns>,
    count: usize,
}

/// The temporary files of a sparse grid past its memory.
struct SpilledColumns {
    index: PendingFile,
    sdf: PendingFile,
    index_out: std::io::BufWriter<std::fs::File>,
    sdf_out: std::io::BufWriter<std::fs::File>,
}

/// Rows a sparse grid holds in memory (16 bytes each: 128 MiB) before it spills to files.
const SPARSE_MEMORY_ROWS: usize = 8 << 20;

impl SparseColumns {
    /// A sparse grid to gather for `target` (checked by [`check_sdf_targets`]).
    fn create(target: &Path, memory_rows: usize) -> Result<SparseColumns> {
        Ok(SparseColumns {
            target: target.to_path_buf(),
            memory_rows,
            index: Vec::new(),
            sdf: Vec::new(),
            spilled: None,
            count: 0,
        })
    }

    fn write_error(&self) -> impl Fn(std::io::Error) -> Error + use<> {
        let path = self.target.clone();
        move |source| Error::Write {
            path: path.clone(),
            source,
        }
    }

    fn append(&mut self, slab: &BandSlab<'_>, ny: usize, nz: usize) -> Result<()> {
        // Little-endian, as the `.npy` headers say.
        self.index.extend(slab.in_band.iter().map(|&local| {
            let row = slab.first + local as usize;
            [row / (ny * nz), (row / nz) % ny, row % nz].map(|x| (x as i32).to_le())
        }));
        self.sdf.extend(
            slab.in_band
                .iter()
                .map(|&local| slab.values[local as usize].to_bits().to_le()),
        );
        self.count += slab.in_band.len();
        if self.index.len() > self.memory_rows {
            self.spill()?;
        }
        Ok(())
    }

    /// Move the rows in memory to the temporary files (made on the first spill).
    fn spill(&mut self) -> Result<()> {
        use std::io::Write;
        let error = self.write_error();
        if self.spilled.is_none() {
            let part = |suffix: &str| {
                let name = self
                    .target
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy();
                self.target.with_file_name(format!("{name}.{suffix}"))
            };
            let (index, index_out) = PendingFile::scratch(&part("index"))?;
            let (sdf, sdf_out) = PendingFile::scratch(&part("sdf"))?;
            self.spilled = Some(SpilledColumns {
                index,
                sdf,
                index_out,
                sdf_out,
            });
        }
        let files = self.spilled.as_mut().expect("made above");
        files
            .index_out
            .write_all(bytemuck::cast_slice(&self.index))
            .map_err(&error)?;
        files
            .sdf_out
            .write_all(bytemuck::cast_slice(&self.sdf))
            .map_err(&error)?;
        self.index.clear();
        self.sdf.clear();
        Ok(())
    }

    /// The `.npz`, written beside the target: `index` (M, 3) int32, `sdf` (M,) float32,
    /// `origin`, `spacing`, `shape`, `band`.
    fn finish(mut self, grid: &Grid, width: f64, constants: &[Constant]) -> Result<OutputFile> {
        use std::io::{Read, Seek};
        let error = self.write_error();
        let mut all = constants.to_vec();
        all.push(Constant::i64s("shape", &grid.res.map(|n| n as i64)));
        all.push(Constant::f64s("band", &[width]));
        let columns = [
            ColumnSpec {
                kind: crate::io::ColumnType::I32,
                ..ColumnSpec::vector("index")
            },
            ColumnSpec::scalar("sdf"),
        ];
        let mut output =
            OutputFile::create_with_constants(&self.target, self.count, &columns, &all)?;
        let index_words: &[u32] = bytemuck::cast_slice(&self.index);
        if self.spilled.is_none() {
            for (index, sdf) in index_words
                .chunks(3 * SPARSE_COPY_ROWS)
                .zip(self.sdf.chunks(SPARSE_COPY_ROWS))
            {
                output.append(
                    sdf.len(),
                    &[Values::column(index, 3), Values::column(sdf, 1)],
                )?;
            }
            return Ok(output);
        }
        self.spill()?;
        let files = self.spilled.take().expect("spilled");
        let mut index = files
            .index_out
            .into_inner()
            .map_err(|e| error(e.into_error()))?;
        let mut sdf = files
            .sdf_out
            .into_inner()
            .map_err(|e| error(e.into_error()))?;
        index.rewind().map_err(&error)?;
        sdf.rewind().map_err(&error)?;
        let (mut index_words, mut sdf_words) = (Vec::new(), Vec::new());
        let mut done = 0;
        while done < self.count {
            let n = SPARSE_COPY_ROWS.min(self.count - done);
            index_words.resize(3 * n, 0u32);
            sdf_words.resize(n, 0u32);
            index
                .read_exact(bytemuck::cast_slice_mut(&mut index_words))
                .map_err(&error)?;
            sdf.read_exact(bytemuck::cast_slice_mut(&mut sdf_words))
                .map_err(&error)?;
            output.append(
                n,
                &[
                    Values::column(&index_words, 3),
                    Values::column(&sdf_words, 1),
                ],
            )?;
            done += n;
        }
        // The temporary columns are removed as they drop.
        drop((files.index, files.sdf));
        Ok(output)
    }
}

/// `closest sample MESH --surface N --near N --sigma S --uniform N … --out X.npz`.
pub struct SampleJob<'a> {
    pub mesh: &'a Path,
    pub spec: crate::sample::SampleSpec,
    pub sign: SignChoice,
    pub out: &'a Path,
    pub layout: SampleLayout,
}

impl SampleJob<'_> {
    /// The sampler of `mesh` (this job's, loaded), a usage error naming the mesh's file.
    fn sampler<'m>(&self, mesh: &'m Mesh) -> Result<crate::sample::Sampler<'m>> {
        crate::sample::Sampler::new(mesh, self.spec.clone()).map_err(|error| match error {
            Error::Usage(message) => Error::Usage(format!("{}: {message}", self.mesh.display())),
            other => other,
        })
    }
}

/// `closest sample --layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleLayout {
    /// `points`, `sdf`, `normal`, `kind`.
    Columns,
    /// DeepSDF's `pos` and `neg` (K, 4): x, y, z, sdf, split by the sdf's sign (0 to `pos`).
    DeepSdf,
}

/// Run a training-sample job (SPEC §8): `points` (M, 3) f32, `sdf` (M,), `normal` (M, 3) (the
/// distance's gradient; a surface sample's face normal, and 0 for its sdf, as it lies on the
/// surface by construction) and `kind` (M,) uint8, streamed chunk by chunk.
pub fn run_sample<E: std::ops::Deref<Target = Engine>>(
    job: &SampleJob<'_>,
    engine_for: impl FnOnce() -> Result<E>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    use crate::engine::{MeshSamples, SampleRows};
    if job.layout == SampleLayout::DeepSdf {
        check_target(job.out, &["npz"], "--layout deepsdf writes an .npz")?;
    } else {
        check_table_target(job.out)?;
    }
    let (mesh, load) = load_mesh_timed(job.mesh)?;
    let rows = job.spec.total()?;
    if job.layout == SampleLayout::DeepSdf {
        return run_sample_deepsdf(job, (mesh, load), rows, engine_for, progress);
    }
    let columns = [
        ColumnSpec::vector("points"),
        ColumnSpec::scalar("sdf"),
        ColumnSpec::vector("normal"),
        ColumnSpec {
            kind: crate::io::ColumnType::U8,
            ..ColumnSpec::scalar("kind")
        },
    ];
    let output = OutputFile::create(job.out, rows, &columns)?;
    // The upload may release the host's mesh; the sampler keeps a copy of its own.
    let host_mesh = mesh.clone();
    let sampler = job.sampler(&host_mesh)?;
    let engine = engine_for()?;
    let mut out = JobOutput::new(&engine, output, rows, progress);
    let (mesh, sign) = out.upload_mesh(&engine, mesh, load, job.sign, sample_fields())?;
    let samples = MeshSamples {
        mesh: &mesh,
        sampler: &sampler,
        sign,
    };
    engine.mesh_samples(samples, &mut |first, chunk: SampleRows| {
        let non_finite = chunk.sdf.iter().filter(|d| !d.is_finite()).count();
        out.append(
            first,
            chunk.sdf.len(),
            non_finite,
            &[
                Values::f32_column(bytemuck::cast_slice(&chunk.points), 3),
                Values::f32_column(&chunk.sdf, 1),
                Values::f32_column(bytemuck::cast_slice(&chunk.normal), 3),
                Values::Bytes(&chunk.kind),
            ],
        )
    })?;
    out.finish(&engine)
}

/// `--layout deepsdf`: rows (x, y, z, sdf) to `pos` or `neg` by the sdf's sign, each through a
/// scratch file beside the target (their lengths are known at the end), then copied into the
/// `.npz`. A NaN sdf (a sample the device could not answer) goes nowhere and is counted.
fn run_sample_deepsdf<E: std::ops::Deref<Target = Engine>>(
    job: &SampleJob<'_>,
    (mesh, load): (Mesh, Duration),
    rows: usize,
    engine_for: impl FnOnce() -> Result<E>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    use crate::engine::{MeshSamples, SampleRows};
    use std::io::{Read, Seek, Write};
    let scratch = |suffix: &str| {
        let name = job.out.file_name().unwrap_or_default().to_string_lossy();
        PendingFile::scratch(&job.out.with_file_name(format!("{name}.{suffix}")))
    };
    let (pos_guard, mut pos) = scratch("pos")?;
    let (neg_guard, mut neg) = scratch("neg")?;
    let host_mesh = mesh.clone();
    let sampler = job.sampler(&host_mesh)?;
    let engine = engine_for()?;
    let mut out = JobOutput::maybe(&engine, None, rows, progress);
    let (mesh, sign) = out.upload_mesh(&engine, mesh, load, job.sign, sample_fields())?;
    let error = |source| Error::Write {
        path: job.out.to_path_buf(),
        source,
    };
    let (mut positive, mut negative, mut non_finite) = (0usize, 0usize, 0usize);
    let samples = MeshSamples {
        mesh: &mesh,
        sampler: &sampler,
        sign,
    };
    engine.mesh_samples(samples, &mut |first, chunk: SampleRows| {
        for (p, &d) in chunk.points.iter().zip(&chunk.sdf) {
            let row = [p[0], p[1], p[2], d];
            if d.is_nan() {
                non_finite += 1;
            } else if d.is_sign_negative() && d != 0.0 {
                neg.write_all(bytemuck::bytes_of(&row)).map_err(error)?;
                negative += 1;
            } else {
                pos.write_all(bytemuck::bytes_of(&row)).map_err(error)?;
                positive += 1;
            }
        }
        out.append(first, chunk.sdf.len(), 0, &[])
    })?;
    let columns = [
        ColumnSpec {
            width: 4,
            shape: Some(vec![positive, 4]),
            ..ColumnSpec::scalar("pos")
        },
        ColumnSpec {
            width: 4,
            shape: Some(vec![negative, 4]),
            ..ColumnSpec::scalar("neg")
        },
    ];
    let mut output = OutputFile::create_with_constants(job.out, 0, &columns, &[])?;
    for (column, (file, count)) in [(pos, positive), (neg, negative)].into_iter().enumerate() {
        let mut file = file.into_inner().map_err(|e| error(e.into_error()))?;
        file.rewind().map_err(error)?;
        let mut words = Vec::new();
        let mut done = 0;
        while done < count {
            let n = SPARSE_COPY_ROWS.min(count - done);
            words.resize(4 * n, 0u32);
            file.read_exact(bytemuck::cast_slice_mut(&mut words))
                .map_err(error)?;
            output.append_column(column, n, &Values::column(&words, 4))?;
            done += n;
        }
    }
    drop((pos_guard, neg_guard));
    output.commit()?;
    out.non_finite_rows = non_finite;
    out.finish(&engine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DVec3;

    /// Bodies read and answered a few at a time write the file they write held whole, against
    /// a scene, a mesh and paired targets; a fault in a later chunk is named by its index in
    /// the file and leaves no output.
    #[test]
    fn bodies_read_a_chunk_at_a_time_answer_as_held_whole() {
        let dir = std::env::temp_dir().join(format!("closest-body-chunks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
        };
        let mut body = |k: usize| {
            let [x, y, z] = [next(), next(), next()];
            let size = 0.1 + next().abs() / 4.0;
            match k % 3 {
                0 => {
                    format!(r#"{{"type": "sphere", "center": [{x}, {y}, {z}], "radius": {size}}}"#)
                }
                1 => format!(
                    r#"{{"type": "box", "center": [{x}, {y}, {z}], "half_extents": [{size}, 0.2, 0.3], "rotation": [0.6, 0, 0, 0.8]}}"#
                ),
                _ => format!(
                    r#"{{"type": "capsule", "a": [{x}, {y}, {z}], "b": [{y}, {z}, {x}], "radius": {size}}}"#
                ),
            }
        };
        let scene_of = |shapes: &[String]| format!("{{\"shapes\": [\n{}\n]}}", shapes.join(",\n"));
        let bodies: Vec<String> = (0..23).map(&mut body).collect();
        let paired: Vec<String> = (0..23).map(|k| body(k + 1)).collect();
        let bodies_file = write("bodies.json", &scene_of(&bodies));
        let paired_file = write("paired.json", &scene_of(&paired));
        let scene_file = write("scene.json", &scene_of(&paired[..4]));
        let mesh_file = write(
            "mesh.obj",
            "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n",
        );
        let run = |bodies: &Path, targets: BodyTargets<'_>, chunk_bodies: usize| {
            let out = dir.join("out.npz");
            let job = BodyJob {
                bodies,
                targets,
                out: &out,
                fields: Fields::all(Family::Bodies),
                chunk_bodies,
            };
            let engine = || Engine::new(&crate::EngineOptions::default());
            let mut rows_done = Vec::new();
            let answered = run_body_contacts(&job, engine, &mut |done, _| rows_done.push(done));
            let written = std::fs::read(&out).ok();
            let _ = std::fs::remove_file(&out);
            (answered.map(|summary| summary.rows), written, rows_done)
        };
        let targets = [
            BodyTargets::Scene {
                path: &scene_file,
                paired: false,
            },
            BodyTargets::Scene {
                path: &paired_file,
                paired: true,
            },
            BodyTargets::Mesh(&mesh_file),
        ];
        for target in targets {
            let (rows, held, _) = run(&bodies_file, target, BODY_CHUNK);
            assert_eq!(rows.unwrap(), 23, "{target:?}");
            let (rows, chunked, progress) = run(&bodies_file, target, 5);
            assert_eq!(rows.unwrap(), 23, "{target:?}");
            assert!(held.is_some() && chunked == held, "{target:?}");
            assert!(
                progress.ends_with(&[23]) && progress.contains(&10),
                "{progress:?}"
            );
        }
        let faulty = |k: usize, shape: &str, what: &str| {
            let mut shapes = bodies.clone();
            shapes[k] = shape.into();
            write(what, &scene_of(&shapes))
        };
        let plane = faulty(
            17,
            r#"{"type": "plane", "normal": [0, 0, 1], "offset": 0}"#,
            "p.json",
        );
        let missing = faulty(12, r#"{"type": "box", "center": [0, 0, 0]}"#, "m.json");
        let far = faulty(
            21,
            r#"{"type": "sphere", "center": [2e9, 0, 0], "radius": 1}"#,
            "f.json",
        );
        let torus = r#"{"type": "torus", "center": [0, 0, 0], "axis": [0, 0, 1], "major_radius": 1, "minor_radius": 0.2}"#;
        let mut tori = paired.clone();
        tori[14] = torus.into();
        let paired_torus = write("tori.json", &scene_of(&tori));
        let mut spheres_first: Vec<String> = (0..23).map(|k| body(3 * k)).collect();
        spheres_first[11] = bodies[1].clone();
        let spheres_first = write("spheres.json", &scene_of(&spheres_first));
        let torus_scene = write("torus.json", &scene_of(&[torus.into()]));
        let cases = [
            (
                &plane,
                targets[0],
                "bodies.json",
                "bodies: shape 17: field `type`: a plane",
            ),
            (
                &missing,
                targets[2],
                "m.json",
                "shape 12: field `half_extents`: missing",
            ),
            (
                &far,
                targets[1],
                "f.json",
                "bodies: shape 21: a coordinate or extent of 2e9",
            ),
            (
                &bodies_file,
                BodyTargets::Scene {
                    path: &paired_torus,
                    paired: true,
                },
                "tori.json",
                "shape 14: field `type`: a torus is not convex, so only sphere bodies are answered against it (body 14 is a capsule)",
            ),
            (
                &spheres_first,
                BodyTargets::Scene {
                    path: &torus_scene,
                    paired: false,
                },
                "torus.json",
                "shape 0: field `type`: a torus is not convex, so only sphere bodies are answered against it (body 11 is a box)",
            ),
        ];
        for (bodies, target, file, problem) in cases {
            let (answered, written, _) = run(bodies, target, 5);
            let error = answered.unwrap_err().to_string();
            assert!(error.contains(problem), "{error}");
            assert!(error.contains(file) || file == "bodies.json", "{error}");
            assert!(written.is_none(), "{error}");
        }
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains("out"))
            .collect();
        left.sort();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A sparse grid spilled to its temporary files (every slab, or past a few rows) is the
    /// same file as one held in memory, and leaves no temporary file behind.
    #[test]
    fn a_sparse_grid_spilled_to_files_is_the_one_held_in_memory() {
        let dir = std::env::temp_dir().join(format!("closest-sparse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let grid = Grid {
            origin: DVec3::new(-1.0, 0.5, 2.0),
            spacing: DVec3::new(0.25, 0.5, 1.0),
            res: [6, 5, 7],
        };
        let [_, ny, nz] = grid.res;
        let plane = ny * nz;
        let values: Vec<f32> = (0..2 * plane).map(|k| k as f32 * 0.01 - 0.3).collect();
        let in_band: Vec<u32> = (0..2 * plane as u32).filter(|k| k % 3 != 1).collect();
        let write = |name: &str, memory_rows: usize| {
            let target = dir.join(name);
            let mut sparse = SparseColumns::create(&target, memory_rows).unwrap();
            for first in [0, 2 * plane, 4 * plane] {
                let slab = BandSlab {
                    first,
                    values: &values,
                    in_band: &in_band,
                    non_finite: 0,
                };
                sparse.append(&slab, ny, nz).unwrap();
            }
            let spilled = sparse.spilled.is_some();
            sparse
                .finish(&grid, 0.4, &grid.constants())
                .unwrap()
                .commit()
                .unwrap();
            (std::fs::read(&target).unwrap(), spilled)
        };
        let (held, held_spilled) = write("held.npz", SPARSE_MEMORY_ROWS);
        assert!(!held_spilled);
        for (name, memory_rows) in [("every.npz", 0), ("later.npz", 50)] {
            let (spilled, did_spill) = write(name, memory_rows);
            assert!(did_spill, "{name}");
            assert_eq!(spilled, held, "{name}");
        }
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["every.npz", "held.npz", "later.npz"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
