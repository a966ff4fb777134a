//! An ingested signal: parsed and validated once at the edge, so that storage and analytics
//! only ever see well-formed events.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::taxonomy::{Category, Component, RootCause, Symptom};

pub const MAX_TEXT_LEN: usize = 256;
pub const MAX_MESSAGE_LEN: usize = 16 * 1024;
/// Clocks drift, but a signal a day in the future is a broken sender, not a fact.
pub const MAX_FUTURE_SKEW_HOURS: i64 = 24;
/// The most occurrences one sent signal may stand for.
pub const MAX_REPEAT_COUNT: i32 = 1_000_000_000;
/// A sent run of repeats spans at most a day, the longest run the server stores as one signal.
pub const MAX_REPEAT_SPAN_SECS: i64 = 86_400;

/// One signal as a sender writes it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct EventInput {
    /// Idempotency key chosen by the sender: the same id sent again is counted as a duplicate.
    pub id: Uuid,
    /// When it happened, RFC 3339 with an offset (e.g. `2026-11-02T10:15:00Z`).
    #[schema(value_type = String, format = DateTime, example = "2026-11-02T10:15:00Z")]
    pub occurred_at: String,
    #[schema(value_type = Text)]
    pub cluster: String,
    /// Hostname as registered in the inventory.
    #[schema(value_type = Option<OptionalText>)]
    pub node: Option<String>,
    #[schema(minimum = 0, maximum = 1023)]
    pub gpu_index: Option<i32>,
    #[schema(value_type = Option<OptionalText>)]
    pub gpu_uuid: Option<String>,
    /// GPU model as the agent reads it (e.g. "NVIDIA H100 80GB HBM3").
    #[schema(value_type = Option<OptionalText>)]
    pub gpu_model: Option<String>,
    #[schema(value_type = Option<OptionalText>)]
    pub job_id: Option<String>,
    /// Number of GPUs of the job.
    #[schema(minimum = 1)]
    pub job_gpus: Option<i32>,
    /// What was observed. Well-known: xid, sxid, ecc, row_remap, nvlink, nccl_timeout, nccl_error,
    /// cuda_error, gpu_oom, host_oom, link_flap, link_down, node_unreachable, kernel_panic, power,
    /// fan, thermal, storage_error, scheduler_error, submission_error, gsp_error, inforom,
    /// health_check, job_exit, slowdown, low_utilization. Other kinds are accepted and stored.
    #[schema(example = "xid", pattern = "^[ \\t\\n\\r]*[A-Za-z0-9_.-]{1,64}[ \\t\\n\\r]*$")]
    pub kind: String,
    /// Numeric code, e.g. the XID number. For `ecc`: 1 = correctable (single-bit), 2 = uncorrectable.
    pub code: Option<i64>,
    pub symptom: Option<Symptom>,
    /// Root cause when the sender already knows it; it always wins over the classification catalog.
    pub root_cause: Option<RootCauseInput>,
    #[schema(max_length = 16384)]
    pub message: Option<String>,
    /// Free-form facts (an object).
    #[schema(value_type = Option<HashMap<String, serde_json::Value>>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
    /// How many identical occurrences this signal stands for (default 1): a sender that compacts a
    /// storm of repeats (the node agent) sends one signal for them, seen from `occurred_at` over
    /// `repeat_span_seconds`. Stored like repeats the server merges itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000000000)]
    pub repeat_count: Option<i32>,
    /// Seconds from `occurred_at` to the last of `repeat_count` occurrences (default 0), at most a
    /// day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400)]
    pub repeat_span_seconds: Option<f64>,
}

/// Root cause given by the sender; the component must belong to the category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
pub struct RootCauseInput {
    pub category: Category,
    pub component: Component,
}

/// A validated signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: Uuid,
    pub occurred_at: DateTime<Utc>,
    pub cluster: String,
    pub node: Option<String>,
    pub gpu_index: Option<i32>,
    pub gpu_uuid: Option<String>,
    pub gpu_model: Option<String>,
    pub job_id: Option<String>,
    pub job_gpus: Option<i32>,
    pub kind: String,
    pub code: Option<i64>,
    pub symptom: Option<Symptom>,
    pub root_cause: Option<RootCause>,
    pub message: Option<String>,
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Occurrences this signal stands for as sent (1 unless the sender compacted repeats).
    pub repeat_count: i32,
    /// The last of them (None: only `occurred_at`).
    pub last_occurred_at: Option<DateTime<Utc>>,
}

/// Why one item of a batch was refused, and where.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    /// JSON path of the offending field inside the item, when there is one (e.g. `root_cause.component`).
    pub field: Option<String>,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: Some(field.into()),
            message: message.into(),
        }
    }
}

