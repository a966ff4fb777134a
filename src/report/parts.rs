//! Parts: how long GPU parts last (Kaplan-Meier by generation), how often each model fails per
//! part-year, which parts or slots keep failing, and which signals come before a hard failure.
//! Gathered through the same use cases as /v1/analytics/survival, /afr, /parts-or-slots and
//! /precursors (`queries::parts`) with the API's defaults, and rendered once into a [`Section`].

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::sections::{Section, Table};
use super::svg::{self, AgeAxis, Curve, CurveStep, Frame, Row, palette};
use super::{ReportData, fmt};
use crate::analytics::decisions::compare::p_text;
use crate::analytics::forecast::{Method, Request};
use crate::analytics::parts::{Recommendation, Suspect, SuspectKind};
use crate::analytics::precursors::PrecursorLift;
use crate::domain::window::Window;
use crate::queries::forecast::{self as qf, ForecastAnswer, ForecastRequest};
use crate::queries::parts::{
    self as qp, AfrAnswer, PartEvent, PartGrouping, PartsOrSlotsAnswer, PrecursorAnswer, SurvivalAnswer, SurvivalGroup,
};

/// The API's defaults, so the report's figures are the ones a plain GET answers.
pub const CONFIDENCE: f64 = 0.95;
pub const ALPHA: f64 = 0.05;
pub const PRECURSOR_WINDOW_DAYS: f64 = 7.0;
pub const EVENT: PartEvent = PartEvent::Removal;
/// The forecast's horizon (a quarter), interval and service level, as the API's defaults.
pub const FORECAST_HORIZON_DAYS: f64 = 91.0;
pub const FORECAST_INTERVAL: f64 = 0.9;
pub const FORECAST_SERVICE_LEVEL: f64 = 0.95;
/// Parts and slots listed (each), and precursors listed.
pub const SUSPECTS: usize = 10;
pub const PRECURSORS: usize = 5;

/// Colours of the survival curves, one per group in order (Okabe-Ito, then repeating).
const CURVE_COLORS: [&str; 7] = [
    palette::BLUE,
    palette::VERMILLION,
    palette::BLUISH_GREEN,
    palette::ORANGE,
    palette::REDDISH_PURPLE,
    palette::SKY_BLUE,
    palette::BLACK,
];

#[derive(Debug, Clone)]
pub struct PartsFigures {
    /// By GPU generation.
    pub survival: SurvivalAnswer,
    /// By model.
    pub afr: AfrAnswer,
    pub parts_or_slots: PartsOrSlotsAnswer,
    /// Over the report's window.
    pub precursors: PrecursorAnswer,
    /// The next quarter's failures by model, with the backtest of its methods.
    pub forecast: ForecastAnswer,
}

impl PartsFigures {
    pub fn has_parts(&self) -> bool {
        self.survival.groups.iter().any(|g| g.parts > 0)
    }
}

/// The parts figures as of the end of the window (or now, if that is earlier); precursors over the
/// window itself.
pub async fn gather(db: &PgPool, w: &Window) -> Result<PartsFigures, sqlx::Error> {
    let as_of: DateTime<Utc> = w.to.min(Utc::now());
    let cluster = w.cluster();
    Ok(PartsFigures {
        survival: qp::survival(
            db,
            cluster,
            &PartGrouping::Generation,
            EVENT,
            CONFIDENCE,
            &qp::SurvivalOptions::default(),
            as_of,
        )
        .await?,
        afr: qp::afr(db, cluster, &PartGrouping::Model, EVENT, CONFIDENCE, as_of).await?,
        parts_or_slots: qp::parts_or_slots(db, cluster, ALPHA, as_of).await?,
        precursors: qp::precursors(db, cluster, w.from, w.to, PRECURSOR_WINDOW_DAYS, CONFIDENCE).await?,
        forecast: qf::failure_forecast(
            db,
            cluster,
            &ForecastRequest {
                by: PartGrouping::Model,
                event: EVENT,
                to: as_of,
                request: Request {
                    horizon_days: FORECAST_HORIZON_DAYS,
                    interval: FORECAST_INTERVAL,
                    service_level: FORECAST_SERVICE_LEVEL,
                    afr_window_days: 365.25,
                },
                backtest: true,
            },
        )
        .await?,
    })
}

