//! `--type pprof`: the report's stacks as pprof's gzipped `profile.proto`
//! (docs/export.md), what `go tool pprof`, Pyroscope, Parca, Cloud
//! Profiler and speedscope read. One profile per file, chosen by
//! `--stacks`:
//! - `samples`: CPU samples, `samples`/`count` and `cpu`/`nanoseconds`
//!   (each sample worth the sampling period);
//! - `waits`: off-CPU waits (a thread's switch-out to its next switch-in,
//!   as `cpu_wait_sum` counts them), `waits`/`count` and
//!   `wall`/`nanoseconds`, the kernel stack it left with and its Python
//!   frames;
//! - `api`: API calls with a recorded backtrace, `calls`/`count` and
//!   `wall`/`nanoseconds` (the call's duration), the API's name the leaf.
//!
//! Each is a file of its own, not a sample type of one profile: CPU time
//! and off-CPU wall time do not add up, a fleet's stores (Pyroscope,
//! Parca, Cloud Profiler) take one profile type per upload, and speedscope
//! shows the first sample type only.
//!
//! Frames are the report's: native frames with the pc as the location's
//! address in a mapping per process and file (its range, offset and build
//! id from `modules`), functions inlined at one pc as the lines of one
//! location (innermost first, as pprof orders them), Python frames
//! (`--python-sampling`) in the place of the evaluator frame that ran them
//! (the rule of [`python_frames`]), kernel frames innermost, as
//! `cpu_sample_sum` names them. Every sample is labelled with `pid` and
//! `tid` (numbers) and `thread_name` and `process_name`.
pub mod proto;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use arrow::array::Array;
use prost::Message;

use super::{
    ExportError,
    collapsed::{Stacks, TimeRange},
};
use crate::report::{
    ReportError,
    container::Container,
    read::{
        processes::Commands,
        python_frames::{self, Merged, PyFrame},
        stacks::{kernel_function, kernel_stacks, sample_kernel_stacks},
    },
    reader,
    schema::{self, KernelStackSource},
    strings::StringTable,
};

/// What to put in a profile: the stacks, and which processes.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub stacks: Stacks,
    /// Only what starts in this range (ns since the session start).
    pub range: Option<TimeRange>,
    /// Only these processes (all when empty).
    pub pids: BTreeSet<u32>,
}

/// A sample with no stack (its unwind failed, or stacks were not kept)
/// still counts, under this one frame (as in the collapsed export).
const NO_STACK: &str = "[no stack]";
/// The pseudo-file of Python frames and of kernel frames, as
/// `cpu_sample_sum`'s Module names them.
const PYTHON: &str = "[python]";
const KERNEL: &str = "[kernel]";

/// One native frame of a stack table row.
#[derive(Clone, Copy, Debug)]
struct Native {
    depth: u32,
    pc: u64,
    function: u32,
    module: u32,
    file: Option<u32>,
    line: Option<u32>,
    inlined: bool,
}

/// The native frames of each stack of `cpu_sample_stacks` or
/// `api_stacks`, by (pid, tid, time), innermost first.
type NativeStacks = HashMap<(u32, u32, i64), Vec<Native>>;

