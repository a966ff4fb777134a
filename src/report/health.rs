//! Fleet health: this window against the previous one of the same length, the lemon
//! nodes, and a job-plan card for a job of N GPUs. Gathered through the same use cases as
//! /v1/analytics/compare, /lemon-nodes and /job-plan (`queries::decisions`), so the report and the
//! API carry the same numbers; rendered once into a [`Section`] for both HTML and Markdown.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::domain::window::Window;

use super::sections::{Section, Table};
use super::svg::{self, Bar, Frame, Series, palette};
use super::{ReportData, fmt};
use crate::analytics::decisions::compare::{RateComparison, p_text};
use crate::analytics::decisions::job_plan::Bounded;
use crate::domain::taxonomy::Category;
use crate::queries::decisions::{self as qd, Comparison, JobPlanFigures, JobPlanRequest, LemonFigures, Span};

/// Job size of the job-plan card when the report is not asked for another (Llama 3's 16,384 GPUs).
pub const DEFAULT_JOB_GPUS: u64 = 16_384;
/// Family-wise level of the lemon-node test in the report.
pub const LEMON_ALPHA: f64 = 0.05;

const PREVIOUS: &str = "the previous window";
const THIS: &str = "this window";

#[derive(Debug, Clone)]
pub struct FleetHealth {
    /// A = the previous window of the same length, B = this window.
    pub comparison: Comparison,
    pub lemons: LemonFigures,
    pub plan: JobPlanFigures,
}

/// The report's data with its fleet-health section, for a job-plan card of `job_gpus` GPUs.
pub async fn gather_with_health(db: &PgPool, w: &Window, job_gpus: u64) -> Result<ReportData, sqlx::Error> {
    let mut data = super::gather::gather(db, w).await?;
    data.health = Some(gather(db, w.from, w.to, w.cluster(), job_gpus).await?);
    Ok(data)
}

pub async fn gather(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
    job_gpus: u64,
) -> Result<FleetHealth, sqlx::Error> {
    let this = Span {
        from,
        to,
        cluster: cluster.map(str::to_string),
    };
    let previous = Span {
        from: from - (to - from),
        to: from,
        cluster: this.cluster.clone(),
    };
    let request = JobPlanRequest {
        gpus: job_gpus,
        generation: None,
        checkpoint_minutes: None,
        restart_minutes: None,
    };
    Ok(FleetHealth {
        comparison: qd::compare(db, previous, this.clone(), None, (PREVIOUS, THIS)).await?,
        lemons: qd::lemons(db, this.clone(), Some(Category::Hardware), LEMON_ALPHA).await?,
        plan: qd::job_plan(db, this, request).await?,
    })
}

fn ratio_interval(c: &RateComparison) -> String {
    match (c.ratio_lower, c.ratio_upper) {
        (None, _) => "n/a".into(),
        (Some(lo), None) => format!("at least {}", fmt::rate(Some(lo))),
        (Some(lo), Some(hi)) if c.b_failures == 0 => {
            format!("at most {} (from {})", fmt::rate(Some(hi)), fmt::rate(Some(lo)))
        }
        (Some(lo), Some(hi)) => format!("{} to {}", fmt::rate(Some(lo)), fmt::rate(Some(hi))),
    }
}

fn comparison_row(scope: &str, c: &RateComparison) -> Vec<String> {
    vec![
        scope.to_string(),
        fmt::int(c.a_failures),
        fmt::rate(c.a_rate_per_1000_gpu_days),
        fmt::int(c.b_failures),
        fmt::rate(c.b_rate_per_1000_gpu_days),
        fmt::rate(c.rate_ratio),
        ratio_interval(c),
        c.p_value.map_or_else(|| "n/a".into(), p_text),
    ]
}

fn interval(b: &Bounded, f: impl Fn(f64) -> String) -> [String; 3] {
    let or = |v: Option<f64>, none: &str| v.map_or_else(|| none.to_string(), &f);
    [or(b.value, "n/a"), or(b.lower, "0"), or(b.upper, "unbounded")]
}

