//! The classification engine: matches a signal against the rule catalog, and reads its free text
//! with the lexicon where the rules do not decide. Pure: the catalog (rules and lexicon) is loaded
//! from the database by the storage layer and handed in.
//!
//! Who decides, in order:
//! 1. an explicit root cause from the sender;
//! 2. a rule with a code (Xid 79, SXid 20034, ECC type 2) or a kind-only rule of a known category
//!    (kind `power` is a power signal): the structured fields say what it is;
//! 3. an Xid / SXid code named in the text ("NVRM: Xid (PCI:0000:3b:00): 79, ..."), when the
//!    catalog has a rule for that code;
//! 4. the text classifier, when it names a cause and the best rule is a fallback of unknown
//!    category, or a keyword rule the text evidence outweighs two to one (the keyword rules match a
//!    substring anywhere: "uncorrectable" says nothing about whether a GPU or a DIMM failed);
//! 5. the best rule, else unknown.

#[cfg(test)]
mod corpus_test;
pub mod lexicon;
#[cfg(test)]
pub(crate) mod seed;
pub mod text;
#[cfg(test)]
mod text_tests;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::taxonomy::{Category, Component, RootCause};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    High,
    Medium,
    Low,
    Info,
}

impl Severity {
    pub const ALL: [Severity; 5] = [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// The schema of a rule's `action`: the closed set [`ACTIONS`].
pub struct Action;

impl utoipa::PartialSchema for Action {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(ACTIONS.iter().copied()))
            .description(Some(
                "Recommended action, following NVIDIA's resolution buckets where they exist",
            ))
            .into()
    }
}
impl utoipa::ToSchema for Action {}

/// Recommended action, following NVIDIA's resolution buckets where they exist.
pub const ACTIONS: &[&str] = &[
    "none",
    "restart_job",
    "reset_gpu",
    "reboot_node",
    "drain_node",
    "contact_support",
    "fix_user_code",
    "fix_config",
    "check_hardware",
    "investigate",
];

/// One catalog rule. `kind` "*" matches any kind; `code` None any code; `pattern` None any
/// message, else '|'-separated keywords of which one must occur in the message (case-insensitive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Rule {
    pub rule_id: String,
    pub kind: String,
    pub code: Option<i64>,
    pub pattern: Option<String>,
    /// Among the matching rules the highest priority wins (ties: smallest rule_id).
    pub priority: i32,
    pub category: Category,
    pub component: Component,
    pub severity: Severity,
    /// Usually cleared by restarting the job.
    pub transient: bool,
    /// Usually follows another error; not a root cause by itself.
    pub secondary: bool,
    #[schema(value_type = Action)]
    pub action: String,
    pub description: String,
    /// Where the rule's facts come from.
    pub source: String,
    pub builtin: bool,
}

impl Rule {
    /// Checks the invariants the database also enforces, with messages for people.
    pub fn validate(&self) -> Result<(), String> {
        if self.rule_id.trim().is_empty() || self.rule_id.len() > 100 {
            return Err("rule_id must be 1 to 100 characters".into());
        }
        if self.kind.trim().is_empty() {
            return Err("kind must not be empty ('*' matches any kind)".into());
        }
        RootCause::new(self.category, self.component)?;
        if !ACTIONS.contains(&self.action.as_str()) {
            return Err(format!("action '{}' is not one of {}", self.action, ACTIONS.join(", ")));
        }
        if let Some(p) = &self.pattern
            && keywords(p).is_empty()
        {
            return Err("pattern holds no keyword".into());
        }
        Ok(())
    }
}

fn keywords(pattern: &str) -> Vec<String> {
    pattern
        .split('|')
        .map(|k| k.trim().to_lowercase())
        .filter(|k| !k.is_empty())
        .collect()
}

/// What the catalog says of one signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub rule_id: Option<String>,
    pub root_cause: RootCause,
    pub severity: Severity,
    pub transient: bool,
    pub secondary: bool,
    pub action: String,
    /// The sender gave the root cause (it wins over the catalog).
    pub explicit: bool,
    /// Why: "rule xid-79", "terms: power supply(power) + redundancy lost(failure)", ...
    pub explanation: String,
}

