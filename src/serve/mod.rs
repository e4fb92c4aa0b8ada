//! `closest serve` (SPEC §7): scenes and meshes kept resident on the device and queried over
//! HTTP/1.1. Handlers parse and validate; every query of a target goes through its batching
//! worker (`batch.rs`), the only code that runs it on the engine. Bodies are `.npy` in and
//! `.npz` out, byte for byte what the CLI reads and writes.

mod api;
mod batch;
mod body;
mod metrics;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::error::Error;
use crate::fields::{Columns, Family, Fields};
use crate::io::{ColumnSpec, Values, field_column, npz_in_memory};
use crate::mesh::Sign;
use crate::sdf::{Grid, GridRegion};
use crate::{Engine, Mode};
use batch::{Batching, Job, Op, Target};
use body::BodyReader;
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
    /// The most samples one SDF grid may ask for (its answer is 4 bytes a sample).
    pub max_grid_samples: usize,
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
    /// `/openapi.json`'s text.
    openapi: String,
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
            _ if matches!(e, Error::OutOfMemory(_)) => StatusCode::INSUFFICIENT_STORAGE,
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
        let (routes, description) = api();
        let state = Arc::new(AppState {
            engine: Arc::new(engine),
            config,
            targets: RwLock::new(HashMap::new()),
            metrics: Arc::new(Metrics::default()),
            waiting: Arc::new(AtomicUsize::new(0)),
            openapi: description.to_pretty_json().unwrap_or_default(),
        });
        ready(address);
        axum::serve(listener, router(routes, state))
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

/// The routes and their description, from the same annotated handlers.
fn api() -> (Router<Arc<AppState>>, utoipa::openapi::OpenApi) {
    use utoipa::OpenApi;
    use utoipa_axum::{router::OpenApiRouter, routes};
    OpenApiRouter::with_openapi(api::ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(metrics_text))
        .routes(routes!(openapi_json))
        .routes(routes!(list_targets))
        .routes(routes!(put_scene, delete_scene))
        .routes(routes!(put_mesh, delete_mesh))
        .routes(routes!(scene_query))
        .routes(routes!(scene_contacts))
        .routes(routes!(mesh_query))
        .routes(routes!(mesh_sdf))
        .routes(routes!(segments))
        .routes(routes!(paired))
        .split_for_parts()
}

/// `routes` (from [`api`]) with the middleware every request passes through.
fn router(routes: Router<Arc<AppState>>, state: Arc<AppState>) -> Router {
    routes
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), json_errors))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        // Bodies are read by `body::BodyReader`, which enforces --max-request-mb itself.
        .layer(DefaultBodyLimit::disable())
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

#[utoipa::path(get, path = "/v1/health", tag = "service",
    responses((status = 200, description = "The server answers", body = api::Health)))]
async fn health(State(state): State<Arc<AppState>>) -> Response {
    let health = api::Health {
        status: "ok".into(),
        adapter: state.engine.describe(),
    };
    json(StatusCode::OK, &health)
}

#[utoipa::path(get, path = "/metrics", tag = "service",
    responses(
        (status = 200, description = "Prometheus text: requests by route and status, rows, \
            batch sizes, queue depth, latency", body = String, content_type = "text/plain"),
        api::ReadErrors))]
async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let text = state.metrics.render(state.waiting.load(Ordering::Relaxed));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

#[utoipa::path(get, path = "/openapi.json", tag = "service",
    responses(
        (status = 200, description = "This description (OpenAPI 3)", body = Object),
        api::ReadErrors))]
async fn openapi_json(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response()
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let text = serde_json::to_string(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

#[utoipa::path(get, path = "/v1/targets", tag = "targets",
    responses(
        (status = 200, description = "The resident targets by name", body = Vec<api::TargetInfo>),
        api::ReadErrors))]
