/*
 * sim_truth.h - ground truth shared by the simulated libraries (header only).
 *
 * Every function is static, so each library that includes this gets its own
 * copy (its own correlation counter and its own file descriptor) and no
 * helper is ever an exported symbol a uprobe could count.
 *
 * With HGGC_SIM_GROUND_TRUTH=path set, sim_exit() appends ONE line per API
 * call to path:
 *   {"api":"NAME","pid":P,"tid":T,"ret":R,"corr":C,"start":S,"end":E,<fields>}
 * start/end are CLOCK_MONOTONIC ns, tid comes from gettid, corr counts this
 * library's calls in this process from 1. The line is formatted in memory and
 * written with a single write(2) on an O_APPEND descriptor, so lines from
 * several libraries, threads and processes never interleave.
 *
 * Strings are JSON-escaped; bytes that are not valid UTF-8 become U+FFFD and
 * strings are cut (at a character boundary) after SIM_TRUTH_MAX_STR bytes.
 *
 * Also here: a tiny registry of live handles (sim_live_*), so a library can
 * tell a handle it made from a stale or made-up pointer without touching it.
 *
 * Including files must define _GNU_SOURCE before any system header.
 */
#ifndef SIM_TRUTH_H
#define SIM_TRUTH_H

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define SIM_TRUTH_MAX_STR 4096

static pthread_once_t sim_truth_once = PTHREAD_ONCE_INIT;
static int sim_truth_fd = -1;
static atomic_uint sim_truth_corr;

static void sim_truth_open(void) {
    const char *p = getenv("HGGC_SIM_GROUND_TRUTH");
    if (p && *p)
        sim_truth_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

static inline uint64_t sim_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int sim_gettid(void) { return (int)syscall(SYS_gettid); }

/* ------------------------------------------------------------ JSON buffer */

typedef struct sim_json {
    char *p;
    size_t len, cap;
} sim_json;

static inline int sim_json_reserve(sim_json *j, size_t more) {
    if (j->len + more + 1 <= j->cap)
        return 1;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + more + 1)
        cap *= 2;
    char *p = realloc(j->p, cap);
    if (!p)
        return 0;
    j->p = p;
    j->cap = cap;
    return 1;
}

static inline void sim_json_putc(sim_json *j, char c) {
    if (sim_json_reserve(j, 1)) {
        j->p[j->len++] = c;
        j->p[j->len] = 0;
    }
}

