/* CRC32C (Castagnoli) with the SSE4.2 crc32 instruction, for the log's compiled append.
 *
 * Why not the crc32c package here: its own code is as fast, but a call through its Python API
 * (argument parsing, a memoryview of the batch) costs about as much as the CRC of a 1 KB batch
 * itself, once per produced batch. The rest of gregor calls the package; the append's tests
 * check this one against it.
 *
 * Theory of operation. The crc32 instruction has a latency of three cycles and a throughput of
 * one, so one stream of 8-byte steps runs at a third of the speed the unit allows. Data is
 * therefore taken in rounds of three interleaved streams of B bytes each: the first continues
 * the running CRC, the other two start from zero, and the three are joined with the CRC's
 * linearity: crc(A B C) = Z(Z(crc_A) ^ crc_B) ^ crc_C, where Z(x) is the CRC register x carried
 * through B zero bytes. Z is linear over GF(2), so it is four table lookups, one per byte of x;
 * the tables are filled once, at first use, by running the instruction itself over zeros from
 * each of the 32 one-bit registers. Rounds of 3 * 512 bytes take the bulk, rounds of 3 * 128
 * bytes what is left of it (a 1 KB batch is two of those), and the last bytes (under 384) go
 * one stream, 8 bytes then single bytes.
 *
 * gregor_crc32c_available() says whether the CPU has the instruction (x86-64 with SSE4.2);
 * when it does not, callers use the crc32c package instead.
 */
#ifndef GREGOR_CRC32C_H
#define GREGOR_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GREGOR_CRC32C_X86 1
#include <nmmintrin.h>
#endif

#define GREGOR_CRC32C_LONG 512
#define GREGOR_CRC32C_SHORT 128

static int gregor_crc32c_ready = 0;  /* 1: tables filled; -1: no instruction */
/* Z for LONG and SHORT zero bytes, one table per byte of the register */
static uint32_t gregor_crc32c_zeros_long[4][256];
static uint32_t gregor_crc32c_zeros_short[4][256];

#ifdef GREGOR_CRC32C_X86

__attribute__((target("sse4.2")))
static uint32_t gregor_crc32c_stream(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    uint64_t word;
    while (n >= 8) {
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--) {
        crc = _mm_crc32_u8(crc, *p++);
    }
    return crc;
}

static inline uint32_t gregor_crc32c_shift(uint32_t (*zeros)[256], uint32_t x)
{
    return zeros[0][x & 0xff] ^ zeros[1][(x >> 8) & 0xff] ^ zeros[2][(x >> 16) & 0xff]
        ^ zeros[3][x >> 24];
}

/* Fill the four tables of Z for `len` zero bytes. */
static void gregor_crc32c_fill(uint32_t (*zeros)[256], size_t len)
{
    static const uint8_t none[GREGOR_CRC32C_LONG] = {0};
    uint32_t bit_image[32];
    int i, j, b;
    for (i = 0; i < 32; i++) {
        bit_image[i] = gregor_crc32c_stream(1u << i, none, len);
    }
    for (j = 0; j < 4; j++) {
        for (b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (i = 0; i < 8; i++) {
                if (b & (1 << i)) {
                    v ^= bit_image[8 * j + i];
                }
            }
            zeros[j][b] = v;
        }
    }
}

/* Rounds of three interleaved streams of `block` bytes while at least 3 * block are left;
 * `zeros` are Z's tables for `block` bytes. Returns the CRC register; *pp and *pn advance. */
__attribute__((target("sse4.2"), always_inline))
static inline uint32_t gregor_crc32c_rounds(uint32_t crc, const uint8_t **pp, size_t *pn,
                                            size_t block, uint32_t (*zeros)[256])
{
    const uint8_t *p = *pp;
    size_t n = *pn;
    uint64_t c0, c1, c2, w0, w1, w2;
    size_t i;
    while (n >= 3 * block) {
        c0 = crc;
        c1 = 0;
        c2 = 0;
        for (i = 0; i < block; i += 8) {
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + block + i, 8);
            memcpy(&w2, p + 2 * block + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        crc = gregor_crc32c_shift(zeros, gregor_crc32c_shift(zeros, (uint32_t)c0) ^ (uint32_t)c1)
            ^ (uint32_t)c2;
        p += 3 * block;
        n -= 3 * block;
    }
    *pp = p;
    *pn = n;
    return crc;
}

__attribute__((target("sse4.2")))
static uint32_t gregor_crc32c_blocks(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = gregor_crc32c_rounds(crc, &p, &n, GREGOR_CRC32C_LONG, gregor_crc32c_zeros_long);
    crc = gregor_crc32c_rounds(crc, &p, &n, GREGOR_CRC32C_SHORT, gregor_crc32c_zeros_short);
    return gregor_crc32c_stream(crc, p, n);
}

static int gregor_crc32c_available(void)
{
    if (!gregor_crc32c_ready) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("sse4.2")) {
            gregor_crc32c_fill(gregor_crc32c_zeros_long, GREGOR_CRC32C_LONG);
            gregor_crc32c_fill(gregor_crc32c_zeros_short, GREGOR_CRC32C_SHORT);
            gregor_crc32c_ready = 1;
        } else {
            gregor_crc32c_ready = -1;
        }
    }
    return gregor_crc32c_ready == 1;
}

/* The CRC32C of n bytes (initial value 0, as the crc32c package's crc32c(data)). Only after
 * gregor_crc32c_available() returned 1. */
static uint32_t gregor_crc32c(const uint8_t *p, size_t n)
{
    return ~gregor_crc32c_blocks(0xffffffffu, p, n);
}

#else /* not x86-64: no instruction; callers use the crc32c package */

static int gregor_crc32c_available(void)
{
    return 0;
}

static uint32_t gregor_crc32c(const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 0;
}

#endif

#endif
