//! What every request passes through, outermost first: `observe` (its request id, the request
//! timeout, a panic turned into that request's 500, the metrics and the access-log line),
//! `json_errors` (every error as `{"error": MESSAGE}`) and `guard` (the Host allow-list and
//! the tokens).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;

use super::AppState;
use super::error::ApiError;
use super::listener::Peer;

/// What a handler tells the access log, as a response extension.
#[derive(Clone, Debug, Default)]
pub(crate) struct Access {
    pub target: Option<String>,
    pub rows: Option<usize>,
    pub bytes_in: Option<u64>,
    /// Waiting for the target's worker.
    pub queue_wait: Option<Duration>,
    /// The engine call answering the request's batch.
    pub device: Option<Duration>,
}

/// The header the test hooks read (`closest serve --test-hooks` only).
pub(crate) const TEST_FAULT: &str = "x-closest-test-fault";

const REQUEST_ID: &str = "x-request-id";

/// The request id: the client's `X-Request-Id` when it is a plausible one, else made here.
fn request_id(request: &Request) -> String {
    let given = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            (1..=128).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        });
    match given {
        Some(id) => id.to_string(),
        None => {
            // Unique within the process, unlikely to repeat across restarts.
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            format!(
                "{:016x}",
                (time ^ (n << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n
            )
        }
    }
}

/// The metrics' label of a request: a route of the service's table with its method, or
/// `other` (so that no request can grow the label sets).
fn route_label(request: &Request) -> String {
    let method = request.method();
    let known = [Method::GET, Method::PUT, Method::POST, Method::DELETE];
    match request.extensions().get::<MatchedPath>() {
        Some(path) if known.contains(method) => format!("{method} {}", path.as_str()),
        _ => "other".to_string(),
    }
}

/// Give the request its id, bound its time, turn a panic into its own 500, count it and log
/// it: one line, never a token or a body.
pub(crate) async fn observe(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let id = request_id(&request);
    let route = route_label(&request);
    let method = request.method().clone();
    let peer = request.extensions().get::<Peer>().map(|p| p.0);
    let declared_in = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let started = Instant::now();
    let limit = state.config.request_timeout;
    let answer = std::panic::AssertUnwindSafe(next.run(request)).catch_unwind();
    let mut response = match tokio::time::timeout(limit, answer).await {
        Ok(Ok(response)) => response,
        Ok(Err(panic)) => {
            let what = crate::sync::panic_message(&*panic);
            ApiError::internal(format!("the request failed: a panic in the server: {what}"))
                .into_response()
        }
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request took longer than --request-timeout-s ({} s)",
                limit.as_secs_f64()
            ),
        )
        .into_response(),
    };
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let seconds = started.elapsed().as_secs_f64();
    let status = response.status().as_u16();
    state.metrics.request(&route, status, seconds);
    let access = response
        .extensions()
        .get::<Access>()
        .cloned()
        .unwrap_or_default();
    let bytes_out = axum::body::HttpBody::size_hint(response.body()).exact();
    // Microseconds are the clock's useful resolution here; more digits are noise in the log.
    let ms = |seconds: f64| (seconds * 1e6).round() / 1e3;
    tracing::info!(
        target: "access",
        request_id = %id,
        peer = peer.map(|p| p.to_string()),
        method = %method,
        route = %route,
        target = access.target,
        rows = access.rows,
        status,
        bytes_in = access.bytes_in.or(declared_in),
        bytes_out,
        queue_wait_ms = access.queue_wait.map(|d| ms(d.as_secs_f64())),
        device_ms = access.device.map(|d| ms(d.as_secs_f64())),
        ms = ms(seconds),
    );
    response
}

/// Every error is JSON `{"error": MESSAGE}` (SPEC §7), also those axum answers itself (a body
/// over the limit, an unknown route or method, a malformed query string).
pub(crate) async fn json_errors(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let route = format!("{} {}", request.method(), request.uri().path());
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
        match status {
            // axum's own answers for these are bare reasons; say what was asked and where the
            // routes are listed.
            StatusCode::NOT_FOUND if text.is_empty() => {
                format!("no route {route} (the routes: GET /openapi.json)")
            }
            // axum adds the Allow header after this layer has run.
            StatusCode::METHOD_NOT_ALLOWED => {
                format!(
                    "{route}: the method is not allowed here (the Allow header lists those that are)"
                )
            }
            _ if text.is_empty() => status.canonical_reason().unwrap_or("error").to_string(),
            _ => text,
        }
    };
    ApiError::new(status, message).into_response()
}

