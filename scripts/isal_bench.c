/* ISA-L baseline for scripts/bench-parity.sh, measured exactly like
 * hetraid-parity-bench:
 *   isal_bench xor|pq|recover|pq-update|memcpy|crc32c K CHUNK WS MILLIS -> "GB/s"
 * GB/s counts the K data blocks of a stripe per step (crc32c: crc32_iscsi over K
 * blocks of CHUNK bytes), except pq-update: one data block per step.
 * recover: data blocks 0 and 1 of a K+2 row rebuilt from the other K blocks with
 *   ec_encode_data and the RAID-6 decode matrix (ISA-L's GF is 0x11d too).
 * pq-update: the read-modify-write of data block 1, ec_encode_data_update of its
 *   old and then its new contents into P and Q (ISA-L has no fused delta). */
#include <isa-l/crc.h>
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    int rs = strcmp(mode, "pq") == 0 || strcmp(mode, "recover") == 0 || strcmp(mode, "pq-update") == 0;
    int parity = rs ? 2 : strcmp(mode, "crc32c") == 0 ? 0 : 1;
    /* RAID-6 coefficients: P row all 1, Q row g^i; the decode matrix for
     * losing data 0 and 1 (inputs: data 2..K-1, P, Q). */
    unsigned char enc[2 * 64], dec[2 * 64], enc_tbls[32 * 2 * 64], dec_tbls[32 * 2 * 64];
    unsigned char g = 1;
    for (int i = 0; i < k; i++) {
        enc[i] = 1;
        enc[k + i] = g;
        g = gf_mul(g, 2);
    }
    ec_init_tables(k, 2, enc, enc_tbls);
    if (strcmp(mode, "recover") == 0) {
        unsigned char inv3 = gf_inv(3), gi = 4; /* g^2 */
        for (int i = 2; i < k; i++) {
            unsigned char d1 = gf_mul(inv3, 1 ^ gi);
            dec[i - 2] = 1 ^ d1;  /* D0 */
            dec[k + i - 2] = d1;  /* D1 */
            gi = gf_mul(gi, 2);
        }
        dec[k - 2] = 1 ^ inv3;    /* P into D0 */
        dec[k - 1] = inv3;        /* Q into D0 */
        dec[2 * k - 2] = inv3;    /* P into D1 */
        dec[2 * k - 1] = inv3;    /* Q into D1 */
        ec_init_tables(k, 2, dec, dec_tbls);
    }
    volatile unsigned int sink = 0;
    size_t per = (size_t)(k + parity) * chunk;
    size_t stripes = ws / per ? ws / per : 1;
    unsigned char *buf;
    /* 2 MiB huge pages, as the Rust harness: the same physical layout per run. */
    size_t huge = 2u << 20, bytes = (stripes * per + huge - 1) / huge * huge;
    if (posix_memalign((void **)&buf, huge, bytes)) return 1;
    madvise(buf, bytes, MADV_HUGEPAGE);
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
            } else if (strcmp(mode, "recover") == 0) {
                unsigned char *in[64], *out[2] = {ptrs[0], ptrs[1]};
                for (int i = 2; i < k + 2; i++) in[i - 2] = ptrs[i];
                ec_encode_data((int)chunk, k, 2, dec_tbls, in, out);
            } else if (strcmp(mode, "pq-update") == 0) {
                /* old = block 0's bytes, new = block 2's, into P and Q of block 1. */
                unsigned char *par[2] = {ptrs[k], ptrs[k + 1]};
                ec_encode_data_update((int)chunk, k, 2, 1, enc_tbls, ptrs[0], par);
                ec_encode_data_update((int)chunk, k, 2, 1, enc_tbls, ptrs[2 % k], par);
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
    double per_op = strcmp(mode, "pq-update") == 0 ? (double)chunk : (double)(k * chunk);
    printf("%.2f\n", ops * per_op / el / 1e9);
    return 0;
}
