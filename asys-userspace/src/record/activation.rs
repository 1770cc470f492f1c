//! `-y @TIME` and `-y /PERIOD`: recording that starts at one wall-clock
//! instant, the same on every host of a job (wprof's aligned activation).
//! Set-up (loading, probing, launching) happens before that instant, with
//! recording off; at the instant the recording flag goes on and the window
//! opens. The window's start is the instant itself, on CLOCK_MONOTONIC, and
//! the collector leaves out whatever the kernel stamped before it, so
//! timer latency does not move the window: reports of several hosts hold
//! the same wall-clock window to within their clocks' agreement.
use std::time::Duration;

use crate::clock::{monotonic_ns, realtime_ns};
pub use crate::settings::Activation;

/// How `-y` starts collection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DelaySpec {
    /// `-y SECONDS`: that long after the application started.
    After(Duration),
    /// `-y @TIME` or `-y /PERIOD`, resolved to an instant on CLOCK_REALTIME.
    Aligned(Activation),
}

/// Why a `-y` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DelayError {
    #[error(
        "expected seconds, @TIME (HH:MM:SS or YYYY-MM-DDTHH:MM:SS, local) or /PERIOD (10s, 500ms, 2m), got '{0}'"
    )]
    Form(String),
    #[error("duration must be positive, got '{0}'")]
    NotPositive(String),
    #[error("{0} has already passed")]
    Passed(String),
    #[error("{0} is not a time of day (local)")]
    NoSuchTime(String),
}

/// Parses `-y`'s value: seconds, `@TIME` or `/PERIOD`, resolved against
/// `now_ns` (CLOCK_REALTIME). `/PERIOD` is the first multiple of PERIOD
/// since the epoch after `now_ns`.
pub fn parse(s: &str, now_ns: i64) -> Result<DelaySpec, DelayError> {
    if let Some(period) = s.strip_prefix('/') {
        let p = period_ns(period).ok_or_else(|| DelayError::Form(s.to_owned()))?;
        if p <= 0 {
            return Err(DelayError::NotPositive(s.to_owned()));
        }
        return Ok(DelaySpec::Aligned(Activation {
            spec: s.to_owned(),
            realtime_ns: next_multiple(now_ns, p),
            period_ns: Some(p),
        }));
    }
    if let Some(time) = s.strip_prefix('@') {
        let at = local_time_ns(time, now_ns).ok_or_else(|| match time_form(time) {
            true => DelayError::NoSuchTime(s.to_owned()),
            false => DelayError::Form(s.to_owned()),
        })?;
        if at <= now_ns {
            return Err(DelayError::Passed(s.to_owned()));
        }
        return Ok(DelaySpec::Aligned(Activation {
            spec: s.to_owned(),
            realtime_ns: at,
            period_ns: None,
        }));
    }
    let v: f64 = s.parse().map_err(|_| DelayError::Form(s.to_owned()))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(DelayError::NotPositive(s.to_owned()));
    }
    Duration::try_from_secs_f64(v)
        .map(DelaySpec::After)
        .map_err(|_| DelayError::Form(s.to_owned()))
}

/// The first multiple of `period` strictly after `now`.
fn next_multiple(now: i64, period: i64) -> i64 {
    (now.div_euclid(period) + 1) * period
}

/// `10s`, `500ms`, `2m`, `1h`, `10` (seconds), with a fraction allowed.
fn period_ns(s: &str) -> Option<i64> {
    let (number, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let v: f64 = number.parse().ok()?;
    let ns = v * scale;
    (ns.is_finite() && ns.abs() < 9e18).then_some(ns as i64)
}

/// Whether `s` has the form of a time (so that a parse failure is a time
/// that does not exist, such as one skipped by a daylight-saving change).
fn time_form(s: &str) -> bool {
    parse_naive(s, chrono::Local::now().date_naive()).is_some()
}

fn parse_naive(s: &str, today: chrono::NaiveDate) -> Option<chrono::NaiveDateTime> {
    use chrono::{NaiveDateTime, NaiveTime};
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t);
        }
    }
    for f in ["%H:%M:%S%.f", "%H:%M"] {
        if let Ok(t) = NaiveTime::parse_from_str(s, f) {
            return Some(today.and_time(t));
        }
    }
    None
}

