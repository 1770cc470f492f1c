//! Table names and Arrow schemas of schema version [`SCHEMA_VERSION`].
//! Times are CLOCK_MONOTONIC nanoseconds; names are ids into `strings`.
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// Bumped whenever a table or column changes meaning.
pub const SCHEMA_VERSION: u32 = 2;

pub const HGGC_API: &str = "hggc_api";
pub const HGGC_ACTIVITY: &str = "hggc_activity";
pub const PROCESS_EVENTS: &str = "process_events";
pub const MODULES: &str = "modules";
pub const SYMBOLS: &str = "symbols";
pub const STRINGS: &str = "strings";
/// Raw stack copies, only in the recording folder (unwound by the symbolize
/// stage into API_STACKS, not packed into the report).
pub const STACKS_RAW: &str = "stacks_raw";
pub const API_STACKS: &str = "api_stacks";
pub const SCHED: &str = "sched";
/// CPU samples (`-s`), one row per sample.
pub const CPU_SAMPLES: &str = "cpu_samples";
/// Their raw stacks (recording folder only; `callStart` is the sample's time).
pub const SAMPLE_STACKS_RAW: &str = "sample_stacks_raw";
/// Their unwound stacks, one row per frame.
pub const CPU_SAMPLE_STACKS: &str = "cpu_sample_stacks";

fn field(name: &str, ty: DataType, nullable: bool) -> Field {
    Field::new(name, ty, nullable)
}

/// One row per completed call of a traced API; every trace item has its own
/// table of this shape (`hggc_api`, `osrt_api`, `pccl_api`, ...).
pub fn api_calls() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("start", Int64, false),
        field("end", Int64, false),
        field("pid", UInt32, false),
        field("tid", UInt32, false),
        field("cpu", UInt32, false),
        field("nameId", UInt32, false),
        field("libraryId", UInt32, false),
        field("returnValue", Int64, false),
        field("correlationId", UInt32, true),
        field("bytes", UInt64, true),
        field("copyKind", Int32, true),
        field("stream", UInt64, true),
        field("device", Int32, true),
        field("ptr", UInt64, true),
        field("kernelAddr", UInt64, true),
        field("gridX", UInt32, true),
        field("gridY", UInt32, true),
        field("gridZ", UInt32, true),
        field("blockX", UInt32, true),
        field("blockY", UInt32, true),
        field("blockZ", UInt32, true),
        field("sharedMem", UInt64, true),
        field(
            "args",
            FixedSizeList(Arc::new(Field::new("item", UInt64, false)), 8),
            false,
        ),
        field("textId", UInt32, true),
        field("textHandle", UInt64, true),
    ]))
}

/// Device activity: kernels, copies and memsets as the device ran them, on
/// CLOCK_MONOTONIC; `kind` is kernel|memcpy|memset.
pub fn hggc_activity() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("start", Int64, false),
        field("end", Int64, false),
        field("kind", Utf8, false),
        field("pid", UInt32, false),
        field("device", UInt32, false),
        field("stream", UInt32, false),
        field("correlationId", UInt32, false),
        field("bytes", UInt64, true),
        field("copyKind", Int32, true),
        field("kernelAddr", UInt64, true),
        field("gridX", UInt32, true),
        field("gridY", UInt32, true),
        field("gridZ", UInt32, true),
        field("blockX", UInt32, true),
        field("blockY", UInt32, true),
        field("blockZ", UInt32, true),
        field("sharedMem", UInt32, true),
        field("clockOffset", Int64, false),
    ]))
}

/// Fork, exec and exit of traced processes; `kind` is fork|exec|exit.
pub fn process_events() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("ts", Int64, false),
        field("kind", Utf8, false),
        field("pid", UInt32, false),
        field("tid", UInt32, false),
        field("childPid", UInt32, false),
        field("commId", UInt32, false),
    ]))
}

/// Context switches (`--cpuctxsw`): on `cpu` at `ts`, thread `prevTid` of
/// process `prevPid` left in `prevState` (0 runnable, 1 S, 2 D, ...; the
/// idle task is 0) and thread `nextTid` came in.
pub fn sched() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("ts", Int64, false),
        field("cpu", UInt32, false),
        field("prevPid", UInt32, false),
        field("prevTid", UInt32, false),
        field("prevState", Int64, false),
        field("prevCommId", UInt32, false),
        field("nextTid", UInt32, false),
        field("nextCommId", UInt32, false),
    ]))
}

/// Executable file mappings of traced processes, as seen at `ts`.
pub fn modules() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("ts", Int64, false),
        field("pid", UInt32, false),
        field("start", UInt64, false),
        field("end", UInt64, false),
        field("fileOffset", UInt64, false),
        field("pathId", UInt32, false),
        field("buildId", Utf8, true),
    ]))
}

/// Code addresses resolved to names by the symbolize stage.
pub fn symbols() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("pid", UInt32, false),
        field("addr", UInt64, false),
        field("nameId", UInt32, false),
    ]))
}

/// The string table, as nsys's StringIds.
pub fn strings() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("id", UInt32, false),
        field("value", Utf8, false),
    ]))
}

/// Raw stacks as the kernel copied them (recording folder only).
pub fn stacks_raw() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("pid", UInt32, false),
        field("tid", UInt32, false),
        field("callStart", Int64, false),
        field("ip", UInt64, false),
        field("sp", UInt64, false),
        field("bp", UInt64, false),
        field("stack", Binary, false),
    ]))
}

/// CPU samples: the thread on a CPU when its sampling timer fired;
/// `kernelMode`: it was in the kernel (its stack is where it entered it).
pub fn cpu_samples() -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("ts", Int64, false),
        field("pid", UInt32, false),
        field("tid", UInt32, false),
        field("cpu", UInt32, false),
        field("kernelMode", Boolean, false),
    ]))
}

/// Call stacks of CPU samples, one row per frame, innermost (depth 0: the
/// sampled instruction) first; the sample is that thread's at `ts`.
pub fn cpu_sample_stacks() -> SchemaRef {
    stack_frames("ts")
}

/// Call stacks of API calls, one row per frame, innermost (depth 0) first:
/// the call is the one of that thread that started at `callStart`.
pub fn api_stacks() -> SchemaRef {
    stack_frames("callStart")
}

/// One row per frame of a stack, the stack keyed by (pid, tid, `key`).
fn stack_frames(key: &str) -> SchemaRef {
    use DataType::*;
    Arc::new(Schema::new(vec![
        field("pid", UInt32, false),
        field("tid", UInt32, false),
        field(key, Int64, false),
        field("depth", UInt32, false),
        field("pc", UInt64, false),
        field("functionId", UInt32, false),
        field("fileId", UInt32, true),
        field("line", UInt32, true),
        field("moduleId", UInt32, false),
        field("inlined", Boolean, false),
    ]))
}
