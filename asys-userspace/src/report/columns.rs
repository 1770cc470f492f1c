//! Declaring a table once: the [`table!`] macro turns one list of columns
//! (name, kind, Parquet encoding and how to get the value from a row) into the
//! column-name constants readers use, the Arrow schema, the row → Arrow
//! builder and the writer's per-column encodings. Nothing else lists a
//! table's columns, so no two lists can disagree on order.
use std::sync::Arc;

use arrow::{
    array::{
        ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, PrimitiveArray, StringArray,
        UInt64Array, new_null_array,
    },
    buffer::NullBuffer,
    datatypes::{
        ArrowPrimitiveType, DataType, Field, Int32Type, Int64Type, Schema, SchemaRef, UInt32Type,
        UInt64Type,
    },
};
use parquet::{
    basic::{Compression, Encoding, ZstdLevel},
    file::properties::{EnabledStatistics, WriterProperties},
    schema::types::ColumnPath,
};

/// What a column holds. `opt_*` columns are nullable.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    i64,
    u32,
    u64,
    bool,
    str,
    bin,
    opt_i32,
    opt_u32,
    opt_u64,
    opt_str,
    /// Eight u64 (the raw argument registers), or null.
    opt_u64x8,
}

impl Kind {
    pub fn data_type(self) -> DataType {
        use DataType::*;
        match self {
            Kind::i64 => Int64,
            Kind::opt_i32 => Int32,
            Kind::u32 | Kind::opt_u32 => UInt32,
            Kind::u64 | Kind::opt_u64 => UInt64,
            Kind::bool => Boolean,
            Kind::str | Kind::opt_str => Utf8,
            Kind::bin => Binary,
            Kind::opt_u64x8 => FixedSizeList(u64x8_item(), 8),
        }
    }

    pub fn nullable(self) -> bool {
        matches!(
            self,
            Kind::opt_i32 | Kind::opt_u32 | Kind::opt_u64 | Kind::opt_str | Kind::opt_u64x8
        )
    }
}

fn u64x8_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::UInt64, false))
}

/// How a column is encoded in Parquet (every column is then zstd-compressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enc {
    /// Dictionary with RLE indices (falling back to plain when the
    /// dictionary grows too large): ids, small sets of values, nulls.
    Dict,
    /// DELTA_BINARY_PACKED: sorted or slowly moving integers (times,
    /// correlation ids), where consecutive differences are small.
    Delta,
    /// Plain: values with no structure to exploit (zstd still applies).
    Plain,
}

/// One declared column.
#[derive(Debug, Clone, Copy)]
pub struct ColumnDef {
    pub name: &'static str,
    pub kind: Kind,
    pub enc: Enc,
}

/// A table as the [`table!`] macro declares it.
pub trait TableDef {
    type Row;
    /// The columns, in file order.
    const COLUMNS: &'static [ColumnDef];
    /// One array per column of [`Self::COLUMNS`], in that order.
    fn to_columns(rows: &[Self::Row]) -> Vec<ArrayRef>;

    fn schema() -> SchemaRef {
        schema(Self::COLUMNS)
    }
}

pub fn schema(columns: &[ColumnDef]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(c.name, c.kind.data_type(), c.kind.nullable()))
            .collect::<Vec<_>>(),
    ))
}

/// zstd level of every column. Measured on the API table of 1 M calls
/// (`cargo xtask bench-report`): level 3 is within a few percent of 9 in size
/// and several times faster to encode; level 1 gives about 10 % more bytes.
pub const ZSTD_LEVEL: i32 = 3;

/// Rows per row group: larger groups compress better and cost less footer,
/// while the writer's buffer (encoded, compressed pages) stays a few MiB.
pub const ROW_GROUP_ROWS: usize = 131_072;

/// Writer settings for a table: zstd for everything, each column's encoding.
pub fn writer_properties(columns: &[ColumnDef]) -> WriterProperties {
    let level = ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default();
    let mut b = WriterProperties::builder()
        .set_max_row_group_size(ROW_GROUP_ROWS)
        .set_compression(Compression::ZSTD(level))
        // Pages end at 1 MiB (the default size limit), not every 20,000 rows:
        // each page gets its own zstd context, whose set-up cost more than
        // the compression itself on the small pages of sparse columns.
        .set_data_page_row_count_limit(ROW_GROUP_ROWS)
        // No reader of asys's uses min/max statistics (every report reads
        // whole columns), and computing them is a good part of encoding.
        .set_statistics_enabled(EnabledStatistics::None)
        // The recorder hands over 8,192-row batches: encode them in one go.
        .set_write_batch_size(8192);
    for c in columns {
        let path = ColumnPath::from(c.name);
        b = match c.enc {
            Enc::Dict => b,
            Enc::Delta => b
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED),
            Enc::Plain => b.set_column_dictionary_enabled(path, false),
        };
    }
    b.build()
}

