//! `closest serve` (SPEC §7): scenes and meshes kept resident on the device and queried over
//! HTTP/1.1. Handlers parse and validate; every query of a target goes through its batching
//! worker (`batch.rs`), the only code that runs it on the engine. Bodies are `.npy` in and
//! `.npz` out, byte for byte what the CLI reads and writes.

mod api;
mod batch;
mod body;
mod config;
mod error;
mod listener;
mod metrics;
mod middleware;
mod private_files;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware as layers;
use axum::response::{IntoResponse, Response};

use crate::error::Error;
use crate::fields::{Columns, Family, Fields};
use crate::io::{ColumnSpec, Values, field_column, npz_in_memory};
use crate::mesh::Sign;
use crate::sdf::{Grid, GridRegion};
use crate::sync::{read, write};
use crate::{Engine, EngineOptions, Mode};
use batch::{Answer, Batching, Fault, Job, Op, Shared, Target};
pub use body::fuzz_body;
use body::{BodyReader, Inflight};
pub use config::{Config, LogFormat, ServeArgs};
use error::{ApiError, ApiResult};
use metrics::Metrics;
use middleware::{Access, TEST_FAULT};
use private_files::{PrivateDir, PrivateFile};

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

/// What a target was made from, to upload it again on a new device: a scene's shapes (a
/// resident mesh keeps its host copy itself, `GpuMesh::mesh`).
#[derive(Clone)]
enum Source {
    Scene(Arc<Vec<crate::shape::Shape>>),
    Mesh,
}

/// A target resident on the device, with its batching task. Requests hold it while they
/// run, so a DELETE or a replacement lets them finish on it.
struct Resident {
    target: Arc<Target>,
    source: Source,
    /// Shapes or triangles.
    size: usize,
    bytes: u64,
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
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

/// What `GET /v1/health/ready` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Readiness {
    /// `--targets` still loading.
    Loading = 0,
    Ready = 1,
    /// The device was lost; a new one is being opened and the targets uploaded again.
    Reopening = 2,
    /// Opening a new device failed: queries get 503.
    DeviceFailed = 3,
}

struct AppState {
    engine: RwLock<Arc<Engine>>,
    options: EngineOptions,
    config: Config,
    targets: RwLock<HashMap<(Kind, String), Arc<Resident>>>,
    metrics: Arc<Metrics>,
    shared: Shared,
    inflight: Arc<Inflight>,
    connections: Arc<listener::ConnectionCount>,
    readiness: AtomicU8,
    draining: Arc<AtomicBool>,
    /// Targets being uploaded, counted against `--max-targets` with the resident ones.
    installing: AtomicUsize,
    private: PrivateDir,
    /// `/openapi.json`'s text.
    openapi: String,
}

/// Serve until SIGTERM or SIGINT; then stop accepting, finish what is in flight within
/// `--drain-timeout-s` and return. `ready` hears the bound address (port 0 picks a free one);
/// `options` open the device again if it is lost.
pub fn run(
    engine: Engine,
    options: EngineOptions,
    config: Config,
    ready: impl FnOnce(SocketAddr),
) -> crate::Result<()> {
    config.check()?;
    start_access_log(config.log_format);
    // Async tasks on a few threads; engine calls, uploads and file writes on a bounded pool.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers.clamp(2, 8))
        .max_blocking_threads(config.workers + 8)
        .enable_all()
        .build()
        .map_err(|e| Error::Gpu(format!("cannot start the server's runtime: {e}")))?;
    let outcome = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
        let (routes, description) = api();
        let openapi = description.to_pretty_json().unwrap_or_default();
        let state = AppState::new(engine, options, config, openapi)?;
        ready(address);
        let (failed, failure) = tokio::sync::oneshot::channel();
        tokio::spawn(preload(state.clone(), failed));
        tokio::spawn(reopen_lost_devices(state.clone()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<Error>();
        let shutdown = async {
            tokio::select! {
                () = shutdown_signal() => {}
                Ok(error) = failure => { let _ = stop.send(error); }
            }
        };
        listener::serve(
            listener,
            router(routes, state.clone()),
            state.config.limits,
            state.connections.clone(),
            state.draining.clone(),
            shutdown,
        )
        .await;
        match stopped.await {
            Ok(error) => Err(error),
            Err(_) => Ok(()),
        }
    });
    // An engine call past the drain timeout is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    outcome
}

