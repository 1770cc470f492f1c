//! Demangling C++ names as GNU tools print them. The cpp_demangle crate
//! (addr2line's) gives up on, or prints differently, names that GCC emits
//! every day (`std::__fill_a1<...>` with `__enable_if` return types, empty
//! parameter packs), so C++ names go to the GNU demangler itself,
//! `__cxa_demangle` of the C++ runtime (libstdc++, built from the same
//! cp-demangle.c as binutils' `c++filt` and `addr2line -C`), loaded when
//! first needed; where it is not installed, cpp_demangle's reading is used.
use std::{
    borrow::Cow,
    ffi::{CStr, CString, c_char, c_int, c_void},
    sync::OnceLock,
};

type CxaDemangle =
    unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

fn cxa_demangle() -> Option<CxaDemangle> {
    static FOUND: OnceLock<Option<usize>> = OnceLock::new();
    let f = (*FOUND.get_or_init(|| {
        // SAFETY: dlopen and dlsym with NUL-terminated names; the library
        // stays loaded for the life of the process (never dlclosed), so the
        // function pointer stays valid.
        unsafe {
            let lib = libc::dlopen(
                c"libstdc++.so.6".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            );
            if lib.is_null() {
                return None;
            }
            let sym: *mut c_void = libc::dlsym(lib, c"__cxa_demangle".as_ptr());
            (!sym.is_null()).then_some(sym as usize)
        }
    }))?;
    // SAFETY: the address dlsym gave for `__cxa_demangle`, whose C++ ABI
    // signature is `char* (const char*, char*, size_t*, int*)`.
    Some(unsafe { std::mem::transmute::<usize, CxaDemangle>(f) })
}

/// `name` demangled by the GNU demangler, if it is an Itanium C++ name it
/// can read.
fn gnu(name: &str) -> Option<String> {
    let f = cxa_demangle()?;
    let c = CString::new(name).ok()?;
    let mut status: c_int = 0;
    // SAFETY: `c` is NUL-terminated; a null buffer asks __cxa_demangle to
    // malloc the result, which is freed below after copying it.
    unsafe {
        let out = f(
            c.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        );
        if out.is_null() {
            return None;
        }
        let s = (status == 0).then(|| CStr::from_ptr(out).to_string_lossy().into_owned());
        libc::free(out.cast());
        s
    }
}

/// A function name as `addr2line -C` prints it: C++ names demangled the GNU
/// way, Rust names by rustc-demangle, others as they are.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if name.starts_with("_Z")
        && let Some(s) = gnu(name)
    {
        return Cow::Owned(s);
    }
    addr2line::demangle_auto(Cow::Borrowed(name), None)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cxx_names_read_as_gnu_prints_them() {
        assert_eq!(super::demangle("_Z3fooi"), "foo(int)");
        assert_eq!(super::demangle("main"), "main");
        if super::cxa_demangle().is_some() {
            assert_eq!(
                super::demangle("_ZSt10_ConstructImJEEvPT_DpOT0_"),
                "void std::_Construct<unsigned long>(unsigned long*)"
            );
        }
    }
}
