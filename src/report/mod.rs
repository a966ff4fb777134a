//! The reliability report: one data struct per section (gathered by [`gather`]), pure computations
//! of the summary figures and the published baselines, and three renderings of the same numbers
//! (HTML with inline SVG, an HTML fragment for the dashboard, Markdown). The renderers format every
//! number through [`fmt`], so the HTML and Markdown forms cannot disagree.

pub mod availability;
pub mod gather;
pub mod health;
pub mod html;
pub mod markdown;
pub mod parts;
pub mod sections;
pub mod svg;

use chrono::{DateTime, Duration, NaiveDate, Utc};

use crate::analytics::headline::{CategoryShare, FleetMtbf, MixRow, MtbfGroup, ratio};
use crate::domain::taxonomy::Category;

/// What the report was computed over.
#[derive(Debug, Clone)]
pub struct ReportWindow {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub cluster: Option<String>,
    pub catalog_version: i64,
    pub generated_at: DateTime<Utc>,
}

/// Everything the report shows. Each section is filled by its own function in [`gather`], so a
/// section can switch to another source (e.g. the cost analytics) without touching the renderers.
#[derive(Debug, Clone)]
pub struct ReportData {
    pub window: ReportWindow,
    /// Clusters the caller may pick (for the dashboard's picker).
    pub clusters: Vec<String>,
    pub mix: MixSection,
    pub mtbf: MtbfSection,
    pub causes: CauseSection,
    pub timeline: Timeline,
    /// None: no recovery data recorded for this window.
    pub recovery: Option<RecoverySection>,
    pub worst_nodes: WorstNodes,
    /// The published baselines beside this fleet's values: the rows of `GET /v1/analytics/baselines`.
    pub baselines: Vec<crate::analytics::baselines::Baseline>,
    /// This window against the previous one, lemon nodes, job plan (filled by `health::gather_with_health`).
    pub health: Option<health::FleetHealth>,
    /// Survival, AFR, parts-or-slots and precursors of the GPU parts; None when not gathered.
    pub parts: Option<parts::PartsFigures>,
    /// Availability per period and the repair pipeline; None when not gathered.
    pub availability: Option<availability::AvailabilityFigures>,
}

#[derive(Debug, Clone)]
pub struct MixSection {
    /// By GPU generation.
    pub rows: Vec<MixRow>,
    /// All failures in the window (with or without an inventory node).
    pub failures: u64,
    pub gpu_days: f64,
}

#[derive(Debug, Clone)]
pub struct MtbfSection {
    pub group_size: u32,
    pub groups: Vec<MtbfGroup>,
    pub fleet: FleetMtbf,
}

#[derive(Debug, Clone)]
pub struct CauseSection {
    pub failures: u64,
    /// hardware, platform, user, unknown (always all four).
    pub categories: Vec<CategoryShare>,
}

/// The periods of the timeline and the availability section: UTC days, ISO weeks from Monday,
/// calendar months (one definition, the availability analytics').
pub use crate::analytics::availability::AvailabilityPeriod as Bucket;

#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePoint {
    pub start: NaiveDate,
    /// Failures by category, in `Category::ALL` order.
    pub by_category: [u64; 4],
}

#[derive(Debug, Clone)]
pub struct Timeline {
    pub bucket: Bucket,
    pub points: Vec<TimelinePoint>,
}

/// Fills every bucket of [from, to) (zero where nothing failed) from (day, category, count): days
/// add up into the bucket that holds them.
pub fn fill_timeline(
    bucket: Bucket,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    counts: &[(NaiveDate, String, u64)],
) -> Timeline {
    let mut points = Vec::new();
    if from < to {
        let last = bucket.start_of(to - Duration::milliseconds(1));
        let mut d = bucket.start_of(from);
        while d <= last {
            points.push(TimelinePoint {
                start: d,
                by_category: [0; 4],
            });
            d = bucket.next(d);
        }
    }
    for (start, category, n) in counts {
        let k = Category::ALL.iter().position(|c| c.as_str() == category).unwrap_or(3);
        let start = bucket.start_of(start.and_time(chrono::NaiveTime::MIN).and_utc());
        if let Some(p) = points.iter_mut().find(|p| p.start == start) {
            p.by_category[k] += n;
        }
    }
    Timeline { bucket, points }
}

/// Downtime by recovery phase, from the failure lifecycles.
#[derive(Debug, Clone)]
pub struct RecoverySection {
    /// Failures with at least one recorded phase.
    pub failures: u64,
    pub phases: Vec<PhaseMinutes>,
    /// Downtime (repair time) per effective root cause, as `GET /v1/analytics/recovery` answers it.
    pub by_cause: Vec<crate::analytics::cost::CauseRecovery>,
}