/// A catalog ready to match: rules grouped by kind, best first, and the lexicon.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub version: i64,
    by_kind: std::collections::HashMap<String, Vec<CompiledRule>>,
    any_kind: Vec<CompiledRule>,
    lexicon: text::Lexicon,
}

#[derive(Debug, Clone)]
struct CompiledRule {
    rule: Rule,
    keywords: Vec<String>,
}

impl Catalog {
    /// Rules only (no lexicon: free text is never read).
    pub fn new(version: i64, rules: Vec<Rule>) -> Self {
        Self::with_lexicon(version, rules, Vec::new())
    }

    pub fn with_lexicon(version: i64, rules: Vec<Rule>, terms: Vec<text::Term>) -> Self {
        let mut by_kind: std::collections::HashMap<String, Vec<CompiledRule>> = Default::default();
        let mut any_kind = Vec::new();
        for rule in rules {
            let keywords = rule.pattern.as_deref().map(keywords).unwrap_or_default();
            let compiled = CompiledRule { keywords, rule };
            if compiled.rule.kind == "*" {
                any_kind.push(compiled);
            } else {
                by_kind.entry(compiled.rule.kind.clone()).or_default().push(compiled);
            }
        }
        let order = |a: &CompiledRule, b: &CompiledRule| {
            b.rule
                .priority
                .cmp(&a.rule.priority)
                .then_with(|| a.rule.rule_id.cmp(&b.rule.rule_id))
        };
        for rules in by_kind.values_mut() {
            rules.sort_by(order);
        }
        any_kind.sort_by(order);
        Catalog {
            version,
            by_kind,
            any_kind,
            lexicon: text::Lexicon::new(terms),
        }
    }

    pub fn lexicon_len(&self) -> usize {
        self.lexicon.len()
    }

    /// The best matching rule for (kind, code, message), if any.
    pub fn best_rule(&self, kind: &str, code: Option<i64>, message: Option<&str>) -> Option<&Rule> {
        let lowered = message.map(|m| text::scored(m).to_lowercase());
        let matches = |r: &&CompiledRule| {
            r.rule.code.is_none_or(|c| Some(c) == code)
                && (r.keywords.is_empty()
                    || lowered
                        .as_deref()
                        .is_some_and(|m| r.keywords.iter().any(|k| m.contains(k.as_str()))))
        };
        let specific = self.by_kind.get(kind).and_then(|rules| rules.iter().find(matches));
        let generic = self.any_kind.iter().find(matches);
        match (specific, generic) {
            (Some(a), Some(b)) => Some(if b.rule.priority > a.rule.priority {
                &b.rule
            } else {
                &a.rule
            }),
            (a, b) => a.or(b).map(|r| &r.rule),
        }
    }

    pub fn classify(
        &self,
        kind: &str,
        code: Option<i64>,
        message: Option<&str>,
        explicit: Option<RootCause>,
    ) -> Classification {
        let mut c = self.classify_inferred(kind, code, message);
        if let Some(rc) = explicit {
            // The sender knows the root cause: it wins, and it is not secondary by definition.
            c.explanation = format!("explicit root cause from the sender ({})", c.explanation);
            c.root_cause = rc;
            c.secondary = false;
            c.explicit = true;
        }
        c
    }

    fn from_rule(rule: &Rule, explanation: String) -> Classification {
        Classification {
            rule_id: Some(rule.rule_id.clone()),
            root_cause: RootCause {
                category: rule.category,
                component: rule.component,
            },
            severity: rule.severity,
            transient: rule.transient,
            secondary: rule.secondary,
            action: rule.action.clone(),
            explicit: false,
            explanation,
        }
    }