/// The number of days with one decimal.
fn days(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{} days", fmt::number(v)))
}

fn median_interval(g: &SurvivalGroup) -> String {
    match (g.median_lower_days, g.median_upper_days) {
        (None, _) => "n/a".into(),
        (Some(lo), None) => format!("{} to unbounded", fmt::number(lo)),
        (Some(lo), Some(hi)) => format!("{} to {}", fmt::number(lo), fmt::number(hi)),
    }
}

fn bounded(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (None, _) => "n/a".into(),
        (Some(lo), None) => format!("{} to unbounded", fmt::rate(Some(lo))),
        (Some(lo), Some(hi)) => format!("{} to {}", fmt::rate(Some(lo)), fmt::rate(Some(hi))),
    }
}

fn recommendation(r: Recommendation) -> &'static str {
    match r {
        Recommendation::ReplacePart => "replace_part",
        Recommendation::InspectSlot => "inspect_slot",
        Recommendation::SwapToTell => "swap_to_tell",
        Recommendation::Monitor => "monitor",
    }
}

fn signal(p: &PrecursorLift) -> String {
    match p.code {
        Some(c) => format!("{} {c}", p.kind),
        None => p.kind.clone(),
    }
}

fn survival_chart(s: &SurvivalAnswer) -> String {
    let max_days = s
        .groups
        .iter()
        .filter_map(|g| g.curve.steps.last().map(|st| st.time))
        .fold(0.0, f64::max);
    let axis = AgeAxis::for_max(max_days);
    let curves: Vec<Curve> = s
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| Curve {
            name: g.group.clone(),
            color: CURVE_COLORS[i % CURVE_COLORS.len()],
            steps: g
                .curve
                .steps
                .iter()
                .map(|st| CurveStep {
                    time: st.time,
                    value: st.survival,
                    lower: st.lower,
                    upper: st.upper,
                })
                .collect(),
            at_risk: axis.ticks.iter().map(|t| g.curve.at_risk_at(*t)).collect(),
            note: format!(
                "{} parts, {} failure removals, median {} ({})",
                fmt::int(g.parts),
                fmt::int(g.events),
                days(g.median_days),
                median_interval(g)
            ),
        })
        .collect();
    svg::survival_curves(
        &Frame {
            id: "part-survival",
            title: "Survival of GPU parts by generation",
            x_label: "installed age",
            y_label: "share of parts not yet removed for failure",
        },
        &axis,
        &curves,
    )
}

fn afr_chart(a: &AfrAnswer) -> String {
    let rows: Vec<Row> = a
        .groups
        .iter()
        .map(|g| Row {
            label: g.group.clone(),
            value: g.afr.rate_per_year,
            low: g.afr.rate_per_year.map(|_| g.afr.lower),
            high: g.afr.upper,
            text: format!(
                "{} ({})",
                fmt::rate(g.afr.rate_per_year),
                bounded(g.afr.rate_per_year.map(|_| g.afr.lower), g.afr.upper)
            ),
        })
        .collect();
    svg::horizontal_bars(
        &Frame {
            id: "part-afr",
            title: "Failures per part-year by model",
            x_label: "failure removals per installed part-year",
            y_label: "model",
        },
        &rows,
        palette::VERMILLION,
        None,
    )
}

fn suspect_row(s: &Suspect) -> Vec<String> {
    vec![
        match s.kind {
            SuspectKind::Part => "part".into(),
            SuspectKind::Slot => "slot".into(),
        },
        s.id.clone(),
        fmt::int(s.failures),
        fmt::int(s.distinct),
        fmt::rate(Some(s.expected)),
        p_text(s.adjusted_p),
        recommendation(s.recommendation).into(),
    ]
}

