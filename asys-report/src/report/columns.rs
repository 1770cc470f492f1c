//! Declaring a table once: the [`table!`] macro turns one list of columns
//! (name, kind, Parquet encoding and how to get the value from a row) into the
//! column-name constants readers use, the Arrow schema, the row → Arrow
//! builder and the writer's per-column encodings. Nothing else lists a
//! table's columns, so no two lists can disagree on order.
use std::sync::Arc;

use arrow::{
    array::{
        ArrayRef, BooleanArray, FixedSizeListArray, PrimitiveArray, UInt64Array, new_null_array,
    },
    buffer::NullBuffer,
    datatypes::{ArrowPrimitiveType, DataType, Field, Schema, SchemaRef},
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
    type Builders: RowBuilder<Row = Self::Row>;
    /// The columns, in file order.
    const COLUMNS: &'static [ColumnDef];
    /// The column that places a row in time (declared `by COLUMN`): a time
    /// window of a recording keeps the rows whose value lies in it. None
    /// for a table kept whole (what names processes, mappings and JIT
    /// code, which the rows of any window may need) and for the tables
    /// written after recording.
    const TIME: Option<&'static str> = None;

    /// One array per column of [`Self::COLUMNS`], in that order (the
    /// recorder feeds its builders row by row instead; tests and exports
    /// that hold rows use this).
    fn to_columns(rows: &[Self::Row]) -> Vec<ArrayRef> {
        let mut b = Self::Builders::default();
        for r in rows {
            b.push(r);
        }
        b.finish()
    }

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

/// zstd level of every column. Measured with `cargo xtask bench-zstd-levels`
/// on the API table of a 1 M-call `call_loop` report: 1.95 / 1.85 / 1.83 /
/// 1.82 B per row at levels 1 / 3 / 6 / 9 in site mode, 2.69 / 2.62 / 2.60 /
/// 2.60 in entry mode; the encoding time did not differ beyond the noise (Parquet's
/// own encoding dominates), so 3 (zstd's default) it is.
pub const ZSTD_LEVEL: i32 = 3;

/// Rows per Arrow batch a table is built in before it goes to its writer: the
/// builders reserve this much, and memory stays bounded however long a
/// recording runs.
pub const BATCH_ROWS: usize = 8192;

/// Rows per row group: larger groups compress better and cost less footer,
/// while the writer's buffer (encoded, compressed pages) stays a few MiB.
pub const ROW_GROUP_ROWS: usize = 131_072;

/// Writer settings for a table: zstd for everything, each column's encoding.
pub fn writer_properties(columns: &[ColumnDef]) -> WriterProperties {
    let level = ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default();
    let b = WriterProperties::builder()
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
    with_encodings(b, columns).build()
}

/// `b` with each of `columns` encoded as declared: delta for the columns
/// that change a little from row to row (times, ids), no dictionary for
/// those whose values rarely repeat.
pub fn with_encodings(
    mut b: parquet::file::properties::WriterPropertiesBuilder,
    columns: &[ColumnDef],
) -> parquet::file::properties::WriterPropertiesBuilder {
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
    b
}

/// Column builders, one per [`Kind`] (see [`builder_type`]): the recorder
/// appends each row's values as the row arrives (one pass over a row that is
/// still in cache, instead of one pass over a whole batch of rows per
/// column), and a batch's arrays take the builders' buffers without a copy.
pub mod build {
    use arrow::{
        array::{BinaryBuilder, BooleanBufferBuilder, StringBuilder},
        buffer::{Buffer, ScalarBuffer},
    };

    use super::*;

    /// What every column builder does.
    pub trait ColumnBuilder: Default {
        /// The batch so far as an array; the builder starts afresh.
        fn finish(&mut self) -> ArrayRef;
    }

    use super::BATCH_ROWS;

    /// An optional column's values and validity, kept only from its first
    /// value on: a column that is null in every row of a batch (most of
    /// them, most of the time) costs a counter.
    struct Lazy<V> {
        values: Vec<V>,
        valid: Vec<bool>,
        len: usize,
        present: usize,
    }

    impl<V> Default for Lazy<V> {
        fn default() -> Self {
            Self {
                values: Vec::new(),
                valid: Vec::new(),
                len: 0,
                present: 0,
            }
        }
    }

    impl<V: Copy + Default> Lazy<V> {
        /// `width` values per row.
        #[inline]
        fn push(&mut self, v: Option<&[V]>, width: usize) {
            match v {
                None if self.present == 0 => {}
                None => {
                    self.values.extend(std::iter::repeat_n(V::default(), width));
                    self.valid.push(false);
                }
                Some(v) => {
                    if self.present == 0 {
                        // The first value: the nulls before it take their slots.
                        self.values.reserve(BATCH_ROWS * width);
                        self.valid.reserve(BATCH_ROWS);
                        self.values.resize(self.len * width, V::default());
                        self.valid.resize(self.len, false);
                    }
                    self.values.extend_from_slice(v);
                    self.valid.push(true);
                    self.present += 1;
                }
            }
            self.len += 1;
        }

        /// Values, nulls (None when there are none), rows, rows with a value.
        fn finish(&mut self) -> (Vec<V>, Option<NullBuffer>, usize, usize) {
            let taken = std::mem::take(self);
            let nulls = (taken.present < taken.len).then(|| NullBuffer::from(taken.valid));
            (taken.values, nulls, taken.len, taken.present)
        }
    }

    pub struct Prim<T: ArrowPrimitiveType>(Vec<T::Native>);

    impl<T: ArrowPrimitiveType> Default for Prim<T> {
        fn default() -> Self {
            Self(Vec::new())
        }
    }

    impl<T: ArrowPrimitiveType> Prim<T> {
        #[inline]
        pub fn push(&mut self, v: T::Native) {
            if self.0.capacity() == 0 {
                self.0.reserve(BATCH_ROWS);
            }
            self.0.push(v);
        }
    }

    impl<T: ArrowPrimitiveType> ColumnBuilder for Prim<T> {
        fn finish(&mut self) -> ArrayRef {
            let values = std::mem::take(&mut self.0);
            Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(values), None))
        }
    }

    pub struct OptPrim<T: ArrowPrimitiveType>(Lazy<T::Native>);

    impl<T: ArrowPrimitiveType> Default for OptPrim<T> {
        fn default() -> Self {
            Self(Lazy::default())
        }
    }

    impl<T: ArrowPrimitiveType> OptPrim<T> {
        #[inline]
        pub fn push(&mut self, v: Option<T::Native>) {
            self.0.push(v.as_ref().map(std::slice::from_ref), 1);
        }
    }

    impl<T: ArrowPrimitiveType> ColumnBuilder for OptPrim<T> {
        fn finish(&mut self) -> ArrayRef {
            let (values, nulls, len, present) = self.0.finish();
            if present == 0 {
                return new_null_array(&T::DATA_TYPE, len);
            }
            Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(values), nulls))
        }
    }

    #[derive(Default)]
    pub struct Bool(Option<BooleanBufferBuilder>);

    impl Bool {
        #[inline]
        pub fn push(&mut self, v: bool) {
            self.0
                .get_or_insert_with(|| BooleanBufferBuilder::new(1024))
                .append(v);
        }
    }

    impl ColumnBuilder for Bool {
        fn finish(&mut self) -> ArrayRef {
            match self.0.take() {
                Some(mut b) => Arc::new(BooleanArray::new(b.finish(), None)),
                None => Arc::new(BooleanArray::from(Vec::<bool>::new())),
            }
        }
    }

    #[derive(Default)]
    pub struct Str(StringBuilder);

    impl Str {
        #[inline]
        pub fn push(&mut self, v: &str) {
            self.0.append_value(v);
        }
    }

    impl ColumnBuilder for Str {
        fn finish(&mut self) -> ArrayRef {
            Arc::new(self.0.finish())
        }
    }

    #[derive(Default)]
    pub struct OptStr(StringBuilder);

    impl OptStr {
        #[inline]
        pub fn push(&mut self, v: Option<&str>) {
            self.0.append_option(v);
        }
    }

    impl ColumnBuilder for OptStr {
        fn finish(&mut self) -> ArrayRef {
            Arc::new(self.0.finish())
        }
    }

    #[derive(Default)]
    pub struct Bin(BinaryBuilder);

    impl Bin {
        #[inline]
        pub fn push(&mut self, v: &[u8]) {
            self.0.append_value(v);
        }
    }

    impl ColumnBuilder for Bin {
        fn finish(&mut self) -> ArrayRef {
            Arc::new(self.0.finish())
        }
    }

    /// Eight u64 or null; null lists still take their 8 child slots (zeros),
    /// the items themselves are never null.
    #[derive(Default)]
    pub struct OptU64x8(Lazy<u64>);

    impl OptU64x8 {
        #[inline]
        pub fn push(&mut self, v: Option<&[u64; 8]>) {
            self.0.push(v.map(|a| a.as_slice()), 8);
        }
    }

    impl ColumnBuilder for OptU64x8 {
        fn finish(&mut self) -> ArrayRef {
            let (values, nulls, len, present) = self.0.finish();
            if present == 0 {
                return new_null_array(&Kind::opt_u64x8.data_type(), len);
            }
            let values: ArrayRef = Arc::new(UInt64Array::new(
                ScalarBuffer::from(Buffer::from_vec(values)),
                None,
            ));
            Arc::new(FixedSizeListArray::new(u64x8_item(), 8, values, nulls))
        }
    }
}

