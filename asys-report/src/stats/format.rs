//! Printing a report's table as column (console), csv, tsv or json.
//!
//! Text cells hold names other users chose (threads, processes, ranges,
//! symbols): column, table, csv and tsv write them through
//! [`crate::text_safety`], so that no control or bidirectional character
//! reaches a terminal and no csv/tsv cell starts a spreadsheet formula.
//! JSON writes every value exactly (its encoder escapes what it must).
//! Column and table output elide a text cell longer than [`MAX_CELL`]
//! characters in its middle; csv, tsv and json keep it whole.
use std::io::Write;

use crate::{report::ReportError, text_safety};

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
    /// The value as text, exact: numbers as asys prints them, text as given.
    fn text(&self) -> String {
        match self {
            Value::Int(v) => v.to_string(),
            Value::Float(v) => format!("{v:.1}"),
            Value::Fixed(v, d) => format!("{v:.d$}", d = *d),
            Value::Str(s) => s.clone(),
            Value::Null => String::new(),
        }
    }

    /// The value as a terminal shows it: text escaped visibly.
    fn shown(&self) -> String {
        match self {
            Value::Str(s) => text_safety::visible(s).into_owned(),
            v => v.text(),
        }
    }

    /// The value as a csv or tsv cell holds it (before csv quoting): text
    /// escaped and kept from being read as a formula. Numbers stay numbers,
    /// a negative one included.
    fn cell(&self) -> String {
        match self {
            Value::Str(s) => text_safety::spreadsheet_text(s).into_owned(),
            v => v.text(),
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
    /// Where a table too large to hold (a trace of millions of calls) gets
    /// its rows instead of `rows`, which it leaves empty: the writers go
    /// over the source as they print, once, or twice for column output
    /// (whose widths depend on every row).
    pub stream: Option<Box<dyn RowSource>>,
}

#[cfg(test)]
impl Table {
    /// The values of the column under `header`, row by row (tests).
    pub(crate) fn column(&self, header: &str) -> Vec<&Value> {
        let at = self
            .headers
            .iter()
            .position(|h| *h == header)
            .unwrap_or_else(|| panic!("no column {header} in {:?}", self.headers));
        self.rows.iter().map(|r| &r[at]).collect()
    }
}

/// Rows made on demand, in order, as often as asked.
pub type RowIter<'a> = Box<dyn Iterator<Item = Result<Vec<Value>, ReportError>> + 'a>;

/// The rows of a streamed table (see [`Table::stream`]).
pub trait RowSource: Send + Sync {
    /// Every row from the first; each call starts over.
    fn rows(&self) -> Result<RowIter<'_>, ReportError>;
}

impl Table {
    /// A table whose rows `source` makes while the table is written.
    pub fn streamed(
        title: impl Into<String>,
        headers: Vec<&'static str>,
        source: impl RowSource + 'static,
    ) -> Self {
        Self {
            title: title.into(),
            headers,
            rows: Vec::new(),
            stream: Some(Box::new(source)),
        }
    }

    /// Takes a streamed table's rows into `rows`, for the few uses that
    /// need them all at once (comparing two reports, merging ranks).
    pub fn hold(&mut self) -> Result<(), ReportError> {
        if let Some(s) = self.stream.take() {
            self.rows = s.rows()?.collect::<Result<_, _>>()?;
        }
        Ok(())
    }

    /// Calls `f` with each row in order, from `rows` or the stream.
    fn each_row(&self, mut f: impl FnMut(&[Value]) -> std::io::Result<()>) -> std::io::Result<()> {
        match &self.stream {
            None => self.rows.iter().try_for_each(|r| f(r)),
            Some(s) => {
                for r in s.rows().map_err(std::io::Error::other)? {
                    f(&r.map_err(std::io::Error::other)?)?;
                }
                Ok(())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Column,
    Table,
    Csv,
    Tsv,
    Json,
}

/// Appends a csv (`csv`) or tsv cell holding `text`, escaped already. A
/// csv cell is quoted when it holds a separator or a quote; line breaks never
/// reach here (text cells are escaped), but a cell that had one is still
/// quoted rather than split across rows. Text cells come escaped (no tab or
/// line break left in them), so a tsv cell needs no quoting.
fn push_cell(line: &mut String, text: &str, csv: bool) {
    if csv && text.contains([',', '"', '\n', '\r']) {
        line.push('"');
        line.push_str(&text.replace('"', "\"\""));
        line.push('"');
    } else {
        line.push_str(text);
    }
}

/// Appends `v` as a csv or tsv cell: [`Value::cell`] without the copies.
fn push_value_cell(line: &mut String, v: &Value, csv: bool) {
    match v {
        Value::Int(n) => line.push_str(itoa::Buffer::new().format(*n)),
        Value::Null => {}
        Value::Str(s) => push_cell(line, &text_safety::spreadsheet_text(s), csv),
        v => push_cell(line, &v.cell(), csv),
    }
}

/// The unit of time columns (nsys's `--timeunit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeUnit {
    #[default]
    #[value(name = "nsec", alias = "ns", alias = "nanoseconds")]
    Nsec,
    #[value(name = "usec", alias = "us", alias = "microseconds")]
    Usec,
    #[value(name = "msec", alias = "ms", alias = "milliseconds")]
    Msec,
    #[value(name = "sec", alias = "s", alias = "seconds")]
    Sec,
}

impl TimeUnit {
    /// The unit as headers write it.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Nsec => "ns",
            Self::Usec => "us",
            Self::Msec => "ms",
            Self::Sec => "s",
        }
    }

    /// Nanoseconds per unit, and the decimals that keep every nanosecond.
    fn scale(self) -> (f64, usize) {
        match self {
            Self::Nsec => (1.0, 0),
            Self::Usec => (1e3, 3),
            Self::Msec => (1e6, 6),
            Self::Sec => (1e9, 9),
        }
    }

    /// `v`, a value of a time column in ns, in this unit.
    fn value(self, v: &Value) -> Value {
        let (per, decimals) = self.scale();
        if self == Self::Nsec {
            return v.clone();
        }
        match v {
            Value::Int(n) => Value::Fixed(*n as f64 / per, decimals),
            Value::Float(x) | Value::Fixed(x, _) => Value::Fixed(x / per, decimals),
            v => v.clone(),
        }
    }
}

/// How tables are printed beyond their format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    pub time_unit: TimeUnit,
}

