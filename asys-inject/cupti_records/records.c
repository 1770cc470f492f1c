/* Builds the CUPTI activity records asys-inject decodes (src/cupti.rs) from
   the struct types of the CUPTI headers it is compiled against, each field
   asys reads set to its own value, and prints them for cupti.rs's tests:

     enum NAME VALUE                  a CUPTI enum value asys uses
     record TYPE SIZE                 a record begins
     field NAME OFFSET SIZE VALUE     a field as the header lays it out
     pointer NAME OFFSET              a pointer field, left null for the test
     bytes HEX                        the record's bytes, as CUPTI gives them

   Each field's bytes come from one counter (never 0 and never the 0xa5 the
   rest of the record is filled with), so a field read at a wrong offset or
   with a wrong size reads a different value. Values are printed as the
   bytes read little-endian (x86-64 and aarch64, where asys runs). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cupti_activity.h>

#define BACKGROUND 0xa5

static unsigned counter;

static unsigned char next_byte(void) {
    do {
        counter = (counter + 1) & 0xff;
    } while (counter == 0 || counter == BACKGROUND);
    return (unsigned char)counter;
}

static void print_field(const char *name, const unsigned char *p, size_t offset, size_t size) {
    unsigned long long value = 0;
    for (size_t i = 0; i < size; i++)
        value |= (unsigned long long)p[offset + i] << (8 * i);
    printf("field %s %zu %zu %llu\n", name, offset, size, value);
}

/* Fills the field with the counter's next bytes. */
static void fill(void *record, const char *name, size_t offset, size_t size) {
    unsigned char *p = record;
    for (size_t i = 0; i < size; i++)
        p[offset + i] = next_byte();
    print_field(name, p, offset, size);
}

static void begin(void *record, size_t size, const char *type) {
    memset(record, BACKGROUND, size);
    printf("record %s %zu\n", type, size);
}

static void end(const void *record, size_t size) {
    const unsigned char *p = record;
    printf("bytes ");
    for (size_t i = 0; i < size; i++)
        printf("%02x", p[i]);
    printf("\n");
}

#define SIZE_OF(type, member) sizeof(((type *)0)->member)
#define FILL(type, member) fill(&r, #member, offsetof(type, member), SIZE_OF(type, member))
/* A field given a value of the header's own (a kind, an enum). */
#define SET(type, member, value)                                                           \
    do {                                                                                   \
        r.member = (value);                                                                \
        print_field(#member, (const unsigned char *)&r, offsetof(type, member),            \
                    SIZE_OF(type, member));                                                \
    } while (0)
