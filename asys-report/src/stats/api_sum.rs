//! API summaries and traces (hggc_api_sum, osrt_sum, ...): any trace item's
//! table of API calls.
use std::collections::HashMap;

use arrow::array::Array;

use super::format::{Table, Value};
use crate::report::{ReportError, container::Container, reader, reader::Batch, schema::api};

/// Summary statistics of a set of durations, as nsys computes them.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub total: u64,
    pub count: u64,
    pub avg: f64,
    pub med: f64,
    pub min: u64,
    pub max: u64,
    /// Sample standard deviation (n - 1); 0 for a single value.
    pub stddev: f64,
}

/// Summarizes `v` (not empty). The median is exact (a selection, not a
/// sort); the variance is computed from exact integer sums, so it does not
/// depend on the order of `v`.
pub fn summarize<T: Copy + Ord + Into<u64>>(v: &mut [T]) -> Summary {
    let n = v.len();
    if n == 0 {
        return Summary {
            total: 0,
            count: 0,
            avg: 0.0,
            med: 0.0,
            min: 0,
            max: 0,
            stddev: 0.0,
        };
    }
    let (mut total, mut squares, mut min, mut max) = (0u128, 0u128, u64::MAX, 0u64);
    for &x in v.iter() {
        let x: u64 = x.into();
        total += x as u128;
        squares += (x as u128) * (x as u128);
        min = min.min(x);
        max = max.max(x);
    }
    let avg = total as f64 / n as f64;
    let (lower, mid, _) = v.select_nth_unstable(n / 2);
    let mid: u64 = (*mid).into();
    let med = if n % 2 == 1 {
        mid as f64
    } else {
        // The other middle value is the largest of the lower half.
        let below: u64 = lower.iter().copied().max().map_or(mid, Into::into);
        (below as f64 + mid as f64) / 2.0
    };
    let stddev = if n > 1 {
        // n·Σx² − (Σx)² is exact in u128 for any realistic durations; on
        // overflow fall back to the two-pass float formula.
        let n128 = n as u128;
        match n128
            .checked_mul(squares)
            .zip(total.checked_mul(total))
            .map(|(a, b)| a.saturating_sub(b))
        {
            Some(num) => (num as f64 / (n as f64 * (n - 1) as f64)).sqrt(),
            None => (v
                .iter()
                .map(|&x| (Into::<u64>::into(x) as f64 - avg).powi(2))
                .sum::<f64>()
                / (n - 1) as f64)
                .sqrt(),
        }
    } else {
        0.0
    };
    Summary {
        total: total.min(u64::MAX as u128) as u64,
        count: n as u64,
        avg,
        med,
        min,
        max,
        stddev,
    }
}

/// The timing columns every `*_sum` report starts with, for one group.
pub fn time_columns(s: &Summary, grand_total: u64) -> Vec<Value> {
    let pct = if grand_total > 0 {
        s.total as f64 * 100.0 / grand_total as f64
    } else {
        0.0
    };
    vec![
        Value::Float(pct),
        Value::Int(s.total as i64),
        Value::Int(s.count as i64),
        Value::Float(s.avg),
        Value::Float(s.med),
        Value::Int(s.min as i64),
        Value::Int(s.max as i64),
        Value::Float(s.stddev),
    ]
}

/// Headers of [`time_columns`]; `count` names the third column.
pub fn time_headers(count: &'static str) -> Vec<&'static str> {
    vec![
        "Time (%)",
        "Total Time (ns)",
        count,
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
    ]
}

/// Summaries of grouped durations, longest total first (ties by key), with
/// the grand total the percentages are of.
pub fn summarize_groups<K: Ord>(groups: HashMap<K, Vec<u64>>) -> (Vec<(K, Summary)>, u64) {
    let mut sums: Vec<(K, Summary)> = groups
        .into_iter()
        .map(|(k, mut v)| (k, summarize(&mut v)))
        .collect();
    let grand = sums
        .iter()
        .fold(0u64, |a, (_, s)| a.saturating_add(s.total));
    sums.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(&b.0)));
    (sums, grand)
}

