/* ISA-L baseline for scripts/bench-parity.sh, measured exactly like
 * hetraid-parity-bench: isal_bench xor|pq|memcpy|crc32c K CHUNK WS MILLIS -> "GB/s"
 * (crc32c: crc32_iscsi over K blocks of CHUNK bytes per step) */
#include <isa-l/crc.h>
#include <isa-l/raid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: isal_bench xor|pq|memcpy|crc32c K CHUNK WS MILLIS\n");
        return 2;
    }
    const char *mode = argv[1];
    int k = atoi(argv[2]);
    size_t chunk = strtoull(argv[3], 0, 10), ws = strtoull(argv[4], 0, 10);
    double secs = atof(argv[5]) / 1000.0;
    int parity = strcmp(mode, "pq") == 0 ? 2 : strcmp(mode, "crc32c") == 0 ? 0 : 1;
    volatile unsigned int sink = 0;
    size_t per = (size_t)(k + parity) * chunk;
    size_t stripes = ws / per ? ws / per : 1;
    unsigned char *buf;
    if (posix_memalign((void **)&buf, 4096, stripes * per)) return 1;
    for (size_t i = 0; i < stripes * per; i++) buf[i] = (unsigned char)((i * 2654435761u) >> 8);
    void *ptrs[64];
    unsigned long long ops = 0;
    size_t s = 0;
    double start = now();
    while (now() - start < secs) {
        for (int r = 0; r < 16; r++) {
            unsigned char *st = buf + s * per;
            for (int i = 0; i < k + parity; i++) ptrs[i] = st + i * chunk;
            if (strcmp(mode, "xor") == 0) {
                xor_gen(k + 1, (int)chunk, ptrs);
            } else if (strcmp(mode, "pq") == 0) {
                pq_gen(k + 2, (int)chunk, ptrs);
            } else if (strcmp(mode, "crc32c") == 0) {
                for (int i = 0; i < k; i++) sink ^= crc32_iscsi(ptrs[i], (int)chunk, 0xffffffffu);
            } else {
                for (int i = 0; i < k; i++) memcpy(ptrs[k], ptrs[i], chunk);
            }
            __asm__ volatile("" ::: "memory");
            ops++;
            s = (s + 1) % stripes;
        }
    }
    double el = now() - start;
    printf("%.2f\n", ops * (double)(k * chunk) / el / 1e9);
    return 0;
}
