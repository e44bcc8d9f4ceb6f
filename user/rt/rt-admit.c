/* rt-admit.c — admission: the live connections against --max-conns, and
 * each client address's against --max-conns-per-ip (by default a quarter
 * of --max-conns, at least RT_PER_IP_FLOOR), an IPv6 client counted per
 * --per-ip-v6-prefix (a /64 by default: one site's addresses are one
 * client).
 *
 * The per-address counts live in one table allocated at start, never
 * grown: buckets of RT_PEER_WAYS entries, an address in one of two buckets
 * chosen by a hash keyed afresh at every start (so a client cannot choose
 * addresses that meet in one bucket), the less loaded one when it arrives.
 * An admission or a release looks at two buckets under their stripe locks:
 * constant time, and workers that touch other buckets do not wait. The
 * table has room for twice as many addresses as there can be connections
 * (--max-conns, or RT_PEERS_CAP when that is 0); an address finding both
 * its buckets full is refused as over the limit. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rt-internal.h"

#define RT_PEER_WAYS 8
/* addresses the table holds when --max-conns is 0 (no limit), and at most */
#define RT_PEERS_CAP 65536
#define RT_PEERS_MAX (1 << 20)
#define RT_PEER_LOCKS 64

struct rt_peer {
    uint32_t addr[4]; /* IPv6; IPv4 as IPv4-mapped, so both count as one */
    uint32_t count;   /* live connections; 0: a free entry */
};

struct rt_peer_bucket {
    struct rt_peer e[RT_PEER_WAYS];
};

static struct {
    struct rt_peer_bucket *b; /* NULL: no per-address limit */
    size_t mask;              /* buckets - 1 */
    uint32_t limit;           /* connections per address */
    int v6_prefix;            /* bits of an IPv6 address counted */
    uint64_t key[2];
    pthread_mutex_t locks[RT_PEER_LOCKS];
} peers;

static _Atomic long live_conns;

long rt_live_conns(void)
{
    return atomic_load(&live_conns);
}