/// The builder of a [`Kind`] (by the same name), for [`table!`].
macro_rules! builder_type {
    (i64) => { $crate::report::columns::build::Prim<arrow::datatypes::Int64Type> };
    (u32) => { $crate::report::columns::build::Prim<arrow::datatypes::UInt32Type> };
    (u64) => { $crate::report::columns::build::Prim<arrow::datatypes::UInt64Type> };
    (opt_i32) => { $crate::report::columns::build::OptPrim<arrow::datatypes::Int32Type> };
    (opt_u32) => { $crate::report::columns::build::OptPrim<arrow::datatypes::UInt32Type> };
    (opt_u64) => { $crate::report::columns::build::OptPrim<arrow::datatypes::UInt64Type> };
    (bool) => { $crate::report::columns::build::Bool };
    (str) => { $crate::report::columns::build::Str };
    (opt_str) => { $crate::report::columns::build::OptStr };
    (bin) => { $crate::report::columns::build::Bin };
    (opt_u64x8) => { $crate::report::columns::build::OptU64x8 };
}
pub(crate) use builder_type;

/// The column builders of one table, as [`table!`] generates them.
pub trait RowBuilder: Default {
    type Row;
    /// Appends one row's values to every column.
    fn push(&mut self, row: &Self::Row);
    /// The batch so far, one array per column in declared order; the
    /// builders start afresh.
    fn finish(&mut self) -> Vec<ArrayRef>;
}

