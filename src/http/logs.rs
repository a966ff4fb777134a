//! `POST /v1/logs`: raw log lines, as text or as the NDJSON/JSON records of log shippers.

use std::collections::BTreeMap;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ApiContext;
use super::caller::Caller;
use super::extract::{AppQuery, content_type, read_body_limited};
use crate::domain::auth::Permission;
use crate::domain::event::{Event, FieldError};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ingest::StoreOutcome;
use crate::ingest::batch::RejectedItem;
use crate::ingest::batch::{Batch, RejectReason, Route, count_rejected};
use crate::logparse::records::{
    FieldNames, LineOutcome, LineSource, Occurrences, bound_line, ingest_line, read_record,
};

/// Lines one request may hold: ten per batch item of `/v1/events` (100,000 by default), since
/// most log lines are noise.
pub const LINES_PER_BATCH_ITEM: usize = 10;

pub fn router() -> Router<ApiContext> {
    Router::new().route("/v1/logs", post(ingest_logs))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Cluster of the lines; required for text/plain; for records, the default when a record has no cluster field.
    pub cluster: Option<String>,
    /// Host of text/plain lines (else each line's own syslog/journald host); for records, the default when a record has no host field.
    pub node: Option<String>,
    /// Job of the lines, when the record does not name one.
    pub job_id: Option<String>,
    /// Record field holding the log text (default: `message`, then `log`, `MESSAGE`, `msg`). Dotted names look into nested objects.
    pub message_field: Option<String>,
    /// Record field holding the host (default: `host`, then `hostname`, `_HOSTNAME`, `node`, `kubernetes.host`).
    pub host_field: Option<String>,
    /// Record field holding the time (default: `timestamp`, then `@timestamp`, `time`, `date`, `__REALTIME_TIMESTAMP`): RFC 3339 or epoch seconds.
    pub timestamp_field: Option<String>,
    /// Record field holding the job id (default: `job_id`, then `slurm_job_id`, `SLURM_JOB_ID`, `job`).
    pub job_field: Option<String>,
    /// Record field holding the cluster (default: `cluster`).
    pub cluster_field: Option<String>,
}

impl LogsQuery {
    fn field_names(&self) -> FieldNames {
        let mut names = FieldNames::default();
        let one = |v: &Option<String>, slot: &mut Vec<String>| {
            if let Some(v) = v.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
                *slot = vec![v.to_string()];
            }
        };
        one(&self.message_field, &mut names.message);
        one(&self.host_field, &mut names.host);
        one(&self.timestamp_field, &mut names.timestamp);
        one(&self.job_field, &mut names.job);
        one(&self.cluster_field, &mut names.cluster);
        names
    }
}

