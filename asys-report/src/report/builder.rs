//! A small report written from rows held in memory: each table through its
//! declaration in [`super::schema`] (the column builders and writer
//! settings the recorder uses), a string table and the metadata, packed
//! into a report file as a recording is, then opened. For tests, examples
//! and tools that make a report of their own; the recorder streams its
//! tables instead (asys-userspace's sink).
use std::path::Path;

use arrow::array::RecordBatch;

use super::{
    ReportError,
    columns::TableDef,
    container::{self, Container},
    files::TempDir,
    metadata::{FORMAT, Metadata},
    rows::StringRow,
    schema::{self, SCHEMA_VERSION},
    strings::StringTable,
    table_writer::TableWriter,
};

/// Builds a report: [`string`](Self::string) interns a name, [`table`](Self::table)
/// adds a table of rows, [`finish`](Self::finish) packs and opens it.
pub struct ReportBuilder {
    /// Where the tables are written until they are packed.
    dir: TempDir,
    strings: StringTable,
    members: Vec<String>,
    metadata: Metadata,
}

impl ReportBuilder {
    /// An empty report, its tables written into a private temporary folder
    /// until [`finish`](Self::finish).
    pub fn new() -> Result<Self, ReportError> {
        Ok(Self {
            dir: TempDir::new("asys-report")?,
            strings: StringTable::default(),
            members: Vec::new(),
            metadata: Metadata {
                format: FORMAT.into(),
                schema_version: SCHEMA_VERSION,
                ..Default::default()
            },
        })
    }

    /// The id of `s` in the report's string table (the same id each time).
    pub fn string(&mut self, s: &str) -> u32 {
        self.strings.intern(s)
    }

    /// Adds table `name` holding `rows`, as table declaration `T` lays it
    /// out (`schema::activity::Table` for `hggc_activity`,
    /// `schema::api::Table` for any API table, ...). One call per table.
    pub fn table<T: TableDef>(
        &mut self,
        name: &str,
        rows: &[T::Row],
    ) -> Result<&mut Self, ReportError> {
        let schema = T::schema();
        let batch =
            RecordBatch::try_new(schema.clone(), T::to_columns(rows)).map_err(|source| {
                ReportError::Arrow {
                    table: name.into(),
                    source,
                }
            })?;
        let mut w = TableWriter::create(self.dir.path(), name, schema, T::COLUMNS)?;
        w.write(&batch)?;
        let n = w.close()?;
        self.metadata.tables.insert(name.into(), n);
        self.members.push(format!("{name}.parquet"));
        Ok(self)
    }

    /// The metadata the report will have (its format, schema version and
    /// tables are filled in): what a test sets of the recording's settings.
    pub fn metadata(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Writes the string table, packs every table into `dest` (replaced if
    /// there) and opens it.
    pub fn finish(mut self, dest: &Path) -> Result<Container, ReportError> {
        self.pack(dest)?;
        Container::open(dest)
    }

    /// Like [`finish`](Self::finish), into a file of the builder's own
    /// folder, removed once the report is open (which reads on through its
    /// open file): a report that leaves nothing behind.
    pub fn finish_temporary(mut self) -> Result<Container, ReportError> {
        let dest = self.dir.path().join(format!("built.{}", super::EXTENSION));
        self.pack(&dest)?;
        Container::open(&dest)
    }

    fn pack(&mut self, dest: &Path) -> Result<(), ReportError> {
        let strings: Vec<StringRow> = self
            .strings
            .values()
            .iter()
            .enumerate()
            .map(|(id, value)| StringRow {
                id: id as u32,
                value: value.clone(),
            })
            .collect();
        self.table::<schema::strings::Table>(schema::STRINGS, &strings)?;
        container::pack(self.dir.path(), &self.members, &self.metadata, dest)
    }
}
