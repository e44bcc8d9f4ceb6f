/* http_vhost.h — virtual hosts: which site a request's Host names (nginx's
 * server_name), from a small table of exact names and "*.suffix"
 * wildcards. The table lives in the caller's memory; nothing is
 * allocated, and a lookup reads at most HTTP_VHOSTS_MAX entries. */
#ifndef KTCP_CORE_HTTP_VHOST_H
#define KTCP_CORE_HTTP_VHOST_H

#include "compat.h"
#include "http_parser.h"

#define HTTP_VHOSTS_MAX 64
/* A host name is at most 253 bytes (RFC 1035, without the root's dot). */
#define HTTP_HOST_NAME_MAX 253

struct http_vhost_name {
    bool wildcard; /* "*.example.com": name holds ".example.com" */
    uint8_t len;
    char name[HTTP_HOST_NAME_MAX + 1]; /* lowercase, no trailing dot */
};

struct http_vhosts {
    uint32_t n;
    struct http_vhost_name h[HTTP_VHOSTS_MAX];
};

/* Add a name ("www.example.com", "*.example.com"; case and a trailing
 * dot do not matter): its index, or -1 with *why (not a host name, an IP
 * literal, a name given twice, the table full). */
int http_vhosts_add(struct http_vhosts *t,
                    const char *name,
                    size_t len,
                    const char **why);

/* The entry a parsed request's Host field (or absolute-form authority)
 * names, buf being the head its slices point into, or -1 for the default
 * site: the port is ignored, case too, and a trailing dot; an exact name
 * first, then the longest wildcard whose suffix ends the name (a wildcard
 * does not match its suffix alone); an IP literal ("127.0.0.1",
 * "[::1]:8080"), an empty or overlong value, no Host, no request: -1. */
int http_vhosts_request(const struct http_vhosts *t,
                        const struct http_request *req,
                        const char *buf);

#endif /* KTCP_CORE_HTTP_VHOST_H */
