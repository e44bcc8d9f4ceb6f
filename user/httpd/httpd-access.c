/* httpd-access.c — ktcp-httpd's address rules (--allow, --deny), checked
 * at accept through the runtime's admit hook. What a rule matches and
 * which rule decides are core's (http_access.c); here the connection's
 * address is handed to it and a denial counted. */
#include <sys/socket.h>

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
    const struct http_access *a =
        atomic_load_explicit(&httpd_cfg.access, memory_order_acquire);
    uint8_t addr[16];
    if (!a || !a->n || !client_addr(c, addr) || http_access_allowed(a, addr))
        return true;
    rt_count(HTTPD_C_DENIED, 1);
    return false;
}
