//! The report's sections, each built once from [`ReportData`] as charts (SVG), tables and notes;
//! the HTML and Markdown renderings only lay these out, so they carry the same numbers.

use super::svg::{self, Bar, Frame, Marker, Row, Series, TimePoint, palette};
use super::{Bucket, ReportData, fmt};
use crate::analytics::baselines::{BASELINE_DEFINITIONS, Baseline, Unit};
use crate::domain::taxonomy::Category;

pub struct Section {
    pub id: &'static str,
    pub title: String,
    /// The one-sentence answer, for a reader in a hurry.
    pub lead: String,
    pub charts: Vec<String>,
    pub tables: Vec<Table>,
    /// Definitions and caveats.
    pub notes: Vec<String>,
}

pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Category colours, in `Category::ALL` order: hardware, platform, user, unknown.
pub const CATEGORY_COLORS: [&str; 4] = [palette::VERMILLION, palette::BLUE, palette::BLUISH_GREEN, palette::GREY];

fn category_series() -> Vec<Series> {
    Category::ALL
        .iter()
        .zip(CATEGORY_COLORS)
        .map(|(c, color)| Series {
            name: c.as_str().into(),
            color,
        })
        .collect()
}

pub(super) fn strings<const N: usize>(a: [&str; N]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Rows listed in the MTBF chart and table (the lowest MTBF first).
pub const MTBF_ROWS: usize = 30;

pub fn sections(d: &ReportData) -> Vec<Section> {
    vec![
        mix(d),
        mtbf(d),
        causes(d),
        timeline(d),
        recovery(d),
        super::availability::section(d),
        worst_nodes(d),
        super::health::section(d),
        baselines(d),
        super::parts::section(d),
    ]
}

fn mix(d: &ReportData) -> Section {
    let rated: Vec<_> = d.mix.rows.iter().filter(|r| r.gpu_days > 0.0).collect();
    let bars: Vec<Bar> = rated
        .iter()
        .map(|r| {
            let counts: Vec<u64> = Category::ALL
                .iter()
                .map(|c| {
                    r.by_category
                        .iter()
                        .find(|s| s.name == c.as_str())
                        .map_or(0, |s| s.failures)
                })
                .collect();
            Bar {
                label: format!("{} ({} GPUs)", r.key, fmt::int(r.gpus_in_service)),
                values: counts.iter().map(|n| *n as f64 / r.gpu_days * 1000.0).collect(),
                notes: counts.iter().map(|n| format!("{} failures", fmt::int(*n))).collect(),
            }
        })
        .collect();
    let chart = svg::stacked_bars(
        &Frame {
            id: "failure-mix",
            title: "Failure mix by GPU generation",
            x_label: "GPU generation (GPUs in service)",
            y_label: "failures per 1,000 GPU-days",
        },
        &category_series(),
        &bars,
    );
    let mut best_worst: Vec<_> = rated
        .iter()
        .filter(|r| r.failures_per_1000_gpu_days.is_some())
        .collect();
    best_worst.sort_by(|a, b| {
        a.failures_per_1000_gpu_days
            .partial_cmp(&b.failures_per_1000_gpu_days)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let lead = match (best_worst.first(), best_worst.last()) {
        (Some(best), Some(worst)) if best.key != worst.key && best.failures_per_1000_gpu_days.unwrap_or(0.0) > 0.0 => {
            format!(
                "{} fails most often: {} failures per 1,000 GPU-days, {}x the rate of {} ({}).",
                worst.key,
                fmt::rate(worst.failures_per_1000_gpu_days),
                fmt::number(
                    worst.failures_per_1000_gpu_days.unwrap_or(0.0) / best.failures_per_1000_gpu_days.unwrap_or(1.0)
                ),
                best.key,
                fmt::rate(best.failures_per_1000_gpu_days)
            )
        }
        (Some(only), _) => format!(
            "{}: {} failures per 1,000 GPU-days.",
            only.key,
            fmt::rate(only.failures_per_1000_gpu_days)
        ),
        _ => "No GPU-days of exposure in this window.".into(),
    };
    let rows = d
        .mix
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.key.clone(),
                fmt::int(r.gpus_in_service),
                fmt::number(r.gpu_days),
                fmt::int(r.failures),
                fmt::rate(r.failures_per_1000_gpu_days),
            ];
            row.extend(Category::ALL.iter().map(|c| {
                fmt::int(
                    r.by_category
                        .iter()
                        .find(|s| s.name == c.as_str())
                        .map_or(0, |s| s.failures),
                )
            }));
            row
        })
        .collect();
    let unplaced: u64 = d
        .mix
        .rows
        .iter()
        .filter(|r| r.gpu_days <= 0.0)
        .map(|r| r.failures)
        .sum();
    let mut notes = vec!["Rate = failures / GPU-days x 1,000; GPU-days = GPUs x days in service inside the window. A failure belongs to the generation of its root-cause node in the inventory, else to the GPU model its root signal named.".to_string()];
    if unplaced > 0 {
        notes.push(format!(
            "{} failures belong to no generation with exposure in the inventory (no rate; counted in the table).",
            fmt::int(unplaced)
        ));
    }
    Section {
        id: "failure-mix",
        title: "Failure mix by GPU generation".into(),
        lead,
        charts: vec![chart],
        tables: vec![Table {
            caption: "Failures by GPU generation".into(),
            headers: strings([
                "Generation",
                "GPUs",
                "GPU-days",
                "Failures",
                "Per 1,000 GPU-days",
                "Hardware",
                "Platform",
                "User",
                "Unknown",
            ]),
            rows,
        }],
        notes,
    }
}

