/*
 * The simulated HGTX annotation library (NVTX v2 with the `hgtx` prefix).
 *
 * Ground truth (HGGC_SIM_GROUND_TRUTH), one line per call, besides
 * api/pid/tid/ret/corr/start/end:
 *   events (hgtxMarkA/Ex, hgtxRangeStartA/Ex, hgtxRangePushA/W/Ex and the
 *   hgtxDomain* variants):
 *     "domain" (name, "" for the default domain, null for an unknown handle),
 *     "valid" (0 when the attributes or the domain were rejected), "message"
 *     (UTF-8; registered strings resolved; null when absent), "message_type",
 *     "category", "category_name" ("" if unnamed), "color_type", "color",
 *     "payload_type" and, for payload types 1..6, "payload" (a number);
 *     pushes add "level" (= ret), starts add "id" (= ret).
 *   hgtxRangePop/hgtxDomainRangePop: "domain", "level" (= ret), "message" of
 *     the popped range (null if nothing was popped).
 *   hgtxRangeEnd/hgtxDomainRangeEnd: "domain", "id", "found", "message" and
 *     "start_tid" of the ended range (null/-1 when the id is not open).
 *   hgtxDomainCreateA: "domain", "handle" (= ret); hgtxDomainDestroy: "domain",
 *     "handle"; hgtxDomainRegisterStringA: "domain", "string", "handle" (= ret);
 *   hgtxNameCategoryA/hgtxDomainNameCategoryA: "domain", "category", "name";
 *   hgtxNameOsThreadA: "thread", "name".
 * "ret" is the C return value: the level for push/pop (-1 on error), the id
 * for starts (0 on error), the handle's address for DomainCreate and
 * RegisterString (0 on error), 0 for functions returning void.
 */
#define _GNU_SOURCE
#include "hgtx.h"
#include "sim_truth.h"

#include <stddef.h>

_Static_assert(sizeof(hgtxEventAttributes_t) == 48, "nvtxEventAttributes_t v2 is 48 bytes");
_Static_assert(offsetof(hgtxEventAttributes_t, category) == 4, "layout");
_Static_assert(offsetof(hgtxEventAttributes_t, colorType) == 8, "layout");
_Static_assert(offsetof(hgtxEventAttributes_t, color) == 12, "layout");
_Static_assert(offsetof(hgtxEventAttributes_t, payloadType) == 16, "layout");
_Static_assert(offsetof(hgtxEventAttributes_t, payload) == 24, "layout");
_Static_assert(offsetof(hgtxEventAttributes_t, messageType) == 32, "layout");
_Static_assert(offsetof(hgtxEventAttributes_t, message) == 40, "layout");

/* ---------------------------------------------------------------- state */

struct category {
    uint32_t id;
    char *name;
    struct category *next;
};

/* Domains are never freed (a destroyed one is only marked), so a stale handle
 * still resolves to its name and never points at freed memory. */
struct hgtxDomainRegistration_st {
    char *name;
    atomic_int destroyed;
    struct category *categories;
    struct hgtxDomainRegistration_st *next;
};

struct hgtxStringRegistration_st {
    struct hgtxDomainRegistration_st *domain;
    char *string;
    struct hgtxStringRegistration_st *next;
};

