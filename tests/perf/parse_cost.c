/* parse_cost.c — the request parser alone, for instruction counts.
 *
 * Parses one fixed request head N times the way the servers do (init,
 * header store, parse) so that callgrind can count the parser's
 * instructions without a server around it:
 *
 *   gcc -O2 -std=gnu11 -Icore -o build/parse_cost tests/perf/parse_cost.c \
 *       core/http_parser.c
 *   valgrind --tool=callgrind build/parse_cost small 1000
 *   valgrind --tool=callgrind build/parse_cost small 2000
 *
 * (difference / 1000 = instructions per request). "small" is the head
 * tools/htstress.c sends; "browser" is a head with the fields a browser or
 * wrk-like client sends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parser.h"

static const char small_head[] =
    "GET /small.txt HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "\r\n";

static const char browser_head[] =
    "GET /index.html HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 "
    "Firefox/128.0\r\n"
    "Accept: "
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Connection: keep-alive\r\n"
    "If-Modified-Since: Tue, 24 Nov 2026 03:54:02 GMT\r\n"
    "\r\n";

int main(int argc, char **argv)
{
    static struct http_parser p;
    static struct http_header h[32];
    const char *head = small_head;
    size_t len, consumed = 0;
    long i, n;
    unsigned long sum = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s small|browser N\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "browser") == 0)
        head = browser_head;
    len = strlen(head);
    n = atol(argv[2]);
    for (i = 0; i < n; i++) {
        struct http_limits limits = {8192, 16384, 100, 1024 * 1024};
        int rc;

        http_parser_init(&p, &limits);
        http_parser_set_header_store(&p, h, 32);
        rc = http_parse_request(&p, head, len, &consumed);
        if (rc != HTTP_PARSE_COMPLETE || consumed != len) {
            fprintf(stderr, "parse failed: %d\n", rc);
            return 1;
        }
        sum += p.req.header_count;
    }
    printf("%lu\n", sum);
    return 0;
}
