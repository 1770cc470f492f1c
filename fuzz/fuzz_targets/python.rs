//! CPython's structures in another process (`_PyRuntime` → interpreters →
//! thread states → frames → code objects, names, line tables), read by the
//! decoders asys runs over a live process, here over an address space made
//! of the input. Its first byte picks the version (3.11, 3.12, 3.13, 3.10); the
//! second whether the rest is raw regions (`[start u64][len u16][bytes]`,
//! `_PyRuntime` at the first, a code object at the second) or parameters of
//! a well-formed interpreter then damage to it (see `built_interpreter`).
#![no_main]
use asys_fuzz::{
    python_code::read_code_in,
    python_threads::{frames_in, thread_states_in},
    untrusted_input::{
        CODE, CODE_TYPE, Cursor, PYTHON_VERSIONS, RUNTIME, built_interpreter, code_layout,
        raw_regions, thread_layout,
    },
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor { data };
    let v = PYTHON_VERSIONS[c.u8() as usize % PYTHON_VERSIONS.len()];
    let built = c.u8() & 1 == 1;
    let mem = if built {
        built_interpreter(v, &mut c)
    } else {
        raw_regions(&mut c)
    };
    let (runtime, code_addr) = match built {
        true => (RUNTIME, CODE),
        false => (
            mem.regions.first().map_or(0, |r| r.0),
            mem.regions.get(1).map_or(0, |r| r.0),
        ),
    };
    let code = code_layout(v);
    let stack = thread_layout(v);
    let code_type = stack.check_code.then_some(CODE_TYPE);
    if let Ok(states) = thread_states_in(&mem, runtime, &stack) {
        for &(_, ts) in states.iter().take(4) {
            let Ok(frames) = frames_in(&mem, ts, &stack, code_type) else {
                continue;
            };
            for f in frames {
                if let Ok(info) = read_code_in(&mem, f.code, &code) {
                    let _ = code.line(&info, f.code, f.prev_instr);
                }
            }
        }
    }
    // A code object by the address a sample gives (`collect::python_stacks`).
    if let Ok(info) = read_code_in(&mem, code_addr, &code) {
        for offset in [0, 1, 2, 7, 100, u32::MAX] {
            let _ = info.line_at(offset);
        }
    }
});
