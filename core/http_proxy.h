/* http_proxy.h — the PROXY protocol header a TCP load balancer puts before
 * a connection's first byte (HAProxy's proxy-protocol.txt, versions 1 and
 * 2), parsed incrementally: the engines feed whatever bytes they have,
 * however the header was split into reads, and learn when it is whole, how
 * long it was and which client it names. Both engines take it only on a
 * listener the operator marked; anywhere else the first byte is a request's.
 *
 *   v1  "PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n", TCP6 alike,
 *       "PROXY UNKNOWN[ anything]\r\n"; at most 107 bytes with the CRLF.
 *   v2  the 12-byte signature, version 2 and a command (LOCAL or PROXY),
 *       family and transport, a 16-bit length, then the addresses
 *       (12 bytes for TCP over IPv4, 36 over IPv6) and TLVs, which are
 *       skipped; the length is bounded here (HTTP_PROXY_V2_LEN_MAX).
 *
 * A header that names no address (v1 UNKNOWN, v2 LOCAL, v2 UNSPEC or UNIX)
 * leaves the connection's own peer as the client. */
#ifndef KTCP_CORE_HTTP_PROXY_H
#define KTCP_CORE_HTTP_PROXY_H

#include "compat.h"

/* v1: the longest line the specification allows, CRLF included. */
#define HTTP_PROXY_V1_MAX 107
/* v2: the 16 bytes before the length, and the most the length may say:
 * a whole header then fits in 536 bytes (the specification's advice for a
 * header that still fits in a minimal IPv4 segment). */
#define HTTP_PROXY_V2_HEAD 16
#define HTTP_PROXY_V2_LEN_MAX 520
/* The most bytes a header can take: what an engine peeks at most. */
#define HTTP_PROXY_MAX (HTTP_PROXY_V2_HEAD + HTTP_PROXY_V2_LEN_MAX)

enum http_proxy_result {
    HTTP_PROXY_MORE = 0, /* every byte given is header: feed more */
    HTTP_PROXY_DONE = 1, /* the header ended *used bytes into this feed */
    /* neither version's first bytes: no header at all (a plain request on
     * a PROXY listener, garbage) */
    HTTP_PROXY_ERR_MISSING = -1,
    HTTP_PROXY_ERR_SYNTAX = -2,      /* a header, but malformed */
    HTTP_PROXY_ERR_TOO_LONG = -3,    /* v1 past 107 bytes, v2 past the bound */
    HTTP_PROXY_ERR_UNSUPPORTED = -4, /* v2: a version, command or
                                        family/transport not taken (UDP) */
};

/* The client a header names. */
struct http_proxy_addr {
    /* 4 (IPv4), 6 (IPv6), or 0: none named, keep the connection's peer */
    uint8_t family;
    uint8_t version; /* 1 or 2: which header it came in */
    bool local;      /* v2 LOCAL: the balancer's own connection (checks) */
    uint16_t src_port, dst_port;
    uint8_t src[16], dst[16]; /* IPv4 in the first 4 bytes */
};

/* The parse's state: what a connection holds until its header is done. */
struct http_proxy {
    uint16_t pos;    /* header bytes taken so far */
    uint16_t total;  /* v2, once its length is read: the whole header */
    uint8_t version; /* 0 until the first byte tells */
    /* v1: the line so far; v2: the 16-byte head and the address block */
    uint8_t line[HTTP_PROXY_V1_MAX + 1];
    struct http_proxy_addr addr; /* valid after HTTP_PROXY_DONE */
};

void http_proxy_init(struct http_proxy *p);

/* Feed len bytes that follow those fed before. *used is how many of them
 * belong to the header: all of them on MORE, the header's last ones on
 * DONE (the rest is the protocol's first bytes, a request or a TLS
 * ClientHello), 0 on an error. After DONE or an error, init again before
 * feeding. */
int http_proxy_parse(struct http_proxy *p,
                     const void *buf,
                     size_t len,
                     size_t *used);

#endif /* KTCP_CORE_HTTP_PROXY_H */
