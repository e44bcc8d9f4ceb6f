/* Unit tests of CIDRs, address rules and client keys (http_access.c). */
#include <arpa/inet.h>
#include <stdlib.h>

#include "http_access.h"
#include "http_internal.h"
#include "unit.h"

/* text -> 16-byte client address as the engines make it */
static void addr(const char *text, uint8_t out[16])
{
    uint8_t v4[4];
    if (inet_pton(AF_INET, text, v4) == 1) {
        http_addr_from_v4(out, v4);
        return;
    }
    if (inet_pton(AF_INET6, text, out) != 1) {
        fprintf(stderr, "bad test address %s\n", text);
        exit(2);
    }
}

static void cidr_ok(const char *s, const char *net, int bits, int family)
{
    struct http_access_rule r;
    const char *why = NULL;
    uint8_t want[16];
    int rc = http_cidr_parse(s, strlen(s), &r, &why);

    if (rc)
        fprintf(stderr, "%s: %s\n", s, why);
    CHECK_INT(rc, 0);
    addr(net, want);
    CHECK(!memcmp(r.addr, want, 16));
    CHECK_INT(r.bits, bits);
    CHECK_INT(r.family, family);
}

static void cidr_bad(const char *s, const char *why_part)
{
    struct http_access_rule r;
    const char *why = NULL;
    int rc = http_cidr_parse(s, strlen(s), &r, &why);

    if (rc == 0)
        fprintf(stderr, "%s: taken\n", s);
    CHECK_INT(rc, -1);
    CHECK(why && strstr(why, why_part));
}

static bool allowed(const struct http_access *a, const char *text)
{
    uint8_t x[16];
    addr(text, x);
    return http_access_allowed(a, x);
}

static void test_cidrs(void)
{
    cidr_ok("10.0.0.0/8", "10.0.0.0", 104, HTTP_ADDR_V4);
    cidr_ok("127.0.0.2", "127.0.0.2", 128, HTTP_ADDR_V4);
    cidr_ok("0.0.0.0/0", "0.0.0.0", 96, HTTP_ADDR_V4);
    cidr_ok("::1", "::1", 128, HTTP_ADDR_V6);
    cidr_ok("::/0", "::", 0, HTTP_ADDR_V6);
    cidr_ok("2001:DB8::/32", "2001:db8::", 32, HTTP_ADDR_V6);
    cidr_ok("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8", 128, HTTP_ADDR_V6);
    cidr_ok("1::", "1::", 128, HTTP_ADDR_V6);
    cidr_ok("::ffff:10.1.0.0/112", "10.1.0.0", 112, HTTP_ADDR_V4);
    cidr_ok("64:ff9b::1.2.3.4", "64:ff9b::1.2.3.4", 128, HTTP_ADDR_V6);

    cidr_bad("10.0.0.0/33", "0..32");
    cidr_bad("::/129", "0..128");
    cidr_bad("1.2.3", "IPv4");
    cidr_bad("1.2.3.4.5", "IPv4");
    cidr_bad("256.0.0.0", "IPv4");
    cidr_bad("010.0.0.0", "IPv4");
    cidr_bad("::g/64", "IPv6");
    cidr_bad("1:2:3:4:5:6:7:8:9", "IPv6");
    cidr_bad("1::2::3", "IPv6");
    cidr_bad(":1::", "IPv6");
    cidr_bad("1::2:", "IPv6");
    cidr_bad("12345::", "IPv6");
    cidr_bad("fe80::1%eth0", "IPv6");
    cidr_bad("1:2:3:4:5:6:7::8", "IPv6");
    cidr_bad("10.0.0.0/8x", "prefix");
    cidr_bad("10.0.0.0/", "prefix");
    cidr_bad("10.0.0.0/08", "prefix");
    cidr_bad("10.0.0.0 ", "IPv4");
    cidr_bad("10.0.0.1/8", "host bits");
    cidr_bad("2001:db8::1/32", "host bits");
    cidr_bad("", "IPv4");
    cidr_bad("ALL", "IPv4");
}

