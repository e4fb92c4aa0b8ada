//! `closest serve` (SPEC §7): scenes and meshes kept resident on the device and queried over
//! HTTP/1.1. Handlers parse and validate; every query of a target goes through its batching
//! worker (`batch.rs`), the only code that runs it on the engine. Bodies are `.npy` in and
//! `.npz` out, byte for byte what the CLI reads and writes.

mod api;
mod archive;
mod batch;
mod body;
mod config;
mod error;
mod handlers;
mod listener;
mod metrics;
mod middleware;
mod private_files;
mod state;

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

use crate::auto_sign::SignChoice;
use crate::error::Error;
use crate::fields::{Columns, Family, Fields};
use crate::io::{ColumnSpec, NpzInMemory, Values, field_column, npz_in_memory};
use crate::mesh::Sign;
use crate::sdf::{Grid, GridRegion};
use crate::sync::{read, write};
use crate::{Engine, EngineOptions, Mode};
use batch::{Answer, Batching, Fault, Job, Op, Shared, Target};
pub use body::fuzz_body;
use body::{AnswerBody, BodyReader, Inflight, Reservation, RowValues};
pub use config::{Config, LogFormat, ServeArgs};
use error::{ApiError, ApiResult};
use metrics::Metrics;
use middleware::{Access, TEST_FAULT};
use private_files::{PrivateDir, PrivateFile};

use archive::*;
use handlers::*;
use state::*;

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
    // Owned here too, to be removed at exit whatever still holds the state.
    let private = Arc::new(PrivateDir::new()?);
    let in_state = private.clone();
    let outcome = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
        let (routes, description) = api();
        let openapi = description.to_pretty_json().unwrap_or_default();
        let state = AppState::new(engine, options, config, openapi, in_state)?;
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
    private.remove();
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

/// Run blocking engine work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> crate::Result<T> + Send + 'static,
) -> ApiResult<T> {
    off_the_runtime(move || work().map_err(ApiError::from)).await
}

/// `work` on the blocking pool: parsing a large body takes seconds of CPU, which on one of
/// the runtime's few threads would stall every connection they serve (health checks too).
async fn off_the_runtime<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the job failed: {e}"),
        )
    })?
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
        let private = Arc::new(PrivateDir::new().unwrap());
        let state = AppState::new(
            engine,
            EngineOptions::default(),
            config,
            String::new(),
            private,
        )
        .unwrap();
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
