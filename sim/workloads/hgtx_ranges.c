/* HGTX annotations around device work: nested push/pop ranges (3 deep), start/end
 * ranges that cross threads, marks, two domains, a registered string, named
 * categories, named threads, colors and payloads, with HGGC calls (copies and
 * kernel launches) inside ranges. Exits non-zero if a return value or a result
 * is wrong. Usage: hgtx_ranges */
#include "hggc_runtime.h"
#include "hgtx.h"
#include "workload_common.h"
#include <sys/syscall.h>
#include <unistd.h>

#define N 4096

static int failures;
#define EXPECT(cond)                                                               \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "hgtx_ranges:%d: expected %s\n", __LINE__, #cond);    \
            failures++;                                                            \
        }                                                                          \
    } while (0)

/* y[i] = 2 * x[i] + 1, a kernel the runtime runs on the stream's worker. */
void hgtx_scale_kernel(void **args) {
    const int *x = args[0];
    int *y = args[1];
    for (int i = 0; i < N; i++)
        y[i] = 2 * x[i] + 1;
}

static uint32_t tid(void) { return (uint32_t)syscall(SYS_gettid); }

static hgtxEventAttributes_t attrs(void) {
    hgtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = HGTX_VERSION;
    a.size = HGTX_EVENT_ATTRIB_STRUCT_SIZE;
    return a;
}

static hgtxEventAttributes_t ascii_attrs(const char *msg, uint32_t argb, uint32_t category) {
    hgtxEventAttributes_t a = attrs();
    a.colorType = HGTX_COLOR_ARGB;
    a.color = argb;
    a.category = category;
    a.messageType = HGTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return a;
}

static hggcStream_t g_stream;
static int *g_dx, *g_dy, g_hx[N], g_hy[N];

/* Upload, launch, download and wait: device work inside whatever range is open. */
static void device_step(int seed) {
    for (int i = 0; i < N; i++)
        g_hx[i] = i + seed;
    dim3 grid = {N / 256, 1, 1}, block = {256, 1, 1};
    void *args[2] = {g_dx, g_dy};
    CHECK(CALL(hggcMemcpyAsync, g_dx, g_hx, sizeof g_hx, hggcMemcpyHostToDevice, g_stream));
    CHECK(CALL(hggcLaunchKernel, (const void *)hgtx_scale_kernel, grid, block, args, 0, g_stream));
    CHECK(CALL(hggcMemcpyAsync, g_hy, g_dy, sizeof g_hy, hggcMemcpyDeviceToHost, g_stream));
    CHECK(CALL(hggcStreamSynchronize, g_stream));
    for (int i = 0; i < N; i++)
        if (g_hy[i] != 2 * (i + seed) + 1) {
            fprintf(stderr, "hgtx_ranges: kernel result %d wrong at %d\n", g_hy[i], i);
            failures++;
            break;
        }
}

struct cross {
    hgtxRangeId_t from_main;   /* started on main, ended here */
    hgtxRangeId_t from_worker; /* started here, ended on main */
    hgtxRangeId_t io_range;    /* started here in domain io, ended on main */
    hgtxDomainHandle_t io;
};

static void *worker(void *arg) {
    struct cross *x = arg;
    CALL(hgtxNameOsThreadA, tid(), "worker");
    CALL(hgtxRangeEnd, x->from_main);
    x->from_worker = CALL(hgtxRangeStartA, "started-on-worker");
    EXPECT(x->from_worker != 0);
    /* Stacks are per thread: main has a range open, this one starts at 0. */
    EXPECT(CALL(hgtxRangePushA, "worker-push") == 0);
    device_step(100);
    EXPECT(CALL(hgtxRangePop) == 0);
    hgtxEventAttributes_t a = ascii_attrs("io-transfer", 0xff0000ffu, 3);
    a.payloadType = HGTX_PAYLOAD_TYPE_DOUBLE;
    a.payload.dValue = 3.5;
    x->io_range = CALL(hgtxDomainRangeStartEx, x->io, &a);
    EXPECT(x->io_range != 0);
    return NULL;
}

