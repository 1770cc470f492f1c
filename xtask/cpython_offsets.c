/* The CPython field offsets asys's Python-stack walk uses
 * (asys-userspace/src/collect/python_threads.rs, python_code.rs), printed from the
 * interpreter's own internal headers. Build against the fixture's headers
 * (cargo xtask cpython), e.g. for 3.13 (or 3.10, whose include directory
 * is usr/include/python3.10 too):
 *   R=target/cpython/3.13
 *   gcc -I$R/usr/include/python3.13 -I$R/usr/include xtask/cpython_offsets.c -o /tmp/off && /tmp/off
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#include "internal/pycore_code.h"

#define P(t, f) printf("%-22s %-24s %zu\n", #t, #f, offsetof(t, f))

int main(void) {
    printf("%s\n", PY_VERSION);
#if PY_VERSION_HEX < 0x030b0000
    /* 3.10: PyFrameObject chains, f_lasti (code units), no co_qualname,
     * no native_thread_id (thread_id is pthread_self()). */
    P(_PyRuntimeState, interpreters.head);
    P(PyInterpreterState, next);
    P(PyInterpreterState, tstate_head);
    P(PyThreadState, next);
    P(PyThreadState, frame);
    P(PyThreadState, thread_id);
    P(PyFrameObject, f_back);
    P(PyFrameObject, f_code);
    P(PyFrameObject, f_lasti);
    P(PyCodeObject, co_firstlineno);
    P(PyCodeObject, co_filename);
    P(PyCodeObject, co_name);
    P(PyCodeObject, co_linetable);
    printf("sizeof(PyASCIIObject) %zu\n", sizeof(PyASCIIObject));
    printf("sizeof(PyCompactUnicodeObject) %zu\n", sizeof(PyCompactUnicodeObject));
    P(PyBytesObject, ob_sval);
    return 0;
#else
    P(_PyRuntimeState, interpreters.head);
    P(PyInterpreterState, next);
    P(PyInterpreterState, threads.head);
    P(PyThreadState, next);
    P(PyThreadState, native_thread_id);
#if PY_VERSION_HEX >= 0x030d0000
    P(PyThreadState, current_frame);
    P(_PyInterpreterFrame, f_executable);
    P(_PyInterpreterFrame, instr_ptr);
#else
    P(PyThreadState, cframe);
    P(_PyCFrame, current_frame);
    P(_PyInterpreterFrame, f_code);
    P(_PyInterpreterFrame, prev_instr);
#endif
#if PY_VERSION_HEX < 0x030c0000
    P(_PyInterpreterFrame, is_entry);
#else
    printf("FRAME_OWNED_BY_CSTACK %d\n", FRAME_OWNED_BY_CSTACK);
#endif
    P(_PyInterpreterFrame, previous);
    P(_PyInterpreterFrame, owner);
    P(PyCodeObject, co_firstlineno);
    P(PyCodeObject, co_filename);
    P(PyCodeObject, co_name);
    P(PyCodeObject, co_qualname);
    P(PyCodeObject, co_linetable);
    P(PyCodeObject, co_code_adaptive);
    printf("sizeof(PyASCIIObject) %zu\n", sizeof(PyASCIIObject));
    printf("sizeof(PyCompactUnicodeObject) %zu\n", sizeof(PyCompactUnicodeObject));
    P(PyBytesObject, ob_sval);
    return 0;
#endif
}
