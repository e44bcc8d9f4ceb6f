/* Unit tests of request rates per address (http_rate.c). */
#include <stdlib.h>

#include "http_rate.h"
#include "unit.h"

static void parse_ok(const char *s, uint32_t rate, uint32_t burst, uint32_t n)
{
    struct http_rate_conf c;
    const char *why = NULL;
    int rc = http_limit_req_parse(s, strlen(s), &c, &why);

    if (rc)
        fprintf(stderr, "%s: %s\n", s, why);
    CHECK_INT(rc, 0);
    CHECK_INT(c.rate, rate);
    CHECK_INT(c.burst, burst);
    CHECK_INT(c.entries, n);
}

static void parse_bad(const char *s)
{
    struct http_rate_conf c = {7, 7, 7};
    const char *why = NULL;

    CHECK_INT(http_limit_req_parse(s, strlen(s), &c, &why), -1);
    CHECK(why != NULL);
    CHECK_INT(c.rate, 7); /* unchanged */
}

static void test_parse(void)
{
    parse_ok("rate=10r/s", 10000, 0, HTTP_RATE_ENTRIES_DEFAULT);
    parse_ok("rate=10r/s,burst=20", 10000, 20, HTTP_RATE_ENTRIES_DEFAULT);
    parse_ok("burst=5,rate=600r/m,entries=100", 10000, 5, 128);
    parse_ok("rate=1r/m", 16, 0, HTTP_RATE_ENTRIES_DEFAULT);
    parse_ok("rate=1000000r/s,entries=64", 1000000000, 0, 64);
    parse_ok("off", 0, 0, HTTP_RATE_ENTRIES_DEFAULT);
    const char *bad[] = {"",
                         "rate=",
                         "rate=0r/s",
                         "rate=10",
                         "rate=10r/h",
                         "rate=10r/s ",
                         "rate=1000001r/s",
                         "rate=-1r/s",
                         "burst=5",
                         "rate=1r/s,burst=100001",
                         "rate=1r/s,burst=x",
                         "rate=1r/s,entries=63",
                         "rate=1r/s,entries=4194305",
                         "rate=1r/s,,burst=1",
                         "rate=1r/s,zone=x",
                         "rate=9999999999r/s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_bad(bad[i]);
}

static struct http_rate_entry mem[HTTP_RATE_ENTRIES_MIN];

static uint32_t take(struct http_rate_table *t,
                     const struct http_rate_conf *c,
                     unsigned id,
                     uint64_t now,
                     bool *grew)
{
    uint8_t key[16] = {0};
    memcpy(key, &id, sizeof(id));
    key[15] = 1;
    return http_rate_take(t, http_rate_set(t, key), key, now, c, grew);
}

static void test_bucket(void)
{
    struct http_rate_table t;
    struct http_rate_conf c = {1000, 2, HTTP_RATE_ENTRIES_MIN}; /* 1r/s */
    uint64_t seed[2] = {0x1234, 0x5678};
    bool grew;

    http_rate_init(&t, mem, HTTP_RATE_ENTRIES_MIN, seed);
    CHECK_INT(t.sets, HTTP_RATE_ENTRIES_MIN / HTTP_RATE_WAYS);
    /* burst + 1 at once, then 429 for a second */
    CHECK_INT(take(&t, &c, 1, 10000, &grew), 0);
    CHECK(grew);
    CHECK_INT(take(&t, &c, 1, 10000, &grew), 0);
    CHECK(!grew);
    CHECK_INT(take(&t, &c, 1, 10000, &grew), 0);
    CHECK_INT(take(&t, &c, 1, 10000, &grew), 1);
    CHECK_INT(take(&t, &c, 1, 10500, &grew), 1); /* refused: no change */
    /* another address is on its own */
    CHECK_INT(take(&t, &c, 2, 10500, &grew), 0);
    /* a second later one more passes, and only one */
    CHECK_INT(take(&t, &c, 1, 11000, &grew), 0);
    CHECK_INT(take(&t, &c, 1, 11000, &grew), 1);
    /* idle long enough: the whole burst again */
    for (int i = 0; i < 3; i++)
        CHECK_INT(take(&t, &c, 1, 20000, &grew), 0);
    CHECK_INT(take(&t, &c, 1, 20000, &grew), 1);

    /* a slow rate: Retry-After in whole seconds, rounded up */
    struct http_rate_conf slow = {16, 0, HTTP_RATE_ENTRIES_MIN}; /* 1r/m */
    CHECK_INT(take(&t, &slow, 3, 0, &grew), 0);
    CHECK_INT(take(&t, &slow, 3, 0, &grew), 63);
    CHECK_INT(take(&t, &slow, 3, 62500, &grew), 0);
    /* time going backwards drains nothing */
    CHECK_INT(take(&t, &slow, 3, 1000, &grew), 63);
}

static void test_bounded(void)
{
    struct http_rate_table t;
    struct http_rate_conf c = {1000, 0, HTTP_RATE_ENTRIES_MIN};
    uint64_t seed[2] = {42, 43};
    bool grew;
    unsigned used = 0;

    http_rate_init(&t, mem, HTTP_RATE_ENTRIES_MIN, seed);
    /* a flood of new addresses fills the table, never more */
    for (unsigned id = 100; id < 100 + 10 * HTTP_RATE_ENTRIES_MIN; id++) {
        CHECK_INT(take(&t, &c, id, 1000 + id, &grew), 0);
        used += grew;
    }
    CHECK_INT(used, HTTP_RATE_ENTRIES_MIN);
    /* the newest survive: the last address is still limited */
    unsigned last = 100 + 10 * HTTP_RATE_ENTRIES_MIN - 1;
    CHECK_INT(take(&t, &c, last, 1000 + last, &grew), 1);
    CHECK(!grew);
    /* another seed puts keys in other sets */
    uint8_t key[16] = {1, 2, 3};
    uint32_t s1 = http_rate_set(&t, key);
    int differ = 0;
    for (uint64_t s = 0; s < 16; s++) {
        uint64_t other[2] = {s * 7919, s * 104729};
        struct http_rate_table u;
        http_rate_init(&u, mem, HTTP_RATE_ENTRIES_MIN, other);
        differ += http_rate_set(&u, key) != s1;
    }
    CHECK(differ > 8);
}

int main(void)
{
    test_parse();
    test_bucket();
    test_bounded();
    UNIT_DONE();
}
