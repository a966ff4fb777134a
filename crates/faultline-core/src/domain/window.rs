//! The time window (and optional cluster) every analysis, report and list is computed over.

use chrono::{DateTime, Duration, Utc};

/// How far back a window reaches when the caller gives no `from`.
pub const DEFAULT_WINDOW_DAYS: i64 = 30;

/// `[from, to)`, optionally one cluster. Parsed once at the edge; every query takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub cluster: Option<String>,
}

/// A read named a cluster outside the caller's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfScope {
    pub scope: String,
    pub asked: String,
}

impl std::fmt::Display for OutOfScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "this token is scoped to cluster '{}' and may not read cluster '{}'",
            self.scope, self.asked
        )
    }
}

/// Why a window could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowError {
    /// The bounds are wrong (from after to).
    Invalid(String),
    /// The cluster asked for is not the caller's.
    OutOfScope(OutOfScope),
}

/// The cluster a read is answered for. A caller scoped to a cluster reads only it: naming no
/// cluster means its own (never the whole fleet), naming another is refused. An unscoped caller
/// reads what it asked for (None = every cluster).
pub fn scoped_cluster(scope: Option<&str>, asked: Option<String>) -> Result<Option<String>, OutOfScope> {
    match (scope, asked) {
        (Some(scope), Some(asked)) if scope != asked => Err(OutOfScope {
            scope: scope.to_string(),
            asked,
        }),
        (Some(scope), _) => Ok(Some(scope.to_string())),
        (None, asked) => Ok(asked),
    }
}

impl Window {
    /// Fills the defaults (`to` = now, `from` = `to` - 30 days), checks the order and applies the
    /// caller's cluster `scope` ([`scoped_cluster`]): every windowed read goes through here, so
    /// no analysis, report or export can answer outside a scoped token's cluster.
    pub fn resolve(
        from: Option<DateTime<Utc>>,
        to: Option<DateTime<Utc>>,
        cluster: Option<String>,
        scope: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Window, WindowError> {
        let to = to.unwrap_or(now);
        let from = from.unwrap_or(to - Duration::days(DEFAULT_WINDOW_DAYS));
        if from > to {
            return Err(WindowError::Invalid(format!("from ({from}) is after to ({to})")));
        }
        let cluster = scoped_cluster(scope, cluster).map_err(WindowError::OutOfScope)?;
        Ok(Window { from, to, cluster })
    }

    pub fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }
}

/// An example of the timestamp format every API parameter and CLI flag takes.
pub const RFC3339_EXAMPLE: &str = "2026-11-02T10:15:00Z";

/// Parses an RFC 3339 timestamp (with an offset); the error names the format and gives an example.
pub fn parse_rfc3339(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| time_error(s, &e.to_string()))
}

/// The message for a timestamp that did not parse: what was given, why, and what is expected.
pub fn time_error(input: &str, cause: &str) -> String {
    format!(
        "'{input}' is not an RFC 3339 timestamp ({cause}); expected a date, time and offset, e.g. {RFC3339_EXAMPLE}"
    )
}

/// Whether a deserialisation error message is chrono's for a timestamp that did not parse.
pub fn is_time_parse_error(message: &str) -> bool {
    const CHRONO: [&str; 7] = [
        "input is out of range",
        "no possible date and time matching input",
        "input is not enough for unique date and time",
        "input contains invalid characters",
        "premature end of input",
        "trailing input",
        "bad or unsupported format string",
    ];
    CHRONO.iter().any(|m| message.starts_with(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_errors_name_the_format_and_give_an_example() {
        let e = parse_rfc3339("2026-11-02").unwrap_err();
        assert!(
            e.contains("RFC 3339") && e.contains(RFC3339_EXAMPLE) && e.contains("'2026-11-02'"),
            "{e}"
        );
        let chrono_message = "2026-11-02".parse::<DateTime<Utc>>().unwrap_err().to_string();
        assert!(is_time_parse_error(&chrono_message), "{chrono_message}");
        assert_eq!(
            parse_rfc3339(" 2026-11-02T10:15:00+01:00").unwrap(),
            t("2026-11-02T09:15:00Z")
        );
    }

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_to_thirty_days_before_to() {
        let w = Window::resolve(
            None,
            Some(t("2026-03-31T00:00:00Z")),
            None,
            None,
            t("2026-12-01T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(w.from, t("2026-03-01T00:00:00Z"));
        assert_eq!(w.to - w.from, Duration::days(30));
        let w = Window::resolve(None, None, Some("a".into()), None, t("2026-12-01T00:00:00Z")).unwrap();
        assert_eq!(w.to, t("2026-12-01T00:00:00Z"));
        assert_eq!(w.cluster(), Some("a"));
    }

    #[test]
    fn rejects_from_after_to() {
        let e = Window::resolve(
            Some(t("2026-02-02T00:00:00Z")),
            Some(t("2026-02-01T00:00:00Z")),
            None,
            None,
            Utc::now(),
        );
        assert!(matches!(e, Err(WindowError::Invalid(m)) if m.contains("is after")));
    }

    #[test]
    fn a_scoped_caller_reads_only_its_cluster() {
        let now = t("2026-12-01T00:00:00Z");
        let own = Window::resolve(None, None, None, Some("c1"), now).unwrap();
        assert_eq!(own.cluster(), Some("c1"));
        let named = Window::resolve(None, None, Some("c1".into()), Some("c1"), now).unwrap();
        assert_eq!(named.cluster(), Some("c1"));
        let other = Window::resolve(None, None, Some("c2".into()), Some("c1"), now).unwrap_err();
        assert_eq!(
            other,
            WindowError::OutOfScope(OutOfScope {
                scope: "c1".into(),
                asked: "c2".into()
            })
        );
        assert_eq!(scoped_cluster(None, None), Ok(None));
        assert_eq!(scoped_cluster(None, Some("c2".into())), Ok(Some("c2".into())));
    }
}