/// Reads a stack table with the columns of `cpu_sample_stacks` (whose
/// time column `$time` is `ts`, or `callStart` in `api_stacks`).
macro_rules! native_stacks {
    ($table:ident, $time:ident, $view_time:ident, $report:expr, $keep:expr) => {{
        use schema::$table as st;
        let mut out: NativeStacks = HashMap::new();
        let columns = [
            st::PID,
            st::TID,
            st::$time,
            st::DEPTH,
            st::PC,
            st::FUNCTION_ID,
            st::MODULE_ID,
            st::FILE_ID,
            st::LINE,
            st::INLINED,
        ];
        for b in st::scan($report, &columns)? {
            let b = b?;
            let v = st::View(&b);
            let (pid, tid, ts, depth) = (v.pid()?, v.tid()?, v.$view_time()?, v.depth()?);
            let (pc, function, module) = (v.pc()?, v.function_id()?, v.module_id()?);
            let (file, line, inlined) = (v.file_id()?, v.line()?, v.inlined()?);
            for i in 0..b.num_rows() {
                if !$keep(pid[i], ts[i]) {
                    continue;
                }
                out.entry((pid[i], tid[i], ts[i]))
                    .or_default()
                    .push(Native {
                        depth: depth[i],
                        pc: pc[i],
                        function: function[i],
                        module: module[i],
                        file: file.is_valid(i).then(|| file.value(i)),
                        line: line.is_valid(i).then(|| line.value(i)),
                        inlined: inlined.is_valid(i) && inlined.value(i),
                    });
            }
        }
        for frames in out.values_mut() {
            frames.sort_unstable_by_key(|f| f.depth);
        }
        out
    }};
}

/// Writes the profile of `options.stacks` of `report`, gzipped, to `out`.
pub fn export(
    report: &Container,
    options: &Options,
    out: impl Write,
    path: &std::path::Path,
) -> Result<(), ExportError> {
    let profile = profile(report, options)?;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())
        .and_then(|()| gz.finish()?.flush())
        .map_err(|e| ExportError::io(path, e))
}

/// The profile of `options.stacks` of `report`.
pub fn profile(report: &Container, options: &Options) -> Result<proto::Profile, ExportError> {
    let strings = reader::string_table(report)?;
    let mut b = Builder::new(report, &strings)?;
    let origin = report.metadata.start_monotonic_ns;
    let keep = |pid: u32, ts: i64| {
        options
            .range
            .is_none_or(|r| (r.start..r.end).contains(&(ts - origin)))
            && (options.pids.is_empty() || options.pids.contains(&pid))
    };
    match options.stacks {
        Stacks::Samples => {
            let period = i64::try_from(report.metadata.sample_period_ns).unwrap_or(i64::MAX);
            b.kinds(("samples", "count"), ("cpu", "nanoseconds"), period);
            samples(report, &strings, &mut b, period, &keep)?;
        }
        Stacks::Waits => {
            b.kinds(("waits", "count"), ("wall", "nanoseconds"), 1);
            waits(report, &strings, &mut b, &keep)?;
        }
        Stacks::Api => {
            b.kinds(("calls", "count"), ("wall", "nanoseconds"), 1);
            calls(report, &mut b, &keep)?;
        }
    }
    Ok(b.finish(report))
}

/// The CPU samples, each worth `period` ns.
fn samples(
    report: &Container,
    strings: &StringTable,
    b: &mut Builder,
    period: i64,
    keep: &impl Fn(u32, i64) -> bool,
) -> Result<(), ExportError> {
    use schema::cpu_samples as cs;
    let mut natives = native_stacks!(cpu_sample_stacks, TS, ts, report, keep);
    let mut kernel = sample_kernel_stacks(report, strings)?;
    let mut python = python_frames::sample_python_frames(report)?;
    for batch in cs::scan(report, &[cs::TS, cs::PID, cs::TID])? {
        let batch = batch?;
        let v = cs::View(&batch);
        let (ts, pid, tid) = (v.ts()?, v.pid()?, v.tid()?);
        for i in 0..batch.num_rows() {
            if !keep(pid[i], ts[i]) {
                continue;
            }
            let mut stack = Vec::new();
            // Kernel frames innermost, as cpu_sample_sum names them.
            for f in kernel.remove(&(tid[i], ts[i])).unwrap_or_default() {
                stack.push(b.named(&format!("[k] {f}"), KERNEL));
            }
            let native = natives.remove(&(pid[i], tid[i], ts[i])).unwrap_or_default();
            let py = python.remove(&(tid[i], ts[i])).unwrap_or_default();
            if native.is_empty() && py.is_empty() {
                stack.push(b.named(NO_STACK, ""));
            } else {
                b.user_frames(pid[i], &native, &py, &mut stack);
            }
            b.add(stack, pid[i], tid[i], None, period);
        }
    }
    Ok(())
}

