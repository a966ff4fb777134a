//! A failure's lifecycle: resolution, recovery phases and the post-mortem root cause, patched by
//! people and agents. Pure: applying a patch gives the new state and the list of changes to audit.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::event::FieldError;
use super::taxonomy::{Category, Component, RootCause};

/// How the failure was cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// The job was resumed by a plain restart (a transient fault).
    TransientRestart,
    /// The node had to be drained (taken out of service) first.
    Drained,
    Other,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::TransientRestart => "transient_restart",
            Resolution::Drained => "drained",
            Resolution::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Resolution::TransientRestart, Resolution::Drained, Resolution::Other]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// The lifecycle as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lifecycle {
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution: Option<Resolution>,
    pub detection_minutes: Option<f64>,
    pub resubmission_minutes: Option<f64>,
    pub setup_minutes: Option<f64>,
    pub recomputation_minutes: Option<f64>,
    pub post_mortem: Option<RootCause>,
    pub note: Option<String>,
}

/// Distinguishes an absent field (leave unchanged) from `null` (clear it).
/// An object or null, never serde's sequence form of a struct (`[1, 2]` is not a patch).
fn object_only<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RecoveryPatch>, D::Error> {
    match Option::<serde_json::Map<String, serde_json::Value>>::deserialize(d)? {
        None => Ok(None),
        Some(m) => serde_json::from_value(serde_json::Value::Object(m))
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Recovery phases in minutes (each absent = unchanged, null = cleared).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoveryPatch {
    /// Until the failure was detected: for a hang, the time until the all-reduce timeout fired (Unicron: up to 30).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>)]
    pub detection: Option<Option<f64>>,
    /// Resubmitting the job and waiting for its allocation (Unicron: 9).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>)]
    pub resubmission: Option<Option<f64>>,
    /// Environment and CUDA set-up, loading the checkpoint (Unicron: 14).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>)]
    pub setup: Option<Option<f64>>,
    /// Recomputing the steps since the last checkpoint (Unicron: 15).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>)]
    pub recomputation: Option<Option<f64>>,
}

/// Post-mortem root cause; the component must belong to the category.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostMortemInput {
    pub category: Category,
    pub component: Component,
}

/// `PATCH /v1/failures/{id}`: merge-patch semantics, an absent field is left as it is, `null` clears it.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(min_properties = 1)]
pub struct LifecyclePatch {
    /// When the job was training again (RFC 3339).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub resolved_at: Option<Option<DateTime<Utc>>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Resolution>)]
    pub resolution: Option<Option<Resolution>>,
    /// Recovery phase durations in minutes; downtime = their sum (Unicron's GPT-3 example: 30 + 9 + 14 + 15 = 68).
    #[serde(default, deserialize_with = "object_only")]
    pub recovery_minutes: Option<RecoveryPatch>,
    /// The root cause found by the post-mortem. It overrides the automatic root cause in the analytics
    /// and is kept beside it: the automatic classification and its evidence are never changed.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<PostMortemInput>)]
    pub root_cause: Option<Option<PostMortemInput>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 4096)]
    pub note: Option<Option<String>>,
}

pub const MAX_NOTE_LEN: usize = 4096;
/// A recovery phase longer than a year is a unit mistake, not a fact.
pub const MAX_PHASE_MINUTES: f64 = 525_600.0;

impl LifecyclePatch {
    pub fn is_empty(&self) -> bool {
        let r = self.recovery_minutes.as_ref();
        self.resolved_at.is_none()
            && self.resolution.is_none()
            && self.root_cause.is_none()
            && self.note.is_none()
            && r.is_none_or(|r| {
                r.detection.is_none() && r.resubmission.is_none() && r.setup.is_none() && r.recomputation.is_none()
            })
    }
}

/// One audited change: the field and its old and new values as JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub field: &'static str,
    pub from: serde_json::Value,
    pub to: serde_json::Value,
}

/// Applies `patch` to `current`. `first_at` is the failure's first signal (a resolution cannot be
/// earlier), `now` bounds resolved_at (24 h of clock skew, as for signals).
pub fn apply(
    current: &Lifecycle,
    patch: &LifecyclePatch,
    first_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(Lifecycle, Vec<FieldChange>), FieldError> {
    let mut next = current.clone();
    if let Some(v) = patch.resolved_at {
        if let Some(t) = v {
            if t < first_at {
                return Err(FieldError::new(
                    "resolved_at",
                    format!("{t} is before the failure's first signal ({first_at})"),
                ));
            }
            if t > now + chrono::Duration::hours(24) {
                return Err(FieldError::new(
                    "resolved_at",
                    format!("{t} is more than 24 h in the future"),
                ));
            }
        }
        next.resolved_at = v;
    }
    if let Some(v) = patch.resolution {
        next.resolution = v;
    }
    if let Some(r) = &patch.recovery_minutes {
        let fields = [
            ("recovery_minutes.detection", r.detection, &mut next.detection_minutes),
            (
                "recovery_minutes.resubmission",
                r.resubmission,
                &mut next.resubmission_minutes,
            ),
            ("recovery_minutes.setup", r.setup, &mut next.setup_minutes),
            (
                "recovery_minutes.recomputation",
                r.recomputation,
                &mut next.recomputation_minutes,
            ),
        ];
        for (name, value, slot) in fields {
            if let Some(v) = value {
                if let Some(m) = v
                    && !(m.is_finite() && (0.0..=MAX_PHASE_MINUTES).contains(&m))
                {
                    return Err(FieldError::new(
                        name,
                        format!("{m} is not a duration in minutes (0 to {MAX_PHASE_MINUTES})"),
                    ));
                }
                *slot = v;
            }
        }
    }
    if let Some(v) = patch.root_cause {
        next.post_mortem = match v {
            None => None,
            Some(rc) => Some(
                RootCause::new(rc.category, rc.component).map_err(|m| FieldError::new("root_cause.component", m))?,
            ),
        };
    }
    if let Some(v) = &patch.note {
        next.note = match v.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(n) if n.len() > MAX_NOTE_LEN => {
                return Err(FieldError::new("note", format!("longer than {MAX_NOTE_LEN} bytes")));
            }
            Some(n) => Some(n.to_string()),
        };
    }
    Ok((next.clone(), diff(current, &next)))
}