fn mtbf(d: &ReportData) -> Section {
    let m = &d.mtbf;
    let mut groups: Vec<_> = m.groups.iter().collect();
    // Lowest MTBF first; groups without failures (MTBF above their lower bound) last.
    groups.sort_by(|a, b| match (a.mtbf_hours, b.mtbf_hours) {
        (Some(x), Some(y)) => x.total_cmp(&y).then_with(|| a.group.cmp(&b.group)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => b
            .mtbf_lower_hours
            .total_cmp(&a.mtbf_lower_hours)
            .then_with(|| a.group.cmp(&b.group)),
    });
    let shown: Vec<_> = groups.iter().take(MTBF_ROWS).collect();
    let interval = |g: &crate::analytics::headline::MtbfGroup| {
        format!(
            "{}-{}",
            fmt::number(g.mtbf_lower_hours),
            g.mtbf_upper_hours.map_or_else(|| "inf".into(), fmt::number)
        )
    };
    let rows: Vec<Row> = shown
        .iter()
        .map(|g| Row {
            label: g.group.clone(),
            value: g.mtbf_hours,
            low: Some(g.mtbf_lower_hours),
            high: g.mtbf_upper_hours,
            text: match g.mtbf_hours {
                Some(h) => format!("{} [{}]", fmt::hours(Some(h)), interval(g)),
                None => format!("no failures (> {})", fmt::hours(Some(g.mtbf_lower_hours))),
            },
        })
        .collect();
    let title = format!("MTBF per {}-GPU group", m.group_size);
    let chart = svg::horizontal_bars(
        &Frame {
            id: "mtbf",
            title: &title,
            x_label: "MTBF, hours (bars; whiskers: 95% interval)",
            y_label: "group (cluster/label)",
        },
        &rows,
        palette::SKY_BLUE,
        m.fleet.median_group_mtbf_hours.map(|v| Marker {
            label: "fleet median, h",
            value: v,
        }),
    );
    let with_failures = m.groups.iter().filter(|g| g.failures > 0).count();
    let lead = match (
        groups.first().filter(|g| g.mtbf_hours.is_some()),
        m.fleet.median_group_mtbf_hours,
    ) {
        (Some(worst), Some(median)) => format!(
            "Median MTBF {} over {} groups with failures; the worst, {}, fails every {} ({} failures per week).",
            fmt::hours(Some(median)),
            fmt::int(with_failures as u64),
            worst.group,
            fmt::hours(worst.mtbf_hours),
            worst.failures_per_week.map_or_else(|| "n/a".into(), fmt::number)
        ),
        _ => "No group had a failure in this window.".into(),
    };
    let mut notes = vec![
        format!(
            "MTBF = exposure hours / failures of the group (root-cause node in the group); 95% interval: exact chi-square interval for a Poisson count. Nodes with a group label form their group; others are packed in hostname order into groups of at most {} GPUs. The dashed line is the median over groups with failures.",
            m.group_size
        ),
        format!(
            "Fleet: {} GPUs, {} failures attributed to inventory nodes, MTBF per GPU {}.",
            fmt::int(m.fleet.gpus),
            fmt::int(m.fleet.failures),
            fmt::hours(m.fleet.mtbf_per_gpu_hours)
        ),
    ];
    if groups.len() > MTBF_ROWS {
        notes.push(format!(
            "Showing the {MTBF_ROWS} groups with the lowest MTBF of {}.",
            groups.len()
        ));
    }
    Section {
        id: "mtbf",
        title,
        lead,
        charts: vec![chart],
        tables: vec![Table {
            caption: "MTBF per group".into(),
            headers: strings([
                "Group",
                "Nodes",
                "GPUs",
                "Exposure h",
                "Failures",
                "MTBF h",
                "95% interval h",
                "Failures per week",
            ]),
            rows: shown
                .iter()
                .map(|g| {
                    vec![
                        g.group.clone(),
                        fmt::int(g.nodes),
                        fmt::int(g.gpus),
                        fmt::number(g.exposure_hours),
                        fmt::int(g.failures),
                        g.mtbf_hours.map_or_else(|| "n/a".into(), fmt::number),
                        interval(g),
                        g.failures_per_week.map_or_else(|| "n/a".into(), fmt::number),
                    ]
                })
                .collect(),
        }],
        notes,
    }
}

fn causes(d: &ReportData) -> Section {
    let c = &d.causes;
    let total = c.failures;
    let bars: Vec<Bar> = c
        .categories
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut values = vec![0.0; 4];
            let mut notes = vec![String::new(); 4];
            values[k] = s.share * 100.0;
            notes[k] = format!("{} failures", fmt::int(s.failures));
            Bar {
                label: s.category.clone(),
                values,
                notes,
            }
        })
        .collect();
    let shares = svg::stacked_bars(
        &Frame {
            id: "root-causes",
            title: "Root causes",
            x_label: "root-cause category",
            y_label: "share of failures, %",
        },
        &category_series(),
        if total > 0 { &bars } else { &[] },
    );
    let hardware = c.categories.iter().find(|s| s.category == Category::Hardware.as_str());
    let components = hardware.map(|h| h.components.clone()).unwrap_or_default();
    let split = svg::grouped_bars(
        &Frame {
            id: "hardware-components",
            title: "Hardware failures by component",
            x_label: "component",
            y_label: "share of all failures, %",
        },
        &[Series {
            name: "share of all failures".into(),
            color: palette::VERMILLION,
        }],
        &components
            .iter()
            .map(|p| Bar {
                label: p.component.clone(),
                values: vec![p.share_of_all * 100.0],
                notes: vec![format!(
                    "{} failures, {} of hardware",
                    fmt::int(p.failures),
                    fmt::pct(Some(p.share_of_category))
                )],
            })
            .collect::<Vec<_>>(),
    );
    let lead = if total == 0 {
        "No failures in this window.".into()
    } else {
        let parts: Vec<String> = c
            .categories
            .iter()
            .map(|s| format!("{} {}", s.category, fmt::pct(Some(s.share))))
            .collect();
        let top = components
            .first()
            .map(|p| {
                format!(
                    "; the largest hardware component is {} ({} of all failures)",
                    p.component,
                    fmt::pct(Some(p.share_of_all))
                )
            })
            .unwrap_or_default();
        format!("Of {} failures: {}{top}.", fmt::int(total), parts.join(", "))
    };
    Section {
        id: "root-causes",
        title: "Root causes".into(),
        lead,
        charts: vec![shares, split],
        tables: vec![
            Table {
                caption: "Failures by root-cause category".into(),
                headers: strings(["Category", "Failures", "Share"]),
                rows: c.categories.iter().map(|s| vec![s.category.clone(), fmt::int(s.failures), fmt::pct(Some(s.share))]).collect(),
            },
            Table {
                caption: "Hardware failures by component".into(),
                headers: strings(["Component", "Failures", "Share of hardware", "Share of all"]),
                rows: components
                    .iter()
                    .map(|p| vec![p.component.clone(), fmt::int(p.failures), fmt::pct(Some(p.share_of_category)), fmt::pct(Some(p.share_of_all))])
                    .collect(),
            },
        ],
        notes: vec!["Each failure counts once, with the root cause of its most specific signal (an explicit cause from the sender, else the classification catalog).".into()],
    }
}

