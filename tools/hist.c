#include "hist.h"

#include <string.h>

static unsigned int bucket_index(uint64_t v)
{
    if (v < HIST_SUB_BUCKETS)
        return (unsigned int) v;
    unsigned int magnitude = 63 - __builtin_clzll(v);
    unsigned int shift = magnitude - HIST_SUB_BITS;
    unsigned int sub = (unsigned int) (v >> shift) - HIST_SUB_BUCKETS;
    return HIST_SUB_BUCKETS + shift * HIST_SUB_BUCKETS + sub;
}

/* The highest value that lands in bucket i. */
static uint64_t bucket_highest(unsigned int i)
{
    if (i < HIST_SUB_BUCKETS)
        return i;
    unsigned int shift = (i - HIST_SUB_BUCKETS) / HIST_SUB_BUCKETS;
    uint64_t sub = (i - HIST_SUB_BUCKETS) % HIST_SUB_BUCKETS;
    uint64_t low = (HIST_SUB_BUCKETS + sub) << shift;
    return low + ((1ull << shift) - 1);
}

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

void hist_record(struct hist *h, uint64_t value)
{
    h->buckets[bucket_index(value)]++;
    h->count++;
    h->sum += value;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
}

void hist_merge(struct hist *into, const struct hist *from)
{
    if (!from->count)
        return;
    for (unsigned int i = 0; i < HIST_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    into->sum += from->sum;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    if (!h->count)
        return 0;
    if (p <= 0)
        return h->min;
    long double exact_rank = (long double) p / 100.0L * h->count;
    uint64_t rank = (uint64_t) exact_rank;
    if ((long double) rank < exact_rank)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank >= h->count)
        return h->max;
    uint64_t seen = 0;
    for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = bucket_highest(i);
            if (v > h->max)
                v = h->max;
            if (v < h->min)
                v = h->min;
            return v;
        }
    }
    return h->max;
}

double hist_mean(const struct hist *h)
{
    return h->count ? (double) (h->sum / h->count) : 0.0;
}
