//! Tests of the table declarations, the readers and packing.
use std::{path::PathBuf, sync::Arc};

use arrow::{
    array::{Array, RecordBatch},
    datatypes::{Int64Type, Schema, UInt32Type},
};

use crate::sink::recorder::Recorder;
use asys_report::report::{
    columns::{ColumnDef, TableDef},
    container::{self, Container},
    metadata::Metadata,
    reader,
    rows::ApiRow,
    schema::{self, api},
    table_writer::TableWriter,
};

/// A fresh, empty folder under the system's temp directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("asys-report-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn check_declaration<T: TableDef>(rows: &[T::Row]) {
    let schema = T::schema();
    assert_eq!(schema.fields().len(), T::COLUMNS.len());
    for (f, c) in schema.fields().iter().zip(T::COLUMNS) {
        assert_eq!(f.name(), c.name);
        assert_eq!(f.data_type(), &c.kind.data_type(), "{}", c.name);
        assert_eq!(f.is_nullable(), c.kind.nullable(), "{}", c.name);
    }
    let mut names: Vec<&str> = T::COLUMNS.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), T::COLUMNS.len(), "a column is declared twice");
    // A table's time column (copy_window reads it as i64) is one of its
    // columns, an i64.
    if let Some(time) = T::TIME {
        assert!(
            T::COLUMNS
                .iter()
                .any(|c| c.name == time && c.kind == asys_report::report::columns::Kind::i64),
            "{time}"
        );
    }
    // The builder gives one array per column, of its declared type.
    let batch = RecordBatch::try_new(schema, T::to_columns(rows)).expect("builder matches schema");
    assert_eq!(batch.num_rows(), rows.len());
}

fn api_row(i: u32) -> ApiRow {
    ApiRow {
        start: 1_000 + i as i64 * 10,
        end: 1_005 + i as i64 * 10 + i as i64 % 3,
        pid: 7,
        tid: 8 + i % 2,
        cpu: i % 4,
        name_id: i % 3,
        library_id: 2,
        return_value: -(i as i64),
        correlation: i.is_multiple_of(2).then_some(i),
        bytes: i.is_multiple_of(5).then_some(i as u64 * 4096),
        kernel_addr: i.is_multiple_of(7).then_some(0x4000 + i as u64),
        grid: i.is_multiple_of(7).then_some([i, 2, 3]),
        args: i
            .is_multiple_of(3)
            .then_some([i as u64, 1, 2, 3, 4, 5, 6, u64::MAX]),
        text_id: i.is_multiple_of(4).then_some(i + 100),
        ..Default::default()
    }
}

#[test]
fn every_declared_column_is_in_its_schema_in_order() {
    use asys_report::report::rows::*;
    check_declaration::<api::Table>(&(0..20).map(api_row).collect::<Vec<_>>());
    check_declaration::<schema::activity::Table>(&[ActivityRow {
        kind: schema::ActivityKind::Kernel,
        kernel_addr: Some(1),
        ..Default::default()
    }]);
    check_declaration::<schema::process_events::Table>(&[ProcessRow {
        ts: 1,
        kind: schema::ProcessKind::Fork,
        pid: 1,
        tid: 1,
        child_pid: 2,
        comm_id: 0,
    }]);
    check_declaration::<schema::modules::Table>(&[ModuleRow {
        ts: 1,
        pid: 1,
        start: 2,
        end: 3,
        file_offset: 0,
        path_id: 0,
        build_id: None,
    }]);
    check_declaration::<schema::processes::Table>(&[
        ProcessInfoRow {
            rank: None,
            stdout: None,
            stderr: None,
            ts: 1,
            pid: 1,
            cgroup_path_id: 0,
            cgroup_v2: true,
            cgroup_id: Some(25),
            container_id: Some("ab".repeat(32)),
            container_runtime: Some("docker"),
        },
        ProcessInfoRow {
            rank: None,
            stdout: None,
            stderr: None,
            ts: 2,
            pid: 2,
            cgroup_path_id: 1,
            cgroup_v2: false,
            cgroup_id: None,
            container_id: None,
            container_runtime: None,
        },
    ]);
    check_declaration::<schema::strings::Table>(&[StringRow {
        id: 0,
        value: "x".into(),
    }]);
    check_declaration::<schema::symbols::Table>(&[]);
    check_declaration::<schema::sched::Table>(&[]);
    check_declaration::<schema::sched_wakeups::Table>(&[]);
    check_declaration::<schema::kernel_stacks::Table>(&[]);
    check_declaration::<schema::python_frames::Table>(&[]);
    check_declaration::<schema::python_thread_names::Table>(&[]);
    check_declaration::<schema::cpu_samples::Table>(&[]);
    check_declaration::<schema::stacks_raw::Table>(&[]);
    check_declaration::<schema::api_stacks::Table>(&[]);
    check_declaration::<schema::cpu_sample_stacks::Table>(&[]);
    check_declaration::<schema::jit_symbols::Table>(&[]);
    check_declaration::<schema::libraries::Table>(&[]);
    check_declaration::<schema::host_memory::Table>(&[]);
    check_declaration::<schema::nic_metrics::Table>(&[]);
    check_declaration::<schema::ppu_metrics::Table>(&[]);
    check_declaration::<schema::rdma_hw_counters::Table>(&[]);
    check_declaration::<schema::probes::Table>(&[asys_report::report::rows::ProbeRow {
        start: 1,
        end: 2,
        pid: 3,
        tid: 4,
        cpu: 0,
        probe_id: 0,
        name_id: 0,
        kind: "ucall",
        has_return: true,
        return_value: -1,
        args: "1, \"x\"".into(),
    }]);
}