fn diff(a: &Lifecycle, b: &Lifecycle) -> Vec<FieldChange> {
    use serde_json::json;
    let rc = |r: &Option<RootCause>| {
        r.map_or(
            serde_json::Value::Null,
            |r| json!({"category": r.category, "component": r.component}),
        )
    };
    let pairs = [
        ("resolved_at", json!(a.resolved_at), json!(b.resolved_at)),
        ("resolution", json!(a.resolution), json!(b.resolution)),
        (
            "recovery_minutes.detection",
            json!(a.detection_minutes),
            json!(b.detection_minutes),
        ),
        (
            "recovery_minutes.resubmission",
            json!(a.resubmission_minutes),
            json!(b.resubmission_minutes),
        ),
        ("recovery_minutes.setup", json!(a.setup_minutes), json!(b.setup_minutes)),
        (
            "recovery_minutes.recomputation",
            json!(a.recomputation_minutes),
            json!(b.recomputation_minutes),
        ),
        ("root_cause", rc(&a.post_mortem), rc(&b.post_mortem)),
        ("note", json!(a.note), json!(b.note)),
    ];
    pairs
        .into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(field, from, to)| FieldChange { field, from, to })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn patch(v: serde_json::Value) -> LifecyclePatch {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn absent_leaves_null_clears_and_changes_are_listed() {
        let first = t("2026-11-02T10:00:00Z");
        let now = t("2026-11-03T00:00:00Z");
        let p = patch(
            json!({"resolution": "drained", "recovery_minutes": {"detection": 30, "resubmission": 9, "setup": 14, "recomputation": 15},
                             "root_cause": {"category": "hardware", "component": "nvlink"}, "note": "  NVLink replaced  "}),
        );
        let (l, changes) = apply(&Lifecycle::default(), &p, first, now).unwrap();
        assert_eq!(l.resolution, Some(Resolution::Drained));
        assert_eq!((l.detection_minutes, l.recomputation_minutes), (Some(30.0), Some(15.0)));
        assert_eq!(l.note.as_deref(), Some("NVLink replaced"));
        assert_eq!(changes.len(), 7);
        // Absent fields are unchanged; null clears; an identical value is no change.
        let (l2, changes) = apply(
            &l,
            &patch(json!({"note": null, "resolution": "drained", "recovery_minutes": {"setup": null}})),
            first,
            now,
        )
        .unwrap();
        assert_eq!(
            (l2.note, l2.setup_minutes, l2.detection_minutes),
            (None, None, Some(30.0))
        );
        let fields: Vec<&str> = changes.iter().map(|c| c.field).collect();
        assert_eq!(fields, ["recovery_minutes.setup", "note"]);
        assert_eq!(changes[0].from, json!(14.0));
        assert_eq!(changes[0].to, json!(null));
    }

    #[test]
    fn invalid_values_are_refused_with_their_field() {
        let first = t("2026-11-02T10:00:00Z");
        let now = t("2026-11-03T00:00:00Z");
        let cases = [
            (
                json!({"root_cause": {"category": "user", "component": "nvlink"}}),
                "root_cause.component",
            ),
            (json!({"recovery_minutes": {"setup": -1}}), "recovery_minutes.setup"),
            (json!({"recovery_minutes": {"setup": 1e9}}), "recovery_minutes.setup"),
            (json!({"resolved_at": "2026-11-02T09:00:00Z"}), "resolved_at"),
            (json!({"resolved_at": "2026-11-09T09:00:00Z"}), "resolved_at"),
        ];
        for (v, field) in cases {
            let err = apply(&Lifecycle::default(), &patch(v.clone()), first, now).unwrap_err();
            assert_eq!(err.field.as_deref(), Some(field), "{v}");
        }
        assert!(serde_json::from_value::<LifecyclePatch>(json!({"resolution": "fixed"})).is_err());
        assert!(serde_json::from_value::<LifecyclePatch>(json!({"resolutoin": "drained"})).is_err());
        assert!(patch(json!({})).is_empty() && patch(json!({"recovery_minutes": {}})).is_empty());
        assert!(!patch(json!({"note": null})).is_empty());
    }
}
