//! Availability and repairs: the share of installed GPU-hours that was available per period (and
//! where the rest went), and how long incidents take stage by stage. Gathered through the use cases
//! of /v1/analytics/availability (by cluster, summed per period) and /v1/analytics/repair-pipeline
//! over the report's window, from one read of the node ledgers.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use sqlx::PgPool;

use super::sections::{Section, Table, bucket_label, strings};
use super::svg::{self, Bar, Frame, Series, TimePoint, palette};
use super::{Bucket, ReportData, fmt};
use crate::analytics::availability::{AvailabilityPoint, NodeState, StageStats};
use crate::domain::window::Window;
use crate::queries::availability::{AvailabilityResponse, RepairPipelineResponse, availability_and_pipeline};

/// Open incidents listed, the oldest first.
pub const STUCK_LISTED: usize = 10;

/// States that take GPU-hours away, bottom to top in the chart after the available hours.
const LOST: [(NodeState, &str, &str); 3] = [
    (NodeState::Drained, "drained", palette::ORANGE),
    (NodeState::Down, "down", palette::VERMILLION),
    (NodeState::InRepair, "in repair", palette::REDDISH_PURPLE),
];

#[derive(Debug, Clone)]
pub struct AvailabilityFigures {
    pub availability: AvailabilityResponse,
    pub pipeline: RepairPipelineResponse,
}

/// Over the report's window, in the timeline's periods.
pub async fn gather(db: &PgPool, w: &Window) -> Result<AvailabilityFigures, sqlx::Error> {
    let period = Bucket::for_window(w.from, w.to);
    let (availability, pipeline) = availability_and_pipeline(db, w, period).await?;
    Ok(AvailabilityFigures { availability, pipeline })
}

/// One period summed over clusters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeriodHours {
    pub installed: f64,
    pub available: f64,
    pub degraded: f64,
    /// In `LOST` order.
    pub lost: [f64; 3],
}

impl PeriodHours {
    fn availability(&self) -> Option<f64> {
        (self.installed > 0.0).then(|| self.available / self.installed)
    }
}

/// The points of every cluster added up per period, periods in order.
pub fn per_period(points: &[AvailabilityPoint]) -> Vec<(NaiveDate, PeriodHours)> {
    let mut out: BTreeMap<NaiveDate, PeriodHours> = BTreeMap::new();
    for p in points {
        let h = out.entry(p.period).or_default();
        h.installed += p.installed_gpu_hours;
        h.available += p.available_gpu_hours;
        h.degraded += p.degraded_gpu_hours;
        for s in &p.lost_by_state {
            if let Some(i) = LOST.iter().position(|(state, ..)| *state == s.state) {
                h.lost[i] += s.gpu_hours;
            }
        }
    }
    out.into_iter().collect()
}

/// GPU-hours lost per cause (category, component) over the window, the largest first.
pub fn lost_by_cause(points: &[AvailabilityPoint]) -> Vec<(String, String, f64)> {
    let mut by: BTreeMap<(String, String), f64> = BTreeMap::new();
    for c in points.iter().flat_map(|p| &p.lost_by_cause) {
        *by.entry((c.category.clone(), c.component.clone())).or_default() += c.gpu_hours;
    }
    let mut out: Vec<(String, String, f64)> = by.into_iter().map(|((a, b), h)| (a, b, h)).collect();
    out.sort_by(|x, y| y.2.total_cmp(&x.2).then_with(|| (&x.0, &x.1).cmp(&(&y.0, &y.1))));
    out
}

fn stage(s: &StageStats) -> String {
    s.median.map_or_else(|| "n/a".into(), fmt::number)
}