async fn list_targets(State(state): State<Arc<AppState>>) -> Response {
    let targets = state.targets.read().unwrap();
    let mut list: Vec<api::TargetInfo> = targets
        .iter()
        .map(|((kind, name), r)| api::TargetInfo {
            name: name.clone(),
            kind: kind.name().into(),
            shapes: (*kind == Kind::Scene).then_some(r.size),
            triangles: (*kind == Kind::Mesh).then_some(r.size),
            device_bytes: r.bytes,
        })
        .collect();
    list.sort_by(|a, b| (&a.name, &a.kind).cmp(&(&b.name, &b.kind)));
    json(StatusCode::OK, &list)
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

    /// 507 unless `bytes` fit the budget beside the other resident targets (a replaced
    /// target's bytes are freed by its replacement).
    fn admit(
        &self,
        targets: &HashMap<(Kind, String), Arc<Resident>>,
        key: &(Kind, String),
        bytes: u64,
    ) -> ApiResult<()> {
        let others: u64 = targets
            .iter()
            .filter(|(k, _)| *k != key)
            .map(|(_, r)| r.bytes)
            .sum();
        let budget = self.config.max_resident_bytes;
        if others.saturating_add(bytes) > budget {
            return Err(ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "`{}` needs {bytes} bytes of device memory and {others} are resident: \
                     more than --max-resident-mb allows ({budget} bytes); nothing was evicted, \
                     DELETE a target first",
                    key.1
                ),
            ));
        }
        Ok(())
    }

    /// Upload with `upload` (given the admission check, run before anything is allocated on
    /// the device) and make the target resident as `name` (checked by the handler before the
    /// body was read): 201, or 200 when it replaces one.
    async fn install(
        self: &Arc<Self>,
        kind: Kind,
        name: String,
        upload: impl FnOnce(&dyn Fn(u64) -> ApiResult<()>) -> ApiResult<(Target, usize)>
        + Send
        + 'static,
    ) -> ApiResult<Response> {
        let key = (kind, name.clone());
        let state = self.clone();
        let admit_key = key.clone();
        let (target, size) = tokio::task::spawn_blocking(move || {
            upload(&|bytes| state.admit(&state.targets.read().unwrap(), &admit_key, bytes))
        })
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the upload failed: {e}"),
            )
        })??;
        let bytes = match &target {
            Target::Scene(scene) => scene.device_bytes(),
            Target::Mesh(mesh) => mesh.device_bytes(),
        };
        let mut targets = self.targets.write().unwrap();
        // Checked again: another upload may have been admitted meanwhile.
        self.admit(&targets, &key, bytes)?;
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
        Ok(match kind {
            Kind::Scene => json(status, &api::SceneInstalled { name, shapes: size }),
            Kind::Mesh => json(
                status,
                &api::MeshInstalled {
                    name,
                    triangles: size,
                },
            ),
        })
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

    /// The body, read as it arrives within --max-request-mb.
    fn body(&self, headers: &HeaderMap, body: Body) -> ApiResult<BodyReader> {
        BodyReader::new(headers, body, self.config.max_request_bytes)
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

#[utoipa::path(put, path = "/v1/scenes/{name}", tag = "targets",
    params(("name" = String, Path, description = "1 to 128 letters, digits, '-', '_' or '.'",
        example = "demo")),
    request_body(content = api::SceneBody, description = "A scene file (SPEC §1)"),
    responses(
        (status = 201, description = "Resident", body = api::SceneInstalled),
        (status = 200, description = "Resident, in place of the scene of that name",
            body = api::SceneInstalled),
        api::PutErrors))]
async fn put_scene(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    check_name(&name)?;
    let body = state.body(&headers, body)?.whole().await?;
    let text = String::from_utf8(body).map_err(|_| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be scene JSON (UTF-8)",
        )
    })?;
    let shapes = crate::io::parse_scene(&text, "body")?;
    let engine = state.engine.clone();
    state
        .install(Kind::Scene, name, move |admit| {
            let scene = engine.upload_scene_admitted(&shapes, admit)?;
            Ok((Target::Scene(Box::new(scene)), shapes.len()))
        })
        .await
}

#[utoipa::path(put, path = "/v1/meshes/{name}", tag = "targets",
    params(("name" = String, Path, description = "1 to 128 letters, digits, '-', '_' or '.'",
        example = "demo"), api::MeshFormat),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = "The mesh file's bytes"),
    responses(
        (status = 201, description = "Resident", body = api::MeshInstalled),
        (status = 200, description = "Resident, in place of the mesh of that name",
            body = api::MeshInstalled),
        api::PutErrors))]
async fn put_mesh(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::MeshFormat>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    check_name(&name)?;
    let format = params.format.unwrap_or_default().to_ascii_lowercase();
    if !matches!(format.as_str(), "obj" | "stl" | "ply") {
        return Err(ApiError::bad(format!(
            "format: `{format}`: give ?format=obj, stl or ply"
        )));
    }
    let file = body_to_file(state.body(&headers, body)?, &format).await?;
    let engine = state.engine.clone();
    state
        .install(Kind::Mesh, name, move |admit| {
            let mesh = mesh_from_file(file)?;
            let triangles = mesh.triangles.len();
            let mesh = engine.upload_mesh_admitted(mesh, admit)?;
            Ok((Target::Mesh(Box::new(mesh)), triangles))
        })
        .await
}

/// A mesh body written to a private temporary file as it arrives (the mesh readers take
/// files); removed when dropped.
struct BodyFile(std::path::PathBuf);