/// One access-log line per request on stderr (`--log-format`); nothing else is logged.
fn start_access_log(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_max_level(tracing::Level::INFO);
    // A second server in the same process (tests) keeps the first one's subscriber.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

impl AppState {
    fn new(
        engine: Engine,
        options: EngineOptions,
        config: Config,
        openapi: String,
    ) -> crate::Result<Arc<AppState>> {
        let metrics = Arc::new(Metrics::default());
        Ok(Arc::new(AppState {
            engine: RwLock::new(Arc::new(engine)),
            options,
            targets: RwLock::new(HashMap::new()),
            shared: Shared {
                batching: Batching {
                    rows: config.batch_rows,
                    delay: config.batch_delay,
                },
                waiting: Arc::new(AtomicUsize::new(0)),
                metrics: metrics.clone(),
                pool: Arc::new(tokio::sync::Semaphore::new(config.workers)),
                device_lost: Arc::new(tokio::sync::Notify::new()),
            },
            metrics,
            inflight: Arc::new(Inflight::new(config.max_inflight_bytes)),
            connections: Arc::new(listener::ConnectionCount::default()),
            readiness: AtomicU8::new(if config.targets.is_empty() {
                Readiness::Ready
            } else {
                Readiness::Loading
            } as u8),
            draining: Arc::new(AtomicBool::new(false)),
            installing: AtomicUsize::new(0),
            private: PrivateDir::new()?,
            openapi,
            config,
        }))
    }

    fn engine(&self) -> Arc<Engine> {
        read(&self.engine).clone()
    }
    fn readiness(&self) -> Readiness {
        match self.readiness.load(Ordering::SeqCst) {
            0 => Readiness::Loading,
            1 => Readiness::Ready,
            2 => Readiness::Reopening,
            _ => Readiness::DeviceFailed,
        }
    }
    fn set_readiness(&self, readiness: Readiness) {
        self.readiness.store(readiness as u8, Ordering::SeqCst);
    }
    /// 503 while the device is being reopened or could not be.
    fn check_device(&self) -> ApiResult<()> {
        match self.readiness() {
            Readiness::Reopening => Err(ApiError::unavailable(
                "the device was lost and is being opened again: retry shortly",
            )),
            Readiness::DeviceFailed => Err(ApiError::unavailable(
                "the device was lost and could not be opened again",
            )),
            _ => Ok(()),
        }
    }
}

/// `--targets FILE`: each target uploaded before the service says ready; the first that
/// fails stops the server (exit 2, its name and problem said).
async fn preload(state: Arc<AppState>, failed: tokio::sync::oneshot::Sender<Error>) {
    for spec in state.config.targets.clone() {
        let loaded = match (&spec.mesh, &spec.scene) {
            (Some(path), _) => {
                let path = path.clone();
                let engine = state.engine();
                let key = (Kind::Mesh, spec.name.clone());
                state
                    .install(key, move |admit| {
                        let mesh = crate::io::load_mesh(&path)?;
                        upload_mesh(&engine, mesh, admit)
                    })
                    .await
            }
            (None, Some(path)) => {
                let shapes = std::fs::read_to_string(path)
                    .map_err(|source| Error::Read {
                        path: path.clone(),
                        source,
                    })
                    .and_then(|text| crate::io::parse_scene(&text, &path.display().to_string()));
                match shapes {
                    Ok(shapes) => {
                        let engine = state.engine();
                        let key = (Kind::Scene, spec.name.clone());
                        state
                            .install(key, move |admit| upload_scene(&engine, shapes, admit))
                            .await
                    }
                    Err(e) => Err(ApiError::from(e)),
                }
            }
            (None, None) => unreachable!("checked when the file was read"),
        };
        if let Err(e) = loaded {
            let _ = failed.send(Error::Usage(format!(
                "--targets: `{}`: {}",
                spec.name, e.message
            )));
            return;
        }
    }
    state.set_readiness(Readiness::Ready);
}

/// When an engine call finds the device lost: open a new one and upload every resident
/// target to it again, `ready` answering 503 meanwhile (and after, if it cannot be done).
async fn reopen_lost_devices(state: Arc<AppState>) {
    loop {
        state.shared.device_lost.notified().await;
        if !state.engine().is_lost() {
            continue;
        }
        let before = state.readiness();
        state.set_readiness(Readiness::Reopening);
        let worker = state.clone();
        let reopened = tokio::task::spawn_blocking(move || -> crate::Result<()> {
            let engine = Arc::new(Engine::new(&worker.options)?);
            let mut fresh = Vec::new();
            for (key, resident) in read(&worker.targets).iter() {
                let target = match (&resident.source, resident.target.as_ref()) {
                    (Source::Scene(shapes), _) => {
                        Target::Scene(Box::new(engine.upload_scene(shapes)?))
                    }
                    (Source::Mesh, Target::Mesh(mesh)) => {
                        Target::Mesh(Box::new(engine.upload_mesh(mesh.mesh().clone())?))
                    }
                    (Source::Mesh, Target::Scene(_)) => unreachable!("a mesh's source"),
                };
                fresh.push((key.clone(), resident.clone(), target));
            }
            *write(&worker.engine) = engine.clone();
            let mut targets = write(&worker.targets);
            for (key, old, target) in fresh {
                let target = Arc::new(target);
                let jobs = batch::start(engine.clone(), target.clone(), worker.shared.clone());
                let resident = Resident {
                    target,
                    source: old.source.clone(),
                    size: old.size,
                    bytes: old.bytes,
                    jobs,
                };
                targets.insert(key, Arc::new(resident));
            }
            Ok(())
        })
        .await;
        let readiness = match reopened {
            Ok(Ok(())) if before == Readiness::Loading => Readiness::Loading,
            Ok(Ok(())) => Readiness::Ready,
            _ => Readiness::DeviceFailed,
        };
        state.set_readiness(readiness);
    }
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
        .routes(routes!(health_live))
        .routes(routes!(health_ready))
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
        .layer(layers::from_fn_with_state(state.clone(), middleware::guard))
        .layer(layers::from_fn_with_state(
            state.clone(),
            middleware::json_errors,
        ))
        .layer(layers::from_fn_with_state(
            state.clone(),
            middleware::observe,
        ))
        // Bodies are read by `body::BodyReader`, which enforces --max-request-mb itself.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// `/v1/health/ready`'s answer: 200 when the device works, the preloaded targets are
/// resident and the server is not draining; else 503 saying which.
fn readiness_response(state: &AppState) -> Response {
    let status = match (state.draining.load(Ordering::SeqCst), state.readiness()) {
        (true, _) => "draining",
        (false, Readiness::Ready) => "ok",
        (false, Readiness::Loading) => "loading targets",
        (false, Readiness::Reopening) => "reopening the device",
        (false, Readiness::DeviceFailed) => "device lost",
    };
    let health = api::Health {
        status: status.into(),
        adapter: state.engine().describe(),
    };
    let code = if status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(code, &health)
}

#[utoipa::path(get, path = "/v1/health", tag = "service",
    responses((status = 200, description = "Ready (as /v1/health/ready)", body = api::Health),
        (status = 503, description = "Not ready: loading targets, reopening the device, \
            device lost, or draining", body = api::Health)))]