#[derive(Debug, Clone)]
pub struct PhaseMinutes {
    pub phase: String,
    pub failures: u64,
    pub total_minutes: f64,
    pub median_minutes: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct WorstNodes {
    /// Failures in the window with a root-cause node.
    pub failures_with_node: u64,
    /// Distinct nodes that were the root cause of at least one failure.
    pub nodes_with_failures: u64,
    /// The nodes with the most failures, most first.
    pub nodes: Vec<NodeCount>,
}

#[derive(Debug, Clone)]
pub struct NodeCount {
    pub cluster: String,
    pub hostname: String,
    pub gpu_generation: Option<String>,
    pub failures: u64,
}

/// The window in words: what the report covers and when it was made.
pub fn window_line(d: &ReportData) -> String {
    format!(
        "From {} (inclusive) to {} (exclusive), {}; classification catalog version {}; generated {}.",
        d.window.from.format("%Y-%m-%d %H:%M UTC"),
        d.window.to.format("%Y-%m-%d %H:%M UTC"),
        d.window
            .cluster
            .as_ref()
            .map_or_else(|| "all clusters".to_string(), |c| format!("cluster {c}")),
        d.window.catalog_version,
        d.window.generated_at.format("%Y-%m-%d %H:%M UTC")
    )
}

/// One headline figure, formatted once for every rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub key: &'static str,
    pub label: &'static str,
    pub value: String,
    /// What qualifies the value (e.g. the rate of the worst generation), shown beside it.
    pub note: Option<String>,
    pub definition: String,
}

/// Number formats shared by the HTML and Markdown renderings and the dashboard (which shows the
/// report's HTML): one function, [`fmt::decimal`], with thousands separators everywhere and a fixed
/// number of decimals per kind of quantity: counts none, rates and ratios two, hours, minutes, days
/// and other measures one, percentages one.
pub mod fmt {
    /// `v` with `places` decimals and thousands separators ("39,575.7"); never "-0.0".
    pub fn decimal(v: f64, places: usize) -> String {
        if !v.is_finite() {
            return if v.is_nan() {
                "n/a".into()
            } else if v > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            };
        }
        let text = format!("{:.*}", places, crate::analytics::stats::positive_zero(v).abs());
        let (whole, frac) = text
            .split_once('.')
            .map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
        let mut out = String::with_capacity(text.len() + whole.len() / 3 + 1);
        // A value that rounds to zero shows no sign.
        if v < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') {
            out.push('-');
        }
        for (i, c) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if let Some(f) = frac {
            out.push('.');
            out.push_str(f);
        }
        out
    }

    /// A count.
    pub fn int(n: u64) -> String {
        decimal(n as f64, 0)
    }

    /// A rate or ratio (failures per 1,000 GPU-days, rate ratios, expected counts).
    pub fn rate(v: Option<f64>) -> String {
        v.map_or_else(|| "n/a".into(), |v| decimal(v, 2))
    }

    /// A fraction as a percentage with one decimal.
    pub fn pct(v: Option<f64>) -> String {
        v.map_or_else(|| "n/a".into(), |v| format!("{}%", decimal(v * 100.0, 1)))
    }

    pub fn hours(v: Option<f64>) -> String {
        v.map_or_else(|| "n/a".into(), |v| format!("{} h", decimal(v, 1)))
    }

    /// A measure (GPU-days, hours, minutes, failures per week).
    pub fn number(v: f64) -> String {
        decimal(v, 1)
    }
}

impl ReportData {
    fn hardware(&self) -> Option<&CategoryShare> {
        self.causes
            .categories
            .iter()
            .find(|c| c.category == Category::Hardware.as_str())
    }

    pub fn hardware_share(&self) -> Option<f64> {
        (self.causes.failures > 0).then(|| ratio(self.hardware().map_or(0, |h| h.failures), self.causes.failures))
    }

    pub fn rate_per_1000_gpu_days(&self) -> Option<f64> {
        (self.mix.gpu_days > 0.0).then(|| self.mix.failures as f64 / self.mix.gpu_days * 1000.0)
    }