/// Array builders, one function per [`Kind`] (same names), used by the
/// builders [`table!`] generates. Generic over the getter so it inlines.
#[allow(non_snake_case)]
pub mod build {
    use super::*;

    fn prim<R, T: ArrowPrimitiveType>(rows: &[R], f: impl Fn(&R) -> T::Native) -> ArrayRef {
        Arc::new(PrimitiveArray::<T>::from_iter_values(rows.iter().map(f)))
    }

    fn opt_prim<R, T: ArrowPrimitiveType>(
        rows: &[R],
        f: impl Fn(&R) -> Option<T::Native>,
    ) -> ArrayRef {
        // Most optional columns are null in most rows (they belong to a few
        // APIs): a first pass finds the all-null batches, which cost nothing.
        if rows.iter().all(|r| f(r).is_none()) {
            return new_null_array(&T::DATA_TYPE, rows.len());
        }
        Arc::new(rows.iter().map(f).collect::<PrimitiveArray<T>>())
    }

    pub fn i64<R>(rows: &[R], f: impl Fn(&R) -> i64) -> ArrayRef {
        prim::<R, Int64Type>(rows, f)
    }
    pub fn u32<R>(rows: &[R], f: impl Fn(&R) -> u32) -> ArrayRef {
        prim::<R, UInt32Type>(rows, f)
    }
    pub fn u64<R>(rows: &[R], f: impl Fn(&R) -> u64) -> ArrayRef {
        prim::<R, UInt64Type>(rows, f)
    }
    pub fn opt_i32<R>(rows: &[R], f: impl Fn(&R) -> Option<i32>) -> ArrayRef {
        opt_prim::<R, Int32Type>(rows, f)
    }
    pub fn opt_u32<R>(rows: &[R], f: impl Fn(&R) -> Option<u32>) -> ArrayRef {
        opt_prim::<R, UInt32Type>(rows, f)
    }
    pub fn opt_u64<R>(rows: &[R], f: impl Fn(&R) -> Option<u64>) -> ArrayRef {
        opt_prim::<R, UInt64Type>(rows, f)
    }
    pub fn bool<R>(rows: &[R], f: impl Fn(&R) -> bool) -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<BooleanArray>())
    }
    pub fn str<R>(rows: &[R], f: impl for<'a> Fn(&'a R) -> &'a str) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    }
    pub fn opt_str<R>(rows: &[R], f: impl for<'a> Fn(&'a R) -> Option<&'a str>) -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    }
    pub fn bin<R>(rows: &[R], f: impl for<'a> Fn(&'a R) -> &'a [u8]) -> ArrayRef {
        Arc::new(BinaryArray::from_iter_values(rows.iter().map(f)))
    }
    pub fn opt_u64x8<R>(rows: &[R], f: impl for<'a> Fn(&'a R) -> Option<&'a [u64; 8]>) -> ArrayRef {
        if rows.iter().all(|r| f(r).is_none()) {
            return new_null_array(&Kind::opt_u64x8.data_type(), rows.len());
        }
        // Null lists still take their 8 child slots (zeros); the items
        // themselves are never null.
        let mut values = Vec::with_capacity(rows.len() * 8);
        let mut valid = Vec::with_capacity(rows.len());
        for r in rows {
            let a = f(r);
            values.extend_from_slice(a.unwrap_or(&[0; 8]));
            valid.push(a.is_some());
        }
        let values: ArrayRef = Arc::new(UInt64Array::from(values));
        Arc::new(FixedSizeListArray::new(
            u64x8_item(),
            8,
            values,
            Some(NullBuffer::from(valid)),
        ))
    }
}

/// Declares a table: `table! { /// doc  pub mod NAME for ROW { CONST = "name":
/// kind, Enc, |r| getter; ... } }` gives module NAME with a `&str` const per
/// column, `COLUMNS`, and `Table` implementing [`TableDef`].
macro_rules! table {
    (
        $(#[$m:meta])*
        pub mod $module:ident for $Row:ty {
            $( $(#[$cm:meta])* $CONST:ident = $name:literal : $kind:ident, $enc:ident, |$r:ident| $get:expr; )*
        }
    ) => {
        $(#[$m])*
        pub mod $module {
            #[allow(unused_imports)]
            use super::*;
            use $crate::report::columns::{ColumnDef, Enc, Kind, TableDef, build};
            // Every column has its name constant, used or not (exports, tests).
            $( $(#[$cm])* #[allow(dead_code)] pub const $CONST: &str = $name; )*
            /// The table's declaration.
            pub struct Table;
            impl TableDef for Table {
                type Row = $Row;
                const COLUMNS: &'static [ColumnDef] = &[
                    $( ColumnDef { name: $name, kind: Kind::$kind, enc: Enc::$enc }, )*
                ];
                fn to_columns(rows: &[$Row]) -> Vec<arrow::array::ArrayRef> {
                    vec![ $( build::$kind(rows, |$r: &$Row| $get), )* ]
                }
            }
        }
    };
}
pub(crate) use table;
