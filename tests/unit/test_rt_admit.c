/* test_rt_admit.c — unit test of admission (rt-admit.c) without sockets:
 * --max-conns, --max-conns-per-ip per address with IPv4 and IPv4-mapped
 * IPv6 as one, a slot freed by a release, the default share (a quarter of
 * --max-conns, at least 64) and IPv6 counted per /64, and the table's
 * bound: a flood of distinct addresses fills it without growing it, is
 * refused past it, and leaves it empty once released. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "unit.h"

#include "rt-internal.h"


static int refused;
static void count_refusal(int fd)
{
    (void) fd;
    refused++;
}

static struct rt_conn v4(uint32_t host_order)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    struct rt_conn c = {.fd = -1};
    sin.sin_addr.s_addr = htonl(host_order);
    rt_conn_set_peer(&c, (struct sockaddr *) &sin);
    return c;
}

static struct rt_conn v6(const char *text)
{
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
    struct rt_conn c = {.fd = -1};
    inet_pton(AF_INET6, text, &sin6.sin6_addr);
    rt_conn_set_peer(&c, (struct sockaddr *) &sin6);
    return c;
}

static struct rt_conn v6_nth(uint32_t n)
{
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
    struct rt_conn c = {.fd = -1};
    inet_pton(AF_INET6, "2001:db8::", &sin6.sin6_addr);
    memcpy(&sin6.sin6_addr.s6_addr[12], &n, 4);
    rt_conn_set_peer(&c, (struct sockaddr *) &sin6);
    return c;
}

static void test_per_address(void)
{
    static struct rt_config cfg = {
        .max_conns = 5, .max_conns_per_ip = 2, .refuse = count_refusal};
    rt_g.cfg = &cfg;
    CHECK(rt_admit_init(&cfg) == 0);

    struct rt_conn a = v4(0x7f000001), mapped = v6("::ffff:127.0.0.1");
    CHECK(rt_conn_admit(&a));
    CHECK(rt_conn_admit(&a));
    CHECK(!rt_conn_admit(&a));
    CHECK(!rt_conn_admit(&mapped)); /* the same client */
    CHECK(refused == 2);
    struct rt_conn b = v4(0x7f000002), six = v6("::1");
    CHECK(rt_conn_admit(&b));
    CHECK(rt_conn_admit(&six));
    CHECK(rt_conn_admit(&six));
    CHECK(rt_live_conns() == 5);
    struct rt_conn c = v4(0x7f000003);
    CHECK(!rt_conn_admit(&c)); /* over --max-conns */
    rt_conn_release(&mapped);  /* one of 127.0.0.1's ends */
    CHECK(rt_conn_admit(&c));
    CHECK(!rt_conn_admit(&a));
    rt_conn_release(&c);
    CHECK(rt_conn_admit(&a));
    rt_conn_release(&a);
    rt_conn_release(&a);
    rt_conn_release(&b);
    rt_conn_release(&six);
    rt_conn_release(&six);
    CHECK(rt_live_conns() == 0);
}

/* --max-conns 0: the table holds 131,072 slots; 300,000 distinct addresses
 * are offered. */
#define FLOOD 300000
static void test_flood_is_bounded(void)
{
    static struct rt_config cfg = {
        .max_conns = 0, .max_conns_per_ip = 1, .per_ip_v6_prefix = 128};
    static bool in[FLOOD];
    rt_g.cfg = &cfg;
    CHECK(rt_admit_init(&cfg) == 0);
    int admitted = 0;
    for (uint32_t i = 0; i < FLOOD; i++) {
        struct rt_conn p = v6_nth(i);
        in[i] = rt_conn_admit(&p);
        admitted += in[i];
    }
    /* at least the addresses it is sized for, never more than its slots */
    CHECK(admitted >= 65536);
    CHECK(admitted <= 131072);
    CHECK(admitted < FLOOD);
    for (uint32_t i = 0; i < FLOOD; i++) {
        struct rt_conn p = v6_nth(i);
        if (in[i])
            rt_conn_release(&p);
    }
    CHECK(rt_live_conns() == 0);
    /* empty again: each address has its one slot back */
    for (uint32_t i = 0; i < 1000; i++) {
        struct rt_conn p = v6_nth(i);
        CHECK(rt_conn_admit(&p));
        CHECK(!rt_conn_admit(&p));
        rt_conn_release(&p);
    }
    printf("test-rt-admit: %d of %d distinct addresses held\n", admitted,
           FLOOD);
}

/* The defaults: max_conns 200 gives each address 64 (a quarter would be
 * 50); the addresses of one /64 are one client, another /64 another. */
static void test_default_share_and_prefix(void)
{
    static struct rt_config cfg = {.max_conns = 200,
                                   .max_conns_per_ip = RT_PER_IP_AUTO,
                                   .per_ip_v6_prefix = RT_PER_IP_V6_PREFIX};
    rt_g.cfg = &cfg;
    CHECK(rt_admit_init(&cfg) == 0);
    struct rt_conn one = v4(0x7f000001), two = v4(0x7f000002);
    struct rt_conn s1 = v6("2001:db8:0:7::1"), s2 = v6("2001:db8:0:7:ffff::2");
    struct rt_conn s3 = v6("2001:db8:0:7::3"), other = v6("2001:db8:0:8::1");
    for (int i = 0; i < RT_PER_IP_FLOOR; i++)
        CHECK(rt_conn_admit(&one));
    CHECK(!rt_conn_admit(&one));
    CHECK(rt_conn_admit(&two));
    for (int i = 0; i < RT_PER_IP_FLOOR / 2; i++) {
        CHECK(rt_conn_admit(&s1));
        CHECK(rt_conn_admit(&s2));
    }
    CHECK(!rt_conn_admit(&s3)); /* the /64 has its 64 */
    CHECK(rt_conn_admit(&other));
    for (int i = 0; i < RT_PER_IP_FLOOR; i++)
        rt_conn_release(&one);
    for (int i = 0; i < RT_PER_IP_FLOOR / 2; i++) {
        rt_conn_release(&s1);
        rt_conn_release(&s2);
    }
    rt_conn_release(&two);
    rt_conn_release(&other);
    CHECK(rt_live_conns() == 0);
    CHECK(rt_conn_admit(&s3)); /* its slots are back */
    rt_conn_release(&s3);
}

int main(void)
{
    test_per_address();
    test_default_share_and_prefix();
    test_flood_is_bounded();
    UNIT_DONE();
}