    /// The generation with the highest failure rate (among those with exposure and failures).
    pub fn worst_generation(&self) -> Option<&MixRow> {
        self.mix
            .rows
            .iter()
            .filter(|r| r.failures > 0 && r.failures_per_1000_gpu_days.is_some())
            .max_by(|a, b| {
                a.failures_per_1000_gpu_days
                    .partial_cmp(&b.failures_per_1000_gpu_days)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| b.key.cmp(&a.key))
            })
    }

    /// The figures at the top of the report, readable in under a minute.
    pub fn summary(&self) -> Vec<Figure> {
        let worst = self.worst_generation();
        vec![
            Figure {
                key: "failures",
                label: "Failures",
                value: fmt::int(self.mix.failures),
                note: None,
                definition: "Interruptions in the window: signals of one job (else one node) close in time fold into one failure, counted at its first signal.".into(),
            },
            Figure {
                key: "failures_per_1000_gpu_days",
                label: "Failures per 1,000 GPU-days",
                value: fmt::rate(self.rate_per_1000_gpu_days()),
                note: None,
                definition: format!(
                    "Failures / GPU-days of exposure x 1,000; GPU-days = sum over nodes of GPUs x days in service in the window ({} GPU-days).",
                    fmt::number(self.mix.gpu_days)
                ),
            },
            Figure {
                key: "hardware_share",
                label: "Hardware share",
                value: fmt::pct(self.hardware_share()),
                note: None,
                definition: "Failures whose root cause is hardware (GPU, GPU memory, NVLink, network, the host: CPU, host memory, disk, PCIe, baseboard and the rest of the node, power, cooling) / all failures.".into(),
            },
            Figure {
                key: "median_group_mtbf_hours",
                label: format_group_label(self.mtbf.group_size),
                value: fmt::hours(self.mtbf.fleet.median_group_mtbf_hours),
                note: None,
                definition: format!(
                    "Median over {}-GPU groups with failures of exposure hours / failures (nodes with a group label form their group; others are packed in hostname order).",
                    self.mtbf.group_size
                ),
            },
            Figure {
                key: "worst_generation",
                label: "Worst generation",
                value: worst.map_or_else(|| "n/a".into(), |r| r.key.clone()),
                note: worst.map(|r| format!("{} per 1,000 GPU-days", fmt::rate(r.failures_per_1000_gpu_days))),
                definition: "The GPU generation with the highest failures per 1,000 GPU-days.".into(),
            },
        ]
    }
}