fn lead(p: &PartsFigures) -> String {
    let s = &p.survival;
    let medians: Vec<String> = s
        .groups
        .iter()
        .filter(|g| g.median_days.is_some())
        .map(|g| format!("{} {}", g.group, days(g.median_days)))
        .collect();
    let parts: u64 = s.groups.iter().map(|g| g.parts).sum();
    let mut text = if medians.is_empty() {
        format!(
            "{} GPU parts: no generation has lost half its parts to failure removals yet",
            fmt::int(parts)
        )
    } else {
        format!(
            "{} GPU parts; median installed age at a failure removal: {}",
            fmt::int(parts),
            medians.join(", ")
        )
    };
    if let Some(lr) = &s.log_rank {
        text.push_str(&format!("; log-rank across generations {}", p_text(lr.p_value)));
    }
    text.push('.');
    text
}

pub fn section(d: &ReportData) -> Section {
    let base = |lead: &str| Section {
        id: "parts",
        title: "Parts".into(),
        lead: lead.into(),
        charts: vec![],
        tables: vec![],
        notes: vec![],
    };
    let Some(p) = &d.parts else {
        return base("Not computed for this report.");
    };
    if !p.has_parts() {
        return base("No GPU parts are recorded for this fleet.");
    }
    let s = &p.survival;
    let survival_rows = s
        .groups
        .iter()
        .map(|g| {
            let mut row = vec![
                g.group.clone(),
                fmt::int(g.parts),
                fmt::int(g.events),
                days(g.median_days),
                median_interval(g),
            ];
            row.extend(g.at_ages.iter().map(|a| match a.survival {
                Some(v) => format!("{} ({} at risk)", fmt::pct(Some(v)), fmt::int(a.at_risk)),
                None => "n/a".into(),
            }));
            row
        })
        .collect();
    let mut survival_headers = vec![
        "Generation".to_string(),
        "Parts".into(),
        "Failure removals".into(),
        "Median".into(),
        "Median interval (days)".into(),
    ];
    survival_headers.extend(
        s.groups
            .first()
            .map(|g| {
                g.at_ages
                    .iter()
                    .map(|a| {
                        let (number, unit) = a.age.split_at(a.age.len() - 1);
                        format!("Survival at {number} {unit}")
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    let afr_rows = p
        .afr
        .groups
        .iter()
        .map(|g| {
            vec![
                g.group.clone(),
                fmt::int(g.parts),
                fmt::int(g.afr.failures),
                fmt::rate(Some(g.afr.part_years)),
                fmt::rate(g.afr.rate_per_year),
                bounded(g.afr.rate_per_year.map(|_| g.afr.lower), g.afr.upper),
            ]
        })
        .collect();
    let ps = &p.parts_or_slots.result;
    let suspects: Vec<Vec<String>> = ps
        .parts
        .iter()
        .take(SUSPECTS)
        .chain(ps.slots.iter().take(SUSPECTS))
        .map(suspect_row)
        .collect();
    let precursor_rows: Vec<Vec<String>> = p
        .precursors
        .precursors
        .iter()
        .take(PRECURSORS)
        .map(|r| {
            vec![
                signal(r),
                fmt::int(r.occurrences),
                fmt::int(r.parts_with_signal),
                fmt::int(r.exposed_failures),
                fmt::rate(r.rate_ratio),
                bounded(r.ratio_lower, r.ratio_upper),
                r.p_value.map_or_else(|| "n/a".into(), p_text),
            ]
        })
        .collect();
    let forecast_rows: Vec<Vec<String>> = p
        .forecast
        .groups
        .iter()
        .filter(|g| g.parts_in_service > 0)
        .map(|g| {
            vec![
                g.group.clone(),
                fmt::int(g.parts_in_service),
                fmt::decimal(g.expected, 1),
                format!("{} to {}", g.lower, g.upper),
                fmt::int(g.spares),
                g.method.as_str().to_string(),
            ]
        })
        .collect();
    let cell = |o: &crate::analytics::forecast::BacktestOrigin, m: Method| {
        o.forecasts
            .iter()
            .find(|f| f.method == m)
            .map_or_else(|| "n/a".to_string(), |f| fmt::decimal(f.expected, 1))
    };
    let backtest_rows: Vec<Vec<String>> = p
        .forecast
        .groups
        .iter()
        .flat_map(|g| {
            g.backtest.iter().flatten().map(move |o| {
                vec![
                    g.group.clone(),
                    o.origin.format("%Y-%m-%d").to_string(),
                    fmt::int(o.actual),
                    cell(o, Method::Naive),
                    cell(o, Method::Afr),
                    cell(o, Method::Weibull),
                ]
            })
        })
        .collect();
    let mut notes = vec![
        format!(
            "Survival: Kaplan-Meier over installed age (placements summed; time on a shelf does not age a part); the event is a part's first removal as failed or RMA, other parts are censored at their age as of {}. Bands: {}% Greenwood (log-log). Log-rank: do the generations' curves differ.",
            s.as_of.format("%Y-%m-%d %H:%M UTC"),
            fmt::decimal(s.confidence * 100.0, 0)
        ),
        "AFR: failure removals per installed part-year (365.25 days), exact Poisson interval.".into(),
        format!(
            "Parts or slots: parts and slots with two or more hard failures, tested against the fleet's rate (Holm-adjusted p, alpha {}); replace_part: the failures followed the part across slots; inspect_slot: they stayed with the slot across parts; swap_to_tell: one part in one slot, move it to tell; monitor: not beyond chance.",
            fmt::rate(Some(ps.alpha))
        ),
        format!(
            "Precursors: for each signal kind and code, the rate of a hard failure of the same part within {} days after the signal against the rate without it, over this window; strongest (highest lower bound of the ratio) first.",
            fmt::decimal(p.precursors.window_days, 0)
        ),
    ];
    notes.push(format!(
        "Forecast: failure removals of the parts in service at {} in the next {} days, by the method with the lowest mean absolute error in the backtest (naive: the last quarter's count; afr: the last year's rate per part-year; weibull: each part's chance of failing at its age under a Weibull fitted to the model's lives); {}% prediction interval; spares: the count not exceeded with {}% probability. The backtest forecasts from each quarter start of the last two years with the history before it only, against what followed.",
        p.forecast.as_of.format("%Y-%m-%d"),
        fmt::decimal(p.forecast.horizon_days, 0),
        fmt::decimal(p.forecast.interval * 100.0, 0),
        fmt::decimal(p.forecast.service_level * 100.0, 0)
    ));
    if suspects.is_empty() {
        notes.push("No part or slot had two or more hard failures.".into());
    }
    if precursor_rows.is_empty() {
        notes.push("No signal named a part in this window.".into());
    }
    Section {
        id: "parts",
        title: "Parts".into(),
        lead: lead(p),
        charts: vec![survival_chart(s), afr_chart(&p.afr)],
        tables: vec![
            Table {
                caption: "Survival by GPU generation".into(),
                headers: survival_headers,
                rows: survival_rows,
            },
            Table {
                caption: "Failures per part-year by model".into(),
                headers: [
                    "Model",
                    "Parts",
                    "Failure removals",
                    "Part-years",
                    "Per part-year",
                    "Interval",
                ]
                .map(String::from)
                .to_vec(),
                rows: afr_rows,
            },
            Table {
                caption: "Expected failures next quarter by model".into(),
                headers: ["Model", "Parts in service", "Expected", "Interval", "Spares", "Method"]
                    .map(String::from)
                    .to_vec(),
                rows: forecast_rows,
            },
            Table {
                caption: "Forecast backtest by model".into(),
                headers: ["Model", "Origin", "Failed", "Naive", "AFR", "Weibull"]
                    .map(String::from)
                    .to_vec(),
                rows: backtest_rows,
            },
            Table {
                caption: "Parts or slots with repeat hard failures".into(),
                headers: [
                    "Kind",
                    "Part or slot",
                    "Failures",
                    "Distinct slots or parts",
                    "Expected",
                    "Adjusted p",
                    "Recommendation",
                ]
                .map(String::from)
                .to_vec(),
                rows: suspects,
            },
            Table {
                caption: "Strongest precursors of a hard failure".into(),
                headers: [
                    "Signal",
                    "Occurrences",
                    "Parts",
                    "Failures after it",
                    "Rate ratio",
                    "Interval",
                    "p",
                ]
                .map(String::from)
                .to_vec(),
                rows: precursor_rows,
            },
        ]
        .into_iter()
        .filter(|t| !t.rows.is_empty())
        .collect(),
        notes,
    }
}
