//! `closest serve`'s options (SPEC §7) and the service's configuration made of them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// `--listen`'s value: `IP:PORT`, or `localhost:PORT` as 127.0.0.1 (the one name taken: any
/// other would be looked up, and may resolve beyond loopback).
fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("`{port}` is not a port (0 to 65535)"))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(
        "give an IP address and a port, such as 127.0.0.1:7341, [::1]:7341, 0.0.0.0:7341 \
         or localhost:7341"
            .into(),
    )
}

/// `closest serve`'s command line.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (an IP address and port; `localhost:PORT` is 127.0.0.1); beyond
    /// loopback a --token-file is required.
    #[arg(long, default_value = "127.0.0.1:7341", value_parser = listen_address)]
    pub listen: SocketAddr,
    /// File holding the bearer token every request but the health checks must carry.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// File holding the token PUT and DELETE must carry instead (queries keep --token-file's).
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// Without a token, a Host this server also answers besides loopback names (repeatable).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Largest request body, in MiB (larger ones get 413 before they are read whole).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_request_mb: u64,
    /// Request bodies and answers held in memory at once, in MiB, all requests together (past
    /// it, 503); an answer is held until its client has taken it or gone.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_inflight_mb: u64,
    /// Most rows in one shared dispatch of concurrent queries on a target.
    #[arg(long, default_value_t = 262_144, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_rows: u64,
    /// Longest a query waits for others to share its dispatch when its target has no batch
    /// running, in milliseconds. Under load no wait is needed: a batch gathers the queries that
    /// come while the target's running batches run, and goes when they end.
    #[arg(long, default_value_t = 0)]
    pub batch_delay_ms: u64,
    /// Queries waiting for a dispatch beyond which new ones get 503 with Retry-After.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_queue: u64,
    /// Device memory the resident targets may take, in MiB (a PUT beyond it gets 507).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_resident_mb: u64,
    /// Most resident targets (a PUT of one more gets 507).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_targets: u64,
    /// Threads that run queries on the device, shared by all targets (default: the CPU's
    /// threads, at most 8).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub workers: Option<u64>,
    /// Batches that run through the device at once, each with its own chunk buffers, so that
    /// one's host work overlaps another's device work (default 4 on a hardware GPU, 1 on a CPU
    /// adapter, whose device is the host's own cores). Results do not change.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=16))]
    pub jobs_at_once: Option<u64>,
    /// Longest a request may take, upload and answer included (then 408).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_s: u64,
    /// A connection that has not sent a whole request head this long after it opened (or
    /// after the head's first byte) is closed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_s: u64,
    /// A keep-alive connection with no traffic this long is closed, and a request whose body
    /// sends nothing this long is refused (408).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_s: u64,
    /// Open connections at most; more are closed as they arrive.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// On SIGTERM or SIGINT, the longest the requests in flight may take to finish; then the
    /// connections left are closed and the server exits 0.
    #[arg(long, default_value_t = 30)]
    pub drain_timeout_s: u64,
    /// Most samples one SDF grid request may ask for (4 bytes each in the answer).
    #[arg(long, default_value_t = 1 << 24, value_parser = clap::value_parser!(u64).range(8..))]
    pub max_grid_samples: u64,
    /// Targets to load before the service reports ready: TOML, one `[[target]]` table each
    /// with `name` and a `mesh` or `scene` path (relative to the file).
    #[arg(long)]
    pub targets: Option<PathBuf>,
    /// The access log's lines on stderr: text or json.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Test hooks (`X-Closest-Test-Fault` request header: `panic-handler`, `panic-worker`,
    /// `lose-device`), for the fault-isolation tests only.
    #[arg(long, hide = true)]
    pub test_hooks: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// How the service runs.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// Every request but the health checks must bear it (`Authorization: Bearer TOKEN`).
    pub token: Option<String>,
    /// PUT and DELETE must bear this one instead, when given.
    pub admin_token: Option<String>,
    /// Host names served without a token besides loopback ones (lower case, no port).
    pub allow_hosts: Vec<String>,
    pub max_request_bytes: usize,
    pub max_inflight_bytes: usize,
    pub batch_rows: usize,
    pub batch_delay: Duration,
    /// Requests waiting for a batch beyond which new ones get 503.
    pub max_queue: usize,
    pub max_resident_bytes: u64,
    pub max_targets: usize,
    pub workers: usize,
    /// A request not answered by then (a stalled upload included) gets 408.
    pub request_timeout: Duration,
    pub limits: super::listener::Limits,
    /// The most samples one SDF grid may ask for (its answer is 4 bytes a sample).
    pub max_grid_samples: usize,
    pub targets: Vec<TargetSpec>,
    pub log_format: LogFormat,
    pub test_hooks: bool,
}