/// The header suffix of a column of times in ns.
const NS: &str = " (ns)";

/// Columns whose numbers name something (a process, a stream, an address)
/// rather than count or measure it: printed without separators.
const IDENTIFIERS: &[&str] = &[
    "Row#",
    "Pid",
    "Tid",
    "Start Tid",
    "CorrId",
    "Stream",
    "Device",
    "Pointer",
    "Result",
    "Copy Kind",
    "CopyKind",
    "Id",
    "Cgroup ID",
    "Cgroup Version",
    "Line",
    "Depth",
    "Lvl",
    "Kind",
    "Rank",
    "CPU",
];

/// `digits` (an optional sign, then digits) with a comma every three digits,
/// as nsys prints integers in its column format.
fn group_thousands(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", text),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    if !int.bytes().all(|b| b.is_ascii_digit()) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + int.len() / 3);
    out.push_str(sign);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// Writes `table` with a leading `Row#` column (as asys's reports have).
pub fn write(out: &mut dyn Write, table: &Table, format: Format) -> std::io::Result<()> {
    write_styled(out, table, format, Style::default())
}

/// [`write`] with time columns in `style.time_unit`. A streamed table is
/// written as its rows come; an error reading them ends the output there
/// (a file target is then never renamed into place).
pub fn write_styled(
    out: &mut dyn Write,
    table: &Table,
    format: Format,
    style: Style,
) -> std::io::Result<()> {
    let styled = Styled::new(table, style.time_unit);
    match format {
        Format::Csv | Format::Tsv => write_delimited(out, &styled, format == Format::Csv),
        Format::Json => write_json(out, &styled),
        Format::Column | Format::Table => write_aligned(out, &styled, format == Format::Table),
    }
}

/// A table as printed: a leading `Row#` column, times in the unit asked
/// for (their headers saying so). Each format's writer reads it through
/// [`Styled::each`], so the rows are styled in one place whatever the
/// format.
struct Styled<'t> {
    table: &'t Table,
    unit: TimeUnit,
    headers: Vec<String>,
    /// Per column (`Row#` first): whether it holds times in ns.
    is_time: Vec<bool>,
}