/// The off-CPU waits: each from a thread's switch-out to its next
/// switch-in (`cpu_wait_sum`'s intervals), its kernel stack at the
/// switch-out innermost, then its Python frames there.
fn waits(
    report: &Container,
    strings: &StringTable,
    b: &mut Builder,
    keep: &impl Fn(u32, i64) -> bool,
) -> Result<(), ExportError> {
    let switches = crate::stats::waits::switches(report)?;
    let kernel = kernel_stacks(report, KernelStackSource::Switch)?;
    let python = python_frames::switch_python_stacks(report)?;
    // Process-tree recordings count only the traced processes' threads,
    // as cpu_wait_sum does.
    let tree_only = report.metadata.cpuctxsw == crate::recorded_settings::Scope::ProcessTree;
    for w in crate::stats::waits::off_cpu_intervals(&switches) {
        let out = w.out;
        if !keep(out.prev_pid, out.ts)
            || (tree_only && !report.metadata.pids.contains(&out.prev_pid))
        {
            continue;
        }
        let mut stack = Vec::new();
        for &id in kernel.get(&(out.prev_tid, out.ts)).into_iter().flatten() {
            let f = kernel_function(strings.get(id).unwrap_or("?"));
            stack.push(b.named(&format!("[k] {f}"), KERNEL));
        }
        if let Some((_, frames)) = python.get(&(out.prev_tid, out.ts)) {
            b.user_frames(out.prev_pid, &[], frames, &mut stack);
        }
        if stack.is_empty() {
            stack.push(b.named(NO_STACK, ""));
        }
        let state = crate::report::task_state::letters(out.prev_state);
        let wait = crate::report::read::duration(out.ts, w.back);
        b.add(
            stack,
            out.prev_pid,
            out.prev_tid,
            Some(&state),
            i64::try_from(wait).unwrap_or(i64::MAX),
        );
    }
    Ok(())
}

/// The API calls with a recorded backtrace, the API's name the leaf.
fn calls(
    report: &Container,
    b: &mut Builder,
    keep: &impl Fn(u32, i64) -> bool,
) -> Result<(), ExportError> {
    use schema::api;
    let mut natives = native_stacks!(api_stacks, CALL_START, call_start, report, keep);
    let tables: Vec<String> = report
        .tables()
        .filter(|t| t.ends_with("_api"))
        .map(str::to_owned)
        .collect();
    for table in &tables {
        let cols = [api::PID, api::TID, api::START, api::END, api::NAME_ID];
        for batch in api::scan(report, table, &cols)? {
            let batch = batch?;
            let v = api::View(&batch);
            let (pid, tid, start, end) = (v.pid()?, v.tid()?, v.start()?, v.end()?);
            let name = v.name_id()?;
            for i in 0..batch.num_rows() {
                let Some(frames) = natives.remove(&(pid[i], tid[i], start[i])) else {
                    continue;
                };
                let api_name = b.report_string(name[i]).to_string();
                let mut stack = vec![b.named(&api_name, table)];
                b.user_frames(pid[i], &frames, &[], &mut stack);
                let took = crate::report::read::duration(start[i], end[i]);
                b.add(
                    stack,
                    pid[i],
                    tid[i],
                    None,
                    i64::try_from(took).unwrap_or(i64::MAX),
                );
            }
        }
    }
    Ok(())
}

/// A function, by what names it in the report: a native one by (name,
/// module) string ids, a Python one by (qualified name, file), any other
/// (kernel, API, placeholder) by its text and module.
#[derive(Clone, PartialEq, Eq, Hash)]
enum FunctionKey {
    Native(u32, u32),
    Python(Option<u32>, Option<u32>),
    Named(String, String),
}