static void test_rules(void)
{
    static struct http_access a;
    const char *why = NULL;

    /* no rules: everyone */
    CHECK(allowed(&a, "127.0.0.2"));
    CHECK(allowed(&a, "::1"));

    const char *list = "deny:127.0.0.2, allow:127.0.0.0/8,deny:all";
    CHECK_INT(http_access_parse(&a, list, strlen(list), &why), 0);
    CHECK_INT(a.n, 3);
    CHECK(!allowed(&a, "127.0.0.2")); /* first match wins */
    CHECK(allowed(&a, "127.0.0.1"));
    CHECK(!allowed(&a, "10.0.0.1"));
    CHECK(!allowed(&a, "::1")); /* all: both families */

    /* IPv4 rules match IPv4 clients, IPv6 rules IPv6 clients */
    memset(&a, 0, sizeof(a));
    list = "deny:::/0";
    CHECK_INT(http_access_parse(&a, list, strlen(list), &why), 0);
    CHECK(allowed(&a, "127.0.0.1"));
    CHECK(!allowed(&a, "::1"));
    memset(&a, 0, sizeof(a));
    list = "deny:0.0.0.0/0";
    CHECK_INT(http_access_parse(&a, list, strlen(list), &why), 0);
    CHECK(!allowed(&a, "127.0.0.1"));
    CHECK(allowed(&a, "::1"));
    memset(&a, 0, sizeof(a));
    list = "deny:::ffff:127.0.0.0/104";
    CHECK_INT(http_access_parse(&a, list, strlen(list), &why), 0);
    CHECK(!allowed(&a, "127.0.0.9"));

    /* the default is allow; the order is the operator's */
    memset(&a, 0, sizeof(a));
    list = "allow:10.0.0.0/8,deny:10.1.0.0/16";
    CHECK_INT(http_access_parse(&a, list, strlen(list), &why), 0);
    CHECK(allowed(&a, "10.1.2.3"));
    CHECK(allowed(&a, "192.0.2.1"));

    /* prefixes that are not byte multiples */
    memset(&a, 0, sizeof(a));
    list = "deny:192.0.2.64/26,deny:2001:db8:8000::/33";
    CHECK_INT(http_access_parse(&a, list, strlen(list), &why), 0);
    CHECK(allowed(&a, "192.0.2.63"));
    CHECK(!allowed(&a, "192.0.2.64"));
    CHECK(!allowed(&a, "192.0.2.127"));
    CHECK(allowed(&a, "192.0.2.128"));
    CHECK(!allowed(&a, "2001:db8:ffff::1"));
    CHECK(allowed(&a, "2001:db8:7fff::1"));

    /* a bad list keeps what was there */
    uint32_t had = a.n;
    const char *bad[] = {"",
                         "allow",
                         "allow:",
                         "permit:1.2.3.4",
                         "allow:1.2.3.4,",
                         "allow:1.2.3.4,,deny:all",
                         "deny:10.0.0.1/8",
                         "allow:1.2.3.4;deny:all"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        CHECK_INT(http_access_parse(&a, bad[i], strlen(bad[i]), &why), -1);
        CHECK(why != NULL);
        CHECK_INT(a.n, had);
    }

    /* bounded */
    memset(&a, 0, sizeof(a));
    for (int i = 0; i < HTTP_ACCESS_RULES_MAX; i++)
        CHECK_INT(http_access_add(&a, false, "10.0.0.0/8", 10, &why), 0);
    CHECK_INT(http_access_add(&a, false, "10.0.0.0/8", 10, &why), -1);
    CHECK(strstr(why, "256"));
}

static void test_keys(void)
{
    uint8_t a[16], k[16], want[16];

    addr("2001:db8:1:2:3:4:5:6", a);
    http_addr_key(k, a, 64);
    addr("2001:db8:1:2::", want);
    CHECK(!memcmp(k, want, 16));
    http_addr_key(k, a, 60);
    addr("2001:db8:1::", want);
    CHECK(!memcmp(k, want, 16));
    addr("192.0.2.7", a);
    http_addr_key(k, a, 64); /* IPv4 whole */
    CHECK(!memcmp(k, a, 16));
    CHECK(!memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff\xc0\0\2\7", 16));
}

int main(void)
{
    test_cidrs();
    test_rules();
    test_keys();
    UNIT_DONE();
}
