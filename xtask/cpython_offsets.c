/* The CPython field offsets asys's Python-stack walk uses
 * (asys-userspace/src/collect/python_threads.rs, python_code.rs, python_thread_names.rs), printed from the
 * interpreter's own internal headers. Build against the fixture's headers
 * (cargo xtask cpython), e.g. for 3.13 (or 3.10, whose include directory
 * is usr/include/python3.10 too):
 *   R=target/cpython/3.13
 *   gcc -I$R/usr/include/python3.13 -I$R/usr/include xtask/cpython_offsets.c -o /tmp/off && /tmp/off
 */
#define Py_BUILD_CORE 1
/* The inline accessors below assert on the object's type: the fake object
 * they are given to print where they point has none. */
#define NDEBUG 1
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
#include "internal/pycore_moduleobject.h"
#include "internal/pycore_object.h"
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_dict.h"
#else
/* 3.10 keeps its dict keys in Objects/dict-common.h, which is not
 * installed: the struct as it is there (3.10.0-3.10.x). */
typedef struct {
    Py_hash_t me_hash;
    PyObject *me_key;
    PyObject *me_value;
} PyDictKeyEntry;
struct _dictkeysobject {
    Py_ssize_t dk_refcnt;
    Py_ssize_t dk_size;
    void *dk_lookup;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
};
#endif

#define P(t, f) printf("%-22s %-24s %zu\n", #t, #f, offsetof(t, f))

/* What reading a thread's `threading.Thread` name needs
 * (asys-userspace/src/collect/python_thread_names.rs): sys.modules, a
 * module's dict, dicts, an instance's attributes, an int. */
static void thread_names(void) {
#if PY_VERSION_HEX >= 0x030c0000
    P(PyInterpreterState, imports.modules);
#else
    P(PyInterpreterState, modules);
#endif
    P(PyModuleObject, md_dict);
    P(PyTypeObject, tp_basicsize);
    P(PyTypeObject, tp_flags);
    P(PyTypeObject, tp_dictoffset);
    P(PyHeapTypeObject, ht_cached_keys);
    P(PyDictObject, ma_used);
    P(PyDictObject, ma_keys);
    P(PyDictObject, ma_values);
    printf("sizeof(PyDictKeyEntry) %zu\n", sizeof(PyDictKeyEntry));
    P(PyDictKeysObject, dk_nentries);
    P(PyDictKeysObject, dk_indices);
#if PY_VERSION_HEX >= 0x030b0000
    P(PyDictKeysObject, dk_log2_size);
    P(PyDictKeysObject, dk_log2_index_bytes);
    P(PyDictKeysObject, dk_kind);
    printf("sizeof(PyDictUnicodeEntry) %zu\n", sizeof(PyDictUnicodeEntry));
    printf("DICT_KEYS_GENERAL %d\n", DICT_KEYS_GENERAL);
#else
    P(PyDictKeysObject, dk_size);
#endif
    printf("Py_TPFLAGS_MANAGED_DICT %lu\n", (unsigned long)
#ifdef Py_TPFLAGS_MANAGED_DICT
        Py_TPFLAGS_MANAGED_DICT
#else
        0
#endif
    );
    /* Where an object's managed dict (or values) pointer is, relative to
     * the object: the accessors applied to a made-up address. */
#if PY_VERSION_HEX >= 0x030b0000
    char obj[64];
    PyObject *o = (PyObject *)(obj + 32);
#endif
#if PY_VERSION_HEX >= 0x030d0000
    printf("Py_TPFLAGS_INLINE_VALUES %lu\n", (unsigned long)Py_TPFLAGS_INLINE_VALUES);
    printf("managed dict at object %+td\n", (char *)_PyObject_ManagedDictPointer(o) - (char *)o);
    printf("inline values at object %+td\n", (char *)_PyObject_InlineValues(o) - (char *)o);
    P(PyDictValues, valid);
    P(PyDictValues, values);
#elif PY_VERSION_HEX >= 0x030c0000
    printf("dict or values at object %+td\n", (char *)_PyObject_DictOrValuesPointer(o) - (char *)o);
    PyDictOrValues dorv = {.values = (char *)0x1000 - 1};
    printf("tagged values 0xfff -> %p\n", (void *)_PyDictOrValues_GetValues(dorv));
    P(PyDictValues, values);
#elif PY_VERSION_HEX >= 0x030b0000
    printf("managed dict at object %+td\n", (char *)_PyObject_ManagedDictPointer(o) - (char *)o);
    printf("values at object %+td\n", (char *)_PyObject_ValuesPointer(o) - (char *)o);
    P(PyDictValues, values);
#endif
#if PY_VERSION_HEX >= 0x030c0000
    P(PyLongObject, long_value.lv_tag);
    P(PyLongObject, long_value.ob_digit);
    printf("_PyLong_NON_SIZE_BITS %d\n", _PyLong_NON_SIZE_BITS);
#else
    P(PyLongObject, ob_base.ob_size);
    P(PyLongObject, ob_digit);
#endif
    printf("PyLong_SHIFT %d\n", PyLong_SHIFT);
    P(PyASCIIObject, length);
    P(PyASCIIObject, state);
}

int main(void) {
    printf("%s\n", PY_VERSION);
    thread_names();
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
