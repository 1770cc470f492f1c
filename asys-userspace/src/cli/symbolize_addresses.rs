//! `asys __symbolize-addresses BINARY`: names file addresses of a binary (one
//! hex address a line on standard input) as the symbolize stage names
//! sampled instructions, printed as binutils' `addr2line -a -f -i -C` prints
//! them, so that the two can be compared and timed on the same addresses
//! (`cargo xtask bench-lines`, tests/tests/source_lines.rs). Not for use by
//! hand.
use std::io::{BufRead, Write};

use anyhow::Context;

pub fn main(binary: &std::path::Path) -> anyhow::Result<u8> {
    // The binary is checked before standard input is read: a name that
    // cannot work fails at once instead of after waiting on a terminal.
    if binary.as_os_str().is_empty() {
        anyhow::bail!("__symbolize-addresses needs a binary");
    }
    let meta = std::fs::metadata(binary).with_context(|| binary.display().to_string())?;
    if !meta.is_file() {
        anyhow::bail!("{} is not a regular file", binary.display());
    }
    let mut addrs = Vec::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.context("reading addresses")?;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let hex = t.strip_prefix("0x").unwrap_or(t);
        let a = u64::from_str_radix(hex, 16)
            .with_context(|| format!("line {}: not a hex address: {t}", n + 1))?;
        addrs.push(a);
    }
    let roots = crate::symbolize::debug_info::Roots::from_env();
    let named = crate::symbolize::naming::name_file_addresses(binary, &addrs, &roots)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (a, frames) in addrs.iter().zip(named) {
        writeln!(out, "0x{a:016x}")?;
        if frames.is_empty() {
            writeln!(out, "??\n??:0")?;
        }
        for f in frames {
            // An unnamed frame is its address here; addr2line says "??".
            let function = if f.function.starts_with("0x") {
                "??"
            } else {
                &f.function
            };
            let file = f.file.as_deref().unwrap_or("??");
            match f.line {
                Some(l) => writeln!(out, "{function}\n{file}:{l}")?,
                None => writeln!(out, "{function}\n{file}:?")?,
            }
        }
    }
    out.flush()?;
    Ok(0)
}
