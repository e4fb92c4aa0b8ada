//! `closest serve` (SPEC §7): scenes and meshes kept resident on the device and queried over
//! HTTP/1.1. Handlers parse and validate; every query of a target goes through its batching
//! worker (`batch.rs`), the only code that runs it on the engine. Bodies are `.npy` in and
//! `.npz` out, byte for byte what the CLI reads and writes.

mod batch;
mod metrics;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;

use crate::error::Error;
use crate::fields::{Columns, Family, Fields};
use crate::io::{ColumnSpec, Values, field_column, npz_in_memory};
use crate::mesh::Sign;
use crate::sdf::{Grid, GridRegion};
use crate::{Engine, Mode};
use batch::{Batching, Job, Op, Target};
use metrics::Metrics;

/// How the service runs (`closest serve`'s options).
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// Every request but `GET /v1/health` must bear it (`Authorization: Bearer TOKEN`).
    pub token: Option<String>,
    pub max_request_bytes: usize,
    pub batch_rows: usize,
    pub batch_delay: Duration,
    /// Requests waiting for a batch beyond which new ones get 503.
    pub max_queue: usize,
    pub max_resident_bytes: u64,
    /// A request not answered by then (a stalled upload included) gets 408.
    pub request_timeout: Duration,
}

impl Config {
    /// Refuse to listen beyond loopback without a token (SPEC §7).
    pub fn check(&self) -> crate::Result<()> {
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            return Err(Error::Usage(format!(
                "--listen {} is not a loopback address: give --token-file, or listen on 127.0.0.1",
                self.listen
            )));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Scene,
    Mesh,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Scene => "scene",
            Kind::Mesh => "mesh",
        }
    }
}

/// A target resident on the device, with its batching worker. Requests hold it while they
/// run, so a DELETE or a replacement lets them finish on it.
struct Resident {
    target: Arc<Target>,
    /// Shapes or triangles.
    size: usize,
    bytes: u64,
    jobs: std::sync::mpsc::Sender<Job>,
}

impl Resident {
    /// A scene without shapes answers no rows (as the CLI refuses such a job).
    fn check_answerable(&self, values: usize) -> ApiResult<()> {
        if self.size == 0 && values > 0 {
            return Err(ApiError::bad("the scene has no shapes"));
        }
        Ok(())
    }
}

struct AppState {
    engine: Arc<Engine>,
    config: Config,
    targets: RwLock<HashMap<(Kind, String), Arc<Resident>>>,
    metrics: Arc<Metrics>,
    waiting: Arc<AtomicUsize>,
}

/// A failed request: its status and message, sent as `{"error": MESSAGE}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
    fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl From<&Error> for ApiError {
    fn from(e: &Error) -> ApiError {
        let status = match e.exit_code() {
            2 => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::from(&e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message }).to_string();
        let mut response = (self.status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Serve until SIGTERM or SIGINT; then stop accepting, finish what is in flight and return.
/// `ready` hears the bound address (port 0 picks a free one).
pub fn run(engine: Engine, config: Config, ready: impl FnOnce(SocketAddr)) -> crate::Result<()> {
    config.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Gpu(format!("cannot start the server's runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
        let state = Arc::new(AppState {
            engine: Arc::new(engine),
            config,
            targets: RwLock::new(HashMap::new()),
            metrics: Arc::new(Metrics::default()),
            waiting: Arc::new(AtomicUsize::new(0)),
        });
        ready(address);
        axum::serve(listener, router(state))
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(|e| Error::Gpu(format!("the server stopped: {e}")))
    })
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

fn router(state: Arc<AppState>) -> Router {
    let limit = state.config.max_request_bytes;
    Router::new()
        .route("/v1/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/v1/targets", get(list_targets))
        .route("/v1/scenes/{name}", put(put_scene).delete(delete_scene))
        .route("/v1/meshes/{name}", put(put_mesh).delete(delete_mesh))
        .route("/v1/scenes/{name}/query", post(scene_query))
        .route("/v1/scenes/{name}/contacts", post(scene_contacts))
        .route("/v1/meshes/{name}/query", post(mesh_query))
        .route("/v1/meshes/{name}/sdf", post(mesh_sdf))
        .route("/v1/segments", post(segments))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), json_errors))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Every request but the health check bears the token, when there is one; compared in
/// constant time.
async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let open = request.method() == Method::GET && request.uri().path() == "/v1/health";
    if let (Some(token), false) = (&state.config.token, open) {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong bearer token")
                .into_response();
        }
    }
    next.run(request).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // The length is not secret; the contents are compared without an early exit.
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Every error is JSON `{"error": MESSAGE}` (SPEC §7), also those axum answers itself (a body
/// over the limit, an unknown route or method, a malformed query string).
async fn json_errors(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/json");
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!(
            "the body is larger than --max-request-mb allows ({} bytes)",
            state.config.max_request_bytes
        )
    } else {
        let text = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&text).trim().to_string();
        if text.is_empty() {
            status.canonical_reason().unwrap_or("error").to_string()
        } else {
            text
        }
    };
    ApiError::new(status, message).into_response()
}