/// A location: a native pc in a mapping, a Python function's line, or a
/// named frame.
#[derive(Clone, PartialEq, Eq, Hash)]
enum LocationKey {
    Native { mapping: u64, pc: u64 },
    Python { function: u64, line: i64 },
    Named(u64),
}

/// What makes two events one sample: the stack (leaf first), the pid and
/// tid, and the state a wait left in.
type SampleKey = (Vec<u64>, u32, u32, Option<String>);

/// A mapped range of a process, from `modules`.
struct Span {
    start: u64,
    end: u64,
    offset: u64,
    path: u32,
    build_id: Option<String>,
}

/// Gathers the profile's tables, each entry once.
struct Builder<'a> {
    report_strings: &'a StringTable,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<FunctionKey, u64>,
    locations: Vec<proto::Location>,
    location_ids: HashMap<LocationKey, u64>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: HashMap<(u32, u32), u64>,
    /// The mappings of frames with no file: `[python]`, `[kernel]`, an
    /// API's table.
    pseudo_mappings: HashMap<String, u64>,
    /// Identical stacks of one thread (and state) are one sample: (count,
    /// value) summed.
    samples: HashMap<SampleKey, (i64, i64)>,
    spans: HashMap<u32, Vec<Span>>,
    commands: Commands,
    /// Each thread's name as it last left a CPU (`sched`, recorded with
    /// sampling): a name set after the thread started
    /// (`pthread_setname_np`) is seen only there.
    switch_names: HashMap<u32, (i64, u32)>,
    sample_type: Vec<proto::ValueType>,
    period_type: Option<proto::ValueType>,
    period: i64,
}

impl<'a> Builder<'a> {
    fn new(report: &Container, report_strings: &'a StringTable) -> Result<Self, ReportError> {
        use schema::modules as m;
        let mut spans: HashMap<u32, Vec<Span>> = HashMap::new();
        let cols = [
            m::PID,
            m::START,
            m::END,
            m::FILE_OFFSET,
            m::PATH_ID,
            m::BUILD_ID,
        ];
        for batch in m::scan(report, &cols)? {
            let batch = batch?;
            let v = m::View(&batch);
            let (pid, start, end) = (v.pid()?, v.start()?, v.end()?);
            let (offset, path, build_id) = (v.file_offset()?, v.path_id()?, v.build_id()?);
            for i in 0..batch.num_rows() {
                spans.entry(pid[i]).or_default().push(Span {
                    start: start[i],
                    end: end[i],
                    offset: offset[i],
                    path: path[i],
                    build_id: build_id
                        .is_valid(i)
                        .then(|| build_id.value(i).to_string())
                        .filter(|id| !id.is_empty()),
                });
            }
        }
        let mut b = Self {
            report_strings,
            strings: Vec::new(),
            string_ids: HashMap::new(),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            mappings: Vec::new(),
            mapping_ids: HashMap::new(),
            pseudo_mappings: HashMap::new(),
            samples: HashMap::new(),
            spans,
            commands: Commands::read(report)?,
            switch_names: HashMap::new(),
            sample_type: Vec::new(),
            period_type: None,
            period: 0,
        };
        crate::report::read::sched::for_each_switch_batch(report, |batch| {
            for s in batch {
                let e = b
                    .switch_names
                    .entry(s.prev_tid)
                    .or_insert((s.ts, s.prev_comm));
                if s.ts >= e.0 {
                    *e = (s.ts, s.prev_comm);
                }
            }
            Ok::<_, ReportError>(())
        })?;
        // pprof requires string_table[0] to be "".
        b.string("");
        Ok(b)
    }

