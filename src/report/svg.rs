//! Small server-side SVG charts: pure functions from numbers to markup, so the report renders
//! offline (no scripts, no fonts, no CDN) and the same pictures go into a mail, a wiki or a browser.
//!
//! Every chart has a title, axis labels with units, a legend when it has several series, values on
//! hover (`<title>`) or as labels, and a plain "No data in this window" message instead of an empty
//! frame. All text is escaped. Colours are Okabe-Ito (colour-blind safe).

use std::fmt::Write;

/// Okabe-Ito palette (Okabe & Ito 2008), safe for the common colour-vision deficiencies.
pub mod palette {
    pub const ORANGE: &str = "#E69F00";
    pub const SKY_BLUE: &str = "#56B4E9";
    pub const BLUISH_GREEN: &str = "#009E73";
    pub const YELLOW: &str = "#F0E442";
    pub const BLUE: &str = "#0072B2";
    pub const VERMILLION: &str = "#D55E00";
    pub const REDDISH_PURPLE: &str = "#CC79A7";
    pub const BLACK: &str = "#000000";
    pub const GREY: &str = "#8C8C8C";
}

/// The message drawn instead of an empty frame.
pub const NO_DATA: &str = "No data in this window";

const FONT: &str = "font-family=\"system-ui,-apple-system,'Segoe UI',Roboto,sans-serif\"";
const WIDTH: f64 = 760.0;

/// Escapes text for HTML and SVG content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// What every chart needs: a stable id (`data-chart`), a title and the axis labels with units.
pub struct Frame<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: &'static str,
}

/// One bar (or stack, or group): a label and one value per series, with an optional hover note per
/// value (e.g. the count behind a rate).
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub values: Vec<f64>,
    pub notes: Vec<String>,
}

/// A horizontal bar with an optional interval; `value` None draws only the interval (e.g. a group
/// without failures: MTBF above its lower bound), `high` None means the interval is unbounded.
#[derive(Debug, Clone)]
pub struct Row {
    pub label: String,
    pub value: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// Text shown right of the plot (the value with its unit and interval).
    pub text: String,
}

/// A marked reference value on a horizontal-bar chart (e.g. the fleet median).
pub struct Marker<'a> {
    pub label: &'a str,
    pub value: f64,
}

/// A nice axis: (maximum, step) with steps of 1, 2 or 5 x 10^k and at most six intervals.
pub fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let raw = max / 6.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude);
    let top = (max / step - 1e-9).ceil().max(1.0) * step;
    (top, step)
}

/// Tick labels: integers plainly, fractions with at most 3 significant decimals.
pub fn tick_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        return group_thousands(v.round() as i64);
    }
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A fixed-precision number for labels: 1 decimal under 100, none above.
pub fn short_number(v: f64) -> String {
    if v.abs() >= 100.0 {
        group_thousands(v.round() as i64)
    } else {
        tick_label((v * 10.0).round() / 10.0)
    }
}

fn text_width(s: &str, px: f64) -> f64 {
    s.chars().count() as f64 * px * 0.58
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max_chars - 1).collect::<String>())
    }
}

fn open(out: &mut String, frame: &Frame, height: f64, summary: &str) {
    let _ = write!(
        out,
        "<svg class=\"chart\" data-chart=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" \
width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-label=\"{aria}\" {FONT} font-size=\"12\">\
<title>{title}</title><desc>{desc}</desc>\
<text class=\"chart-title\" x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"600\" fill=\"#111\">{title}</text>",
        id = escape(frame.id),
        aria = escape(frame.title),
        title = escape(frame.title),
        desc = escape(summary),
    );
}

/// Title and the message, no axes: an empty frame would look like "zero", which it is not.
pub fn no_data(frame: &Frame, message: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"chart nodata\" data-chart=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} 70\" \
width=\"{WIDTH}\" height=\"70\" role=\"img\" aria-label=\"{title}: {msg}\" {FONT} font-size=\"12\">\
<title>{title}: {msg}</title>\
<text class=\"chart-title\" x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"600\" fill=\"#111\">{title}</text>\
<text class=\"nodata-message\" x=\"8\" y=\"50\" font-size=\"14\" fill=\"#444\">{msg}</text></svg>",
        id = escape(frame.id),
        title = escape(frame.title),
        msg = escape(message),
    );
    out
}

/// A legend row under the title; returns nothing for a single unnamed series.
fn legend(out: &mut String, series: &[Series], y: f64) {
    if series.len() < 2 {
        return;
    }
    let mut x = 8.0;
    out.push_str("<g class=\"legend\">");
    for s in series {
        let _ = write!(
            out,
            "<rect x=\"{x}\" y=\"{ry}\" width=\"12\" height=\"12\" fill=\"{c}\"/><text x=\"{tx}\" y=\"{ty}\" fill=\"#222\">{n}</text>",
            ry = y - 10.0,
            c = s.color,
            tx = x + 16.0,
            ty = y,
            n = escape(&s.name)
        );
        x += 16.0 + text_width(&s.name, 12.0) + 18.0;
    }
    out.push_str("</g>");
}

