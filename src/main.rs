//! The `closest` command line: parse, call the library, report. Exit codes follow SPEC §5.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use closest::auto_sign::SignChoice;
use closest::job::{
    BODY_CHUNK, BandArg, BandUnits, BodyJob, BodyTargets, DistanceJob, MeshQueryJob, QueryJob,
    SampleJob, SampleLayout, SdfJob, Summary, run_body_contacts, run_contacts, run_distance,
    run_mesh_query, run_query, run_sample, run_sdf, run_segments,
};
use closest::mesh::Sign;
use closest::sample::SampleSpec;
use closest::sdf::GridRegion;
use closest::{Engine, EngineOpening, EngineOptions, Error, Family, Fields, MeshRecords, Mode};

#[derive(Parser)]
#[command(name = "closest", version, about = "Closest-point queries on the GPU")]
struct Cli {
    /// Adapter to use: a substring of its name or a backend (vulkan, gl, metal, dx12).
    /// Default: $CLOSEST_ADAPTER, else a hardware GPU, else a software one (lavapipe).
    #[arg(long, global = true)]
    adapter: Option<String>,
    /// Rows per chunk streamed through the device (default 262144 on a CPU adapter, 1048576
    /// on a GPU; capped by the adapter's limits). Memory use grows with it; results do not
    /// change.
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..))]
    chunk_rows: Option<u64>,
    /// Bytes one storage binding may hold, below the adapter's limit (at least 1024): meshes
    /// larger than that are split over several bindings. Results do not change.
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1024..))]
    max_binding_bytes: Option<u64>,
    /// Bytes of memory a mesh's build and device copy, or a convex hull's build, may take
    /// (default: what the system reports available); one needing more is refused before its
    /// build starts.
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..))]
    memory_bytes: Option<u64>,
    /// Run the kernels every adapter has, never the subgroup kernels (query_subgroup.wgsl,
    /// mesh_subgroup.wgsl, bodies_subgroup.wgsl) that adapters with 8-lane subgroups
    /// (lavapipe) run by default.
    /// Results do not change.
    #[arg(long, global = true)]
    portable_kernels: bool,
    /// How mesh triangles are stored on the device: packed (56 bytes a triangle, fastest),
    /// indexed (about 38 on a closed mesh, shared f32 vertices), or auto: on CPU and
    /// integrated adapters indexed for meshes of 2^20 triangles or more; otherwise packed
    /// unless only indexed fits the memory there is. Results agree within SPEC §3's bound,
    /// not bit for bit.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    mesh_records: MeshRecordsArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List adapters, the one chosen and its limits.
    Info,
    /// Closest point, distance, shape index and normal for every query point.
    #[command(group(clap::ArgGroup::new("target").required(true).args(["shapes", "mesh"])))]
    Query {
        /// Scene file (JSON, SPEC §1).
        #[arg(long)]
        shapes: Option<PathBuf>,
        /// Triangle mesh (.obj, .stl, .ply, .off, .glb, .gltf) instead of a scene: the shape index is the triangle.
        #[arg(long)]
        mesh: Option<PathBuf>,
        /// Sign of mesh distances: none (unsigned, the default), pseudonormal (negative inside;
        /// for closed, consistently wound meshes), winding (generalized winding number > ½;
        /// robust on meshes with holes) or auto (pseudonormal where the mesh is closed,
        /// oriented and does not intersect itself, winding otherwise).
        #[arg(long, value_enum)]
        sign: Option<SignArg>,
        /// Query points: .npy (N, 3) float16/32/64 (or that array in a .npz, compressed or not: its
        /// only array or `points`), .csv/.txt/.xyz with 3 columns, a .pcd point cloud, or a mesh
        /// file's vertices (.ply, .obj, .off, .stl, .glb, .gltf).
        #[arg(long)]
        points: PathBuf,
        #[arg(long, value_enum, default_value = "solid")]
        mode: ModeArg,
        /// Point i against shape i instead of the nearest shape of the scene.
        #[arg(long)]
        paired: bool,
        /// Output: .npz (arrays point, distance, shape, normal) or .csv.
        #[arg(long)]
        out: PathBuf,
        /// Only these arrays, computed, moved back and written (comma-separated: point,
        /// distance, shape, normal). Default: all.
        #[arg(long)]
        fields: Option<String>,
    },
    /// Closest points between segment i of A and segment i of B.
    Segments {
        /// Segments A: .npy (N, 2, 3) (or in a .npz: its only array or `segments`) or .csv with 6
        /// columns.
        #[arg(long)]
        a: PathBuf,
        /// Segments B, as many as A.
        #[arg(long)]
        b: PathBuf,
        /// Output: .npz (arrays point_a, point_b, s, t, distance) or .csv.
        #[arg(long)]
        out: PathBuf,
        /// Only these arrays (comma-separated: point_a, point_b, s, t, distance). Default: all.
        #[arg(long)]
        fields: Option<String>,
    },
    /// Contacts for collision response: spheres against a scene (depth, normal, contact
    /// point), or convex bodies against a scene or a mesh (separation or penetration, witness
    /// points, normal).
    Contacts {
        /// Scene file (JSON, SPEC §1).
        #[arg(long, required_unless_present = "mesh", conflicts_with = "mesh")]
        shapes: Option<PathBuf>,
        /// Triangle mesh (.obj, .stl, .ply, .off, .glb, .gltf), with --bodies: each body's nearest triangle.
        #[arg(long, requires = "bodies")]
        mesh: Option<PathBuf>,
        /// Spheres: .npy (N, 4) as cx, cy, cz, r (or in a .npz: its only array or `spheres`), or
        /// .csv with 4 columns.
        #[arg(long, required_unless_present = "bodies", conflicts_with = "bodies")]
        spheres: Option<PathBuf>,
        /// Bodies: a scene file (JSON) of convex shapes (sphere, capsule, box, aabb, cylinder,
        /// cone, ellipsoid, convex_hull, wedge, corner_wedge, segment, triangle).
        #[arg(long)]
        bodies: Option<PathBuf>,
        /// With --bodies and --shapes: body i against shape i (as many shapes as bodies).
        #[arg(long, requires = "bodies", conflicts_with = "mesh")]
        paired: bool,
        /// Output: .npz or .csv; spheres: arrays point, depth, normal, shape; bodies: distance,
        /// point_body, point_target, normal, shape.
        #[arg(long)]
        out: PathBuf,
        /// Only these arrays (comma-separated, of the ones --out lists). Default: all.
        #[arg(long)]
        fields: Option<String>,
    },
    /// Signed-distance grid of a triangle mesh.
    Sdf {
        /// Triangle mesh (.obj, .stl, .ply, .off, .glb, .gltf); with --out-dir, any number of meshes and
        /// directories of them.
        #[arg(required = true, num_args = 1..)]
        mesh: Vec<PathBuf>,
        /// One output per mesh, D/NAME.npz (or .zarr, --out-format), one engine for the run; a
        /// mesh that fails is reported and skipped (exit 2 at the end if any did).
        #[arg(long, value_name = "D")]
        out_dir: Option<PathBuf>,
        /// With --out-dir: npz (the default) or zarr, each grid streamed to D/NAME.zarr.
        #[arg(long, value_enum, requires = "out_dir")]
        out_format: Option<OutFormatArg>,
        /// Samples an axis, corners inclusive: N, or NX,NY,NZ.
        #[arg(long)]
        res: String,
        /// Grow the mesh's bounding box on each side by this fraction of its largest extent.
        #[arg(long, conflicts_with = "bounds", allow_hyphen_values = true)]
        pad: Option<f64>,
        /// The grid's box instead: x0,y0,z0,x1,y1,z1.
        #[arg(long, allow_hyphen_values = true)]
        bounds: Option<String>,
        /// auto (default: pseudonormal where the mesh is closed, consistently oriented and does
        /// not intersect itself, winding otherwise; the summary names the method),
        /// pseudonormal (negative inside), winding (winding number > ½, for meshes with holes)
        /// or none (unsigned).
        #[arg(long, value_enum)]
        sign: Option<SignArg>,
        /// Output: .npz (arrays sdf (NX,NY,NZ), origin, spacing), .zarr (a Zarr v3 group with
        /// the array sdf in zstd chunks, streamed in bounded memory; attributes origin,
        /// spacing, band, sign) or .csv (x, y, z, sdf). Required unless --band with --sparse,
        /// or --out-dir.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Samples a side of a .zarr output's chunks (1 to 256).
        #[arg(long, default_value_t = 64)]
        chunk: usize,
        /// A narrow band: samples within W of the surface get their exact signed distance,
        /// every other sample ±W with its sign; the work follows the surface, not the volume.
        #[arg(long, value_name = "W", allow_hyphen_values = true)]
        band: Option<f64>,
        /// What --band counts: voxels (the default; W times the largest spacing) or world
        /// units.
        #[arg(long, value_enum, requires = "band")]
        band_units: Option<BandUnitsArg>,
        /// With --band: an .npz of the band's samples only: index (M,3) int32, sdf (M,),
        /// origin, spacing, shape, band.
        #[arg(long, requires = "band")]
        sparse: Option<PathBuf>,
        /// Also write the grid as VTK ImageData (.vti, opens in ParaView).
        #[arg(long)]
        vti: Option<PathBuf>,
        /// Also write a PNG of the middle z-slice (blue inside, red outside, zero contour black).
        #[arg(long)]
        preview: Option<PathBuf>,
    },
    /// Training samples of a mesh (DeepSDF-style): surface, near-surface and uniform points
    /// with their signed distance and its gradient.
    Sample {
        /// Triangle mesh (.obj, .stl, .ply, .off, .glb, .gltf); with --out-dir, any number of meshes and
        /// directories of them.
        #[arg(required = true, num_args = 1..)]
        mesh: Vec<PathBuf>,
        /// One output per mesh, D/NAME.npz, one engine for the run; a mesh that fails is
        /// reported and skipped (exit 2 at the end if any did).
        #[arg(long, value_name = "D")]
        out_dir: Option<PathBuf>,
        /// Points uniform over the surface (area-weighted); sdf 0, the face normal.
        #[arg(long, default_value_t = 0)]
        surface: usize,
        /// Surface points moved by a normal deviate of each --sigma, split evenly among them.
        #[arg(long, default_value_t = 0)]
        near: usize,
        /// The near samples' standard deviations: S or S1,S2,... (world units).
        #[arg(long, allow_hyphen_values = true)]
        sigma: Option<String>,
        /// Points uniform in the mesh's box grown by --pad.
        #[arg(long, default_value_t = 0)]
        uniform: usize,
        /// The uniform box's growth on each side, a fraction of the largest extent.
        #[arg(long, default_value_t = 0.1, allow_hyphen_values = true)]
        pad: f64,
        /// The same seed gives the same samples on any adapter.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// auto (default), pseudonormal, winding or none, as for sdf.
        #[arg(long, value_enum)]
        sign: Option<SignArg>,
        /// Output .npz: points (M,3), sdf (M,), normal (M,3), kind (M,) uint8 (0 surface,
        /// 1 near, 2 uniform); with --layout deepsdf, pos and neg (K,4): x, y, z, sdf.
        /// Required unless --out-dir.
        #[arg(long)]
        out: Option<PathBuf>,
        /// columns (the default) or deepsdf (DeepSDF's pos/neg arrays, split by the sdf's
        /// sign).
        #[arg(long, value_enum, default_value = "columns")]
        layout: LayoutArg,
    },
    /// How far two meshes deviate (SPEC §9): Hausdorff (both ways and symmetric), Chamfer,
    /// and every vertex's deviation, over the vertices plus area-weighted surface samples.
    Distance {
        /// The first mesh (.obj, .stl, .ply, .off, .glb, .gltf): `a_to_b` is its vertices' deviations from B.
        a: PathBuf,
        /// The second mesh.
        b: PathBuf,
        /// Area-weighted surface samples per mesh, beside its vertices.
        #[arg(long, default_value_t = 0)]
        samples: usize,
        /// The samples' seed: the same seed gives the same points on any adapter.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Sign the deviations by the other mesh's inside (auto, pseudonormal, winding);
        /// none (the default) leaves them unsigned. Hausdorff and Chamfer use |deviation|.
        #[arg(long, value_enum)]
        sign: Option<SignArg>,
        /// Output .npz: a_to_b (VA,) and b_to_a (VB,) f32 vertex deviations, and the scalars
        /// hausdorff, hausdorff_a_to_b, hausdorff_b_to_a, chamfer, chamfer_squared,
        /// mean_a_to_b, mean_b_to_a, mean_squared_a_to_b, mean_squared_b_to_a, samples.
        #[arg(long)]
        out: Option<PathBuf>,
        /// A PNG of A's vertices coloured by their deviation, from three sides.
        #[arg(long)]
        preview: Option<PathBuf>,
    },
    /// The query service (SPEC §7): scenes and meshes resident on the device, over HTTP.
    Serve(closest::serve::ServeArgs),
    /// Throughput table: GPU adapter vs the CPU reference.
    Bench {
        /// Points per shape type.
        #[arg(long, default_value_t = 4_000_000)]
        points: usize,
        /// Timed repetitions (the median is reported).
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Nearest-shape queries over scenes of 10^3–10^5 shapes instead (BVH vs brute force).
        #[arg(long)]
        scenes: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum MeshRecordsArg {
    Auto,
    Packed,
    Indexed,
}

#[derive(Clone, Copy, ValueEnum)]
enum SignArg {
    /// Pseudonormal where the mesh is closed, consistently oriented and does not intersect
    /// itself; winding number otherwise.
    Auto,
    None,
    Pseudonormal,
    Winding,
}

impl SignArg {
    fn choice(self) -> SignChoice {
        match self {
            SignArg::Auto => SignChoice::Auto,
            SignArg::None => SignChoice::Method(Sign::None),
            SignArg::Pseudonormal => SignChoice::Method(Sign::Pseudonormal),
            SignArg::Winding => SignChoice::Method(Sign::Winding),
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum OutFormatArg {
    Npz,
    Zarr,
}

#[derive(Clone, Copy, ValueEnum)]
enum LayoutArg {
    Columns,
    Deepsdf,
}

#[derive(Clone, Copy, ValueEnum)]
enum BandUnitsArg {
    Voxels,
    World,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Solid,
    Surface,
}

/// A line on stderr, whose failure (a full disk behind `2> log`) must not end the job:
/// `eprintln!` panicked there.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

fn main() -> ExitCode {
    closest::host_memory::map_large_blocks();
    closest::gpu::adapter::quiet_headless_loader();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        exit_quietly_on_closed_stdout();
        remove_partial_outputs_on_interrupt();
        remove_partial_outputs_on_panic();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("closest: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// A panic (a defect, never an input's doing) leaves no partial output either: unwinding
/// drops the outputs' guards, but a second panic on the way aborts the process before they run.
/// The job's temporary files are removed when the panic is reported. Not for the server,
/// which answers a panic with a 500 and goes on.
fn remove_partial_outputs_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        closest::io::temporary::remove_all_on_panic();
    }));
}

/// A reader that stops early (`closest info | head -2`) ends the process as it ends `cat`,
/// where Rust's ignored SIGPIPE would make the next `println!` panic. Not for the server,
/// whose writes to a closed connection must fail as errors.
fn exit_quietly_on_closed_stdout() {
    #[cfg(unix)]
    // SAFETY: restoring a signal's default action before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A job ended by SIGINT, SIGTERM or SIGHUP leaves no partial output behind: the signals are
/// blocked in every thread (set before any is started, so all inherit it) and taken by one
/// thread, which removes the job's temporary files and folders (`io::temporary`) and exits
/// with 128 + the signal, as the shell reports a killed job. The server has its own drain.
fn remove_partial_outputs_on_interrupt() {
    #[cfg(unix)]
    {
        // SAFETY: a signal set built by libc's own calls, the mask set before any other
        // thread exists.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, signal);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        let waiter = std::thread::Builder::new()
            .name("closest-signals".into())
            .spawn(move || {
                let mut signal = 0;
                // SAFETY: `set` is a valid signal set; `signal` is written by sigwait.
                if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                    return;
                }
                closest::io::temporary::remove_all();
                say!("closest: interrupted (signal {signal}); partial outputs removed");
                // Without the exit handlers: the driver's own may wait on work the other
                // threads are still doing. stderr is unbuffered, so the message is out.
                // SAFETY: ends the process; nothing after it runs.
                unsafe { libc::_exit(128 + signal) }
            });
        if waiter.is_err() {
            // No thread to take them: the signals keep their default action (the job ends
            // as before, its temporary outputs left).
            // SAFETY: as above.
            unsafe {
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            }
        }
    }
}

fn run(cli: Cli) -> Result<(), Error> {
    if let Some(bytes) = cli.memory_bytes {
        closest::host_memory::limit_process_memory(bytes);
    }
    let options = EngineOptions {
        adapter: cli.adapter.clone(),
        chunk_rows: cli.chunk_rows.map(|n| n as usize),
        max_binding_bytes: cli.max_binding_bytes,
        memory_bytes: cli.memory_bytes,
        portable_kernels: cli.portable_kernels,
        mesh_records: match cli.mesh_records {
            MeshRecordsArg::Auto => MeshRecords::Auto,
            MeshRecordsArg::Packed => MeshRecords::Packed,
            MeshRecordsArg::Indexed => MeshRecords::Indexed,
        },
        ..Default::default()
    };
    match cli.command {
        Command::Info => info(&options),
        Command::Query {
            mesh: Some(mesh),
            points,
            sign,
            paired,
            out,
            fields,
            ..
        } => {
            let fields = fields_arg(Family::Hits, fields.as_deref())?;
            if paired {
                return Err(Error::Usage(
                    "--paired pairs points with scene shapes; it does not apply to --mesh".into(),
                ));
            }
            let job = MeshQueryJob {
                mesh: &mesh,
                points: &points,
                out: &out,
                sign: sign.map_or(SignChoice::Method(Sign::None), SignArg::choice),
                fields,
            };
            report("queries", |progress| {
                run_mesh_query(&job, opening(&options), progress)
            })
        }
        Command::Query {
            shapes: Some(shapes),
            points,
            mode,
            paired,
            out,
            sign,
            fields,
            ..
        } => {
            let fields = fields_arg(Family::Hits, fields.as_deref())?;
            if sign.is_some() {
                return Err(Error::Usage(
                    "--sign applies to --mesh; scene queries sign by --mode surface".into(),
                ));
            }
            let mode = match mode {
                ModeArg::Solid => Mode::Solid,
                ModeArg::Surface => Mode::Surface,
            };
            let job = QueryJob {
                shapes: &shapes,
                points: &points,
                out: &out,
                mode,
                paired,
                fields,
            };
            report("queries", |progress| {
                run_query(&job, opening(&options), progress)
            })
        }
        Command::Query { .. } => unreachable!("clap requires --shapes or --mesh"),
        Command::Sdf {
            mesh,
            out_dir,
            out_format,
            res,
            pad,
            bounds,
            sign,
            out,
            band,
            band_units,
            chunk,
            sparse,
            vti,
            preview,
        } => {
            let region = match bounds {
                Some(text) => GridRegion::Bounds(numbers::<6>("--bounds", &text)?),
                None => GridRegion::Pad(pad.unwrap_or(0.1)),
            };
            let res = closest::sdf::parse_res(&res)
                .map_err(|problem| Error::Usage(format!("--res {problem}")))?;
            let band = band.map(|width| BandArg {
                width,
                units: match band_units {
                    Some(BandUnitsArg::World) => BandUnits::World,
                    _ => BandUnits::Voxels,
                },
            });
            let sign = sign.map_or(SignChoice::Auto, SignArg::choice);
            if let Some(dir) = out_dir {
                if out.is_some() || sparse.is_some() || vti.is_some() || preview.is_some() {
                    return Err(Error::Usage(
                        "--out-dir writes DIR/NAME.npz for each mesh: leave out --out, --sparse, \
                         --vti and --preview"
                            .into(),
                    ));
                }
                let extension = match out_format {
                    Some(OutFormatArg::Zarr) => "zarr",
                    _ => "npz",
                };
                return for_each_mesh(
                    &mesh,
                    (&dir, extension),
                    "grid samples",
                    &options,
                    |mesh, out, engine, progress| {
                        let job = SdfJob {
                            mesh,
                            res,
                            region,
                            sign,
                            out: Some(out),
                            band,
                            chunk,
                            sparse: None,
                            vti: None,
                            preview: None,
                        };
                        run_sdf(&job, engine, progress)
                    },
                );
            }
            let mesh = only_mesh(mesh)?;
            let job = SdfJob {
                mesh: &mesh,
                res,
                region,
                sign,
                out: out.as_deref(),
                band,
                chunk,
                sparse: sparse.as_deref(),
                vti: vti.as_deref(),
                preview: preview.as_deref(),
            };
            report("grid samples", |progress| {
                run_sdf(&job, boxed(opening(&options)), progress)
            })
        }
        Command::Sample {
            mesh,
            out_dir,
            surface,
            near,
            sigma,
            uniform,
            pad,
            seed,
            sign,
            out,
            layout,
        } => {
            let sigmas = match sigma {
                Some(text) => text
                    .split(',')
                    .map(|t| {
                        t.trim().parse::<f64>().map_err(|_| {
                            Error::Usage(format!("--sigma {text:?}: expected S or S1,S2,..."))
                        })
                    })
                    .collect::<Result<Vec<f64>, Error>>()?,
                None => Vec::new(),
            };
            let spec = SampleSpec {
                surface,
                near,
                sigmas,
                uniform,
                pad,
                seed,
            };
            let sign = sign.map_or(SignChoice::Auto, SignArg::choice);
            let layout = match layout {
                LayoutArg::Columns => SampleLayout::Columns,
                LayoutArg::Deepsdf => SampleLayout::DeepSdf,
            };
            if let Some(dir) = out_dir {
                if out.is_some() {
                    return Err(Error::Usage(
                        "--out-dir writes DIR/NAME.npz for each mesh: leave out --out".into(),
                    ));
                }
                return for_each_mesh(
                    &mesh,
                    (&dir, "npz"),
                    "training samples",
                    &options,
                    |mesh, out, engine, progress| {
                        let job = SampleJob {
                            mesh,
                            spec: spec.clone(),
                            sign,
                            out,
                            layout,
                        };
                        run_sample(&job, engine, progress)
                    },
                );
            }
            let mesh = only_mesh(mesh)?;
            let Some(out) = out else {
                return Err(Error::Usage(
                    "sample needs --out X.npz (or --out-dir D)".into(),
                ));
            };
            let job = SampleJob {
                mesh: &mesh,
                spec,
                sign,
                out: &out,
                layout,
            };
            report("training samples", |progress| {
                run_sample(&job, boxed(opening(&options)), progress)
            })
        }
        Command::Distance {
            a,
            b,
            samples,
            seed,
            sign,
            out,
            preview,
        } => {
            let job = DistanceJob {
                a: &a,
                b: &b,
                samples,
                seed,
                sign: sign.map_or(SignChoice::Method(Sign::None), SignArg::choice),
                out: out.as_deref(),
                preview: preview.as_deref(),
            };
            let report = with_progress(|progress| run_distance(&job, opening(&options), progress))?;
            say!("closest: {}", report.lines());
            Ok(())
        }
        Command::Segments { a, b, out, fields } => {
            let fields = fields_arg(Family::Segments, fields.as_deref())?;
            report("segment pairs", |progress| {
                run_segments(&a, &b, &out, fields, opening(&options), progress)
            })
        }
        Command::Contacts {
            shapes,
            mesh,
            spheres,
            bodies,
            paired,
            out,
            fields,
        } => {
            let engine = opening(&options);
            if let Some(bodies) = bodies {
                let fields = fields_arg(Family::Bodies, fields.as_deref())?;
                let targets = match (&shapes, &mesh) {
                    (Some(path), _) => BodyTargets::Scene { path, paired },
                    (None, Some(path)) => BodyTargets::Mesh(path),
                    (None, None) => unreachable!("clap requires --shapes or --mesh"),
                };
                let job = BodyJob {
                    bodies: &bodies,
                    targets,
                    out: &out,
                    fields,
                    chunk_bodies: BODY_CHUNK,
                };
                return report("body contacts", |progress| {
                    run_body_contacts(&job, engine, progress)
                });
            }
            let (Some(shapes), Some(spheres)) = (shapes, spheres) else {
                return Err(Error::Usage(
                    "contacts: spheres are answered against --shapes (a mesh takes --bodies)"
                        .into(),
                ));
            };
            let fields = fields_arg(Family::Contacts, fields.as_deref())?;
            report("sphere contacts", |progress| {
                run_contacts(&shapes, &spheres, &out, fields, engine, progress)
            })
        }
        Command::Serve(args) => {
            let config = args.config()?;
            let options = EngineOptions {
                jobs_at_once: args.jobs_at_once.map(|n| n as usize),
                ..options
            };
            let engine = Engine::new(&options)?;
            closest::serve::run(engine, options, config, |address| {
                say!("closest: listening on http://{address}");
            })
        }
        Command::Bench {
            points,
            repeats,
            scenes,
        } => {
            let engine = Engine::new(&options)?;
            let (repeats, out) = (repeats.max(1), &mut std::io::stdout());
            if scenes {
                closest::bench::run_scene_table(&engine, points, repeats, None, out)
            } else {
                closest::bench::run_table(&engine, points, repeats, out)
            }
        }
    }
}

/// The engine of a one-shot job, opened on another thread from now while the job reads its
/// inputs (`EngineOpening`): the job asks for it once they are read.
fn opening(options: &EngineOptions) -> impl FnOnce() -> Result<Engine, Error> + use<> {
    let opening = EngineOpening::start(options);
    move || opening.engine()
}

/// [`opening`]'s engine boxed, as the grid and sample jobs take it.
fn boxed(
    engine: impl FnOnce() -> Result<Engine, Error>,
) -> impl FnOnce() -> Result<Box<Engine>, Error> {
    move || engine().map(Box::new)
}

/// `--fields LIST`, or every field of the family.
fn fields_arg(family: Family, list: Option<&str>) -> Result<Fields, Error> {
    list.map_or(Ok(Fields::all(family)), |list| {
        Fields::parse(family, list).map_err(|e| Error::Usage(format!("--{e}")))
    })
}

/// `N` comma-separated numbers, or a usage error naming the option.
fn numbers<const N: usize>(option: &str, text: &str) -> Result<[f64; N], Error> {
    let values: Vec<f64> = text
        .split(',')
        .map(|t| t.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            Error::Usage(format!(
                "{option} {text:?}: expected numbers separated by commas"
            ))
        })?;
    values.try_into().map_err(|v: Vec<f64>| {
        Error::Usage(format!(
            "{option} {text:?}: expected {N} numbers, got {}",
            v.len()
        ))
    })
}

/// Run a job with a progress bar (on a terminal) and print its summary line.
fn report(
    what: &str,
    job: impl FnOnce(&mut dyn FnMut(usize, usize)) -> Result<Summary, Error>,
) -> Result<(), Error> {
    let summary = with_progress(job)?;
    say!("closest: {}", summary.line(what));
    Ok(())
}

/// Run `job` under a progress bar (on a terminal), cleared when it ends.
fn with_progress<T>(
    job: impl FnOnce(&mut dyn FnMut(usize, usize)) -> Result<T, Error>,
) -> Result<T, Error> {
    let bar = progress_bar();
    // The tests' stand-in for a defect mid-job (`tests/cli.rs`), once rows are out: a panic,
    // or a panic while one unwinds (the process aborts, no guard's drop runs).
    let fault = std::env::var("CLOSEST_TEST_FAULT").unwrap_or_default();
    let result = job(&mut |done, total| {
        if done > 0 && fault.ends_with("panic-mid-job") {
            struct PanicsWhenDropped;
            impl Drop for PanicsWhenDropped {
                fn drop(&mut self) {
                    panic!("a second panic while unwinding (CLOSEST_TEST_FAULT)");
                }
            }
            // Made only when asked: one made and dropped would panic here.
            let _second = if fault == "double-panic-mid-job" {
                Some(PanicsWhenDropped)
            } else {
                None
            };
            panic!("a panic mid-job (CLOSEST_TEST_FAULT)");
        }
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(result)
}

/// The one mesh of a job without --out-dir.
fn only_mesh(mut meshes: Vec<PathBuf>) -> Result<PathBuf, Error> {
    if meshes.len() != 1 {
        return Err(Error::Usage(format!(
            "{} meshes given: several meshes need --out-dir D",
            meshes.len()
        )));
    }
    Ok(meshes.remove(0))
}

/// The mesh files `inputs` name: files as given, directories' mesh files (`MeshFormat::of`)
/// in name order; two that would write the same output name are a usage error.
fn mesh_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let is_mesh = |p: &std::path::Path| closest::io::MeshFormat::of(p).is_some();
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let entries = std::fs::read_dir(input).map_err(|e| Error::BadFile {
                file: input.display().to_string(),
                problem: format!("cannot list the directory: {e}"),
            })?;
            // Hidden files are left out (macOS' `._NAME.obj` resource forks in copied datasets
            // are not meshes); a link to nothing is kept, to be reported as a mesh that failed.
            let listed = |p: &std::path::Path| {
                let hidden = p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'));
                let dangling = p.is_symlink() && !p.exists();
                !hidden && is_mesh(p) && (p.is_file() || dangling)
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| listed(p))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    let mut names = std::collections::HashMap::new();
    for file in &files {
        let stem = file.file_stem().unwrap_or_default().to_os_string();
        if let Some(other) = names.insert(stem, file) {
            return Err(Error::Usage(format!(
                "{} and {} would both write {}.npz",
                other.display(),
                file.display(),
                file.file_stem().unwrap_or_default().to_string_lossy()
            )));
        }
    }
    if files.is_empty() {
        return Err(Error::Usage(
            "no meshes (.obj, .stl, .ply, .off, .glb, .gltf) in the inputs".into(),
        ));
    }
    Ok(files)
}

/// Run `job` for every mesh `inputs` name, one engine for all of them (opened at the first
/// mesh that gets that far), each writing `dir/NAME.extension`: a bar over the meshes, a line per
/// mesh, a failed mesh reported and skipped, the failures listed at the end (exit 2). An
/// adapter that cannot be opened or a device lost ends the run.
fn for_each_mesh(
    inputs: &[PathBuf],
    (dir, extension): (&std::path::Path, &str),
    what: &str,
    options: &EngineOptions,
    mut job: impl FnMut(
        &std::path::Path,
        &std::path::Path,
        &mut dyn FnMut() -> Result<std::sync::Arc<Engine>, Error>,
        &mut dyn FnMut(usize, usize),
    ) -> Result<Summary, Error>,
) -> Result<(), Error> {
    let meshes = mesh_files(inputs)?;
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    // Opened beside the first mesh's read, and kept for the rest.
    let mut opening = Some(EngineOpening::start(options));
    let mut engine: Option<std::sync::Arc<Engine>> = None;
    let mut failed = Vec::new();
    let bar = progress_bar();
    if let Some(bar) = &bar {
        bar.set_length(meshes.len() as u64);
    }
    for (k, mesh) in meshes.iter().enumerate() {
        let name = mesh
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // The stem as the file system has it: a lossy one gave names that differ only in bytes
        // that are not UTF-8 one output, the second mesh's overwriting the first's.
        let mut file_name = mesh.file_stem().unwrap_or_default().to_os_string();
        file_name.push(format!(".{extension}"));
        let out = dir.join(file_name);
        let mut open = || -> Result<std::sync::Arc<Engine>, Error> {
            if engine.is_none() {
                let opened = match opening.take() {
                    Some(opening) => opening.engine(),
                    None => Engine::new(options),
                };
                engine = Some(std::sync::Arc::new(opened?));
            }
            Ok(engine.clone().expect("opened"))
        };
        let result = job(mesh, &out, &mut open, &mut |_, _| {});
        let line = match result {
            Ok(summary) => summary.line(what),
            Err(e @ (Error::NoAdapter(_) | Error::Gpu(_))) => return Err(e),
            Err(e) => {
                failed.push(name.clone());
                format!("failed: {e}")
            }
        };
        let line = format!("closest: [{}/{}] {name}: {line}", k + 1, meshes.len());
        match &bar {
            Some(bar) => {
                bar.println(line);
                bar.set_position(k as u64 + 1);
            }
            None => say!("{line}"),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if failed.is_empty() {
        say!(
            "closest: {} meshes, all written to {}",
            meshes.len(),
            dir.display()
        );
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{} of {} meshes failed: {}",
        failed.len(),
        meshes.len(),
        failed.join(", ")
    )))
}

/// A bar on a terminal only; it appears once a job has run for a second.
fn progress_bar() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::hidden();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} rows, eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let visible = bar.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(1));
        if !visible.is_finished() {
            visible.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    });
    Some(bar)
}

