/* SDT markers (provider `usdt_args`) whose arguments take every operand form
 * a compiler gives them: constants of every size and sign, registers of
 * every width, memory at a register plus a displacement, indexed memory
 * (base + index * scale + displacement), and indexed memory without a base
 * (an array at a fixed address). Each marker fires once; the program prints
 * its pid and, per marker, the values it passed, in their C types:
 *
 *   pid 1234
 *   consts 240 -5 61936 -3600 4092785136 -202182160
 *   ...
 *
 * Built with -O1 (tests/src/workloads.rs): the functions' parameters stay in
 * their registers, arrays are read in place (the functions do nothing else,
 * main prints what they were given). The test checks the notes'
 * forms with readelf before trusting the values. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sdt.h>
#include <unistd.h>

/* An array at a fixed address: indexed with no base register. */
#define FIXED ((int64_t *)0x10000000)

/* Registers: `1@%dil -1@%sil 2@%dx -2@%cx 4@%r8d -4@%r9d`. */
__attribute__((noipa)) void regs(uint8_t a, int8_t b, uint16_t c, int16_t d, uint32_t e,
                                    int32_t f) {
    STAP_PROBE6(usdt_args, regs, a, b, c, d, e, f);
}

/* Whole registers, one a string: `8@%rdi -8@%rsi 8@%rdx`. */
__attribute__((noipa)) void regs64(uint64_t a, int64_t b, const char *s) {
    STAP_PROBE3(usdt_args, regs64, a, b, s);
}

/* Memory at a register, with and without a displacement:
 * `1@(%rdi) -1@(%rsi) 2@2(%rdx) -2@4(%rcx) 4@12(%r8) -4@(%r9)`. */
__attribute__((noipa)) void mem(const uint8_t *a, const int8_t *b, const uint16_t *c,
                                   const int16_t *d, const uint32_t *e, const int32_t *f) {
    STAP_PROBE6(usdt_args, mem, *a, *b, c[1], d[2], e[3], *f);
}

/* Indexed memory: `-8@(%rdi,%rsi,8) -4@8(%rdx,%rsi,4) 2@-2(%rcx,%rsi,2)
 * 1@1(%r8,%rsi) 8@(%r9,%rsi,8)` or near. */
__attribute__((noipa)) void indexed(const int64_t *a, long i, const int32_t *b,
                                       const uint16_t *c, const uint8_t *d, const uint64_t *e) {
    STAP_PROBE5(usdt_args, indexed, a[i], b[i + 2], c[i - 1], d[i + 1], e[i]);
}

/* Indexed memory without a base: `-8@268435456(,%rdi,8)`. */
__attribute__((noipa)) void nobase(long i) {
    STAP_PROBE2(usdt_args, nobase, FIXED[i], FIXED[i + 1]);
}

int main(int argc, char **argv) {
    /* Run-time values, so that none of the non-constant markers folds. */
    long k = argc > 1 ? atol(argv[1]) : 3;
    printf("pid %d\n", (int)getpid());

    /* `1@$-16 -1@$-5 2@$-3600 -2@$-3600 4@$-202182160 -4@$-202182160`. */
    STAP_PROBE6(usdt_args, consts, (uint8_t)0xf0, (int8_t)-5, (uint16_t)0xf1f0, (int16_t)-3600,
                (uint32_t)0xf3f2f1f0, (int32_t)-202182160);
    printf("consts %u %d %u %d %u %d\n", (uint8_t)0xf0, (int8_t)-5, (uint16_t)0xf1f0,
           (int16_t)-3600, (uint32_t)0xf3f2f1f0, (int32_t)-202182160);
    /* `8@$-202182160 -8@$-3600 8@$-9223372036854775808 -8@$1311768467463790320
     * 4@$5 -1@$127`. */
    STAP_PROBE6(usdt_args, consts64, (uint64_t)0xfffffffff3f2f1f0ull, (int64_t)-3600,
                (uint64_t)0x8000000000000000ull, (int64_t)0x123456789abcdef0ll, (uint32_t)5,
                (int8_t)127);
    printf("consts64 %" PRIu64 " %" PRId64 " %" PRIu64 " %" PRId64 " %u %d\n",
           (uint64_t)0xfffffffff3f2f1f0ull, (int64_t)-3600, (uint64_t)0x8000000000000000ull,
           (int64_t)0x123456789abcdef0ll, 5u, 127);

    uint8_t ra = (uint8_t)(0xed + k);
    int8_t rb = (int8_t)(-2 - k);
    uint16_t rc = (uint16_t)(0xf1ed + k);
    int16_t rd = (int16_t)(-3597 - k);
    uint32_t re = (uint32_t)(0xf3f2f1ed + k);
    int32_t rf = (int32_t)(-202182157 - k);
    regs(ra, rb, rc, rd, re, rf);
    printf("regs %u %d %u %d %u %d\n", ra, rb, rc, rd, re, rf);
    uint64_t wa = 0xfffffffffffffff0ull + (uint64_t)k;
    int64_t wb = -9000000000000000000ll - k;
    regs64(wa, wb, "usdt-string");
    printf("regs64 %" PRIu64 " %" PRId64 " %s\n", wa, wb, "usdt-string");

    uint8_t u8[4] = {0xf0 + (uint8_t)k, 1, 2, 3};
    int8_t i8[4] = {(int8_t)(-5 - k), 1, 2, 3};
    uint16_t u16[4] = {1, (uint16_t)(0xf1f0 + k), 2, 3};
    int16_t i16[4] = {1, 2, (int16_t)(-3600 - k), 3};
    uint32_t u32[4] = {1, 2, 3, (uint32_t)(0xf3f2f1f0 + k)};
    int32_t i32[4] = {(int32_t)(-202182160 - k), 1, 2, 3};
    mem(u8, i8, u16, i16, u32, i32);
    printf("mem %u %d %u %d %u %d\n", u8[0], i8[0], u16[1], i16[2], u32[3], i32[0]);

    int64_t a[8];
    int32_t b[8];
    uint16_t c[8];
    uint8_t d[8];
    uint64_t e[8];
    for (int j = 0; j < 8; j++) {
        a[j] = -1000 * j - 7;
        b[j] = 7 * j - 30;
        c[j] = (uint16_t)(0xfff0 + j);
        d[j] = (uint8_t)(0xf8 + j);
        e[j] = 0xfffffffffffff000ull + (uint64_t)j;
    }
    indexed(a, k, b, c, d, e);
    printf("indexed %" PRId64 " %d %u %u %" PRIu64 "\n", a[k], b[k + 2], c[k - 1], d[k + 1], e[k]);

    if (mmap(FIXED, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
             -1, 0) != FIXED) {
        perror("mmap at 0x10000000");
        return 1;
    }
    FIXED[k] = -123456789012ll;
    FIXED[k + 1] = 0x7fffffffffffff00ll;
    nobase(k);
    printf("nobase %" PRId64 " %" PRId64 "\n", FIXED[k], FIXED[k + 1]);
    return 0;
}