async fn health(State(state): State<Arc<AppState>>) -> Response {
    readiness_response(&state)
}

#[utoipa::path(get, path = "/v1/health/ready", tag = "service",
    responses((status = 200, description = "The device works, the preloaded targets are \
            resident, not draining", body = api::Health),
        (status = 503, description = "Not ready: loading targets, reopening the device, \
            device lost, or draining", body = api::Health)))]
async fn health_ready(State(state): State<Arc<AppState>>) -> Response {
    readiness_response(&state)
}

#[utoipa::path(get, path = "/v1/health/live", tag = "service",
    responses((status = 200, description = "The process answers", body = api::Health)))]
async fn health_live(State(state): State<Arc<AppState>>) -> Response {
    let health = api::Health {
        status: "ok".into(),
        adapter: state.engine().describe(),
    };
    json(StatusCode::OK, &health)
}

#[utoipa::path(get, path = "/metrics", tag = "service",
    responses(
        (status = 200, description = "Prometheus text: requests by route and status, rows, \
            batch sizes, queue depth, latency", body = String, content_type = "text/plain"),
        api::ReadErrors))]
async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let resident: u64 = read(&state.targets).values().map(|r| r.bytes).sum();
    let targets = read(&state.targets).len() as u64;
    let connections = &state.connections;
    let gauges = [
        ("closest_resident_bytes", resident),
        ("closest_resident_targets", targets),
        ("closest_inflight_body_bytes", state.inflight.held() as u64),
        (
            "closest_open_connections",
            connections.open.load(Ordering::Relaxed) as u64,
        ),
        (
            "closest_refused_connections_total",
            connections.refused.load(Ordering::Relaxed),
        ),
        (
            "closest_busy_workers",
            (state.config.workers - state.shared.pool.available_permits()) as u64,
        ),
    ];
    let waiting = state.shared.waiting.load(Ordering::Relaxed);
    let text = state.metrics.render(waiting, &gauges);
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
    let targets = read(&state.targets);
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
        self.check_device()?;
        read(&self.targets)
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

    /// 507 when one more target would pass `--max-targets` (a replacement is not one more);
    /// else a claim on a place, given back when dropped.
    fn claim_place(self: &Arc<Self>, key: &(Kind, String)) -> ApiResult<PlaceClaim> {
        let claim = PlaceClaim(self.clone());
        let installing = self.installing.fetch_add(1, Ordering::SeqCst);
        let targets = read(&self.targets);
        let resident = targets.len() - usize::from(targets.contains_key(key));
        if resident + installing >= self.config.max_targets {
            return Err(ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "{resident} targets are resident and {installing} more being uploaded: \
                     --max-targets allows {}; DELETE a target first",
                    self.config.max_targets
                ),
            ));
        }
        Ok(claim)
    }

    /// Upload with `upload` (given the admission check, run before anything is allocated on
    /// the device) and make the target resident as `key` (its name checked by the caller):
    /// 201, or 200 when it replaces one.
    async fn install(
        self: &Arc<Self>,
        key: (Kind, String),
        upload: impl FnOnce(&dyn Fn(u64) -> ApiResult<()>) -> ApiResult<(Target, Source, usize)>
        + Send
        + 'static,
    ) -> ApiResult<Response> {
        self.check_device()?;
        let _place = self.claim_place(&key)?;
        let state = self.clone();
        let admit_key = key.clone();
        let (target, source, size) = tokio::task::spawn_blocking(move || {
            upload(&|bytes| state.admit(&read(&state.targets), &admit_key, bytes))
        })
        .await
        .map_err(|e| ApiError::internal(format!("the upload failed: {e}")))??;
        let bytes = match &target {
            Target::Scene(scene) => scene.device_bytes(),
            Target::Mesh(mesh) => mesh.device_bytes(),
        };
        let engine = self.engine();
        let mut targets = write(&self.targets);
        // Checked again: another upload may have been admitted meanwhile.
        self.admit(&targets, &key, bytes)?;
        let target = Arc::new(target);
        let jobs = batch::start(engine, target.clone(), self.shared.clone());
        let resident = Arc::new(Resident {
            target,
            source,
            size,
            bytes,
            jobs,
        });
        let (kind, name) = key.clone();
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
        match write(&self.targets).remove(&(kind, name.to_string())) {
            Some(_) => Ok(StatusCode::NO_CONTENT.into_response()),
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no {} named `{name}`", kind.name()),
            )),
        }
    }

    /// The body, read as it arrives within --max-request-mb and --max-inflight-mb.
    fn body(&self, headers: &HeaderMap, body: Body) -> ApiResult<BodyReader> {
        BodyReader::new(headers, body, self.config.max_request_bytes, &self.inflight)
    }

    /// Queue `rows` for `resident`'s task and wait for the answer; 503 when the queue is
    /// full. Rows that are not a whole number of the operation's width never reach a batch.
    async fn submit(
        &self,
        resident: &Resident,
        op: Op,
        fields: Fields,
        rows: Vec<f64>,
        fault: Option<Fault>,
    ) -> ApiResult<Answer> {
        if !rows.len().is_multiple_of(op.width()) {
            return Err(ApiError::bad(format!(
                "body: {} values are not a whole number of rows of {}",
                rows.len(),
                op.width()
            )));
        }
        let waiting = self.shared.waiting.fetch_add(1, Ordering::Relaxed);
        if waiting >= self.config.max_queue {
            self.shared.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::unavailable(format!(
                "{waiting} requests are waiting (--max-queue {}): retry later",
                self.config.max_queue
            )));
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job {
            op,
            fields,
            rows,
            fault,
            queued: std::time::Instant::now(),
            reply,
        };
        if resident.jobs.send(job).is_err() {
            self.shared.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::internal("the target's worker stopped"));
        }
        match answer.await {
            Ok(result) => result.map_err(|e| {
                if self.engine().is_lost() || matches!(self.readiness(), Readiness::Reopening) {
                    ApiError::unavailable(format!(
                        "the device was lost and is being opened again: retry shortly ({e})"
                    ))
                } else {
                    ApiError::from(e.as_ref())
                }
            }),
            Err(_) => Err(ApiError::internal("the target's worker stopped")),
        }
    }

    /// The fault a test asks for (`--test-hooks` only).
    fn fault(&self, headers: &HeaderMap) -> Option<Fault> {
        if !self.config.test_hooks {
            return None;
        }
        match headers.get(TEST_FAULT)?.to_str().ok()? {
            "panic-worker" => Some(Fault::Panic),
            "lose-device" => Some(Fault::LoseDevice),
            _ => None,
        }
    }
}

