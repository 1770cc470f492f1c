//! `asys stats --compare A B`: two reports' summaries side by side. Any
//! `*_sum` report whose rows start with the time columns of
//! [`super::api_sum::time_headers`] (API, kernel and range summaries) is
//! computed on each report by its own function and the rows are matched by
//! their other columns (the name, and the style or domain where a summary
//! has one). Rows are sorted by the absolute change of total time (the
//! impact), largest first.
use std::collections::BTreeMap;

use super::format::{Table, Value};

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(
        "report {0} has no total times to compare (compare takes the *_sum reports of API calls, kernels and ranges)"
    )]
    NotASummary(String),
}

/// The columns of a compare table, after the key column.
const HEADERS: &[&str] = &[
    "Count A",
    "Count B",
    "Count Change",
    "Count Change (%)",
    "Total A (ns)",
    "Total B (ns)",
    "Total Change (ns)",
    "Total Change (%)",
    "Avg A (ns)",
    "Avg B (ns)",
    "Avg Change (ns)",
    "Avg Change (%)",
    "Med A (ns)",
    "Med B (ns)",
    "Med Change (ns)",
    "Med Change (%)",
];

/// One side's numbers for a key.
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    count: i64,
    total: i64,
    avg: f64,
    med: f64,
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) | Value::Fixed(x, _) => *x,
        _ => 0.0,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Null => String::new(),
        Value::Int(i) => i.to_string(),
        Value::Float(x) | Value::Fixed(x, _) => x.to_string(),
    }
}

/// Where the time columns of `t` are: (total, count, avg, med).
fn positions(t: &Table, report: &str) -> Result<(usize, [usize; 4], Vec<usize>), CompareError> {
    let total = t
        .headers
        .iter()
        .position(|h| *h == "Total Time (ns)")
        .ok_or_else(|| CompareError::NotASummary(report.into()))?;
    // time_headers: Time (%), Total, count, Avg, Med, Min, Max, StdDev.
    let first = total
        .checked_sub(1)
        .ok_or_else(|| CompareError::NotASummary(report.into()))?;
    if t.headers.get(total + 2) != Some(&"Avg (ns)")
        || t.headers.get(total + 3) != Some(&"Med (ns)")
    {
        return Err(CompareError::NotASummary(report.into()));
    }
    let keys = (0..t.headers.len())
        .filter(|c| !(first..first + 8).contains(c))
        .collect();
    Ok((first, [total, total + 1, total + 2, total + 3], keys))
}

fn sides(t: &Table, at: [usize; 4], keys: &[usize]) -> BTreeMap<String, Side> {
    let mut out = BTreeMap::new();
    for r in &t.rows {
        let key = keys
            .iter()
            .map(|&k| text(&r[k]))
            .collect::<Vec<_>>()
            .join(" / ");
        out.insert(
            key,
            Side {
                total: number(&r[at[0]]) as i64,
                count: number(&r[at[1]]) as i64,
                avg: number(&r[at[2]]),
                med: number(&r[at[3]]),
            },
        );
    }
    out
}

/// B − A and its share of A in %, None when A is 0 (no base to compare to).
fn change(a: f64, b: f64) -> (f64, Option<f64>) {
    let d = b - a;
    (d, (a != 0.0).then(|| d * 100.0 / a))
}

fn pct(p: Option<f64>) -> Value {
    p.map(|p| Value::Fixed(p, 1)).unwrap_or(Value::Null)
}

