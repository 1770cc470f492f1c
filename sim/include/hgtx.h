/*
 * hgtx.h - the simulated HGTX annotation library (libhgtx.so), mirroring the
 * exported functions of NVTX v2 (nvToolsExt) with the `hgtx` prefix.
 *
 * hgtxEventAttributes_t has exactly the layout of nvtxEventAttributes_t v2
 * (48 bytes on LP64). Unlike NVTX without a tool attached, this library always
 * tracks ranges:
 *   - push/pop ranges live on per-thread stacks, one stack per domain (NULL is
 *     the default domain); hgtxRangePush* returns the zero-based level of the
 *     range it opened, hgtxRangePop the level of the range it closed, and both
 *     return a negative value (-1) on error (bad attributes, unknown or
 *     destroyed domain, nothing to pop);
 *   - start/end ranges have process-wide ids (from 1, 0 means error) and may be
 *     ended on any thread.
 * With HGGC_SIM_GROUND_TRUTH set, each call appends one JSON line (see
 * sim/src/hgtx.c for the fields).
 */
#ifndef HGTX_H
#define HGTX_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HGTX_VERSION 2
/* Returned by push/pop when ranges are not tracked (never by this library). */
#define HGTX_NO_PUSH_POP_TRACKING ((int)-2)

typedef uint64_t hgtxRangeId_t;

typedef struct hgtxDomainRegistration_st hgtxDomainRegistration;
typedef hgtxDomainRegistration *hgtxDomainHandle_t;

typedef struct hgtxStringRegistration_st hgtxStringRegistration;
typedef hgtxStringRegistration *hgtxStringHandle_t;

typedef enum hgtxColorType_t {
    HGTX_COLOR_UNKNOWN = 0,
    HGTX_COLOR_ARGB = 1,
} hgtxColorType_t;

typedef enum hgtxMessageType_t {
    HGTX_MESSAGE_UNKNOWN = 0,
    HGTX_MESSAGE_TYPE_ASCII = 1,
    HGTX_MESSAGE_TYPE_UNICODE = 2,
    HGTX_MESSAGE_TYPE_REGISTERED = 3,
} hgtxMessageType_t;

typedef union hgtxMessageValue_t {
    const char *ascii;
    const wchar_t *unicode;
    hgtxStringHandle_t registered;
} hgtxMessageValue_t;

typedef enum hgtxPayloadType_t {
    HGTX_PAYLOAD_UNKNOWN = 0,
    HGTX_PAYLOAD_TYPE_UNSIGNED_INT64 = 1,
    HGTX_PAYLOAD_TYPE_INT64 = 2,
    HGTX_PAYLOAD_TYPE_DOUBLE = 3,
    HGTX_PAYLOAD_TYPE_UNSIGNED_INT32 = 4,
    HGTX_PAYLOAD_TYPE_INT32 = 5,
    HGTX_PAYLOAD_TYPE_FLOAT = 6,
} hgtxPayloadType_t;

typedef struct hgtxEventAttributes_v2 {
    uint16_t version;    /* HGTX_VERSION */
    uint16_t size;       /* HGTX_EVENT_ATTRIB_STRUCT_SIZE */
    uint32_t category;   /* 0: none */
    int32_t colorType;   /* hgtxColorType_t */
    uint32_t color;      /* ARGB */
    int32_t payloadType; /* hgtxPayloadType_t */
    int32_t reserved0;
    union hgtx_payload_t {
        uint64_t ullValue;
        int64_t llValue;
        double dValue;
        uint32_t uiValue;
        int32_t iValue;
        float fValue;
    } payload;
    int32_t messageType; /* hgtxMessageType_t */
    hgtxMessageValue_t message;
} hgtxEventAttributes_v2;

typedef struct hgtxEventAttributes_v2 hgtxEventAttributes_t;

#define HGTX_EVENT_ATTRIB_STRUCT_SIZE ((uint16_t)(sizeof(hgtxEventAttributes_t)))

/* Default domain. */
void hgtxMarkA(const char *message);
void hgtxMarkEx(const hgtxEventAttributes_t *eventAttrib);
hgtxRangeId_t hgtxRangeStartA(const char *message);
hgtxRangeId_t hgtxRangeStartEx(const hgtxEventAttributes_t *eventAttrib);
void hgtxRangeEnd(hgtxRangeId_t id);
int hgtxRangePushA(const char *message);
int hgtxRangePushW(const wchar_t *message);
int hgtxRangePushEx(const hgtxEventAttributes_t *eventAttrib);
int hgtxRangePop(void);
void hgtxNameCategoryA(uint32_t category, const char *name);
void hgtxNameOsThreadA(uint32_t threadId, const char *name);

/* Domains (a NULL domain is the default domain). */
hgtxDomainHandle_t hgtxDomainCreateA(const char *name);
void hgtxDomainDestroy(hgtxDomainHandle_t domain);
hgtxStringHandle_t hgtxDomainRegisterStringA(hgtxDomainHandle_t domain, const char *string);
void hgtxDomainNameCategoryA(hgtxDomainHandle_t domain, uint32_t category, const char *name);
void hgtxDomainMarkEx(hgtxDomainHandle_t domain, const hgtxEventAttributes_t *eventAttrib);
hgtxRangeId_t hgtxDomainRangeStartEx(hgtxDomainHandle_t domain,
                                     const hgtxEventAttributes_t *eventAttrib);
void hgtxDomainRangeEnd(hgtxDomainHandle_t domain, hgtxRangeId_t id);
int hgtxDomainRangePushEx(hgtxDomainHandle_t domain, const hgtxEventAttributes_t *eventAttrib);
int hgtxDomainRangePop(hgtxDomainHandle_t domain);

#ifdef __cplusplus
}
#endif
#endif
