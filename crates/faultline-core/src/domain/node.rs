//! Fleet inventory entries, validated at the edge.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::event::{FieldError, OptionalText, Text, optional_text, required_text};
use super::gpu::{GpuGeneration, generation_of};

/// A node as the inventory sender writes it.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct NodeInput {
    /// Unique within its cluster.
    #[schema(value_type = Text)]
    pub hostname: String,
    #[schema(value_type = Text)]
    pub cluster: String,
    /// GPU model name as the vendor tools print it, e.g. "NVIDIA H100 80GB HBM3", "A100-SXM4-80GB".
    #[schema(value_type = Text)]
    pub gpu_model: String,
    #[schema(minimum = 0, maximum = 1024)]
    pub gpu_count: i32,
    /// The 128-GPU unit the node belongs to (scalable unit, allocation block). Unlabelled nodes are
    /// packed into groups in hostname order by the MTBF analysis.
    #[schema(value_type = Option<OptionalText>)]
    pub group: Option<String>,
    #[schema(value_type = Option<OptionalText>)]
    pub rack: Option<String>,
    /// Start of service. Absent: kept from an earlier registration, else the first registration time.
    pub in_service_since: Option<DateTime<Utc>>,
    /// End of service; absent or null means in service (PUT replaces it).
    pub retired_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub hostname: String,
    pub cluster: String,
    pub gpu_model: String,
    pub gpu_generation: GpuGeneration,
    pub gpu_count: i32,
    pub group: Option<String>,
    pub rack: Option<String>,
    pub in_service_since: Option<DateTime<Utc>>,
    pub retired_at: Option<DateTime<Utc>>,
}

pub const MAX_GPUS_PER_NODE: i32 = 1024;

pub fn parse_node(value: serde_json::Value) -> Result<Node, FieldError> {
    let input: NodeInput = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        FieldError {
            field: (path != "." && !path.is_empty()).then_some(path),
            message: e.into_inner().to_string(),
        }
    })?;
    validate_node(input)
}

pub fn validate_node(input: NodeInput) -> Result<Node, FieldError> {
    if !(0..=MAX_GPUS_PER_NODE).contains(&input.gpu_count) {
        return Err(FieldError::new(
            "gpu_count",
            format!("{} is not in 0..={MAX_GPUS_PER_NODE}", input.gpu_count),
        ));
    }
    if let (Some(since), Some(retired)) = (input.in_service_since, input.retired_at)
        && retired < since
    {
        return Err(FieldError::new("retired_at", "is before in_service_since"));
    }
    let gpu_model = required_text("gpu_model", input.gpu_model)?;
    Ok(Node {
        hostname: required_text("hostname", input.hostname)?,
        cluster: required_text("cluster", input.cluster)?,
        gpu_generation: generation_of(&gpu_model),
        gpu_model,
        gpu_count: input.gpu_count,
        group: optional_text("group", input.group)?,
        rack: optional_text("rack", input.rack)?,
        in_service_since: input.in_service_since,
        retired_at: input.retired_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generation_is_derived_and_bad_fields_are_named() {
        let n =
            parse_node(json!({"hostname": "n1", "cluster": "c", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8}))
                .unwrap();
        assert_eq!(n.gpu_generation, GpuGeneration::Hopper);
        assert_eq!(n.group, None);
        let err =
            parse_node(json!({"hostname": "n1", "cluster": "c", "gpu_model": "A100", "gpu_count": -1})).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("gpu_count"));
        let err = parse_node(
            json!({"hostname": "n1", "cluster": "c", "gpu_model": "A100", "gpu_count": 8,
            "in_service_since": "2026-01-02T00:00:00Z", "retired_at": "2026-01-01T00:00:00Z"}),
        )
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("retired_at"));
    }
}