pub(super) fn bucket_label(bucket: Bucket, d: chrono::NaiveDate) -> String {
    match bucket {
        Bucket::Day => d.format("%b %d").to_string(),
        Bucket::Week => format!("wk {}", d.format("%b %d")),
        Bucket::Month => d.format("%Y-%m").to_string(),
    }
}

fn timeline(d: &ReportData) -> Section {
    let tl = &d.timeline;
    let unit = tl.bucket.as_str();
    let points: Vec<TimePoint> = tl
        .points
        .iter()
        .map(|p| TimePoint {
            label: bucket_label(tl.bucket, p.start),
            values: p.by_category.iter().map(|n| *n as f64).collect(),
        })
        .collect();
    let y_label = format!("failures per {unit}");
    let x_label = format!("{unit} (UTC)");
    let chart = svg::stacked_area(
        &Frame {
            id: "timeline",
            title: "Failures over time by root cause",
            x_label: &x_label,
            y_label: &y_label,
        },
        &category_series(),
        &points,
    );
    let peak = tl
        .points
        .iter()
        .max_by_key(|p| (p.by_category.iter().sum::<u64>(), std::cmp::Reverse(p.start)));
    let lead = match peak {
        Some(p) if p.by_category.iter().sum::<u64>() > 0 => format!(
            "Busiest {unit}: {} with {} failures ({} hardware).",
            p.start,
            fmt::int(p.by_category.iter().sum()),
            fmt::int(p.by_category[0])
        ),
        _ => "No failures in this window.".into(),
    };
    Section {
        id: "timeline",
        title: "Failures over time".into(),
        lead,
        charts: vec![chart],
        tables: vec![Table {
            caption: format!("Failures per {unit} by root cause"),
            headers: strings([
                &format!("{unit} starting"),
                "Hardware",
                "Platform",
                "User",
                "Unknown",
                "Total",
            ]),
            rows: tl
                .points
                .iter()
                .map(|p| {
                    let mut row = vec![p.start.to_string()];
                    row.extend(p.by_category.iter().map(|n| fmt::int(*n)));
                    row.push(fmt::int(p.by_category.iter().sum()));
                    row
                })
                .collect(),
        }],
        notes: vec![format!(
            "Failures counted at their first signal, per UTC {unit}{}.",
            if tl.bucket == Bucket::Week {
                " (weeks start on Monday)"
            } else {
                ""
            }
        )],
    }
}