int main(void) {
    CALL(hgtxNameOsThreadA, tid(), "main");
    CALL(hgtxNameCategoryA, 1, "compute");
    CALL(hgtxNameCategoryA, 2, "copy");
    hgtxDomainHandle_t app = CALL(hgtxDomainCreateA, "app");
    hgtxDomainHandle_t io = CALL(hgtxDomainCreateA, "io");
    EXPECT(app && io && app != io);
    hgtxStringHandle_t step = CALL(hgtxDomainRegisterStringA, app, "registered-step");
    EXPECT(step != NULL);
    EXPECT(CALL(hgtxDomainRegisterStringA, app, "registered-step") == step);
    CALL(hgtxDomainNameCategoryA, app, 7, "app-phase");
    CALL(hgtxDomainNameCategoryA, io, 3, "io-phase");

    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &g_stream));
    CHECK(CALL(hggcMalloc, (void **)&g_dx, sizeof g_hx));
    CHECK(CALL(hggcMalloc, (void **)&g_dy, sizeof g_hy));

    /* Nested push/pop, three deep, device work in the innermost range. */
    EXPECT(CALL(hgtxRangePushA, "outer") == 0);
    hgtxEventAttributes_t mid = ascii_attrs("middle", 0xff00ff00u, 1);
    mid.payloadType = HGTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    mid.payload.ullValue = 42;
    EXPECT(CALL(hgtxRangePushEx, &mid) == 1);
    EXPECT(CALL(hgtxRangePushW, L"inner-\u00fcnicode-\u6f22") == 2);
    device_step(1);
    CALL(hgtxMarkA, "inside-inner");
    EXPECT(CALL(hgtxRangePop) == 2);
    EXPECT(CALL(hgtxRangePop) == 1);
    EXPECT(CALL(hgtxRangePop) == 0);
    /* One deliberate mistake: popping with nothing pushed. */
    EXPECT(CALL(hgtxRangePop) < 0);

    /* Start/end ranges that cross threads. */
    struct cross x = {0};
    x.io = io;
    x.from_main = CALL(hgtxRangeStartA, "main-to-worker");
    EXPECT(x.from_main != 0);
    EXPECT(CALL(hgtxRangePushA, "while-worker-runs") == 0);
    pthread_t t;
    pthread_create(&t, NULL, worker, &x);
    pthread_join(t, NULL);
    EXPECT(CALL(hgtxRangePop) == 0);
    CALL(hgtxRangeEnd, x.from_worker);
    CALL(hgtxDomainRangeEnd, io, x.io_range);

    hgtxEventAttributes_t se = ascii_attrs("start-ex", 0xffff8800u, 2);
    se.payloadType = HGTX_PAYLOAD_TYPE_INT32;
    se.payload.iValue = -7;
    hgtxRangeId_t id4 = CALL(hgtxRangeStartEx, &se);
    EXPECT(id4 != 0 && id4 != x.from_main && id4 != x.from_worker);

    /* Marks. */
    hgtxEventAttributes_t mk = ascii_attrs("mark-ex", 0xff123456u, 1);
    mk.payloadType = HGTX_PAYLOAD_TYPE_DOUBLE;
    mk.payload.dValue = 2.5;
    CALL(hgtxMarkEx, &mk);
    hgtxEventAttributes_t dm = attrs();
    dm.messageType = HGTX_MESSAGE_TYPE_REGISTERED;
    dm.message.registered = step;
    dm.category = 7;
    dm.colorType = HGTX_COLOR_ARGB;
    dm.color = 0xffabcdefu;
    dm.payloadType = HGTX_PAYLOAD_TYPE_FLOAT;
    dm.payload.fValue = 1.25f;
    CALL(hgtxDomainMarkEx, app, &dm);

    /* Domain push/pop: a stack of its own, beside the default domain's. */
    EXPECT(CALL(hgtxRangePushA, "default-outer") == 0);
    EXPECT(CALL(hgtxDomainRangePushEx, app, &dm) == 0);
    hgtxEventAttributes_t ai = ascii_attrs("app-inner", 0xff00ffffu, 7);
    ai.payloadType = HGTX_PAYLOAD_TYPE_INT64;
    ai.payload.llValue = -123456789012LL;
    EXPECT(CALL(hgtxDomainRangePushEx, app, &ai) == 1);
    hgtxEventAttributes_t u32 = ascii_attrs("default-via-null-domain", 0, 0);
    u32.colorType = HGTX_COLOR_UNKNOWN;
    u32.payloadType = HGTX_PAYLOAD_TYPE_UNSIGNED_INT32;
    u32.payload.uiValue = 4000000000u;
    EXPECT(CALL(hgtxDomainRangePushEx, NULL, &u32) == 1); /* NULL: the default domain */
    device_step(7);
    EXPECT(CALL(hgtxDomainRangePop, NULL) == 1);
    EXPECT(CALL(hgtxDomainRangePop, app) == 1);
    EXPECT(CALL(hgtxDomainRangePop, app) == 0);
    EXPECT(CALL(hgtxRangePop) == 0);

    CALL(hgtxRangeEnd, id4);
    CALL(hgtxDomainDestroy, app);
    CALL(hgtxDomainDestroy, io);

    CHECK(CALL(hggcFree, g_dx));
    CHECK(CALL(hggcFree, g_dy));
    CHECK(CALL(hggcStreamDestroy, g_stream));
    printf("hgtx_ranges: %s\n", failures ? "FAILED" : "all ranges and results as expected");
    wl_report("hgtx_ranges");
    return failures ? 1 : 0;
}