#define BEGIN(type) \
    type r;         \
    begin(&r, sizeof r, #type)
#define END() end(&r, sizeof r)

#define KERNEL(type, activity_kind)                                            \
    do {                                                                \
        BEGIN(type);                                                    \
        SET(type, kind, activity_kind);                                        \
        FILL(type, registersPerThread);                                 \
        FILL(type, start);                                              \
        FILL(type, end);                                                \
        FILL(type, deviceId);                                           \
        FILL(type, contextId);                                          \
        FILL(type, streamId);                                           \
        FILL(type, gridX);                                              \
        FILL(type, gridY);                                              \
        FILL(type, gridZ);                                              \
        FILL(type, blockX);                                             \
        FILL(type, blockY);                                             \
        FILL(type, blockZ);                                             \
        FILL(type, staticSharedMemory);                                 \
        FILL(type, dynamicSharedMemory);                                \
        FILL(type, localMemoryPerThread);                               \
        FILL(type, localMemoryTotal);                                   \
        FILL(type, correlationId);                                      \
        FILL(type, graphNodeId);                                        \
        FILL(type, graphId);                                            \
        r.name = NULL;                                                  \
        printf("pointer name %zu\n", offsetof(type, name));             \
        END();                                                          \
    } while (0)

#define MEMCPY(type, copy_kind)                                         \
    do {                                                                \
        BEGIN(type);                                                    \
        SET(type, kind, CUPTI_ACTIVITY_KIND_MEMCPY);                    \
        SET(type, copyKind, copy_kind);                                 \
        FILL(type, srcKind);                                            \
        FILL(type, dstKind);                                            \
        FILL(type, bytes);                                              \
        FILL(type, start);                                              \
        FILL(type, end);                                                \
        FILL(type, deviceId);                                           \
        FILL(type, contextId);                                          \
        FILL(type, streamId);                                           \
        FILL(type, correlationId);                                      \
        END();                                                          \
    } while (0)

#define ENUM(name) printf("enum %s %llu\n", #name, (unsigned long long)(name))

int main(void) {
    ENUM(CUPTI_ACTIVITY_KIND_MEMCPY);
    ENUM(CUPTI_ACTIVITY_KIND_MEMSET);
    ENUM(CUPTI_ACTIVITY_KIND_KERNEL);
    ENUM(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    ENUM(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    ENUM(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    ENUM(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
    ENUM(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    ENUM(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
    ENUM(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    ENUM(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
    ENUM(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA);

    /* Every kernel record version asys reads at the same offsets
       (CUpti_ActivityKernel5 to 8 are in cupti_activity_deprecated.h,
       which cupti_activity.h includes). */
    KERNEL(CUpti_ActivityKernel9, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    KERNEL(CUpti_ActivityKernel9, CUPTI_ACTIVITY_KIND_KERNEL);
    KERNEL(CUpti_ActivityKernel8, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    KERNEL(CUpti_ActivityKernel7, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    KERNEL(CUpti_ActivityKernel6, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    KERNEL(CUpti_ActivityKernel5, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);

    /* One copy of each kind asys names, and one it calls "other". */
    MEMCPY(CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
    MEMCPY(CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    MEMCPY(CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
    MEMCPY(CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    MEMCPY(CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
    MEMCPY(CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_MEMCPY_KIND_HTOA);
    MEMCPY(CUpti_ActivityMemcpy5, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);

    {
        BEGIN(CUpti_ActivityMemset4);
        SET(CUpti_ActivityMemset4, kind, CUPTI_ACTIVITY_KIND_MEMSET);
        FILL(CUpti_ActivityMemset4, bytes);
        FILL(CUpti_ActivityMemset4, start);
        FILL(CUpti_ActivityMemset4, end);
        FILL(CUpti_ActivityMemset4, deviceId);
        FILL(CUpti_ActivityMemset4, contextId);
        FILL(CUpti_ActivityMemset4, streamId);
        FILL(CUpti_ActivityMemset4, correlationId);
        FILL(CUpti_ActivityMemset4, memoryKind);
        END();
    }
    {
        BEGIN(CUpti_ActivitySynchronization2);
        SET(CUpti_ActivitySynchronization2, kind, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
        FILL(CUpti_ActivitySynchronization2, type);
        FILL(CUpti_ActivitySynchronization2, start);
        FILL(CUpti_ActivitySynchronization2, end);
        FILL(CUpti_ActivitySynchronization2, correlationId);
        FILL(CUpti_ActivitySynchronization2, contextId);
        FILL(CUpti_ActivitySynchronization2, streamId);
        FILL(CUpti_ActivitySynchronization2, cudaEventId);
        END();
    }
    {
        BEGIN(CUpti_ActivityGraphTrace2);
        SET(CUpti_ActivityGraphTrace2, kind, CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
        FILL(CUpti_ActivityGraphTrace2, correlationId);
        FILL(CUpti_ActivityGraphTrace2, start);
        FILL(CUpti_ActivityGraphTrace2, end);
        FILL(CUpti_ActivityGraphTrace2, deviceId);
        FILL(CUpti_ActivityGraphTrace2, graphId);
        FILL(CUpti_ActivityGraphTrace2, contextId);
        FILL(CUpti_ActivityGraphTrace2, streamId);
        END();
    }
    return 0;
}