int rt_admit_init(const struct rt_config *cfg)
{
    int limit = cfg->max_conns_per_ip;
    if (limit == RT_PER_IP_AUTO)
        limit = cfg->max_conns <= 0                    ? 0
                : cfg->max_conns / 4 > RT_PER_IP_FLOOR ? cfg->max_conns / 4
                                                       : RT_PER_IP_FLOOR;
    if (limit <= 0)
        return 0;
    peers.limit = (uint32_t) limit;
    peers.v6_prefix = cfg->per_ip_v6_prefix > 0 && cfg->per_ip_v6_prefix <= 128
                          ? cfg->per_ip_v6_prefix
                          : RT_PER_IP_V6_PREFIX;
    size_t cap = RT_PEERS_CAP;
    if (cfg->max_conns > 0)
        cap = cfg->max_conns < RT_PEERS_MAX ? (size_t) cfg->max_conns
                                            : RT_PEERS_MAX;
    size_t n = 2;
    while (n * RT_PEER_WAYS < 2 * cap)
        n *= 2;
    peers.b = calloc(n, sizeof(*peers.b));
    if (!peers.b)
        return -ENOMEM;
    peers.mask = n - 1;
    if (getrandom(peers.key, sizeof(peers.key), GRND_NONBLOCK) !=
        sizeof(peers.key)) {
        /* no entropy yet (early boot): the clock is the key */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        peers.key[0] = (uint64_t) ts.tv_nsec << 32 ^ (uint64_t) ts.tv_sec;
        peers.key[1] = (uint64_t) getpid() * 0x9e3779b97f4a7c15ULL;
    }
    for (int i = 0; i < RT_PEER_LOCKS; i++)
        pthread_mutex_init(&peers.locks[i], NULL);
    return 0;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* The address c is counted under; false when it has none (not IP). */
static bool peer_key(const struct rt_conn *c, uint32_t addr[4])
{
    unsigned char *p = (unsigned char *) addr;
    if (c->admit_family == AF_INET) {
        memset(p, 0, 10);
        p[10] = p[11] = 0xff;
        memcpy(p + 12, c->admit_addr, 4);
        return true;
    }
    if (c->admit_family == AF_INET6) {
        /* the first v6_prefix bits; the rest zero */
        int bits = peers.v6_prefix;
        memset(p, 0, 16);
        memcpy(p, c->admit_addr, (size_t) bits / 8);
        if (bits % 8)
            p[bits / 8] = c->admit_addr[bits / 8] & (0xff << (8 - bits % 8));
        return true;
    }
    return false;
}

/* The two buckets addr may be in, their locks taken in stripe order. */
static void peer_lock(const uint32_t addr[4], size_t *b1, size_t *b2)
{
    uint64_t h = peers.key[0];
    for (int i = 0; i < 4; i++)
        h = mix(h ^ addr[i] ^ peers.key[1]);
    *b1 = h & peers.mask;
    *b2 = (h >> 32) & peers.mask;
    size_t l1 = *b1 % RT_PEER_LOCKS, l2 = *b2 % RT_PEER_LOCKS;
    pthread_mutex_lock(&peers.locks[l1 < l2 ? l1 : l2]);
    if (l1 != l2)
        pthread_mutex_lock(&peers.locks[l1 < l2 ? l2 : l1]);
}

static void peer_unlock(size_t b1, size_t b2)
{
    size_t l1 = b1 % RT_PEER_LOCKS, l2 = b2 % RT_PEER_LOCKS;
    pthread_mutex_unlock(&peers.locks[l1]);
    if (l1 != l2)
        pthread_mutex_unlock(&peers.locks[l2]);
}

static struct rt_peer *peer_find(size_t b, const uint32_t addr[4])
{
    struct rt_peer *e = peers.b[b].e;
    for (int i = 0; i < RT_PEER_WAYS; i++)
        if (e[i].count && !memcmp(e[i].addr, addr, 16))
            return &e[i];
    return NULL;
}

/* A free entry of bucket b (NULL: none) and how many are in use. */
static struct rt_peer *peer_free(size_t b, int *used)
{
    struct rt_peer *e = peers.b[b].e, *free_e = NULL;
    *used = 0;
    for (int i = 0; i < RT_PEER_WAYS; i++) {
        if (e[i].count)
            (*used)++;
        else if (!free_e)
            free_e = &e[i];
    }
    return free_e;
}

/* Count one more connection from c's address; false when it has
 * max_conns_per_ip already (or no entry is free for it). */
static bool peer_get(const struct rt_conn *c)
{
    uint32_t addr[4];
    size_t b1, b2;
    if (!peers.b || !peer_key(c, addr))
        return true;
    peer_lock(addr, &b1, &b2);
    struct rt_peer *e = peer_find(b1, addr);
    if (!e && b2 != b1)
        e = peer_find(b2, addr);
    bool ok = true;
    if (e) {
        ok = e->count < peers.limit;
        e->count += ok;
    } else {
        int u1, u2;
        struct rt_peer *f1 = peer_free(b1, &u1), *f2 = peer_free(b2, &u2);
        e = f1 && (!f2 || u1 <= u2) ? f1 : f2;
        ok = e != NULL;
        if (e) {
            memcpy(e->addr, addr, 16);
            e->count = 1;
        }
    }
    peer_unlock(b1, b2);
    return ok;
}

static void peer_put(const struct rt_conn *c)
{
    uint32_t addr[4];
    size_t b1, b2;
    if (!peers.b || !peer_key(c, addr))
        return;
    peer_lock(addr, &b1, &b2);
    struct rt_peer *e = peer_find(b1, addr);
    if (!e)
        e = peer_find(b2, addr);
    if (e)
        e->count--;
    peer_unlock(b1, b2);
}

bool rt_conn_admit(const struct rt_conn *c)
{
    if (rt_g.cfg->admit && !rt_g.cfg->admit(c))
        return false;
    long n = atomic_fetch_add(&live_conns, 1);
    if ((rt_g.cfg->max_conns > 0 && n >= rt_g.cfg->max_conns) || !peer_get(c)) {
        atomic_fetch_sub(&live_conns, 1);
        rt_count(RT_C_REFUSED, 1);
        /* the second port's protocol may not be the answer's (HTTPS):
         * its refusals are closed only */
        if (rt_g.cfg->refuse && c->listener == 0)
            rt_g.cfg->refuse(c->fd);
        return false;
    }
    rt_count(RT_C_ACCEPTED, 1);
    return true;
}

void rt_conn_release(const struct rt_conn *c)
{
    peer_put(c);
    atomic_fetch_sub(&live_conns, 1);
}

/* The client c names from now on (peer_family, peer_addr): AF_INET
 * (addr 4 bytes) or AF_INET6 (16), an IPv4-mapped IPv6 address as IPv4;
 * anything else: none. */
static void set_client(struct rt_conn *c, int family, const unsigned char *addr)
{
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0,    0,
                                               0, 0, 0, 0, 0xff, 0xff};
    c->peer[0] = '\0';
    c->peer_family = 0;
    /* an IPv4 client of a dual-stack listener (the default bind) is named
     * and counted as IPv4, not ::ffff:a.b.c.d */
    if (family == AF_INET6 && memcmp(addr, v4mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    if (family == AF_INET) {
        c->peer_family = AF_INET;
        memcpy(c->peer_addr, addr, 4);
    } else if (family == AF_INET6) {
        c->peer_family = AF_INET6;
        memcpy(c->peer_addr, addr, 16);
    }
}

void rt_conn_set_peer(struct rt_conn *c, const struct sockaddr *sa)
{
    /* the family read as bytes: sa is most often a sockaddr_in or _in6
     * its caller filled, and a load through struct sockaddr may be moved
     * before those stores (type-based aliasing; a unit test's addresses
     * read as no family under LTO) */
    sa_family_t family;
    memcpy(&family, &sa->sa_family, sizeof(family));
    if (family == AF_INET)
        set_client(c, AF_INET,
                   (const unsigned char *) &((const struct sockaddr_in *) sa)
                       ->sin_addr);
    else if (family == AF_INET6)
        set_client(c, AF_INET6,
                   ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr);
    else
        set_client(c, 0, NULL);
    c->admit_family = c->peer_family;
    memcpy(c->admit_addr, c->peer_addr, sizeof(c->admit_addr));
}

void rt_conn_set_client(struct rt_conn *c, int family, const void *addr)
{
    if (family == AF_INET || family == AF_INET6)
        set_client(c, family, addr);
}
