//! `faultline forecast-backtest`: the failure forecast's backtest over a database, as a table per
//! group (each origin's forecasts against what happened, then each method's scores).

use std::fmt::Write;

use crate::analytics::forecast::Method;
use crate::queries::forecast::ForecastAnswer;

/// The answer's backtest as plain text.
pub fn table(a: &ForecastAnswer) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "failure forecast by {} from {} over {} days ({} backtest origins)",
        a.by,
        a.as_of.format("%Y-%m-%d"),
        a.horizon_days,
        a.backtest_origins.len()
    );
    for g in &a.groups {
        let _ = writeln!(out, "\n{} ({} parts in service)", g.group, g.parts_in_service);
        let _ = writeln!(
            out,
            "  {:<10} {:>7} {:>9} {:>9} {:>9}",
            "origin", "actual", "naive", "afr", "weibull"
        );
        for o in g.backtest.iter().flatten() {
            let cell = |m: Method| {
                o.forecasts
                    .iter()
                    .find(|f| f.method == m)
                    .map_or("-".to_string(), |f| format!("{:.1}", f.expected))
            };
            let _ = writeln!(
                out,
                "  {:<10} {:>7} {:>9} {:>9} {:>9}",
                o.origin.format("%Y-%m-%d"),
                o.actual,
                cell(Method::Naive),
                cell(Method::Afr),
                cell(Method::Weibull)
            );
        }
        let _ = writeln!(
            out,
            "  {:<10} {:>7} {:>9} {:>9} {:>9}",
            "method", "origins", "MAE", "MASE", "coverage"
        );
        for s in &g.scores {
            let _ = writeln!(
                out,
                "  {:<10} {:>7} {:>9.2} {:>9} {:>9.2}",
                s.method.as_str(),
                s.origins,
                s.mae,
                s.mase.map_or("-".to_string(), |m| format!("{m:.2}")),
                s.coverage
            );
        }
        let _ = writeln!(
            out,
            "  next {} days: {:.1} expected ({}..{}), {} spares; {}: {}",
            a.horizon_days,
            g.expected,
            g.lower,
            g.upper,
            g.spares,
            g.method.as_str(),
            g.reason
        );
    }
    out
}
