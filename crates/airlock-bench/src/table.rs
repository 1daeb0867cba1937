//! The one table: rows of scenario x system, with p50, p99 and the ratio to the floor.
use serde::{Deserialize, Serialize};

use crate::stats::{summarize, Summary};

/// The system every ratio is taken against.
pub const FLOOR: &str = "python3 (floor)";
/// The reference of a scenario with no python3 row (sessions): a local Jupyter kernel.
pub const JUPYTER: &str = "Jupyter kernel (jupyter_client + ipykernel)";

/// One measured (or skipped) system in one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// What was measured.
    pub scenario: String,
    /// Who was measured.
    pub system: String,
    /// Unit of p50/p99.
    pub unit: String,
    /// Median, when measured.
    pub p50: Option<f64>,
    /// 99th percentile, when measured.
    pub p99: Option<f64>,
    /// Samples behind the figures.
    pub n: usize,
    /// p50 relative to the floor's p50 (for a rate: floor rate / rate), so above 1 is costlier.
    pub ratio: Option<f64>,
    /// Why it was skipped, or what to know about the figure.
    pub note: String,
}

impl Row {
    /// A measured row (or a skipped one when `samples` is empty).
    pub fn measured(
        scenario: &'static str,
        system: impl Into<String>,
        unit: &'static str,
        samples: Vec<f64>,
        note: impl Into<String>,
    ) -> Self {
        let s: Option<Summary> = summarize(samples);
        let mut note = note.into();
        if s.is_none() && note.is_empty() {
            note = "no samples".into();
        }
        Self {
            scenario: scenario.to_owned(),
            system: system.into(),
            unit: unit.to_owned(),
            p50: s.map(|s| s.p50),
            p99: s.map(|s| s.p99),
            n: s.map_or(0, |s| s.n),
            ratio: None,
            note,
        }
    }

    /// A figure a vendor published, not measured here (the note names the source).
    pub fn published(
        scenario: &'static str,
        system: impl Into<String>,
        unit: &'static str,
        value: f64,
        source: &str,
    ) -> Self {
        Self {
            scenario: scenario.to_owned(),
            system: system.into(),
            unit: unit.to_owned(),
            p50: Some(value),
            p99: None,
            n: 0,
            ratio: None,
            note: format!("published figure, not measured here: {source}"),
        }
    }

    /// A row for a system that could not be measured here.
    pub fn skipped(
        scenario: &'static str,
        system: impl Into<String>,
        why: impl Into<String>,
    ) -> Self {
        Self::measured(scenario, system, "", Vec::new(), why)
    }

    /// A row with the outcome of a measurement that may have failed.
    pub fn from_result(
        scenario: &'static str,
        system: impl Into<String>,
        unit: &'static str,
        samples: Result<Vec<f64>, String>,
        note: &str,
    ) -> Self {
        match samples {
            Ok(s) => Self::measured(scenario, system, unit, s, note),
            Err(e) => Self::skipped(scenario, system, e),
        }
    }
}

/// Everything one `airlock bench` invocation measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The machine, as `uname -srm` and the core count.
    pub machine: String,
    /// The interpreter every system ran.
    pub python: String,
    /// Samples per latency scenario.
    pub runs: usize,
    /// The rows, grouped by scenario in measuring order.
    pub rows: Vec<Row>,
    /// Wall time of the whole benchmark, in seconds.
    pub seconds: f64,
}

impl Report {
    /// Fill in every row's ratio to the floor row of its scenario.
    pub fn compute_ratios(&mut self) {
        let floors: Vec<(String, f64)> = self
            .rows
            .iter()
            .filter(|r| r.system == FLOOR)
            .filter_map(|r| r.p50.map(|p| (r.scenario.clone(), p)))
            .collect();
        let floors: Vec<(String, f64)> = self
            .rows
            .iter()
            .filter(|r| r.system == JUPYTER && !floors.iter().any(|(s, _)| *s == r.scenario))
            .filter_map(|r| r.p50.map(|p| (r.scenario.clone(), p)))
            .chain(floors.iter().cloned())
            .collect();
        for row in &mut self.rows {
            let floor = floors
                .iter()
                .find(|(s, _)| *s == row.scenario)
                .map(|(_, p)| *p);
            row.ratio = match (row.p50, floor) {
                (Some(v), Some(f)) if f > 0.0 && v > 0.0 => {
                    Some(if row.unit == "runs/s" { f / v } else { v / f })
                }
                _ => None,
            };
        }
    }

    /// The markdown table.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "airlock bench: {} | python {} | {} samples per latency row | {:.0} s\n\n",
            self.machine, self.python, self.runs, self.seconds
        );
        out.push_str("| scenario | system | p50 | p99 | × floor | notes |\n");
        out.push_str("|---|---|---:|---:|---:|---|\n");
        for r in &self.rows {
            let fmt = |v: Option<f64>| {
                v.map_or("—".to_string(), |v| format!("{} {}", number(v), r.unit))
            };
            let ratio = r.ratio.map_or("—".to_string(), |x| format!("{x:.2}"));
            let p99 = if r.unit == "runs/s" {
                "—".to_string()
            } else {
                fmt(r.p99)
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                r.scenario,
                r.system,
                fmt(r.p50),
                p99,
                ratio,
                r.note.replace('|', "/")
            ));
        }
        out
    }
}

/// Three significant digits, no exponent.
fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_taken_against_the_floor_of_the_same_scenario() {
        let mut r = Report {
            machine: "m".into(),
            python: "3".into(),
            runs: 3,
            seconds: 1.0,
            rows: vec![
                Row::measured("start", FLOOR, "ms", vec![10.0, 10.0, 12.0], ""),
                Row::measured("start", "airlock", "ms", vec![15.0, 15.0, 30.0], ""),
                Row::measured("throughput", FLOOR, "runs/s", vec![100.0], ""),
                Row::measured("throughput", "airlock", "runs/s", vec![25.0], ""),
                Row::skipped("start", "bwrap", "not installed"),
            ],
        };
        r.compute_ratios();
        let ratios: Vec<Option<f64>> = r.rows.iter().map(|x| x.ratio).collect();
        assert_eq!(
            ratios,
            vec![Some(1.0), Some(1.5), Some(1.0), Some(4.0), None]
        );
        let md = r.markdown();
        assert!(
            md.contains("| start | airlock | 15.0 ms | 30.0 ms | 1.50 |"),
            "{md}"
        );
        assert!(
            md.contains("| start | bwrap | — | — | — | not installed |"),
            "{md}"
        );
    }

    #[test]
    fn a_scenario_without_a_floor_is_taken_against_the_jupyter_kernel() {
        let mut r = Report {
            machine: String::new(),
            python: String::new(),
            runs: 3,
            seconds: 0.0,
            rows: vec![
                Row::measured("session", JUPYTER, "ms", vec![10.0], ""),
                Row::measured("session", "airlock", "ms", vec![4.0], ""),
                Row::measured("start", FLOOR, "ms", vec![5.0], ""),
                Row::measured("start", JUPYTER, "ms", vec![20.0], ""),
            ],
        };
        r.compute_ratios();
        let ratios: Vec<Option<f64>> = r.rows.iter().map(|x| x.ratio).collect();
        assert_eq!(ratios, vec![Some(1.0), Some(0.4), Some(1.0), Some(4.0)]);
    }
}
