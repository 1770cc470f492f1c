//! Seeds of the parser targets: small valid inputs of each format, written
//! by code here (nothing binary is committed). They only start the search,
//! so a format asys comes to read differently makes them shallower, not
//! wrong.
use std::path::Path;

/// Named seeds of one target.
type Seeds = Vec<(&'static str, Vec<u8>)>;

/// Writes each parser target's seeds under `corpus/TARGET/`.
pub fn write(corpus: &Path) -> anyhow::Result<()> {
    let sets: [(&str, Seeds); 5] = [
        ("perf_map", perf_maps()),
        ("jitdump", jitdumps()),
        ("proc_maps", proc_maps()),
        ("python", python()),
        ("registry", registries()),
    ];
    for (target, seeds) in sets {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        }
    }
    Ok(())
}

fn perf_maps() -> Seeds {
    vec![
        (
            "python",
            b"7f0000001000 20 py::f:/a b.py\n7f0000001020 40 py::g:/a b.py\n".to_vec(),
        ),
        (
            "node",
            b"0x7f0000002000 0x10 LazyCompile:*hot /x.js:3\n  3a8 0 empty\nbad line\n7f00 8 cut"
                .to_vec(),
        ),
    ]
}

/// jitdump records (perf's jitdump-specification.txt), little-endian.
fn jitdumps() -> Seeds {
    let header = || {
        let mut d = Vec::new();
        // magic "JiTD", version, header size, ELF machine, pad, pid.
        for v in [0x4A69_5444u32, 1, 40, 62, 0, 77] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        // timestamp, flags.
        d.extend_from_slice(&[0; 16]);
        d
    };
    let record = |d: &mut Vec<u8>, id: u32, body: &[u8]| {
        d.extend_from_slice(&id.to_le_bytes());
        d.extend_from_slice(&(16 + body.len() as u32).to_le_bytes());
        d.extend_from_slice(&[0; 8]);
        d.extend_from_slice(body);
    };
    let load = |d: &mut Vec<u8>, addr: u64, len: u64, index: u64, name: &str| {
        let mut b = Vec::new();
        b.extend_from_slice(&[77, 0, 0, 0, 77, 0, 0, 0]);
        for v in [addr, addr, len, index] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend(std::iter::repeat_n(0x90u8, len as usize));
        record(d, 0, &b);
    };
    let moved = |d: &mut Vec<u8>, old: u64, new: u64, len: u64, index: u64| {
        let mut b = vec![77, 0, 0, 0, 77, 0, 0, 0];
        for v in [0, old, new, len, index] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        record(d, 1, &b);
    };
    let mut loads = header();
    load(&mut loads, 0x5000, 0x10, 1, "f");
    load(&mut loads, 0x6000, 0x20, 2, "LazyCompile:*g /x.js:1");
    // Unwinding information (id 4) and debug information (2): skipped.
    record(&mut loads, 4, &[0; 8]);
    record(&mut loads, 2, &[0; 24]);
    // Code moved many times: its name must be kept once (a copy per move
    // made a 0.64 MB file cost 556 MB).
    let mut moves = header();
    load(&mut moves, 0x5000, 0x10, 1, &"a-long-name-".repeat(25));
    for i in 0..20 {
        moved(&mut moves, 0x5000 + i * 0x100, 0x5100 + i * 0x100, 0x10, 1);
    }
    // A move of code never loaded, and a record cut short.
    moved(&mut moves, 0, 0x9000, 0x10, 99);
    moves.extend_from_slice(&0u32.to_le_bytes());
    moves.extend_from_slice(&400u32.to_le_bytes());
    vec![("loads", loads), ("moves", moves)]
}

fn proc_maps() -> Seeds {
    vec![(
        "process",
        b"55d0c0a00000-55d0c0a21000 r--p 00000000 fe:01 1234  /usr/bin/python3.12\n\
          55d0c0a21000-55d0c0b00000 r-xp 00021000 fe:01 1234  /usr/bin/python3.12\n\
          7f1c2a000000-7f1c2a021000 r-xp 00002000 fe:01 99 /tmp/a b/libx.so (deleted)\n\
          7f1c2b000000-7f1c2b001000 r-xp 00000000 00:05 7 /tmp/jit-77.dump\n\
          7f1c2c000000-7f1c2c100000 rw-p 00000000 00:00 0 \n\
          7ffd1000-7ffd2000 rw-p 00000000 00:00 0   [stack]\n\
          7ffd3000-7ffd5000 r-xp 00000000 00:00 0   [vdso]\n"
            .to_vec(),
    )]
}