    /// What the catalog infers without an explicit root cause (see the module docs for the order).
    fn classify_inferred(&self, kind: &str, code: Option<i64>, message: Option<&str>) -> Classification {
        let rule = self.best_rule(kind, code, message);
        if let Some(r) = rule
            && (r.code.is_some() || (r.pattern.is_none() && r.kind != "*" && r.category != Category::Unknown))
        {
            return Self::from_rule(r, format!("rule {}", r.rule_id));
        }
        let text = message.filter(|m| !m.trim().is_empty());
        if let Some(m) = text
            && let Some((code_kind, n)) = code_in_text(m)
            && code_kind != kind
            && let Some(r) = self
                .best_rule(code_kind, Some(n), Some(m))
                .filter(|r| r.code == Some(n))
        {
            return Self::from_rule(r, format!("rule {} ({code_kind} {n} named in the text)", r.rule_id));
        }
        let verdict = text.map(|m| text::classify_text(&self.lexicon, m));
        if let Some(v) = &verdict
            && v.is_known()
        {
            let text_wins = match rule {
                None => true,
                Some(r) if r.category == Category::Unknown => true,
                Some(r) => {
                    r.component != v.root_cause.component
                        && v.score >= 2.0 * v.score_of(r.component)
                        && v.score >= STRONG_TEXT
                }
            };
            if text_wins {
                let (severity, action) = text::default_response(v.root_cause.component);
                let over = rule.map_or(String::new(), |r| format!(" (over rule {})", r.rule_id));
                return Classification {
                    rule_id: None,
                    root_cause: v.root_cause,
                    severity,
                    transient: false,
                    secondary: false,
                    action: action.to_string(),
                    explicit: false,
                    explanation: format!("{}{over}", v.explanation),
                };
            }
        }
        // The text says the part is fine: a keyword rule matched a word, not a failure
        // ("Power Supply AC lost - Deasserted", "no uncorrectable ECC errors").
        if let (Some(v), Some(r)) = (&verdict, rule)
            && v.healthy
            && r.pattern.is_some()
        {
            return Classification {
                rule_id: None,
                root_cause: RootCause::UNKNOWN,
                severity: Severity::Info,
                transient: true,
                secondary: false,
                action: "none".to_string(),
                explicit: false,
                explanation: format!("{} (over rule {})", v.explanation, r.rule_id),
            };
        }
        let why_text = verdict.map(|v| v.explanation);
        match rule {
            Some(r) => {
                let mut e = format!("rule {}", r.rule_id);
                if r.category == Category::Unknown
                    && let Some(t) = why_text
                {
                    e = format!("{e}; {t}");
                }
                Self::from_rule(r, e)
            }
            None => Classification {
                rule_id: None,
                root_cause: RootCause::UNKNOWN,
                severity: Severity::Medium,
                transient: false,
                secondary: false,
                action: "investigate".to_string(),
                explicit: false,
                explanation: why_text.unwrap_or_else(|| "no rule matched and no text".to_string()),
            },
        }
    }

