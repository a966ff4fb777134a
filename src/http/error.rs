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
    #[schema(value_type = Option<ErrorDetails>)]
    pub details: Option<serde_json::Value>,
}

/// The schema of `ErrorBody.details`: the rejected items of a batch whose every item was invalid
/// (422), or the index and field of an invalid item of a dry run; other keys may follow.
pub struct ErrorDetails;

impl utoipa::PartialSchema for ErrorDetails {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::Ref;
        use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some("Structured detail of an error"))
            .property(
                "rejected",
                ArrayBuilder::new()
                    .items(Ref::from_schema_name("RejectedItem"))
                    .description(Some("Why each item of the batch was refused")),
            )
            .property(
                "index",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .description(Some("Position of the offending item")),
            )
            .property(
                "field",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("The offending field of that item")),
            )
            .additional_properties(Some(AdditionalProperties::<utoipa::openapi::schema::Schema>::FreeForm(
                true,
            )))
            .into()
    }
}
impl ToSchema for ErrorDetails {}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    Unauthorized(String),
    /// The token was valid but its `expires_at` has passed.
    #[error("{0}")]
    TokenExpired(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A read asked for a catalog version its failures are not all classified under.
    #[error("{message}")]
    CatalogPending {
        message: String,
        details: serde_json::Value,
    },
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{message}")]
    Unprocessable {
        message: String,
        details: Option<serde_json::Value>,
    },
    #[error("service unavailable (overloaded, or the database does not answer); retry after {retry_after_secs} s")]
    Unavailable { retry_after_secs: u32 },
    #[error(
        "this token's rate limit ({rps} requests/s, bursts of {burst}) is used up; retry after {retry_after_secs} s"
    )]
    RateLimited {
        retry_after_secs: u32,
        rps: f64,
        burst: u32,
    },
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("internal error: {0}")]
    Internal(anyhow::Error),
}

/// Seconds a client should wait when the pool had no connection for it in time.
pub const RETRY_AFTER_POOL_SECS: u32 = 1;
/// Seconds a client should wait when the database does not answer at all.
pub const RETRY_AFTER_OUTAGE_SECS: u32 = 2;

/// When the error says the database is busy or away (not that the request or the code is wrong),
/// the seconds after which a retry may succeed.
pub fn unavailable_retry_after(e: &sqlx::Error) -> Option<u32> {
    match e {
        // No connection within the acquire timeout: the pool is busy, or every attempt to
        // connect was refused (sqlx retries a refused connect until the timeout).
        sqlx::Error::PoolTimedOut => Some(RETRY_AFTER_POOL_SECS),
        // Closed while shutting down; a connection lost or refused; the server went away.
        sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => Some(RETRY_AFTER_OUTAGE_SECS),
        sqlx::Error::Database(db) => {
            let code = db.code()?;
            // 08xxx connection exception; 57P01-57P03 admin/crash shutdown, cannot connect
            // now (starting up / shutting down); 53300 too many connections; 40001 also what a
            // read replica answers when replay cancels a query ("conflict with recovery"); 55P03
            // a lock not granted within lock_timeout (a month's partition being created while
            // other transactions hold the table, as on Citus under concurrent ingest), and 40P01
            // a deadlock Postgres (or Citus' distributed detector) broke by cancelling this one:
            // both are gone on a retry.
            (code.starts_with("08")
                || matches!(
                    &*code,
                    "57P01" | "57P02" | "57P03" | "53300" | "40001" | "55P03" | "40P01"
                ))
            .then_some(RETRY_AFTER_OUTAGE_SECS)
        }
        _ => None,
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        match unavailable_retry_after(&e) {
            Some(retry_after_secs) => {
                tracing::warn!(error = %e, retry_after_secs, "database unavailable; answering 503");
                metrics::counter!("faultline_db_unavailable_total").increment(1);
                ApiError::Unavailable { retry_after_secs }
            }
            None if is_unstorable_text(&e) => ApiError::bad_request(
                "invalid_text",
                "a text value holds a character the database cannot store (U+0000)",
            ),
            None => ApiError::Database(e),
        }
    }
}

/// Postgres refusing a text or jsonb value it cannot store (22021: U+0000 in text; 22P05: `\u0000`
/// in jsonb): the request's fault, whichever field slipped past its validation.
fn is_unstorable_text(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().is_some_and(|c| c == "22021" || c == "22P05"))
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        // A database outage wrapped in context is still an outage.
        if let Some(retry_after_secs) = e
            .chain()
            .find_map(|c| c.downcast_ref::<sqlx::Error>().and_then(unavailable_retry_after))
        {
            tracing::warn!(error = ?e, retry_after_secs, "database unavailable; answering 503");
            return ApiError::Unavailable { retry_after_secs };
        }
        ApiError::Internal(e)
    }
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
            ApiError::TokenExpired(_) => (StatusCode::UNAUTHORIZED, "token_expired"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::CatalogPending { .. } => (StatusCode::CONFLICT, "catalog_version_pending"),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            ApiError::Unprocessable { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            ApiError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
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
            ApiError::CatalogPending { details, .. } => Some(details.clone()),
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
            ApiError::Unauthorized(_) | ApiError::TokenExpired(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::Unavailable { retry_after_secs } | ApiError::RateLimited { retry_after_secs, .. } => {
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
