//! Capture ranges (`-c`, `-p`, `--capture-range-end`), shared by `profile`
//! and `attach`.
use clap::Args;

use crate::settings::{CaptureEnd, RecordSettings};
use asys_report::recorded_settings::ApiProbes;
use asys_report::trace_items::TraceItem;

#[derive(Args, Debug, Clone)]
pub struct CaptureArgs {
    /// What starts and stops collection: none, hggcProfilerApi
    /// (hggcProfilerStart/Stop, and cudaProfilerStart/Stop with -t cuda), or
    /// hgtx (the range -p names; nvtx with -t nvtx).
    #[arg(short = 'c', long = "capture-range", default_value = "none", value_name = "none|hggcProfilerApi|hgtx", value_parser = parse_capture_range)]
    pub capture_range: CaptureSource,

    /// With -c hgtx: the range that starts and stops collection: `range`
    /// (default domain), `range@domain`, or `range@*` (any domain).
    #[arg(short = 'p', long = "hgtx-capture", visible_alias = "nvtx-capture", value_name = "range[@domain]", value_parser = crate::apis::HgtxRange::parse)]
    pub hgtx_capture: Option<crate::apis::HgtxRange>,

    /// What the end of the capture range does: none (recording goes on),
    /// stop (collection ends, the application runs on), stop-shutdown (the
    /// application is ended too), repeat[:N] / repeat-shutdown:N (a report
    /// per range), merge[:N] / merge-shutdown:N (all ranges in one report).
    #[arg(long = "capture-range-end", default_value = "stop-shutdown", value_name = "mode", value_parser = parse_capture_end)]
    pub capture_range_end: CaptureEnd,
}

/// `-c`: where capture ranges come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureSource {
    None,
    ProfilerApi,
    Hgtx,
}

impl CaptureArgs {
    pub fn enabled(&self) -> bool {
        self.capture_range != CaptureSource::None
    }

    /// Fails on options that do not go together.
    pub fn check(
        &self,
        items: &[TraceItem],
        common: &super::collection::CollectionArgs,
    ) -> anyhow::Result<()> {
        if self.enabled() && common.api_probes == ApiProbes::Site {
            anyhow::bail!("-c needs --api-probes entry");
        }
        self.check_pairing()?;
        if self.capture_range == CaptureSource::Hgtx {
            needs_hgtx(items)?;
        }
        Ok(())
    }

    /// -c and -p go together.
    pub fn check_pairing(&self) -> anyhow::Result<()> {
        match (self.capture_range, &self.hgtx_capture) {
            (CaptureSource::Hgtx, None) => {
                anyhow::bail!("-c hgtx needs -p/--hgtx-capture (the range that starts collection)")
            }
            (CaptureSource::None | CaptureSource::ProfilerApi, Some(_)) => {
                anyhow::bail!("-p/--hgtx-capture needs -c hgtx")
            }
            _ => Ok(()),
        }
    }

    pub fn apply(&self, settings: &mut RecordSettings) {
        settings.capture = self.enabled().then_some(self.capture_range_end);
        settings.capture_hgtx = self.hgtx_capture.clone();
    }
}

/// `-c hgtx` sees ranges through the hgtx (or nvtx) probes.
pub fn needs_hgtx(items: &[TraceItem]) -> anyhow::Result<()> {
    if items
        .iter()
        .any(|i| matches!(i, TraceItem::Hgtx | TraceItem::Nvtx))
    {
        Ok(())
    } else {
        anyhow::bail!("-c hgtx needs -t hgtx (or nvtx): the ranges are seen through it")
    }
}

fn parse_capture_range(s: &str) -> Result<CaptureSource, String> {
    match s {
        "none" => Ok(CaptureSource::None),
        "hggcProfilerApi" | "cudaProfilerApi" => Ok(CaptureSource::ProfilerApi),
        "hgtx" | "nvtx" => Ok(CaptureSource::Hgtx),
        _ => Err(format!(
            "unknown capture range '{s}' (available: none, hggcProfilerApi, hgtx)"
        )),
    }
}

/// `repeat[:N]`, `repeat-shutdown:N`, `merge[:N]`, `merge-shutdown:N`: the
/// number of ranges (at least 1) and whether the application is ended.
fn parse_counted(s: &str, mode: &str) -> Result<(Option<u32>, bool), String> {
    let (shutdown, n) = match s.split_once(':') {
        Some((m, n)) if m == mode => (false, Some(n)),
        Some((m, n)) if m == format!("{mode}-shutdown") => (true, Some(n)),
        None if s == mode => (false, None),
        None if s == format!("{mode}-shutdown") => {
            return Err(format!("'{s}' needs the number of ranges ({s}:N)"));
        }
        _ => return Err(format!("unknown --capture-range-end '{s}'")),
    };
    match n.map(str::parse::<u32>) {
        None => Ok((None, shutdown)),
        Some(Ok(n)) if n >= 1 => Ok((Some(n), shutdown)),
        Some(_) => Err(format!("the number of ranges in '{s}' must be at least 1")),
    }
}

pub fn parse_capture_end(s: &str) -> Result<CaptureEnd, String> {
    match s {
        "none" => Ok(CaptureEnd::None),
        "stop" => Ok(CaptureEnd::Stop),
        "stop-shutdown" => Ok(CaptureEnd::StopShutdown),
        _ if s.starts_with("repeat") => {
            parse_counted(s, "repeat").map(|(max, shutdown)| CaptureEnd::Repeat { max, shutdown })
        }
        _ if s.starts_with("merge") => {
            parse_counted(s, "merge").map(|(max, shutdown)| CaptureEnd::Merge { max, shutdown })
        }
        _ => Err(format!("unknown --capture-range-end '{s}'")),
    }
}
