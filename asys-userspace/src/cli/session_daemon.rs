//! The session daemon: `asys __session-daemon NAME`, started by the first
//! `launch` or `start` of a session. It holds the session's name and id,
//! serves requests on its control socket (a plain thread), and drives the
//! tracer (the tokio runtime): probes load when the application launches and
//! stay until the session ends; `start`/`stop` turn recording on and off and
//! each `stop` writes one report.
use std::{
    io::Write as _,
    os::fd::{AsRawFd, OwnedFd, RawFd},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use clap::Parser as _;

use crate::session::{
    protocol::{CaptureSpec, Info, READY_FD, Request, Response, State},
    server::{BindError, Job, bind, serve},
};
use crate::{
    clock::{monotonic_ns, realtime_ns},
    collect::{Collector, Limits, Stop},
    kernel::Tracer,
    record::{self, Arming, Recording, writing::TempDir},
    settings::{CaptureEnd, RecordSettings},
    sink::recorder::Recorder,
    spawn,
};
use asys_report::recorded_settings::{Mode, Scope};

/// Runs a session daemon until the session ends.
pub fn main(name: &str) -> anyhow::Result<u8> {
    // Its arguments are checked before anything is made: started by hand,
    // or with a name `launch`/`start` would refuse (an empty one), a daemon
    // would make a socket nobody can name and wait on it for ever.
    crate::session::check_name(name)?;
    if !ready_pipe_inherited() {
        anyhow::bail!(
            "__session-daemon is started by 'asys launch' and 'asys start', not by hand \
             (descriptor {READY_FD} is not the pipe they hand it)"
        );
    }
    // SAFETY: the command that started this daemon put its pipe on READY_FD
    // (spawn_daemon's dup2) for it alone, and ready_pipe_inherited saw it
    // open and a pipe; nothing else owns the descriptor.
    let mut ready = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(READY_FD) };
    // Removed when this returns, while the listener still listens.
    let (listener, _socket_file, id) = match bind(name) {
        Ok(b) => b,
        Err(BindError::Taken) => {
            let _ = writeln!(ready, "taken -");
            return Ok(1);
        }
        Err(e) => {
            let _ = writeln!(ready, "error {e}");
            return Ok(1);
        }
    };
    let info = Arc::new(Mutex::new(Info {
        id,
        name: name.to_string(),
        owner_uid: crate::runtime_dir::euid(),
        daemon_pid: std::process::id(),
        state: State::Created,
        app_pid: None,
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        reports: 0,
        failures: Vec::new(),
    }));
    let (jobs_tx, jobs_rx) = tokio::sync::mpsc::channel::<Job>(8);
    let (last_tx, last_rx) = std::sync::mpsc::channel::<()>();
    {
        let info = info.clone();
        std::thread::spawn(move || serve(listener, info, jobs_tx, last_tx));
    }
    let _ = writeln!(ready, "ok {id}");
    drop(ready);
    let runtime = crate::cli::runtime()?;
    let answered_last = runtime.block_on(drive(jobs_rx, info));
    // The request that ended the session gets its answer before we go.
    if answered_last {
        let _ = last_rx.recv_timeout(Duration::from_secs(5));
    }
    Ok(0)
}