/// Durations of one group: u32 while every one fits (API calls shorter
/// than 4.3 s), halving the memory a large report's medians need.
#[derive(Default)]
pub struct Durations(Vec<u32>, Vec<u64>);

impl Durations {
    #[inline]
    pub fn push(&mut self, d: u64) {
        match u32::try_from(d) {
            Ok(d) if self.1.is_empty() => self.0.push(d),
            _ => {
                if self.1.is_empty() {
                    self.1 = self.0.drain(..).map(u64::from).collect();
                    self.0 = Vec::new();
                }
                self.1.push(d);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty() && self.1.is_empty()
    }

    pub fn append(&mut self, mut other: Durations) {
        if self.1.is_empty() && other.1.is_empty() {
            if self.0.is_empty() {
                self.0 = other.0;
            } else {
                self.0.reserve_exact(other.0.len());
                self.0.append(&mut other.0);
            }
            return;
        }
        for d in other.0.drain(..).map(u64::from).chain(other.1.drain(..)) {
            self.push(d);
        }
    }

    pub fn summarize(&mut self) -> Summary {
        if self.1.is_empty() {
            summarize(&mut self.0)
        } else {
            summarize(&mut self.1)
        }
    }
}

/// Durations by name id: a dense vector for ids of the string table (every
/// id a recorder writes), a map for any other.
pub struct ByName {
    dense: Vec<Durations>,
    other: HashMap<u32, Durations>,
}

impl ByName {
    pub fn new(names: usize) -> Self {
        Self {
            dense: (0..names).map(|_| Durations::default()).collect(),
            other: HashMap::new(),
        }
    }

    #[inline]
    fn push(&mut self, id: u32, d: u64) {
        match self.dense.get_mut(id as usize) {
            Some(v) => v.push(d),
            None => self.other.entry(id).or_default().push(d),
        }
    }

    fn add_batch(&mut self, b: &Batch) -> Result<(), ReportError> {
        let v = api::View(b);
        let (start, end, name) = (v.start()?, v.end()?, v.name_id()?);
        for ((&s, &e), &id) in start.iter().zip(end).zip(name) {
            self.push(id, super::duration(s, e));
        }
        Ok(())
    }

    fn merge(&mut self, other: ByName) {
        for (mine, theirs) in self.dense.iter_mut().zip(other.dense) {
            mine.append(theirs);
        }
        for (id, v) in other.other {
            self.other.entry(id).or_default().append(v);
        }
    }

    /// Every group that has calls, by id.
    fn into_groups(self) -> impl Iterator<Item = (u32, Durations)> {
        self.dense
            .into_iter()
            .enumerate()
            .map(|(id, v)| (id as u32, v))
            .chain(self.other)
            .filter(|(_, v)| !v.is_empty())
    }
}

/// How many threads decode a large table's row groups.
fn decode_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

pub fn api_sum(report: &Container, table: &str, title: &str) -> Result<Table, ReportError> {
    let strings = reader::string_table(report)?;
    let mut by_name = ByName::new(strings.values().len());
    if let Some(t) = reader::open(report, table)? {
        let parts = t.fold_parallel(
            &[api::START, api::END, api::NAME_ID],
            decode_threads(),
            || ByName::new(strings.values().len()),
            ByName::add_batch,
        )?;
        for p in parts {
            by_name.merge(p);
        }
    }
    // Grouped by name: ids outside the string table all read "?".
    let mut named: HashMap<String, Durations> = HashMap::new();
    for (id, v) in by_name.into_groups() {
        let name = strings.get(id).unwrap_or("?").to_string();
        match named.entry(name) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().append(v),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
            }
        }
    }
    let mut sums: Vec<(String, Summary)> = named
        .into_iter()
        .map(|(k, mut v)| (k, v.summarize()))
        .collect();
    let grand = sums
        .iter()
        .fold(0u64, |a, (_, s)| a.saturating_add(s.total));
    sums.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(&b.0)));
    let rows = sums
        .into_iter()
        .map(|(name, s)| {
            let mut row = time_columns(&s, grand);
            row.push(Value::Str(name));
            row
        })
        .collect();
    let mut headers = time_headers("Num Calls");
    headers.push("Name");
    Ok(Table {
        stream: None,
        title: title.into(),
        headers,
        rows,
    })
}