/// Count requests by route and status, and time them.
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let route = format!("{} {route}", request.method());
    let started = Instant::now();
    let limit = state.config.request_timeout;
    let response = match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request took longer than --request-timeout-s ({} s)",
                limit.as_secs_f64()
            ),
        )
        .into_response(),
    };
    state.metrics.request(
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    json(
        StatusCode::OK,
        serde_json::json!({ "status": "ok", "adapter": state.engine.describe() }),
    )
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let text = state.metrics.render(state.waiting.load(Ordering::Relaxed));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

fn json(status: StatusCode, value: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn list_targets(State(state): State<Arc<AppState>>) -> Response {
    let targets = state.targets.read().unwrap();
    let mut list: Vec<serde_json::Value> = targets
        .iter()
        .map(|((kind, name), r)| {
            let size = if *kind == Kind::Scene { "shapes" } else { "triangles" };
            serde_json::json!({ "name": name, "kind": kind.name(), size: r.size, "device_bytes": r.bytes })
        })
        .collect();
    list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    json(StatusCode::OK, serde_json::Value::Array(list))
}

impl AppState {
    fn resident(&self, kind: Kind, name: &str) -> ApiResult<Arc<Resident>> {
        self.targets
            .read()
            .unwrap()
            .get(&(kind, name.to_string()))
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!("no {} named `{name}`", kind.name()),
                )
            })
    }

    /// Make `target` resident as `name`, within the budget; 201, or 200 when it replaces one.
    fn install(
        &self,
        kind: Kind,
        name: String,
        target: Target,
        size: usize,
    ) -> ApiResult<Response> {
        let bytes = match &target {
            Target::Scene(scene) => scene.device_bytes(),
            Target::Mesh(mesh) => mesh.device_bytes(),
        };
        let mut targets = self.targets.write().unwrap();
        let key = (kind, name.clone());
        let others: u64 = targets
            .iter()
            .filter(|(k, _)| **k != key)
            .map(|(_, r)| r.bytes)
            .sum();
        let budget = self.config.max_resident_bytes;
        if others + bytes > budget {
            return Err(ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "`{name}` needs {bytes} bytes of device memory and {others} are resident: \
                     more than --max-resident-mb allows ({budget} bytes); nothing was evicted, \
                     DELETE a target first"
                ),
            ));
        }
        let target = Arc::new(target);
        let batching = Batching {
            rows: self.config.batch_rows,
            delay: self.config.batch_delay,
        };
        let jobs = batch::start(
            self.engine.clone(),
            target.clone(),
            batching,
            self.waiting.clone(),
            self.metrics.clone(),
        );
        let resident = Arc::new(Resident {
            target,
            size,
            bytes,
            jobs,
        });
        let replaced = targets.insert(key, resident).is_some();
        let status = if replaced {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        let size_key = if kind == Kind::Scene {
            "shapes"
        } else {
            "triangles"
        };
        Ok(json(
            status,
            serde_json::json!({ "name": name, size_key: size }),
        ))
    }

    fn remove(&self, kind: Kind, name: &str) -> ApiResult<Response> {
        match self
            .targets
            .write()
            .unwrap()
            .remove(&(kind, name.to_string()))
        {
            Some(_) => Ok(StatusCode::NO_CONTENT.into_response()),
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no {} named `{name}`", kind.name()),
            )),
        }
    }

    /// Queue `rows` for `resident`'s worker and wait for the answer; 503 when the queue is
    /// full.
    async fn submit(
        &self,
        resident: &Resident,
        op: Op,
        fields: Fields,
        rows: Vec<f64>,
    ) -> ApiResult<Columns> {
        let waiting = self.waiting.fetch_add(1, Ordering::Relaxed);
        if waiting >= self.config.max_queue {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{waiting} requests are waiting (--max-queue {}): retry later",
                    self.config.max_queue
                ),
            ));
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job {
            op,
            fields,
            rows,
            reply,
        };
        if resident.jobs.send(job).is_err() {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the target's worker stopped",
            ));
        }
        match answer.await {
            Ok(result) => result.map_err(|e| ApiError::from(e.as_ref())),
            Err(_) => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the target's worker stopped",
            )),
        }
    }
}