/// A place among `--max-targets` held by an upload in progress.
struct PlaceClaim(Arc<AppState>);

impl Drop for PlaceClaim {
    fn drop(&mut self) {
        self.0.installing.fetch_sub(1, Ordering::SeqCst);
    }
}

fn upload_scene(
    engine: &Engine,
    shapes: Vec<crate::shape::Shape>,
    admit: &dyn Fn(u64) -> ApiResult<()>,
) -> ApiResult<(Target, Source, usize)> {
    let scene = engine.upload_scene_admitted(&shapes, admit)?;
    let size = shapes.len();
    Ok((
        Target::Scene(Box::new(scene)),
        Source::Scene(Arc::new(shapes)),
        size,
    ))
}

fn upload_mesh(
    engine: &Engine,
    mesh: crate::mesh::Mesh,
    admit: &dyn Fn(u64) -> ApiResult<()>,
) -> ApiResult<(Target, Source, usize)> {
    let triangles = mesh.triangles.len();
    let mesh = engine.upload_mesh_admitted(mesh, admit)?;
    Ok((Target::Mesh(Box::new(mesh)), Source::Mesh, triangles))
}

/// A response with what the access log should say of it.
fn logged(mut response: Response, access: Access) -> Response {
    response.extensions_mut().insert(access);
    response
}

