//! Printing a report's table as column (console), csv, tsv or json.
use std::io::Write;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    /// A float printed with the given number of decimals.
    Fixed(f64, usize),
    Str(String),
    Null,
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Int(v) => v.to_string(),
            Value::Float(v) => format!("{v:.1}"),
            Value::Fixed(v, d) => format!("{v:.d$}", d = *d),
            Value::Str(s) => s.clone(),
            Value::Null => String::new(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Value::Int(v) => (*v).into(),
            Value::Float(v) => serde_json::Number::from_f64((*v * 10.0).round() / 10.0)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Fixed(v, d) => {
                let scale = 10f64.powi(*d as i32);
                serde_json::Number::from_f64((*v * scale).round() / scale)
                    .map(serde_json::Value::Number)
                    .unwrap_or(serde_json::Value::Null)
            }
            Value::Str(s) => s.clone().into(),
            Value::Null => serde_json::Value::Null,
        }
    }
}

pub struct Table {
    pub title: String,
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Column,
    Table,
    Csv,
    Tsv,
    Json,
}

fn quote_csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes `table` with a leading `Row#` column (as asys's reports have).
pub fn write(out: &mut dyn Write, table: &Table, format: Format) -> std::io::Result<()> {
    let headers: Vec<&str> = std::iter::once("Row#")
        .chain(table.headers.iter().copied())
        .collect();
    let rows: Vec<Vec<Value>> = table
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            std::iter::once(Value::Int(i as i64 + 1))
                .chain(r.iter().cloned())
                .collect()
        })
        .collect();
    match format {
        Format::Csv | Format::Tsv => {
            let sep = if format == Format::Csv { "," } else { "\t" };
            let cell = |s: &str| {
                if format == Format::Csv {
                    quote_csv(s)
                } else {
                    s.replace('\t', " ")
                }
            };
            writeln!(
                out,
                "{}",
                headers
                    .iter()
                    .map(|h| cell(h))
                    .collect::<Vec<_>>()
                    .join(sep)
            )?;
            for r in &rows {
                writeln!(
                    out,
                    "{}",
                    r.iter()
                        .map(|v| cell(&v.text()))
                        .collect::<Vec<_>>()
                        .join(sep)
                )?;
            }
        }
        Format::Json => {
            let arr: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    serde_json::Value::Object(
                        headers
                            .iter()
                            .zip(r)
                            .map(|(h, v)| (h.to_string(), v.json()))
                            .collect(),
                    )
                })
                .collect();
            serde_json::to_writer_pretty(&mut *out, &arr)?;
            writeln!(out)?;
        }
        Format::Column | Format::Table => {
            let texts: Vec<Vec<String>> = rows
                .iter()
                .map(|r| r.iter().map(Value::text).collect())
                .collect();
            let widths: Vec<usize> = (0..headers.len())
                .map(|c| {
                    texts
                        .iter()
                        .map(|r| r[c].chars().count())
                        .chain([headers[c].chars().count()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let numeric = |c: usize| rows.iter().all(|r| !matches!(r[c], Value::Str(_)));
            let (open, sep, close) = if format == Format::Table {
                ("| ", " | ", " |")
            } else {
                ("", "  ", "")
            };
            writeln!(out)?;
            writeln!(out, " ** {}:", table.title)?;
            writeln!(out)?;
            let line = |cells: Vec<String>| format!("{open}{}{close}", cells.join(sep));
            writeln!(
                out,
                "{}",
                line(
                    headers
                        .iter()
                        .enumerate()
                        .map(|(c, h)| pad(h, widths[c], numeric(c)))
                        .collect()
                )
                .trim_end()
            )?;
            writeln!(
                out,
                "{}",
                line(widths.iter().map(|w| "-".repeat(*w)).collect())
            )?;
            for r in &texts {
                writeln!(
                    out,
                    "{}",
                    line(
                        r.iter()
                            .enumerate()
                            .map(|(c, t)| pad(t, widths[c], numeric(c)))
                            .collect()
                    )
                    .trim_end()
                )?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

fn pad(s: &str, width: usize, right: bool) -> String {
    if right {
        format!("{s:>width$}")
    } else {
        format!("{s:<width$}")
    }
}
