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