/// Deserialises one batch item and validates it.
pub fn parse_event(value: serde_json::Value, now: DateTime<Utc>) -> Result<Event, FieldError> {
    let input: EventInput = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        FieldError {
            field: (path != "." && !path.is_empty()).then_some(path),
            message: e.into_inner().to_string(),
        }
    })?;
    validate_event(input, now)
}

pub fn validate_event(input: EventInput, now: DateTime<Utc>) -> Result<Event, FieldError> {
    let occurred_at = DateTime::parse_from_rfc3339(input.occurred_at.trim())
        .map_err(|e| {
            FieldError::new(
                "occurred_at",
                format!("'{}' is not an RFC 3339 timestamp: {e}", input.occurred_at),
            )
        })?
        .with_timezone(&Utc);
    if occurred_at > now + Duration::hours(MAX_FUTURE_SKEW_HOURS) {
        return Err(FieldError::new(
            "occurred_at",
            format!("{occurred_at} is more than {MAX_FUTURE_SKEW_HOURS} h in the future"),
        ));
    }
    let cluster = required_text("cluster", input.cluster)?;
    let kind = parse_kind(&input.kind)?;
    if let Some(i) = input.gpu_index
        && !(0..=1023).contains(&i)
    {
        return Err(FieldError::new(
            "gpu_index",
            format!("{i} is not a GPU index (0..=1023)"),
        ));
    }
    if let Some(n) = input.job_gpus
        && n <= 0
    {
        return Err(FieldError::new("job_gpus", format!("{n} must be positive")));
    }
    let root_cause = match input.root_cause {
        None => None,
        Some(rc) => {
            Some(RootCause::new(rc.category, rc.component).map_err(|m| FieldError::new("root_cause.component", m))?)
        }
    };
    let message = match input.message {
        Some(m) if m.chars().count() > MAX_MESSAGE_LEN => {
            return Err(FieldError::new(
                "message",
                format!("longer than {MAX_MESSAGE_LEN} characters"),
            ));
        }
        m => m,
    };
    let repeat_count = input.repeat_count.unwrap_or(1);
    if !(1..=MAX_REPEAT_COUNT).contains(&repeat_count) {
        return Err(FieldError::new(
            "repeat_count",
            format!("{repeat_count} is not between 1 and {MAX_REPEAT_COUNT}"),
        ));
    }
    let span = input.repeat_span_seconds.unwrap_or(0.0);
    if !(0.0..=MAX_REPEAT_SPAN_SECS as f64).contains(&span) {
        return Err(FieldError::new(
            "repeat_span_seconds",
            format!("{span} is not between 0 and {MAX_REPEAT_SPAN_SECS} seconds"),
        ));
    }
    let span = Duration::microseconds((span * 1e6).round() as i64);
    let last_occurred_at = (span > Duration::zero()).then(|| occurred_at + span);
    Ok(Event {
        id: input.id,
        occurred_at,
        cluster,
        node: optional_text("node", input.node)?,
        gpu_index: input.gpu_index,
        gpu_uuid: optional_text("gpu_uuid", input.gpu_uuid)?,
        gpu_model: optional_text("gpu_model", input.gpu_model)?,
        job_id: optional_text("job_id", input.job_id)?,
        job_gpus: input.job_gpus,
        kind,
        code: input.code,
        symptom: input.symptom,
        root_cause,
        message,
        attributes: input.attributes.unwrap_or_default(),
        repeat_count,
        last_occurred_at,
    })
}

/// Kinds are lower-case identifiers so that `XID` and `xid` are one kind.
fn parse_kind(raw: &str) -> Result<String, FieldError> {
    let kind = raw.trim().to_ascii_lowercase();
    if kind.is_empty() || kind.len() > 64 {
        return Err(FieldError::new("kind", "must be 1 to 64 characters"));
    }
    if !kind
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(FieldError::new(
            "kind",
            format!("'{raw}' may only contain letters, digits, '_', '-' and '.'"),
        ));
    }
    Ok(kind)
}

/// A name, hostname, cluster, job id...: 1 to 256 characters (counted before trimming, as the
/// schema's `maxLength` counts them), not only white space, no control characters; stored trimmed.
pub fn required_text(field: &str, value: String) -> Result<String, FieldError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value.chars().count() > MAX_TEXT_LEN || v.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_TEXT_LEN} characters of printable text"),
        ));
    }
    Ok(v.to_string())
}

/// `required_text` as a JSON Schema pattern: something other than white space, and no control
/// character (Unicode Cc: U+0000-U+001F, U+007F-U+009F) anywhere.
pub const TEXT_PATTERN: &str =
    r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$";
