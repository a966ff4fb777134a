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

impl Window {
    /// Fills the defaults (`to` = now, `from` = `to` - 30 days) and checks the order.
    pub fn resolve(
        from: Option<DateTime<Utc>>,
        to: Option<DateTime<Utc>>,
        cluster: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Window, String> {
        let to = to.unwrap_or(now);
        let from = from.unwrap_or(to - Duration::days(DEFAULT_WINDOW_DAYS));
        if from > to {
            return Err(format!("from ({from}) is after to ({to})"));
        }
        Ok(Window { from, to, cluster })
    }

    pub fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_to_thirty_days_before_to() {
        let w = Window::resolve(None, Some(t("2026-03-31T00:00:00Z")), None, t("2026-12-01T00:00:00Z")).unwrap();
        assert_eq!(w.from, t("2026-03-01T00:00:00Z"));
        assert_eq!(w.to - w.from, Duration::days(30));
        let w = Window::resolve(None, None, Some("a".into()), t("2026-12-01T00:00:00Z")).unwrap();
        assert_eq!(w.to, t("2026-12-01T00:00:00Z"));
        assert_eq!(w.cluster(), Some("a"));
    }

    #[test]
    fn rejects_from_after_to() {
        let e = Window::resolve(
            Some(t("2026-02-02T00:00:00Z")),
            Some(t("2026-02-01T00:00:00Z")),
            None,
            Utc::now(),
        );
        assert!(e.unwrap_err().contains("is after"));
    }
}
