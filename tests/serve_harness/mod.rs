//! The harness of the service's tests (`tests/serve.rs`, `tests/serve_hostile.rs`): the real
//! binary on a loopback port (port 0, so a free one), started and stopped by each test, and
//! HTTP/1.1 requests made by hand, so that a test can send what no client library would.
#![allow(dead_code, reason = "each test file uses part of the harness")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use closest::io::npy;

pub const BIN: &str = env!("CARGO_BIN_EXE_closest");

pub fn meshes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/meshes")
}

/// A running server; killed if a test fails before stopping it.
pub struct Server {
    pub child: Child,
    pub address: String,
    /// Every line it has written to stderr (its access log among them).
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        Server::start_with(args, &[])
    }

    /// With `env` set for the server's process.
    pub fn start_with(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Server {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the closest binary runs");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines
                .next()
                .expect("the server says where it listens")
                .unwrap();
            if let Some(rest) = line.strip_prefix("closest: listening on http://") {
                break rest.to_string();
            }
        };
        // Keep draining its messages so it never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            address,
            log,
        }
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        request(&self.address, method, path, headers, body)
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], &[])
    }

    pub fn post(&self, path: &str, body: &[u8]) -> Reply {
        self.request("POST", path, &[], body)
    }

    pub fn put(&self, path: &str, body: &[u8]) -> Reply {
        self.request("PUT", path, &[], body)
    }

    pub fn terminate(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Wait (at most 60 s) for the process to end; its exit code.
    pub fn wait(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the server did not stop within 60 s");
    }
}

impl Server {
    /// What the server's threads are doing, for a test that waited in vain: each thread's
    /// name, state, CPU time and kernel wait channel (from /proc), then every thread's stack
    /// where gdb is installed (a deadlock shows as threads asleep in locks, a slow job as
    /// CPU time growing).
    pub fn threads_report(&self) -> String {
        let pid = self.child.id();
        let mut report = String::new();
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
        for task in tasks.into_iter().flatten().flatten() {
            let read =
                |name: &str| std::fs::read_to_string(task.path().join(name)).unwrap_or_default();
            // stat: "tid (comm) state ... utime stime" (fields 14 and 15, in ticks).
            let stat = read("stat");
            let after_name = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
            let fields: Vec<&str> = after_name.split_whitespace().collect();
            let ticks = |k: usize| fields.get(k).and_then(|f| f.parse::<u64>().ok());
            report += &format!(
                "{:?} {} state {} cpu ticks {} wchan {}\n",
                task.file_name(),
                read("comm").trim(),
                fields.first().unwrap_or(&"?"),
                ticks(11).unwrap_or(0) + ticks(12).unwrap_or(0),
                read("wchan").trim(),
            );
        }
        let stacks = Command::new("timeout")
            .args(["60", "gdb", "-p", &pid.to_string(), "-batch", "-nx"])
            .args(["-ex", "thread apply all bt 16"])
            .output();
        if let Ok(out) = stacks {
            report += &String::from_utf8_lossy(&out.stdout);
        }
        report
    }
}

impl Drop for Server {
    /// Asked to stop first, so that it removes its private directory (a server killed
    /// outright leaves it to the next server's start); killed if it has not within 10 s.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: a signal to our own child, which has not been reaped.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.text()))
    }
    /// An error reply: this status, JSON `{"error": ...}` containing every needle.
    pub fn assert_error(&self, status: u16, needles: &[&str]) {
        assert_eq!(self.status, status, "{}", self.text());
        let message = self.json()["error"].as_str().unwrap().to_string();
        for needle in needles {
            assert!(message.contains(needle), "`{needle}` not in: {message}");
        }
    }
}

/// One HTTP/1.1 request on its own connection (`Connection: close`).
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    // The Host is the address unless the test names its own.
    let host = if headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        String::new()
    } else {
        format!("Host: {address}\r\n")
    };
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\n{host}Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before taking the whole body.
    let _ = stream.write_all(body);
    read_reply(stream)
}

/// A POST whose body is sent chunked (no Content-Length), piece by piece with pauses.
pub fn post_chunked(address: &str, path: &str, pieces: &[&[u8]]) -> Reply {
    chunked(address, "POST", path, pieces)
}

pub fn chunked(address: &str, method: &str, path: &str, pieces: &[&[u8]]) -> Reply {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    for piece in pieces {
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        if stream.write_all(&chunk).is_err() {
            break; // answered early (413)
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    read_reply(stream)
}

pub fn read_reply(mut stream: TcpStream) -> Reply {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

pub fn npy_bytes(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    npy::write_header(&mut out, descr, shape).unwrap();
    out.extend_from_slice(data);
    out
}

/// `n` float32 points around the box `[lo, hi]` from a fixed sequence.
pub fn points(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<[f32; 3]> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lo + (hi - lo) * ((x >> 40) as f32 / (1u64 << 24) as f32)
    };
    (0..n).map(|_| [next(), next(), next()]).collect()
}

pub fn points_npy(points: &[[f32; 3]]) -> Vec<u8> {
    npy_bytes("<f4", &[points.len(), 3], bytemuck::cast_slice(points))
}

/// What the CLI writes for `args` (its `--out` a file in `dir`).
pub fn cli_npz(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = dir.join("cli.npz");
    let done = Command::new(BIN)
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::read(out).unwrap()
}

/// An uncompressed zip of `members`, as numpy.savez writes an .npz.
pub fn stored_zip(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut archive = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        archive.start_file(*name, stored).unwrap();
        archive.write_all(bytes).unwrap();
    }
    archive.finish().unwrap().into_inner()
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The value of the metric line `name` (no labels).
pub fn metric(server: &Server, name: &str) -> f64 {
    let text = server.get("/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}
