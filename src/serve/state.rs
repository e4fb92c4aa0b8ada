//! The service's state: resident targets (each with its batching task), what they were made
//! from (to upload them again on a new device), readiness, and the uploads themselves.

use super::*;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Scene,
    Mesh,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Scene => "scene",
            Kind::Mesh => "mesh",
        }
    }
}

/// What a target was made from, to upload it again on a new device: a scene's shapes (a
/// resident mesh keeps its host copy itself, `GpuMesh::mesh`).
#[derive(Clone)]
pub(super) enum Source {
    Scene(Arc<Vec<crate::shape::Shape>>),
    Mesh,
}

/// A target resident on the device, with its batching task. Requests hold it while they
/// run, so a DELETE or a replacement lets them finish on it.
pub(super) struct Resident {
    pub(super) target: Arc<Target>,
    pub(super) source: Source,
    /// Shapes or triangles.
    pub(super) size: usize,
    pub(super) bytes: u64,
    pub(super) jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    /// The target as body targets (an axis-aligned BVH of its shapes or triangles), uploaded
    /// at the first body query (`body_targets`), and their device bytes once they are: counted
    /// against the memory budget with `bytes` (`resident_bytes`).
    pub(super) body_targets: std::sync::OnceLock<crate::GpuScene>,
    pub(super) body_bytes: AtomicU64,
}

impl Resident {
    pub(super) fn new(
        target: Arc<Target>,
        source: Source,
        size: usize,
        bytes: u64,
        jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    ) -> Resident {
        Resident {
            target,
            source,
            size,
            bytes,
            jobs,
            body_targets: Default::default(),
            body_bytes: AtomicU64::new(0),
        }
    }

    /// Device bytes held: the target's, and its body targets' once uploaded.
    pub(super) fn resident_bytes(&self) -> u64 {
        self.bytes + self.body_bytes.load(Ordering::SeqCst)
    }

    /// The target as body targets on `engine`, uploaded at the first call if `admit` allows
    /// their device bytes (asked before anything is allocated; it reserves them in
    /// `body_bytes`, given back if the upload fails).
    pub(super) fn body_targets(
        &self,
        engine: &Engine,
        admit: impl FnOnce(u64) -> crate::Result<()>,
    ) -> crate::Result<&crate::GpuScene> {
        if let Some(targets) = self.body_targets.get() {
            return Ok(targets);
        }
        let uploaded = match (&self.source, self.target.as_ref()) {
            (Source::Scene(shapes), _) => engine.upload_body_targets_admitted(shapes, admit),
            (Source::Mesh, Target::Mesh(mesh)) => {
                engine.upload_mesh_body_targets_admitted(mesh.mesh(), admit)
            }
            (Source::Mesh, Target::Scene(_)) => unreachable!("a mesh's source"),
        };
        let uploaded = match uploaded {
            Ok(uploaded) => uploaded,
            Err(e) => {
                if self.body_targets.get().is_none() {
                    self.body_bytes.store(0, Ordering::SeqCst);
                }
                return Err(e);
            }
        };
        // Two first queries at once both upload; one copy is kept, and counted once.
        let targets = self.body_targets.get_or_init(|| uploaded);
        self.body_bytes
            .store(targets.device_bytes(), Ordering::SeqCst);
        Ok(targets)
    }

    /// A scene without shapes answers no rows (as the CLI refuses such a job).
    pub(super) fn check_answerable(&self, values: usize) -> ApiResult<()> {
        if self.size == 0 && values > 0 {
            return Err(ApiError::bad("the scene has no shapes"));
        }
        Ok(())
    }
}

/// What `GET /v1/health/ready` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Readiness {
    /// `--targets` still loading.
    Loading = 0,
    Ready = 1,
    /// The device was lost; a new one is being opened and the targets uploaded again.
    Reopening = 2,
    /// Opening a new device failed: queries get 503.
    DeviceFailed = 3,
}

pub(super) struct AppState {
    pub(super) engine: RwLock<Arc<Engine>>,
    pub(super) options: EngineOptions,
    pub(super) config: Config,
    pub(super) targets: RwLock<HashMap<(Kind, String), Arc<Resident>>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) shared: Shared,
    pub(super) inflight: Arc<Inflight>,
    pub(super) connections: Arc<listener::ConnectionCount>,
    pub(super) readiness: AtomicU8,
    pub(super) draining: Arc<AtomicBool>,
    /// Targets being uploaded, counted against `--max-targets` with the resident ones.
    pub(super) installing: AtomicUsize,
    pub(super) private: Arc<PrivateDir>,
    /// `/openapi.json`'s text.
    pub(super) openapi: String,
}

