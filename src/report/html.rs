//! The report as a self-contained HTML document (inline CSS, inline SVG, no scripts, fonts or
//! external requests) or as a fragment for the dashboard. Every piece of text is escaped.

use std::fmt::Write;

use super::ReportData;
use super::sections::{Section, Table, sections};
use super::svg::escape;

/// Styles scoped to the report's root element, shipped inside the fragment so that the dashboard
/// shows it exactly as the standalone document does.
const CSS: &str = "
.faultline-report{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#111;max-width:1000px;margin:0 auto;line-height:1.45}
.faultline-report h1{font-size:1.6rem;margin:.2rem 0}
.faultline-report h2{font-size:1.25rem;margin:2rem 0 .3rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.faultline-report .window{color:#444;margin:.2rem 0 1rem}
.faultline-report .figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(175px,1fr));gap:.6rem;margin:1rem 0}
.faultline-report .figure{border:1px solid #ccc;border-radius:6px;padding:.5rem .7rem;background:#fafafa}
.faultline-report .figure .label{font-size:.85rem;color:#333;font-weight:600;min-height:2.5em}
.faultline-report .figure .value{font-size:1.45rem;font-weight:700;margin:.15rem 0}
.faultline-report .figure .value-note{font-size:.85rem;font-weight:600;margin-bottom:.2rem}
.faultline-report .figure .definition{font-size:.75rem;color:#555}
.faultline-report .lead{font-weight:600;margin:.3rem 0 .6rem}
.faultline-report svg.chart{display:block;max-width:100%;height:auto;margin:.5rem 0}
.faultline-report table{border-collapse:collapse;font-size:.85rem;margin:.4rem 0}
.faultline-report th,.faultline-report td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
.faultline-report td.num{text-align:right;font-variant-numeric:tabular-nums}
.faultline-report caption{text-align:left;font-weight:600;padding:.2rem 0}
.faultline-report details{margin:.3rem 0}
.faultline-report .note{font-size:.8rem;color:#555;margin:.3rem 0}
.faultline-report footer{font-size:.8rem;color:#555;margin-top:2rem}
";

fn title(d: &ReportData) -> String {
    format!(
        "Reliability report: {}, {} to {}",
        d.window.cluster.as_deref().unwrap_or("all clusters"),
        d.window.from.format("%Y-%m-%d %H:%M UTC"),
        d.window.to.format("%Y-%m-%d %H:%M UTC")
    )
}

fn is_numeric(cell: &str) -> bool {
    let c = cell.trim_end_matches(['%', 'h', ' ']);
    !c.is_empty()
        && c.chars()
            .all(|ch| ch.is_ascii_digit() || matches!(ch, ',' | '.' | '-' | ' '))
        && c.chars().any(|ch| ch.is_ascii_digit())
}

fn table(out: &mut String, t: &Table) {
    let _ = write!(out, "<table><caption>{}</caption><thead><tr>", escape(&t.caption));
    for h in &t.headers {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        out.push_str("<tr>");
        for cell in row {
            let class = if is_numeric(cell) { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

fn section(out: &mut String, s: &Section) {
    let _ = write!(
        out,
        "<section id=\"{}\"><h2>{}</h2><p class=\"lead\">{}</p>",
        escape(s.id),
        escape(&s.title),
        escape(&s.lead)
    );
    for c in &s.charts {
        // Charts come from the svg module, which escapes every text it draws.
        out.push_str(c);
    }
    for n in &s.notes {
        let _ = write!(out, "<p class=\"note\">{}</p>", escape(n));
    }
    if !s.tables.is_empty() {
        // The parts lists are the answer itself, not the numbers behind a chart: shown open.
        let open = if s.id == "parts" { " open" } else { "" };
        let _ = write!(out, "<details{open}><summary>Numbers</summary>");
        for t in &s.tables {
            table(out, t);
        }
        out.push_str("</details>");
    }
    out.push_str("</section>");
}

/// The report body: summary figures, then the sections. Carries its own `<style>`.
pub fn fragment(d: &ReportData) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<article class=\"faultline-report\" data-clusters=\"{}\"><style>{CSS}</style><h1>{}</h1>\
<p class=\"window\">{}</p><div class=\"figures\">",
        escape(&d.clusters.join(",")),
        escape(&format!(
            "Reliability report: {}",
            d.window.cluster.as_deref().unwrap_or("all clusters")
        )),
        escape(&super::window_line(d)),
    );
    for f in d.summary() {
        let _ = write!(
            out,
            "<div class=\"figure\" data-figure=\"{}\"><div class=\"label\">{}</div><div class=\"value\">{}</div>{}<div class=\"definition\">{}</div></div>",
            f.key,
            escape(f.label),
            escape(&f.value),
            f.note
                .as_ref()
                .map(|n| format!("<div class=\"value-note\">{}</div>", escape(n)))
                .unwrap_or_default(),
            escape(&f.definition)
        );
    }
    out.push_str("</div>");
    for s in sections(d) {
        section(&mut out, &s);
    }
    out.push_str("<footer>Faultline reliability report. Figures are computed from the failures stored for this window; definitions beside each figure.</footer></article>");
    out
}

/// The whole document: renders offline, survives being mailed or archived.
pub fn document(d: &ReportData) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><link rel=\"icon\" href=\"data:,\"><style>body{{margin:1.5rem;background:#fff}}</style></head><body>{}</body></html>",
        escape(&title(d)),
        fragment(d)
    )
}
