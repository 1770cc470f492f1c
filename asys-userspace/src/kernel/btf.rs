//! Just enough of the kernel's BTF (/sys/kernel/btf/vmlinux) to find where a
//! member lies in a kernel struct: for kernels whose `sched_process_exit`
//! tracepoint has no `group_dead`, the exit program reads
//! `current->signal->live` at the offsets found here.
//!
//! Format: `include/uapi/linux/btf.h` (a header, then `btf_type` records,
//! each followed by kind-specific data, numbered from 1, then the strings).
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: not BTF this reader understands")]
    Format(String),
    #[error("kernel BTF has no member {member} in struct {strukt}")]
    Missing { strukt: String, member: String },
}

pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

struct Member {
    name: u32,
    type_id: u32,
    /// In bits.
    offset: u32,
}

struct Type {
    name: u32,
    kind: u32,
    members: Vec<Member>,
}

pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
}

impl Btf {
    pub fn read(path: &str) -> Result<Self, BtfError> {
        let data = std::fs::read(path).map_err(|source| BtfError::Read {
            path: path.to_string(),
            source,
        })?;
        Self::parse(&data).ok_or_else(|| BtfError::Format(path.to_string()))
    }

    fn parse(d: &[u8]) -> Option<Self> {
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
        };
        if d.get(0..2)? != [0x9f, 0xeb] {
            return None; // big-endian or not BTF
        }
        let hdr_len = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
        let types_at = hdr_len.checked_add(type_off)?;
        let types_end = types_at.checked_add(type_len)?;
        let strings_at = hdr_len.checked_add(str_off)?;
        let strings = d
            .get(strings_at..strings_at.checked_add(str_len)?)?
            .to_vec();
        // Type 0 is void.
        let mut types = vec![Type {
            name: 0,
            kind: 0,
            members: Vec::new(),
        }];
        let mut at = types_at;
        while at < types_end {
            let name = u32_at(at)?;
            let info = u32_at(at + 4)?;
            let (kind, vlen, kflag) = ((info >> 24) & 0x1f, info & 0xffff, info >> 31);
            at += 12;
            let mut members = Vec::new();
            let vlen = vlen as usize;
            at += match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = at + 12 * i;
                        let raw = u32_at(m + 8)?;
                        members.push(Member {
                            name: u32_at(m)?,
                            type_id: u32_at(m + 4)?,
                            // With kflag the high 8 bits are a bitfield's size.
                            offset: if kflag == 1 { raw & 0x00ff_ffff } else { raw },
                        });
                    }
                    12 * vlen
                }
                KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
                KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                0 | 20.. => return None,
                _ => 0,
            };
            types.push(Type {
                name,
                kind,
                members,
            });
        }
        Some(Self { types, strings })
    }

    fn name(&self, off: u32) -> &[u8] {
        let s = self.strings.get(off as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    }

    /// The byte offset of `member` in `struct strukt`, looking into
    /// anonymous structs and unions (randomized or grouped layouts).
    pub fn member_offset(&self, strukt: &str, member: &str) -> Result<u32, BtfError> {
        let missing = || BtfError::Missing {
            strukt: strukt.to_string(),
            member: member.to_string(),
        };
        let t = self
            .types
            .iter()
            .find(|t| {
                t.kind == KIND_STRUCT
                    && !t.members.is_empty()
                    && self.name(t.name) == strukt.as_bytes()
            })
            .ok_or_else(missing)?;
        self.find(t, member.as_bytes(), 0, 0)
            .map(|bits| bits / 8)
            .ok_or_else(missing)
    }

    /// The type id of kernel function `name` (what an fentry program's
    /// `attach_btf_id` is), if the kernel's BTF describes it.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        self.types
            .iter()
            .position(|t| t.kind == KIND_FUNC && self.name(t.name) == name.as_bytes())
            .map(|i| i as u32)
    }

    fn find(&self, t: &Type, member: &[u8], base_bits: u32, depth: u32) -> Option<u32> {
        for m in &t.members {
            if self.name(m.name) == member {
                return Some(base_bits + m.offset);
            }
        }
        if depth > 4 {
            return None;
        }
        t.members.iter().filter(|m| m.name == 0).find_map(|m| {
            let inner = self.types.get(m.type_id as usize)?;
            matches!(inner.kind, KIND_STRUCT | KIND_UNION)
                .then(|| self.find(inner, member, base_bits + m.offset, depth + 1))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_members_of_this_kernels_structs() {
        // A kernel built without BTF fails here by name: the reader cannot
        // be checked against a real kernel there.
        assert!(
            std::path::Path::new(VMLINUX).exists(),
            "{VMLINUX} does not exist: this kernel was built without \
             CONFIG_DEBUG_INFO_BTF, and this test reads a real kernel's BTF"
        );
        let btf = Btf::read(VMLINUX).unwrap_or_else(|e| panic!("{VMLINUX} exists: {e}"));
        // `pid` and `tgid` are adjacent ints in every layout.
        let pid = btf.member_offset("task_struct", "pid").unwrap();
        let tgid = btf.member_offset("task_struct", "tgid").unwrap();
        assert_eq!(tgid, pid + 4);
        assert!(btf.member_offset("task_struct", "signal").unwrap() > 0);
        // `live` follows `sigcnt` (both atomic/refcount 4 bytes) at the start.
        let live = btf.member_offset("signal_struct", "live").unwrap();
        assert!(live < 64, "{live}");
        let e = btf.member_offset("task_struct", "no_such").unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel BTF has no member no_such in struct task_struct"
        );
    }
}