/// A typed accessor of a [`Kind`] (by the same name) on a batch view, for
/// [`table!`]: non-nullable numbers as their values (a null is an error),
/// nullable ones as their array, strings, booleans, bytes and lists as
/// their arrays.
macro_rules! view_method {
    ($(#[$cm:meta])* $method:ident, $CONST:ident, i64) => {
        $crate::report::columns::view_method!(@values $(#[$cm])* $method, $CONST, Int64Type, i64);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, u32) => {
        $crate::report::columns::view_method!(@values $(#[$cm])* $method, $CONST, UInt32Type, u32);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, u64) => {
        $crate::report::columns::view_method!(@values $(#[$cm])* $method, $CONST, UInt64Type, u64);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, opt_i32) => {
        $crate::report::columns::view_method!(@prim $(#[$cm])* $method, $CONST, Int32Type);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, opt_u32) => {
        $crate::report::columns::view_method!(@prim $(#[$cm])* $method, $CONST, UInt32Type);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, opt_u64) => {
        $crate::report::columns::view_method!(@prim $(#[$cm])* $method, $CONST, UInt64Type);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, bool) => {
        $crate::report::columns::view_method!(@array $(#[$cm])* $method, $CONST, bools, BooleanArray);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, str) => {
        $crate::report::columns::view_method!(@array $(#[$cm])* $method, $CONST, strs, StringArray);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, opt_str) => {
        $crate::report::columns::view_method!(@array $(#[$cm])* $method, $CONST, strs, StringArray);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, bin) => {
        $crate::report::columns::view_method!(@array $(#[$cm])* $method, $CONST, bins, BinaryArray);
    };
    ($(#[$cm:meta])* $method:ident, $CONST:ident, opt_u64x8) => {
        $crate::report::columns::view_method!(@array $(#[$cm])* $method, $CONST, fixed_list, FixedSizeListArray);
    };
    (@values $(#[$cm:meta])* $method:ident, $CONST:ident, $T:ident, $native:ty) => {
        $(#[$cm])*
        #[allow(dead_code)]
        #[inline]
        pub fn $method(&self) -> Result<&'a [$native], $crate::report::ReportError> {
            self.0.values::<arrow::datatypes::$T>($CONST)
        }
    };
    (@prim $(#[$cm:meta])* $method:ident, $CONST:ident, $T:ident) => {
        $(#[$cm])*
        #[allow(dead_code)]
        #[inline]
        pub fn $method(
            &self,
        ) -> Result<&'a arrow::array::PrimitiveArray<arrow::datatypes::$T>, $crate::report::ReportError> {
            self.0.prim::<arrow::datatypes::$T>($CONST)
        }
    };
    (@array $(#[$cm:meta])* $method:ident, $CONST:ident, $get:ident, $A:ident) => {
        $(#[$cm])*
        #[allow(dead_code)]
        #[inline]
        pub fn $method(&self) -> Result<&'a arrow::array::$A, $crate::report::ReportError> {
            self.0.$get($CONST)
        }
    };
}
pub(crate) use view_method;

/// The typed scans of a table, for [`table!`]: by the name constant of a
/// table whose name is fixed, or taking the name.
macro_rules! table_scans {
    () => {
        /// Every batch of `columns` (constants of this module) of the
        /// report's `table` (this module declares the shape of several),
        /// streamed; an absent table reads as empty. Look at a batch
        /// through [`View`].
        #[allow(dead_code)]
        pub fn scan(
            report: &$crate::report::container::Container,
            table: &str,
            columns: &[&str],
        ) -> Result<$crate::report::reader::Batches, $crate::report::ReportError> {
            $crate::report::reader::scan(report, table, columns)
        }

        /// Like [`scan`], for a table of a recording folder.
        #[allow(dead_code)]
        pub fn scan_file(
            dir: &std::path::Path,
            table: &str,
            columns: &[&str],
        ) -> Result<$crate::report::reader::Batches, $crate::report::ReportError> {
            $crate::report::reader::scan_file(dir, table, columns)
        }
    };
    ($TABLE:ident) => {
        /// The table's name in a report.
        #[allow(dead_code)]
        pub const NAME: &str = $TABLE;

        /// Every batch of `columns` (constants of this module) of the
        /// report's table, streamed; an absent table reads as empty. Look
        /// at a batch through [`View`].
        #[allow(dead_code)]
        pub fn scan(
            report: &$crate::report::container::Container,
            columns: &[&str],
        ) -> Result<$crate::report::reader::Batches, $crate::report::ReportError> {
            $crate::report::reader::scan(report, $TABLE, columns)
        }

        /// Like [`scan`], for the table of a recording folder.
        #[allow(dead_code)]
        pub fn scan_file(
            dir: &std::path::Path,
            columns: &[&str],
        ) -> Result<$crate::report::reader::Batches, $crate::report::ReportError> {
            $crate::report::reader::scan_file(dir, $TABLE, columns)
        }

        /// The Parquet file `path` holding rows of the table (a chunk of a
        /// recording folder, say); None if it is not there.
        #[allow(dead_code)]
        pub fn open_path(
            path: &std::path::Path,
        ) -> Result<
            Option<
                $crate::report::reader::TableReader<$crate::report::reader::bytes_file::SharedFile>,
            >,
            $crate::report::ReportError,
        > {
            $crate::report::reader::open_path(path, $TABLE)
        }

        /// The report's table, to scan by row groups; None when it has none.
        #[allow(dead_code)]
        pub fn open(
            report: &$crate::report::container::Container,
        ) -> Result<
            Option<$crate::report::reader::TableReader<$crate::report::container::MemberReader>>,
            $crate::report::ReportError,
        > {
            $crate::report::reader::open(report, $TABLE)
        }
    };
}
pub(crate) use table_scans;

/// Declares a table: `table! { /// doc  pub mod NAME in TABLE for ROW {
/// CONST / method = "name": kind, Enc, |r| getter; ... } }` gives module NAME
/// with a `&str` const per column, `Table` implementing [`TableDef`],
/// `Builders`, its [`RowBuilder`], and `View`, a decoded batch's columns
/// typed by their [`Kind`], one `method` per column; `by CONST` names the
/// column that places a row in time ([`TableDef::TIME`]). With `in TABLE` (the
/// name constant of a table whose name is fixed; the API tables' is not) it
/// also gives `NAME`, `scan`, `scan_file`, `open` and `open_path`, so that readers never
/// name the table themselves.
macro_rules! table {
    (
        $(#[$m:meta])*
        pub mod $module:ident $(in $TABLE:ident)? $(by $TIME:ident)? for $Row:ty {
            $( $(#[$cm:meta])* $CONST:ident / $method:ident = $name:literal : $kind:ident, $enc:ident, |$r:ident| $get:expr; )*
        }
    ) => {
        $(#[$m])*
        pub mod $module {
            #[allow(unused_imports)]
            use super::*;
            use $crate::report::columns::{
                ColumnDef, Enc, Kind, RowBuilder, TableDef, build::ColumnBuilder, builder_type,
            };
            // Every column has its name constant, used or not (exports, tests).
            $( $(#[$cm])* #[allow(dead_code)] pub const $CONST: &str = $name; )*
            /// The table's declaration.
            pub struct Table;
            impl TableDef for Table {
                type Row = $Row;
                type Builders = Builders;
                const COLUMNS: &'static [ColumnDef] = &[
                    $( ColumnDef { name: $name, kind: Kind::$kind, enc: Enc::$enc }, )*
                ];
                $( const TIME: Option<&'static str> = Some($TIME); )?
            }
            /// One builder per column, named after its constant.
            #[allow(non_snake_case)]
            #[derive(Default)]
            pub struct Builders {
                $( $CONST: builder_type!($kind), )*
            }
            impl RowBuilder for Builders {
                type Row = $Row;
                #[inline]
                fn push(&mut self, row: &$Row) {
                    $( { let $r = row; self.$CONST.push($get); } )*
                }
                fn finish(&mut self) -> Vec<arrow::array::ArrayRef> {
                    vec![ $( self.$CONST.finish(), )* ]
                }
            }
            /// A decoded batch of the table, each column typed by its
            /// declaration (a column the scan did not ask for is an error,
            /// "missing"). Derefs to the untyped [`Batch`](crate::report::reader::Batch).
            #[derive(Clone, Copy)]
            pub struct View<'a>(pub &'a $crate::report::reader::Batch);
            impl<'a> View<'a> {
                $( $crate::report::columns::view_method!($(#[$cm])* $method, $CONST, $kind); )*
            }
            impl<'a> From<&'a $crate::report::reader::Batch> for View<'a> {
                fn from(b: &'a $crate::report::reader::Batch) -> Self {
                    View(b)
                }
            }
            impl std::ops::Deref for View<'_> {
                type Target = $crate::report::reader::Batch;
                fn deref(&self) -> &Self::Target {
                    self.0
                }
            }
            $crate::report::columns::table_scans!($($TABLE)?);
        }
    };
}
pub(crate) use table;
