//! The filters of `asys stats`: `--filter-time a/b` and `--filter-hgtx` /
//! `--filter-nvtx name[@domain][/index]`, turned into the
//! [`Window`](crate::report::window::Window) the report is then read through.
use std::str::FromStr;

use crate::report::read::ranges::{self, Family};
use crate::report::{ReportError, container::Container, window::Window};

#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("no {family} range matches '{spec}' in {path}")]
    NoRange {
        family: &'static str,
        spec: String,
        path: String,
    },
    #[error(
        "{family} range '{spec}' has {found} instance(s) in {path}; /{index} is past the last (instances count from 0)"
    )]
    NoInstance {
        family: &'static str,
        spec: String,
        index: usize,
        found: usize,
        path: String,
    },
}

/// `--filter-time START/END`: ns since the session start, either side
/// optional (`START/`, `/END`); both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeFilter {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

impl FromStr for TimeFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "expected START/END in nanoseconds since the session start (either may be left out), got '{s}'"
            )
        };
        let (a, b) = s.split_once('/').ok_or_else(bad)?;
        let side = |t: &str| -> Result<Option<i64>, String> {
            let t = t.trim();
            if t.is_empty() {
                Ok(None)
            } else {
                t.parse::<i64>().map(Some).map_err(|_| bad())
            }
        };
        let (start, end) = (side(a)?, side(b)?);
        if let (Some(a), Some(b)) = (start, end)
            && b < a
        {
            return Err(format!("the time range '{s}' ends before it starts"));
        }
        Ok(Self { start, end })
    }
}

/// Which domain a range filter takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainSel {
    /// `name`: the default domain (nsys: a range name without `@domain`).
    Default,
    /// `name@*`: any domain.
    Any,
    /// `name@domain`.
    Named(String),
}

/// `--filter-hgtx` / `--filter-nvtx name[@domain][/index]` (nsys's
/// `--filter-nvtx range[@domain][/index]`): the time of the ranges of that
/// name; `/index` takes only that instance, counted from 0 in start order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeFilter {
    pub name: String,
    pub domain: DomainSel,
    pub index: Option<usize>,
}

impl FromStr for RangeFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        // The index is what follows the last '/', when that is a number: a
        // range name may hold a '/' itself.
        let (rest, index) = match s.rsplit_once('/') {
            Some((r, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => (
                r,
                Some(
                    i.parse::<usize>()
                        .map_err(|_| format!("index '{i}' is too large"))?,
                ),
            ),
            _ => (s, None),
        };
        let (name, domain) = match rest.rsplit_once('@') {
            Some((n, "*")) => (n, DomainSel::Any),
            Some((n, d)) => (n, DomainSel::Named(d.to_string())),
            None => (rest, DomainSel::Default),
        };
        if name.is_empty() {
            return Err(format!(
                "no range name in '{s}' (expected name[@domain][/index])"
            ));
        }
        Ok(Self {
            name: name.to_string(),
            domain,
            index,
        })
    }
}

impl std::fmt::Display for RangeFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.name)?;
        match &self.domain {
            DomainSel::Default => {}
            DomainSel::Any => write!(f, "@*")?,
            DomainSel::Named(d) => write!(f, "@{d}")?,
        }
        if let Some(i) = self.index {
            write!(f, "/{i}")?;
        }
        Ok(())
    }
}

impl RangeFilter {
    /// Whether range `r` has this filter's name and domain (its index
    /// aside).
    pub fn matches(&self, r: &ranges::Range) -> bool {
        r.name == self.name
            && match &self.domain {
                DomainSel::Default => r.domain.is_empty(),
                DomainSel::Any => true,
                DomainSel::Named(d) => r.domain == *d,
            }
    }

