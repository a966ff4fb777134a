//! One error type for the whole API; every variant maps to a status and a JSON body.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// The JSON body of every error response.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code, e.g. `invalid_json`, `payload_too_large`, `forbidden`.
    pub error: String,
    /// What is wrong and where, for a person.
    pub message: String,
    /// Structured detail when there is some (e.g. the rejected items of a batch).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{message}")]
    Unprocessable {
        message: String,
        details: Option<serde_json::Value>,
    },
    #[error("service overloaded, retry after {retry_after_secs} s")]
    Unavailable { retry_after_secs: u32 },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("internal error: {0}")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            code,
            message: message.into(),
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            ApiError::Unprocessable { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            ApiError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Database(_) | ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            // Never leak SQL or internals to the caller; the log has them.
            ApiError::Database(e) => {
                tracing::error!(error = %e, "database error");
                "internal error; see the server log".to_string()
            }
            ApiError::Internal(e) => {
                tracing::error!(error = ?e, "internal error");
                "internal error; see the server log".to_string()
            }
            other => other.to_string(),
        };
        let details = match &self {
            ApiError::Unprocessable { details, .. } => details.clone(),
            _ => None,
        };
        let mut response = (
            status,
            axum::Json(ErrorBody {
                error: code.to_string(),
                message,
                details,
            }),
        )
            .into_response();
        match self {
            ApiError::Unauthorized(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::Unavailable { retry_after_secs } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            }
            _ => {}
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

impl From<crate::ingest::batch::BatchError> for ApiError {
    fn from(e: crate::ingest::batch::BatchError) -> Self {
        use crate::ingest::batch::BatchError;
        match e {
            BatchError::Empty(_) => ApiError::bad_request("empty_batch", e.to_string()),
            BatchError::TooLarge { .. } => ApiError::PayloadTooLarge(e.to_string()),
            BatchError::AllForbidden(_) => ApiError::Forbidden(e.to_string()),
            BatchError::AllInvalid { ref rejected, .. } => ApiError::Unprocessable {
                message: e.to_string(),
                details: Some(serde_json::json!({ "rejected": rejected })),
            },
        }
    }
}