/// pccl operations: time and bytes per operation over all ranks.
pub fn pccl_op_sum(report: &Container) -> Result<Table, ReportError> {
    const OPS: &[&str] = &[
        "pcclAllReduce",
        "pcclAllGather",
        "pcclBroadcast",
        "pcclReduceScatter",
        "pcclSend",
        "pcclRecv",
    ];
    let strings = reader::string_table(report)?;
    let mut by_op: HashMap<String, (Vec<u64>, u64, std::collections::BTreeSet<u32>)> =
        HashMap::new();
    let columns = [api::START, api::END, api::NAME_ID, api::BYTES, api::PID];
    let table = crate::trace_items::TraceItem::Pccl.table();
    for b in api::scan(report, &table, &columns)? {
        let b = b?;
        let v = api::View(&b);
        let (start, end, name, pid) = (v.start()?, v.end()?, v.name_id()?, v.pid()?);
        let bytes = v.bytes()?;
        for i in 0..b.num_rows() {
            let n = strings.get(name[i]).unwrap_or("?");
            if !OPS.contains(&n) {
                continue;
            }
            let e = by_op.entry(n.to_string()).or_default();
            e.0.push(super::duration(start[i], end[i]));
            e.1 =
                e.1.saturating_add(if bytes.is_null(i) { 0 } else { bytes.value(i) });
            e.2.insert(pid[i]);
        }
    }
    let grand: u64 = by_op
        .values()
        .flat_map(|v| v.0.iter())
        .fold(0u64, |a, &d| a.saturating_add(d));
    let mut rows: Vec<(u64, Vec<Value>)> = by_op
        .into_iter()
        .map(|(name, (mut durations, bytes, pids))| {
            let s = summarize(&mut durations);
            let mut row = time_columns(&s, grand);
            row.extend([
                Value::Int(i64::try_from(bytes).unwrap_or(i64::MAX)),
                Value::Int(pids.len() as i64),
                Value::Str(name),
            ]);
            (s.total, row)
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    Ok(Table {
        stream: None,
        title: "PCCL Operation Summary (pccl_op_sum)".into(),
        headers: {
            let mut h = time_headers("Num Calls");
            h.extend(["Total Bytes", "Processes", "Name"]);
            h
        },
        rows: rows.into_iter().map(|(_, r)| r).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computation() {
        let s = summarize(&mut [4u64, 1, 3, 2]);
        assert_eq!((s.total, s.count, s.min, s.max), (10, 4, 1, 4));
        assert_eq!(s.avg, 2.5);
        assert_eq!(s.med, 2.5);
        assert!((s.stddev - 1.2909944).abs() < 1e-6);
        let one = summarize(&mut [7u64]);
        assert_eq!((one.med, one.stddev), (7.0, 0.0));
    }

    /// The streaming groups give what a sort of all durations gives, also
    /// when a group outgrows u32 and when thread parts are merged.
    #[test]
    fn durations_match_a_full_sort() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = Vec::new();
        let (mut a, mut b) = (Durations::default(), Durations::default());
        for i in 0..10_001u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // One value past u32 half-way through.
            let v = if i == 5_000 { 5 << 32 } else { rng % 100_000 };
            values.push(v);
            if i % 2 == 0 { a.push(v) } else { b.push(v) }
        }
        a.append(b);
        let got = a.summarize();
        values.sort_unstable();
        let n = values.len();
        let avg = values.iter().sum::<u64>() as f64 / n as f64;
        let var = values
            .iter()
            .map(|&x| (x as f64 - avg).powi(2))
            .sum::<f64>()
            / (n - 1) as f64;
        assert_eq!(got.count, n as u64);
        assert_eq!(got.total, values.iter().sum::<u64>());
        assert_eq!((got.min, got.max), (values[0], values[n - 1]));
        assert_eq!(got.med, values[n / 2] as f64);
        assert!((got.stddev - var.sqrt()).abs() < 1e-6 * var.sqrt());
        let mut even = [5u32, 1, 9, 3];
        assert_eq!(summarize(&mut even).med, 4.0);
    }
}