/// `optional_text` as a pattern: blank (taken as absent) or [`TEXT_PATTERN`].
pub const OPTIONAL_TEXT_PATTERN: &str =
    r"^(?:\s*|[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*)$";

/// The schema of a [`required_text`] field (names, hostnames, clusters, job ids).
pub struct Text;

impl utoipa::PartialSchema for Text {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_schema(
            1,
            TEXT_PATTERN,
            "1 to 256 characters, not only white space, no control characters (stored trimmed)",
        )
    }
}
impl ToSchema for Text {}

/// The schema of an [`optional_text`] field: blank means absent.
pub struct OptionalText;

impl utoipa::PartialSchema for OptionalText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_schema(
            0,
            OPTIONAL_TEXT_PATTERN,
            "At most 256 characters, no control characters; blank (or null) means absent",
        )
    }
}
impl ToSchema for OptionalText {}

fn text_schema(
    min_length: usize,
    pattern: &str,
    description: &str,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length((min_length > 0).then_some(min_length))
        .max_length(Some(MAX_TEXT_LEN))
        .pattern(Some(pattern))
        .description(Some(description))
        .into()
}

pub fn optional_text(field: &str, value: Option<String>) -> Result<Option<String>, FieldError> {
    match value {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => required_text(field, v).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn valid() -> serde_json::Value {
        json!({
            "id": "6f1c1a52-8a4e-4c59-9b59-0a8d2f6d7d01",
            "occurred_at": "2026-11-30T10:00:00+01:00",
            "cluster": "c1", "node": "n1", "kind": "XID", "code": 79,
            "root_cause": {"category": "hardware", "component": "gpu"},
            "attributes": {"pci": "0000:3b:00.0"}
        })
    }

    #[test]
    fn a_valid_event_is_normalised() {
        let e = parse_event(valid(), now()).unwrap();
        assert_eq!(e.kind, "xid");
        assert_eq!(e.occurred_at.to_rfc3339(), "2026-11-30T09:00:00+00:00");
        assert_eq!(
            e.root_cause,
            Some(RootCause {
                category: Category::Hardware,
                component: Component::Gpu
            })
        );
        assert_eq!(e.attributes["pci"], "0000:3b:00.0");
    }

    #[test]
    fn errors_say_which_field() {
        let cases = [
            ("occurred_at", json!("2026-11-30 10:00"), "occurred_at"),
            ("gpu_index", json!("three"), "gpu_index"),
            ("symptom", json!("exploded"), "symptom"),
            (
                "root_cause",
                json!({"category": "user", "component": "nvlink"}),
                "root_cause.component",
            ),
            ("cluster", json!("  "), "cluster"),
            ("kind", json!("x id"), "kind"),
            ("job_gpus", json!(0), "job_gpus"),
            ("occurred_at", json!("2026-12-05T00:00:00Z"), "occurred_at"),
            ("repeat_count", json!(0), "repeat_count"),
            ("repeat_count", json!(1.5), "repeat_count"),
            ("repeat_span_seconds", json!(-1), "repeat_span_seconds"),
            ("repeat_span_seconds", json!(86_400.5), "repeat_span_seconds"),
            ("repeat_span_seconds", json!("a minute"), "repeat_span_seconds"),
        ];
        for (key, value, field) in cases {
            let mut v = valid();
            v[key] = value;
            let err = parse_event(v, now()).unwrap_err();
            assert_eq!(err.field.as_deref(), Some(field), "{key}: {err:?}");
        }
    }

    #[test]
    fn a_compacted_signal_keeps_its_count_and_last_time() {
        let mut v = valid();
        v["repeat_count"] = json!(99_999);
        v["repeat_span_seconds"] = json!(59.5);
        let e = parse_event(v, now()).unwrap();
        assert_eq!(e.repeat_count, 99_999);
        assert_eq!(e.last_occurred_at, Some("2026-11-30T09:00:59.5Z".parse().unwrap()));
        // A plain signal stands for itself; a span of zero adds nothing.
        let mut v = valid();
        v["repeat_span_seconds"] = json!(0);
        let e = parse_event(v, now()).unwrap();
        assert_eq!((e.repeat_count, e.last_occurred_at), (1, None));
    }

    #[test]
    fn missing_required_field_is_named() {
        let mut v = valid();
        v.as_object_mut().unwrap().remove("cluster");
        let err = parse_event(v, now()).unwrap_err();
        assert!(err.message.contains("missing field `cluster`"), "{err:?}");
    }
}

/// One stored signal standing for `count` identical ones seen from `event.occurred_at` to
/// `last_at`. `event` is the earliest member (ties: smallest id), so its id is deterministic.
#[derive(Debug, Clone, PartialEq)]
pub struct Burst {
    pub event: Event,
    pub count: i32,
    pub last_at: DateTime<Utc>,
}
