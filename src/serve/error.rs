//! A failed request: its status and message, answered as JSON `{"error": MESSAGE}` (SPEC §7).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::Error;

#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }
}

impl From<&Error> for ApiError {
    fn from(e: &Error) -> ApiError {
        let status = match e.exit_code() {
            _ if matches!(e, Error::OutOfMemory(_)) => StatusCode::INSUFFICIENT_STORAGE,
            2 => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let message = e.to_string();
        let message = match status {
            StatusCode::BAD_REQUEST => crate::error::flags_as_arguments(&message, QUERY_PARAMETERS),
            _ => message,
        };
        ApiError::new(status, message)
    }
}

/// The query parameters whose CLI flags (`--pad`) the engine's messages name: named as the
/// client wrote them (`pad`). Server flags (`--max-grid-samples`) keep their names.
const QUERY_PARAMETERS: &[&str] = &["res", "pad", "bounds", "sign", "mode", "fields", "format"];

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::from(&e)
    }
}

/// Bytes of an error message answered at most: messages quote what the client sent (a
/// target's name, a field's), and a client that sends 60 KB of it gets back a message, not
/// its 60 KB.
const MESSAGE_MAX_BYTES: usize = 2048;

/// `message` cut to `MESSAGE_MAX_BYTES` at a character's boundary, saying how much was cut.
fn bounded(message: String) -> String {
    if message.len() <= MESSAGE_MAX_BYTES {
        return message;
    }
    let mut end = MESSAGE_MAX_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &message[..end], message.len() - end)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": bounded(self.message) }).to_string();
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