pub const NO_RECOVERY: &str = "No recovery data recorded in this window";

fn recovery(d: &ReportData) -> Section {
    let frame = Frame {
        id: "recovery",
        title: "Downtime by recovery phase",
        x_label: "recovery phase",
        y_label: "downtime, minutes (total)",
    };
    match &d.recovery {
        Some(r) => {
            let repaired: u64 = r
                .by_cause
                .iter()
                .filter(|c| c.component.is_none())
                .map(|c| c.downtime_minutes.count)
                .sum();
            let stat = |v: Option<f64>| v.map_or_else(|| "n/a".into(), fmt::number);
            let mut tables = vec![];
            if !r.phases.is_empty() {
                tables.push(Table {
                    caption: "Downtime by recovery phase".into(),
                    headers: strings(["Phase", "Failures", "Total minutes", "Median minutes"]),
                    rows: r
                        .phases
                        .iter()
                        .map(|p| {
                            vec![
                                p.phase.clone(),
                                fmt::int(p.failures),
                                fmt::number(p.total_minutes),
                                stat(p.median_minutes),
                            ]
                        })
                        .collect(),
                });
            }
            tables.push(Table {
                caption: "Repair time by root cause".into(),
                headers: strings([
                    "Category",
                    "Component",
                    "Failures",
                    "With repair time",
                    "Median minutes",
                    "Mean minutes",
                    "p90 minutes",
                ]),
                rows: r
                    .by_cause
                    .iter()
                    .map(|c| {
                        vec![
                            c.category.clone(),
                            c.component.clone().unwrap_or_else(|| "(all)".into()),
                            fmt::int(c.failures),
                            fmt::int(c.downtime_minutes.count),
                            stat(c.downtime_minutes.median),
                            stat(c.downtime_minutes.mean),
                            stat(c.downtime_minutes.p90),
                        ]
                    })
                    .collect(),
            });
            Section {
                id: "recovery",
                title: "Downtime by recovery phase".into(),
                lead: format!(
                    "{} failures with recovery records; {} with a repair time.",
                    fmt::int(r.failures),
                    fmt::int(repaired)
                ),
                charts: vec![if r.phases.is_empty() {
                    svg::no_data(&frame, "No recovery phases recorded in this window")
                } else {
                    svg::grouped_bars(
                        &frame,
                        &[Series {
                            name: "total minutes".into(),
                            color: palette::ORANGE,
                        }],
                        &r.phases
                            .iter()
                            .map(|p| Bar {
                                label: p.phase.clone(),
                                values: vec![p.total_minutes],
                                notes: vec![format!("{} failures", fmt::int(p.failures))],
                            })
                            .collect::<Vec<_>>(),
                    )
                }],
                tables,
                notes: vec![
                    "Repair time: a failure's downtime, the sum of its recorded recovery phases, else resolved_at - first signal; \
                     failures without either are counted but not in the statistics. Root cause: the post-mortem's, else the \
                     automatic one; (all) is the category's subtotal. p90 interpolates linearly between ranks."
                        .into(),
                ],
            }
        }
        _ => Section {
            id: "recovery",
            title: "Downtime by recovery phase".into(),
            lead: format!(
                "{NO_RECOVERY}: downtime by phase (detection, resubmission, set-up, recomputation) needs failure lifecycle records, and there are none for this window."
            ),
            charts: vec![svg::no_data(&frame, NO_RECOVERY)],
            tables: vec![],
            notes: vec![],
        },
    }
}