/// The fleet-health section; a placeholder section when the report was gathered without it.
pub fn section(d: &ReportData) -> Section {
    let Some(h) = &d.health else {
        return Section {
            id: "fleet-health",
            title: "Fleet health".into(),
            lead: "Not computed for this report.".into(),
            charts: vec![],
            tables: vec![],
            notes: vec![],
        };
    };
    let c = &h.comparison;
    let frame = Frame {
        id: "fleet-health",
        title: "Failures per 1,000 GPU-days: previous window and this window",
        x_label: "root-cause category",
        y_label: "failures per 1,000 GPU-days",
    };
    let bars: Vec<Bar> = std::iter::once(("all", &c.overall))
        .chain(c.by_category.iter().map(|k| (k.key.as_str(), &k.comparison)))
        .map(|(name, r)| Bar {
            label: name.to_string(),
            values: vec![
                r.a_rate_per_1000_gpu_days.unwrap_or(0.0),
                r.b_rate_per_1000_gpu_days.unwrap_or(0.0),
            ],
            notes: vec![format!(
                "{} / {} failures",
                fmt::int(r.a_failures),
                fmt::int(r.b_failures)
            )],
        })
        .collect();
    let chart = svg::grouped_bars(
        &frame,
        &[
            Series {
                name: PREVIOUS.into(),
                color: palette::SKY_BLUE,
            },
            Series {
                name: THIS.into(),
                color: palette::BLUE,
            },
        ],
        &bars,
    );
    let mut rows = vec![comparison_row("all failures", &c.overall)];
    rows.extend(c.by_category.iter().map(|k| comparison_row(&k.key, &k.comparison)));
    let compare = Table {
        caption: "This window against the previous window".into(),
        headers: [
            "Scope",
            "Previous failures",
            "Previous per 1,000 GPU-days",
            "This failures",
            "This per 1,000 GPU-days",
            "Rate ratio",
            "95% interval",
            "p-value",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    };
    let l = &h.lemons;
    let lemons = Table {
        caption: "Lemon nodes".into(),
        headers: [
            "Node",
            "Hardware failures",
            "Expected",
            "Tail probability",
            "Holm-adjusted",
            "Dominant component",
            "Drained",
        ]
        .map(String::from)
        .to_vec(),
        rows: l
            .result
            .lemons
            .iter()
            .map(|n| {
                vec![
                    format!("{}/{}", n.cluster, n.hostname),
                    fmt::int(n.failures),
                    fmt::rate(Some(n.expected_failures)),
                    format!("{:.2e}", n.tail_probability),
                    format!("{:.2e}", n.adjusted_probability),
                    n.dominant_component.clone().unwrap_or_else(|| "n/a".into()),
                    if n.drained { "yes" } else { "no" }.into(),
                ]
            })
            .collect(),
    };
    let p = &h.plan.plan;
    let hours = |v: f64| fmt::rate(Some(v));
    let plan_row = |name: &str, b: &Bounded, f: &dyn Fn(f64) -> String| {
        let [v, lo, hi] = interval(b, f);
        vec![name.to_string(), v, lo, hi]
    };
    let plan = Table {
        caption: format!("Job plan for {} GPUs", fmt::int(p.gpus)),
        headers: ["Figure", "Estimate", "95% low", "95% high"].map(String::from).to_vec(),
        rows: vec![
            plan_row("Job MTBF, hours", &p.job_mtbf_hours, &hours),
            plan_row("Interruptions per day", &p.interruptions_per_day, &hours),
            plan_row("Young checkpoint interval, minutes", &p.young_interval_minutes, &hours),
            plan_row("Daly checkpoint interval, minutes", &p.daly_interval_minutes, &hours),
            plan_row(
                "Effective training time ratio",
                &p.effective_training_time_ratio,
                &|v| fmt::pct(Some(v)),
            ),
        ],
    };
    let lemon_note = if l.result.lemons.is_empty() {
        format!(
            "No node has more hardware failures than chance allows ({} nodes tested, Holm-corrected at {}).",
            fmt::int(l.result.nodes_tested),
            LEMON_ALPHA
        )
    } else {
        format!(
            "{} lemon node(s): more hardware failures than chance allows for their exposure ({} nodes tested, Poisson tail, Holm-corrected at {}).",
            fmt::int(l.result.lemons.len() as u64),
            fmt::int(l.result.nodes_tested),
            LEMON_ALPHA
        )
    };
    let source = |s: qd::CostSource| match s {
        qd::CostSource::Given => "given",
        qd::CostSource::MeasuredMedian => "the median recorded downtime of this window",
        qd::CostSource::Default => "the documented default",
    };
    Section {
        id: "fleet-health",
        title: "Fleet health".into(),
        lead: c.overall.verdict.clone(),
        charts: vec![chart],
        // An empty lemon table says nothing the note does not.
        tables: if lemons.rows.is_empty() {
            vec![compare, plan]
        } else {
            vec![compare, lemons, plan]
        },
        notes: vec![
            format!(
                "Previous window: {} to {}. Rate ratio = this window's rate / the previous one's; exact 95% interval and p-value by the conditional binomial method (docs/decisions.md). Assumes independent failures at a constant rate within each window.",
                c.a.from.format("%Y-%m-%d %H:%M"),
                c.a.to.format("%Y-%m-%d %H:%M")
            ),
            lemon_note,
            format!(
                "Job plan for {} GPUs from this window's per-GPU rate ({} failures over {} GPU-hours): checkpoint cost {} min ({}), restart cost {} min ({}). Intervals are the figures at the bounds of the MTBF's exact 95% interval.",
                fmt::int(p.gpus),
                fmt::int(h.plan.failures),
                fmt::int(h.plan.gpu_hours.round() as u64),
                fmt::number(p.checkpoint_minutes),
                source(h.plan.checkpoint_source),
                fmt::number(p.restart_minutes),
                source(h.plan.restart_source),
            ),
        ],
    }
}
