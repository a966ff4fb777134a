//! The audit log's vocabulary: who acted (the token) and the closed set of audited actions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// Who made a call: the token's id (None for the configured admin token) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub token_id: Option<Uuid>,
    pub name: String,
}

/// An audited admin action. The strings are stored (and CHECKed by migration 0012).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum AuditAction {
    #[serde(rename = "token.create")]
    TokenCreate,
    #[serde(rename = "token.revoke")]
    TokenRevoke,
    #[serde(rename = "rule.upsert")]
    RuleUpsert,
    #[serde(rename = "rule.delete")]
    RuleDelete,
    #[serde(rename = "term.upsert")]
    TermUpsert,
    #[serde(rename = "term.delete")]
    TermDelete,
    /// A failure's lifecycle (resolution, recovery phases, post-mortem root cause, note) changed.
    #[serde(rename = "failure.lifecycle")]
    FailureLifecycle,
    /// A GPU part was retired (failed, RMA, decommissioned, upgraded).
    #[serde(rename = "gpu.removal")]
    GpuRemoval,
    /// GPU history (parts, placements, removals) was imported.
    #[serde(rename = "gpu.import")]
    GpuImport,
    /// An alert rule was created or changed (a new version).
    #[serde(rename = "alert_rule.upsert")]
    AlertRuleUpsert,
    #[serde(rename = "alert_rule.delete")]
    AlertRuleDelete,
}

impl AuditAction {
    pub const ALL: [AuditAction; 11] = [
        AuditAction::TokenCreate,
        AuditAction::TokenRevoke,
        AuditAction::RuleUpsert,
        AuditAction::RuleDelete,
        AuditAction::TermUpsert,
        AuditAction::TermDelete,
        AuditAction::FailureLifecycle,
        AuditAction::GpuRemoval,
        AuditAction::GpuImport,
        AuditAction::AlertRuleUpsert,
        AuditAction::AlertRuleDelete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::TokenCreate => "token.create",
            AuditAction::TokenRevoke => "token.revoke",
            AuditAction::RuleUpsert => "rule.upsert",
            AuditAction::RuleDelete => "rule.delete",
            AuditAction::TermUpsert => "term.upsert",
            AuditAction::TermDelete => "term.delete",
            AuditAction::FailureLifecycle => "failure.lifecycle",
            AuditAction::GpuRemoval => "gpu.removal",
            AuditAction::GpuImport => "gpu.import",
            AuditAction::AlertRuleUpsert => "alert_rule.upsert",
            AuditAction::AlertRuleDelete => "alert_rule.delete",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_round_trip_through_their_names_and_serde() {
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(a));
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        assert_eq!(AuditAction::parse("token.delete"), None);
    }
}