fn check_name(name: &str) -> ApiResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(format!(
            "target name `{name}`: use 1 to 128 letters, digits, '-', '_' or '.'"
        )))
    }
}

async fn put_scene(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    check_name(&name)?;
    let text = std::str::from_utf8(&body).map_err(|_| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be scene JSON (UTF-8)",
        )
    })?;
    let shapes = crate::io::parse_scene(text, "body")?;
    let engine = state.engine.clone();
    let scene = blocking(move || engine.upload_scene(&shapes).map(|s| (s, shapes.len()))).await?;
    state.install(Kind::Scene, name, Target::Scene(scene.0), scene.1)
}

#[derive(Deserialize)]
struct MeshParams {
    format: Option<String>,
}

async fn put_mesh(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<MeshParams>,
    body: Bytes,
) -> ApiResult<Response> {
    check_name(&name)?;
    let format = params.format.unwrap_or_default().to_ascii_lowercase();
    if !matches!(format.as_str(), "obj" | "stl" | "ply") {
        return Err(ApiError::bad(format!(
            "format: `{format}`: give ?format=obj, stl or ply"
        )));
    }
    let engine = state.engine.clone();
    let (mesh, triangles) = blocking(move || {
        let mesh = mesh_from_bytes(&body, &format)?;
        let triangles = mesh.triangles.len();
        engine.upload_mesh(mesh).map(|m| (m, triangles))
    })
    .await?;
    state.install(Kind::Mesh, name, Target::Mesh(Box::new(mesh)), triangles)
}

/// The mesh readers take files: the body goes to a private temporary file, named `body` in
/// messages.
fn mesh_from_bytes(body: &[u8], format: &str) -> crate::Result<crate::mesh::Mesh> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "closest-serve-{}-{}.{format}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, body).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    let mesh = crate::mesh::load_mesh(&path);
    let _ = std::fs::remove_file(&path);
    let shown = path.display().to_string();
    mesh.map_err(|e| match e {
        Error::BadFile { problem, .. } => Error::BadFile {
            file: "body".into(),
            problem: problem.replace(&shown, "body"),
        },
        other => Error::Usage(other.to_string().replace(&shown, "body")),
    })
}

async fn delete_scene(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    state.remove(Kind::Scene, &name)
}

async fn delete_mesh(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    state.remove(Kind::Mesh, &name)
}

#[derive(Deserialize)]
struct QueryParams {
    mode: Option<String>,
    sign: Option<String>,
    fields: Option<String>,
}

fn parse_fields(family: Family, fields: Option<&str>) -> ApiResult<Fields> {
    match fields {
        None => Ok(Fields::all(family)),
        Some(list) => Ok(Fields::parse(family, list)?),
    }
}

