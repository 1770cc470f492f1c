/* The ground truth of tests/tests/vendor_libraries.rs: each call the program
 * makes prints one line, "call NAME KIND VALUE [BYTES]", with its result as
 * the program received it: KIND int (a status, %d), size (a size_t, %zu) or
 * ptr (a pointer, all 64 bits in hex); BYTES, for a collective, is the count
 * times the size of the element type the program used. */
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

#define CALL_INT(name, call) printf("call %s int %d\n", name, (int)(call))
#define CALL_SIZE(name, call) printf("call %s size %zu\n", name, (size_t)(call))
#define CALL_PTR(name, call) \
    printf("call %s ptr 0x%016llx\n", name, (unsigned long long)(uintptr_t)(call))
#define CALL_BYTES(name, call, bytes) \
    printf("call %s int %d %llu\n", name, (int)(call), (unsigned long long)(bytes))
