//! A bound on a Parquet footer before the Parquet crate decodes it.
//!
//! The footer is Thrift (compact protocol). The Parquet crate (56) sizes each
//! list it decodes from the count the list's header claims, before reading
//! an element, and it reads a field by the type its schema expects whatever
//! type the bytes claim. A damaged or crafted footer claiming 2^31 elements
//! makes it ask for tens of GB at once: an abort, not a panic the reader's
//! boundary could catch (found twice by the `table` fuzz target).
//!
//! So the footer is first decoded by the Parquet crate's own generated code
//! (`FileMetaData::read_from_in_protocol`, which follows its schema exactly
//! as the real decoding does) over [`Bounded`], a compact-protocol reader
//! that refuses any count or length larger than the bytes left: every
//! element takes at least one byte, so such a count cannot be real.
use parquet::thrift::TSerializable as _;
use thrift::protocol::{
    TFieldIdentifier, TInputProtocol, TListIdentifier, TMapIdentifier, TMessageIdentifier,
    TSetIdentifier, TStructIdentifier, TType,
};

/// Why a footer was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfBounds(pub String);

/// Checks a footer's Thrift bytes (the FileMetaData struct).
pub fn check_footer(footer: &[u8]) -> Result<(), OutOfBounds> {
    let mut p = Bounded::new(footer);
    parquet::format::FileMetaData::read_from_in_protocol(&mut p)
        .map(|_| ())
        .map_err(|e| {
            // thrift's Display says only the kind ("bad data").
            OutOfBounds(match e {
                thrift::Error::Protocol(p) => p.message,
                thrift::Error::Transport(t) => t.message,
                other => other.to_string(),
            })
        })
}

/// Checks the Parquet file `file` (whole): its footer length, then the footer.
#[cfg(test)]
pub fn check_file(file: &[u8]) -> Result<(), OutOfBounds> {
    let n = file.len();
    if n < 12 || &file[n - 4..] != b"PAR1" {
        return Err(OutOfBounds("no Parquet footer".into()));
    }
    let len = u32::from_le_bytes([file[n - 8], file[n - 7], file[n - 6], file[n - 5]]) as usize;
    if len > n - 12 {
        return Err(OutOfBounds("footer longer than the file".into()));
    }
    check_footer(&file[n - 8 - len..n - 8])
}

/// The compact protocol over a slice, as the Parquet crate's own
/// (`TCompactSliceInputProtocol`, Apache-2.0, which this follows), with one
/// difference: counts and lengths are checked against the bytes left.
struct Bounded<'a> {
    buf: &'a [u8],
    last_read_field_id: i16,
    read_field_id_stack: Vec<i16>,
    pending_read_bool_value: Option<bool>,
}

fn invalid(message: String) -> thrift::Error {
    thrift::Error::Protocol(thrift::ProtocolError {
        kind: thrift::ProtocolErrorKind::InvalidData,
        message,
    })
}

fn eof() -> thrift::Error {
    thrift::Error::Transport(thrift::TransportError {
        kind: thrift::TransportErrorKind::EndOfFile,
        message: "the footer ends inside a value".into(),
    })
}

impl<'a> Bounded<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            last_read_field_id: 0,
            read_field_id_stack: Vec::new(),
            pending_read_bool_value: None,
        }
    }

    fn read_vlq(&mut self) -> thrift::Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = self.read_byte()?;
            v |= u64::from(byte & 0x7f).wrapping_shl(shift);
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(invalid("a varint longer than 10 bytes".into()))
    }

    fn read_zig_zag(&mut self) -> thrift::Result<i64> {
        let v = self.read_vlq()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A count of elements, each at least one byte: no more than are left.
    fn bounded(&self, declared: u64) -> thrift::Result<i32> {
        match i32::try_from(declared) {
            Ok(n) if (n as usize) <= self.buf.len() => Ok(n),
            _ => Err(invalid(format!(
                "a count of {declared} with {} bytes left",
                self.buf.len()
            ))),
        }
    }

    fn read_list_set_begin(&mut self) -> thrift::Result<(TType, i32)> {
        let header = self.read_byte()?;
        let element_type = collection_type(header & 0x0f)?;
        let declared = match header >> 4 {
            15 => self.read_vlq()?,
            short => u64::from(short),
        };
        Ok((element_type, self.bounded(declared)?))
    }
}