async fn scene_query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<QueryParams>,
    body: Bytes,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Scene, &name)?;
    let mode = params
        .mode
        .as_deref()
        .map_or(Ok(Mode::Solid), Mode::parse)?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let rows = npy_rows(&body, &[3])?;
    resident.check_answerable(rows.len())?;
    let columns = state
        .submit(&resident, Op::SceneQuery(mode), fields, rows)
        .await?;
    Ok(npz_response(&columns, &[]))
}

async fn scene_contacts(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<QueryParams>,
    body: Bytes,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Scene, &name)?;
    let fields = parse_fields(Family::Contacts, params.fields.as_deref())?;
    let rows = npy_rows(&body, &[4])?;
    for (row, sphere) in rows.chunks_exact(4).enumerate() {
        crate::contacts::check_radius(row, sphere[3], "body")?;
    }
    resident.check_answerable(rows.len())?;
    let columns = state.submit(&resident, Op::Contacts, fields, rows).await?;
    Ok(npz_response(&columns, &[]))
}

fn parse_sign(sign: Option<&str>, default: Sign) -> ApiResult<Sign> {
    Ok(sign.map_or(Ok(default), Sign::parse)?)
}

async fn mesh_query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<QueryParams>,
    body: Bytes,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Mesh, &name)?;
    let sign = parse_sign(params.sign.as_deref(), Sign::None)?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let rows = npy_rows(&body, &[3])?;
    let columns = state
        .submit(&resident, Op::MeshQuery(sign), fields, rows)
        .await?;
    Ok(npz_response(&columns, &[]))
}

#[derive(Deserialize)]
struct SdfParams {
    res: Option<String>,
    pad: Option<f64>,
    bounds: Option<String>,
    sign: Option<String>,
}

fn numbers(option: &str, text: &str) -> ApiResult<Vec<f64>> {
    text.split(',')
        .map(|t| t.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            ApiError::bad(format!(
                "{option}: expected comma-separated numbers, got `{text}`"
            ))
        })
}

async fn mesh_sdf(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<SdfParams>,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Mesh, &name)?;
    let res = numbers("res", params.res.as_deref().unwrap_or(""))?;
    let res: [usize; 3] = match res.as_slice() {
        [n] => [*n; 3],
        [x, y, z] => [*x, *y, *z],
        _ => return Err(ApiError::bad("res: give N or NX,NY,NZ")),
    }
    .map(|n| {
        if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 {
            n as usize
        } else {
            0
        }
    });
    let region = match (&params.bounds, params.pad) {
        (Some(_), Some(_)) => return Err(ApiError::bad("give pad or bounds, not both")),
        (Some(text), None) => {
            let b = numbers("bounds", text)?;
            let b: [f64; 6] = b
                .try_into()
                .map_err(|_| ApiError::bad("bounds: give x0,y0,z0,x1,y1,z1"))?;
            GridRegion::Bounds(b)
        }
        (None, pad) => GridRegion::Pad(pad.unwrap_or(0.1)),
    };
    let sign = parse_sign(params.sign.as_deref(), Sign::Pseudonormal)?;
    let engine = state.engine.clone();
    let target = resident.target.clone();
    let (grid, values) = blocking(move || {
        let Target::Mesh(mesh) = target.as_ref() else {
            return Err(Error::Usage("sdf grids are made of meshes".into()));
        };
        let grid = Grid::new(mesh.mesh(), res, region)?;
        engine.sdf(mesh, &grid, sign).map(|v| (grid, v))
    })
    .await?;
    let column = ColumnSpec {
        shape: Some(grid.res.to_vec()),
        ..ColumnSpec::scalar("sdf")
    };
    let v = |d: crate::DVec3| vec![d.x, d.y, d.z];
    let constants = [("origin", v(grid.origin)), ("spacing", v(grid.spacing))];
    let bytes = npz_in_memory(
        values.len(),
        &[column],
        &constants,
        &[Values::scalar(|i| values[i])],
    );
    Ok(npz_bytes(bytes))
}

