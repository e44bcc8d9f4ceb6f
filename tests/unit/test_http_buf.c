/* Unit tests of the request buffer's make-room (http_buf.c). */
#include <stdlib.h>

#include "http_buf.h"
#include "http_limits.h"
#include "unit.h"

static int grows;
static bool grow_fails;

static void *test_grow(void *p, size_t size)
{
    grows++;
    return grow_fails ? NULL : realloc(p, size);
}

static void test_reqbuf_room(void)
{
    size_t cap = 16, start = 0, len = 10;
    char *buf = malloc(cap);

    /* room left: nothing moves */
    memcpy(buf, "GET / HTTP", 10);
    CHECK(http_reqbuf_make_room(&buf, &start, &len, &cap, test_grow));
    CHECK_INT(len, 10);
    CHECK_INT(cap, 16);
    /* full, the request not at the front: it slides */
    memcpy(buf, "0123456789ABCDEF", 16);
    start = 10;
    len = 16;
    CHECK(http_reqbuf_make_room(&buf, &start, &len, &cap, test_grow));
    CHECK_INT(start, 0);
    CHECK_INT(len, 6);
    CHECK_INT(cap, 16);
    CHECK_MEM(buf, 6, "ABCDEF");
    CHECK_INT(grows, 0);
    /* full from the front: it doubles, its bytes kept, up to the bound */
    buf = realloc(buf, HTTP_SERVER_REQ_BUF_INITIAL);
    cap = len = HTTP_SERVER_REQ_BUF_INITIAL;
    memcpy(buf, "GET /", 5);
    CHECK(http_reqbuf_make_room(&buf, &start, &len, &cap, test_grow));
    CHECK_INT(cap, 2 * HTTP_SERVER_REQ_BUF_INITIAL);
    CHECK_INT(len, HTTP_SERVER_REQ_BUF_INITIAL);
    CHECK_MEM(buf, 5, "GET /");
    CHECK_INT(grows, 1);
    /* memory short: no room, the buffer as it was */
    len = cap;
    grow_fails = true;
    CHECK(!http_reqbuf_make_room(&buf, &start, &len, &cap, test_grow));
    CHECK_INT(cap, 2 * HTTP_SERVER_REQ_BUF_INITIAL);
    CHECK_MEM(buf, 5, "GET /");
    grow_fails = false;
    while (cap < HTTP_SERVER_REQ_BUF_MAX) {
        len = cap;
        CHECK(http_reqbuf_make_room(&buf, &start, &len, &cap, test_grow));
    }
    CHECK_INT(cap, HTTP_SERVER_REQ_BUF_MAX);
    len = cap;
    grows = 0;
    CHECK(!http_reqbuf_make_room(&buf, &start, &len, &cap, test_grow));
    CHECK_INT(grows, 0); /* at the bound: no growth asked */
    CHECK_INT(cap, HTTP_SERVER_REQ_BUF_MAX);
    free(buf);
}

int main(void)
{
    test_reqbuf_room();
    UNIT_DONE();
}