impl TInputProtocol for Bounded<'_> {
    fn read_message_begin(&mut self) -> thrift::Result<TMessageIdentifier> {
        Err(invalid("not a message".into()))
    }

    fn read_message_end(&mut self) -> thrift::Result<()> {
        Err(invalid("not a message".into()))
    }

    fn read_struct_begin(&mut self) -> thrift::Result<Option<TStructIdentifier>> {
        // Each struct takes at least its stop byte: deeper nesting than
        // bytes left cannot be real (and would recurse without end).
        if self.read_field_id_stack.len() > self.buf.len() {
            return Err(invalid(
                "structs nested deeper than the footer is long".into(),
            ));
        }
        self.read_field_id_stack.push(self.last_read_field_id);
        self.last_read_field_id = 0;
        Ok(None)
    }

    fn read_struct_end(&mut self) -> thrift::Result<()> {
        self.last_read_field_id = self
            .read_field_id_stack
            .pop()
            .ok_or_else(|| invalid("a struct ended that did not begin".into()))?;
        Ok(())
    }

    fn read_field_begin(&mut self) -> thrift::Result<TFieldIdentifier> {
        let head = self.read_byte()?;
        let delta = head >> 4;
        let field_type = match head & 0x0f {
            0x01 => {
                self.pending_read_bool_value = Some(true);
                TType::Bool
            }
            0x02 => {
                self.pending_read_bool_value = Some(false);
                TType::Bool
            }
            t => field_type(t)?,
        };
        if field_type == TType::Stop {
            return Ok(
                TFieldIdentifier::new::<Option<String>, String, Option<i16>>(
                    None,
                    TType::Stop,
                    None,
                ),
            );
        }
        self.last_read_field_id = if delta != 0 {
            self.last_read_field_id
                .checked_add(i16::from(delta))
                .ok_or_else(|| invalid("a field id past i16".into()))?
        } else {
            self.read_i16()?
        };
        Ok(TFieldIdentifier {
            name: None,
            field_type,
            id: Some(self.last_read_field_id),
        })
    }

    fn read_field_end(&mut self) -> thrift::Result<()> {
        Ok(())
    }

    fn read_bool(&mut self) -> thrift::Result<bool> {
        match self.pending_read_bool_value.take() {
            Some(b) => Ok(b),
            None => match self.read_byte()? {
                0x01 => Ok(true),
                0x00 | 0x02 => Ok(false),
                b => Err(invalid(format!("{b} is not a boolean"))),
            },
        }
    }

    fn read_bytes(&mut self) -> thrift::Result<Vec<u8>> {
        let len = usize::try_from(self.read_vlq()?).map_err(|_| eof())?;
        let bytes = self.buf.get(..len).ok_or_else(eof)?.to_vec();
        self.buf = &self.buf[len..];
        Ok(bytes)
    }

    fn read_i8(&mut self) -> thrift::Result<i8> {
        Ok(self.read_byte()? as i8)
    }

    fn read_i16(&mut self) -> thrift::Result<i16> {
        Ok(self.read_zig_zag()? as i16)
    }

    fn read_i32(&mut self) -> thrift::Result<i32> {
        Ok(self.read_zig_zag()? as i32)
    }

    fn read_i64(&mut self) -> thrift::Result<i64> {
        self.read_zig_zag()
    }

    fn read_double(&mut self) -> thrift::Result<f64> {
        let bytes: [u8; 8] = self
            .buf
            .get(..8)
            .ok_or_else(eof)?
            .try_into()
            .map_err(|_| eof())?;
        self.buf = &self.buf[8..];
        Ok(f64::from_le_bytes(bytes))
    }

    fn read_string(&mut self) -> thrift::Result<String> {
        String::from_utf8(self.read_bytes()?).map_err(From::from)
    }

    fn read_list_begin(&mut self) -> thrift::Result<TListIdentifier> {
        let (t, n) = self.read_list_set_begin()?;
        Ok(TListIdentifier::new(t, n))
    }

    fn read_list_end(&mut self) -> thrift::Result<()> {
        Ok(())
    }

    fn read_set_begin(&mut self) -> thrift::Result<TSetIdentifier> {
        let (t, n) = self.read_list_set_begin()?;
        Ok(TSetIdentifier::new(t, n))
    }

    fn read_set_end(&mut self) -> thrift::Result<()> {
        Ok(())
    }

    fn read_map_begin(&mut self) -> thrift::Result<TMapIdentifier> {
        let declared = self.read_vlq()?;
        let n = self.bounded(declared)?;
        if n == 0 {
            return Ok(TMapIdentifier::new(None, None, 0));
        }
        let types = self.read_byte()?;
        Ok(TMapIdentifier::new(
            collection_type(types >> 4)?,
            collection_type(types & 0x0f)?,
            n,
        ))
    }

    fn read_map_end(&mut self) -> thrift::Result<()> {
        Ok(())
    }

    fn read_byte(&mut self) -> thrift::Result<u8> {
        let b = *self.buf.first().ok_or_else(eof)?;
        self.buf = &self.buf[1..];
        Ok(b)
    }
}

fn collection_type(b: u8) -> thrift::Result<TType> {
    match b {
        0x01 | 0x02 => Ok(TType::Bool),
        o => field_type(o),
    }
}

fn field_type(b: u8) -> thrift::Result<TType> {
    Ok(match b {
        0x00 => TType::Stop,
        0x03 => TType::I08,
        0x04 => TType::I16,
        0x05 => TType::I32,
        0x06 => TType::I64,
        0x07 => TType::Double,
        0x08 => TType::String,
        0x09 => TType::List,
        0x0a => TType::Set,
        0x0b => TType::Map,
        0x0c => TType::Struct,
        t => return Err(invalid(format!("{t} is not a Thrift type"))),
    })
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
        // FileMetaData { 1: version i32 = 1, 2: schema list<struct> of 2^31-1 }
        let footer = [0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        let e = check_footer(&footer).expect_err("refused");
        assert!(e.0.contains("a count of 2147483647"), "{e:?}");
        // Every truncation of a real footer is refused, never read past.
        let file = parquet_bytes();
        let n = file.len();
        let len = u32::from_le_bytes(file[n - 8..n - 4].try_into().unwrap()) as usize;
        let footer = &file[n - 8 - len..n - 8];
        for cut in 0..footer.len() {
            assert!(check_footer(&footer[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// The `table` fuzz target's inputs that made the Parquet crate ask for
    /// ~96 GB and ~62 GB (their first byte chose the table): refused before
    /// decoding.
    #[test]
    fn the_fuzzed_footers_that_aborted_are_refused() {
        for input in [
            &include_bytes!("testdata/footer-huge-list.fuzz")[..],
            &include_bytes!("testdata/footer-huge-list-2.fuzz")[..],
        ] {
            let e = check_file(&input[1..]).expect_err("refused");
            assert!(e.0.contains("a count of"), "{e:?}");
        }
    }
}