struct range {
    hgtxRangeId_t id;
    struct hgtxDomainRegistration_st *domain;
    char *message;
    int tid;
    struct range *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hgtxDomainRegistration_st g_default_domain = {.name = ""};
static struct hgtxDomainRegistration_st *g_domains;
static struct hgtxStringRegistration_st *g_strings;
static struct range *g_ranges;
static atomic_uint_fast64_t g_next_range_id = 1;

/* Per-thread push/pop stacks, one per domain. */
struct stack {
    const struct hgtxDomainRegistration_st *domain;
    char **messages;
    int depth, cap;
};
static __thread struct stack *t_stacks;
static __thread int t_nstacks, t_capstacks;

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* The domain behind a handle: NULL is the default domain; an unknown handle
 * gives NULL. Destroyed domains are returned (the caller checks). */
static struct hgtxDomainRegistration_st *domain_lookup(hgtxDomainHandle_t h) {
    if (!h)
        return &g_default_domain;
    struct hgtxDomainRegistration_st *d;
    pthread_mutex_lock(&g_lock);
    for (d = g_domains; d && d != h; d = d->next) {
    }
    pthread_mutex_unlock(&g_lock);
    return d;
}

static int domain_ok(const struct hgtxDomainRegistration_st *d) { return d && !d->destroyed; }

static const char *domain_name(const struct hgtxDomainRegistration_st *d) {
    return d ? d->name : NULL;
}

/* Returns a copy of the category's name ("" if unnamed). */
static char *category_name(const struct hgtxDomainRegistration_st *d, uint32_t id) {
    const char *name = "";
    pthread_mutex_lock(&g_lock);
    for (const struct category *c = d ? d->categories : NULL; c; c = c->next)
        if (c->id == id) {
            name = c->name;
            break;
        }
    char *copy = strdup(name);
    pthread_mutex_unlock(&g_lock);
    return copy;
}

static void category_set(struct hgtxDomainRegistration_st *d, uint32_t id, const char *name) {
    pthread_mutex_lock(&g_lock);
    struct category *c = d->categories;
    while (c && c->id != id)
        c = c->next;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) {
            pthread_mutex_unlock(&g_lock);
            return;
        }
        c->id = id;
        c->next = d->categories;
        d->categories = c;
    }
    free(c->name);
    c->name = strdup(name ? name : "");
    pthread_mutex_unlock(&g_lock);
}