fn info(options: &EngineOptions) -> Result<(), Error> {
    use std::fmt::Write as _;
    // Written once, its failure an error (a full disk): `println!` panicked.
    let mut text = String::new();
    let adapters = closest::gpu::list_adapters();
    let _ = writeln!(text, "adapters ({}):", adapters.len());
    for a in &adapters {
        let i = &a.info;
        let _ = writeln!(
            text,
            "  {} | {:?} | {:?} | driver {} {}",
            i.name, i.backend, i.device_type, i.driver, i.driver_info
        );
    }
    let engine = Engine::new(options)?;
    let l = engine.limits();
    let _ = writeln!(text, "chosen: {}", engine.describe());
    let _ = writeln!(
        text,
        "  max_storage_buffer_binding_size: {}",
        l.max_storage_buffer_binding_size
    );
    let _ = writeln!(
        text,
        "  max_uniform_buffer_binding_size: {}",
        l.max_uniform_buffer_binding_size
    );
    let _ = writeln!(text, "  max_buffer_size: {}", l.max_buffer_size);
    let _ = writeln!(
        text,
        "  max_texture_dimension_2d: {}, max_texture_array_layers: {} (scene texels)",
        l.max_texture_dimension_2d, l.max_texture_array_layers
    );
    let _ = writeln!(
        text,
        "  max_compute_workgroups_per_dimension: {}",
        l.max_compute_workgroups_per_dimension
    );
    let _ = writeln!(
        text,
        "  max_compute_invocations_per_workgroup: {}",
        l.max_compute_invocations_per_workgroup
    );
    let _ = writeln!(
        text,
        "  unified memory (in-place mapping): {}",
        engine.unified_memory()
    );
    let _ = writeln!(
        text,
        "  rows per chunk: {}; mesh walks: {}",
        engine.chunk_rows(),
        if engine.seeded_mesh_rounds() {
            "seeded rounds"
        } else {
            "one dispatch a chunk"
        }
    );
    let i = engine.adapter_info();
    let _ = writeln!(
        text,
        "  subgroup size: {}..{}; scene kernels: {}",
        i.subgroup_min_size,
        i.subgroup_max_size,
        engine.scene_kernels()
    );
    std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()).map_err(|source| {
        Error::Write {
            path: "standard output".into(),
            source,
        }
    })
}
