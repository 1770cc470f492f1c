//! Report tables nsys has no table for (host memory, wake-ups, kernel
//! stacks, Python frames, JIT symbols), copied into the database under
//! their own names in capitals (`host_memory` becomes `HOST_MEMORY`), with
//! the columns of docs/report-format.md. The columns come from the report's
//! own schema, so they are listed nowhere else.
use arrow::{
    array::{Array, AsArray},
    datatypes::{
        DataType, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
        UInt64Type,
    },
};
use rusqlite::types::Value;

use super::{ExportError, Writer};
use crate::report::{reader, schema};

/// The report tables copied whole, and the time columns of each (shifted
/// to the session start, as every time of the database).
pub const COPIED: &[(&str, &[&str])] = &[
    (schema::HOST_MEMORY, &["ts"]),
    (schema::SCHED_WAKEUPS, &["ts"]),
    (schema::KERNEL_STACKS, &["ts"]),
    (schema::PYTHON_FRAMES, &["ts"]),
    (schema::PYTHON_SWITCH_FRAMES, &["ts"]),
    (schema::JIT_SYMBOLS, &[]),
];

/// The database's name of a copied report table.
pub fn sql_name(table: &str) -> String {
    table.to_ascii_uppercase()
}

/// SQLite's column type of an Arrow type the report uses.
fn sql_type(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 => "TEXT",
        DataType::Float32 | DataType::Float64 => "REAL",
        DataType::Binary | DataType::LargeBinary => "BLOB",
        _ => "INTEGER",
    }
}

/// Row `i` of `a` as a SQLite value. A u64 above i64's range (a kernel
/// address) is stored as the i64 of the same bits, as SQLite has no
/// unsigned integers.
fn value(a: &dyn Array, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Boolean => Value::Integer(a.as_boolean().value(i).into()),
        DataType::Int8 => Value::Integer(a.as_primitive::<Int8Type>().value(i).into()),
        DataType::Int16 => Value::Integer(a.as_primitive::<Int16Type>().value(i).into()),
        DataType::Int32 => Value::Integer(a.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => Value::Integer(a.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => Value::Integer(a.as_primitive::<UInt8Type>().value(i).into()),
        DataType::UInt16 => Value::Integer(a.as_primitive::<UInt16Type>().value(i).into()),
        DataType::UInt32 => Value::Integer(a.as_primitive::<UInt32Type>().value(i).into()),
        DataType::UInt64 => Value::Integer(a.as_primitive::<UInt64Type>().value(i) as i64),
        DataType::Utf8 => Value::Text(a.as_string::<i32>().value(i).to_owned()),
        DataType::Binary => Value::Blob(a.as_binary::<i32>().value(i).to_owned()),
        // No report column has another type; should one appear, it is
        // left empty rather than guessed at.
        _ => Value::Null,
    }
}

/// Copies `table` of the report, if it has one, into `TABLE`.
pub fn copy(w: &Writer, table: &str, times: &[&str]) -> Result<(), ExportError> {
    let Some(t) = reader::open(w.report, table)? else {
        return Ok(());
    };
    let arrow_schema = t.schema();
    let name = sql_name(table);
    let columns: Vec<String> = arrow_schema
        .fields()
        .iter()
        .map(|f| format!("\"{}\" {}", f.name(), sql_type(f.data_type())))
        .collect();
    w.exec(&format!("CREATE TABLE {name} ({});", columns.join(", ")))?;
    let names = t.column_names();
    let cols: Vec<&str> = names.iter().map(String::as_str).collect();
    let shift: Vec<bool> = cols.iter().map(|c| times.contains(c)).collect();
    let marks = vec!["?"; cols.len()].join(",");
    let mut ins =
        w.db.prepare(&format!("INSERT INTO {name} VALUES ({marks})"))
            .map_err(|e| w.sql(e))?;
    for b in t.scan(&cols, None)? {
        let b = b?;
        let batch = b.record_batch();
        for i in 0..batch.num_rows() {
            let row = batch.columns().iter().zip(&shift).map(|(a, &shift)| {
                match (value(a.as_ref(), i), shift) {
                    (Value::Integer(ns), true) => Value::Integer(ns - w.origin),
                    (v, _) => v,
                }
            });
            ins.execute(rusqlite::params_from_iter(row))
                .map_err(|e| w.sql(e))?;
        }
    }
    Ok(())
}