/// Whether READY_FD is open and a pipe, as `spawn_daemon` leaves it.
fn ready_pipe_inherited() -> bool {
    // SAFETY: stat is plain integers; zeroed is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only looks the descriptor up and writes the stat it is given.
    let rc = unsafe { libc::fstat(READY_FD, &mut st) };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

fn set_state(info: &Mutex<Info>, state: State) {
    if let Ok(mut i) = info.lock() {
        i.state = state;
    }
}

/// Where a report goes, once `start` said so, and the capture range that
/// gates it.
#[derive(Debug, Clone)]
struct Destination {
    output: PathBuf,
    force: bool,
    capture: Option<CaptureSpec>,
}

/// Drives the session; returns whether a request ended it (and so waits for
/// its answer to go out).
async fn drive(mut jobs: tokio::sync::mpsc::Receiver<Job>, info: Arc<Mutex<Info>>) -> bool {
    // Before the application launches only requests happen.
    let mut pending: Option<Destination> = None;
    while let Some(job) = jobs.recv().await {
        let reply = |r: Response| {
            let _ = job.reply.send(r);
        };
        match &job.request {
            Request::Info => reply(Response::ok("")),
            Request::Launch { .. } => {
                let Job {
                    request,
                    fds,
                    reply,
                    ..
                } = job;
                match Live::launch(request, fds, pending.take(), info.clone()).await {
                    Ok(mut live) => {
                        let pid = live.app_pid;
                        let _ = reply.send(Response::ok(format!("launched pid {pid}")));
                        live.commands(jobs);
                        return live.run().await;
                    }
                    Err(e) => {
                        let _ = reply.send(Response::err(format!("{e:#}")));
                        // A failed launch ends a session that had nothing else.
                        if pending.is_none() {
                            return false;
                        }
                    }
                }
            }
            Request::Start {
                output,
                force,
                capture,
            } => {
                if pending.is_some() {
                    reply(Response::err(
                        "collection is already started; it begins when the application launches",
                    ));
                    continue;
                }
                pending = Some(Destination {
                    output: output.clone(),
                    force: *force,
                    capture: capture.clone(),
                });
                set_state(&info, State::StartPending);
                reply(Response::ok(
                    "collection begins when the application launches ('asys launch')",
                ));
            }
            Request::Stop => reply(Response::err(
                "the session is not collecting: no application was launched ('asys launch')",
            )),
            Request::Cancel => {
                if pending.take().is_some() {
                    set_state(&info, State::Created);
                    reply(Response::ok("collection cancelled"));
                } else {
                    reply(Response::err("the session is not collecting"));
                }
            }
            Request::Shutdown { .. } => {
                reply(Response::ok("session ended"));
                return true;
            }
        }
    }
    false
}

/// `--capture-range-end repeat`: a report per range, NAME.1, NAME.2, ...
struct Series {
    base: PathBuf,
    /// `-f`, and the capture range, of every report of the series.
    force: bool,
    capture: CaptureSpec,
    /// The number of the report being collected.
    index: u32,
    /// Ranges opened when it began (one that ends with none is not written).
    ranges_at_start: u32,
}

/// With `repeat`, the report of range i goes to NAME.i.asysrep.
fn begin_series(dest: &mut Destination) -> Option<Series> {
    let capture = dest.capture.clone()?;
    if !matches!(capture.end, CaptureEnd::Repeat { .. }) {
        return None;
    }
    let base = std::mem::take(&mut dest.output);
    dest.output = record::writing::repeat_path(&base, 1);
    Some(Series {
        base,
        force: dest.force,
        capture,
        index: 1,
        ranges_at_start: 0,
    })
}

/// A session whose application runs.
struct Live {
    info: Arc<Mutex<Info>>,
    settings: RecordSettings,
    tracer: Tracer,
    collector: Collector<Job>,
    rec: Recorder,
    rec_guard: TempDir,
    app_exit: Option<tokio::sync::oneshot::Receiver<i32>>,
    app_pid: u32,
    /// Set while collecting: where the report goes and when it began.
    collecting: Option<(Destination, i64, i64)>,
    /// Numbers the idle recorders' folders.
    idle_serial: u32,
    /// The reports of a `repeat` collection.
    series: Option<Series>,
    /// Failures no client has been told of yet (see [`Live::failed`]).
    untold: Vec<String>,
}

impl Live {
    async fn launch(
        request: Request,
        fds: Vec<OwnedFd>,
        start: Option<Destination>,
        info: Arc<Mutex<Info>>,
    ) -> anyhow::Result<Live> {
        let Request::Launch {
            argv,
            program,
            app_args,
            env,
            cwd,
            show_output,
        } = request
        else {
            unreachable!("only launch requests come here")
        };
        let cli = crate::cli::Cli::try_parse_from(&argv)?;
        let crate::cli::Command::Launch(args) = cli.command else {
            anyhow::bail!("not a launch command line");
        };
        let items = args.common.trace_items();
        let mut settings = args
            .common
            .settings(items, PathBuf::new(), Mode::Session, &argv);
        settings.wait = args.wait;
        // Context switches of the tree, as profile records them by default.
        if args.common.cpuctxsw.is_none() {
            settings.sched = Scope::ProcessTree;
        }
        let capture = start.as_ref().and_then(|d| d.capture.as_ref());
        if capture.is_some_and(|c| c.hgtx.is_some()) {
            crate::cli::capture::needs_hgtx(&settings.items)?;
        }
        let arming = match capture {
            Some(c) => Arming::AtCapture(c.hgtx.as_ref(), c.end),
            None if start.is_some() => Arming::Now,
            None => Arming::Later,
        };
        let Recording {
            mut tracer,
            collector,
        } = Recording::start(&mut settings, arming)?;
        // The application gets the caller's stdin, and its stdout and stderr
        // unless -w false.
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let stdio = match raw[..] {
            [i, o, e] if show_output => spawn::Stdio::Fds([i, o, e]),
            [i, _, _] => spawn::Stdio::Fds([i, null_fd(), null_fd()]),
            _ => spawn::Stdio::Quiet,
        };
        let program = if program.is_absolute() {
            program
        } else {
            cwd.join(program)
        };
        let id = info.lock().map(|i| i.id).unwrap_or(0);
        let (rec, rec_guard) = match &start {
            Some(dest) => record::writing::recorder_for(&dest.output)?,
            None => record::writing::fresh_recorder(idle_dir(id, 0)?)?,
        };
        let child = spawn::spawn_suspended_in(&program, &app_args, &env, stdio, &cwd)?;
        let (pid, rx) = record::start_launched(&mut tracer, child, &program)?;
        drop(fds);
        // A report named before launch may hold the pid (%p).
        let mut series = None;
        let collecting = start.map(|mut dest| {
            dest.output = crate::sink::report_path::fill_pid(&dest.output, pid);
            series = begin_series(&mut dest);
            (dest, realtime_ns(), monotonic_ns())
        });
        let mut live = Live {
            info,
            settings,
            tracer,
            collector,
            rec,
            rec_guard,
            app_exit: Some(rx),
            app_pid: pid,
            collecting,
            idle_serial: 0,
            untold: Vec::new(),
            series,
        };
        live.describe_collection()?;
        live.collector.state.tree.started(pid);
        if let Ok(mut i) = live.info.lock() {
            i.app_pid = Some(pid);
            i.state = match &live.collecting {
                Some((d, _, _)) if d.capture.is_some() => State::Armed,
                Some(_) => State::Collecting,
                None => State::Launched,
            };
        }
        Ok(live)
    }

    fn commands(&mut self, jobs: tokio::sync::mpsc::Receiver<Job>) {
        self.collector.commands = Some(jobs);
    }

    /// Collects, and answers requests, until the application is gone or the
    /// session is shut down. Returns whether a request ended it.
    async fn run(mut self) -> bool {
        let mut by_request = false;
        loop {
            let capture_end = self
                .collecting
                .as_ref()
                .and_then(|(d, _, _)| d.capture.as_ref())
                .map(|c| c.end);
            let limits = Limits {
                wait_all: self.settings.wait == crate::settings::Wait::All,
                stop_at_capture_end: capture_end.is_some_and(CaptureEnd::stops),
                ..Default::default()
            };
            let stop = self
                .collector
                .run(
                    &mut self.tracer,
                    &mut self.rec,
                    self.app_exit.as_mut(),
                    limits,
                )
                .await;
            match stop {
                Ok(Stop::Command) => {
                    let job = self.collector.command.take().expect("a command stopped it");
                    let (mut response, ends) = self.handle(job.request).await;
                    response.warnings = std::mem::take(&mut self.untold);
                    let _ = job.reply.send(response);
                    if ends {
                        by_request = true;
                        break;
                    }
                }
                Ok(Stop::CaptureEnded) => {
                    let end = capture_end.expect("only a capture range ends it so");
                    match record::series::after_stop(
                        Some(end),
                        false,
                        Stop::CaptureEnded,
                        self.collector.state.capture_ranges,
                    ) {
                        record::series::AfterStop::SameReport => continue,
                        // repeat: this range's report, then the next one's.
                        record::series::AfterStop::NextReport => {
                            if let Err(e) = self.finish_with(None, false, false) {
                                self.failed("a range's report could not be written", e);
                            }
                            if let Err(e) = self.next_in_series() {
                                self.failed("the next range could not begin", e);
                            }
                            continue;
                        }
                        record::series::AfterStop::Finish => {}
                    }
                    // The range's report; what followed its end is not in it.
                    if let Err(e) = self.finish_range() {
                        self.failed("the range's report could not be written", e);
                    }
                    self.series = None;
                    if !end.app_runs_on() {
                        self.end_app(Some(libc::SIGTERM)).await;
                        break;
                    }
                }
                Ok(Stop::AppExited(code)) => {
                    // The session ends with its application; what was being
                    // collected becomes a report.
                    if let Err(e) = self.finish(Some(code)) {
                        self.failed("the report could not be written", e);
                    }
                    break;
                }
                Ok(_) | Err(_) => {
                    if let Err(e) = stop {
                        self.failed("collecting failed", e.into());
                    }
                    if let Err(e) = self.finish(None) {
                        self.failed("the report could not be written", e);
                    }
                    self.end_app(Some(libc::SIGTERM)).await;
                    break;
                }
            }
        }
        for pid in self.tracer.processes.traced_pids() {
            self.tracer.processes.untrace(pid);
        }
        self.leave_untold();
        by_request
    }

    /// A write that failed with no client waiting for it: kept in the
    /// session's info (`sessions list`) and told with the next answer, so an
    /// error never vanishes with the daemon's /dev/null stderr.
    fn failed(&mut self, what: &str, e: anyhow::Error) {
        let line = format!("{what}: {}", super::entry::one_line(&e));
        if let Ok(mut i) = self.info.lock() {
            // The last few are enough to say what went wrong.
            if i.failures.len() >= 8 {
                i.failures.remove(0);
            }
            i.failures.push(line.clone());
        }
        self.untold.push(line);
    }

    /// Failures nobody asked about before the session ended are left in a
    /// note beside the session's socket, which the next `sessions list` or
    /// `status` prints and removes.
    fn leave_untold(&mut self) {
        if self.untold.is_empty() {
            return;
        }
        let (id, name) = match self.info.lock() {
            Ok(i) => (i.id, i.name.clone()),
            Err(_) => return,
        };
        if let Err(e) = crate::session::dir::leave_note(id, &name, &self.untold) {
            // Nowhere left to say it but the log of whoever reads stderr.
            eprintln!("asys session: {e}");
        }
        self.untold.clear();
    }

    /// Answers one request; says whether the session ends with it.
    async fn handle(&mut self, request: Request) -> (Response, bool) {
        match request {
            Request::Info => (Response::ok(""), false),
            Request::Launch { .. } => (
                Response::err(format!(
                    "the session already launched an application (pid {})",
                    self.app_pid
                )),
                false,
            ),
            Request::Start {
                output,
                force,
                capture,
            } => (
                self.start(Destination {
                    output,
                    force,
                    capture,
                }),
                false,
            ),
            Request::Stop if self.series_period_is_empty() => {
                let done = self.series.take().map_or(0, |s| s.index - 1);
                let _ = self.discard();
                (
                    Response::ok(format!(
                        "collection stopped: {done} range report(s) written; no range was open since"
                    )),
                    false,
                )
            }
            Request::Stop => match self.finish(None) {
                Ok(Some(report)) => (
                    Response {
                        ok: true,
                        message: format!("Generated:\n    {}", report.display()),
                        reports: vec![report],
                        ..Default::default()
                    },
                    false,
                ),
                Ok(None) => (
                    Response::err("the session is not collecting (start it with 'asys start')"),
                    false,
                ),
                Err(e) => (
                    Response::err(format!("writing the report failed: {e:#}")),
                    false,
                ),
            },
            Request::Cancel => {
                if self.collecting.is_none() {
                    return (Response::err("the session is not collecting"), false);
                }
                self.series = None;
                match self.discard() {
                    Ok(()) => (
                        Response::ok("collection cancelled; nothing was written"),
                        false,
                    ),
                    Err(e) => (Response::err(format!("{e:#}")), false),
                }
            }
            Request::Shutdown { signal } => {
                if self.series_period_is_empty() {
                    let _ = self.discard();
                }
                self.series = None;
                let written = self.finish(None);
                self.end_app(signal).await;
                match written {
                    Ok(report) => (
                        Response {
                            ok: true,
                            message: match &report {
                                Some(r) => format!("Generated:\n    {}", r.display()),
                                None => String::new(),
                            },
                            reports: report.into_iter().collect(),
                            ..Default::default()
                        },
                        true,
                    ),
                    Err(e) => (
                        Response::err(format!("writing the report failed: {e:#}")),
                        true,
                    ),
                }
            }
        }
    }

    fn start(&mut self, mut dest: Destination) -> Response {
        if self.collecting.is_some() {
            return Response::err("the session is already collecting (stop it with 'asys stop')");
        }
        let series = begin_series(&mut dest);
        if let Err(e) = crate::sink::report_path::check_destination(&dest.output, dest.force) {
            return Response::err(e.to_string());
        }
        let capture = dest.capture.clone();
        if let Some(c) = &capture
            && c.hgtx.is_some()
            && let Err(e) = crate::cli::capture::needs_hgtx(&self.settings.items)
        {
            return Response::err(format!("{e} (at asys launch)"));
        }
        let start = (realtime_ns(), monotonic_ns());
        let next = record::writing::begin_next_report(
            &self.settings_for(&dest),
            &[self.app_pid],
            start,
            &mut self.tracer,
            &mut self.collector,
        );
        (self.rec, self.rec_guard) = match next {
            Ok(r) => r,
            Err(e) => return Response::err(format!("{e:#}")),
        };
        // Ranges count from this start (merge:N, repeat:N, the metadata).
        self.collector.state.capture_ranges = 0;
        // Switches before this start were not recorded.
        self.collector.state.switches.restart();
        self.series = series;
        self.collecting = Some((dest, start.0, start.1));
        let armed = match &capture {
            Some(c) => self.tracer.control.arm_capture(c.hgtx.as_ref(), c.end),
            None => self.tracer.control.set_recording(true),
        };
        if let Err(e) = armed {
            self.collecting = None;
            return Response::err(format!("{e:#}"));
        }
        if capture.is_some() {
            set_state(&self.info, State::Armed);
            Response::ok("collection starts with the capture range")
        } else {
            set_state(&self.info, State::Collecting);
            Response::ok("collection started")
        }
    }

    /// Stops collecting and writes the report, if collecting.
    fn finish(&mut self, exit_code: Option<i32>) -> anyhow::Result<Option<PathBuf>> {
        self.finish_with(exit_code, true, true)
    }

    /// The report of a capture range that ended: the events after its end
    /// stay out of it.
    fn finish_range(&mut self) -> anyhow::Result<Option<PathBuf>> {
        self.finish_with(None, false, true)
    }

    /// Writes the report being collected; `drain`: with what is still in the
    /// buffer; `disarm`: capture ranges no longer open (a repeat series goes
    /// on armed, as the kernel left it).
    fn finish_with(
        &mut self,
        exit_code: Option<i32>,
        drain: bool,
        disarm: bool,
    ) -> anyhow::Result<Option<PathBuf>> {
        let Some((dest, start_realtime, start_monotonic)) = self.collecting.take() else {
            return Ok(None);
        };
        if disarm {
            self.tracer.control.disarm_capture()?;
        }
        if drain {
            self.collector.drain_now(&mut self.tracer, &mut self.rec)?;
        }
        let (rec, full) = self.idle()?;
        let settings = self.settings_for(&dest);
        let written = record::writing::finish_report(
            rec,
            &settings,
            &self.tracer.snapshot(),
            &mut self.collector.state,
            (&[self.app_pid], start_realtime, start_monotonic, exit_code),
            &dest.output,
        );
        drop(full);
        written?;
        if let Ok(mut i) = self.info.lock() {
            i.reports += 1;
            i.state = State::Launched;
        }
        Ok(Some(dest.output))
    }

    /// The next report of a repeat series: a fresh recorder, the processes'
    /// mappings scanned again; the capture stays armed.
    fn next_in_series(&mut self) -> anyhow::Result<()> {
        let Some(series) = self.series.as_mut() else {
            return Ok(());
        };
        series.index += 1;
        series.ranges_at_start = self.collector.state.capture_ranges;
        let dest = Destination {
            output: record::writing::repeat_path(&series.base, series.index),
            force: series.force,
            capture: Some(series.capture.clone()),
        };
        let start = (realtime_ns(), monotonic_ns());
        (self.rec, self.rec_guard) = record::writing::begin_next_report(
            &self.settings_for(&dest),
            &[self.app_pid],
            start,
            &mut self.tracer,
            &mut self.collector,
        )?;
        self.collecting = Some((dest, start.0, start.1));
        set_state(&self.info, State::Armed);
        Ok(())
    }

    /// The session's settings for the report `dest`.
    fn settings_for(&self, dest: &Destination) -> RecordSettings {
        let mut settings = self.settings.clone();
        settings.output = dest.output.clone();
        settings.capture = dest.capture.as_ref().map(|c| c.end);
        settings.capture_hgtx = dest.capture.as_ref().and_then(|c| c.hgtx.clone());
        settings
    }

    /// Writes what `asys recover` needs into the collection's folder, so a
    /// killed daemon's collection can be recovered like a killed profile's.
    fn describe_collection(&self) -> anyhow::Result<()> {
        if let Some((dest, start_realtime, start_monotonic)) = &self.collecting {
            record::writing::describe(
                &self.rec,
                &self.settings_for(dest),
                &[self.app_pid],
                (*start_realtime, *start_monotonic),
            )?;
        }
        Ok(())
    }

    /// In a repeat series, no range opened since the last report.
    fn series_period_is_empty(&self) -> bool {
        self.collecting.is_some()
            && self
                .series
                .as_ref()
                .is_some_and(|s| s.ranges_at_start == self.collector.state.capture_ranges)
    }

    /// Ends collecting without a report.
    fn discard(&mut self) -> anyhow::Result<()> {
        let _ = self.tracer.control.disarm_capture();
        self.collecting = None;
        self.idle()?;
        set_state(&self.info, State::Launched);
        Ok(())
    }

    /// Puts a fresh recorder in place for the time between collections;
    /// returns the one it replaces, and its folder's guard.
    fn idle(&mut self) -> anyhow::Result<(Recorder, TempDir)> {
        let id = self.info.lock().map(|i| i.id).unwrap_or(0);
        self.idle_serial += 1;
        let (rec, guard) = record::writing::fresh_recorder(idle_dir(id, self.idle_serial)?)?;
        Ok((
            std::mem::replace(&mut self.rec, rec),
            std::mem::replace(&mut self.rec_guard, guard),
        ))
    }

    /// Ends the application with `signal` (SIGKILL if it lingers), or leaves
    /// it running without asys.
    async fn end_app(&mut self, signal: Option<i32>) {
        let Some(rx) = self.app_exit.as_mut() else {
            return;
        };
        let Some(sig) = signal else {
            return;
        };
        record::series::end_application(&mut self.tracer, self.app_pid, sig, rx).await;
        self.app_exit = None;
    }
}

/// The recorder's folder while nothing is collected (process events only):
/// in the caller's private session folder, where no other user can have
/// planted anything under its name (a shared /tmp would let them).
fn idle_dir(id: u32, serial: u32) -> anyhow::Result<PathBuf> {
    Ok(crate::runtime_dir::ensure()?.join(format!(".idle-{id}-{}-{serial}", std::process::id())))
}

fn null_fd() -> RawFd {
    // Kept open for the daemon's life; the child dup2s it.
    static NULL: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    NULL.get_or_init(|| {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null opens")
    })
    .as_raw_fd()
}