impl Drop for BodyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn body_to_file(mut body: BodyReader, format: &str) -> ApiResult<BodyFile> {
    use tokio::io::AsyncWriteExt;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let file = BodyFile(std::env::temp_dir().join(format!(
        "closest-serve-{}-{}.{format}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )));
    let cannot_write = |e: std::io::Error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot store the body: {e}"),
        )
    };
    let mut out = tokio::fs::File::create(&file.0)
        .await
        .map_err(cannot_write)?;
    while let Some(bytes) = body.chunk().await? {
        out.write_all(&bytes).await.map_err(cannot_write)?;
    }
    out.flush().await.map_err(cannot_write)?;
    Ok(file)
}

/// The mesh in `file`, its errors naming it `body`.
fn mesh_from_file(file: BodyFile) -> crate::Result<crate::mesh::Mesh> {
    let mesh = crate::io::load_mesh(&file.0);
    let shown = file.0.display().to_string();
    mesh.map_err(|e| match e {
        Error::BadFile { problem, .. } => Error::BadFile {
            file: "body".into(),
            problem: problem.replace(&shown, "body"),
        },
        other => Error::Usage(other.to_string().replace(&shown, "body")),
    })
}

#[utoipa::path(delete, path = "/v1/scenes/{name}", tag = "targets",
    params(("name" = String, Path, example = "demo")),
    responses((status = 204, description = "Gone; queries running on it finish on it"),
        api::DeleteErrors))]
async fn delete_scene(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    state.remove(Kind::Scene, &name)
}

#[utoipa::path(delete, path = "/v1/meshes/{name}", tag = "targets",
    params(("name" = String, Path, example = "demo")),
    responses((status = 204, description = "Gone; queries running on it finish on it"),
        api::DeleteErrors))]
async fn delete_mesh(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    state.remove(Kind::Mesh, &name)
}

fn parse_fields(family: Family, fields: Option<&str>) -> ApiResult<Fields> {
    match fields {
        None => Ok(Fields::all(family)),
        Some(list) => Ok(Fields::parse(family, list)?),
    }
}

fn parse_mode(mode: Option<&str>) -> ApiResult<Mode> {
    Ok(mode.map_or(Ok(Mode::Solid), Mode::parse)?)
}

#[utoipa::path(post, path = "/v1/scenes/{name}/query", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::SceneQueryParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npy (N, 3) float32 or float64 query points"),
    responses(
        (status = 200, description = ".npz as `closest query --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
async fn scene_query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::SceneQueryParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Scene, &name)?;
    let mode = parse_mode(params.mode.as_deref())?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let rows = state.body(&headers, body)?.npy_rows(&[3]).await?;
    resident.check_answerable(rows.len())?;
    let columns = state
        .submit(&resident, Op::SceneQuery(mode), fields, rows)
        .await?;
    Ok(npz_response(&columns))
}

#[utoipa::path(post, path = "/v1/scenes/{name}/contacts", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::FieldsParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npy (N, 4) spheres as cx, cy, cz, r"),
    responses(
        (status = 200, description = ".npz as `closest contacts --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
async fn scene_contacts(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::FieldsParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Scene, &name)?;
    let fields = parse_fields(Family::Contacts, params.fields.as_deref())?;
    let rows = state.body(&headers, body)?.npy_rows(&[4]).await?;
    for (row, sphere) in rows.chunks_exact(4).enumerate() {
        crate::contacts::check_radius(row, sphere[3], "body")?;
    }
    resident.check_answerable(rows.len())?;
    let columns = state.submit(&resident, Op::Contacts, fields, rows).await?;
    Ok(npz_response(&columns))
}

fn parse_sign(sign: Option<&str>, default: Sign) -> ApiResult<Sign> {
    Ok(sign.map_or(Ok(default), Sign::parse)?)
}

#[utoipa::path(post, path = "/v1/meshes/{name}/query", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::MeshQueryParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npy (N, 3) float32 or float64 query points"),
    responses(
        (status = 200, description = ".npz as `closest query --mesh M --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
async fn mesh_query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::MeshQueryParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Mesh, &name)?;
    let sign = parse_sign(params.sign.as_deref(), Sign::None)?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let rows = state.body(&headers, body)?.npy_rows(&[3]).await?;
    let columns = state
        .submit(&resident, Op::MeshQuery(sign), fields, rows)
        .await?;
    Ok(npz_response(&columns))
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

#[utoipa::path(post, path = "/v1/meshes/{name}/sdf", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::SdfParams),
    responses(
        (status = 200, description = ".npz as `closest sdf --out X.npz`: sdf (NX, NY, NZ), \
            origin, spacing", body = api::Binary, content_type = "application/octet-stream"),
        api::SdfErrors))]
