//! Several reports read together (the ranks of one job, on one host or
//! many) and the offsets that put their times on one timeline.
//!
//! Every time in a report is its host's CLOCK_MONOTONIC. The common
//! timeline is the first report's CLOCK_MONOTONIC; each report gets the
//! offset that carries its times onto it, found the best way its metadata
//! (`metadata.clock`) allows:
//! - same `boot_id` as the first report: one clock, offset 0, exact;
//! - another boot or host: through CLOCK_REALTIME (each report's tight
//!   realtime/monotonic pair), as good as the hosts' NTP errors and the
//!   pairs' gaps;
//! - a report without `clock` (older asys): through the realtime and
//!   monotonic times its recording started at, read at slightly different
//!   moments and with no error known.
use std::collections::BTreeMap;

use super::{ReportError, container::Container, metadata::Metadata};

/// How well a set of reports is aligned: the worst of its members.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Alignment {
    /// Every report was recorded since the same boot of one host.
    SameBoot,
    /// Some were not; their offsets come through CLOCK_REALTIME, each off by
    /// at most `error_ns` (NTP estimated errors and the pairs' gaps).
    Realtime { error_ns: i64, synchronized: bool },
    /// Some report lacks clock data: offsets from start times only.
    StartTimes,
}

impl Alignment {
    /// The line the tools print about it.
    pub fn message(&self) -> String {
        match self {
            Self::SameBoot => "aligned by shared monotonic clock (same boot)".into(),
            Self::Realtime {
                error_ns,
                synchronized: true,
            } => format!(
                "aligned by CLOCK_REALTIME; hosts' NTP error ≤ {} us",
                (error_ns + 999) / 1000
            ),
            // An unsynchronised kernel's error estimates are its defaults
            // (16 s), not measurements: no bound is claimed.
            Self::Realtime { .. } => {
                "aligned by CLOCK_REALTIME; a host's clock is not NTP-synchronised: error unknown"
                    .into()
            }
            Self::StartTimes => {
                "no shared clock: aligned by report start times only, ± unknown".into()
            }
        }
    }

