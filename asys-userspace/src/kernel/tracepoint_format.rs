//! Tracepoint record layouts as the running kernel describes them in tracefs
//! (`events/SYSTEM/EVENT/format`). The programs read fields at the offsets
//! found here, not at offsets fixed when asys was built: they move between
//! kernels (see `TracepointLayout`).
//!
//! For other programs' tracepoints: `TracepointFormat::read("raw_syscalls",
//! "sys_enter")?.require("id")?.offset` (8 on x86-64).
use std::path::{Path, PathBuf};

/// Where tracefs may be: its own mount, or under debugfs on kernels and
/// systems that mount only that.
pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("reading the format of tracepoint {tracepoint} ({path}): {source}")]
    Read {
        tracepoint: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("tracepoint {tracepoint}: cannot parse its format line {line:?}")]
    Parse { tracepoint: String, line: String },
    #[error("tracepoint {tracepoint} has no field {field} on this kernel")]
    MissingField { tracepoint: String, field: String },
    #[error(
        "tracepoint {tracepoint}: field {field} is {size} bytes on this kernel, asys reads {expected}"
    )]
    FieldSize {
        tracepoint: String,
        field: String,
        size: u32,
        expected: String,
    },
}

/// How a field's bytes are found in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// At `offset`, `size` bytes.
    Inline,
    /// `__data_loc`: a u32 at `offset` whose low 16 bits are the data's
    /// offset from the start of the record and high 16 bits its length.
    DataLoc,
    /// `__rel_loc`: as `DataLoc`, but the offset counts from the end of the
    /// location word.
    RelLoc,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as the format file gives it (`pid_t`, `char[16]`,
    /// `char[]` for a `__data_loc` string).
    pub c_type: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
    pub location: Location,
}

impl Field {
    /// Whether the field's data lies elsewhere in the record (a
    /// `__data_loc`/`__rel_loc` string or array).
    pub fn data_loc(&self) -> bool {
        self.location != Location::Inline
    }
}

#[derive(Debug, Clone)]
pub struct TracepointFormat {
    /// `system/event`, as errors name it.
    pub tracepoint: String,
    /// Every field, the common ones (`common_type`, ...) first.
    pub fields: Vec<Field>,
    /// The `print fmt:` line's text (what it says of flags: `TaskStates`).
    pub print_fmt: Option<String>,
}

impl TracepointFormat {
    /// Reads `system/event`'s format from tracefs, or from debugfs where
    /// tracefs is not mounted on its own.
    pub fn read(system: &str, event: &str) -> Result<Self, FormatError> {
        match Self::read_under(Path::new(TRACEFS), system, event) {
            Err(FormatError::Read { .. }) if Path::new(DEBUGFS_TRACING).join("events").exists() => {
                Self::read_under(Path::new(DEBUGFS_TRACING), system, event)
            }
            other => other,
        }
    }

    /// Reads the format under a tracefs mounted at `root`.
    pub fn read_under(root: &Path, system: &str, event: &str) -> Result<Self, FormatError> {
        let path = root.join("events").join(system).join(event).join("format");
        let text = std::fs::read_to_string(&path).map_err(|source| FormatError::Read {
            tracepoint: format!("{system}/{event}"),
            path: path.clone(),
            source,
        })?;
        Self::parse(system, event, &text)
    }

    /// Parses a format file's text. Lines other than `field:` lines (name,
    /// ID, print fmt) are skipped.
    pub fn parse(system: &str, event: &str, text: &str) -> Result<Self, FormatError> {
        let tracepoint = format!("{system}/{event}");
        let mut fields = Vec::new();
        let mut print_fmt = None;
        for line in text.lines() {
            let line = line.trim();
            if let Some(fmt) = line.strip_prefix("print fmt:") {
                print_fmt = Some(fmt.trim().to_string());
            } else if line.starts_with("field:") {
                fields.push(parse_field(line).ok_or_else(|| FormatError::Parse {
                    tracepoint: tracepoint.clone(),
                    line: line.to_string(),
                })?);
            }
        }
        Ok(Self {
            tracepoint,
            fields,
            print_fmt,
        })
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field `name`, or the error that names the tracepoint and field.
    pub fn require(&self, name: &str) -> Result<&Field, FormatError> {
        self.field(name).ok_or_else(|| FormatError::MissingField {
            tracepoint: self.tracepoint.clone(),
            field: name.to_string(),
        })
    }

    /// The field `name`, inline and `size` bytes (what the program reads).
    pub fn require_sized(&self, name: &str, size: u32) -> Result<&Field, FormatError> {
        let f = self.require(name)?;
        if f.data_loc() || f.size != size {
            return Err(FormatError::FieldSize {
                tracepoint: self.tracepoint.clone(),
                field: name.to_string(),
                size: f.size,
                expected: format!("{size} inline"),
            });
        }
        Ok(f)
    }
}

/// `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;` (signed is missing on
/// kernels before 2.6.35; taken as unsigned).
fn parse_field(line: &str) -> Option<Field> {
    let mut parts = line.split(';').map(str::trim).filter(|p| !p.is_empty());
    let decl = parts.next()?.strip_prefix("field:")?.trim();
    let (mut offset, mut size, mut signed) = (None, None, false);
    for p in parts {
        let (k, v) = p.split_once(':')?;
        match k.trim() {
            "offset" => offset = v.trim().parse().ok(),
            "size" => size = v.trim().parse().ok(),
            "signed" => signed = v.trim() == "1",
            _ => {}
        }
    }
    let (location, decl) = if let Some(rest) = decl.strip_prefix("__data_loc ") {
        (Location::DataLoc, rest.trim())
    } else if let Some(rest) = decl.strip_prefix("__rel_loc ") {
        (Location::RelLoc, rest.trim())
    } else {
        (Location::Inline, decl)
    };
    // The name is the last word; an array's brackets follow it
    // (`char comm[16]`) and belong to the type.
    let split = decl.rfind([' ', '\t', '*'])?;
    let (c_type, name) = (decl[..=split].trim(), decl[split + 1..].trim());
    let (name, c_type) = match name.find('[') {
        Some(b) => (&name[..b], format!("{c_type}{}", &name[b..])),
        None => (name, c_type.to_string()),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(Field {
        name: name.to_string(),
        c_type,
        offset: offset?,
        size: size?,
        signed,
        location,
    })
}

#[cfg(test)]
pub(crate) mod tests;
