// hot SECONDS: a hot loop of inlined templates and inline functions; SALT changes the code.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <ctime>
#include <vector>
#ifndef SALT
#define SALT 0x9E3779B97F4A7C15ull
#endif
namespace work {
template <typename T>
static inline T mix(T x, T k) {
    x ^= x >> 13;
    x *= k;
    return x ^ (x >> 7);
}
static inline uint64_t step(uint64_t acc, uint64_t i) {
    return mix<uint64_t>(acc + i, SALT);
}
template <int N>
struct Kernel {
    static uint64_t run(const std::vector<uint64_t>& v, uint64_t seed) {
        uint64_t acc = seed;
        for (size_t i = 0; i < v.size(); ++i) acc = step(acc, v[i] * N);
        return acc;
    }
};
}  // namespace work
__attribute__((noinline)) uint64_t hot_loop(const std::vector<uint64_t>& v, int rounds) {
    uint64_t acc = 1;
    for (int r = 0; r < rounds; ++r) {
        acc = work::Kernel<3>::run(v, acc);
        acc = work::Kernel<5>::run(v, acc);
    }
    return acc;
}
int main(int argc, char** argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    std::vector<uint64_t> v(4096);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i * 2654435761u;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t acc = 0;
    long rounds = 0;
    do {
        acc += hot_loop(v, 16);
        ++rounds;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    printf("rounds=%ld acc=%llu\n", rounds, (unsigned long long)acc);
    return 0;
}
