/* Log-bucket latency histogram (HdrHistogram-like).
 *
 * Values are unsigned 64-bit (nanoseconds in every tool). Values below
 * HIST_SUB_BUCKETS are stored exactly; above, each power of two is split into
 * HIST_SUB_BUCKETS equal sub-buckets, so a reported percentile is at most
 * 1/HIST_SUB_BUCKETS (0.78%) above the true value. min, max, count and sum are
 * exact. One histogram per thread; merge them after the threads are joined.
 */
#pragma once

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB_BUCKETS (1u << HIST_SUB_BITS)
/* shift 0..(63 - HIST_SUB_BITS), plus the exact range below HIST_SUB_BUCKETS */
#define HIST_BUCKETS (HIST_SUB_BUCKETS * (64 - HIST_SUB_BITS + 1))

struct hist {
    uint64_t count;
    uint64_t min;
    uint64_t max;
    long double sum;
    uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t value);
void hist_merge(struct hist *into, const struct hist *from);
/* The value at percentile p (0..100): the highest value equivalent to the
 * bucket holding the ceil(p% * count)-th smallest sample, clamped to max.
 * 0 when the histogram is empty. */
uint64_t hist_percentile(const struct hist *h, double p);
double hist_mean(const struct hist *h);