    pub fn len(&self) -> usize {
        self.by_kind.values().map(Vec::len).sum::<usize>() + self.any_kind.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The text evidence needed to overrule a keyword rule of a known category (a specific part,
/// e.g. "dimm" 4, or a specific fault).
pub const STRONG_TEXT: f64 = 3.0;

/// An Xid or SXid code named in free text: "NVRM: Xid (PCI:0000:3b:00): 79, pid=...",
/// "Xid 119 GSP timeout", "SXid (PCI:0000:05:00.0): 20034". The number is the first one after
/// the word that is not part of a parenthesised PCI address.
pub fn code_in_text(message: &str) -> Option<(&'static str, i64)> {
    let lower = text::truncate(message, text::MAX_SCORED_BYTES).to_ascii_lowercase();
    for (word, kind) in [("sxid", "sxid"), ("xid", "xid")] {
        let mut from = 0;
        while let Some(pos) = lower[from..].find(word) {
            let at = from + pos;
            from = at + word.len();
            // Whole word: "sxid" must not be read as "xid".
            if at > 0 && lower.as_bytes()[at - 1].is_ascii_alphanumeric() {
                continue;
            }
            let mut rest = &lower[from..];
            if rest.as_bytes().first().is_some_and(|c| c.is_ascii_alphanumeric()) {
                continue;
            }
            rest = rest.trim_start_matches([' ', ':', '=', '#']);
            if rest.starts_with('(') {
                rest = rest.split_once(')').map_or("", |(_, r)| r);
                rest = rest.trim_start_matches([' ', ':', ',']);
            }
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if !digits.is_empty() && digits.len() <= 6 {
                return digits.parse().ok().map(|n| (kind, n));
            }
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn rule(
        id: &str,
        kind: &str,
        code: Option<i64>,
        pattern: Option<&str>,
        priority: i32,
        rc: (Category, Component),
        secondary: bool,
    ) -> Rule {
        Rule {
            rule_id: id.into(),
            kind: kind.into(),
            code,
            pattern: pattern.map(Into::into),
            priority,
            category: rc.0,
            component: rc.1,
            severity: Severity::High,
            transient: false,
            secondary,
            action: "investigate".into(),
            description: String::new(),
            source: "test".into(),
            builtin: true,
        }
    }

    pub fn small_catalog() -> Catalog {
        use Category::*;
        use Component as C;
        Catalog::new(
            1,
            vec![
                rule("xid-fallback", "xid", None, None, 100, (Unknown, C::Unknown), false),
                rule("xid-79", "xid", Some(79), None, 200, (Hardware, C::Gpu), false),
                rule("xid-13", "xid", Some(13), None, 200, (User, C::Code), false),
                rule("xid-45", "xid", Some(45), None, 200, (Unknown, C::Unknown), true),
                rule(
                    "nccl-timeout",
                    "nccl_timeout",
                    None,
                    None,
                    100,
                    (Unknown, C::Unknown),
                    true,
                ),
                rule(
                    "hc-dbe",
                    "health_check",
                    None,
                    Some("double bit|DBE"),
                    150,
                    (Hardware, C::GpuMemory),
                    false,
                ),
                rule(
                    "hc-fallback",
                    "health_check",
                    None,
                    None,
                    100,
                    (Unknown, C::Unknown),
                    false,
                ),
                rule(
                    "any-kernel-panic",
                    "*",
                    None,
                    Some("kernel panic"),
                    50,
                    (Hardware, C::Host),
                    false,
                ),
            ],
        )
    }

    #[test]
    fn code_beats_fallback_and_keywords_match_case_insensitively() {
        let c = small_catalog();
        assert_eq!(
            c.classify("xid", Some(79), None, None).root_cause,
            RootCause {
                category: Category::Hardware,
                component: Component::Gpu
            }
        );
        assert_eq!(
            c.classify("xid", Some(999), None, None).rule_id.as_deref(),
            Some("xid-fallback")
        );
        let dbe = c.classify("health_check", None, Some("GPU 3: DBE detected"), None);
        assert_eq!(dbe.rule_id.as_deref(), Some("hc-dbe"));
        assert_eq!(
            c.classify("health_check", None, Some("all good"), None)
                .rule_id
                .as_deref(),
            Some("hc-fallback")
        );
        // An unknown kind falls to the any-kind keyword rules, then to unknown.
        assert_eq!(
            c.classify("syslog", None, Some("Kernel panic - not syncing"), None)
                .root_cause
                .component,
            Component::Host
        );
        let none = c.classify("syslog", None, Some("hello"), None);
        assert_eq!((none.rule_id, none.root_cause), (None, RootCause::UNKNOWN));
    }

    #[test]
    fn explicit_root_cause_wins_and_is_not_secondary() {
        let c = small_catalog();
        let rc = RootCause {
            category: Category::Platform,
            component: Component::Storage,
        };
        let got = c.classify("nccl_timeout", None, None, Some(rc));
        assert_eq!(got.root_cause, rc);
        assert!(got.explicit && !got.secondary);
        assert!(c.classify("nccl_timeout", None, None, None).secondary);
    }

    #[test]
    fn validation_refuses_foreign_components_and_unknown_actions() {
        let mut r = rule("x", "xid", None, None, 1, (Category::User, Component::Gpu), false);
        assert!(r.validate().unwrap_err().contains("does not belong"));
        r.component = Component::Code;
        assert!(r.validate().is_ok());
        r.action = "pray".into();
        assert!(r.validate().is_err());
        r.action = "none".into();
        r.pattern = Some(" | ".into());
        assert!(r.validate().is_err());
    }
}