/// `@TIME` in local time (the TZ of asys), or with an offset (`Z`,
/// `+08:00`), as ns since the epoch. A time of day alone is today's.
fn local_time_ns(s: &str, now_ns: i64) -> Option<i64> {
    use chrono::{DateTime, Local, TimeZone};
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return t.timestamp_nanos_opt();
    }
    let today = DateTime::from_timestamp_nanos(now_ns)
        .with_timezone(&Local)
        .date_naive();
    let naive = parse_naive(s, today)?;
    Local
        .from_local_datetime(&naive)
        .earliest()?
        .timestamp_nanos_opt()
}

/// How long before the instant the recording flag goes on: the collector
/// leaves out what was stamped before the instant, so turning it on early
/// costs nothing, while turning it on late would lose calls.
const EARLY: Duration = Duration::from_millis(5);

/// Waits for the instant of `a` (or, where set-up ran past it, the next
/// multiple of its period), turns recording on just before it, and returns
/// the window's start: (realtime, monotonic) of the instant. Returns once
/// the instant has passed, so that `--duration` counts from it.
pub async fn open_at(
    tracer: &mut crate::kernel::Tracer,
    a: &Activation,
) -> Result<(i64, i64), OpenError> {
    let mut at = a.realtime_ns;
    let margin = EARLY.as_nanos() as i64;
    if realtime_ns() + margin > at {
        match a.period_ns {
            Some(p) => {
                let late = at;
                at = next_multiple(realtime_ns() + margin, p);
                eprintln!(
                    "asys: warning: set-up ended after the start {} named ({} ns late); \
                     recording starts at the next multiple, {} s later",
                    a.spec,
                    realtime_ns() - late,
                    (at - late) as f64 / 1e9
                );
            }
            None => return Err(OpenError::Late(a.spec.clone())),
        }
    }
    let wait = |until: i64| Duration::from_nanos((until - realtime_ns()).max(0) as u64);
    tokio::time::sleep(wait(at - margin)).await;
    tracer.control.set_recording(true)?;
    // The instant on CLOCK_MONOTONIC: both clocks read back to back.
    let (real, mono) = (realtime_ns(), monotonic_ns());
    let start_mono = mono + (at - real);
    tokio::time::sleep(wait(at) + Duration::from_micros(100)).await;
    Ok((at, start_mono))
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("set-up ended after {0}: recording could not start then")]
    Late(String),
    #[error(transparent)]
    Tracer(#[from] crate::kernel::TracerError),
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_444_137_743_897_797;

    #[test]
    fn periods_resolve_to_the_next_multiple_since_the_epoch() {
        let DelaySpec::Aligned(a) = parse("/10s", NOW).expect("parse") else {
            panic!("not aligned");
        };
        assert_eq!(a.realtime_ns % 10_000_000_000, 0);
        assert!(a.realtime_ns > NOW && a.realtime_ns - NOW <= 10_000_000_000);
        assert_eq!(a.period_ns, Some(10_000_000_000));
        let DelaySpec::Aligned(b) = parse("/500ms", NOW).expect("parse") else {
            panic!("not aligned");
        };
        assert_eq!(b.realtime_ns % 500_000_000, 0);
        assert!(matches!(parse("/2", NOW), Ok(DelaySpec::Aligned(_))));
        assert_eq!(
            parse("/0s", NOW),
            Err(DelayError::NotPositive("/0s".into()))
        );
        assert!(matches!(parse("/10x", NOW), Err(DelayError::Form(_))));
    }

    #[test]
    fn seconds_still_mean_after_the_start_and_times_must_be_ahead() {
        assert_eq!(
            parse("2.5", NOW),
            Ok(DelaySpec::After(Duration::from_millis(2500)))
        );
        assert_eq!(parse("-1", NOW), Err(DelayError::NotPositive("-1".into())));
        let DelaySpec::Aligned(a) = parse("@2030-01-01T00:00:00Z", NOW).expect("parse") else {
            panic!("not aligned");
        };
        assert_eq!(a.realtime_ns, 1_893_456_000_000_000_000);
        assert_eq!(
            parse("@2020-01-01T00:00:00Z", NOW),
            Err(DelayError::Passed("@2020-01-01T00:00:00Z".into()))
        );
        assert!(matches!(parse("@noon", NOW), Err(DelayError::Form(_))));
        assert!(matches!(
            parse("@2030-01-01T10:00:00", NOW),
            Ok(DelaySpec::Aligned(_))
        ));
    }
}
