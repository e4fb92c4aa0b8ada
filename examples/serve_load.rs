//! Load on `closest serve` beside one in-process call on the same points, same run: a release
//! server on a free loopback port, the bunny resident, then for each client count (threads,
//! each with one keep-alive connection) a fixed number of `sign=pseudonormal&fields=distance`
//! queries; rows/s, p50/p99 latency, and the rate of one in-process call on all the points.
//! Every served answer must equal the in-process one bit for bit, and a sample of those must
//! lie within SPEC §3's bound of a brute-force f64 distance, before any figure is printed.
//! `--idle N` runs every configuration twice, alone and then with N half-open connections (a
//! request head never finished) held open beside it, the server's header timeout raised so
//! that they stay. Bounded: each configuration stops after 120 s whatever.
//!
//! `cargo run --release --example serve_load -- [--server target/release/closest]
//!  [--mesh M] [--clients 1,8,64] [--rows 1000,100000] [--requests 640] [--idle 0]
//!  [--server-arg ARG]...`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use closest::fields::{DISTANCE, Family, Fields};
use closest::io::load_mesh;
use closest::mesh::{Mesh, Sign, closest_feature};
use closest::{DVec3, Engine, EngineOptions};

const TIME_LIMIT: Duration = Duration::from_secs(120);
const ROUTE: &str = "/v1/meshes/load/query?sign=pseudonormal&fields=distance";

struct Options {
    server: PathBuf,
    mesh: PathBuf,
    clients: Vec<usize>,
    rows: Vec<usize>,
    requests: usize,
    idle: usize,
    server_args: Vec<String>,
}

fn list(value: &str) -> Vec<usize> {
    value
        .split(',')
        .map(|v| v.parse().expect("a comma-separated list of counts"))
        .collect()
}

fn options() -> Options {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut options = Options {
        server: root.join("target/release/closest"),
        mesh: root.join("../shared/data/meshes/stanford-bunny.obj"),
        clients: vec![1, 8, 64],
        rows: vec![1_000, 100_000],
        requests: 640,
        idle: 0,
        server_args: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => options.server = value.into(),
            "--mesh" => options.mesh = value.into(),
            "--clients" => options.clients = list(&value),
            "--rows" => options.rows = list(&value),
            "--requests" => options.requests = value.parse().expect("--requests: a count"),
            "--idle" => options.idle = value.parse().expect("--idle: a count"),
            "--server-arg" => options.server_args.push(value),
            _ => panic!("unknown flag {flag}"),
        }
    }
    options
}

/// The server, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(path: &Path, args: &[String]) -> (Server, String) {
    let mut child = Command::new(path)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (cargo build --release first)", path.display()));
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    stderr
        .read_line(&mut line)
        .expect("the server's first line");
    let address = line
        .trim()
        .rsplit_once("//")
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .1
        .to_string();
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Server(child), address)
}

/// One HTTP/1.1 request on a kept-alive connection; the status and the whole body.
fn request(
    stream: &mut BufReader<TcpStream>,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let socket = stream.get_mut();
    socket.write_all(head.as_bytes()).expect("send the head");
    socket.write_all(body).expect("send the body");
    let mut line = String::new();
    stream.read_line(&mut line).expect("a status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        stream.read_line(&mut line).expect("a header line");
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').expect("a header");
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = Some(value.trim().parse::<usize>().expect("a length")),
            "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            stream.read_line(&mut line).expect("a chunk size");
            let size = usize::from_str_radix(line.trim(), 16).expect("a hex chunk size");
            let start = body.len();
            body.resize(start + size + 2, 0);
            stream.read_exact(&mut body[start..]).expect("a chunk");
            body.truncate(start + size);
            if size == 0 {
                break;
            }
        }
    } else {
        body.resize(length.expect("a Content-Length or chunks"), 0);
        stream.read_exact(&mut body).expect("the body");
    }
    (status, body)
}

fn connect(address: &str) -> BufReader<TcpStream> {
    let socket = TcpStream::connect(address).expect("connect to the server");
    socket.set_nodelay(true).expect("nodelay");
    BufReader::new(socket)
}

/// A `.npy` of float32 rows of 3.
fn npy(points: &[[f32; 3]]) -> Vec<u8> {
    let mut out = Vec::new();
    closest::io::npy::write_header(&mut out, "<f4", &[points.len(), 3]).expect("in memory");
    out.extend_from_slice(bytemuck::cast_slice(points));
    out
}

/// The `distance` column of an answer `.npz`, as float32 bits.
fn distances(npz: &[u8]) -> Vec<u32> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(npz)).expect("an .npz answer");
    let mut entry = archive.by_name("distance.npy").expect("a distance column");
    let mut bytes = Vec::new();
    entry.read_to_end(&mut bytes).expect("read the column");
    let mut data = &bytes[..];
    closest::io::npy::read_header(&mut data).expect("an .npy column");
    bytemuck::pod_collect_to_vec(data)
}

