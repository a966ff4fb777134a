//! The records of a GPU history import as senders write them, and their validation into the rows
//! storage writes: one record at a time, each error naming its field.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::event::{FieldError, MAX_FUTURE_SKEW_HOURS, optional_text, required_text};
use crate::domain::gpu::{GpuGeneration, generation_of};
use crate::domain::part::{EndReason, RemovalReason, identity};
use crate::storage::gpus::{PartRow, PlacementRow, RemovalRow};

/// A part's facts.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PartInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// The part's serial; without one, its UUID identifies it.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub serial: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub uuid: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub model: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub board_part_number: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub vbios: Option<String>,
    /// Site attributes the analytics group by (`attribute:KEY`): strings, numbers or booleans.
    #[schema(value_type = Option<HashMap<String, String>>)]
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A part in a slot for an interval.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlacementInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    /// The part: its serial, else its UUID.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub serial: Option<String>,
    /// The UUID the part had in this slot.
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub uuid: Option<String>,
    #[schema(value_type = crate::domain::event::Text)]
    pub node: String,
    #[schema(minimum = 0, maximum = 1023)]
    pub gpu_index: Option<i32>,
    #[schema(
        max_length = 256,
        pattern = r"^[ \t\n\r]*(?:(?:PCI:)?(?:[0-9A-Fa-f]{1,8}:)?[0-9A-Fa-f]{1,2}:(?:[01]?[0-9A-Fa-f])(?:\.[0-7])?)?[ \t\n\r]*$"
    )]
    pub pci_bus_id: Option<String>,
    pub installed_at: DateTime<Utc>,
    /// Absent while still installed.
    pub removed_at: Option<DateTime<Utc>>,
    /// Why it ended (`other` when not given and `removed_at` is).
    pub end_reason: Option<EndReason>,
}

/// A removal with its reason.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovalInput {
    #[schema(value_type = crate::domain::event::Text)]
    pub cluster: String,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub serial: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub uuid: Option<String>,
    pub removed_at: DateTime<Utc>,
    pub reason: RemovalReason,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub ticket: Option<String>,
    #[schema(value_type = Option<crate::domain::event::OptionalText>)]
    pub note: Option<String>,
}

fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        FieldError {
            field: (path != "." && !path.is_empty()).then_some(path),
            message: e.into_inner().to_string(),
        }
    })
}

fn part_of(
    serial: Option<String>,
    uuid: Option<String>,
) -> Result<(Option<String>, Option<String>, String), FieldError> {
    let serial = optional_text("serial", serial)?;
    let uuid = optional_text("uuid", uuid)?;
    let part = identity(serial.as_deref(), uuid.as_deref())
        .ok_or_else(|| FieldError::new("serial", "a part needs a serial or a UUID"))?;
    Ok((serial, uuid, part))
}

pub(super) fn not_future(field: &str, t: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), FieldError> {
    if t > now + chrono::Duration::hours(MAX_FUTURE_SKEW_HOURS) {
        return Err(FieldError::new(
            field,
            format!("{t} is more than {MAX_FUTURE_SKEW_HOURS} h in the future"),
        ));
    }
    Ok(())
}

pub(super) fn parse_part(v: serde_json::Value, now: DateTime<Utc>) -> Result<PartRow, FieldError> {
    let p: PartInput = de(v)?;
    let (serial, uuid, part) = part_of(p.serial, p.uuid)?;
    let model = optional_text("model", p.model)?;
    let attributes = p.attributes.unwrap_or_default();
    if let Some((k, _)) = attributes
        .iter()
        .find(|(_, v)| !(v.is_string() || v.is_number() || v.is_boolean()))
    {
        return Err(FieldError::new(
            format!("attributes.{k}"),
            "an attribute is a string, a number or a boolean",
        ));
    }
    // Postgres text and jsonb cannot hold U+0000.
    if let Some((k, _)) = attributes
        .iter()
        .find(|(k, v)| k.contains('\0') || v.as_str().is_some_and(|v| v.contains('\0')))
    {
        return Err(FieldError::new(
            format!("attributes.{k}"),
            "an attribute may not contain U+0000",
        ));
    }
    Ok(PartRow {
        cluster: required_text("cluster", p.cluster)?,
        part,
        serial,
        uuid,
        generation: model
            .as_deref()
            .map_or(GpuGeneration::Unknown, generation_of)
            .as_str()
            .to_string(),
        model,
        board_part_number: optional_text("board_part_number", p.board_part_number)?,
        vbios: optional_text("vbios", p.vbios)?,
        driver: None,
        attributes: serde_json::Value::Object(attributes),
        first_seen_at: now,
    })
}

pub(super) fn parse_placement(v: serde_json::Value, now: DateTime<Utc>) -> Result<PlacementRow, FieldError> {
    let p: PlacementInput = de(v)?;
    let (_, uuid, part) = part_of(p.serial, p.uuid)?;
    not_future("installed_at", p.installed_at, now)?;
    if let Some(r) = p.removed_at {
        not_future("removed_at", r, now)?;
        if r < p.installed_at {
            return Err(FieldError::new("removed_at", "is before installed_at"));
        }
    }
    if let Some(i) = p.gpu_index
        && !(0..=1023).contains(&i)
    {
        return Err(FieldError::new(
            "gpu_index",
            format!("{i} is not a GPU index (0..=1023)"),
        ));
    }
    let pci_bus_id = match optional_text("pci_bus_id", p.pci_bus_id)? {
        Some(raw) => Some(
            crate::logparse::normalise_pci_bus_id(&raw)
                .ok_or_else(|| FieldError::new("pci_bus_id", format!("'{raw}' is not a PCI bus id")))?,
        ),
        None => None,
    };
    let end_reason = match (p.removed_at, p.end_reason) {
        (None, Some(_)) => return Err(FieldError::new("end_reason", "is given without removed_at")),
        (Some(_), r) => Some(r.unwrap_or(EndReason::Other).as_str().to_string()),
        (None, None) => None,
    };
    Ok(PlacementRow {
        cluster: required_text("cluster", p.cluster)?,
        part,
        installed_at: p.installed_at,
        removed_at: p.removed_at,
        hostname: required_text("node", p.node)?,
        gpu_index: p.gpu_index,
        pci_bus_id,
        uuid,
        end_reason,
    })
}

pub(super) fn parse_removal(v: serde_json::Value, now: DateTime<Utc>, by: &str) -> Result<RemovalRow, FieldError> {
    let r: RemovalInput = de(v)?;
    let (_, _, part) = part_of(r.serial, r.uuid)?;
    not_future("removed_at", r.removed_at, now)?;
    Ok(RemovalRow {
        cluster: required_text("cluster", r.cluster)?,
        part,
        removed_at: r.removed_at,
        reason: r.reason.as_str().to_string(),
        ticket: optional_text("ticket", r.ticket)?,
        note: optional_text("note", r.note)?,
        removed_by: Some(by.to_string()),
    })
}
