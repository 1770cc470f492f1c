//! CUPTI activity records built from the CUPTI headers' own struct types,
//! for the decoder's tests: `cupti_records/records.c`, compiled at test
//! time against the headers of the CUPTI wheel in target/pyenv, fills each
//! field the decoder reads with its own value and prints the records' bytes
//! with every field's offset, size and value (and the enum values asys
//! uses). The offsets the tests check thus come from the C compiler reading
//! NVIDIA's header, never from the decoder's own numbers.
use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

/// One field as the header lays it out, with the value records.c gave it.
struct Field {
    name: String,
    offset: usize,
    value: u64,
}

/// One record: its C type, its bytes and its fields.
pub struct Record {
    pub type_name: String,
    /// `sizeof` the type.
    size: usize,
    pub bytes: Vec<u8>,
    fields: Vec<Field>,
    /// The offset of the kernel name pointer (left null by records.c).
    pub name_pointer: Option<usize>,
}

impl Record {
    fn field(&self, name: &str) -> &Field {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("records.c set no {name} in {}", self.type_name))
    }

    /// The value records.c gave the field `name`.
    pub fn value(&self, name: &str) -> u64 {
        self.field(name).value
    }

    /// Where the header puts the field `name`.
    pub fn offset(&self, name: &str) -> usize {
        self.field(name).offset
    }

    /// The names of the fields records.c set.
    pub fn names(&self) -> BTreeSet<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }
}

/// What records.c printed.
pub struct Header {
    enums: HashMap<String, u64>,
    pub records: Vec<Record>,
}

impl Header {
    /// The value of one of CUPTI's enum constants (`CUPTI_ACTIVITY_KIND_...`).
    pub fn constant(&self, name: &str) -> u64 {
        *self
            .enums
            .get(name)
            .unwrap_or_else(|| panic!("records.c printed no enum {name}"))
    }

    /// The records of the C types whose names start with `prefix`.
    pub fn records(&self, prefix: &str) -> Vec<&Record> {
        let found: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| r.type_name.starts_with(prefix))
            .collect();
        assert!(!found.is_empty(), "records.c built no {prefix} record");
        found
    }
}

/// The target folder of this workspace (as cargo and the tests find it).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The `include` folder of NVIDIA wheel `package` in target/pyenv, which
/// must hold `header`.
fn wheel_include(package: &str, header: &str) -> PathBuf {
    let lib = target_dir().join("pyenv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| {
                e.path()
                    .join("site-packages/nvidia")
                    .join(package)
                    .join("include")
            })
            .find(|include| include.join(header).exists())
    });
    found.unwrap_or_else(|| {
        panic!(
            "no {header} under {}/python3*/site-packages/nvidia/{package}/include: \
             run `cargo xtask pyenv`, which installs NVIDIA's CUPTI and CUDA runtime wheels",
            lib.display()
        )
    })
}

/// Compiles and runs records.c once per test run, and reads what it printed.
pub fn header() -> &'static Header {
    static HEADER: OnceLock<Header> = OnceLock::new();
    HEADER.get_or_init(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("cupti_records");
        let cupti = wheel_include("cuda_cupti", "cupti_activity.h");
        let runtime = wheel_include("cuda_runtime", "cuda.h");
        let dir = std::env::temp_dir().join(format!("asys-inject-cupti-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let bin = dir.join("records");
        let cc = Command::new("cc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&bin)
            .arg(format!("-I{}", here.join("include").display()))
            .arg(format!("-I{}", cupti.display()))
            .arg(format!("-I{}", runtime.display()))
            .arg(here.join("records.c"))
            .output()
            .expect("cc runs (gcc builds the records from CUPTI's header)");
        assert!(
            cc.status.success(),
            "records.c does not compile against {}: {}",
            cupti.display(),
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = Command::new(&bin).output().expect("records runs");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "records failed: {}", out.status);
        parse(&String::from_utf8(out.stdout).expect("records prints text"))
    })
}

fn number<T: std::str::FromStr>(word: Option<&str>, line: &str) -> T {
    word.and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("records.c printed {line:?}"))
}

fn parse(text: &str) -> Header {
    let mut header = Header {
        enums: HashMap::new(),
        records: Vec::new(),
    };
    for line in text.lines() {
        let mut words = line.split(' ');
        let what = words.next();
        let name = words.next().unwrap_or_default().to_string();
        let record = header.records.last_mut();
        match (what, record) {
            (Some("enum"), _) => {
                let value = number(words.next(), line);
                header.enums.insert(name, value);
            }
            (Some("record"), _) => header.records.push(Record {
                type_name: name,
                size: number(words.next(), line),
                bytes: Vec::new(),
                fields: Vec::new(),
                name_pointer: None,
            }),
            (Some("field"), Some(r)) => {
                let offset = number(words.next(), line);
                let _size: usize = number(words.next(), line);
                let value = number(words.next(), line);
                r.fields.push(Field {
                    name,
                    offset,
                    value,
                });
            }
            (Some("pointer"), Some(r)) => r.name_pointer = Some(number(words.next(), line)),
            (Some("bytes"), Some(r)) => {
                r.bytes = (0..name.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&name[i..i + 2], 16))
                    .collect::<Result<_, _>>()
                    .unwrap_or_else(|_| panic!("records.c printed {line:?}"));
                assert_eq!(r.bytes.len(), r.size, "{}'s bytes", r.type_name);
            }
            _ => panic!("records.c printed {line:?}"),
        }
    }
    header
}