/// The compare table of report `name`, from its tables on A and on B.
pub fn compare(name: &str, a: &Table, b: &Table) -> Result<Table, CompareError> {
    let (_, at_a, keys_a) = positions(a, name)?;
    let (_, at_b, keys_b) = positions(b, name)?;
    // One key column keeps its name; several (hgtx_sum's style and range)
    // are joined with " / " under "Name".
    let key_header = match keys_a[..] {
        [k] => a.headers[k],
        _ => "Name",
    };
    let (sa, sb) = (sides(a, at_a, &keys_a), sides(b, at_b, &keys_b));
    let mut keys: Vec<&String> = sa.keys().chain(sb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows: Vec<(i64, Vec<Value>)> = keys
        .into_iter()
        .map(|k| {
            let x = sa.get(k).copied().unwrap_or_default();
            let y = sb.get(k).copied().unwrap_or_default();
            let (dc, pc) = change(x.count as f64, y.count as f64);
            let (dt, pt) = change(x.total as f64, y.total as f64);
            let (da, pa) = change(x.avg, y.avg);
            let (dm, pm) = change(x.med, y.med);
            let impact = y.total.saturating_sub(x.total).saturating_abs();
            (
                impact,
                vec![
                    Value::Str(k.clone()),
                    Value::Int(x.count),
                    Value::Int(y.count),
                    Value::Int(dc as i64),
                    pct(pc),
                    Value::Int(x.total),
                    Value::Int(y.total),
                    Value::Int(dt as i64),
                    pct(pt),
                    Value::Float(x.avg),
                    Value::Float(y.avg),
                    Value::Float(da),
                    pct(pa),
                    Value::Float(x.med),
                    Value::Float(y.med),
                    Value::Float(dm),
                    pct(pm),
                ],
            )
        })
        .collect();
    // Largest impact first; the sort is stable, so ties keep key order.
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut headers: Vec<&'static str> = vec![key_header];
    headers.extend_from_slice(HEADERS);
    let title = a
        .title
        .rsplit_once(" (")
        .map_or(a.title.as_str(), |(t, _)| t)
        .to_string();
    Ok(Table {
        stream: None,
        title: format!("{title} Compare ({name}_compare)"),
        headers,
        rows: rows.into_iter().map(|(_, r)| r).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(rows: &[(&str, i64, i64)]) -> Table {
        Table {
            stream: None,
            title: "X Summary (x_sum)".into(),
            headers: {
                let mut h = super::super::api_sum::time_headers("Num Calls");
                h.push("Name");
                h
            },
            rows: rows
                .iter()
                .map(|(n, count, total)| {
                    let avg = *total as f64 / *count as f64;
                    vec![
                        Value::Float(0.0),
                        Value::Int(*total),
                        Value::Int(*count),
                        Value::Float(avg),
                        Value::Float(avg),
                        Value::Int(0),
                        Value::Int(0),
                        Value::Float(0.0),
                        Value::Str(n.to_string()),
                    ]
                })
                .collect(),
        }
    }

    #[test]
    fn rows_match_by_name_and_sort_by_impact() {
        let a = sum(&[("f", 10, 1000), ("g", 5, 500), ("gone", 1, 50)]);
        let b = sum(&[("f", 20, 1100), ("g", 5, 2500), ("new", 2, 60)]);
        let t = compare("x_sum", &a, &b).unwrap();
        assert_eq!(t.title, "X Summary Compare (x_sum_compare)");
        assert_eq!(t.headers[0], "Name");
        let names: Vec<String> = t.rows.iter().map(|r| text(&r[0])).collect();
        // |Δtotal|: g 2000, f 100, new 60, gone 50.
        assert_eq!(names, ["g", "f", "new", "gone"]);
        let f = &t.rows[1];
        assert_eq!(f[1..4], [Value::Int(10), Value::Int(20), Value::Int(10)]);
        assert_eq!(f[4], Value::Fixed(100.0, 1));
        let new = &t.rows[2];
        assert_eq!(new[1], Value::Int(0));
        assert_eq!(new[4], Value::Null, "no base: no percentage");
    }

    #[test]
    fn a_table_without_totals_is_refused() {
        let t = Table {
            stream: None,
            title: "T".into(),
            headers: vec!["Start (ns)", "Name"],
            rows: vec![],
        };
        assert!(compare("t", &t, &t).is_err());
    }
}
