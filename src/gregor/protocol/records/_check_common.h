/* The produce path's record walk for the common batch, in C (``_scan.check_records_c`` calls it
 * first).
 *
 * Why C: the leader walks every record of every produced batch (as Kafka's LogValidator does),
 * and the Cython walk (``common_record``, general enough to fill a ``Fields`` for the readers)
 * costs about 150 instructions a record, a third of a 1 KB append. This loop knows only what
 * the check needs (each record's length, timestamp delta, offset delta, whether its key is
 * null, and that it has no headers), keeps everything in registers, and reads each varint of
 * one or two bytes inline.
 *
 * Theory of operation. One pass over ``count`` records. A record is "common" when its length,
 * timestamp delta and offset delta are varints of at most three bytes, its key and value
 * lengths of at most two, it has no headers, and it ends exactly where its length says. Any
 * other shape, valid or not, and any timestamp that overflows 64 bits, returns 0 at once: the
 * caller then walks the batch again with the general code, which accepts it or raises Kafka's
 * error for it. So this function never refuses anything itself, and what it accepts the general
 * walk accepts with the same facts (``tests/protocol`` compare the two on generated batches).
 * The facts: the smallest timestamp other than -1 (else -1), the largest (at least -1), the
 * number of null keys, the first record whose offset delta is not its index (else -1).
 */
#ifndef GREGOR_CHECK_COMMON_H
#define GREGOR_CHECK_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <Python.h>

/* A varint of one to three bytes ending at or before ``lim`` into ``out``; else return 0. */
#define GREGOR_VARINT3(out, lim)                                              \
    do {                                                                      \
        uint64_t b0_, b1_, b2_;                                               \
        if (k >= (lim)) return 0;                                             \
        b0_ = p[k];                                                           \
        if (b0_ < 0x80) { (out) = b0_; k += 1; break; }                       \
        if (k + 1 >= (lim)) return 0;                                         \
        b1_ = p[k + 1];                                                       \
        if (b1_ < 0x80) { (out) = (b0_ & 0x7F) | (b1_ << 7); k += 2; break; } \
        if (k + 2 >= (lim)) return 0;                                         \
        b2_ = p[k + 2];                                                       \
        if (b2_ >= 0x80) return 0;                                            \
        (out) = (b0_ & 0x7F) | ((b1_ & 0x7F) << 7) | (b2_ << 14);             \
        k += 3;                                                               \
    } while (0)

static int gregor_check_common(const unsigned char *p, Py_ssize_t end, Py_ssize_t count,
                               int64_t base_ts, int64_t *min_ts, int64_t *max_ts,
                               Py_ssize_t *keyless, Py_ssize_t *bad_delta)
{
    Py_ssize_t k = 0, i, rec_end, nulls = 0, bad = -1;
    /* Timestamps are kept as deltas and the base added once at the end: base + delta is
     * monotonic in delta, so when the extremes fit 64 bits every record's does. A record whose
     * timestamp is -1 (delta == ~base) counts for the largest but not the smallest. */
    int64_t lo = INT64_MAX, hi = INT64_MIN, td, minus_one = ~base_ts;
    uint64_t n, twice_i = 0;
    for (i = 0; i < count; i++, twice_i += 2) {
        GREGOR_VARINT3(n, end);
        if (n & 1) return 0;
        n >>= 1;
        if (n < 6 || n > (uint64_t)(end - k)) return 0;
        rec_end = k + (Py_ssize_t)n;
        k += 1; /* attributes */
        GREGOR_VARINT3(n, rec_end);
        td = (int64_t)(n >> 1) ^ -(int64_t)(n & 1);
        if (td > hi) hi = td;
        if (td < lo && td != minus_one) lo = td;
        GREGOR_VARINT3(n, rec_end);
        if (n != twice_i && bad < 0) bad = i; /* the offset delta's zigzag is 2 * index */
        /* the key: null (-1) or a length within the record */
        GREGOR_VARINT3(n, rec_end);
        if (n & 1) {
            if (n != 1) return 0;
            nulls++;
        } else if ((n >>= 1) > (uint64_t)(rec_end - k)) {
            return 0;
        } else {
            k += (Py_ssize_t)n;
        }
        GREGOR_VARINT3(n, rec_end);
        if (n & 1) {
            if (n != 1) return 0;
        } else if ((n >>= 1) > (uint64_t)(rec_end - k)) {
            return 0;
        } else {
            k += (Py_ssize_t)n;
        }
        if (k + 1 != rec_end || p[k] != 0) return 0; /* no headers, nothing after them */
        k = rec_end;
    }
    if (k != end) return 0;
    if (count > 0) {
        if (__builtin_add_overflow(base_ts, hi, &hi)) return 0;
        if (lo != INT64_MAX && __builtin_add_overflow(base_ts, lo, &lo)) return 0;
    }
    *min_ts = (count > 0 && lo != INT64_MAX) ? lo : -1;
    *max_ts = (count > 0 && hi > -1) ? hi : -1; /* the largest is at least -1 */
    *keyless = nulls;
    *bad_delta = bad;
    return 1;
}

#undef GREGOR_VARINT3
#endif