/// One row into every table the recorder writes, at time 10.
fn record_one_of_each(rec: &mut Recorder) {
    use asys_report::report::rows::*;
    let ts = 10;
    let raw = || StackRawRow {
        pid: 7,
        tid: 8,
        call_start: ts,
        ip: 0,
        sp: 0,
        bp: 0,
        stack: Vec::new(),
    };
    rec.api(asys_report::trace_items::TraceItem::Hggc, api_row(0))
        .expect("api");
    rec.activity(ActivityRow {
        start: ts,
        end: ts + 1,
        ..Default::default()
    })
    .expect("activity");
    rec.stack(raw()).expect("stack");
    rec.process(ProcessRow {
        ts,
        kind: schema::ProcessKind::Exec,
        pid: 7,
        tid: 7,
        child_pid: 0,
        comm_id: 0,
    })
    .expect("process");
    rec.module(ModuleRow {
        ts,
        pid: 7,
        start: 0x1000,
        end: 0x2000,
        file_offset: 0,
        path_id: 0,
        build_id: None,
    })
    .expect("module");
    rec.process_info(ProcessInfoRow {
        ts,
        pid: 7,
        cgroup_path_id: 0,
        cgroup_v2: true,
        cgroup_id: None,
        container_id: None,
        container_runtime: None,
        rank: None,
        stdout: None,
        stderr: None,
    })
    .expect("process info");
    rec.sched(SchedRow {
        ts,
        cpu: 0,
        prev_pid: 7,
        prev_tid: 8,
        prev_state: 1,
        prev_comm: 0,
        next_tid: 0,
        next_comm: 0,
    })
    .expect("sched");
    rec.jit_symbol(JitSymbolRow {
        pid: 7,
        start: 0x3000,
        size: 16,
        name_id: 0,
        source_id: 0,
    })
    .expect("jit");
    rec.wakeup(WakeupRow {
        ts,
        cpu: 0,
        waker_pid: 7,
        waker_tid: 8,
        waker_comm: 0,
        wakee_tid: 9,
        target_cpu: 1,
    })
    .expect("wakeup");
    rec.kernel_frame(KernelFrameRow {
        ts,
        tid: 8,
        source: schema::KernelStackSource::Switch,
        depth: 0,
        addr: 0xffff_0000,
        name_id: 0,
    })
    .expect("kernel frame");
    rec.python_frame(PythonFrameRow {
        ts,
        pid: 7,
        tid: 8,
        depth: 0,
        code: 0x4000,
        function_id: None,
        file_id: None,
        line: None,
        is_entry: true,
    })
    .expect("python frame");
    rec.python_switch_frame(PythonFrameRow {
        ts,
        pid: 7,
        tid: 8,
        depth: 0,
        code: 0x4000,
        function_id: None,
        file_id: None,
        line: None,
        is_entry: true,
    })
    .expect("python switch frame");
    rec.python_thread_name(PythonThreadNameRow {
        ts,
        pid: 7,
        tid: 8,
        name_id: 0,
    })
    .expect("python thread name");
    rec.sample(
        SampleRow {
            ts,
            pid: 7,
            tid: 8,
            cpu: 0,
            kernel_mode: false,
        },
        raw(),
    )
    .expect("sample");
    rec.host_memory(HostMemoryRow {
        ts,
        pid: 7,
        rss: 3,
        anon: 1,
        file: 1,
        shmem: 1,
        vm_size: 4,
    })
    .expect("host memory");
    rec.nic_metric(NicMetricRow {
        ts,
        device_id: 0,
        rx_bytes: 1,
        rx_packets: 1,
        tx_bytes: 1,
        tx_packets: 1,
        rx_dropped: 0,
        tx_dropped: 0,
    })
    .expect("nic");
    rec.rdma_hw_counter(RdmaCounterRow {
        ts,
        device_id: 0,
        counter_id: 0,
        value: 1,
    })
    .expect("rdma");
    rec.ppu_metric(PpuMetricRow {
        ts,
        pid: 7,
        device: 0,
        interval_ns: 10,
        busy_ns: 5,
        sm_clock_mhz: 1,
        power_mw: 1,
        memory_used: 1,
        memory_total: 2,
        mem_clock_mhz: None,
    })
    .expect("ppu");
}