/// One shipper record (Vector's `http` sink, Fluent Bit's `http` output), as documented: the line
/// in `message` (or `log`, `MESSAGE`, `msg`, or the field `message_field` names); other fields
/// (host, timestamp, job, cluster: see the query parameters) as the shipper sends them.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of a body read as JSON values
pub struct LogRecord {
    /// One or more log lines.
    pub message: String,
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct LogIngestResponse {
    /// Shipper records read (0 for text/plain).
    pub records: usize,
    /// Non-blank lines read (a record's message may hold several).
    pub lines: usize,
    /// Lines that became signals.
    pub signals: usize,
    /// Signals by kind (`xid`, `nccl_timeout`, ...).
    pub signals_by_kind: BTreeMap<String, usize>,
    /// Lines that matched no parser (noise, or an Xid without a number).
    pub unmatched: usize,
    /// Lines longer than 64 KiB, cut to 64 KiB before parsing.
    pub truncated_lines: usize,
    #[serde(flatten)]
    pub outcome: StoreOutcome,
    /// Records (index = record) or lines (index = line, for text/plain) that were refused.
    pub rejected: Vec<RejectedItem>,
}

/// Ingest raw log lines.
///
/// `text/plain`: one line per line; `cluster` query parameter required, `node` recommended (else
/// each line's own syslog/journald host), `job_id` optional. `application/x-ndjson` (or
/// `application/json`: an array of records, one record, or NDJSON): records as Vector's `http`
/// sink and Fluent Bit's `http` output send them; field names per the query parameters. A
/// message with several lines is parsed line by line. `Content-Encoding: gzip` accepted; the body
/// limit of `/v1/events` applies, and at most 10 x `FAULTLINE_MAX_BATCH_ITEMS` lines (413 beyond).
/// Invalid UTF-8 is replaced (U+FFFD) line by line; lines over 64 KiB are cut and counted in
/// `truncated_lines`. Each recognised line becomes a signal with a stable id (uuid v5 of cluster,
/// host, timestamp, line and its occurrence number in the request), so resending is idempotent;
/// its time is the line's own absolute timestamp, else the record's, else the request time.
/// Identical signals less than 60 s apart become one stored signal with `repeat_count`.
#[utoipa::path(
    post, path = "/v1/logs", tag = "ingest",
    params(LogsQuery),
    request_body(content(
        (LogRecord = "application/json"),
        (LogRecord = "application/x-ndjson"),
        (String = "text/plain")
    )),
    responses(
        (status = 200, description = "Lines processed: signals stored durably; see `unmatched` and `rejected` for the rest", body = LogIngestResponse),
        (status = 400, description = "Empty body, missing `cluster`, bad query parameter, or body not decompressible", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "Token role may not ingest, or the cluster is outside the token's scope", body = ErrorBody),
        (status = 413, description = "Body or line count larger than the documented limits", body = ErrorBody),
        (status = 415, description = "Content-Type is not text/plain, application/x-ndjson or application/json", body = ErrorBody),
        (status = 422, description = "Every record was invalid; `details.rejected` lists why", body = ErrorBody),
        (status = 503, description = "Not admitted: too many ingest requests or request body bytes in flight, no database connection free within the acquire timeout, or the database does not answer. Nothing was stored; retry after the Retry-After header", body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))),
    ),
    security(("bearer" = []))
)]
pub async fn ingest_logs(
    State(ctx): State<ApiContext>,
    caller: Caller,
    AppQuery(query): AppQuery<LogsQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<LogIngestResponse>> {
    caller.require(Permission::Ingest)?;
    let _permit = ctx.ingest_permit("logs")?;
    let _timer = crate::ingest::timing::IngestTimer::start(Route::Logs);
    let limits = &ctx.config.limits;
    let is_text = match content_type(&headers).as_deref() {
        Some("text/plain") => true,
        Some("application/x-ndjson" | "application/ndjson" | "application/jsonlines" | "application/json") => false,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "Content-Type {} is not accepted: send text/plain, application/x-ndjson or application/json",
                other.unwrap_or("(none)")
            )));
        }
    };
    if let Some(c) = query.cluster.as_deref()
        && !caller.may_write(c)
    {
        return Err(ApiError::Forbidden(format!("this token may not write cluster '{c}'")));
    }
    if is_text && query.cluster.as_deref().is_none_or(|c| c.trim().is_empty()) {
        return Err(ApiError::bad_request(
            "missing_parameter",
            "text/plain lines need the `cluster` query parameter",
        ));
    }
    let bytes = read_body_limited(&headers, body, limits.max_body_bytes).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("empty_body", "the request body is empty"));
    }
    let max_lines = limits.max_batch_items.saturating_mul(LINES_PER_BATCH_ITEM);
    let mut out = LogIngestResponse::default();
    let mut events: Vec<Event> = Vec::new();
    let received_at = Utc::now();
    let mut occurrences = Occurrences::default();
    let tally = |out: &mut LogIngestResponse, events: &mut Vec<Event>, index: usize, outcome: LineOutcome| match outcome
    {
        LineOutcome::Unmatched => out.unmatched += 1,
        LineOutcome::Signal(e) => {
            *out.signals_by_kind.entry(e.kind.clone()).or_default() += 1;
            out.signals += 1;
            events.push(*e);
        }
        LineOutcome::Invalid(e) => out.rejected.push(reject(index, RejectReason::InvalidSignal, e)),
    };
    if is_text {
        let src = LineSource {
            cluster: query.cluster.as_deref().unwrap_or_default(),
            node: query.node.as_deref(),
            job_id: query.job_id.as_deref(),
            record_time: None,
            received_at,
        };
        for (index, raw) in split_lines(&bytes).enumerate() {
            out.lines += 1;
            if out.lines > max_lines {
                return Err(too_many_lines(max_lines));
            }
            let line = String::from_utf8_lossy(raw);
            let (line, cut) = bound_line(&line);
            out.truncated_lines += usize::from(cut);
            let outcome = ingest_line(line, &src, &mut occurrences);
            tally(&mut out, &mut events, index, outcome);
        }
    } else {
        let names = query.field_names();
        let records = Batch::new(Route::Logs, split_records(&bytes), max_lines)?
            .parse(|item| {
                let v = item.map_err(|message| (RejectReason::InvalidJson, FieldError { field: None, message }))?;
                if !v.is_object() {
                    let message = format!("a record must be a JSON object, not {v}");
                    return Err((RejectReason::InvalidRecord, FieldError { field: None, message }));
                }
                let mut record = read_record(&v, &names).map_err(|e| {
                    let reason = if e.field.is_none() {
                        RejectReason::MissingField
                    } else {
                        RejectReason::InvalidField
                    };
                    (reason, e)
                })?;
                record.cluster = record
                    .cluster
                    .or_else(|| query.cluster.clone())
                    .filter(|c| !c.trim().is_empty());
                if record.cluster.is_none() {
                    let message = "no cluster: add a cluster field or the `cluster` query parameter".into();
                    return Err((RejectReason::MissingField, FieldError { field: None, message }));
                }
                Ok(record)
            })
            .scoped(|r| r.cluster.as_deref().unwrap_or_default(), |c| caller.may_write(c))
            .finish(caller.cluster.as_deref())?;
        out.records = records.received;
        out.rejected = records.rejected;
        for (&index, record) in records.indices.iter().zip(&records.items) {
            let src = LineSource {
                cluster: record.cluster.as_deref().unwrap_or_default(),
                node: record.host.as_deref().or(query.node.as_deref()),
                job_id: record.job_id.as_deref().or(query.job_id.as_deref()),
                record_time: record.time,
                received_at,
            };
            for line in record.message.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if line.trim().is_empty() {
                    continue;
                }
                out.lines += 1;
                if out.lines > max_lines {
                    return Err(too_many_lines(max_lines));
                }
                let (line, cut) = bound_line(line);
                out.truncated_lines += usize::from(cut);
                let outcome = ingest_line(line, &src, &mut occurrences);
                tally(&mut out, &mut events, index, outcome);
            }
        }
    }
    count_rejected(
        Route::Logs,
        out.rejected.iter().filter(|r| r.reason == RejectReason::InvalidSignal),
    );
    if !events.is_empty() {
        out.outcome = crate::ingest::store_events(
            &ctx.db,
            &ctx.catalog,
            ctx.config.fold_window(),
            ctx.config.retention.signal_retention_days,
            Route::Logs,
            events,
        )
        .await?;
    }
    metrics::counter!("faultline_log_lines_total", "outcome" => "signal").increment(out.signals as u64);
    metrics::counter!("faultline_log_lines_total", "outcome" => "unmatched").increment(out.unmatched as u64);
    Ok(Json(out))
}

fn reject(index: usize, reason: RejectReason, e: FieldError) -> RejectedItem {
    RejectedItem {
        index,
        reason,
        field: e.field,
        message: e.message,
    }
}

fn too_many_lines(max: usize) -> ApiError {
    ApiError::PayloadTooLarge(format!("more than {max} lines in one request"))
}

/// Non-blank lines, without their `\r`.
fn split_lines(bytes: &Bytes) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
}

/// One JSON array of records, one record, or NDJSON (one record per non-blank line, a bad line
/// rejected alone). Invalid UTF-8 inside a record is replaced rather than failing the record.
fn split_records(bytes: &Bytes) -> Vec<Result<serde_json::Value, String>> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Array(items)) => items.into_iter().map(Ok).collect(),
        Ok(v @ serde_json::Value::Object(_)) => vec![Ok(v)],
        _ => split_lines(bytes)
            .map(|l| serde_json::from_str(&String::from_utf8_lossy(l)).map_err(|e| format!("line is not JSON: {e}")))
            .collect(),
    }
}
