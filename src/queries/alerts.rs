//! What each alert rule finds in one cluster now. Every condition calls the read use case that
//! answers the same figure in the API (lemon nodes, parts or slots, MTBF, compare, recovery) or
//! reads a rollup (new failure kinds), so an alert and the answer it links to agree. Each finding
//! links to its subject too (the node, the part), which is what a notification points at.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use sqlx::PgPool;

use std::collections::BTreeMap;

use crate::domain::alert::{Condition, Finding, SilenceScope, node_labels, slot_labels};
use crate::domain::window::Window;
use crate::queries::decisions::{self, Span};
use crate::storage;

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn hours(h: f64) -> Duration {
    Duration::milliseconds((h * 3_600_000.0) as i64)
}

/// `cluster=..&from=..&to=..` for a link (cluster names are URL-encoded).
fn window_query(cluster: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("cluster", cluster)
        .append_pair("from", &ts(from))
        .append_pair("to", &ts(to))
        .finish()
}

/// A path segment, percent-encoded.
fn segment(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// A node's failures in a window (of one category, or all), for a link.
fn node_failures(cluster: &str, node: &str, from: DateTime<Utc>, to: DateTime<Utc>, category: Option<&str>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("cluster", cluster)
        .append_pair("node", node)
        .append_pair("from", &ts(from))
        .append_pair("to", &ts(to));
    if let Some(c) = category {
        q.append_pair("category", c);
    }
    format!("/v1/failures?{}", q.finish())
}

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// The subjects `condition` finds in `cluster` as of `now`.
pub async fn findings(
    db: &PgPool,
    condition: &Condition,
    cluster: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Finding>, sqlx::Error> {
    let span = |h: f64| Span {
        from: now - hours(h),
        to: now,
        cluster: Some(cluster.to_string()),
    };
    Ok(match condition {
        Condition::LemonNode {
            alpha,
            window_hours,
            category,
        } => {
            let s = span(*window_hours);
            let q = window_query(cluster, s.from, s.to);
            let cat = category.as_str();
            let (from, to) = (s.from, s.to);
            let figures = decisions::lemons(db, s, category.category(), *alpha).await?;
            figures
                .result
                .lemons
                .into_iter()
                .map(|n| Finding {
                    summary: format!(
                        "{} had {} failures in the last {window_hours} h where {:.2} were expected (adjusted p {:.2e})",
                        n.hostname, n.failures, n.expected_failures, n.adjusted_probability
                    ),
                    value: n.failures as f64,
                    link: node_failures(cluster, &n.hostname, from, to, category.category().map(|c| c.as_str())),
                    answer: format!("/v1/analytics/lemon-nodes?{q}&category={cat}&alpha={alpha}"),
                    labels: node_labels(&n.hostname),
                    subject: n.hostname,
                })
                .collect()
        }
        Condition::BadPartOrSlot { alpha } => {
            let figures = crate::queries::parts::parts_or_slots(db, Some(cluster), *alpha, now).await?;
            let answer = format!(
                "/v1/analytics/parts-or-slots?{}&alpha={alpha}",
                form_urlencoded::Serializer::new(String::new())
                    .append_pair("cluster", cluster)
                    .finish()
            );
            let parts = figures.result.parts.into_iter().map(|s| ("part", s));
            let slots = figures.result.slots.into_iter().map(|s| ("slot", s));
            parts
                .chain(slots)
                .filter(|(_, s)| s.significant)
                .map(|(what, s)| Finding {
                    summary: format!(
                        "{what} {} failed {} times ({} distinct) where {:.2} were expected (adjusted p {:.2e})",
                        s.id, s.failures, s.distinct, s.expected, s.adjusted_p
                    ),
                    value: s.failures as f64,
                    link: match what {
                        "slot" => match slot_labels(cluster, &s.id).get("node") {
                            Some(node) => format!("/v1/nodes/{}/{}/gpus", segment(cluster), segment(node)),
                            None => answer.clone(),
                        },
                        _ => format!(
                            "/v1/gpus/{}?{}",
                            segment(&s.id),
                            form_urlencoded::Serializer::new(String::new())
                                .append_pair("cluster", cluster)
                                .finish()
                        ),
                    },
                    answer: answer.clone(),
                    labels: match what {
                        "slot" => slot_labels(cluster, &s.id),
                        _ => BTreeMap::from([("part".to_string(), s.id.clone())]),
                    },
                    subject: format!("{what}:{}", s.id),
                })
                .collect()
        }
        Condition::MtbfBelow {
            hours: limit,
            window_hours,
            group_size,
        } => {
            let w = span(*window_hours).window();
            let q = window_query(cluster, w.from, w.to);
            let answer = crate::queries::headline::mtbf(db, &w, *group_size, None).await?;
            answer
                .groups
                .into_iter()
                .filter_map(|g| {
                    let upper = g.mtbf_upper_hours?;
                    (upper < *limit).then(|| Finding {
                        summary: format!(
                            "group {} has an MTBF of {:.1} h (95% interval {:.1} to {:.1} h), below {limit} h",
                            g.group,
                            g.mtbf_hours.unwrap_or(0.0),
                            g.mtbf_lower_hours,
                            upper
                        ),
                        value: round(upper, 3),
                        link: format!("/v1/analytics/mtbf?{q}&group_size={group_size}"),
                        answer: format!("/v1/analytics/mtbf?{q}&group_size={group_size}"),
                        labels: BTreeMap::new(),
                        subject: g.group,
                    })
                })
                .collect()
        }
        Condition::FailureRateUp { window_hours } => {
            let b = span(*window_hours);
            let a = Span {
                from: b.from - hours(*window_hours),
                to: b.from,
                cluster: b.cluster.clone(),
            };
            let link = format!(
                "/v1/analytics/compare?{}&a_from={}&a_to={}&b_from={}&b_to={}",
                form_urlencoded::Serializer::new(String::new())
                    .append_pair("cluster", cluster)
                    .finish(),
                ts(a.from),
                ts(a.to),
                ts(b.from),
                ts(b.to)
            );
            let c = decisions::compare(db, a, b, None, ("the previous window", "the last window")).await?;
            let up = c.overall.significant && c.overall.ratio_lower.is_some_and(|l| l > 1.0);
            if up {
                vec![Finding {
                    subject: cluster.to_string(),
                    value: round(c.overall.rate_ratio.unwrap_or(f64::INFINITY).min(1e9), 3),
                    summary: c.overall.verdict.clone(),
                    answer: link.clone(),
                    link,
                    labels: BTreeMap::new(),
                }]
            } else {
                Vec::new()
            }
        }
        Condition::NewFailureKind { days } => {
            let today = now.date_naive();
            let since = today - chrono::Days::new(1);
            let seen = storage::alerts::kinds_seen_since(db, cluster, since).await?;
            let q = window_query(cluster, now - Duration::days(2), now);
            seen.into_iter()
                .filter(|k| match (k.last_before, days) {
                    (None, _) => true,
                    (Some(last), Some(d)) => (since - last).num_days() > i64::from(*d),
                    (Some(_), None) => false,
                })
                .map(|k| {
                    let name = if k.code.is_empty() {
                        k.kind.clone()
                    } else {
                        format!("{}:{}", k.kind, k.code)
                    };
                    let before = match k.last_before {
                        None => "never seen in this cluster before".to_string(),
                        Some(d) => format!("last seen on {d}"),
                    };
                    Finding {
                        summary: format!("{name} seen on {} UTC, {before}", k.first_recent),
                        value: k.last_before.map_or(-1.0, |d| (since - d).num_days() as f64),
                        link: format!("/v1/analytics/top-errors?{q}"),
                        answer: format!("/v1/analytics/top-errors?{q}"),
                        labels: BTreeMap::new(),
                        subject: name,
                    }
                })
                .collect()
        }
        Condition::Silence { minutes, scope } => {
            let quiet = Duration::milliseconds((minutes * 60_000.0) as i64);
            let nodes = storage::alerts::watched_last_seen(db, cluster, now).await?;
            let link = format!(
                "/v1/nodes?{}",
                form_urlencoded::Serializer::new(String::new())
                    .append_pair("cluster", cluster)
                    .finish()
            );
            let silent =
                |last: DateTime<Utc>, what: String, subject: String, labels: BTreeMap<String, String>| Finding {
                    summary: format!(
                        "no signal nor heartbeat from {what} for {:.1} minutes (since {})",
                        (now - last).num_milliseconds() as f64 / 60_000.0,
                        ts(last)
                    ),
                    value: round((now - last).num_milliseconds() as f64 / 60_000.0, 3),
                    link: match labels.get("node") {
                        Some(node) => format!("/v1/nodes/{}/{}/state", segment(cluster), segment(node)),
                        None => link.clone(),
                    },
                    answer: link.clone(),
                    subject,
                    labels,
                };
            match scope {
                SilenceScope::Node => nodes
                    .into_iter()
                    .filter(|n| now - n.last_seen_at >= quiet)
                    .map(|n| {
                        let labels = node_labels(&n.hostname);
                        silent(n.last_seen_at, format!("node {}", n.hostname), n.hostname, labels)
                    })
                    .collect(),
                SilenceScope::Cluster => nodes
                    .iter()
                    .map(|n| n.last_seen_at)
                    .max()
                    .filter(|last| now - *last >= quiet)
                    .map(|last| silent(last, format!("cluster {cluster}"), cluster.to_string(), BTreeMap::new()))
                    .into_iter()
                    .collect(),
            }
        }
        Condition::RecoverySlow { minutes, window_hours } => {
            let w: Window = span(*window_hours).window();
            let q = window_query(cluster, w.from, w.to);
            let (answer, _) = crate::queries::recovery::recovery(
                db,
                &w,
                Duration::hours(24),
                0,
                crate::queries::recovery::CauseFilter::default(),
            )
            .await?;
            let d = answer.summary.downtime_minutes;
            match d.median {
                Some(median) if median > *minutes => vec![Finding {
                    subject: cluster.to_string(),
                    value: round(median, 3),
                    summary: format!(
                        "median downtime {median:.1} min over {} failures of the last {window_hours} h, above {minutes} min",
                        d.count
                    ),
                    link: format!("/v1/analytics/recovery?{q}"),
                    answer: format!("/v1/analytics/recovery?{q}"),
                    labels: BTreeMap::new(),
                }],
                _ => Vec::new(),
            }
        }
        Condition::AvailabilityBelow { share, window_hours } => {
            let w: Window = span(*window_hours).window();
            let q = window_query(cluster, w.from, w.to);
            let answer = crate::queries::availability::availability(
                db,
                &w,
                crate::queries::availability::AvailabilityBy::Cluster,
                crate::analytics::availability::AvailabilityPeriod::Month,
            )
            .await?;
            let installed: f64 = answer.points.iter().map(|p| p.installed_gpu_hours).sum();
            let lost: f64 = answer.points.iter().map(|p| p.lost_gpu_hours).sum();
            let available = if installed > 0.0 {
                (installed - lost) / installed
            } else {
                1.0
            };
            if installed > 0.0 && available < *share {
                vec![Finding {
                    subject: cluster.to_string(),
                    value: round(available, 6),
                    summary: format!(
                        "{:.2}% of {installed:.0} installed GPU-hours available over the last {window_hours} h ({lost:.1} lost), below {:.2}%",
                        available * 100.0,
                        share * 100.0
                    ),
                    link: format!("/v1/analytics/availability?{q}&period=day"),
                    answer: format!("/v1/analytics/availability?{q}&period=day"),
                    labels: BTreeMap::new(),
                }]
            } else {
                Vec::new()
            }
        }
        Condition::StuckRepair { window_hours } => {
            let w: Window = span(*window_hours).window();
            let q = window_query(cluster, w.from, w.to);
            let answer = crate::queries::availability::repair_pipeline(db, &w).await?;
            answer
                .stuck
                .into_iter()
                .map(|i| Finding {
                    subject: format!("{}/{}", i.hostname, i.cause.failure_id),
                    value: i.open_hours.map_or(0.0, |h| round(h, 3)),
                    summary: format!(
                        "node {} out of service for {:.1} h since {} ({}/{}), longer than the p90 return time of its cause",
                        i.hostname,
                        i.open_hours.unwrap_or(0.0),
                        ts(i.out_at),
                        i.cause.category,
                        i.cause.component
                    ),
                    link: format!("/v1/nodes/{}/{}/state", segment(cluster), segment(&i.hostname)),
                    answer: format!("/v1/analytics/repair-pipeline?{q}"),
                    labels: node_labels(&i.hostname),
                })
                .collect()
        }
    })
}