/* Appends printf output as is (the caller makes it valid JSON). */
static inline void sim_json_raw(sim_json *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0 || !sim_json_reserve(j, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(j->p + j->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    j->len += (size_t)n;
}

static inline void sim_json_key(sim_json *j, const char *key) { sim_json_raw(j, ",\"%s\":", key); }

static inline void sim_json_int(sim_json *j, const char *key, long long v) {
    sim_json_raw(j, ",\"%s\":%lld", key, v);
}

static inline void sim_json_uint(sim_json *j, const char *key, unsigned long long v) {
    sim_json_raw(j, ",\"%s\":%llu", key, v);
}

/* A pointer as its address (a JSON number; 0 for NULL). */
static inline void sim_json_ptr(sim_json *j, const char *key, const void *p) {
    sim_json_raw(j, ",\"%s\":%" PRIuPTR, key, (uintptr_t)p);
}

/* A double with full precision; null when it is not finite (JSON has no NaN). */
static inline void sim_json_double(sim_json *j, const char *key, double v) {
    if (isfinite(v))
        sim_json_raw(j, ",\"%s\":%.17g", key, v);
    else
        sim_json_raw(j, ",\"%s\":null", key);
}

static inline void sim_json_dims(sim_json *j, const char *key, const int *v, int n) {
    sim_json_raw(j, ",\"%s\":[", key);
    for (int i = 0; i < n; i++)
        sim_json_raw(j, i ? ",%d" : "%d", v[i]);
    sim_json_putc(j, ']');
}

/* Appends one code point, escaped as JSON wants it. */
static inline void sim_json_cp(sim_json *j, uint32_t c) {
    char b[8];
    size_t n = 0;
    if (c == '"' || c == '\\') {
        b[n++] = '\\';
        b[n++] = (char)c;
    } else if (c < 0x20) {
        const char *esc = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (esc) {
            memcpy(b, esc, 2);
            n = 2;
        } else {
            snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
            n = 6;
        }
    } else if (c < 0x80) {
        b[n++] = (char)c;
    } else if (c < 0x800) {
        b[n++] = (char)(0xc0 | (c >> 6));
        b[n++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        b[n++] = (char)(0xe0 | (c >> 12));
        b[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[n++] = (char)(0x80 | (c & 0x3f));
    } else {
        b[n++] = (char)(0xf0 | (c >> 18));
        b[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
        b[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[n++] = (char)(0x80 | (c & 0x3f));
    }
    if (sim_json_reserve(j, n)) {
        memcpy(j->p + j->len, b, n);
        j->len += n;
        j->p[j->len] = 0;
    }
}

/* Decodes one UTF-8 sequence at s (with `left` bytes); returns its length, or
 * 0 when it is not valid (overlong, surrogate, out of range, cut short). */
static inline size_t sim_utf8_decode(const unsigned char *s, size_t left, uint32_t *cp) {
    unsigned char c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* A string (JSON-escaped, UTF-8 checked); null for a NULL pointer. */
static inline void sim_json_str(sim_json *j, const char *key, const char *s) {
    if (!s) {
        sim_json_raw(j, ",\"%s\":null", key);
        return;
    }
    sim_json_raw(j, ",\"%s\":\"", key);
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), i = 0;
    while (i < len && i < SIM_TRUTH_MAX_STR) {
        uint32_t cp;
        size_t n = sim_utf8_decode(u + i, len - i, &cp);
        if (n == 0) {
            cp = 0xfffd;
            n = 1;
        }
        sim_json_cp(j, cp);
        i += n;
    }
    sim_json_putc(j, '"');
}

/* A wide string as UTF-8 in a new malloc'd buffer (NULL stays NULL); wide
 * characters that are not Unicode scalar values become U+FFFD. */
static inline char *sim_utf8_from_wide(const wchar_t *w) {
    if (!w)
        return NULL;
    sim_json b = {0};
    sim_json_reserve(&b, 1);
    for (; *w && b.len < SIM_TRUTH_MAX_STR; w++) {
        uint32_t c = (uint32_t)*w;
        if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            c = 0xfffd;
        if (c == '"' || c == '\\' || c < 0x20) {
            /* sim_json_cp would escape these; keep them raw here. */
            sim_json_putc(&b, (char)c);
            continue;
        }
        sim_json_cp(&b, c);
    }
    if (!b.p)
        return calloc(1, 1);
    return b.p;
}

static inline void sim_json_wstr(sim_json *j, const char *key, const wchar_t *w) {
    char *s = sim_utf8_from_wide(w);
    sim_json_str(j, key, s);
    free(s);
}

/* ------------------------------------------------------------- API calls */

typedef struct sim_call {
    const char *api;
    uint32_t corr;
    uint64_t start;
} sim_call;

static inline sim_call sim_enter(const char *api) {
    pthread_once(&sim_truth_once, sim_truth_open);
    sim_call c = {api, atomic_fetch_add(&sim_truth_corr, 1) + 1, sim_mono_ns()};
    return c;
}

/* Whether ground truth is being written (to skip building costly fields). */
static inline int sim_truth_on(void) { return sim_truth_fd >= 0; }

/* Ends a call: writes its line with the members in `fields` (each begins with
 * a comma, as the sim_json_* helpers write them; NULL for none), frees them. */
static inline void sim_exit(sim_call c, long long ret, sim_json *fields) {
    uint64_t end = sim_mono_ns();
    if (sim_truth_fd >= 0) {
        sim_json line = {0};
        sim_json_raw(&line,
                     "{\"api\":\"%s\",\"pid\":%d,\"tid\":%d,\"ret\":%lld,\"corr\":%u,\"start\":%" PRIu64
                     ",\"end\":%" PRIu64,
                     c.api, (int)getpid(), sim_gettid(), ret, c.corr, c.start, end);
        if (fields && fields->p && sim_json_reserve(&line, fields->len)) {
            memcpy(line.p + line.len, fields->p, fields->len);
            line.len += fields->len;
            line.p[line.len] = 0;
        }
        sim_json_raw(&line, "}\n");
        size_t off = 0;
        while (line.p && off < line.len) {
            ssize_t w = write(sim_truth_fd, line.p + off, line.len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        free(line.p);
    }
    if (fields) {
        free(fields->p);
        fields->p = NULL;
        fields->len = fields->cap = 0;
    }
}

/* ------------------------------------------------------ live-handle registry */

typedef struct sim_live {
    pthread_mutex_t lock;
    const void **items;
    size_t n, cap;
} sim_live;

#define SIM_LIVE_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

static inline int sim_live_add(sim_live *l, const void *p) {
    pthread_mutex_lock(&l->lock);
    int ok = 1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        const void **items = realloc(l->items, cap * sizeof *items);
        if (items) {
            l->items = items;
            l->cap = cap;
        } else {
            ok = 0;
        }
    }
    if (ok)
        l->items[l->n++] = p;
    pthread_mutex_unlock(&l->lock);
    return ok;
}

static inline int sim_live_has(sim_live *l, const void *p) {
    int found = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; p && i < l->n && !found; i++)
        found = l->items[i] == p;
    pthread_mutex_unlock(&l->lock);
    return found;
}

/* Removes p; returns whether it was there. */
static inline int sim_live_remove(sim_live *l, const void *p) {
    int found = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; p && i < l->n; i++)
        if (l->items[i] == p) {
            l->items[i] = l->items[--l->n];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&l->lock);
    return found;
}

#endif
