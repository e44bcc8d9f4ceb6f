/* httpd-access.c — ktcp-httpd's address rules (--allow, --deny), checked
 * at accept through the runtime's admit hook, and its request rates
 * (--limit-req), taken per request. What a rule matches, which decides,
 * and the token arithmetic are core's (http_access.c, http_rate.c); here
 * the connection's address is handed to them, the rate table allocated
 * and locked, and what they refuse counted. */
#define _LGPL_SOURCE /* liburcu's read-side lock inline */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "httpd.h"

/* c's address as core takes it (IPv4 as IPv4-mapped); false: none (not
 * an IP connection). */
static bool client_addr(const struct rt_conn *c, uint8_t addr[16])
{
    if (c->peer_family == AF_INET) {
        http_addr_from_v4(addr, c->peer_addr);
        return true;
    }
    if (c->peer_family == AF_INET6) {
        memcpy(addr, c->peer_addr, 16);
        return true;
    }
    return false;
}

bool httpd_client_allowed(const struct rt_conn *c)
{
    /* a PROXY listener's client is known once its header is read: the
     * rules see that one (httpd_serve asks again then) */
    if (httpd_cfg.proxy_protocol[c->listener & 1] && !c->handler_state)
        return true;
    uint8_t addr[16];
    if (!atomic_load_explicit(&httpd_cfg.access_rules, memory_order_relaxed))
        return true; /* as if accepted before the reload that adds them */
    urcu_memb_read_lock();
    const struct http_access *a =
        &atomic_load_explicit(&httpd_cfg.live, memory_order_acquire)->access;
    bool ok = !a->n || !client_addr(c, addr) || http_access_allowed(a, addr);
    urcu_memb_read_unlock();
    if (!ok)
        rt_count(HTTPD_C_DENIED, 1);
    return ok;
}

/* ---- request rates (--limit-req) ---- */

#define RATE_LOCKS 64

static struct {
    struct http_rate_table t;
    pthread_mutex_t locks[RATE_LOCKS]; /* set % RATE_LOCKS */
    _Atomic uint64_t entries;          /* in use */
} rate;
static _Atomic bool rate_ready;

int httpd_rate_setup(uint32_t entries)
{
    if (atomic_load(&rate_ready))
        return 0;
    struct http_rate_entry *mem = calloc(entries, sizeof(*mem));
    if (!mem)
        return -ENOMEM;
    uint64_t seed[2];
    if (getrandom(seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
        /* no entropy yet (early boot): the clock is the seed */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed[0] = (uint64_t) ts.tv_nsec << 32 ^ (uint64_t) ts.tv_sec;
        seed[1] = (uint64_t) getpid() * 0x9e3779b97f4a7c15ULL;
    }
    http_rate_init(&rate.t, mem, entries, seed);
    for (int i = 0; i < RATE_LOCKS; i++)
        pthread_mutex_init(&rate.locks[i], NULL);
    atomic_store_explicit(&rate_ready, true, memory_order_release);
    return 0;
}

uint32_t httpd_rate_take(const struct rt_conn *c, const struct httpd_live *l)
{
    uint8_t addr[16], key[16];
    if (!l->rate_limit ||
        !atomic_load_explicit(&rate_ready, memory_order_acquire) ||
        !client_addr(c, addr))
        return 0;
    struct http_rate_conf conf = {.rate = l->rate_limit,
                                  .burst = l->rate_burst};
    http_addr_key(key, addr, httpd_cfg.per_ip_v6_prefix);
    uint32_t set = http_rate_set(&rate.t, key);
    bool grew;
    pthread_mutex_t *lock = &rate.locks[set % RATE_LOCKS];
    pthread_mutex_lock(lock);
    uint32_t wait =
        http_rate_take(&rate.t, set, key, rt_loop_now_ms(), &conf, &grew);
    pthread_mutex_unlock(lock);
    if (grew)
        atomic_fetch_add_explicit(&rate.entries, 1, memory_order_relaxed);
    if (wait)
        rt_count(HTTPD_C_RATE_LIMITED, 1);
    return wait;
}

uint64_t httpd_rate_entries(void)
{
    return atomic_load_explicit(&rate.entries, memory_order_relaxed);
}
