//! `stats`, `analyze` and `export` over several reports at once (the ranks
//! of one job): the reports are opened as one set, aligned on one timeline
//! (see `report::set`), and the tool says how well.
use std::path::PathBuf;

use asys_report::{
    analyze::{self, Rule, RuleSpec, data::Data},
    report::set::{Member, ReportSet},
    stats::{
        self,
        format::{Table, Value},
    },
};

/// Opens `paths` as one set and prints how they were aligned.
fn open(paths: &[PathBuf]) -> anyhow::Result<ReportSet> {
    // Each a report, or an SQLite export read back into one (stats::open
    // prints a recovered report's warning).
    let reports = paths
        .iter()
        .map(|p| super::stats::open(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let set = ReportSet::of(reports)?;
    if set.members.len() > 1 {
        eprintln!(
            "asys: {} reports {}",
            set.members.len(),
            set.alignment.message()
        );
    }
    Ok(set)
}

/// `t` with two leading columns, `Report` (the file's name) and `Rank` (the
/// report's rank), on every row.
fn with_report(mut t: Table, m: &Member) -> Table {
    t.headers.splice(0..0, ["Report", "Rank"]);
    let rank = m
        .report
        .metadata
        .rank
        .map_or(Value::Null, |r| Value::Int(r.into()));
    for row in &mut t.rows {
        row.splice(0..0, [Value::Str(m.name.clone()), rank.clone()]);
    }
    t
}

/// One table of every member's rows (each computed by `f`), each row led
/// by its report's name and rank.
fn per_report(
    set: &ReportSet,
    mut f: impl FnMut(&Member) -> anyhow::Result<Table>,
) -> anyhow::Result<Table> {
    let mut all: Option<Table> = None;
    for m in &set.members {
        // Rows get columns prepended and are merged: a streamed table
        // (a trace) is taken whole here.
        let mut t = f(m)?;
        t.hold()?;
        let t = with_report(t, m);
        match &mut all {
            None => all = Some(t),
            Some(a) => a.rows.extend(t.rows),
        }
    }
    all.ok_or_else(|| anyhow::anyhow!("no report file given"))
}

fn notes(set: &ReportSet) -> Vec<String> {
    set.members
        .iter()
        .filter_map(|m| stats::drops_note(&m.report))
        .collect()
}

/// `asys stats A B ...`: the desync reports over the whole set; every other
/// report per report, in one table led by `Report` and `Rank`. The names
/// were checked by the caller; `--filter-*` applies to each report on its
/// own clock.
pub fn stats(
    paths: &[PathBuf],
    settings: &super::stats::Settings,
) -> anyhow::Result<Vec<(String, Table)>> {
    let mut set = open(paths)?;
    for m in &mut set.members {
        if let Some(w) = settings.filters.window(&m.report)? {
            m.report.window = Some(std::sync::Arc::new(w));
        }
    }
    let mut tables = Vec::new();
    for name in &settings.reports {
        if let Some(f) = stats::desync::find(name) {
            tables.push((name.clone(), f(&set)?));
        } else if let Some(f) = stats::find(name) {
            tables.push((name.clone(), per_report(&set, |m| Ok(f(&m.report)?))?));
        }
    }
    for n in notes(&set) {
        eprintln!("asys: warning: {n}");
    }
    Ok(tables)
}

/// Each rule's table of findings.
pub type Findings = Vec<(Rule, Table)>;

/// `asys analyze A B ...`: rules comparing ranks (pccl_late_rank) over the
/// whole set on its timeline; every other rule per report, its findings led
/// by `Report` and `Rank`. Returns the tables and the notes on lost events.
pub fn analyze(paths: &[PathBuf], specs: &[RuleSpec]) -> anyhow::Result<(Findings, Vec<String>)> {
    let set = open(paths)?;
    let rules: Vec<Rule> = specs.iter().map(|s| s.rule).collect();
    let mut per: Vec<Option<Data>> = set.members.iter().map(|_| None).collect();
    let mut tables = Vec::new();
    for spec in specs {
        let t = if spec.rule == Rule::PcclLateRank {
            let data = Data::collectives_of(&set).map_err(analyze::AnalyzeError::from)?;
            analyze::run(spec, &data).map_err(analyze::AnalyzeError::from)?
        } else {
            per_report(&set, |m| {
                let i = set
                    .members
                    .iter()
                    .position(|x| std::ptr::eq(x, m))
                    .unwrap_or(0);
                if per[i].is_none() {
                    per[i] = Some(
                        Data::load_for(&m.report, &rules).map_err(analyze::AnalyzeError::from)?,
                    );
                }
                Ok(analyze::run(spec, per[i].as_ref().expect("loaded above"))
                    .map_err(analyze::AnalyzeError::from)?)
            })?
        };
        tables.push((spec.rule, t));
    }
    Ok((tables, notes(&set)))
}