/// Brute-force f64 distance from `p` to the mesh: the independent check of a sample.
fn brute_force_distance(mesh: &Mesh, p: DVec3) -> f64 {
    (0..mesh.triangles.len())
        .map(|t| (closest_feature(p, mesh.corners(t)).0 - p).length())
        .fold(f64::INFINITY, f64::min)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Connections that send part of a request's head and never finish it.
fn half_open(address: &str, count: usize) -> Vec<TcpStream> {
    (0..count)
        .filter_map(|_| {
            let mut socket = TcpStream::connect(address).ok()?;
            socket
                .write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")
                .ok()?;
            Some(socket)
        })
        .collect()
}

fn main() -> closest::Result<()> {
    let options = options();
    let engine = Engine::new(&EngineOptions::default())?;
    let mesh = load_mesh(&options.mesh)?;
    let (lo, hi) = mesh.bounds();
    let mut server_args = options.server_args.clone();
    if options.idle > 0 {
        server_args.extend(["--header-timeout-s".into(), "3600".into()]);
        server_args.extend([
            "--max-connections".into(),
            (options.idle + 1024).to_string(),
        ]);
    }
    let (server, address) = start_server(&options.server, &server_args);
    let format = options
        .mesh
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("obj");
    let file = std::fs::read(&options.mesh).expect("the mesh file");
    let (status, body) = request(
        &mut connect(&address),
        "PUT",
        &format!("/v1/meshes/load?format={format}"),
        &file,
    );
    assert!(
        status == 201 || status == 200,
        "PUT: {status} {}",
        String::from_utf8_lossy(&body)
    );
    let local = engine.upload_mesh(mesh.clone())?;
    println!(
        "{}; {}; server and clients on one machine",
        engine.describe(),
        options.mesh.display(),
    );
    println!(
        "{:>9} {:>8} {:>6} {:>9} {:>14} {:>8} {:>8} {:>18} {:>10}",
        "rows/req",
        "clients",
        "idle",
        "requests",
        "served rows/s",
        "p50 ms",
        "p99 ms",
        "in-process rows/s",
        "served/in"
    );
    let idle_counts: Vec<usize> = if options.idle > 0 {
        vec![0, options.idle]
    } else {
        vec![0]
    };
    let distance_only = Fields::from_bits(Family::Hits, DISTANCE);
    for &rows in &options.rows {
        let requests = options.requests.max(1);
        let points: Vec<[f32; 3]> = closest::bench::padded_box_points(lo, hi, rows * requests)
            .iter()
            .map(|p| p.map(|x| x as f32))
            .collect();
        let points_f64: Vec<[f64; 3]> = points.iter().map(|p| p.map(f64::from)).collect();
        let query_local = |points: &[[f64; 3]]| -> closest::Result<closest::Columns> {
            let mut columns = closest::Columns::new(distance_only, points.len());
            let job = closest::engine::MeshQuery {
                mesh: &local,
                points: closest::Points::F64(points),
                sign: Sign::Pseudonormal,
                fields: distance_only,
            };
            engine.query_mesh(job, &mut columns).map(|()| columns)
        };
        // The pipelines are built outside the timing, as the server's were by the first query.
        query_local(&points_f64[..rows])?;
        let started = Instant::now();
        let expected = query_local(&points_f64)?;
        let in_process = points.len() as f64 / started.elapsed().as_secs_f64();
        let expected: Vec<u32> = expected
            .get("distance")
            .expect("a distance column")
            .to_vec();
        for (k, p) in points_f64
            .iter()
            .enumerate()
            .step_by((points.len() / 200).max(1))
        {
            let truth = brute_force_distance(&mesh, DVec3::from_array(*p));
            let got = f32::from_bits(expected[k]).abs() as f64;
            let scale = p
                .iter()
                .fold(hi.max_abs().max(lo.max_abs()), |m, x| m.max(x.abs()));
            assert!(
                (got - truth).abs() <= closest::tolerance(scale),
                "row {k}: {got} against the f64 brute force {truth}"
            );
        }
        let bodies: Vec<Vec<u8>> = points.chunks(rows).map(npy).collect();
        // The server builds its pipelines on its first query: outside the timings too.
        let (status, answer) = request(&mut connect(&address), "POST", ROUTE, &bodies[0]);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        for (&clients, &idle_count) in options
            .clients
            .iter()
            .flat_map(|c| idle_counts.iter().map(move |i| (c, i)))
        {
            let idle = half_open(&address, idle_count);
            std::thread::sleep(Duration::from_millis(200));
            let deadline = Instant::now() + TIME_LIMIT;
            let started = Instant::now();
            let latencies: Vec<Vec<f64>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..clients)
                    .map(|client| {
                        let (bodies, expected, address) = (&bodies, &expected, &address);
                        scope.spawn(move || {
                            let mut stream = connect(address);
                            let mut latencies = Vec::new();
                            for k in (client..bodies.len()).step_by(clients) {
                                if Instant::now() > deadline {
                                    break;
                                }
                                let sent = Instant::now();
                                let (status, answer) =
                                    request(&mut stream, "POST", ROUTE, &bodies[k]);
                                latencies.push(sent.elapsed().as_secs_f64());
                                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
                                assert!(
                                    distances(&answer) == expected[k * rows..(k + 1) * rows],
                                    "request {k}: the served answer differs from the in-process one"
                                );
                            }
                            latencies
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a client"))
                    .collect()
            });
            let seconds = started.elapsed().as_secs_f64();
            let mut all: Vec<f64> = latencies.into_iter().flatten().collect();
            all.sort_by(f64::total_cmp);
            let served = (all.len() * rows) as f64 / seconds;
            println!(
                "{rows:>9} {clients:>8} {:>6} {:>9} {served:>14.0} {:>8.2} {:>8.2} {in_process:>18.0} {:>10.2}",
                idle.len(),
                all.len(),
                percentile(&all, 0.5) * 1e3,
                percentile(&all, 0.99) * 1e3,
                served / in_process
            );
            drop(idle);
        }
    }
    drop(server);
    Ok(())
}
