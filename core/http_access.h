/* http_access.h — client addresses and the operator's address rules, the
 * same in both engines: CIDRs parsed (strictly), an ordered allow/deny
 * list matched first rule first (nginx's allow/deny), and the key an
 * address is counted under per client (IPv6 cut to a prefix).
 *
 * An address is 16 bytes: IPv6 as is, IPv4 as IPv4-mapped IPv6
 * (::ffff:a.b.c.d), so an IPv4 client of a dual-stack socket and of an
 * IPv4 socket are one client. A rule written for IPv4 matches IPv4
 * clients only, and one written for IPv6 IPv6 clients only (an IPv6 rule
 * inside ::ffff:0:0/96 is an IPv4 rule); "all" matches both.
 *
 * Everything works over the caller's memory; nothing here allocates. */
#ifndef KTCP_CORE_HTTP_ACCESS_H
#define KTCP_CORE_HTTP_ACCESS_H

#include "compat.h"

/* Rules at most, in one list (nginx has no bound; a list this long is
 * matched in well under a microsecond). */
#define HTTP_ACCESS_RULES_MAX 256
/* The longest CIDR text taken ("ffff:...:255.255.255.255/128" fits). */
#define HTTP_CIDR_TEXT_MAX 64

enum http_addr_family {
    HTTP_ADDR_ANY = 0, /* "all": every client */
    HTTP_ADDR_V4 = 4,
    HTTP_ADDR_V6 = 6,
};

struct http_access_rule {
    uint8_t addr[16]; /* the network; IPv4 as ::ffff:a.b.c.d */
    uint8_t bits;     /* prefix length over the 16 bytes (IPv4: 96 + n) */
    uint8_t family;   /* enum http_addr_family */
    bool allow;
};

struct http_access {
    uint32_t n; /* 0: no rules, every client allowed */
    struct http_access_rule rule[HTTP_ACCESS_RULES_MAX];
};

/* addr from an IPv4 address (network order). */
void http_addr_from_v4(uint8_t addr[16], const uint8_t v4[4]);

/* Append a rule (allow or deny CIDR) to a: 0, or -1 with *why (the CIDR
 * does not parse, or a has HTTP_ACCESS_RULES_MAX rules). */
int http_access_add(struct http_access *a,
                    bool allow,
                    const char *s,
                    size_t len,
                    const char **why);

/* A list "allow:CIDR,deny:CIDR,..." (khttpd's acl= parameter; blanks
 * around items are skipped) appended to a: 0, or -1 with *why; on error a
 * keeps the rules it had before the call. */
int http_access_parse(struct http_access *a,
                      const char *s,
                      size_t len,
                      const char **why);

/* The first rule matching addr decides; no rule matching: allowed. */
bool http_access_allowed(const struct http_access *a, const uint8_t addr[16]);

/* The key addr is counted under per client: IPv4 whole, IPv6 its first
 * v6_prefix bits (1..128; a /64 is one site), the rest zero. */
void http_addr_key(uint8_t key[16],
                   const uint8_t addr[16],
                   unsigned int v6_prefix);

#endif /* KTCP_CORE_HTTP_ACCESS_H */