impl AppState {
    pub(super) fn new(
        engine: Engine,
        options: EngineOptions,
        config: Config,
        openapi: String,
        private: Arc<PrivateDir>,
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
            private,
            openapi,
            config,
        }))
    }

    pub(super) fn engine(&self) -> Arc<Engine> {
        read(&self.engine).clone()
    }
    pub(super) fn readiness(&self) -> Readiness {
        match self.readiness.load(Ordering::SeqCst) {
            0 => Readiness::Loading,
            // Reopening from the moment a job finds the device lost, not only once the reopening
            // task has woken: a probe between the two must not answer ready.
            1 if self.engine().is_lost() => Readiness::Reopening,
            1 => Readiness::Ready,
            2 => Readiness::Reopening,
            _ => Readiness::DeviceFailed,
        }
    }
    pub(super) fn set_readiness(&self, readiness: Readiness) {
        self.readiness.store(readiness as u8, Ordering::SeqCst);
    }
    /// 503 while the device is being reopened or could not be.
    pub(super) fn check_device(&self) -> ApiResult<()> {
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
pub(super) async fn preload(state: Arc<AppState>, failed: tokio::sync::oneshot::Sender<Error>) {
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
pub(super) async fn reopen_lost_devices(state: Arc<AppState>) {
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
                let resident = Resident::new(target, old.source.clone(), old.size, old.bytes, jobs);
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

impl AppState {
    pub(super) fn resident(&self, kind: Kind, name: &str) -> ApiResult<Arc<Resident>> {
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
    pub(super) fn admit(
        &self,
        targets: &HashMap<(Kind, String), Arc<Resident>>,
        key: &(Kind, String),
        bytes: u64,
    ) -> ApiResult<()> {
        let others: u64 = targets
            .iter()
            .filter(|(k, _)| *k != key)
            .map(|(_, r)| r.resident_bytes())
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

    /// Out of memory (507) unless the body targets of `resident` (named `name`), `bytes` of
    /// device memory, fit the budget beside everything resident and reserved; if they do, they
    /// are reserved on `resident`, under the targets' lock, so that two first body requests at
    /// once cannot both pass a budget that holds one (one already reserved here: no more).
    pub(super) fn admit_body_targets(
        &self,
        resident: &Resident,
        name: &str,
        bytes: u64,
    ) -> crate::Result<()> {
        let targets = write(&self.targets);
        if resident.body_bytes.load(Ordering::SeqCst) != 0 {
            return Ok(());
        }
        let resident_bytes: u64 = targets.values().map(|r| r.resident_bytes()).sum();
        let budget = self.config.max_resident_bytes;
        if resident_bytes.saturating_add(bytes) > budget {
            return Err(Error::OutOfMemory(format!(
                "the body targets of `{name}` (its shapes or triangles in an axis-aligned \
                 hierarchy, uploaded at its first body query) need {bytes} bytes of device \
                 memory and {resident_bytes} are resident: more than --max-resident-mb allows \
                 ({budget} bytes); nothing was evicted, DELETE a target first"
            )));
        }
        resident.body_bytes.store(bytes, Ordering::SeqCst);
        Ok(())
    }

    /// 507 when one more target would pass `--max-targets` (a replacement is not one more);
    /// else a claim on a place, given back when dropped.
    pub(super) fn claim_place(self: &Arc<Self>, key: &(Kind, String)) -> ApiResult<PlaceClaim> {
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
    pub(super) async fn install(
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
        let resident = Arc::new(Resident::new(target, source, size, bytes, jobs));
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

    pub(super) fn remove(&self, kind: Kind, name: &str) -> ApiResult<Response> {
        match write(&self.targets).remove(&(kind, name.to_string())) {
            Some(_) => Ok(StatusCode::NO_CONTENT.into_response()),
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no {} named `{name}`", kind.name()),
            )),
        }
    }

    /// The body, read as it arrives within --max-request-mb and --max-inflight-mb, each piece
    /// within --idle-timeout-s.
    pub(super) fn body(&self, headers: &HeaderMap, body: Body) -> ApiResult<BodyReader> {
        BodyReader::new(
            headers,
            body,
            self.config.max_request_bytes,
            &self.inflight,
            self.config.limits.idle_timeout,
        )
    }

    /// Queue `rows` for `resident`'s task and wait for the answer; 503 when the queue is
    /// full. Rows that are not a whole number of the operation's width never reach a batch.
    pub(super) async fn submit(
        &self,
        resident: &Resident,
        op: Op,
        fields: Fields,
        rows: RowValues,
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
    pub(super) fn fault(&self, headers: &HeaderMap) -> Option<Fault> {
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
pub(super) struct PlaceClaim(Arc<AppState>);

impl Drop for PlaceClaim {
    fn drop(&mut self) {
        self.0.installing.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) fn upload_scene(
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

pub(super) fn upload_mesh(
    engine: &Engine,
    mesh: crate::mesh::Mesh,
    admit: &dyn Fn(u64) -> ApiResult<()>,
) -> ApiResult<(Target, Source, usize)> {
    let triangles = mesh.triangles.len();
    let mesh = engine.upload_mesh_admitted(mesh, admit)?;
    Ok((Target::Mesh(Box::new(mesh)), Source::Mesh, triangles))
}