pub fn section(d: &ReportData) -> Section {
    let base = |lead: &str| Section {
        id: "availability",
        title: "Availability and repairs".into(),
        lead: lead.into(),
        charts: vec![],
        tables: vec![],
        notes: vec![],
    };
    let Some(f) = &d.availability else {
        return base("Not computed for this report.");
    };
    let bucket = d.timeline.bucket;
    let unit = bucket.as_str();
    let periods = per_period(&f.availability.points);
    let total = periods.iter().fold(PeriodHours::default(), |mut t, (_, h)| {
        t.installed += h.installed;
        t.available += h.available;
        t.degraded += h.degraded;
        for i in 0..3 {
            t.lost[i] += h.lost[i];
        }
        t
    });
    if total.installed <= 0.0 {
        return base("No GPU was installed in this window.");
    }
    let x_label = format!("{unit} (UTC)");
    let y_label = format!("GPU-hours lost per {unit}");
    let series: Vec<Series> = LOST
        .iter()
        .map(|(_, name, color)| Series {
            name: (*name).into(),
            color,
        })
        .collect();
    // The lost hours alone: beside the installed ones they would be a sliver at any availability
    // worth having. The shares per period are in the table.
    let availability_chart = svg::stacked_area(
        &Frame {
            id: "availability",
            title: "GPU-hours lost by state",
            x_label: &x_label,
            y_label: &y_label,
        },
        &series,
        &periods
            .iter()
            .map(|(start, h)| TimePoint {
                label: bucket_label(bucket, *start),
                values: h.lost.to_vec(),
            })
            .collect::<Vec<_>>(),
    );
    let p = &f.pipeline;
    let stage_frame = Frame {
        id: "repair-pipeline",
        title: "Repair pipeline: median hours per stage by cause",
        x_label: "cause (category/component)",
        y_label: "hours (median)",
    };
    let stage_names = ["detect", "drain", "repair", "return"];
    let stage_colors = [
        palette::SKY_BLUE,
        palette::ORANGE,
        palette::REDDISH_PURPLE,
        palette::BLUE,
    ];
    let pipeline_chart = if p.by_cause.is_empty() {
        svg::no_data(&stage_frame, "No failure took a node out of service in this window")
    } else {
        svg::grouped_bars(
            &stage_frame,
            &stage_names
                .iter()
                .zip(stage_colors)
                .map(|(n, color)| Series {
                    name: (*n).into(),
                    color,
                })
                .collect::<Vec<_>>(),
            &p.by_cause
                .iter()
                .map(|c| {
                    let stages = [&c.detect_hours, &c.drain_hours, &c.repair_hours, &c.return_hours];
                    Bar {
                        label: c.key.clone(),
                        values: stages.iter().map(|s| s.median.unwrap_or(f64::NAN)).collect(),
                        notes: stages
                            .iter()
                            .map(|s| format!("{} incidents", fmt::int(s.count)))
                            .collect(),
                    }
                })
                .collect::<Vec<_>>(),
        )
    };
    let lost: f64 = total.lost.iter().sum();
    let open = p.incidents.iter().filter(|i| i.returned_at.is_none()).count() as u64;
    let lead = format!(
        "{} of {} installed GPU-hours available; {} GPU-hours lost ({} drained, {} down, {} in repair). {} incidents took a node out, {} still open, {} stuck.",
        fmt::pct(total.availability()),
        fmt::number(total.installed),
        fmt::number(lost),
        fmt::number(total.lost[0]),
        fmt::number(total.lost[1]),
        fmt::number(total.lost[2]),
        fmt::int(p.incidents.len() as u64),
        fmt::int(open),
        fmt::int(p.stuck.len() as u64),
    );
    let mut tables = vec![
        Table {
            caption: format!("GPU-hours per {unit}"),
            headers: strings([
                &format!("{unit} starting"),
                "Installed",
                "Available",
                "Availability",
                "Drained",
                "Down",
                "In repair",
                "Degraded",
            ]),
            rows: periods
                .iter()
                .map(|(start, h)| {
                    let mut row = vec![
                        start.to_string(),
                        fmt::number(h.installed),
                        fmt::number(h.available),
                        fmt::pct(h.availability()),
                    ];
                    row.extend(h.lost.iter().map(|v| fmt::number(*v)));
                    row.push(fmt::number(h.degraded));
                    row
                })
                .collect(),
        },
        Table {
            caption: "GPU-hours lost by cause".into(),
            headers: strings(["Category", "Component", "GPU-hours lost", "Share of lost"]),
            rows: lost_by_cause(&f.availability.points)
                .into_iter()
                .map(|(cat, comp, h)| vec![cat, comp, fmt::number(h), fmt::pct((lost > 0.0).then(|| h / lost))])
                .collect(),
        },
    ];
    if !p.by_cause.is_empty() {
        tables.push(Table {
            caption: "Repair pipeline by cause (hours)".into(),
            headers: strings([
                "Cause",
                "Incidents",
                "Open",
                "Detect median",
                "Drain median",
                "Repair median",
                "Return median",
                "Return p90",
            ]),
            rows: p
                .by_cause
                .iter()
                .map(|c| {
                    vec![
                        c.key.clone(),
                        fmt::int(c.incidents),
                        fmt::int(c.open),
                        stage(&c.detect_hours),
                        stage(&c.drain_hours),
                        stage(&c.repair_hours),
                        stage(&c.return_hours),
                        c.return_hours.p90.map_or_else(|| "n/a".into(), fmt::number),
                    ]
                })
                .collect(),
        });
    }
    if !p.stuck.is_empty() {
        tables.push(Table {
            caption: "Stuck repairs, the oldest first".into(),
            headers: strings(["Cluster", "Node", "Cause", "Out since", "Hours out"]),
            rows: p
                .stuck
                .iter()
                .take(STUCK_LISTED)
                .map(|i| {
                    vec![
                        i.cluster.clone(),
                        i.hostname.clone(),
                        format!("{}/{}", i.cause.category, i.cause.component),
                        i.out_at.format("%Y-%m-%d %H:%M UTC").to_string(),
                        i.open_hours.map_or_else(|| "n/a".into(), fmt::number),
                    ]
                })
                .collect(),
        });
    }
    Section {
        id: "availability",
        title: "Availability and repairs".into(),
        lead,
        charts: vec![availability_chart, pipeline_chart],
        tables,
        notes: vec![
            format!(
                "Availability: available / installed GPU-hours per UTC {unit}, from each node's state ledger \
                 (GET /v1/analytics/availability has the definitions and the breakdown by generation or group). \
                 Degraded hours count as available."
            ),
            "Stages: detect = first signal -> out of service, drain = first signal -> drained, repair = a GPU removed -> \
             its slot refilled, return = out of service -> back; medians over the incidents where the stage happened \
             (GET /v1/analytics/repair-pipeline). Stuck: open longer than the p90 return time of its cause."
                .into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::availability::{CauseHours, StateHours};

    fn point(day: u32, key: &str, installed: f64, drained: f64, down: f64, cause: (&str, f64)) -> AvailabilityPoint {
        let lost = drained + down;
        AvailabilityPoint {
            period: NaiveDate::from_ymd_opt(2026, 3, day).unwrap(),
            key: key.into(),
            installed_gpu_hours: installed,
            available_gpu_hours: installed - lost,
            lost_gpu_hours: lost,
            availability: Some((installed - lost) / installed),
            degraded_gpu_hours: 1.0,
            lost_by_state: vec![
                StateHours {
                    state: NodeState::Drained,
                    gpu_hours: drained,
                },
                StateHours {
                    state: NodeState::Down,
                    gpu_hours: down,
                },
                StateHours {
                    state: NodeState::InRepair,
                    gpu_hours: 0.0,
                },
            ],
            lost_by_cause: vec![CauseHours {
                category: "hardware".into(),
                component: cause.0.into(),
                gpu_hours: cause.1,
            }],
        }
    }

    #[test]
    fn clusters_add_up_per_period() {
        // Two clusters of 8 GPUs over day 1 (192 GPU-hours each); c1 drained 3 h (24 GPU-hours),
        // c2 down 1 h (8); day 2: c1 alone, nothing lost.
        let points = [
            point(1, "c1", 192.0, 24.0, 0.0, ("gpu", 24.0)),
            point(1, "c2", 192.0, 0.0, 8.0, ("host", 8.0)),
            point(2, "c1", 192.0, 0.0, 0.0, ("gpu", 0.0)),
        ];
        let p = per_period(&points);
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[0].1,
            PeriodHours {
                installed: 384.0,
                available: 352.0,
                degraded: 2.0,
                lost: [24.0, 8.0, 0.0],
            }
        );
        assert_eq!(p[0].1.availability(), Some(352.0 / 384.0));
        assert_eq!(p[1].1.availability(), Some(1.0));
        assert_eq!(
            lost_by_cause(&points),
            [
                ("hardware".to_string(), "gpu".to_string(), 24.0),
                ("hardware".to_string(), "host".to_string(), 8.0)
            ]
        );
    }
}