/// A target of `--targets FILE`.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub name: String,
    pub mesh: Option<PathBuf>,
    pub scene: Option<PathBuf>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetsFile {
    #[serde(default)]
    target: Vec<TargetSpec>,
}

/// The longest token taken: longer ones could not be sent in a request's head.
const MAX_TOKEN_BYTES: usize = 4096;

/// A token file's one line: printable ASCII without spaces (RFC 6750's bearer tokens), since
/// a token a client cannot send in a header would start a service nobody can use.
fn read_token(path: &Path) -> Result<String> {
    use std::io::Read;
    let bad = |problem: String| Error::BadFile {
        file: path.display().to_string(),
        problem,
    };
    let read = |source| Error::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| {
            file.take(MAX_TOKEN_BYTES as u64 + 2)
                .read_to_end(&mut bytes)
        })
        .map_err(read)?;
    let token = bytes.trim_ascii();
    if token.is_empty() {
        return Err(bad("the token file is empty".into()));
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(bad(format!(
            "the token is longer than {MAX_TOKEN_BYTES} bytes, more than a request's head takes"
        )));
    }
    if let Some(at) = token.iter().position(|b| !b.is_ascii_graphic()) {
        return Err(bad(format!(
            "the token holds a space, line break, control or non-ASCII byte (0x{:02x}) at byte \
             {at}: a token is one line of printable ASCII without spaces",
            token[at]
        )));
    }
    Ok(String::from_utf8_lossy(token).into_owned())
}