fn all_zero(values: impl IntoIterator<Item = f64>) -> bool {
    values.into_iter().all(|v| !(v.is_finite() && v > 0.0))
}

/// Vertical bars, stacked (one stack per bar, series bottom to top) or grouped side by side.
fn vertical_bars(frame: &Frame, series: &[Series], bars: &[Bar], stacked: bool) -> String {
    if bars.is_empty() || all_zero(bars.iter().flat_map(|b| b.values.iter().copied())) {
        return no_data(frame, NO_DATA);
    }
    let top_margin = if series.len() > 1 { 62.0 } else { 44.0 };
    let right = 16.0;
    // Long labels in narrow slots are turned, and the bottom margin grows to hold them; the left
    // margin grows too when the first turned label would reach past the edge.
    let longest = bars
        .iter()
        .map(|b| text_width(&truncate(&b.label, 28), 12.0))
        .fold(0.0, f64::max);
    let first = bars.first().map_or(0.0, |b| text_width(&truncate(&b.label, 28), 12.0));
    let rotate = longest > (WIDTH - 86.0) / bars.len() as f64 - 6.0;
    let left = if rotate {
        f64::max(70.0, first * 0.82 + 6.0 - (WIDTH - 86.0) / bars.len() as f64 / 2.0)
    } else {
        70.0
    };
    let plot_w = WIDTH - left - right;
    let slot = plot_w / bars.len() as f64;
    let label_room = if rotate { longest * 0.72 + 14.0 } else { 22.0 };
    let plot_h = 240.0;
    let height = top_margin + plot_h + label_room + 30.0;
    let base = top_margin + plot_h;
    let max = bars
        .iter()
        .map(|b| {
            if stacked {
                b.values.iter().sum::<f64>()
            } else {
                b.values.iter().copied().fold(0.0, f64::max)
            }
        })
        .fold(0.0, f64::max);
    let (axis_max, step) = nice_axis(max);
    let y = |v: f64| base - v / axis_max * plot_h;
    let mut out = String::new();
    let summary = bars
        .iter()
        .map(|b| {
            format!(
                "{}: {}",
                b.label,
                b.values
                    .iter()
                    .map(|v| if v.is_finite() { short_number(*v) } else { "n/a".into() })
                    .collect::<Vec<_>>()
                    .join("/")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    open(&mut out, frame, height, &summary);
    legend(&mut out, series, 44.0);
    axes_y(
        &mut out,
        left,
        plot_w,
        axis_max,
        step,
        &y,
        frame.y_label,
        top_margin,
        plot_h,
    );
    for (i, b) in bars.iter().enumerate() {
        let x0 = left + slot * i as f64;
        let bar_w = (slot * 0.7).min(90.0);
        let bx = x0 + (slot - bar_w) / 2.0;
        if stacked {
            let mut acc = 0.0;
            for (k, v) in b.values.iter().enumerate() {
                if !(v.is_finite() && *v > 0.0) {
                    continue;
                }
                let (y1, y0) = (y(acc + v), y(acc));
                let name = series.get(k).map_or("", |s| s.name.as_str());
                let note = b.notes.get(k).map(|n| format!(" ({n})")).unwrap_or_default();
                let _ = write!(
                    out,
                    "<rect x=\"{bx:.1}\" y=\"{y1:.1}\" width=\"{bar_w:.1}\" height=\"{h:.1}\" fill=\"{c}\"><title>{t}</title></rect>",
                    h = (y0 - y1).max(0.5),
                    c = series.get(k).map_or(palette::GREY, |s| s.color),
                    t = escape(&format!("{}, {name}: {}{note}", b.label, short_number(*v))),
                );
                acc += v;
            }
            let _ = write!(
                out,
                "<text class=\"value\" x=\"{cx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" fill=\"#111\">{v}</text>",
                cx = bx + bar_w / 2.0,
                ty = y(acc) - 4.0,
                v = short_number(acc)
            );
        } else {
            let n = b.values.len().max(1) as f64;
            let w = bar_w / n;
            for (k, raw) in b.values.iter().enumerate() {
                // A value that is not a number is one the bar does not have (n/a), not a zero.
                let missing = !raw.is_finite();
                let v = if missing { 0.0 } else { raw.max(0.0) };
                let bxk = bx + w * k as f64;
                let name = series.get(k).map_or("", |s| s.name.as_str());
                let note = b.notes.get(k).map(|n| format!(" ({n})")).unwrap_or_default();
                let _ = write!(
                    out,
                    "<rect x=\"{bxk:.1}\" y=\"{y1:.1}\" width=\"{ww:.1}\" height=\"{h:.1}\" fill=\"{c}\"><title>{t}</title></rect>\
<text class=\"value\" x=\"{cx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" font-size=\"11\" fill=\"#111\">{lv}</text>",
                    y1 = y(v),
                    ww = (w - 2.0).max(1.0),
                    h = (base - y(v)).max(0.0),
                    c = series.get(k).map_or(palette::GREY, |s| s.color),
                    t = escape(&format!(
                        "{}, {name}: {}{note}",
                        b.label,
                        if missing { "n/a".into() } else { short_number(v) }
                    )),
                    cx = bxk + w / 2.0 - 1.0,
                    ty = y(v) - 4.0,
                    lv = if missing { "n/a".into() } else { short_number(v) },
                );
            }
        }
        let label = escape(&truncate(&b.label, 28));
        let lx = x0 + slot / 2.0;
        if rotate {
            let _ = write!(
                out,
                "<text class=\"x-label\" x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" transform=\"rotate(-35 {lx:.1} {ly:.1})\" fill=\"#222\">{label}<title>{full}</title></text>",
                ly = base + 14.0,
                full = escape(&b.label)
            );
        } else {
            let _ = write!(
                out,
                "<text class=\"x-label\" x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\" fill=\"#222\">{label}</text>",
                ly = base + 16.0
            );
        }
    }
    let _ = write!(
        out,
        "<text class=\"axis-title\" x=\"{cx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" fill=\"#333\">{t}</text></svg>",
        cx = left + plot_w / 2.0,
        ty = height - 8.0,
        t = escape(frame.x_label)
    );
    out
}

#[allow(clippy::too_many_arguments)]
fn axes_y(
    out: &mut String,
    left: f64,
    plot_w: f64,
    axis_max: f64,
    step: f64,
    y: &dyn Fn(f64) -> f64,
    label: &str,
    top: f64,
    plot_h: f64,
) {
    out.push_str("<g class=\"y-axis\">");
    let mut v = 0.0;
    while v <= axis_max + step * 1e-6 {
        let _ = write!(
            out,
            "<line x1=\"{left}\" x2=\"{x2}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"{c}\" stroke-width=\"1\"/>\
<text x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\" fill=\"#333\">{l}</text>",
            x2 = left + plot_w,
            yy = y(v),
            c = if v == 0.0 { "#555" } else { "#e3e3e3" },
            tx = left - 6.0,
            ty = y(v) + 4.0,
            l = tick_label(v)
        );
        v += step;
    }
    let cy = top + plot_h / 2.0;
    let _ = write!(
        out,
        "<text class=\"axis-title\" x=\"16\" y=\"{cy:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {cy:.1})\" fill=\"#333\">{}</text></g>",
        escape(label)
    );
}

/// Stacked vertical bars: each bar's series values sum to its total, shown above it.
pub fn stacked_bars(frame: &Frame, series: &[Series], bars: &[Bar]) -> String {
    vertical_bars(frame, series, bars, true)
}

/// Grouped vertical bars (one bar per series side by side), each with its value as a label.
pub fn grouped_bars(frame: &Frame, series: &[Series], bars: &[Bar]) -> String {
    vertical_bars(frame, series, bars, false)
}

/// Horizontal bars with optional interval whiskers and a marked reference value; the text column on
/// the right carries each row's value so labels never sit on the whiskers. Intervals beyond the axis
/// are clipped and drawn with an arrow.
pub fn horizontal_bars(frame: &Frame, rows: &[Row], color: &'static str, marker: Option<Marker>) -> String {
    if rows.is_empty() || rows.iter().all(|r| r.value.is_none() && r.low.is_none()) {
        return no_data(frame, NO_DATA);
    }
    let label_w = rows
        .iter()
        .map(|r| text_width(&truncate(&r.label, 34), 12.0))
        .fold(60.0, f64::max)
        + 12.0;
    let text_w = rows.iter().map(|r| text_width(&r.text, 12.0)).fold(40.0, f64::max) + 12.0;
    let left = label_w + 8.0;
    let plot_w = WIDTH - left - text_w - 8.0;
    let top = if marker.is_some() { 58.0 } else { 40.0 };
    let row_h = 20.0;
    let plot_h = row_h * rows.len() as f64;
    let height = top + plot_h + 56.0;
    // The axis covers the values and the finite intervals, but a wide interval of a rare event may
    // not squash every bar: it is clipped at twice the largest value.
    let max_value = rows
        .iter()
        .filter_map(|r| r.value)
        .chain(marker.as_ref().map(|m| m.value))
        .fold(0.0, f64::max);
    let max_bound = rows.iter().flat_map(|r| [r.low, r.high]).flatten().fold(0.0, f64::max);
    let cap = if max_value > 0.0 {
        max_bound.min(2.0 * max_value)
    } else {
        max_bound
    };
    let (axis_max, step) = nice_axis(max_value.max(cap));
    let x = |v: f64| left + (v.min(axis_max) / axis_max) * plot_w;
    let mut out = String::new();
    let summary = rows
        .iter()
        .map(|r| format!("{}: {}", r.label, r.text))
        .collect::<Vec<_>>()
        .join("; ");
    open(&mut out, frame, height, &summary);
    let base = top + plot_h;
    out.push_str("<g class=\"x-axis\">");
    let mut v = 0.0;
    while v <= axis_max + step * 1e-6 {
        let _ = write!(
            out,
            "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{top}\" y2=\"{base}\" stroke=\"{c}\"/><text x=\"{xx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#333\">{l}</text>",
            xx = x(v),
            c = if v == 0.0 { "#555" } else { "#e3e3e3" },
            ty = base + 16.0,
            l = tick_label(v)
        );
        v += step;
    }
    let _ = write!(
        out,
        "<text class=\"axis-title\" x=\"{cx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#333\">{t}</text></g>",
        cx = left + plot_w / 2.0,
        ty = base + 36.0,
        t = escape(frame.x_label)
    );
    let _ = write!(
        out,
        "<text class=\"axis-title\" x=\"8\" y=\"{ty}\" fill=\"#333\">{t}</text>",
        ty = top - 6.0,
        t = escape(frame.y_label)
    );
    for (i, r) in rows.iter().enumerate() {
        let cy = top + row_h * i as f64 + row_h / 2.0;
        let hover = escape(&format!("{}: {}", r.label, r.text));
        let _ = write!(
            out,
            "<g class=\"row\"><title>{hover}</title><text class=\"y-label\" x=\"{lx:.1}\" y=\"{ty:.1}\" text-anchor=\"end\" fill=\"#222\">{l}</text>",
            lx = left - 6.0,
            ty = cy + 4.0,
            l = escape(&truncate(&r.label, 34))
        );
        if let Some(v) = r.value {
            let _ = write!(
                out,
                "<rect x=\"{left}\" y=\"{ry:.1}\" width=\"{w:.1}\" height=\"{h}\" fill=\"{color}\"/>",
                ry = cy - row_h * 0.35,
                w = (x(v) - left).max(0.5),
                h = row_h * 0.7
            );
        }
        if let Some(lo) = r.low {
            let clipped = r.high.is_none_or(|h| h > axis_max);
            let x_hi = r.high.map_or(x(axis_max), x);
            let _ = write!(
                out,
                "<line class=\"whisker\" x1=\"{x1:.1}\" x2=\"{x2:.1}\" y1=\"{cy:.1}\" y2=\"{cy:.1}\" stroke=\"#111\" stroke-width=\"1.5\"/>\
<line class=\"whisker-cap\" x1=\"{x1:.1}\" x2=\"{x1:.1}\" y1=\"{a:.1}\" y2=\"{b:.1}\" stroke=\"#111\" stroke-width=\"1.5\"/>",
                x1 = x(lo),
                x2 = x_hi,
                a = cy - 5.0,
                b = cy + 5.0
            );
            if clipped {
                let _ = write!(
                    out,
                    "<path class=\"whisker-open\" d=\"M{x:.1} {cy:.1} l-6 -4 v8 z\" fill=\"#111\"/>",
                    x = x_hi
                );
            } else {
                let _ = write!(
                    out,
                    "<line class=\"whisker-cap\" x1=\"{x2:.1}\" x2=\"{x2:.1}\" y1=\"{a:.1}\" y2=\"{b:.1}\" stroke=\"#111\" stroke-width=\"1.5\"/>",
                    x2 = x_hi,
                    a = cy - 5.0,
                    b = cy + 5.0
                );
            }
        }
        let _ = write!(
            out,
            "<text class=\"value\" x=\"{tx:.1}\" y=\"{ty:.1}\" fill=\"#111\">{t}</text></g>",
            tx = left + plot_w + 10.0,
            ty = cy + 4.0,
            t = escape(&r.text)
        );
    }
    if let Some(m) = marker {
        let mx = x(m.value);
        let _ = write!(
            out,
            "<g class=\"marker\"><line x1=\"{mx:.1}\" x2=\"{mx:.1}\" y1=\"{y1}\" y2=\"{base}\" stroke=\"{c}\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\
<text x=\"{mx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"{c}\" font-weight=\"600\">{l}</text><title>{l}</title></g>",
            y1 = top - 4.0,
            c = palette::VERMILLION,
            ty = top - 8.0 - 14.0,
            l = escape(&format!("{}: {}", m.label, short_number(m.value)))
        );
    }
    out.push_str("</svg>");
    out
}

/// One point in time with one value per series.
#[derive(Debug, Clone)]
pub struct TimePoint {
    pub label: String,
    pub values: Vec<f64>,
}

/// Stacked areas over time (series bottom to top) with the total as a line; each time slot carries
/// its values in a hover title.
pub fn stacked_area(frame: &Frame, series: &[Series], points: &[TimePoint]) -> String {
    if points.is_empty() || all_zero(points.iter().flat_map(|p| p.values.iter().copied())) {
        return no_data(frame, NO_DATA);
    }
    let (left, right, top) = (70.0, 16.0, 62.0);
    let plot_w = WIDTH - left - right;
    let plot_h = 220.0;
    let base = top + plot_h;
    let height = base + 58.0;
    let max = points.iter().map(|p| p.values.iter().sum::<f64>()).fold(0.0, f64::max);
    let (axis_max, step) = nice_axis(max);
    let y = |v: f64| base - v / axis_max * plot_h;
    let n = points.len();
    let slot = plot_w / n as f64;
    let x = |i: usize| left + slot * (i as f64 + 0.5);
    let mut out = String::new();
    let summary = format!("{} points from {} to {}", n, points[0].label, points[n - 1].label);
    open(&mut out, frame, height, &summary);
    legend(&mut out, series, 44.0);
    axes_y(&mut out, left, plot_w, axis_max, step, &y, frame.y_label, top, plot_h);
    let mut lower = vec![0.0; n];
    for (k, s) in series.iter().enumerate() {
        let upper: Vec<f64> = (0..n)
            .map(|i| lower[i] + points[i].values.get(k).copied().unwrap_or(0.0).max(0.0))
            .collect();
        if upper.iter().zip(&lower).all(|(u, l)| u == l) {
            continue;
        }
        let mut d = String::new();
        for (i, u) in upper.iter().enumerate() {
            let _ = write!(d, "{}{:.1} {:.1} ", if i == 0 { "M" } else { "L" }, x(i), y(*u));
        }
        for i in (0..n).rev() {
            let _ = write!(d, "L{:.1} {:.1} ", x(i), y(lower[i]));
        }
        let _ = write!(
            out,
            "<path class=\"area\" d=\"{}Z\" fill=\"{}\" fill-opacity=\"0.85\" stroke=\"{}\" stroke-width=\"1\"><title>{}</title></path>",
            d,
            s.color,
            s.color,
            escape(&s.name)
        );
        lower = upper;
    }
    let mut d = String::new();
    for (i, l) in lower.iter().enumerate() {
        let _ = write!(d, "{}{:.1} {:.1} ", if i == 0 { "M" } else { "L" }, x(i), y(*l));
    }
    let _ = write!(
        out,
        "<path class=\"total\" d=\"{d}\" fill=\"none\" stroke=\"#111\" stroke-width=\"1.5\"/>"
    );
    // At most ~8 date labels, evenly spaced, so they never overlap.
    let every = n.div_ceil(8).max(1);
    for (i, p) in points.iter().enumerate() {
        let detail = series
            .iter()
            .zip(&p.values)
            .map(|(s, v)| format!("{} {}", s.name, short_number(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            out,
            "<rect class=\"slot\" x=\"{sx:.1}\" y=\"{top}\" width=\"{slot:.1}\" height=\"{plot_h}\" fill=\"transparent\"><title>{t}</title></rect>",
            sx = left + slot * i as f64,
            t = escape(&format!("{}: total {}; {detail}", p.label, short_number(lower[i])))
        );
        if i % every == 0 {
            let _ = write!(
                out,
                "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{base}\" y2=\"{b2}\" stroke=\"#555\"/><text class=\"x-label\" x=\"{xx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#222\">{l}</text>",
                xx = x(i),
                b2 = base + 4.0,
                ty = base + 17.0,
                l = escape(&p.label)
            );
        }
    }
    let _ = write!(
        out,
        "<text class=\"axis-title\" x=\"{cx:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\" fill=\"#333\">{t}</text></svg>",
        cx = left + plot_w / 2.0,
        ty = height - 12.0,
        t = escape(frame.x_label)
    );
    out
}

/// One step of a survival curve: from `time` on the estimate is `value`, with the band
/// [`lower`, `upper`] (the estimate is 1 with a band of zero width before the first step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurveStep {
    pub time: f64,
    pub value: f64,
    pub lower: f64,
    pub upper: f64,
}

/// One group's survival curve, with the number at risk at each tick of the [`AgeAxis`].
#[derive(Debug, Clone)]
pub struct Curve {
    pub name: String,
    pub color: &'static str,
    pub steps: Vec<CurveStep>,
    /// At risk at each of the axis' ticks, in order.
    pub at_risk: Vec<u64>,
    /// Hover text (e.g. the median with its interval).
    pub note: String,
}

/// The time axis of a survival chart, in days: years (nice steps of 1, 2 or 5) once the longest
/// curve reaches two years, else nice steps of days.
#[derive(Debug, Clone, PartialEq)]
pub struct AgeAxis {
    /// The axis end in days.
    pub max_days: f64,
    /// Tick positions in days, from 0.
    pub ticks: Vec<f64>,
    /// Whether ticks are labelled in years (else days).
    pub years: bool,
}

impl AgeAxis {
    pub fn for_max(max_days: f64) -> AgeAxis {
        let years = max_days.is_finite() && max_days >= 2.0 * 365.25;
        let unit = if years { 365.25 } else { 1.0 };
        let (top, step) = nice_axis(max_days / unit);
        let n = (top / step).round() as usize;
        AgeAxis {
            max_days: top * unit,
            ticks: (0..=n).map(|i| i as f64 * step * unit).collect(),
            years,
        }
    }

    pub fn unit(&self) -> &'static str {
        if self.years { "years" } else { "days" }
    }

    pub fn label(&self, days: f64) -> String {
        tick_label(if self.years { days / 365.25 } else { days })
    }
}

/// The SVG paths of a survival curve as (step line, closed band) in chart coordinates: the line
/// starts at (0, 1), runs flat to each step's time and drops (or stays) to its value, and ends at
/// the last step; the band follows the upper bounds forward and the lower bounds back the same way.
pub fn step_paths(steps: &[CurveStep], x: &dyn Fn(f64) -> f64, y: &dyn Fn(f64) -> f64) -> (String, String) {
    let mut line = format!("M{:.1} {:.1}", x(0.0), y(1.0));
    let mut band = line.clone();
    for st in steps {
        let _ = write!(line, " H{:.1} V{:.1}", x(st.time), y(st.value));
        let _ = write!(band, " H{:.1} V{:.1}", x(st.time), y(st.upper));
    }
    if let Some(last) = steps.last() {
        let _ = write!(band, " V{:.1}", y(last.lower));
    }
    for i in (0..steps.len()).rev() {
        let (before, from) = if i == 0 {
            (1.0, 0.0)
        } else {
            (steps[i - 1].lower, steps[i - 1].time)
        };
        let _ = write!(band, " V{:.1} H{:.1}", y(before), x(from));
    }
    band.push_str(" Z");
    (line, band)
}

/// Survival curves as step lines with shaded bands, one colour per group, survival 0..1 up the
/// side and installed age along the bottom, with the number at risk per group under each tick.
pub fn survival_curves(frame: &Frame, axis: &AgeAxis, curves: &[Curve]) -> String {
    if curves.iter().all(|c| c.steps.is_empty()) {
        return no_data(frame, NO_DATA);
    }
    let (left, right, top) = (110.0, 16.0, 62.0);
    let plot_w = WIDTH - left - right;
    let plot_h = 220.0;
    let base = top + plot_h;
    let risk_top = base + 62.0;
    let height = risk_top + 18.0 * curves.len() as f64 + 10.0;
    let x = |t: f64| left + (t.clamp(0.0, axis.max_days) / axis.max_days) * plot_w;
    let y = |s: f64| base - s.clamp(0.0, 1.0) * plot_h;
    let mut out = String::new();
    let summary = curves
        .iter()
        .map(|c| format!("{}: {}", c.name, c.note))
        .collect::<Vec<_>>()
        .join("; ");
    open(&mut out, frame, height, &summary);
    let series: Vec<Series> = curves
        .iter()
        .map(|c| Series {
            name: c.name.clone(),
            color: c.color,
        })
        .collect();
    legend(&mut out, &series, 44.0);
    axes_y(&mut out, left, plot_w, 1.0, 0.2, &y, frame.y_label, top, plot_h);
    out.push_str("<g class=\"x-axis\">");
    for t in &axis.ticks {
        let _ = write!(
            out,
            "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{base}\" y2=\"{b2}\" stroke=\"#555\"/><text class=\"x-label\" x=\"{xx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#222\">{l}</text>",
            xx = x(*t),
            b2 = base + 4.0,
            ty = base + 17.0,
            l = axis.label(*t)
        );
    }
    let _ = write!(
        out,
        "<text class=\"axis-title\" x=\"{cx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#333\">{t}</text></g>",
        cx = left + plot_w / 2.0,
        ty = base + 34.0,
        t = escape(&format!("{} ({})", frame.x_label, axis.unit()))
    );
    for c in curves.iter().filter(|c| !c.steps.is_empty()) {
        let (line, band) = step_paths(&c.steps, &x, &y);
        let hover = escape(&format!("{}: {}", c.name, c.note));
        let _ = write!(
            out,
            "<g class=\"curve\"><title>{hover}</title><path class=\"band\" d=\"{band}\" fill=\"{col}\" fill-opacity=\"0.18\" stroke=\"none\"/>\
<path class=\"step\" d=\"{line}\" fill=\"none\" stroke=\"{col}\" stroke-width=\"2\"/></g>",
            col = c.color
        );
    }
    let _ = write!(
        out,
        "<g class=\"at-risk\"><text x=\"8\" y=\"{ty}\" font-weight=\"600\" fill=\"#333\">Number at risk</text>",
        ty = risk_top - 4.0
    );
    for (k, c) in curves.iter().enumerate() {
        let ty = risk_top + 14.0 + 18.0 * k as f64;
        let _ = write!(
            out,
            "<text x=\"8\" y=\"{ty}\" fill=\"{col}\" font-weight=\"600\">{n}</text>",
            col = c.color,
            n = escape(&truncate(&c.name, 16))
        );
        for (t, n) in axis.ticks.iter().zip(&c.at_risk) {
            let _ = write!(
                out,
                "<text class=\"at-risk-count\" x=\"{xx:.1}\" y=\"{ty}\" text-anchor=\"middle\" fill=\"#222\">{}</text>",
                group_thousands(*n as i64),
                xx = x(*t)
            );
        }
    }
    out.push_str("</g></svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: &'static str) -> Frame<'static> {
        Frame {
            id,
            title: "Failures <by> \"gen\"",
            x_label: "GPU generation",
            y_label: "failures per 1,000 GPU-days",
        }
    }

    fn series() -> Vec<Series> {
        vec![
            Series {
                name: "hardware".into(),
                color: palette::VERMILLION,
            },
            Series {
                name: "user & co".into(),
                color: palette::BLUE,
            },
        ]
    }

    #[test]
    fn escapes_markup_in_every_text() {
        assert_eq!(
            escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        let bars = vec![Bar {
            label: "<script>alert(1)</script>".into(),
            values: vec![1.0, 2.0],
            notes: vec!["n=<3>".into(), String::new()],
        }];
        let svg = stacked_bars(&frame("mix"), &series(), &bars);
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(svg.contains("Failures &lt;by&gt; &quot;gen&quot;"));
        assert!(svg.contains("user &amp; co"));
        assert!(svg.contains("n=&lt;3&gt;"));
        let rows = vec![Row {
            label: "c/<b>".into(),
            value: Some(1.0),
            low: Some(0.5),
            high: Some(2.0),
            text: "1 h".into(),
        }];
        assert!(!horizontal_bars(&frame("mtbf"), &rows, palette::BLUE, None).contains("<b>"));
    }

    #[test]
    fn empty_data_says_so_instead_of_drawing_a_frame() {
        for svg in [
            stacked_bars(&frame("a"), &series(), &[]),
            grouped_bars(
                &frame("b"),
                &series(),
                &[Bar {
                    label: "x".into(),
                    values: vec![0.0, 0.0],
                    notes: vec![],
                }],
            ),
            horizontal_bars(&frame("c"), &[], palette::BLUE, None),
            stacked_area(
                &frame("d"),
                &series(),
                &[TimePoint {
                    label: "d1".into(),
                    values: vec![0.0, 0.0],
                }],
            ),
        ] {
            assert!(svg.contains(NO_DATA), "{svg}");
            assert!(svg.contains("class=\"chart nodata\""));
            assert!(svg.contains("Failures &lt;by&gt;"), "the title stays");
            assert!(
                !svg.contains("<line") && !svg.contains("<rect") && !svg.contains("<path"),
                "no frame: {svg}"
            );
        }
    }

    #[test]
    fn axes_are_nice_and_cover_the_data() {
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(10.0), (10.0, 2.0));
        assert_eq!(nice_axis(37.0), (40.0, 10.0));
        assert_eq!(nice_axis(101.0), (120.0, 20.0));
        assert_eq!(nice_axis(0.42), (0.5, 0.1));
        assert_eq!(nice_axis(7952.0), (8000.0, 2000.0));
        let (max, step) = nice_axis(3.3);
        assert!(max >= 3.3 && (max / step).round() <= 6.0);
        assert_eq!(tick_label(2000.0), "2,000");
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(short_number(35.714286), "35.7");
        assert_eq!(short_number(1234.5), "1,235");
    }

    #[test]
    fn stacked_bar_heights_are_proportional_and_totals_labelled() {
        // Axis 0..40 (37 -> 40) over 240 px: 6 px per unit; the stack of 30 + 7 is 222 px tall.
        let bars = vec![Bar {
            label: "hopper".into(),
            values: vec![30.0, 7.0],
            notes: vec!["12 failures".into(), "3 failures".into()],
        }];
        let svg = stacked_bars(&frame("mix"), &series(), &bars);
        assert!(svg.contains("height=\"180.0\""), "30 units = 180 px: {svg}");
        assert!(svg.contains("height=\"42.0\""), "7 units = 42 px");
        assert!(svg.contains(">37<"), "total on top");
        assert!(svg.contains("<title>hopper, hardware: 30 (12 failures)</title>"));
        assert!(svg.contains("class=\"legend\""));
        assert!(
            svg.contains("failures per 1,000 GPU-days") && svg.contains("GPU generation"),
            "axis titles"
        );
    }

    #[test]
    fn whiskers_span_the_interval_and_open_ones_are_clipped() {
        // Values 10 and 20: axis 0..20 (cap at 2 x 20 = 40 -> axis 40, step 10).
        let rows = vec![
            Row {
                label: "g1".into(),
                value: Some(10.0),
                low: Some(5.0),
                high: Some(30.0),
                text: "10 h".into(),
            },
            Row {
                label: "g2".into(),
                value: Some(20.0),
                low: Some(8.0),
                high: Some(1000.0),
                text: "20 h".into(),
            },
            Row {
                label: "g3".into(),
                value: None,
                low: Some(12.0),
                high: None,
                text: "no failures".into(),
            },
        ];
        let svg = horizontal_bars(
            &frame("mtbf"),
            &rows,
            palette::BLUE,
            Some(Marker {
                label: "fleet median",
                value: 15.0,
            }),
        );
        assert_eq!(svg.matches("class=\"whisker\"").count(), 3);
        // g2's upper bound (1000) and g3's infinite one are clipped at the axis end with an arrow.
        assert_eq!(svg.matches("class=\"whisker-open\"").count(), 2);
        assert_eq!(svg.matches("<rect").count(), 2, "g3 has no bar, only its interval");
        assert!(svg.contains("fleet median: 15"));
        assert!(svg.contains(">40<"), "axis ends at 40");
        assert_eq!(
            svg.matches("class=\"whisker-cap\"").count(),
            3 + 1,
            "lower caps for all, an upper cap for g1 only"
        );
    }

    #[test]
    fn areas_stack_and_date_labels_thin_out() {
        let points: Vec<TimePoint> = (0..30)
            .map(|i| TimePoint {
                label: format!("d{i}"),
                values: vec![1.0, f64::from(i % 3)],
            })
            .collect();
        let svg = stacked_area(&frame("timeline"), &series(), &points);
        assert_eq!(svg.matches("class=\"area\"").count(), 2);
        assert_eq!(svg.matches("class=\"slot\"").count(), 30, "a hover slot per day");
        assert!(svg.matches("class=\"x-label\"").count() <= 8);
        assert!(svg.contains("<title>d2: total 3; hardware 1, user &amp; co 2</title>"));
    }

    fn steps() -> Vec<CurveStep> {
        vec![
            CurveStep {
                time: 10.0,
                value: 0.5,
                lower: 0.2,
                upper: 0.8,
            },
            CurveStep {
                time: 30.0,
                value: 0.25,
                lower: 0.05,
                upper: 0.6,
            },
        ]
    }

    #[test]
    fn survival_steps_and_bands_follow_the_estimate() {
        // x = 2 px per day, y = 100 px for survival 1 down to 0.
        let (line, band) = step_paths(&steps(), &|t| 2.0 * t, &|s| 100.0 - 100.0 * s);
        // Flat at 1 until day 10 (x 20), drops to 0.5 (y 50); flat until day 30 (x 60), drops to 0.25.
        assert_eq!(line, "M0.0 0.0 H20.0 V50.0 H60.0 V75.0");
        // Upper bounds forward (0.8 from day 10, 0.6 from day 30), then the lower bounds back:
        // 0.05 at day 30 (y 95), 0.2 on [10, 30) (y 80), 1 before day 10.
        assert_eq!(band, "M0.0 0.0 H20.0 V20.0 H60.0 V40.0 V95.0 V80.0 H20.0 V0.0 H0.0 Z");
    }

    #[test]
    fn age_axis_in_days_then_whole_years() {
        let days = AgeAxis::for_max(400.0 * 0.99);
        assert_eq!(days.ticks, vec![0.0, 100.0, 200.0, 300.0, 400.0]);
        assert!(!days.years);
        assert_eq!(days.label(300.0), "300");
        let years = AgeAxis::for_max(4.2 * 365.25);
        assert!(years.years);
        assert_eq!(years.ticks.len(), 6, "0 to 5 years");
        assert_eq!(years.max_days, 5.0 * 365.25);
        assert_eq!(years.label(2.0 * 365.25), "2");
    }

    #[test]
    fn survival_chart_draws_a_band_and_a_step_per_group_and_the_numbers_at_risk() {
        let axis = AgeAxis::for_max(400.0);
        let curve = |name: &str, color, at_risk: Vec<u64>| Curve {
            name: name.into(),
            color,
            steps: steps(),
            at_risk,
            note: "median <10> days".into(),
        };
        let svg = survival_curves(
            &frame("survival"),
            &axis,
            &[
                curve("ampere", palette::BLUE, vec![2, 1, 1, 0, 0]),
                curve("hopper", palette::VERMILLION, vec![4, 3, 1, 1, 0]),
            ],
        );
        assert_eq!(svg.matches("class=\"band\"").count(), 2);
        assert_eq!(svg.matches("class=\"step\"").count(), 2);
        assert_eq!(
            svg.matches("class=\"at-risk-count\"").count(),
            10,
            "five ticks per group"
        );
        assert!(svg.contains("<title>hopper: median &lt;10&gt; days</title>"));
        assert!(svg.contains("GPU generation (days)"), "the unit follows the axis");
        assert!(svg.contains("Number at risk"));
        // Plot 110..744 px wide over 400 days: day 10 at x 125.9; survival 1 at y 62, 0 at 282.
        assert!(svg.contains("d=\"M110.0 62.0 H125.8 V172.0"), "{svg}");
        let empty = Curve {
            steps: vec![],
            ..curve("x", palette::BLUE, vec![])
        };
        assert!(survival_curves(&frame("survival"), &axis, &[empty]).contains(NO_DATA));
    }
}
