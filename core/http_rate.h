/* http_rate.h — request rates per client address, the same in both
 * engines: nginx's limit_req with nodelay. Each address (its key:
 * http_addr_key, IPv6 per /64 by default) has an excess, in thousandths
 * of a request, that every request raises by one request and time lowers
 * at the rate; a request that would take it past the burst is refused
 * (the engine answers 429 with Retry-After, http_plan_limited) and
 * changes nothing. A new address may thus send burst + 1 requests at
 * once, then one per 1/rate seconds.
 *
 * The table is the caller's memory, of fixed size: sets of HTTP_RATE_WAYS
 * entries, an address in the one set its keyed hash (the caller's random
 * seed) picks; an address new to a full set takes the place of the set's
 * least recently passed entry. A flood of new addresses can therefore
 * never grow the table, only age its entries out. The caller locks a set
 * around http_rate_take (its own locks: one per set, or striped) and
 * gives the time; the arithmetic is integer only. */
#ifndef KTCP_CORE_HTTP_RATE_H
#define KTCP_CORE_HTTP_RATE_H

#include "compat.h"

#define HTTP_RATE_WAYS 8
/* entries of a table: at least, at most, by default (32 bytes each) */
#define HTTP_RATE_ENTRIES_MIN 64
#define HTTP_RATE_ENTRIES_MAX (1U << 22)
#define HTTP_RATE_ENTRIES_DEFAULT 16384
/* requests per second at most, burst at most */
#define HTTP_RATE_MAX 1000000
#define HTTP_RATE_BURST_MAX 100000

struct http_rate_conf {
    uint32_t rate;    /* thousandths of a request per second; 0: off */
    uint32_t burst;   /* requests beyond the rate taken at once */
    uint32_t entries; /* the table's size (a power of two, >= MIN) */
};

struct http_rate_entry {
    uint8_t key[16];
    uint64_t last_ms; /* when a request last passed */
    uint32_t excess;  /* thousandths of a request ahead of the rate */
    uint32_t used;    /* 0: a free entry */
};

struct http_rate_table {
    struct http_rate_entry *e; /* sets * HTTP_RATE_WAYS, the caller's */
    uint32_t sets;             /* a power of two */
    uint64_t seed[2];          /* random, from the engine at start */
};

/* "10r/s" or "600r/m" (1..HTTP_RATE_MAX a second, at least 1 a minute)
 * into *rate (thousandths a second): 0, or -1 with *why. */
int http_rate_parse(const char *s,
                    size_t len,
                    uint32_t *rate,
                    const char **why);

/* "rate=10r/s[,burst=N][,entries=N]" (ktcp-httpd's --limit-req, nginx's
 * limit_req_zone and limit_req in one) or "off" into *c: burst 0 and
 * HTTP_RATE_ENTRIES_DEFAULT unless given, entries rounded up to a power
 * of two. 0, or -1 with *why (c unchanged). */
int http_limit_req_parse(const char *s,
                         size_t len,
                         struct http_rate_conf *c,
                         const char **why);

/* entries (>= HTTP_RATE_ENTRIES_MIN, a power of two): the table over mem
 * (entries * sizeof(struct http_rate_entry) bytes), emptied. */
void http_rate_init(struct http_rate_table *t,
                    struct http_rate_entry *mem,
                    uint32_t entries,
                    const uint64_t seed[2]);

/* The set key belongs to (lock it around http_rate_take). */
uint32_t http_rate_set(const struct http_rate_table *t, const uint8_t key[16]);

/* One request of key at now_ms under c, in its set: 0 when it passes,
 * else the seconds until one would (Retry-After, at least 1). *grew is
 * set when a free entry was taken (the table holds one address more). */
uint32_t http_rate_take(struct http_rate_table *t,
                        uint32_t set,
                        const uint8_t key[16],
                        uint64_t now_ms,
                        const struct http_rate_conf *c,
                        bool *grew);

#endif /* KTCP_CORE_HTTP_RATE_H */