/// `--targets FILE`: every entry named, with one path, relative to the file's folder.
fn read_targets(path: &Path) -> Result<Vec<TargetSpec>> {
    let bad = |problem: String| Error::BadFile {
        file: path.display().to_string(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: TargetsFile = toml::from_str(&text).map_err(|e| bad(toml_problem(&text, &e)))?;
    let folder = path.parent().unwrap_or(Path::new("."));
    let mut names = std::collections::HashSet::new();
    file.target
        .into_iter()
        .enumerate()
        .map(|(k, mut spec)| {
            super::check_name(&spec.name).map_err(|e| bad(format!("target {k}: {}", e.message)))?;
            if !names.insert(spec.name.clone()) {
                return Err(bad(format!("target {k}: `{}` is named twice", spec.name)));
            }
            match (&mut spec.mesh, &mut spec.scene) {
                (Some(p), None) | (None, Some(p)) => *p = folder.join(&*p),
                _ => {
                    return Err(bad(format!(
                        "target {k} (`{}`): give one of `mesh` or `scene`",
                        spec.name
                    )));
                }
            }
            Ok(spec)
        })
        .collect()
}

/// Where and what a TOML error is, without the file's line quoted whole (toml's own message
/// shows it, however long).
fn toml_problem(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return e.message().to_string();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |n| n + 1) + 1;
    format!(
        "TOML parse error at line {line}, column {column}: {}",
        e.message()
    )
}

impl ServeArgs {
    /// The configuration, with the files it names read; refuses to listen beyond loopback
    /// without a token (SPEC §7).
    pub fn config(&self) -> Result<Config> {
        let token = self.token_file.as_deref().map(read_token).transpose()?;
        let admin_token = self
            .admin_token_file
            .as_deref()
            .map(read_token)
            .transpose()?;
        let targets = match &self.targets {
            Some(path) => read_targets(path)?,
            None => Vec::new(),
        };
        let mb = |n: u64| (n as usize).saturating_mul(1 << 20);
        let workers = self.workers.map_or_else(
            || std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
            |n| n as usize,
        );
        let config = Config {
            listen: self.listen,
            token,
            admin_token,
            allow_hosts: self
                .allow_hosts
                .iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            max_request_bytes: mb(self.max_request_mb),
            max_inflight_bytes: mb(self.max_inflight_mb),
            batch_rows: self.batch_rows as usize,
            batch_delay: Duration::from_millis(self.batch_delay_ms),
            max_queue: self.max_queue as usize,
            max_resident_bytes: self.max_resident_mb.saturating_mul(1 << 20),
            max_targets: self.max_targets as usize,
            workers,
            request_timeout: Duration::from_secs(self.request_timeout_s),
            limits: super::listener::Limits {
                header_timeout: Duration::from_secs(self.header_timeout_s),
                idle_timeout: Duration::from_secs(self.idle_timeout_s),
                max_connections: self.max_connections as usize,
                drain_timeout: Duration::from_secs(self.drain_timeout_s),
            },
            max_grid_samples: self.max_grid_samples as usize,
            targets,
            log_format: self.log_format,
            test_hooks: self.test_hooks,
        };
        config.check()?;
        Ok(config)
    }
}

impl Config {
    /// Refuse to listen beyond loopback without a token (SPEC §7).
    pub fn check(&self) -> Result<()> {
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            return Err(Error::Usage(format!(
                "--listen {} is not a loopback address: give --token-file, or listen on 127.0.0.1",
                self.listen
            )));
        }
        // A lone query waits the whole delay for company: at or past its timeout, every query
        // would be a 408.
        if self.batch_delay >= self.request_timeout {
            return Err(Error::Usage(format!(
                "--batch-delay-ms {} must be below --request-timeout-s {} (a query waits up to \
                 the delay for others to share its dispatch)",
                self.batch_delay.as_millis(),
                self.request_timeout.as_secs()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{listen_address, read_targets, read_token};

    #[test]
    fn a_token_is_one_line_of_printable_ascii() {
        let dir = tempfile::tempdir().unwrap();
        let token = |bytes: &[u8]| {
            let path = dir.path().join("token");
            std::fs::write(&path, bytes).unwrap();
            read_token(&path).map_err(|e| e.to_string())
        };
        assert_eq!(token(b"  s3cr3t-~+/=\r\n").unwrap(), "s3cr3t-~+/=");
        for (bytes, needle) in [
            (&b"sec ret\n"[..], "0x20) at byte 3"),
            (b"first\nsecond\n", "0x0a) at byte 5"),
            (b"s\x01e", "0x01) at byte 1"),
            ("t\u{f6}k".as_bytes(), "0xc3) at byte 1"),
            (b"tok\xff\xfe", "0xff) at byte 3"),
            (b" \n\t", "empty"),
            (&[b'a'; 5000][..], "longer than 4096 bytes"),
        ] {
            let refused = token(bytes).unwrap_err();
            assert!(refused.contains(needle), "{refused}");
            assert!(refused.contains("token"), "{refused}");
        }
    }

    /// A targets file's TOML errors say where and what, without quoting a line whole (toml's
    /// own message quoted a 200 KB line of a hostile file).
    #[test]
    fn targets_file_errors_name_the_place_not_the_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("targets.toml");
        let refused = |text: String| {
            std::fs::write(&path, text).unwrap();
            read_targets(&path).unwrap_err().to_string()
        };
        let nested = format!(
            "[x]\nname = {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let deep = refused(nested);
        assert!(deep.contains("at line 2, column "), "{deep}");
        assert!(deep.len() < 300, "{} bytes", deep.len());
        let typed = refused("[[target]]\nname = \"a\"\nmesh = 3\n".into());
        assert!(
            typed.contains("line 3, column 8: invalid type: integer `3`"),
            "{typed}"
        );
    }

    #[test]
    fn listen_takes_addresses_and_localhost_only() {
        assert_eq!(listen_address("127.0.0.1:7341").unwrap().port(), 7341);
        assert!(listen_address("[::1]:0").unwrap().ip().is_loopback());
        let local = listen_address("localhost:8080").unwrap();
        assert_eq!(local.to_string(), "127.0.0.1:8080");
        assert!(
            listen_address("localhost:99999")
                .unwrap_err()
                .contains("`99999`")
        );
        for bad in ["example.com:80", "localhost", "7341", ""] {
            assert!(
                listen_address(bad)
                    .unwrap_err()
                    .contains("such as 127.0.0.1:7341")
            );
        }
    }
}