    fn worse(self, other: Self) -> Self {
        use Alignment::*;
        match (self, other) {
            (StartTimes, _) | (_, StartTimes) => StartTimes,
            (
                Realtime {
                    error_ns: a,
                    synchronized: sa,
                },
                Realtime {
                    error_ns: b,
                    synchronized: sb,
                },
            ) => Realtime {
                error_ns: a.max(b),
                synchronized: sa && sb,
            },
            (r @ Realtime { .. }, SameBoot) | (SameBoot, r @ Realtime { .. }) => r,
            (SameBoot, SameBoot) => SameBoot,
        }
    }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC of a report, and the error of
/// that difference (None: unknown).
fn realtime_minus_monotonic(m: &Metadata) -> (i64, Option<i64>) {
    match &m.clock {
        Some(c) => {
            // NTP's estimate bounds the realtime clock's error (maxerror
            // when the kernel has no estimate); the pair's gap bounds the
            // reading's own.
            let ntp_us = if c.ntp_esterror_us > 0 {
                c.ntp_esterror_us
            } else {
                c.ntp_maxerror_us
            };
            (
                c.realtime_ns - c.monotonic_ns,
                Some(ntp_us.max(0).saturating_mul(1000) + c.pair_gap_ns),
            )
        }
        None => (m.start_realtime_ns - m.start_monotonic_ns, None),
    }
}

/// Each report's offset onto the first one's CLOCK_MONOTONIC (add it to
/// the report's times), and how well they are aligned.
pub fn align(metas: &[&Metadata]) -> (Vec<i64>, Alignment) {
    let Some(first) = metas.first() else {
        return (Vec::new(), Alignment::SameBoot);
    };
    let boot = |m: &Metadata| {
        m.clock
            .as_ref()
            .map(|c| c.boot_id.clone())
            .filter(|b| !b.is_empty())
    };
    let (first_rt, first_err) = realtime_minus_monotonic(first);
    let mut how = Alignment::SameBoot;
    let mut offsets = Vec::with_capacity(metas.len());
    for m in metas {
        if boot(m).is_some() && boot(m) == boot(first) {
            offsets.push(0);
            continue;
        }
        let (rt, err) = realtime_minus_monotonic(m);
        offsets.push(rt - first_rt);
        how = how.worse(match (err, first_err) {
            (Some(a), Some(b)) => Alignment::Realtime {
                error_ns: a + b,
                synchronized: [m, first]
                    .iter()
                    .all(|x| x.clock.as_ref().is_some_and(|c| c.ntp_synchronized)),
            },
            _ => Alignment::StartTimes,
        });
    }
    (offsets, how)
}

/// One report of a set.
pub struct Member {
    pub report: Container,
    /// Added to the report's times, carries them onto the set's timeline.
    pub offset_ns: i64,
    /// The report's file name, as tables name it.
    pub name: String,
    /// Each process's rank (pid → rank), from the `processes` table.
    pub ranks: BTreeMap<u32, u32>,
}

/// Reports opened together, aligned.
pub struct ReportSet {
    pub members: Vec<Member>,
    pub alignment: Alignment,
}

impl ReportSet {
    /// The set of reports already opened (an SQLite export read back into a
    /// report included), aligned.
    pub fn of(reports: Vec<Container>) -> Result<Self, ReportError> {
        let metas: Vec<&Metadata> = reports.iter().map(|r| &r.metadata).collect();
        let (offsets, alignment) = align(&metas);
        let mut members = Vec::with_capacity(reports.len());
        for (report, offset_ns) in reports.into_iter().zip(offsets) {
            let name = report
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let ranks = crate::report::read::processes::process_ranks(&report)?;
            members.push(Member {
                report,
                offset_ns,
                name,
                ranks,
            });
        }
        Ok(Self { members, alignment })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::metadata::ClockSample;

    fn meta(boot: &str, rt: i64, mono: i64, err_us: i64, sync: bool) -> Metadata {
        Metadata {
            start_realtime_ns: rt + 7,
            start_monotonic_ns: mono,
            clock: Some(ClockSample {
                boot_id: boot.into(),
                realtime_ns: rt,
                monotonic_ns: mono,
                pair_gap_ns: 40,
                ntp_synchronized: sync,
                ntp_esterror_us: err_us,
                ntp_maxerror_us: 16_000,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_same_boot_shares_the_monotonic_clock_exactly() {
        // The realtime pairs disagree (NTP stepped between the recordings):
        // with one boot that must not matter.
        let a = meta("b1", 1_000_000, 500, 10, true);
        let b = meta("b1", 9_000_000, 600, 10, true);
        let (off, how) = align(&[&a, &b]);
        assert_eq!(off, [0, 0]);
        assert_eq!(how, Alignment::SameBoot);
        assert_eq!(
            how.message(),
            "aligned by shared monotonic clock (same boot)"
        );
    }

    #[test]
    fn another_boot_goes_through_realtime_with_its_error() {
        let a = meta("b1", 1_000_000_000, 100, 20, true);
        // The other host booted 50 ns.. later: its monotonic is 1000 behind
        // for the same realtime.
        let b = meta("b2", 1_000_000_000, -900, 30, true);
        let (off, how) = align(&[&a, &b]);
        assert_eq!(off, [0, 1000]);
        // 20 + 30 us of NTP error and two 40 ns pair gaps.
        assert_eq!(
            how,
            Alignment::Realtime {
                error_ns: 50_080,
                synchronized: true
            }
        );
        assert_eq!(
            how.message(),
            "aligned by CLOCK_REALTIME; hosts' NTP error ≤ 51 us"
        );
        let c = meta("b3", 1_000_000_000, 0, 30, false);
        let (_, how) = align(&[&a, &c]);
        assert_eq!(
            how.message(),
            "aligned by CLOCK_REALTIME; a host's clock is not NTP-synchronised: error unknown"
        );
    }

    #[test]
    fn a_report_without_clock_data_is_flagged() {
        let a = meta("b1", 1_000_000_000, 100, 20, true);
        let old = Metadata {
            start_realtime_ns: 2_000_000_000,
            start_monotonic_ns: 300,
            ..Default::default()
        };
        let (off, how) = align(&[&a, &old]);
        assert_eq!(off, [0, (2_000_000_000 - 300) - (1_000_000_000 - 100)]);
        assert_eq!(how, Alignment::StartTimes);
        assert_eq!(
            how.message(),
            "no shared clock: aligned by report start times only, ± unknown"
        );
    }
}
