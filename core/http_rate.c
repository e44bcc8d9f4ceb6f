/* http_rate.c — request rates per client address (see http_rate.h). */
#include "http_rate.h"
#include "http_internal.h"

/* A decimal number at s[*i..len) of at most 9 digits: its value, or -1. */
static long num(const char *s, size_t len, size_t *i)
{
    size_t start = *i;
    long v = 0;

    while (*i < len && http_is_digit((unsigned char) s[*i])) {
        if (*i - start == 9)
            return -1;
        v = v * 10 + (s[*i] - '0');
        (*i)++;
    }
    return *i == start ? -1 : v;
}

int http_rate_parse(const char *s, size_t len, uint32_t *rate, const char **why)
{
    size_t i = 0;
    long n = num(s, len, &i);

    if (n < 1 || len - i != 3 || s[i] != 'r' || s[i + 1] != '/' ||
        (s[i + 2] != 's' && s[i + 2] != 'm')) {
        *why = "expected a rate such as 10r/s or 600r/m";
        return -1;
    }
    if (s[i + 2] == 's' ? n > HTTP_RATE_MAX : n > 60L * HTTP_RATE_MAX) {
        *why = "at most 1000000 requests a second";
        return -1;
    }
    *rate = s[i + 2] == 's' ? (uint32_t) n * 1000 : (uint32_t) (n * 1000 / 60);
    return 0;
}

static bool starts(const char *s, size_t len, const char *lit, size_t n)
{
    return len >= n && !memcmp(s, lit, n);
}

int http_limit_req_parse(const char *s,
                         size_t len,
                         struct http_rate_conf *c,
                         const char **why)
{
    struct http_rate_conf n = {0, 0, HTTP_RATE_ENTRIES_DEFAULT};
    bool have_rate = false;
    size_t i = 0;

    if (len == 3 && !memcmp(s, "off", 3)) {
        *c = (struct http_rate_conf){0, 0, HTTP_RATE_ENTRIES_DEFAULT};
        return 0;
    }
    while (i <= len) {
        size_t end = i;
        while (end < len && s[end] != ',')
            end++;
        const char *item = s + i;
        size_t ilen = end - i, k = 0;
        long v;

        if (starts(item, ilen, "rate=", 5)) {
            if (http_rate_parse(item + 5, ilen - 5, &n.rate, why) < 0)
                return -1;
            have_rate = true;
        } else if (starts(item, ilen, "burst=", 6)) {
            k = 6;
            v = num(item, ilen, &k);
            if (v < 0 || k != ilen || v > HTTP_RATE_BURST_MAX) {
                *why = "burst: expected a number in 0..100000";
                return -1;
            }
            n.burst = (uint32_t) v;
        } else if (starts(item, ilen, "entries=", 8)) {
            k = 8;
            v = num(item, ilen, &k);
            if (v < HTTP_RATE_ENTRIES_MIN || k != ilen ||
                v > (long) HTTP_RATE_ENTRIES_MAX) {
                *why = "entries: expected a number in 64..4194304";
                return -1;
            }
            n.entries = HTTP_RATE_ENTRIES_MIN;
            while (n.entries < (uint32_t) v)
                n.entries *= 2;
        } else {
            *why =
                "expected rate=Nr/s (or r/m), then burst=N, entries=N, "
                "comma separated";
            return -1;
        }
        i = end + 1;
    }
    if (!have_rate) {
        *why = "rate=Nr/s is required";
        return -1;
    }
    *c = n;
    return 0;
}

void http_rate_init(struct http_rate_table *t,
                    struct http_rate_entry *mem,
                    uint32_t entries,
                    const uint64_t seed[2])
{
    memset(mem, 0, (size_t) entries * sizeof(*mem));
    t->e = mem;
    t->sets = entries / HTTP_RATE_WAYS;
    t->seed[0] = seed[0];
    t->seed[1] = seed[1];
}

/* splitmix64's finaliser: every input bit moves every output bit */
static uint64_t mix(uint64_t h)
{
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

uint32_t http_rate_set(const struct http_rate_table *t, const uint8_t key[16])
{
    uint64_t w[2];

    memcpy(w, key, 16);
    uint64_t h = mix(t->seed[0] ^ w[0]);
    h = mix(h ^ w[1] ^ t->seed[1]);
    return (uint32_t) h & (t->sets - 1);
}

uint32_t http_rate_take(struct http_rate_table *t,
                        uint32_t set,
                        const uint8_t key[16],
                        uint64_t now_ms,
                        const struct http_rate_conf *c,
                        bool *grew)
{
    struct http_rate_entry *e = &t->e[(size_t) set * HTTP_RATE_WAYS];
    struct http_rate_entry *hit = NULL, *victim = NULL;

    *grew = false;
    for (int i = 0; i < HTTP_RATE_WAYS; i++) {
        if (e[i].used && !memcmp(e[i].key, key, 16)) {
            hit = &e[i];
            break;
        }
        /* a free entry, else the one that passed a request longest ago */
        if (!victim ||
            (victim->used && (!e[i].used || e[i].last_ms < victim->last_ms)))
            victim = &e[i];
    }
    if (!hit) {
        /* new: nothing ahead of the rate (nginx starts at 0) */
        *grew = !victim->used;
        memcpy(victim->key, key, 16);
        victim->used = 1;
        victim->excess = 0;
        victim->last_ms = now_ms;
        return 0;
    }
    uint64_t elapsed = now_ms > hit->last_ms ? now_ms - hit->last_ms : 0;
    if (elapsed > 0xffffffffULL)
        elapsed = 0xffffffffULL;
    /* what the rate has drained since the last pass, in thousandths */
    uint64_t drained = (uint64_t) c->rate * elapsed / 1000;
    uint64_t excess = (uint64_t) hit->excess + 1000;
    excess = excess > drained ? excess - drained : 0;
    uint64_t limit = (uint64_t) c->burst * 1000;
    if (excess > limit) {
        uint64_t wait_ms =
            ((excess - limit) * 1000 + c->rate - 1) / (c->rate ? c->rate : 1);
        uint64_t s = (wait_ms + 999) / 1000;
        return s ? (s > 0xffffffffULL ? 0xffffffffU : (uint32_t) s) : 1;
    }
    hit->excess = (uint32_t) excess;
    hit->last_ms = now_ms;
    return 0;
}
