/* Unit tests of the content cache's policy (http_cache.c). */
#include "http_cache.h"
#include "http_limits.h"
#include "unit.h"

static void test_file_id(void)
{
    struct http_file_id a = {8, 1234, 100, 1700000000, 5, false}, b = a;

    CHECK(http_file_id_same(&a, &b));
    CHECK_INT(http_file_id_hash(&a), http_file_id_hash(&b));
    b.mtime_nsec = 6; /* a rewrite within the same second */
    CHECK(!http_file_id_same(&a, &b));
    b = a;
    b.size = 101;
    CHECK(!http_file_id_same(&a, &b));
    b = a;
    b.ino = 1235; /* replaced by rename */
    CHECK(!http_file_id_same(&a, &b));
    CHECK(http_file_id_hash(&a) != http_file_id_hash(&b));
    b = a;
    b.dev = 9;
    CHECK(!http_file_id_same(&a, &b));
    CHECK(http_file_id_hash(&a) != http_file_id_hash(&b));
    b = a;
    b.is_dir = true;
    CHECK(!http_file_id_same(&a, &b));
    b = a;
    b.mtime++;
    CHECK(!http_file_id_same(&a, &b));
    /* the version is not in the hash: a new version lands in its bucket */
    CHECK_INT(http_file_id_hash(&a), http_file_id_hash(&b));
    /* the low bits (a table's bucket) depend on the inode's high bits */
    b = a;
    b.ino = a.ino | (1ULL << 40);
    CHECK((http_file_id_hash(&a) & 1023) != (http_file_id_hash(&b) & 1023));
}

static void test_due(void)
{
    CHECK(!http_cache_due(1000, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(!http_cache_due(1999, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(http_cache_due(2000, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(http_cache_due(2001, 1000, HTTP_SERVER_REVALIDATE_MS));
    /* a clock that trails the stamp is never due */
    CHECK(!http_cache_due(999, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(!http_cache_due(0, 5000, HTTP_SERVER_LRU_TOUCH_MS));
    CHECK(!http_cache_due(1099, 1000, HTTP_SERVER_LRU_TOUCH_MS));
    CHECK(http_cache_due(1100, 1000, HTTP_SERVER_LRU_TOUCH_MS));
}

static void test_charges(void)
{
    CHECK_INT(http_cache_entry_charge(11, 0), HTTP_SERVER_ENTRY_OVERHEAD + 11);
    CHECK_INT(http_cache_entry_charge(11, 64), HTTP_SERVER_ENTRY_OVERHEAD + 75);
    CHECK_INT(http_cache_obj_charge(0), HTTP_SERVER_ENTRY_OVERHEAD);
    CHECK_INT(http_cache_obj_charge(4096), HTTP_SERVER_ENTRY_OVERHEAD + 4096);
    CHECK_INT(http_cache_gz_charge(16, 300, false), 316);
    CHECK_INT(http_cache_gz_charge(16, 300, true), 16);
    CHECK_INT(http_cache_leaving(300, 5000, true), 5300);
    CHECK_INT(http_cache_leaving(300, 5000, false), 300);
}

static void test_budget(void)
{
    /* an entry and its object that fill the budget exactly are kept */
    CHECK(http_cache_keeps(300, 700, 1000));
    CHECK(!http_cache_keeps(300, 701, 1000));
    CHECK(!http_cache_over(1000, 1000));
    CHECK(http_cache_over(1001, 1000));
    /* eviction goes down to 90% of the budget */
    CHECK(http_cache_evict_more(1001, 0, 1000));
    CHECK(http_cache_evict_more(901, 0, 1000));
    CHECK(!http_cache_evict_more(900, 0, 1000));
    /* what the entries already taken will free counts as gone */
    CHECK(!http_cache_evict_more(1001, 101, 1000));
    CHECK(http_cache_evict_more(1001, 100, 1000));
    /* tenths of the budget: 1009 / 10 * 9 = 900 */
    CHECK(!http_cache_evict_more(900, 0, 1009));
    CHECK(http_cache_evict_more(901, 0, 1009));
}

int main(void)
{
    test_file_id();
    test_due();
    test_charges();
    test_budget();
    UNIT_DONE();
}