/// An answer's columns as the `.npz` the CLI writes, logged with its target and times.
fn answer_response(answer: Answer, target: &str, rows: usize, bytes_in: usize) -> Response {
    logged(
        npz_response(&answer.columns),
        Access {
            target: Some(target.to_string()),
            rows: Some(rows),
            bytes_in: Some(bytes_in as u64),
            queue_wait: Some(answer.queue_wait),
            device: Some(answer.device),
        },
    )
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
    let (body, _held) = state.body(&headers, body)?.whole().await?;
    let text = String::from_utf8(body).map_err(|_| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be scene JSON (UTF-8)",
        )
    })?;
    let shapes = crate::io::parse_scene(&text, "body")?;
    let engine = state.engine();
    state
        .install((Kind::Scene, name), move |admit| {
            upload_scene(&engine, shapes, admit)
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
    let file = body_to_file(&state.private, state.body(&headers, body)?, &format).await?;
    let engine = state.engine();
    state
        .install((Kind::Mesh, name), move |admit| {
            upload_mesh(&engine, mesh_from_file(file)?, admit)
        })
        .await
}

/// A mesh body written to a private file as it arrives (the mesh readers take files);
/// removed when the handle drops, whatever happens to the request.
async fn body_to_file(
    private: &PrivateDir,
    mut body: BodyReader,
    format: &str,
) -> ApiResult<PrivateFile> {
    use tokio::io::AsyncWriteExt;
    let (file, mut out) = private.create(format).await?;
    let cannot_write =
        |e: std::io::Error| ApiError::internal(format!("cannot store the body: {e}"));
    while let Some(bytes) = body.chunk().await? {
        out.write_all(&bytes).await.map_err(cannot_write)?;
    }
    out.flush().await.map_err(cannot_write)?;
    Ok(file)
}

/// The mesh in `file`, its errors naming it `body`.
fn mesh_from_file(file: PrivateFile) -> crate::Result<crate::mesh::Mesh> {
    let mesh = crate::io::load_mesh(file.path());
    let shown = file.path().display().to_string();
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
    let mode = parse_mode(params.mode.as_deref())?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let op = Op::SceneQuery(mode);
    query_target(&state, (Kind::Scene, name), &headers, body, op, fields).await
}

/// A query of a resident target: its `.npy` rows read, checked and batched; its `.npz`.
async fn query_target(
    state: &Arc<AppState>,
    (kind, name): (Kind, String),
    headers: &HeaderMap,
    body: Body,
    op: Op,
    fields: Fields,
) -> ApiResult<Response> {
    let resident = state.resident(kind, &name)?;
    let (rows, held) = state.body(headers, body)?.npy_rows(&[op.width()]).await?;
    if op == Op::Contacts {
        for (row, sphere) in rows.chunks_exact(4).enumerate() {
            crate::contacts::check_radius(row, sphere[3], "body")?;
        }
    }
    if kind == Kind::Scene {
        resident.check_answerable(rows.len())?;
    }
    let count = rows.len() / op.width();
    let fault = state.fault(headers);
    let answer = state.submit(&resident, op, fields, rows, fault).await?;
    Ok(answer_response(answer, &name, count, held.bytes()))
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
    let fields = parse_fields(Family::Contacts, params.fields.as_deref())?;
    query_target(
        &state,
        (Kind::Scene, name),
        &headers,
        body,
        Op::Contacts,
        fields,
    )
    .await
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
    let sign = parse_sign(params.sign.as_deref(), Sign::None)?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let op = Op::MeshQuery(sign);
    query_target(&state, (Kind::Mesh, name), &headers, body, op, fields).await
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
    let engine = state.engine();
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
    let (body, _held) = state.body(headers, body)?.whole().await?;
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
    let engine = state.engine();
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
    let engine = state.engine();
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// What `ready` says in each state: 200 only when ready and not draining (a drain closes
    /// idle connections at once, so over HTTP the 503 is seen only by a request that races it).
    #[test]
    fn ready_tells_the_truth_in_every_state() {
        let config = Args::parse_from(["serve"]).serve.config().unwrap();
        let engine = Engine::new(&EngineOptions::default()).expect("an adapter (lavapipe)");
        let state = AppState::new(engine, EngineOptions::default(), config, String::new()).unwrap();
        let status = |state: &AppState| readiness_response(state).status().as_u16();
        assert_eq!(status(&state), 200);
        for readiness in [
            Readiness::Loading,
            Readiness::Reopening,
            Readiness::DeviceFailed,
        ] {
            state.set_readiness(readiness);
            assert_eq!(status(&state), 503, "{readiness:?}");
        }
        state.set_readiness(Readiness::Ready);
        state.draining.store(true, Ordering::SeqCst);
        assert_eq!(status(&state), 503, "draining");
    }
}
