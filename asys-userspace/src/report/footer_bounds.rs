//! A bound on a Parquet footer before the Parquet crate decodes it.
//!
//! The footer is Thrift (compact protocol). The Parquet crate (56) sizes each
//! list it decodes from the count the list's header claims, before reading
//! an element, so a damaged or crafted footer claiming 2^31 schema elements
//! makes it ask for ~96 GB at once: an abort, not a panic the reader's
//! boundary could catch (found by the `table` fuzz target). Every element
//! takes at least one byte of input, so a count larger than the bytes left
//! cannot be a real footer. This walks the footer's Thrift structure once,
//! checking every list, set, map and binary length against what is left, and
//! refuses the footer before any of it is decoded.

/// Why a footer was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfBounds(pub &'static str);

/// Nesting deeper than this is not a Parquet footer (and would recurse far).
const MAX_DEPTH: usize = 64;

/// Checks the Parquet file `file` (whole): its footer length and, walking
/// the Thrift of the footer, every length it declares.
#[cfg(test)]
pub fn check_file(file: &[u8]) -> Result<(), OutOfBounds> {
    let n = file.len();
    if n < 12 || &file[n - 4..] != b"PAR1" {
        return Err(OutOfBounds("no Parquet footer"));
    }
    let len = u32::from_le_bytes([file[n - 8], file[n - 7], file[n - 6], file[n - 5]]) as usize;
    if len > n - 12 {
        return Err(OutOfBounds("footer longer than the file"));
    }
    check_footer(&file[n - 8 - len..n - 8])
}

/// Checks a footer's Thrift bytes (the FileMetaData struct).
pub fn check_footer(footer: &[u8]) -> Result<(), OutOfBounds> {
    let mut r = Reader { b: footer, at: 0 };
    r.structure(0)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

// Compact protocol type ids.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

impl Reader<'_> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, OutOfBounds> {
        let v = *self
            .b
            .get(self.at)
            .ok_or(OutOfBounds("footer ends inside a value"))?;
        self.at += 1;
        Ok(v)
    }

    fn varint(&mut self) -> Result<u64, OutOfBounds> {
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(OutOfBounds("varint too long"))
    }

    fn skip(&mut self, n: usize) -> Result<(), OutOfBounds> {
        if n > self.left() {
            return Err(OutOfBounds("a length beyond the footer's end"));
        }
        self.at += n;
        Ok(())
    }

    /// A count of elements that each take at least one byte.
    fn count(&mut self, declared: u64) -> Result<usize, OutOfBounds> {
        match usize::try_from(declared) {
            Ok(c) if c <= self.left() => Ok(c),
            _ => Err(OutOfBounds("a count larger than the footer")),
        }
    }

    fn value(&mut self, ty: u8, depth: usize) -> Result<(), OutOfBounds> {
        if depth > MAX_DEPTH {
            return Err(OutOfBounds("nested too deep"));
        }
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.skip(1),
            I16 | I32 | I64 => self.varint().map(|_| ()),
            DOUBLE => self.skip(8),
            BINARY => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| OutOfBounds("binary too long"))?;
                self.skip(len)
            }
            LIST | SET => {
                let head = self.byte()?;
                let declared = match head >> 4 {
                    15 => self.varint()?,
                    short => u64::from(short),
                };
                let n = self.count(declared)?;
                let elem = head & 0x0f;
                for _ in 0..n {
                    // A list of booleans holds them as bytes.
                    if elem == BOOL_TRUE || elem == BOOL_FALSE {
                        self.skip(1)?;
                    } else {
                        self.value(elem, depth + 1)?;
                    }
                }
                Ok(())
            }
            MAP => {
                let declared = self.varint()?;
                let n = self.count(declared)?;
                if n == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                for _ in 0..n {
                    self.value(types >> 4, depth + 1)?;
                    self.value(types & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            STRUCT => self.structure(depth + 1),
            _ => Err(OutOfBounds("an unknown Thrift type")),
        }
    }

    fn structure(&mut self, depth: usize) -> Result<(), OutOfBounds> {
        if depth > MAX_DEPTH {
            return Err(OutOfBounds("nested too deep"));
        }
        loop {
            let head = self.byte()?;
            if head == 0 {
                return Ok(());
            }
            // A field id delta of 0 means the id follows (zigzag i16).
            if head >> 4 == 0 {
                self.varint()?;
            }
            self.value(head & 0x0f, depth)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parquet_bytes() -> Vec<u8> {
        use arrow::array::{Int64Array, RecordBatch, StringArray};
        use std::sync::Arc;
        let batch = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(Int64Array::from(vec![1, 2, 3])) as arrow::array::ArrayRef,
            ),
            ("b", Arc::new(StringArray::from(vec!["x", "y", "z"])) as _),
        ])
        .expect("batch");
        let mut out = Vec::new();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        out
    }

    #[test]
    fn a_real_footer_passes() {
        check_file(&parquet_bytes()).expect("a footer the Parquet crate wrote");
    }

    #[test]
    fn a_list_claiming_more_elements_than_bytes_is_refused() {
        // FileMetaData { 1: version i32 = 1, 2: schema list<struct> of 2^31 }
        let footer = [0x15, 0x02, 0x19, 0xfc, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        assert_eq!(
            check_footer(&footer),
            Err(OutOfBounds("a count larger than the footer"))
        );
        // Every truncation of a real footer is refused, never read past.
        let file = parquet_bytes();
        let n = file.len();
        let len = u32::from_le_bytes(file[n - 8..n - 4].try_into().unwrap()) as usize;
        let footer = &file[n - 8 - len..n - 8];
        for cut in 0..footer.len() {
            assert!(check_footer(&footer[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// The `table` fuzz target's input that made the Parquet crate ask for
    /// ~96 GB (its first byte chose the table): refused before decoding.
    #[test]
    fn the_fuzzed_footer_that_aborted_is_refused() {
        let input = include_bytes!("testdata/footer-huge-list.fuzz");
        assert_eq!(
            check_file(&input[1..]),
            Err(OutOfBounds("a count larger than the footer"))
        );
    }
}
