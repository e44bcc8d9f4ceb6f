/* Unit tests of the virtual host table: names as configured, Host values
 * as clients send them. */
#include "http_core.h"
#include "http_internal.h"
#include "unit.h"

static struct http_vhosts t;

static int add(const char *name)
{
    const char *why = NULL;
    int k = http_vhosts_add(&t, name, strlen(name), &why);

    CHECK(k >= 0 || why != NULL);
    return k;
}

static int find(const char *host)
{
    return http_vhosts_find(&t, host, strlen(host));
}

/* The entry a whole request head names (http_vhosts_request). */
static int request(const char *head)
{
    struct http_parser p;
    size_t consumed;

    http_parser_init(&p, NULL);
    CHECK_INT(http_parse_request(&p, head, strlen(head), &consumed),
              HTTP_PARSE_COMPLETE);
    return http_vhosts_request(&t, &p.req, head);
}

int main(void)
{
    memset(&t, 0, sizeof(t));
    CHECK_INT(find("a.example"), -1); /* empty table: the default */
    CHECK_INT(add("a.example"), 0);
    CHECK_INT(add("B.Example."), 1);
    CHECK_INT(add("*.example"), 2);
    CHECK_INT(add("*.deep.example"), 3);
    /* refused */
    CHECK_INT(add("a.example"), -1);
    CHECK_INT(add("A.EXAMPLE."), -1);
    CHECK_INT(add("a.example:80"), -1);
    CHECK_INT(add("127.0.0.1"), -1);
    CHECK_INT(add("[::1]"), -1);
    CHECK_INT(add(""), -1);
    CHECK_INT(add("*."), -1);
    CHECK_INT(add("a b"), -1);
    CHECK_INT(add("a/b"), -1);
    CHECK_INT(add("*x.example"), -1);

    CHECK_INT(find("a.example"), 0);
    CHECK_INT(find("A.EXAMPLE"), 0);
    CHECK_INT(find("a.example."), 0);
    CHECK_INT(find("a.example:8080"), 0);
    CHECK_INT(find("A.Example.:8080"), 0);
    CHECK_INT(find("b.example"), 1);
    CHECK_INT(find("c.example"), 2);
    CHECK_INT(find("x.y.example"), 2);
    CHECK_INT(find("x.deep.example"), 3); /* the longest wildcard */
    CHECK_INT(find("deep.example"), 2);
    CHECK_INT(find("example"), -1); /* a wildcard's suffix alone */
    CHECK_INT(find("other.test"), -1);
    CHECK_INT(find("127.0.0.1"), -1);
    CHECK_INT(find("127.0.0.1:8080"), -1);
    CHECK_INT(find("[::1]:8080"), -1);
    CHECK_INT(find("[a.example]"), -1);
    CHECK_INT(find(""), -1);
    CHECK_INT(find(":80"), -1);
    CHECK_INT(find("."), -1);
    /* a parsed request: its Host field, or an absolute-form target's
     * authority, which wins; none (HTTP/1.0), or no request: -1 */
    CHECK_INT(request("GET / HTTP/1.1\r\nHost: B.example:80\r\n\r\n"), 1);
    CHECK_INT(request("GET http://c.example/ HTTP/1.1\r\n"
                      "Host: a.example\r\n\r\n"),
              2);
    CHECK_INT(request("GET / HTTP/1.0\r\n\r\n"), -1);
    CHECK_INT(request("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), -1);
    CHECK_INT(http_vhosts_request(&t, NULL, NULL), -1);

    /* the bounds: a 253-byte name, not 254; 64 names */
    char name[300];
    memset(name, 'n', sizeof(name));
    name[253] = '\0';
    CHECK(add(name) >= 0);
    CHECK_INT(find(name), 4);
    name[253] = 'n';
    name[254] = '\0';
    CHECK_INT(add(name), -1);
    CHECK_INT(find(name), -1);
    for (int i = (int) t.n; i < HTTP_VHOSTS_MAX; i++) {
        char h[32];
        snprintf(h, sizeof(h), "h%d.test", i);
        CHECK_INT(add(h), i);
    }
    CHECK_INT(add("one-more.test"), -1);
    CHECK_INT(find("h63.test"), 63);
    UNIT_DONE();
}