/// Whether `host` (a Host header: a name or address, maybe with a port) names this machine's
/// loopback: `localhost` (and names under it) or a loopback address.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // [v6]:port
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host
            }
        }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The authority a request names (RFC 9112 §3.2.2): the target's own when it is in absolute
/// form (its Host header is then ignored), else the one Host header. Two Host headers, or an
/// HTTP/1.1 request with none, are 400: which one a proxy in front believed is unknown.
fn request_host(request: &Request) -> Result<String, String> {
    let headers: Vec<_> = request.headers().get_all(header::HOST).iter().collect();
    if headers.len() > 1 {
        return Err(format!(
            "the request has {} Host headers; HTTP/1.1 allows one",
            headers.len()
        ));
    }
    if let Some(authority) = request.uri().authority() {
        return Ok(authority.as_str().to_string());
    }
    match headers.first() {
        Some(value) => Ok(String::from_utf8_lossy(value.as_bytes()).into_owned()),
        None if request.version() == axum::http::Version::HTTP_11 => {
            Err("the request has no Host header; HTTP/1.1 requires one".to_string())
        }
        None => Ok(String::new()),
    }
}

/// The Host allow-list (without a token, only loopback names and `--allow-host` ones: 421
/// otherwise, against DNS rebinding) and the tokens: every request but the health checks
/// bears `--token-file`'s, PUT and DELETE `--admin-token-file`'s when there is one. Both are
/// compared in constant time.
pub(crate) async fn guard(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let config = &state.config;
    let host = match request_host(&request) {
        Ok(host) => host,
        Err(message) => return ApiError::new(StatusCode::BAD_REQUEST, message).into_response(),
    };
    if config.token.is_none() {
        let bare = host
            .rsplit_once(':')
            .map_or(host.as_str(), |(name, _)| name)
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if !is_loopback_host(&host) && !config.allow_hosts.contains(&bare) {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host `{host}` is not served: without --token-file this server answers \
                     only loopback names (localhost, 127.0.0.1, [::1]) and --allow-host ones"
                ),
            )
            .into_response();
        }
    }
    let path = request.uri().path();
    let open = request.method() == Method::GET && path.starts_with("/v1/health");
    let admin = matches!(*request.method(), Method::PUT | Method::DELETE);
    let needed = match (admin, &config.admin_token) {
        (true, Some(admin_token)) => Some(admin_token),
        _ if open => None,
        _ => config.token.as_ref(),
    };
    if let Some(token) = needed {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            let which = if admin && config.admin_token.is_some() {
                "missing or wrong bearer token (PUT and DELETE need --admin-token-file's)"
            } else {
                "missing or wrong bearer token"
            };
            return ApiError::new(StatusCode::UNAUTHORIZED, which).into_response();
        }
    }
    if matches!(*request.method(), Method::PUT | Method::POST) {
        if let Some(coding) = body_coding(&request) {
            return ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "the body is sent with the coding `{coding}`, which this server does not \
                     decode; send it as is (identity, or chunked transfer)"
                ),
            )
            .into_response();
        }
    }
    if config.test_hooks
        && request
            .headers()
            .get(TEST_FAULT)
            .is_some_and(|v| v == "panic-handler")
    {
        panic!("test hook: a panic in the handler");
    }
    next.run(request).await
}

/// A content or transfer coding of the body other than identity and chunked: the bytes that
/// arrive are then not the file the route reads, so they are refused rather than misread.
fn body_coding(request: &Request) -> Option<String> {
    let headers = request.headers();
    let content = headers.get_all(header::CONTENT_ENCODING).iter();
    let transfer = headers.get_all(header::TRANSFER_ENCODING).iter();
    content
        .chain(transfer)
        .flat_map(|value| {
            String::from_utf8_lossy(value.as_bytes())
                .split(',')
                .map(|coding| coding.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .find(|coding| !matches!(coding.as_str(), "" | "identity" | "chunked"))
        .map(|coding| coding.chars().take(64).collect())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // The length is not secret; the contents are compared without an early exit.
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::is_loopback_host;

    #[test]
    fn loopback_hosts_are_told_from_others() {
        for host in [
            "localhost",
            "LOCALHOST:7341",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:7341",
            "a.localhost:1",
            "localhost.",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:7341",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1",
            "[::2]:1",
            "",
            "0.0.0.0",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