    /// The spans (CLOCK_MONOTONIC ns) of the matching ranges of `report`.
    pub fn spans(
        &self,
        report: &Container,
        family: Family,
    ) -> Result<Vec<(i64, i64)>, FilterError> {
        let mut found: Vec<(i64, i64)> = ranges::ranges(report, family)?
            .iter()
            .filter(|r| self.matches(r))
            .map(|r| (r.start, r.end))
            .collect();
        found.sort_unstable();
        let path = report.path.display().to_string();
        if found.is_empty() {
            return Err(FilterError::NoRange {
                family: family.label,
                spec: self.to_string(),
                path,
            });
        }
        match self.index {
            None => Ok(found),
            Some(i) if i < found.len() => Ok(vec![found[i]]),
            Some(index) => Err(FilterError::NoInstance {
                family: family.label,
                spec: self.to_string(),
                index,
                found: found.len(),
                path,
            }),
        }
    }
}

/// The filters of one `asys stats` run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub time: Option<TimeFilter>,
    pub hgtx: Option<RangeFilter>,
    pub nvtx: Option<RangeFilter>,
}

impl Filters {
    /// The window these filters give on `report` (None: no filter). Several
    /// filters intersect: a row must pass each.
    pub fn window(&self, report: &Container) -> Result<Option<Window>, FilterError> {
        let mut spans: Option<Vec<(i64, i64)>> = None;
        let mut narrow = |with: Vec<(i64, i64)>| {
            spans = Some(match spans.take() {
                None => with,
                Some(have) => intersect(&have, &with),
            });
        };
        if let Some(t) = self.time {
            let origin = report.metadata.start_monotonic_ns;
            narrow(vec![(
                t.start.map_or(i64::MIN, |a| origin.saturating_add(a)),
                t.end.map_or(i64::MAX, |b| origin.saturating_add(b)),
            )]);
        }
        if let Some(f) = &self.hgtx {
            narrow(f.spans(report, ranges::HGTX)?);
        }
        if let Some(f) = &self.nvtx {
            narrow(f.spans(report, ranges::NVTX)?);
        }
        Ok(spans.map(Window::new))
    }
}

/// The parts of spans `a` that lie within spans `b`.
fn intersect(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for &(a0, a1) in a {
        for &(b0, b1) in b {
            let (s, e) = (a0.max(b0), a1.min(b1));
            if s <= e {
                out.push((s, e));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_filters_parse_with_either_side_left_out() {
        let t = |s: &str| s.parse::<TimeFilter>();
        assert_eq!(
            t("10/20").unwrap(),
            TimeFilter {
                start: Some(10),
                end: Some(20)
            }
        );
        assert_eq!(
            t("10/").unwrap(),
            TimeFilter {
                start: Some(10),
                end: None
            }
        );
        assert_eq!(
            t("/20").unwrap(),
            TimeFilter {
                start: None,
                end: Some(20)
            }
        );
        assert!(t("20/10").is_err());
        assert!(t("x/10").is_err());
        assert!(t("10").is_err());
    }

    #[test]
    fn range_filters_parse_as_nsys_writes_them() {
        let r = |s: &str| s.parse::<RangeFilter>().unwrap();
        assert_eq!(
            r("step"),
            RangeFilter {
                name: "step".into(),
                domain: DomainSel::Default,
                index: None
            }
        );
        assert_eq!(r("step@app").domain, DomainSel::Named("app".into()));
        assert_eq!(r("step@*").domain, DomainSel::Any);
        assert_eq!(r("step@app/2").index, Some(2));
        assert_eq!(r("a/b").name, "a/b", "a name may hold a '/'");
        assert_eq!(r("step@app/2").to_string(), "step@app/2");
        assert!("@app".parse::<RangeFilter>().is_err());
    }

    #[test]
    fn filters_intersect() {
        assert_eq!(
            intersect(&[(0, 100)], &[(10, 20), (90, 200)]),
            [(10, 20), (90, 100)]
        );
        assert!(intersect(&[(0, 5)], &[(6, 9)]).is_empty());
    }
}