/// The python target's inputs: a version (0: 3.11, 1: 3.12, 2: 3.13, 3:
/// 3.10), 1
/// (a well-formed interpreter, built by the target with asys's own
/// layouts), then its parameters: frames, three names (length, state xor
/// 0x60, text), the first line (u16), the line table (length, bytes).
fn python() -> Seeds {
    // CPython 3.11+ location entries: one-line form (next line), no
    // columns (line +1, signed varint 2), long form (line +2, end line,
    // columns), no location, short form.
    let table: &[u8] = &[
        0x80 | (11 << 3) | 1,
        0,
        0,
        0x80 | (13 << 3),
        2,
        0x80 | (14 << 3) | 2,
        4,
        1,
        2,
        3,
        0x80 | (15 << 3),
        0x80 | 1,
        5,
    ];
    // CPython 3.10's pairs (address delta in bytes, line delta): 6 bytes
    // at +0, an empty range at +1, 4 bytes at +2, 2 bytes with no line.
    let table_310: &[u8] = &[6, 0, 0, 1, 4, 2, 2, 0x80];
    let mut out = Vec::new();
    for (version, name) in [(0u8, "3.11"), (1, "3.12"), (2, "3.13"), (3, "3.10")] {
        let table = if version == 3 { table_310 } else { table };
        let mut s = vec![version, 1, 3];
        for text in ["hot", "Outer.hot", "/srv/app.py"] {
            s.push(text.len() as u8);
            s.push(0);
            s.extend_from_slice(text.as_bytes());
        }
        s.extend_from_slice(&40u16.to_le_bytes());
        s.push(table.len() as u8);
        s.extend_from_slice(table);
        out.push((name, s.clone()));
        // The same, damaged: a patch of 8 bytes of 0xff into the code
        // object (region 5) at offset 120 (a name pointer).
        let mut damaged = s;
        damaged.extend_from_slice(&[5, 120, 0, 8]);
        damaged.extend_from_slice(&[0xff; 8]);
        out.push((
            match version {
                0 => "3.11-damaged",
                1 => "3.12-damaged",
                2 => "3.13-damaged",
                _ => "3.10-damaged",
            },
            damaged,
        ));
    }
    // Raw regions: a runtime whose words all point at itself (a cycle).
    let mut raw = vec![1u8, 0];
    raw.extend_from_slice(&0x1000u64.to_le_bytes());
    raw.extend_from_slice(&1024u16.to_le_bytes());
    for _ in 0..128 {
        raw.extend_from_slice(&0x1000u64.to_le_bytes());
    }
    out.push(("raw-cycle", raw));
    out
}

/// The NVTX table: where it is (u64), then the header (magic "ASYSNVTX",
/// version 1, capacity 1024, taken) and entries (ready, kind, handle, 112
/// bytes of text), as asys-common lays them out.
fn registries() -> Seeds {
    let table = |taken: u32, entries: &[(u32, u32, u64, &[u8])], pad_to: usize| {
        let mut t = 0x7f00_0000_1000u64.to_le_bytes().to_vec();
        t.extend_from_slice(b"ASYSNVTX");
        for v in [1u32, 1024, taken, 0] {
            t.extend_from_slice(&v.to_le_bytes());
        }
        for &(ready, kind, handle, text) in entries {
            t.extend_from_slice(&ready.to_le_bytes());
            t.extend_from_slice(&kind.to_le_bytes());
            t.extend_from_slice(&handle.to_le_bytes());
            let mut fixed = [0u8; 112];
            fixed[..text.len()].copy_from_slice(text);
            t.extend_from_slice(&fixed);
        }
        t.resize(t.len().max(pad_to), 0);
        t
    };
    vec![
        (
            "few",
            table(
                4,
                &[
                    (1, 1, 7, b"step"),
                    (1, 2, 8, b"domain"),
                    (0, 1, 9, b"being written"),
                    (1, 3, 10, b"unknown kind"),
                ],
                0,
            ),
        ),
        // Full, and more taken than it holds.
        (
            "full",
            table(1100, &[(1, 1, 1, b"first")], 8 + 24 + 1024 * 128),
        ),
    ]
}