/// Every table the recorder writes reaches the report, a window's and the
/// finished recording's alike (the recorder lists its tables once, in
/// `every_table!`), with its row; the raw stacks stay in the folder for the
/// symbolize stage, not members.
#[test]
fn every_recorded_table_reaches_a_window_and_the_finish() {
    let dir = scratch("every-table");
    let rec_dir = dir.join("rec");
    let mut rec = Recorder::create(rec_dir.clone()).expect("recorder");
    record_one_of_each(&mut rec);
    rec.checkpoint(Default::default()).expect("checkpoint");
    let window = rec
        .window((0, i64::MAX), &dir.join("window.asysrep"))
        .expect("window");
    let finished = rec.finish(Default::default()).expect("finish");
    let mut want = vec![
        schema::HGGC_API,
        schema::HGGC_ACTIVITY,
        schema::PROCESS_EVENTS,
        schema::MODULES,
        schema::PROCESSES,
        schema::SCHED,
        schema::JIT_SYMBOLS,
        schema::SCHED_WAKEUPS,
        schema::KERNEL_STACKS,
        schema::PYTHON_FRAMES,
        schema::PYTHON_SWITCH_FRAMES,
        schema::PYTHON_THREAD_NAMES,
        schema::CPU_SAMPLES,
        schema::HOST_MEMORY,
        schema::NIC_METRICS,
        schema::PPU_METRICS,
        schema::RDMA_HW_COUNTERS,
    ];
    want.sort_unstable();
    for r in [&window, &finished] {
        let got: Vec<&str> = r.tables.keys().map(String::as_str).collect();
        assert_eq!(got, want);
        assert!(r.tables.values().all(|&n| n == 1), "{:?}", r.tables);
    }
    for raw in [schema::STACKS_RAW, schema::SAMPLE_STACKS_RAW] {
        assert!(rec_dir.join(format!("{raw}.parquet")).exists(), "{raw}");
    }
    let _ = std::fs::remove_dir_all(&window.dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn api_rows_round_trip_through_the_recorder() {
    let dir = scratch("roundtrip");
    let rec_dir = dir.join("rec");
    let mut rec = Recorder::create(rec_dir.clone()).expect("recorder");
    let rows: Vec<ApiRow> = (0..20_000).map(api_row).collect();
    // Checkpoints between rows: the table is written as several chunks,
    // which the finish joins back into one file in order.
    for (i, r) in rows.iter().enumerate() {
        rec.api(asys_report::trace_items::TraceItem::Hggc, r.clone())
            .expect("push");
        if i % 7_000 == 6_999 {
            rec.checkpoint(Default::default()).expect("checkpoint");
        }
    }
    let recorded = rec.finish(Default::default()).expect("finish");
    let joined = reader::open_file(&rec_dir, schema::HGGC_API)
        .expect("open")
        .expect("joined table");
    assert_eq!(joined.num_rows(), rows.len() as u64);
    // The checkpoints' small row groups were joined into one.
    assert_eq!(joined.num_row_groups(), 1);
    let left: Vec<_> = std::fs::read_dir(&rec_dir)
        .expect("folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".chunk.parquet"))
        .collect();
    assert!(left.is_empty(), "chunks left after the join: {left:?}");
    // Kernel addresses were gathered while recording, for symbolize.
    let want: std::collections::BTreeSet<(u32, u64)> = rows
        .iter()
        .filter_map(|r| r.kernel_addr.map(|a| (r.pid, a)))
        .collect();
    assert_eq!(recorded.kernels, want);
    let mut i = 0;
    let columns = [
        api::START,
        api::END,
        api::TID,
        api::RETURN_VALUE,
        api::CORRELATION_ID,
        api::BYTES,
        api::GRID_X,
        api::ARGS,
        api::TEXT_ID,
    ];
    for b in api::scan_file(&rec_dir, schema::HGGC_API, &columns).expect("scan") {
        let b = b.expect("batch");
        let v = api::View(&b);
        let start = v.start().expect("start");
        let end = v.end().expect("end");
        let tid = v.tid().expect("tid");
        let ret = v.return_value().expect("ret");
        let corr = v.correlation_id().expect("corr");
        let bytes = v.bytes().expect("bytes");
        let grid = v.grid_x().expect("grid");
        let text = v.text_id().expect("text");
        let (args, items) = v.args_registers().expect("args");
        for k in 0..b.num_rows() {
            let r = &rows[i];
            assert_eq!(
                (start[k], end[k], tid[k], ret[k]),
                (r.start, r.end, r.tid, r.return_value)
            );
            let opt =
                |a: &arrow::array::PrimitiveArray<UInt32Type>| a.is_valid(k).then(|| a.value(k));
            assert_eq!(opt(corr), r.correlation);
            assert_eq!(opt(text), r.text_id);
            assert_eq!(opt(grid), r.grid.map(|g| g[0]));
            assert_eq!(bytes.is_valid(k).then(|| bytes.value(k)), r.bytes);
            let at = args.value_offset(k) as usize;
            let got = args
                .is_valid(k)
                .then(|| items.values()[at..at + 8].to_vec());
            assert_eq!(got, r.args.map(|a| a.to_vec()));
            i += 1;
        }
    }
    assert_eq!(i, rows.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn readers_go_by_name_whatever_the_column_order() {
    let dir = scratch("reordered");
    let rows: Vec<ApiRow> = (0..100).map(api_row).collect();
    let schema = api::Table::schema();
    let arrays = api::Table::to_columns(&rows);
    // The same columns, last first: start and end, both i64, swap places
    // with everything else.
    let fields: Vec<_> = schema.fields().iter().rev().cloned().collect();
    let arrays: Vec<_> = arrays.into_iter().rev().collect();
    let reordered = Arc::new(Schema::new(fields));
    let columns: Vec<ColumnDef> = api::Table::COLUMNS.iter().rev().copied().collect();
    let mut w =
        TableWriter::create(&dir, schema::HGGC_API, reordered.clone(), &columns).expect("writer");
    w.write(&RecordBatch::try_new(reordered, arrays).expect("batch"))
        .expect("write");
    w.close().expect("close");
    let mut seen = 0;
    for b in api::scan_file(&dir, schema::HGGC_API, &[api::END, api::START]).expect("scan") {
        let b = b.expect("batch");
        let v = api::View(&b);
        let (start, end) = (v.start().expect("start"), v.end().expect("end"));
        for k in 0..b.num_rows() {
            assert_eq!((start[k], end[k]), (rows[seen].start, rows[seen].end));
            seen += 1;
        }
    }
    assert_eq!(seen, rows.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_or_mistyped_column_is_an_error_not_a_panic() {
    let dir = scratch("missing");
    let rows: Vec<ApiRow> = (0..10).map(api_row).collect();
    let mut w = TableWriter::create(
        &dir,
        schema::HGGC_API,
        api::Table::schema(),
        api::Table::COLUMNS,
    )
    .expect("writer");
    w.write(
        &RecordBatch::try_new(api::Table::schema(), api::Table::to_columns(&rows)).expect("batch"),
    )
    .expect("write");
    w.close().expect("close");
    let err = api::scan_file(&dir, schema::HGGC_API, &["noSuchColumn"])
        .err()
        .expect("missing column");
    assert!(err.to_string().contains("noSuchColumn"), "{err}");
    let b = api::scan_file(&dir, schema::HGGC_API, &[api::START])
        .expect("scan")
        .next()
        .expect("a batch")
        .expect("batch");
    assert!(b.prim::<UInt32Type>(api::START).is_err());
    assert!(b.prim::<Int64Type>(api::END).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

fn metadata() -> Metadata {
    Metadata {
        format: asys_report::report::metadata::FORMAT.into(),
        schema_version: schema::SCHEMA_VERSION,
        ..Default::default()
    }
}

#[test]
fn packing_moves_members_into_a_tar_without_following_links() {
    let dir = scratch("pack");
    let tables = dir.join("tables");
    std::fs::create_dir(&tables).expect("tables");
    let mut rec = Recorder::create(tables.join("rec")).expect("recorder");
    for i in 0..1000 {
        rec.api(asys_report::trace_items::TraceItem::Hggc, api_row(i))
            .expect("push");
    }
    let mut recorded = rec.finish(Default::default()).expect("finish");
    recorded.write_strings().expect("strings");
    let dest = dir.join("r.asysrep");
    // Someone put a link where the temporary file goes: it is replaced, not
    // followed.
    let victim = dir.join("victim");
    std::fs::write(&victim, b"keep").expect("victim");
    std::os::unix::fs::symlink(&victim, dest.with_extension("asysrep.tmp")).expect("link");
    container::pack(&recorded.dir, &recorded.members, &metadata(), &dest).expect("pack");
    assert_eq!(std::fs::read(&victim).expect("victim"), b"keep");
    assert!(!dest.with_extension("asysrep.tmp").exists());
    // Each member left the recording folder once it was in the archive.
    for m in &recorded.members {
        assert!(!recorded.dir.join(m).exists(), "{m} still there");
    }
    let report = Container::open(&dest).expect("open");
    let t = reader::open(&report, schema::HGGC_API)
        .expect("open table")
        .expect("table");
    assert_eq!(t.num_rows(), 1000);
    // A plain tar: the tar crate lists every member.
    let mut names = Vec::new();
    let file = std::fs::File::open(&dest).expect("report");
    for e in tar::Archive::new(file).entries().expect("entries") {
        names.push(
            e.expect("entry")
                .path()
                .expect("path")
                .display()
                .to_string(),
        );
    }
    assert_eq!(names[0], container::METADATA_MEMBER);
    assert!(names.contains(&"hggc_api.parquet".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `api_sum` over a report of several row groups (decoded on several
/// threads, merged) gives what one pass over all durations gives.
#[test]
fn api_sum_over_row_groups_matches_a_direct_computation() {
    use asys_report::stats::{api_sum, format::Value};
    let dir = scratch("apisum");
    let mut rec = Recorder::create(dir.join("rec")).expect("recorder");
    let names = ["a", "b", "c"].map(|n| rec.strings.intern(n));
    let n = 3 * asys_report::report::columns::ROW_GROUP_ROWS + 123;
    let mut by_name: std::collections::HashMap<u32, Vec<u64>> = Default::default();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut t = 0i64;
    for i in 0..n {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let name = names[(rng % 3) as usize];
        let d = (rng >> 20) % 10_000 + if i == 7 { 1 << 33 } else { 0 };
        by_name.entry(name).or_default().push(d);
        rec.api(
            asys_report::trace_items::TraceItem::Hggc,
            ApiRow {
                start: t,
                end: t + d as i64,
                name_id: name,
                ..Default::default()
            },
        )
        .expect("push");
        t += 1000;
    }
    let mut recorded = rec.finish(Default::default()).expect("finish");
    recorded.write_strings().expect("strings");
    let dest = dir.join("r.asysrep");
    container::pack(&recorded.dir, &recorded.members, &metadata(), &dest).expect("pack");
    let report = Container::open(&dest).expect("open");
    assert!(
        reader::open(&report, schema::HGGC_API)
            .expect("open")
            .expect("table")
            .num_row_groups()
            > 3
    );
    let table = api_sum::api_sum(&report, schema::HGGC_API, "t").expect("api_sum");
    assert_eq!(table.rows.len(), 3);
    for row in &table.rows {
        let Value::Str(name) = &row[8] else {
            panic!("no name in {row:?}")
        };
        let id = ["a", "b", "c"]
            .iter()
            .position(|n| n == name)
            .expect("name");
        let mut v = by_name[&names[id]].clone();
        v.sort_unstable();
        let k = v.len();
        let med = if k % 2 == 1 {
            v[k / 2] as f64
        } else {
            (v[k / 2 - 1] + v[k / 2]) as f64 / 2.0
        };
        assert_eq!(row[2], Value::Int(k as i64), "{name} count");
        assert_eq!(
            row[1],
            Value::Int(v.iter().sum::<u64>() as i64),
            "{name} total"
        );
        assert_eq!(row[4], Value::Float(med), "{name} median");
        assert_eq!(row[5], Value::Int(v[0] as i64), "{name} min");
        assert_eq!(row[6], Value::Int(v[k - 1] as i64), "{name} max");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recorder that never finished (asys killed): recover packs what its
/// checkpoints hold, and nothing written after the last one.
#[test]
fn recover_packs_the_checkpoints_of_an_unfinished_recording() {
    let dir = scratch("recover");
    let rec_dir = dir.join("r.asysrep.unfinished-1");
    let report = dir.join("r.asysrep");
    let mut rec = Recorder::create(rec_dir.clone()).expect("recorder");
    rec.describe(&crate::sink::journal::Recording {
        output: report.clone(),
        metadata: Metadata {
            format: asys_report::report::metadata::FORMAT.into(),
            schema_version: schema::SCHEMA_VERSION,
            start_monotonic_ns: 1_000,
            ..Default::default()
        },
        backtrace_depth: 8,
        sample_depth: 8,
        flight: false,
    })
    .expect("describe");
    let name = rec.strings.intern("hggcKept");
    for i in 0..5_000 {
        let row = ApiRow {
            name_id: name,
            ..api_row(i)
        };
        rec.api(asys_report::trace_items::TraceItem::Hggc, row)
            .expect("push");
        if i == 2_999 || i == 3_999 {
            rec.checkpoint(Default::default()).expect("checkpoint");
        }
    }
    // Rows and a string after the last checkpoint, partly written, then the
    // recorder is dropped as a killed asys leaves it.
    let late = rec.strings.intern("hggcLate");
    rec.api(
        asys_report::trace_items::TraceItem::Hggc,
        ApiRow {
            name_id: late,
            ..api_row(9_999)
        },
    )
    .expect("push");
    rec.encoded_size().expect("encode");
    drop(rec);

    let r = super::salvage::recover(&rec_dir, &Default::default()).expect("recover");
    assert_eq!(r.report, report);
    assert_eq!(r.checkpoints, 2);
    assert!(
        !rec_dir.exists(),
        "the folder is removed once the report is written"
    );
    let c = Container::open(&report).expect("report");
    assert_eq!(c.metadata.tables.get(schema::HGGC_API), Some(&4_000));
    let recovered = c.metadata.recovered.as_ref().expect("recovered");
    assert!(recovered.reason.contains("killed"), "{}", recovered.reason);
    let strings = reader::string_table(&c).expect("strings");
    assert_eq!(strings.get(name), Some("hggcKept"));
    // Its id may name another string now (the symbolize stage's).
    assert!(strings.values().iter().all(|v| v != "hggcLate"));
    let mut n = 0;
    for b in api::scan(&c, schema::HGGC_API, &[api::START, api::NAME_ID]).expect("scan") {
        let b = b.expect("batch");
        let start = api::View(&b).start().expect("start");
        for (k, &s) in start.iter().enumerate() {
            assert_eq!(s, api_row(n).start, "row {k}");
            n += 1;
        }
    }
    assert_eq!(n, 4_000);
    // A second recover finds no folder to read.
    assert!(super::salvage::recover(&rec_dir, &Default::default()).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Full row groups are copied as they are; the small ones a checkpoint
/// leaves between them are joined, and the rows stay in order.
#[test]
fn joining_copies_full_row_groups_and_merges_small_ones_in_order() {
    use asys_report::report::columns::ROW_GROUP_ROWS;
    let dir = scratch("join");
    let rec_dir = dir.join("rec");
    let mut rec = Recorder::create(rec_dir.clone()).expect("recorder");
    let half = ROW_GROUP_ROWS + ROW_GROUP_ROWS / 8;
    for i in 0..2 * half as u32 {
        rec.api(asys_report::trace_items::TraceItem::Hggc, api_row(i))
            .expect("push");
        if i as usize == half - 1 {
            rec.checkpoint(Default::default()).expect("checkpoint");
        }
    }
    rec.finish(Default::default()).expect("finish");
    let joined = reader::open_file(&rec_dir, schema::HGGC_API)
        .expect("open")
        .expect("joined table");
    assert_eq!(joined.num_rows(), 2 * half as u64);
    // full, the first leftover, full, the second leftover.
    assert_eq!(joined.num_row_groups(), 4);
    let mut n = 0;
    for b in joined.scan(&[api::START], None).expect("scan") {
        let b = b.expect("batch");
        for &s in api::View(&b).start().expect("start") {
            assert_eq!(s, api_row(n).start);
            n += 1;
        }
    }
    assert_eq!(n as usize, 2 * half);
    let _ = std::fs::remove_dir_all(&dir);
}

/// CUPTI's kernel record, sync and graph records, recorded and packed, read
/// back by cuda_gpu_trace (nsys's columns), cuda_gpu_sync, the sync rule
/// and the SQLite export's CUPTI_ACTIVITY_KIND_KERNEL; an HGPTI kernel
/// (no record details) reads them as null.
#[test]
fn cuptis_kernel_sync_and_graph_records_reach_the_reports() {
    use asys_report::report::rows::{ActivityRow, GraphRow, KernelDetails, SyncRow};
    use asys_report::stats::format::Value;
    let dir = scratch("cupti-records");
    let mut rec = Recorder::create(dir.join("rec")).expect("recorder");
    let kernel = |start: i64, kernel: Option<KernelDetails>| ActivityRow {
        start,
        end: start + 500,
        kind: schema::ActivityKind::Kernel,
        pid: 42,
        device: 0,
        stream: 7,
        correlation: start as u32,
        kernel_addr: Some(0x10),
        grid: Some([4, 1, 1]),
        block: Some([128, 1, 1]),
        shared_mem: Some(48),
        context: kernel.map(|_| 1),
        kernel,
        ..Default::default()
    };
    let details = KernelDetails {
        registers_per_thread: 40,
        static_shared: 16,
        dynamic_shared: 32,
        local_per_thread: 24,
        local_total: 1 << 20,
        green_context: None,
        graph_id: 3,
        graph_node_id: 9,
    };
    rec.activity(kernel(1_000, Some(details))).expect("push");
    rec.activity(kernel(2_000, None)).expect("push");
    rec.sync(SyncRow {
        start: 3_000,
        end: 3_000 + 2_000_000,
        pid: 42,
        sync_type: 3,
        context: 1,
        stream: 7,
        event: u32::MAX,
        correlation: 55,
    })
    .expect("sync");
    rec.graph(GraphRow {
        start: 4_000,
        end: 9_000,
        pid: 42,
        graph_id: 3,
        correlation: 56,
        ..Default::default()
    })
    .expect("graph");
    let mut recorded = rec.finish(Default::default()).expect("finish");
    recorded.write_strings().expect("strings");
    let dest = dir.join("r.asysrep");
    container::pack(&recorded.dir, &recorded.members, &metadata(), &dest).expect("pack");
    let report = Container::open(&dest).expect("open");
    let tables: Vec<&str> = report.tables().collect();
    assert!(
        tables.contains(&schema::CUDA_GRAPHS) && tables.contains(&schema::CUDA_SYNC),
        "{tables:?}"
    );

    let t =
        asys_report::stats::device::ppu_trace(&report, asys_report::stats::device::Runtime::Cuda)
            .expect("cuda_gpu_trace");
    let col = |name: &str| t.headers.iter().position(|h| *h == name).expect(name);
    let at = |row: usize, name: &str| t.rows[row][col(name)].clone();
    assert_eq!(at(0, "Reg/Trd"), Value::Int(40));
    assert_eq!(at(0, "StcSMem (MB)"), Value::Fixed(16e-6, 3));
    assert_eq!(at(0, "DymSMem (MB)"), Value::Fixed(32e-6, 3));
    assert_eq!(at(0, "Ctx"), Value::Int(1));
    assert_eq!(at(0, "GreenCtx"), Value::Null);
    assert_eq!(
        (at(0, "GraphId"), at(0, "GraphNodeId")),
        (Value::Int(3), Value::Int(9))
    );
    // HGPTI's (or an older report's) kernel: null, its sum as the dynamic part.
    assert_eq!(at(1, "Reg/Trd"), Value::Null);
    assert_eq!(at(1, "Ctx"), Value::Null);
    assert_eq!(at(1, "DymSMem (MB)"), Value::Fixed(48e-6, 3));
    // The whole graph's execution (graph mode): a row of its own.
    let graph = t
        .rows
        .iter()
        .find(|r| r[col("Name")] == Value::Str("[CUDA graph 3]".into()))
        .expect("graph row");
    assert_eq!(graph[col("CorrId")], Value::Int(56));
    assert_eq!(graph[col("Duration (ns)")], Value::Int(5_000));

    let s = asys_report::stats::sync::cuda_gpu_sync(&report).expect("cuda_gpu_sync");
    assert_eq!(s.rows.len(), 1);
    assert_eq!(s.rows[0][3], Value::Str("cudaStreamSynchronize".into()));
    let spec = asys_report::analyze::RuleSpec::parse("cuda_api_sync").expect("rule");
    let data = asys_report::analyze::data::Data::load_for(&report, &[spec.rule]).expect("data");
    let found = asys_report::analyze::run(&spec, &data).expect("rule");
    assert_eq!(found.rows.len(), 1, "{:?}", found.rows);

    let db = dir.join("r.sqlite");
    let all = asys_report::export::sqlite::tables(&report);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    asys_report::export::sqlite::export(&report, &db, &all).expect("sqlite");
    let conn = rusqlite::Connection::open(&db).expect("db");
    let row: Vec<Option<i64>> = conn
        .query_row(
            "SELECT registersPerThread, staticSharedMemory, dynamicSharedMemory, \
             localMemoryPerThread, localMemoryTotal, contextId, greenContextId, graphId, \
             graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1",
            [],
            |r| (0..9).map(|i| r.get(i)).collect(),
        )
        .expect("kernel row");
    assert_eq!(
        row,
        [
            Some(40),
            Some(16),
            Some(32),
            Some(24),
            Some(1 << 20),
            Some(1),
            None,
            Some(3),
            Some(9)
        ]
    );
    let sync: (i64, Option<i64>, Option<i64>, i64, String) = conn
        .query_row(
            "SELECT s.end - s.start, s.streamId, s.eventId, s.correlationId, e.name \
             FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION AS s \
             JOIN ENUM_CUPTI_SYNC_TYPE AS e ON e.id = s.syncType",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .expect("sync row");
    assert_eq!(
        sync,
        (
            2_000_000,
            Some(7),
            None,
            55,
            "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE".into()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A report written before the kernel record's columns (its activity table
/// has only the old ones) reads as before: cuda_gpu_trace shows nulls in
/// the new columns and the shared memory sum as the dynamic part, and the
/// SQLite export writes the kernel with contextId 0 and NULL details.
#[test]
fn a_report_without_the_kernel_record_columns_reads_them_as_null() {
    use asys_report::report::rows::{ActivityRow, KernelDetails};
    use asys_report::stats::format::Value;
    use parquet::arrow::{ArrowWriter, arrow_reader::ParquetRecordBatchReaderBuilder};
    let dir = scratch("old-activity");
    let mut rec = Recorder::create(dir.join("rec")).expect("recorder");
    rec.activity(ActivityRow {
        start: 1_000,
        end: 2_000,
        kind: schema::ActivityKind::Kernel,
        pid: 42,
        correlation: 5,
        kernel_addr: Some(0x10),
        grid: Some([1, 1, 1]),
        block: Some([32, 1, 1]),
        shared_mem: Some(48),
        context: Some(1),
        kernel: Some(KernelDetails {
            registers_per_thread: 40,
            ..Default::default()
        }),
        ..Default::default()
    })
    .expect("push");
    let mut recorded = rec.finish(Default::default()).expect("finish");
    recorded.write_strings().expect("strings");
    // Rewrite the activity table as an older report has it: without the
    // columns of CUPTI's kernel record.
    let path = recorded
        .dir
        .join(format!("{}.parquet", schema::HGGC_ACTIVITY));
    let old = [
        schema::activity::REGISTERS_PER_THREAD,
        schema::activity::STATIC_SHARED_MEMORY,
        schema::activity::DYNAMIC_SHARED_MEMORY,
        schema::activity::LOCAL_MEMORY_PER_THREAD,
        schema::activity::LOCAL_MEMORY_TOTAL,
        schema::activity::CONTEXT_ID,
        schema::activity::GREEN_CONTEXT_ID,
        schema::activity::GRAPH_ID,
        schema::activity::GRAPH_NODE_ID,
    ];
    let batches: Vec<RecordBatch> =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).expect("table"))
            .expect("parquet")
            .build()
            .expect("reader")
            .map(|b| {
                let b = b.expect("batch");
                let keep: Vec<usize> = (0..b.num_columns())
                    .filter(|&i| !old.contains(&b.schema().field(i).name().as_str()))
                    .collect();
                b.project(&keep).expect("project")
            })
            .collect();
    assert_eq!(
        batches[0].num_columns(),
        schema::activity::Table::COLUMNS.len() - old.len()
    );
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).expect("rewrite"),
        batches[0].schema(),
        None,
    )
    .expect("writer");
    for b in &batches {
        w.write(b).expect("write");
    }
    w.close().expect("close");
    let dest = dir.join("r.asysrep");
    container::pack(&recorded.dir, &recorded.members, &metadata(), &dest).expect("pack");
    let report = Container::open(&dest).expect("open");

    let t =
        asys_report::stats::device::ppu_trace(&report, asys_report::stats::device::Runtime::Cuda)
            .expect("cuda_gpu_trace");
    let at = |name: &str| t.rows[0][t.headers.iter().position(|h| *h == name).expect(name)].clone();
    assert_eq!(at("Reg/Trd"), Value::Null);
    assert_eq!(at("Ctx"), Value::Null);
    assert_eq!(at("GraphId"), Value::Null);
    assert_eq!(at("DymSMem (MB)"), Value::Fixed(48e-6, 3));

    let db = dir.join("r.sqlite");
    let all = asys_report::export::sqlite::tables(&report);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    asys_report::export::sqlite::export(&report, &db, &all).expect("sqlite");
    let conn = rusqlite::Connection::open(&db).expect("db");
    let row: (i64, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT contextId, registersPerThread, dynamicSharedMemory \
             FROM CUPTI_ACTIVITY_KIND_KERNEL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("kernel row");
    assert_eq!(row, (0, None, Some(48)));
    let _ = std::fs::remove_dir_all(&dir);
}
