/* Unit test of the log-bucket histogram: exact small values, the precision
 * bound on large ones, percentile ranks, merging. */
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

#include "hist.h"



int main(void)
{
    static struct hist h, other;

    hist_init(&h);
    CHECK(hist_percentile(&h, 50) == 0);
    for (uint64_t v = 1; v <= 100; v++)
        hist_record(&h, v);
    CHECK(h.count == 100 && h.min == 1 && h.max == 100);
    CHECK(hist_percentile(&h, 50) == 50); /* exact below HIST_SUB_BUCKETS */
    CHECK(hist_percentile(&h, 99) == 99);
    CHECK(hist_percentile(&h, 100) == 100);
    CHECK(hist_percentile(&h, 0) == 1);
    CHECK(hist_mean(&h) > 50.49 && hist_mean(&h) < 50.51);

    /* Large values: reported value within 1/HIST_SUB_BUCKETS above the truth.
     */
    for (uint64_t v = 200; v < (1ull << 62); v = v * 3 + 7) {
        struct hist *one = &other;
        hist_init(one);
        hist_record(one, v);
        hist_record(one, UINT64_MAX / 2);
        uint64_t p = hist_percentile(one, 50);
        CHECK(p >= v);
        CHECK((double) (p - v) <= (double) v / HIST_SUB_BUCKETS);
    }

    /* Merge keeps counts, min and max. */
    hist_init(&other);
    hist_record(&other, 1000000);
    hist_merge(&h, &other);
    CHECK(h.count == 101 && h.max == 1000000 && h.min == 1);
    CHECK(hist_percentile(&h, 100) == 1000000);
    CHECK(hist_percentile(&h, 99.5) == 1000000);

    UNIT_DONE();
}