impl<'t> Styled<'t> {
    fn new(table: &'t Table, unit: TimeUnit) -> Self {
        let is_time = std::iter::once(false)
            .chain(table.headers.iter().map(|h| h.ends_with(NS)))
            .collect();
        let headers = std::iter::once("Row#".to_string())
            .chain(table.headers.iter().map(|h| match h.strip_suffix(NS) {
                Some(base) => format!("{base} ({})", unit.suffix()),
                None => h.to_string(),
            }))
            .collect();
        Self {
            table,
            unit,
            headers,
            is_time,
        }
    }

    /// Row `i` (from 0) as printed: its number first, times in the unit.
    fn styled(&self, i: usize, r: &[Value]) -> Vec<Value> {
        std::iter::once(Value::Int(i as i64 + 1))
            .chain(r.iter().enumerate().map(|(c, v)| {
                if self.is_time[c + 1] {
                    self.unit.value(v)
                } else {
                    v.clone()
                }
            }))
            .collect()
    }

    /// Every row through `f`, styled (a streamed table's as they come).
    fn each(&self, f: &mut dyn FnMut(&[Value]) -> std::io::Result<()>) -> std::io::Result<()> {
        let mut i = 0;
        self.table.each_row(|r| {
            let row = self.styled(i, r);
            i += 1;
            f(&row)
        })
    }
}

/// CSV (`csv`) or TSV: a header line, then a line per row.
fn write_delimited(out: &mut dyn Write, t: &Styled, csv: bool) -> std::io::Result<()> {
    let sep = if csv { ',' } else { '\t' };
    let mut line = String::new();
    for (c, h) in t.headers.iter().enumerate() {
        if c > 0 {
            line.push(sep);
        }
        push_cell(&mut line, &text_safety::spreadsheet_text(h), csv);
    }
    line.push('\n');
    out.write_all(line.as_bytes())?;
    t.each(&mut |r| {
        line.clear();
        for (c, v) in r.iter().enumerate() {
            if c > 0 {
                line.push(sep);
            }
            push_value_cell(&mut line, v, csv);
        }
        line.push('\n');
        out.write_all(line.as_bytes())
    })
}

/// JSON: an array of objects, one per row, keyed by the headers.
fn write_json(out: &mut dyn Write, t: &Styled) -> std::io::Result<()> {
    // Serialized as a sequence fed one row at a time: the same bytes as
    // serializing a vector of the rows, without holding them.
    use serde::ser::{SerializeSeq, Serializer};
    let mut ser = serde_json::Serializer::pretty(&mut *out);
    let mut seq = ser.serialize_seq(None).map_err(std::io::Error::other)?;
    t.each(&mut |r| {
        let object = serde_json::Value::Object(
            t.headers
                .iter()
                .zip(r)
                .map(|(h, v)| (h.to_string(), v.json()))
                .collect(),
        );
        seq.serialize_element(&object)
            .map_err(std::io::Error::other)
    })?;
    seq.end().map_err(std::io::Error::other)?;
    writeln!(out)
}

/// The column format, or the table format (`boxed`: cells between bars):
/// the title, then the columns padded to their widths, found in a first
/// pass over the rows (a streamed table is read twice).
fn write_aligned(out: &mut dyn Write, t: &Styled, boxed: bool) -> std::io::Result<()> {
    // Numbers that measure or count get nsys's thousands separators.
    let grouped: Vec<bool> = t
        .headers
        .iter()
        .map(|h| !IDENTIFIERS.contains(&h.as_str()))
        .collect();
    let headers: Vec<String> = t
        .headers
        .iter()
        .map(|h| text_safety::visible(h).into_owned())
        .collect();
    let (widths, numeric) = column_widths(t, &headers, &grouped)?;
    let (open, sep, close) = if boxed {
        ("| ", " | ", " |")
    } else {
        ("", "  ", "")
    };
    let line = |cells: &[String]| {
        let cells: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, s)| pad(s, widths[c], numeric[c]))
            .collect();
        format!("{open}{}{close}", cells.join(sep))
    };
    writeln!(out)?;
    writeln!(out, " ** {}:", text_safety::visible(&t.table.title))?;
    writeln!(out)?;
    writeln!(out, "{}", line(&headers).trim_end())?;
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "{open}{}{close}", rule.join(sep))?;
    t.each(&mut |r| writeln!(out, "{}", line(&aligned_text(r, &grouped)).trim_end()))?;
    writeln!(out)
}

