//! The report as Markdown tables (for wikis and tickets): the same sections and the same formatted
//! numbers as the HTML, without the pictures.

use std::fmt::Write;

use super::ReportData;
use super::sections::sections;

/// Escapes text for a Markdown table cell: no raw HTML, no emphasis or links, no cell breaks.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

pub fn render(d: &ReportData) -> String {
    let mut out = String::new();
    let cluster = d.window.cluster.as_deref().unwrap_or("all clusters");
    let _ = writeln!(out, "# Reliability report: {}\n", escape(cluster));
    let _ = writeln!(out, "{}\n", escape(&super::window_line(d)));
    out.push_str("| Figure | Value | Definition |\n|---|---|---|\n");
    for f in d.summary() {
        let value = match &f.note {
            Some(n) => format!("{} ({n})", f.value),
            None => f.value.clone(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            escape(f.label),
            escape(&value),
            escape(&f.definition)
        );
    }
    for s in sections(d) {
        let _ = writeln!(out, "\n## {}\n\n**{}**\n", escape(&s.title), escape(&s.lead));
        for t in &s.tables {
            let _ = writeln!(out, "{}:\n", escape(&t.caption));
            let _ = writeln!(
                out,
                "| {} |",
                t.headers.iter().map(|h| escape(h)).collect::<Vec<_>>().join(" | ")
            );
            let _ = writeln!(out, "|{}", t.headers.iter().map(|_| "---|").collect::<String>());
            for row in &t.rows {
                let _ = writeln!(
                    out,
                    "| {} |",
                    row.iter().map(|c| escape(c)).collect::<Vec<_>>().join(" | ")
                );
            }
            out.push('\n');
        }
        for n in &s.notes {
            let _ = writeln!(out, "_{}_\n", escape(n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn cells_cannot_break_the_table_or_inject_markup() {
        assert_eq!(
            super::escape("a|b<script>*x*\n[l](u)"),
            "a\\|b&lt;script&gt;\\*x\\* \\[l\\](u)"
        );
    }
}
