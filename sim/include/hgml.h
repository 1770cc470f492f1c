/*
 * hgml: the simulated runtime's device metrics, as a monitoring process
 * reads them (the role NVML plays for NVIDIA devices).
 *
 * Every process using the simulated runtime is its own "driver": for each of
 * its devices it keeps one shared-memory file, /dev/shm/hgml-<pid>-<device>,
 * holding one struct hgml_shared, created (0644, never over an existing
 * file) when the runtime starts and removed when the process exits. A reader
 * checks that the file is a regular file of exactly this size, owned by the
 * process's own user, and that the process runs; it never writes to it.
 *
 * The writer updates the counters inside a sequence lock: seq_begin is made
 * odd, the fields change, then seq_begin is made even again and copied to
 * seq_end. A copy whose two counters differ, or are odd, was torn: read again.
 */
#ifndef HGML_H
#define HGML_H

#include <stdint.h>

#define HGML_MAGIC 0x4c4d4748u /* "HGML" */
#define HGML_VERSION 1

struct hgml_shared {
    uint32_t magic;
    uint32_t version;
    uint64_t seq_begin;
    uint32_t device;
    uint32_t pid;
    /* Time (CLOCK_MONOTONIC ns) during which at least one stream of the
     * device ran an operation, up to busy_since while busy is set: the
     * utilisation over an interval is the growth of busy time over it. */
    uint64_t busy_ns;
    uint64_t busy_since;
    uint32_t busy;      /* operations running now, over all streams */
    uint32_t sm_clock_mhz; /* 1500 while busy, 300 idle */
    uint64_t power_mw;  /* 300000 while busy, 50000 idle */
    uint64_t memory_used;  /* bytes of hggcMalloc not freed yet */
    uint64_t memory_total;
    uint64_t seq_end;
};

#endif