/// A row's cells as the column and table formats show them: numbers that
/// count or measure grouped in thousands (`grouped`), long texts elided.
fn aligned_text(r: &[Value], grouped: &[bool]) -> Vec<String> {
    r.iter()
        .enumerate()
        .map(|(c, v)| match v {
            Value::Int(_) | Value::Float(_) | Value::Fixed(..) if grouped[c] => {
                group_thousands(&v.text())
            }
            v @ Value::Str(_) => elide(v.shown(), MAX_CELL),
            v => v.shown(),
        })
        .collect()
}

/// Each column's width (its header's or its widest cell's) and whether it
/// holds only numbers (right-aligned).
fn column_widths(
    t: &Styled,
    headers: &[String],
    grouped: &[bool],
) -> std::io::Result<(Vec<usize>, Vec<bool>)> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    let mut numeric = vec![true; headers.len()];
    t.each(&mut |r| {
        for (c, t) in aligned_text(r, grouped).iter().enumerate() {
            widths[c] = widths[c].max(t.chars().count());
            numeric[c] &= !matches!(r[c], Value::Str(_));
        }
        Ok(())
    })?;
    Ok((widths, numeric))
}

/// The most characters a text cell of the column and table formats shows:
/// a C++ or Python name, or a path, can be thousands (a line 3,295
/// characters wide was seen); csv, tsv and json keep every cell whole.
pub const MAX_CELL: usize = 100;

