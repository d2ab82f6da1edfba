//! A benchmark's results: an aligned table, one JSON document, an SVG plot.

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use serde_json::Value;

use super::Opts;

/// An axis label: three significant digits, with k/M/G for large values.
fn compact(v: f64) -> String {
    let (x, unit) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let digits = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else if x.abs() >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{x:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{unit}")
}

/// A column of the table: JSON key, header, decimals.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub key: &'static str,
    pub header: &'static str,
    pub decimals: usize,
}

/// The JSON document users script against:
/// `{"benchmark", "transport", "cores", "config", "results": [{"size", ...}]}`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub benchmark: String,
    pub transport: String,
    pub cores: usize,
    pub config: Value,
    /// One JSON object per message size.
    pub results: Vec<Value>,
    #[serde(skip)]
    pub columns: Vec<Column>,
    /// The rows' key (first column, plots' x axis) and its axis label.
    #[serde(skip)]
    pub x: (&'static str, &'static str),
}

impl Column {
    pub const fn new(key: &'static str, header: &'static str, decimals: usize) -> Column {
        Column {
            key,
            header,
            decimals,
        }
    }
}

impl Report {
    /// The report of `benchmark` run with `opts` on this machine.
    pub fn new(
        benchmark: &str,
        opts: &Opts,
        config: Value,
        results: Vec<Value>,
        columns: Vec<Column>,
    ) -> Report {
        Report {
            benchmark: benchmark.into(),
            transport: opts.transport.clone(),
            cores: crate::clock::cores(),
            config,
            results,
            columns,
            x: ("size", "message size (bytes)"),
        }
    }

    /// A report of the network model (`--sim`), not of a transport.
    pub fn modelled(self) -> Report {
        Report {
            transport: "model".into(),
            ..self
        }
    }

    /// Rows keyed by `key` (labelled `label` on plots) instead of size.
    pub fn keyed_by(self, key: &'static str, label: &'static str) -> Report {
        Report {
            x: (key, label),
            ..self
        }
    }

    /// The rows, as the JSON document's `results` holds them.
    pub fn rows(&self) -> &[Value] {
        &self.results
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serializable")
    }