fn worst_nodes(d: &ReportData) -> Section {
    let w = &d.worst_nodes;
    let share = |n: u64| fmt::pct((w.failures_with_node > 0).then(|| n as f64 / w.failures_with_node as f64));
    let label = |n: &super::NodeCount| {
        if d.window.cluster.is_some() {
            n.hostname.clone()
        } else {
            format!("{}/{}", n.cluster, n.hostname)
        }
    };
    let rows: Vec<Row> = w
        .nodes
        .iter()
        .map(|n| Row {
            label: format!(
                "{} ({})",
                label(n),
                n.gpu_generation.as_deref().unwrap_or("not in inventory")
            ),
            value: Some(n.failures as f64),
            low: None,
            high: None,
            text: format!("{} ({})", fmt::int(n.failures), share(n.failures)),
        })
        .collect();
    let chart = svg::horizontal_bars(
        &Frame {
            id: "worst-nodes",
            title: "Worst nodes",
            x_label: "failures with this node as root cause",
            y_label: "node (GPU generation)",
        },
        &rows,
        palette::REDDISH_PURPLE,
        None,
    );
    let listed: u64 = w.nodes.iter().map(|n| n.failures).sum();
    let lead = if w.nodes.is_empty() {
        "No failure had a root-cause node in this window.".into()
    } else {
        format!(
            "The {} worst nodes caused {} of the {} failures with a root-cause node ({} nodes caused any).",
            w.nodes.len(),
            share(listed),
            fmt::int(w.failures_with_node),
            fmt::int(w.nodes_with_failures)
        )
    };
    Section {
        id: "worst-nodes",
        title: "Worst nodes".into(),
        lead,
        charts: vec![chart],
        tables: vec![Table {
            caption: "Nodes with the most failures".into(),
            headers: strings(["Node", "Cluster", "Generation", "Failures", "Share"]),
            rows: w
                .nodes
                .iter()
                .map(|n| vec![n.hostname.clone(), n.cluster.clone(), n.gpu_generation.clone().unwrap_or_else(|| "n/a".into()), fmt::int(n.failures), share(n.failures)])
                .collect(),
        }],
        notes: vec!["Share = failures with the node as root cause / failures with any root-cause node. Repeat offenders are candidates for draining.".into()],
    }
}