/// `text` in at most `max` characters: whole when it fits, else its start
/// and its end (where a path has its file and a function its own name)
/// around an ellipsis.
pub fn elide(text: String, max: usize) -> String {
    let n = text.chars().count();
    if n <= max || max < 3 {
        return text;
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let mut out: String = text.chars().take(head).collect();
    out.push('…');
    out.extend(text.chars().skip(n - tail));
    out
}

fn pad(s: &str, width: usize, right: bool) -> String {
    if right {
        format!("{s:>width$}")
    } else {
        format!("{s:<width$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped_as_nsys_prints_them() {
        assert_eq!(group_thousands("0"), "0");
        assert_eq!(group_thousands("999"), "999");
        assert_eq!(group_thousands("1000"), "1,000");
        assert_eq!(group_thousands("1234567"), "1,234,567");
        assert_eq!(group_thousands("-1234567.5"), "-1,234,567.5");
        assert_eq!(group_thousands("123456.789"), "123,456.789");
        assert_eq!(group_thousands("abc"), "abc");
    }

    fn render(t: &Table, f: Format, unit: TimeUnit) -> String {
        let mut b = Vec::new();
        write_styled(&mut b, t, f, Style { time_unit: unit }).unwrap();
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn time_columns_change_unit_and_header() {
        let t = Table {
            stream: None,
            title: "T".into(),
            headers: vec!["Total Time (ns)", "Avg (ns)", "Pid", "Num Calls"],
            rows: vec![vec![
                Value::Int(1_234_567),
                Value::Float(1500.5),
                Value::Int(12345),
                Value::Int(2000),
            ]],
        };
        let csv = render(&t, Format::Csv, TimeUnit::Usec);
        assert_eq!(
            csv,
            "Row#,Total Time (us),Avg (us),Pid,Num Calls\n1,1234.567,1.500,12345,2000\n"
        );
        let csv = render(&t, Format::Csv, TimeUnit::Sec);
        assert!(csv.contains("Total Time (s)"), "{csv}");
        assert!(csv.contains(",0.001234567,"), "{csv}");
        let col = render(&t, Format::Column, TimeUnit::Nsec);
        // Counts and times grouped, the pid not.
        assert!(col.contains("1,234,567"), "{col}");
        assert!(col.contains("1,500.5"), "{col}");
        assert!(col.contains("2,000"), "{col}");
        assert!(col.contains(" 12345 "), "{col}");
    }

    #[test]
    fn long_names_are_elided_in_columns_and_whole_elsewhere() {
        assert_eq!(elide("abc".into(), 3), "abc");
        assert_eq!(elide("abcdefghij".into(), 5), "ab…ij");
        assert_eq!(elide("abcdefghij".into(), 6), "ab…hij");
        let long = format!("/very/{}/deep/file.py", "d".repeat(3000));
        let t = Table {
            stream: None,
            title: "T".into(),
            headers: vec!["File", "Line"],
            rows: vec![vec![Value::Str(long.clone()), Value::Int(7)]],
        };
        for f in [Format::Column, Format::Table] {
            let out = render(&t, f, TimeUnit::Nsec);
            let widest = out.lines().map(|l| l.chars().count()).max().unwrap();
            assert!(widest <= MAX_CELL + 20, "{widest}: {out}");
            let cell = out.lines().find(|l| l.contains('…')).unwrap();
            assert!(
                cell.contains("/very/d") && cell.contains("d/deep/file.py"),
                "{cell}"
            );
        }
        for f in [Format::Csv, Format::Tsv, Format::Json] {
            let out = render(&t, f, TimeUnit::Nsec);
            assert!(out.contains(&long) && !out.contains('…'), "{f:?}");
        }
    }

    /// Names other users chose are escaped in column, table, csv and tsv and
    /// exact in json; numbers, negative ones included, are never prefixed.
    #[test]
    fn hostile_names_are_escaped_and_numbers_kept() {
        let name = "\x1b]0;pwned\x07\u{202e}=cmd|' /C calc'!A0";
        let t = Table {
            stream: None,
            title: "T\x1b[2J".into(),
            headers: vec!["Name", "Change", "Pct"],
            rows: vec![
                vec![
                    Value::Str(name.into()),
                    Value::Int(-5),
                    Value::Fixed(-1.5e3, 1),
                ],
                vec![Value::Str("@SUM(1)".into()), Value::Int(3), Value::Null],
                vec![Value::Str("-1+2".into()), Value::Int(0), Value::Null],
            ],
        };
        // It begins with ESC: escaped, it begins with a backslash, which no
        // spreadsheet reads as a formula (no quote needed).
        let shown = "\\x1b]0;pwned\\x07\\u{202e}=cmd|' /C calc'!A0";
        let csv = render(&t, Format::Csv, TimeUnit::Nsec);
        assert_eq!(
            csv,
            format!("Row#,Name,Change,Pct\n1,{shown},-5,-1500.0\n2,'@SUM(1),3,\n3,'-1+2,0,\n")
        );
        let tsv = render(&t, Format::Tsv, TimeUnit::Nsec);
        assert_eq!(
            tsv,
            format!(
                "Row#\tName\tChange\tPct\n1\t{shown}\t-5\t-1500.0\n2\t'@SUM(1)\t3\t\n3\t'-1+2\t0\t\n"
            )
        );
        for f in [Format::Column, Format::Table] {
            let col = render(&t, f, TimeUnit::Nsec);
            // Nothing but the table's own line breaks reaches the terminal.
            assert!(
                col.chars()
                    .all(|c| c == '\n' || !crate::text_safety::needs_escape(c)),
                "{col:?}"
            );
            // Escaped, not neutralized: a terminal runs no formulas.
            assert!(col.contains(shown), "{col}");
            assert!(col.contains("@SUM(1)") && !col.contains("'@SUM"), "{col}");
            assert!(col.contains(" ** T\\x1b[2J:"), "{col}");
            assert!(col.contains("-1,500.0"), "{col}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&render(&t, Format::Json, TimeUnit::Nsec)).unwrap();
        assert_eq!(json[0]["Name"], name);
        assert_eq!(json[0]["Change"], -5);
        assert_eq!(json[2]["Name"], "-1+2");
    }
}