async fn segments(
    State(state): State<Arc<AppState>>,
    Query(params): Query<QueryParams>,
    body: Bytes,
) -> ApiResult<Response> {
    let fields = parse_fields(Family::Segments, params.fields.as_deref())?;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(body)).map_err(|e| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body must be an .npz (numpy.savez, uncompressed) with arrays a and b: {e}"
            ),
        )
    })?;
    let mut array = |name: &str| -> ApiResult<Vec<f64>> {
        let mut entry = archive.by_name(&format!("{name}.npy")).map_err(|_| {
            ApiError::bad(format!(
                "body: the .npz has no array `{name}` (it needs a and b)"
            ))
        })?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes)
            .map_err(|e| ApiError::bad(format!("body: array `{name}`: {e}")))?;
        npy_rows(&bytes, &[2, 3])
            .map_err(|e| ApiError::bad(format!("array `{name}`: {}", e.message)))
    };
    let (a, b) = (array("a")?, array("b")?);
    if a.len() != b.len() {
        return Err(ApiError::bad(format!(
            "a has {} segments but b has {}: segment i of a pairs with segment i of b",
            a.len() / 6,
            b.len() / 6
        )));
    }
    let segment = |r: &[f64]| {
        [
            crate::DVec3::new(r[0], r[1], r[2]),
            crate::DVec3::new(r[3], r[4], r[5]),
        ]
    };
    let a: Vec<_> = a.chunks_exact(6).map(segment).collect();
    let b: Vec<_> = b.chunks_exact(6).map(segment).collect();
    let engine = state.engine.clone();
    let columns = blocking(move || engine.segment_pairs_fields(&a, &b, fields)).await?;
    Ok(npz_response(&columns, &[]))
}

/// Run blocking engine work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> crate::Result<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the job failed: {e}"),
            )
        })?
        .map_err(ApiError::from)
}

/// The rows of an `.npy` body of shape (N, *tail), float32 or float64, as f64: 415 when it is
/// not an `.npy`, 400 when its shape or dtype is wrong.
fn npy_rows(body: &[u8], tail: &[usize]) -> ApiResult<Vec<f64>> {
    use crate::io::npy::{Dtype, read_header};
    let mut reader = body;
    let header = read_header(&mut reader).map_err(|problem| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("body: {problem}; send an .npy array (numpy.save)"),
        )
    })?;
    let dtype =
        Dtype::from_descr(&header.descr).map_err(|p| ApiError::bad(format!("body: {p}")))?;
    let want: Vec<String> = tail.iter().map(|d| d.to_string()).collect();
    if header.shape.len() != tail.len() + 1 || header.shape[1..] != *tail {
        return Err(ApiError::bad(format!(
            "body: expected an array of shape (N, {}), got {:?}",
            want.join(", "),
            header.shape
        )));
    }
    let count = header.shape.iter().product::<usize>();
    let data = &body[header.data_offset as usize..];
    if data.len() != count * dtype.size() {
        return Err(ApiError::bad(format!(
            "body: the array holds {} bytes of data, its header says {}",
            data.len(),
            count * dtype.size()
        )));
    }
    Ok(match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect(),
    })
}

/// Columns as the `.npz` the CLI writes.
fn npz_response(columns: &Columns, constants: &[(&'static str, Vec<f64>)]) -> Response {
    let specs: Vec<ColumnSpec> = columns
        .columns
        .iter()
        .map(|(f, _)| field_column(f))
        .collect();
    let rows = columns
        .columns
        .first()
        .map_or(0, |(f, v)| v.len() / f.width);
    let values: Vec<Values<'_>> = columns
        .columns
        .iter()
        .map(|(f, v)| match (f.width, f.is_index) {
            (_, true) => Values::index(move |i| v[i] as i32),
            (1, false) => Values::scalar(move |i| f32::from_bits(v[i])),
            _ => {
                Values::vector(move |i| [v[3 * i], v[3 * i + 1], v[3 * i + 2]].map(f32::from_bits))
            }
        })
        .collect();
    npz_bytes(npz_in_memory(rows, &specs, constants, &values))
}

fn npz_bytes(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
}