    /// The profile's two values (the count first, as pprof's convention
    /// has it, the measure second and the default) and its period.
    fn kinds(&mut self, count: (&str, &str), measure: (&str, &str), period: i64) {
        let mut vt = |(t, u): (&str, &str)| proto::ValueType {
            r#type: self.string(t),
            unit: self.string(u),
        };
        let (count, measure) = (vt(count), vt(measure));
        self.period_type = Some(measure.clone());
        self.sample_type = vec![count, measure];
        self.period = period;
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    /// A string of the report, escaped as every export escapes names.
    fn report_string(&self, id: u32) -> std::borrow::Cow<'a, str> {
        crate::text_safety::escaped_name(self.report_strings.get(id).unwrap_or("[unknown]"))
    }

    fn function(&mut self, key: FunctionKey, name: &str, file: &str) -> u64 {
        if let Some(&id) = self.function_ids.get(&key) {
            // A function first seen where its file was not known gets it
            // from a later frame: one function, one row in `-top`.
            if self.functions[id as usize - 1].filename == 0 && !file.is_empty() {
                self.functions[id as usize - 1].filename = self.string(file);
            }
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name = self.string(name);
        let filename = self.string(file);
        self.functions.push(proto::Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.function_ids.insert(key, id);
        id
    }

    fn location(&mut self, key: LocationKey, make: impl FnOnce(u64) -> proto::Location) -> u64 {
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(make(id));
        self.location_ids.insert(key, id);
        id
    }

    /// A frame named by text (a kernel function, an API, a placeholder),
    /// in the pseudo-file `module`.
    fn named(&mut self, name: &str, module: &str) -> u64 {
        let name = crate::text_safety::escaped_name(name).into_owned();
        let f = self.function(
            FunctionKey::Named(name.clone(), module.to_string()),
            &name,
            "",
        );
        let mapping_id = self.pseudo_mapping(module);
        self.location(LocationKey::Named(f), |id| proto::Location {
            id,
            mapping_id,
            line: vec![proto::Line {
                function_id: f,
                line: 0,
            }],
            ..Default::default()
        })
    }

    /// The mapping that groups frames with no file by what they are
    /// (`[python]`, `[kernel]`, ...), as `cpu_sample_sum`'s Module does:
    /// pprof's `-focus`/`-show` match a mapping's name, so `-show
    /// '^\[python\]$'` keeps the Python frames. None for "".
    fn pseudo_mapping(&mut self, module: &str) -> u64 {
        if module.is_empty() {
            return 0;
        }
        if let Some(&id) = self.pseudo_mappings.get(module) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(module);
        self.mappings.push(proto::Mapping {
            id,
            filename,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
            ..Default::default()
        });
        self.pseudo_mappings.insert(module.to_string(), id);
        id
    }

    /// The mapping of `module` in process `pid`: the recorded range of
    /// that file (its lowest and highest address, the offset of the
    /// lowest), or an empty range where none was recorded.
    fn mapping(&mut self, pid: u32, module: u32) -> u64 {
        if let Some(&id) = self.mapping_ids.get(&(pid, module)) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let mine: Vec<&Span> = self
            .spans
            .get(&pid)
            .into_iter()
            .flatten()
            .filter(|s| s.path == module)
            .collect();
        let lowest = mine.iter().min_by_key(|s| s.start);
        let (start, offset) = lowest.map_or((0, 0), |s| (s.start, s.offset));
        let limit = mine.iter().map(|s| s.end).max().unwrap_or(0);
        let build_id = lowest.and_then(|s| s.build_id.clone()).unwrap_or_default();
        let filename = self.report_string(module).into_owned();
        let mapping = proto::Mapping {
            id,
            memory_start: start,
            memory_limit: limit,
            file_offset: offset,
            filename: self.string(&filename),
            build_id: self.string(&build_id),
            // Named by asys already: a reader must not symbolize again
            // (unless a frame in it was left an address: see user_frames).
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        };
        self.mappings.push(mapping);
        self.mapping_ids.insert((pid, module), id);
        id
    }

    /// Appends to `stack` (leaf first) the locations of a process's native
    /// frames (innermost first) with its Python frames in the place of
    /// the evaluator frames that ran them.
    fn user_frames(
        &mut self,
        pid: u32,
        native: &[Native],
        python: &[PyFrame],
        stack: &mut Vec<u64>,
    ) {
        let strings = self.report_strings;
        let merged = python_frames::merge(
            native.iter().copied(),
            |f| strings.get(f.function) == Some(python_frames::EVAL_FRAME),
            python,
        );
        // Lines of functions inlined at the pc of the next frame.
        let mut inlined: Vec<proto::Line> = Vec::new();
        for m in merged {
            match m {
                Merged::Native(f) if f.file.is_none() && self.is_address(f.function) => {
                    // Left unnamed (`0x...`): an address alone, in a
                    // mapping that says so, which a fleet's store (Parca,
                    // Pyroscope) names by build id, as `go tool pprof`
                    // does with the binary at hand.
                    self.flush_inlined(&mut inlined, stack);
                    let mapping = self.mapping(pid, f.module);
                    let m = &mut self.mappings[mapping as usize - 1];
                    m.has_functions = false;
                    m.has_filenames = false;
                    m.has_line_numbers = false;
                    m.has_inline_frames = false;
                    let id = self.location(LocationKey::Native { mapping, pc: f.pc }, |id| {
                        proto::Location {
                            id,
                            mapping_id: mapping,
                            address: f.pc,
                            ..Default::default()
                        }
                    });
                    stack.push(id);
                }
                Merged::Native(f) => {
                    let name = self.report_string(f.function).into_owned();
                    let file = f
                        .file
                        .map(|id| self.report_string(id).into_owned())
                        .unwrap_or_default();
                    let function =
                        self.function(FunctionKey::Native(f.function, f.module), &name, &file);
                    inlined.push(proto::Line {
                        function_id: function,
                        line: f.line.map_or(0, i64::from),
                    });
                    if f.inlined {
                        continue;
                    }
                    let mapping = self.mapping(pid, f.module);
                    let lines = std::mem::take(&mut inlined);
                    // One pc is one location whatever called it; its lines
                    // are the same each time (one symbolization).
                    let id = self.location(LocationKey::Native { mapping, pc: f.pc }, |id| {
                        proto::Location {
                            id,
                            mapping_id: mapping,
                            address: f.pc,
                            line: lines,
                            is_folded: false,
                        }
                    });
                    stack.push(id);
                }
                Merged::Python(p) => {
                    self.flush_inlined(&mut inlined, stack);
                    let get = |id: Option<u32>| id.map(|id| self.report_string(id).into_owned());
                    let name = get(p.function).unwrap_or_else(|| "[python unknown]".into());
                    let file = get(p.file).unwrap_or_default();
                    let function =
                        self.function(FunctionKey::Python(p.function, p.file), &name, &file);
                    let line = p.line.map_or(0, i64::from);
                    let mapping_id = self.pseudo_mapping(PYTHON);
                    let id = self.location(LocationKey::Python { function, line }, |id| {
                        proto::Location {
                            id,
                            mapping_id,
                            line: vec![proto::Line {
                                function_id: function,
                                line,
                            }],
                            ..Default::default()
                        }
                    });
                    stack.push(id);
                }
            }
        }
        self.flush_inlined(&mut inlined, stack);
    }

    /// Whether the symbolize stage left this function name an address
    /// (`0x` and hex digits).
    fn is_address(&self, function: u32) -> bool {
        self.report_strings
            .get(function)
            .and_then(|n| n.strip_prefix("0x"))
            .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    /// Inlined lines whose caller's frame is missing (a stack cut short)
    /// still show: as a location of their own, with no address.
    fn flush_inlined(&mut self, inlined: &mut Vec<proto::Line>, stack: &mut Vec<u64>) {
        if inlined.is_empty() {
            return;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            line: std::mem::take(inlined),
            ..Default::default()
        });
        stack.push(id);
    }

    /// One event of thread `tid` with `stack`, worth `value`.
    fn add(&mut self, stack: Vec<u64>, pid: u32, tid: u32, state: Option<&str>, value: i64) {
        let e = self
            .samples
            .entry((stack, pid, tid, state.map(str::to_owned)))
            .or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(value);
    }

    fn finish(mut self, report: &Container) -> proto::Profile {
        let mut samples: Vec<_> = std::mem::take(&mut self.samples).into_iter().collect();
        // A stable order: the same report gives the same bytes.
        samples.sort_unstable_by(|a, b| {
            (a.0.1, a.0.2, &a.0.0, &a.0.3).cmp(&(b.0.1, b.0.2, &b.0.0, &b.0.3))
        });
        let mut out = Vec::with_capacity(samples.len());
        for ((stack, pid, tid, state), (count, value)) in samples {
            let thread = self
                .switch_names
                .get(&tid)
                .map(|&(_, name)| name)
                .or_else(|| self.commands.thread(pid, tid))
                .map(|id| self.report_string(id).into_owned())
                .unwrap_or_default();
            let process = self
                .commands
                .process(pid)
                .map(|id| self.report_string(id).into_owned())
                .unwrap_or_default();
            let mut label = vec![
                self.num_label("pid", pid),
                self.num_label("tid", tid),
                self.str_label("thread_name", &thread),
                self.str_label("process_name", &process),
            ];
            if let Some(state) = state {
                label.push(self.str_label("state", &state));
            }
            out.push(proto::Sample {
                location_id: stack,
                value: vec![count, value],
                label,
            });
        }
        let default_sample_type = self.sample_type.last().map_or(0, |t| t.r#type);
        // pprof takes the first mapping for the main binary ("File:" in
        // its header): the first traced process's program first (the file
        // named as its command), pseudo-files last; ids are unchanged.
        let pseudo: BTreeSet<u64> = self.pseudo_mappings.values().copied().collect();
        let main = report
            .metadata
            .root_pids
            .first()
            .and_then(|&pid| self.commands.process(pid))
            .and_then(|id| self.report_strings.get(id))
            .map(|c| self.string(c))
            .unwrap_or(-1);
        let strings = &self.strings;
        self.mappings.sort_by_key(|m| {
            let base = strings[m.filename as usize].rsplit('/').next();
            (
                pseudo.contains(&m.id),
                base != strings.get(main as usize).map(String::as_str),
            )
        });
        let duration = report
            .metadata
            .end_monotonic_ns
            .saturating_sub(report.metadata.start_monotonic_ns)
            .max(0);
        proto::Profile {
            sample_type: self.sample_type,
            sample: out,
            mapping: self.mappings,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            time_nanos: report.metadata.start_realtime_ns,
            duration_nanos: duration,
            period_type: self.period_type,
            period: self.period,
            default_sample_type,
            ..Default::default()
        }
    }

    fn num_label(&mut self, key: &str, num: u32) -> proto::Label {
        proto::Label {
            key: self.string(key),
            num: i64::from(num),
            ..Default::default()
        }
    }

    fn str_label(&mut self, key: &str, value: &str) -> proto::Label {
        proto::Label {
            key: self.string(key),
            str: self.string(value),
            ..Default::default()
        }
    }
}

/// Whether `p` holds to what profile.proto asks of a profile, as readers
/// rely on it: `string_table[0]` is "", every string index is in the
/// table, ids are nonzero and unique, every id a sample, location or line
/// refers to exists, and every sample has one value per sample type. The
/// first rule broken, in words.
pub fn check(p: &proto::Profile) -> Result<(), String> {
    if p.string_table.first().map(String::as_str) != Some("") {
        return Err("string_table[0] is not \"\"".into());
    }
    let strings = p.string_table.len() as i64;
    let string = |what: &str, i: i64| {
        if (0..strings).contains(&i) {
            Ok(())
        } else {
            Err(format!("{what}: string index {i} of {strings}"))
        }
    };
    let ids = |what: &str, ids: &mut dyn Iterator<Item = u64>| {
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            if id == 0 || !seen.insert(id) {
                return Err(format!("{what} id {id} is 0 or not unique"));
            }
        }
        Ok(seen)
    };
    let mappings = ids("mapping", &mut p.mapping.iter().map(|m| m.id))?;
    let functions = ids("function", &mut p.function.iter().map(|f| f.id))?;
    let locations = ids("location", &mut p.location.iter().map(|l| l.id))?;
    for t in p.sample_type.iter().chain(&p.period_type) {
        string("value type", t.r#type)?;
        string("value unit", t.unit)?;
    }
    string("default_sample_type", p.default_sample_type)?;
    for m in &p.mapping {
        string("mapping filename", m.filename)?;
        string("mapping build id", m.build_id)?;
    }
    for f in &p.function {
        string("function name", f.name)?;
        string("function system name", f.system_name)?;
        string("function filename", f.filename)?;
    }
    for l in &p.location {
        if l.mapping_id != 0 && !mappings.contains(&l.mapping_id) {
            return Err(format!("location {} has no mapping {}", l.id, l.mapping_id));
        }
        if let Some(line) = l.line.iter().find(|x| !functions.contains(&x.function_id)) {
            return Err(format!(
                "location {} has no function {}",
                l.id, line.function_id
            ));
        }
    }
    for (n, s) in p.sample.iter().enumerate() {
        if s.value.len() != p.sample_type.len() {
            return Err(format!(
                "sample {n} has {} values for {} types",
                s.value.len(),
                p.sample_type.len()
            ));
        }
        if let Some(id) = s.location_id.iter().find(|id| !locations.contains(id)) {
            return Err(format!("sample {n} has no location {id}"));
        }
        for label in &s.label {
            string("label key", label.key)?;
            string("label value", label.str)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> proto::Profile {
        proto::Profile {
            sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
            sample: vec![proto::Sample {
                location_id: vec![1],
                value: vec![1],
                label: vec![],
            }],
            mapping: vec![proto::Mapping {
                id: 1,
                filename: 3,
                ..Default::default()
            }],
            location: vec![proto::Location {
                id: 1,
                mapping_id: 1,
                line: vec![proto::Line {
                    function_id: 1,
                    line: 7,
                }],
                ..Default::default()
            }],
            function: vec![proto::Function {
                id: 1,
                name: 4,
                ..Default::default()
            }],
            string_table: ["", "samples", "count", "a.out", "main"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn a_whole_profile_passes_and_each_broken_rule_is_named() {
        assert_eq!(check(&valid()), Ok(()));
        let mut p = valid();
        p.string_table[0] = "x".into();
        assert!(check(&p).unwrap_err().contains("string_table[0]"));
        let mut p = valid();
        p.sample[0].location_id = vec![2];
        assert!(check(&p).unwrap_err().contains("no location 2"));
        let mut p = valid();
        p.location[0].line[0].function_id = 9;
        assert!(check(&p).unwrap_err().contains("no function 9"));
        let mut p = valid();
        p.sample[0].value.push(3);
        assert!(check(&p).unwrap_err().contains("2 values for 1 types"));
        let mut p = valid();
        p.function[0].name = 5;
        assert!(check(&p).unwrap_err().contains("string index 5"));
        let mut p = valid();
        p.mapping.push(p.mapping[0].clone());
        assert!(check(&p).unwrap_err().contains("not unique"));
    }

    #[test]
    fn the_encoding_reads_back_as_written() {
        let p = valid();
        let bytes = p.encode_to_vec();
        assert_eq!(proto::Profile::decode(&bytes[..]).unwrap(), p);
    }
}