    /// The aligned table, OSU style: a comment header, then one row per size.
    pub fn table(&self) -> String {
        let mut out = format!(
            "# rmx {} — transport {}, {} cores\n",
            self.benchmark, self.transport, self.cores
        );
        let cell = |row: &Value, c: &Column| match &row[c.key] {
            Value::Number(n) => format!("{:.*}", c.decimals, n.as_f64().unwrap_or(0.0)),
            Value::Null => "-".into(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let width = |c: &Column| {
            let widest = self.results.iter().map(|r| cell(r, c).len()).max();
            c.header.len().max(12).max(widest.unwrap_or(0))
        };
        let key = |row: &Value| match &row[self.x.0] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let first = self
            .results
            .iter()
            .map(|r| key(r).len())
            .max()
            .unwrap_or(0)
            .max(10);
        out.push_str(&format!("{:<first$}", format!("# {}", self.x.0)));
        for c in &self.columns {
            out.push_str(&format!("{:>w$}", c.header, w = width(c) + 2));
        }
        out.push('\n');
        for row in &self.results {
            out.push_str(&format!("{:<first$}", key(row)));
            for c in &self.columns {
                out.push_str(&format!("{:>w$}", cell(row, c), w = width(c) + 2));
            }
            out.push('\n');
        }
        out
    }

    /// One row per size holding `value` under the name of each row's `group`
    /// (a string field), and those names in order of first appearance: the
    /// shape [`svg`](Self::svg) plots one curve per name from.
    pub fn pivot(&self, group: &str, value: &str) -> (Report, Vec<String>) {
        let mut names: Vec<String> = Vec::new();
        let mut rows: Vec<Value> = Vec::new();
        for r in &self.results {
            let name = r[group].as_str().unwrap_or_default().to_string();
            if !names.contains(&name) {
                names.push(name.clone());
            }
            let key = self.x.0;
            match rows.iter_mut().find(|x| x[key] == r[key]) {
                Some(x) => x[name.as_str()] = r[value].clone(),
                None => {
                    let mut x = serde_json::json!({ key: r[key] });
                    x[name.as_str()] = r[value].clone();
                    rows.push(x);
                }
            }
        }
        let pivoted = Report {
            results: rows,
            ..self.clone()
        };
        (pivoted, names)
    }

    /// Plots `value` against group size (log-log), one curve per `group`
    /// (a string field), for the rows `keep` selects: the collectives' and
    /// the fence designs' scaling.
    pub fn svg_by_ranks(
        &self,
        path: &std::path::Path,
        group: &str,
        value: &str,
        keep: impl Fn(&Value) -> bool,
        y_label: &str,
    ) -> Result<(), String> {
        let view = Report {
            results: self.results.iter().filter(|r| keep(r)).cloned().collect(),
            ..self.clone()
        }
        .keyed_by("ranks", "ranks");
        let (curves, names) = view.pivot(group, value);
        let series: Vec<(&str, &str)> = names.iter().map(|l| (l.as_str(), l.as_str())).collect();
        curves.svg(path, &series, y_label)
    }

    /// Plots the `series` keys against message size (log-log) into an SVG file.
    pub fn svg(
        &self,
        path: &std::path::Path,
        series: &[(&str, &str)],
        y_label: &str,
    ) -> Result<(), String> {
        self.plot(path, series, y_label, true)
    }

    /// As [`svg`](Self::svg) with a linear y axis (percentages, signed values).
    pub fn svg_linear(
        &self,
        path: &std::path::Path,
        series: &[(&str, &str)],
        y_label: &str,
    ) -> Result<(), String> {
        self.plot(path, series, y_label, false)
    }

    fn plot(
        &self,
        path: &std::path::Path,
        series: &[(&str, &str)],
        y_label: &str,
        log_y: bool,
    ) -> Result<(), String> {
        let points = |key: &str| -> Vec<(f64, f64)> {
            self.results
                .iter()
                .filter_map(|r| Some((r[self.x.0].as_f64()?.max(1.0), r[key].as_f64()?)))
                .filter(|&(_, y)| !log_y || y > 0.0)
                .collect()
        };
        let curves: Vec<(Vec<(f64, f64)>, &str)> =
            series.iter().map(|(k, l)| (points(k), *l)).collect();
        let all: Vec<(f64, f64)> = curves.iter().flat_map(|c| c.0.iter().copied()).collect();
        if all.is_empty() {
            return Ok(());
        }
        let (xmin, xmax) = all
            .iter()
            .fold((f64::MAX, 0f64), |a, p| (a.0.min(p.0), a.1.max(p.0)));
        let (ymin, ymax) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.1), a.1.max(p.1)));
        let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(
                format!(
                    "rmx {} ({}, {} cores)",
                    self.benchmark, self.transport, self.cores
                ),
                ("sans-serif", 22),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70);
        let x = (xmin..xmax * 1.5).log_scale();
        if log_y {
            let chart = builder
                .build_cartesian_2d(x, (ymin * 0.7..ymax * 1.4).log_scale())
                .map_err(|e| e.to_string())?;
            draw(chart, &curves, self.x.1, y_label)?;
        } else {
            let pad = ((ymax - ymin) * 0.15).max(1.0);
            let chart = builder
                .build_cartesian_2d(x, (ymin.min(0.0) - pad)..(ymax.max(0.0) + pad))
                .map_err(|e| e.to_string())?;
            draw(chart, &curves, self.x.1, y_label)?;
        }
        root.present().map_err(|e| e.to_string())
    }
}

/// Draws the mesh, one line with markers per curve, and the legend.
fn draw<'a, X, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    curves: &[(Vec<(f64, f64)>, &str)],
    x_label: &str,
    y_label: &str,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| compact(*v))
        .y_label_formatter(&|v| compact(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (pts, label)) in curves.iter().enumerate() {
        let color = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(*label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::compact;

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(compact(0.1), "0.1");
        assert_eq!(compact(0.0453), "0.045");
        assert_eq!(compact(8192.0), "8192");
        assert_eq!(compact(21_600_000.0), "21.6M");
        assert_eq!(compact(1.0), "1");
        assert_eq!(compact(31_000.0), "31k");
    }
}