/* Resolves a registered string handle to a copy of its text (NULL if unknown). */
static char *registered_string(hgtxStringHandle_t h) {
    char *s = NULL;
    pthread_mutex_lock(&g_lock);
    for (struct hgtxStringRegistration_st *r = g_strings; r; r = r->next)
        if (r == h) {
            s = strdup(r->string);
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return s;
}

/* ---------------------------------------------------------------- events */

struct event {
    int valid;
    char *message; /* UTF-8, owned; NULL when absent */
    int32_t message_type;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    union hgtx_payload_t payload;
};

static struct event event_ascii(const char *m) {
    struct event e = {.valid = 1, .message_type = HGTX_MESSAGE_TYPE_ASCII};
    e.message = dup_or_null(m);
    return e;
}

static struct event event_wide(const wchar_t *m) {
    struct event e = {.valid = 1, .message_type = HGTX_MESSAGE_TYPE_UNICODE};
    e.message = sim_utf8_from_wide(m);
    return e;
}

static struct event event_attr(const hgtxEventAttributes_t *a) {
    struct event e = {0};
    if (!a || a->version != HGTX_VERSION || a->size < HGTX_EVENT_ATTRIB_STRUCT_SIZE)
        return e;
    e.valid = 1;
    e.category = a->category;
    e.color_type = a->colorType;
    e.color = a->color;
    e.payload_type = a->payloadType;
    e.payload = a->payload;
    e.message_type = a->messageType;
    switch (a->messageType) {
    case HGTX_MESSAGE_TYPE_ASCII: e.message = dup_or_null(a->message.ascii); break;
    case HGTX_MESSAGE_TYPE_UNICODE: e.message = sim_utf8_from_wide(a->message.unicode); break;
    case HGTX_MESSAGE_TYPE_REGISTERED: e.message = registered_string(a->message.registered); break;
    default: break;
    }
    return e;
}

static void json_event(sim_json *j, const struct hgtxDomainRegistration_st *d,
                       const struct event *e) {
    sim_json_str(j, "domain", domain_name(d));
    sim_json_int(j, "valid", e->valid);
    sim_json_str(j, "message", e->message);
    sim_json_int(j, "message_type", e->message_type);
    sim_json_uint(j, "category", e->category);
    char *cname = category_name(d, e->category);
    sim_json_str(j, "category_name", cname ? cname : "");
    free(cname);
    sim_json_int(j, "color_type", e->color_type);
    sim_json_uint(j, "color", e->color);
    sim_json_int(j, "payload_type", e->payload_type);
    switch (e->payload_type) {
    case HGTX_PAYLOAD_TYPE_UNSIGNED_INT64: sim_json_uint(j, "payload", e->payload.ullValue); break;
    case HGTX_PAYLOAD_TYPE_INT64: sim_json_int(j, "payload", e->payload.llValue); break;
    case HGTX_PAYLOAD_TYPE_DOUBLE: sim_json_double(j, "payload", e->payload.dValue); break;
    case HGTX_PAYLOAD_TYPE_UNSIGNED_INT32: sim_json_uint(j, "payload", e->payload.uiValue); break;
    case HGTX_PAYLOAD_TYPE_INT32: sim_json_int(j, "payload", e->payload.iValue); break;
    case HGTX_PAYLOAD_TYPE_FLOAT: sim_json_double(j, "payload", (double)e->payload.fValue); break;
    default: break;
    }
}

/* ------------------------------------------------------------- push / pop */

static struct stack *stack_for(const struct hgtxDomainRegistration_st *d, int create) {
    for (int i = 0; i < t_nstacks; i++)
        if (t_stacks[i].domain == d)
            return &t_stacks[i];
    if (!create)
        return NULL;
    if (t_nstacks == t_capstacks) {
        int cap = t_capstacks ? t_capstacks * 2 : 4;
        struct stack *s = realloc(t_stacks, (size_t)cap * sizeof *s);
        if (!s)
            return NULL;
        t_stacks = s;
        t_capstacks = cap;
    }
    struct stack *s = &t_stacks[t_nstacks++];
    memset(s, 0, sizeof *s);
    s->domain = d;
    return s;
}

/* Pushes e (taking its message); returns the new range's level or -1. */
static int push(struct hgtxDomainRegistration_st *d, struct event *e) {
    if (!e->valid || !domain_ok(d))
        return -1;
    struct stack *s = stack_for(d, 1);
    if (!s)
        return -1;
    if (s->depth == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        char **m = realloc(s->messages, (size_t)cap * sizeof *m);
        if (!m)
            return -1;
        s->messages = m;
        s->cap = cap;
    }
    s->messages[s->depth] = dup_or_null(e->message);
    return s->depth++;
}

static long long push_call(sim_call c, struct hgtxDomainRegistration_st *d, struct event e) {
    if (!domain_ok(d))
        e.valid = 0;
    int level = push(d, &e);
    sim_json j = {0};
    json_event(&j, d, &e);
    sim_json_int(&j, "level", level);
    sim_exit(c, level, &j);
    free(e.message);
    return level;
}

static int pop_call(sim_call c, struct hgtxDomainRegistration_st *d) {
    int level = -1;
    char *message = NULL;
    struct stack *s = domain_ok(d) ? stack_for(d, 0) : NULL;
    if (s && s->depth > 0) {
        level = --s->depth;
        message = s->messages[level];
    }
    sim_json j = {0};
    sim_json_str(&j, "domain", domain_name(d));
    sim_json_int(&j, "level", level);
    sim_json_str(&j, "message", message);
    sim_exit(c, level, &j);
    free(message);
    return level;
}

/* ------------------------------------------------------------ start / end */

static hgtxRangeId_t start_call(sim_call c, struct hgtxDomainRegistration_st *d, struct event e) {
    hgtxRangeId_t id = 0;
    if (!domain_ok(d))
        e.valid = 0;
    if (e.valid) {
        struct range *r = calloc(1, sizeof *r);
        if (r) {
            id = atomic_fetch_add(&g_next_range_id, 1);
            r->id = id;
            r->domain = d;
            r->message = dup_or_null(e.message);
            r->tid = sim_gettid();
            pthread_mutex_lock(&g_lock);
            r->next = g_ranges;
            g_ranges = r;
            pthread_mutex_unlock(&g_lock);
        }
    }
    sim_json j = {0};
    json_event(&j, d, &e);
    sim_json_uint(&j, "id", id);
    sim_exit(c, (long long)id, &j);
    free(e.message);
    return id;
}

static void end_call(sim_call c, const struct hgtxDomainRegistration_st *d, hgtxRangeId_t id) {
    struct range *r = NULL;
    pthread_mutex_lock(&g_lock);
    for (struct range **pp = &g_ranges; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id) {
            r = *pp;
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    sim_json j = {0};
    sim_json_str(&j, "domain", domain_name(r ? r->domain : d));
    sim_json_uint(&j, "id", id);
    sim_json_int(&j, "found", r != NULL);
    sim_json_str(&j, "message", r ? r->message : NULL);
    sim_json_int(&j, "start_tid", r ? r->tid : -1);
    sim_exit(c, 0, &j);
    if (r) {
        free(r->message);
        free(r);
    }
}

static void mark_call(sim_call c, const struct hgtxDomainRegistration_st *d, struct event e) {
    if (!domain_ok(d))
        e.valid = 0;
    sim_json j = {0};
    json_event(&j, d, &e);
    sim_exit(c, 0, &j);
    free(e.message);
}

/* -------------------------------------------------------------------- API */

void hgtxMarkA(const char *message) {
    sim_call c = sim_enter(__func__);
    mark_call(c, &g_default_domain, event_ascii(message));
}

void hgtxMarkEx(const hgtxEventAttributes_t *eventAttrib) {
    sim_call c = sim_enter(__func__);
    mark_call(c, &g_default_domain, event_attr(eventAttrib));
}

hgtxRangeId_t hgtxRangeStartA(const char *message) {
    sim_call c = sim_enter(__func__);
    return start_call(c, &g_default_domain, event_ascii(message));
}

hgtxRangeId_t hgtxRangeStartEx(const hgtxEventAttributes_t *eventAttrib) {
    sim_call c = sim_enter(__func__);
    return start_call(c, &g_default_domain, event_attr(eventAttrib));
}

void hgtxRangeEnd(hgtxRangeId_t id) {
    sim_call c = sim_enter(__func__);
    end_call(c, &g_default_domain, id);
}

int hgtxRangePushA(const char *message) {
    sim_call c = sim_enter(__func__);
    return (int)push_call(c, &g_default_domain, event_ascii(message));
}

int hgtxRangePushW(const wchar_t *message) {
    sim_call c = sim_enter(__func__);
    return (int)push_call(c, &g_default_domain, event_wide(message));
}

int hgtxRangePushEx(const hgtxEventAttributes_t *eventAttrib) {
    sim_call c = sim_enter(__func__);
    return (int)push_call(c, &g_default_domain, event_attr(eventAttrib));
}

int hgtxRangePop(void) {
    sim_call c = sim_enter(__func__);
    return pop_call(c, &g_default_domain);
}

void hgtxNameCategoryA(uint32_t category, const char *name) {
    sim_call c = sim_enter(__func__);
    category_set(&g_default_domain, category, name);
    sim_json j = {0};
    sim_json_str(&j, "domain", "");
    sim_json_uint(&j, "category", category);
    sim_json_str(&j, "name", name);
    sim_exit(c, 0, &j);
}

void hgtxNameOsThreadA(uint32_t threadId, const char *name) {
    sim_call c = sim_enter(__func__);
    sim_json j = {0};
    sim_json_uint(&j, "thread", threadId);
    sim_json_str(&j, "name", name);
    sim_exit(c, 0, &j);
}

hgtxDomainHandle_t hgtxDomainCreateA(const char *name) {
    sim_call c = sim_enter(__func__);
    struct hgtxDomainRegistration_st *d = calloc(1, sizeof *d);
    if (d) {
        d->name = strdup(name ? name : "");
        pthread_mutex_lock(&g_lock);
        d->next = g_domains;
        g_domains = d;
        pthread_mutex_unlock(&g_lock);
    }
    sim_json j = {0};
    sim_json_str(&j, "domain", name);
    sim_json_ptr(&j, "handle", d);
    sim_exit(c, (long long)(uintptr_t)d, &j);
    return d;
}

void hgtxDomainDestroy(hgtxDomainHandle_t domain) {
    sim_call c = sim_enter(__func__);
    struct hgtxDomainRegistration_st *d = domain ? domain_lookup(domain) : NULL;
    if (d)
        d->destroyed = 1;
    sim_json j = {0};
    sim_json_str(&j, "domain", domain_name(d));
    sim_json_ptr(&j, "handle", domain);
    sim_exit(c, 0, &j);
}

hgtxStringHandle_t hgtxDomainRegisterStringA(hgtxDomainHandle_t domain, const char *string) {
    sim_call c = sim_enter(__func__);
    struct hgtxDomainRegistration_st *d = domain_lookup(domain);
    struct hgtxStringRegistration_st *r = NULL;
    if (domain_ok(d) && string) {
        pthread_mutex_lock(&g_lock);
        /* Registering the same string again gives the same handle. */
        for (r = g_strings; r; r = r->next)
            if (r->domain == d && strcmp(r->string, string) == 0)
                break;
        if (!r && (r = calloc(1, sizeof *r))) {
            r->domain = d;
            r->string = strdup(string);
            r->next = g_strings;
            g_strings = r;
        }
        pthread_mutex_unlock(&g_lock);
    }
    sim_json j = {0};
    sim_json_str(&j, "domain", domain_name(d));
    sim_json_str(&j, "string", string);
    sim_json_ptr(&j, "handle", r);
    sim_exit(c, (long long)(uintptr_t)r, &j);
    return r;
}

void hgtxDomainNameCategoryA(hgtxDomainHandle_t domain, uint32_t category, const char *name) {
    sim_call c = sim_enter(__func__);
    struct hgtxDomainRegistration_st *d = domain_lookup(domain);
    if (domain_ok(d))
        category_set(d, category, name);
    sim_json j = {0};
    sim_json_str(&j, "domain", domain_name(d));
    sim_json_uint(&j, "category", category);
    sim_json_str(&j, "name", name);
    sim_exit(c, 0, &j);
}

void hgtxDomainMarkEx(hgtxDomainHandle_t domain, const hgtxEventAttributes_t *eventAttrib) {
    sim_call c = sim_enter(__func__);
    mark_call(c, domain_lookup(domain), event_attr(eventAttrib));
}

hgtxRangeId_t hgtxDomainRangeStartEx(hgtxDomainHandle_t domain,
                                     const hgtxEventAttributes_t *eventAttrib) {
    sim_call c = sim_enter(__func__);
    return start_call(c, domain_lookup(domain), event_attr(eventAttrib));
}

void hgtxDomainRangeEnd(hgtxDomainHandle_t domain, hgtxRangeId_t id) {
    sim_call c = sim_enter(__func__);
    end_call(c, domain_lookup(domain), id);
}

int hgtxDomainRangePushEx(hgtxDomainHandle_t domain, const hgtxEventAttributes_t *eventAttrib) {
    sim_call c = sim_enter(__func__);
    return (int)push_call(c, domain_lookup(domain), event_attr(eventAttrib));
}

int hgtxDomainRangePop(hgtxDomainHandle_t domain) {
    sim_call c = sim_enter(__func__);
    return pop_call(c, domain_lookup(domain));
}