async fn mesh_sdf(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::SdfParams>,
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
    let samples = res.iter().map(|&n| n as u128).product::<u128>();
    let max_samples = state.config.max_grid_samples;
    if samples > max_samples as u128 {
        return Err(ApiError::bad(format!(
            "res: {res:?} asks for {samples} samples, more than --max-grid-samples \
             ({max_samples})"
        )));
    }
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
        &[Values::f32_column(&values, 1)],
    );
    Ok(npz_bytes(bytes))
}

/// An `.npz`-style archive body (its index is at its end: the body is needed whole).
async fn archive_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    holds: &str,
) -> ApiResult<zip::ZipArchive<std::io::Cursor<Vec<u8>>>> {
    let body = state.body(headers, body)?.whole().await?;
    zip::ZipArchive::new(std::io::Cursor::new(body)).map_err(|e| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the body must be an .npz (numpy.savez, uncompressed) with {holds}: {e}"),
        )
    })
}

/// The bytes of `member` of `archive`; 400 naming it when it is missing.
fn archive_member(
    archive: &mut zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    member: &str,
    holds: &str,
) -> ApiResult<Vec<u8>> {
    let mut entry = archive.by_name(member).map_err(|_| {
        ApiError::bad(format!(
            "body: the .npz has no `{member}` (it needs {holds})"
        ))
    })?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut bytes)
        .map_err(|e| ApiError::bad(format!("body: `{member}`: {e}")))?;
    Ok(bytes)
}

/// The rows of array `name` of an archive, shape (N, *tail).
fn archive_rows(
    archive: &mut zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    name: &str,
    tail: &[usize],
    holds: &str,
) -> ApiResult<Vec<f64>> {
    let bytes = archive_member(archive, &format!("{name}.npy"), holds)?;
    body::npy_rows_in_memory(&bytes, tail)
        .map_err(|e| ApiError::new(e.status, format!("array `{name}`: {}", e.message)))
}

#[utoipa::path(post, path = "/v1/segments", tag = "queries",
    params(api::FieldsParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npz (numpy.savez, uncompressed) with arrays a and b, each (N, 2, 3)"),
    responses(
        (status = 200, description = ".npz as `closest segments --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::BodyQueryErrors))]
async fn segments(
    State(state): State<Arc<AppState>>,
    Query(params): Query<api::FieldsParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let fields = parse_fields(Family::Segments, params.fields.as_deref())?;
    let holds = "arrays a and b";
    let mut archive = archive_body(&state, &headers, body, holds).await?;
    let a = archive_rows(&mut archive, "a", &[2, 3], holds)?;
    let b = archive_rows(&mut archive, "b", &[2, 3], holds)?;
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
    Ok(npz_response(&columns))
}

#[utoipa::path(post, path = "/v1/paired", tag = "queries",
    params(api::SceneQueryParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = "A zip (the .npz container) holding `shapes.json`, a scene file (SPEC §1), \
            and `points.npy`, (N, 3) float32 or float64 with one point per shape: point i \
            against shape i only"),
    responses(
        (status = 200, description = ".npz as `closest query --paired --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::BodyQueryErrors))]
async fn paired(
    State(state): State<Arc<AppState>>,
    Query(params): Query<api::SceneQueryParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let mode = parse_mode(params.mode.as_deref())?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let holds = "shapes.json and points.npy";
    let mut archive = archive_body(&state, &headers, body, holds).await?;
    let text = archive_member(&mut archive, "shapes.json", holds)?;
    let text = String::from_utf8(text)
        .map_err(|_| ApiError::bad("body: shapes.json: the scene JSON must be UTF-8"))?;
    let shapes = crate::io::parse_scene(&text, "shapes.json")?;
    let points: Vec<[f32; 3]> = archive_rows(&mut archive, "points", &[3], holds)?
        .chunks_exact(3)
        .map(|p| crate::gpu::query_point([p[0], p[1], p[2]], crate::DVec3::ZERO))
        .collect();
    let engine = state.engine.clone();
    let columns =
        blocking(move || engine.query_paired_fields(&shapes, &points, mode, fields)).await?;
    Ok(npz_response(&columns))
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

/// Columns as the `.npz` the CLI writes.
fn npz_response(columns: &Columns) -> Response {
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
        .map(|(f, v)| Values::column(v, f.width))
        .collect();
    npz_bytes(npz_in_memory(rows, &specs, &[], &values))
}

fn npz_bytes(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
}