fn format_group_label(group_size: u32) -> &'static str {
    if group_size == 128 {
        "MTBF per 128-GPU group (median)"
    } else {
        "MTBF per group (median)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::headline::ComponentShare;

    #[test]
    fn one_number_format_with_thousands_separators() {
        assert_eq!(fmt::number(39_575.66), "39,575.7");
        assert_eq!(fmt::int(1_344), "1,344");
        assert_eq!(fmt::int(7), "7");
        assert_eq!(fmt::rate(Some(1_234_567.891)), "1,234,567.89");
        assert_eq!(fmt::hours(Some(999.96)), "1,000.0 h");
        assert_eq!(fmt::pct(Some(0.3125)), "31.2%");
        assert_eq!(fmt::number(-0.0), "0.0");
        assert_eq!(fmt::number(-0.01), "0.0");
        assert_eq!(fmt::number(-1_500.25), "-1,500.2");
        assert_eq!(fmt::decimal(123.0, 0), "123");
        assert_eq!(fmt::rate(None), "n/a");
    }

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn buckets_follow_the_window_length() {
        assert_eq!(
            Bucket::for_window(t("2026-11-01T00:00:00Z"), t("2026-12-01T00:00:00Z")),
            Bucket::Day
        );
        assert_eq!(
            Bucket::for_window(t("2026-01-01T00:00:00Z"), t("2026-12-01T00:00:00Z")),
            Bucket::Week
        );
        assert_eq!(
            Bucket::for_window(t("2020-01-01T00:00:00Z"), t("2026-12-01T00:00:00Z")),
            Bucket::Month
        );
        // 2026-11-05 is a Thursday: its week starts Monday 2026-11-02.
        assert_eq!(Bucket::Week.start_of(t("2026-11-05T13:00:00Z")), d("2026-11-02"));
        assert_eq!(Bucket::Month.start_of(t("2026-11-05T13:00:00Z")), d("2026-11-01"));
    }

    #[test]
    fn timeline_has_every_bucket_of_the_window_zero_filled() {
        // [Nov 1 06:00, Nov 4 00:00): days Nov 1, 2, 3 (the end is exclusive).
        let counts = vec![
            (d("2026-11-02"), "hardware".to_string(), 3),
            (d("2026-11-02"), "user".to_string(), 1),
            (d("2026-11-03"), "weird".to_string(), 2),
        ];
        let tl = fill_timeline(
            Bucket::Day,
            t("2026-11-01T06:00:00Z"),
            t("2026-11-04T00:00:00Z"),
            &counts,
        );
        assert_eq!(tl.points.len(), 3);
        assert_eq!(
            tl.points[0],
            TimelinePoint {
                start: d("2026-11-01"),
                by_category: [0, 0, 0, 0]
            }
        );
        assert_eq!(tl.points[1].by_category, [3, 0, 1, 0]);
        assert_eq!(
            tl.points[2].by_category,
            [0, 0, 0, 2],
            "an unknown category counts as unknown"
        );
        assert!(
            fill_timeline(Bucket::Day, t("2026-11-01T00:00:00Z"), t("2026-11-01T00:00:00Z"), &[])
                .points
                .is_empty()
        );
    }

    fn data() -> ReportData {
        let cat = |category: &str, failures: u64, components: Vec<(&str, u64)>| CategoryShare {
            category: category.into(),
            failures,
            share: failures as f64 / 20.0,
            components: components
                .into_iter()
                .map(|(c, n)| ComponentShare {
                    component: c.into(),
                    failures: n,
                    share_of_category: 0.0,
                    share_of_all: 0.0,
                })
                .collect(),
        };
        let mix_row = |key: &str, failures: u64, gpu_days: f64| MixRow {
            key: key.into(),
            gpus_in_service: 8,
            gpu_days,
            failures,
            failures_per_1000_gpu_days: (gpu_days > 0.0).then(|| failures as f64 / gpu_days * 1000.0),
            by_category: vec![],
            by_component: vec![],
        };
        let group = |name: &str, failures: u64, per_week: f64| MtbfGroup {
            group: name.into(),
            cluster: "c".into(),
            packed: true,
            nodes: 16,
            gpus: 128,
            exposure_hours: 168.0,
            gpu_hours: 128.0 * 168.0,
            failures,
            mtbf_hours: Some(168.0 / failures as f64),
            mtbf_lower_hours: 1.0,
            mtbf_upper_hours: None,
            failures_per_week: Some(per_week),
        };
        ReportData {
            window: ReportWindow {
                from: t("2026-11-01T00:00:00Z"),
                to: t("2026-11-08T00:00:00Z"),
                cluster: None,
                catalog_version: 1,
                generated_at: t("2026-11-08T00:00:00Z"),
            },
            clusters: vec!["c".into()],
            // 20 failures over 400 GPU-days = 50 per 1,000.
            mix: MixSection {
                rows: vec![
                    mix_row("ampere", 4, 200.0),
                    mix_row("hopper", 14, 200.0),
                    mix_row("unknown", 2, 0.0),
                ],
                failures: 20,
                gpu_days: 400.0,
            },
            mtbf: MtbfSection {
                group_size: 128,
                groups: vec![
                    group("c/auto-000", 2, 2.0),
                    group("c/auto-001", 8, 8.0),
                    group("c/auto-002", 4, 4.0),
                ],
                fleet: FleetMtbf {
                    gpus: 384,
                    gpu_hours: 0.0,
                    failures: 14,
                    mtbf_per_gpu_hours: None,
                    mtbf_per_gpu_lower_hours: 0.0,
                    mtbf_per_gpu_upper_hours: None,
                    median_group_mtbf_hours: Some(42.0),
                },
            },
            // hardware 10 = host 5 + gpu 2 + nvlink 1 + network 2; platform 4; user 6.
            causes: CauseSection {
                failures: 20,
                categories: vec![
                    cat(
                        "hardware",
                        10,
                        vec![("host", 5), ("gpu", 2), ("network", 2), ("nvlink", 1)],
                    ),
                    cat("platform", 4, vec![("scheduler", 4)]),
                    cat("user", 6, vec![("code", 6)]),
                    cat("unknown", 0, vec![]),
                ],
            },
            timeline: Timeline {
                bucket: Bucket::Day,
                points: vec![],
            },
            recovery: None,
            worst_nodes: WorstNodes {
                failures_with_node: 18,
                nodes_with_failures: 5,
                nodes: vec![],
            },
            baselines: vec![],
            health: None,
            parts: None,
            availability: None,
        }
    }

    #[test]
    fn summary_figures_from_hand_computed_inputs() {
        let s = data().summary();
        let v = |k: &str| s.iter().find(|f| f.key == k).unwrap().value.clone();
        assert_eq!(v("failures"), "20");
        assert_eq!(v("failures_per_1000_gpu_days"), "50.00");
        assert_eq!(v("hardware_share"), "50.0%");
        assert_eq!(v("median_group_mtbf_hours"), "42.0 h");
        // hopper 14 / 200 x 1,000 = 70 beats ampere 20; unknown has no exposure and no rate.
        assert_eq!(v("worst_generation"), "hopper");
        assert_eq!(s[4].note.as_deref(), Some("70.00 per 1,000 GPU-days"));
    }
}
