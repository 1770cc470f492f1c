//! zstd levels on a real API table (`cargo xtask bench-zstd-levels
//! TABLE.parquet`): the table re-encoded with the API table's declared
//! column encodings at levels 1, 3, 6 and 9, bytes per row and encoding time
//! per row at each. What `asys_report::report::columns::ZSTD_LEVEL` was
//! chosen from (its comment has the figures). Run it on the
//! `hggc_api.parquet` of a large report (`tar xf REPORT.asysrep
//! hggc_api.parquet`). parquet and zstd are optimized in the dev profile
//! too (the workspace's profile.dev), so xtask's build times them as asys's
//! release build runs them.
use anyhow::{Context as _, bail};
use arrow::array::RecordBatch;
use asys_report::report::{
    columns::{TableDef as _, writer_properties},
    schema::api,
};
use parquet::{
    arrow::{ArrowWriter, arrow_reader::ParquetRecordBatchReaderBuilder},
    basic::{Compression, ZstdLevel},
};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let [path] = args else {
        bail!("usage: cargo xtask bench-zstd-levels TABLE.parquet (an API table of a report)");
    };
    let file = std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("{path} is not Parquet"))?
        .build()?
        .collect::<Result<_, _>>()?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let Some(first) = batches.first() else {
        bail!("{path} has no rows");
    };
    for level in [1, 3, 6, 9] {
        let props = writer_properties(api::Table::COLUMNS)
            .into_builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(level)?))
            .build();
        let mut out = Vec::new();
        let t0 = std::time::Instant::now();
        let mut w = ArrowWriter::try_new(&mut out, first.schema(), Some(props))?;
        for b in &batches {
            w.write(b)?;
        }
        w.close()?;
        println!(
            "zstd {level}: {:.3} B/row, {:.1} ns/row to encode ({rows} rows)",
            out.len() as f64 / rows as f64,
            t0.elapsed().as_nanos() as f64 / rows as f64
        );
    }
    Ok(())
}