/// A value in a baseline's unit, as the report prints it.
fn baseline_value(v: Option<f64>, unit: Unit) -> String {
    match unit {
        Unit::Fraction => fmt::pct(v),
        Unit::Minutes => v.map_or_else(|| "n/a".into(), |m| format!("{} min", fmt::number(m))),
        Unit::Hours => fmt::hours(v),
        Unit::PerWeek => v.map_or_else(|| "n/a".into(), |w| format!("{} per week", fmt::number(w))),
    }
}

/// The published figure: one value, a range or a lower bound.
fn published_text(b: &Baseline) -> String {
    match (b.published, b.published_low, b.published_high) {
        (Some(v), _, _) => baseline_value(Some(v), b.unit),
        (None, Some(lo), Some(hi)) => format!("{} to {}", fmt::number(lo), baseline_value(Some(hi), b.unit)),
        (None, Some(lo), None) => format!("over {}", baseline_value(Some(lo), b.unit)),
        _ => "n/a".into(),
    }
}

fn baselines(d: &ReportData) -> Section {
    let rows = &d.baselines;
    let any_fleet = d.causes.failures > 0;
    let bars: Vec<Bar> = rows
        .iter()
        .filter(|b| b.unit == Unit::Fraction && b.published.is_some() && b.fleet.is_some())
        .map(|b| Bar {
            label: b.short.clone(),
            values: vec![b.published.unwrap_or(0.0) * 100.0, b.fleet.unwrap_or(0.0) * 100.0],
            notes: vec![
                format!("{}, published by {}", b.measure, b.source),
                format!("{}, this fleet ({})", b.measure, b.basis),
            ],
        })
        .collect();
    let chart = svg::grouped_bars(
        &Frame {
            id: "baselines",
            title: "This fleet beside the published baselines",
            x_label: "measure",
            y_label: "share, %",
        },
        &[
            Series {
                name: "published".into(),
                color: palette::GREY,
            },
            Series {
                name: "this fleet".into(),
                color: palette::BLUE,
            },
        ],
        if any_fleet { &bars } else { &[] },
    );
    let hw = rows
        .first()
        .map(|b| baseline_value(b.fleet, b.unit))
        .unwrap_or_default();
    Section {
        id: "baselines",
        title: "This fleet beside the published baselines".into(),
        lead: if any_fleet {
            format!(
                "Hardware causes {hw} of failures here; Llama 3 reported 78% of interruptions, ICSE 2023 28% of failures."
            )
        } else {
            "No failures in this window to compare.".into()
        },
        charts: vec![chart],
        tables: vec![Table {
            caption: "Published figures and this fleet".into(),
            headers: strings(["Measure", "Source", "Published", "This fleet", "Basis"]),
            rows: rows
                .iter()
                .map(|b| {
                    vec![
                        b.measure.clone(),
                        b.source.clone(),
                        published_text(b),
                        baseline_value(b.fleet, b.unit),
                        b.basis.clone(),
                    ]
                })
                .collect(),
        }],
        notes: vec![BASELINE_DEFINITIONS.into()],
    }
}
