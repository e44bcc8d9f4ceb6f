/* Unit tests of the request buffer's make-room (http_buf.c). */
#include "http_buf.h"
#include "http_limits.h"
#include "unit.h"

static void test_reqbuf_room(void)
{
    static char buf[HTTP_SERVER_REQ_BUF_MAX];
    size_t start = 0, len = 10;

    /* room left: nothing moves */
    memcpy(buf, "GET / HTTP", 10);
    CHECK_INT(http_reqbuf_room(buf, &start, &len, 16), 16);
    CHECK_INT(len, 10);
    /* full, the request not at the front: it slides */
    memcpy(buf, "0123456789ABCDEF", 16);
    start = 10;
    len = 16;
    CHECK_INT(http_reqbuf_room(buf, &start, &len, 16), 16);
    CHECK_INT(start, 0);
    CHECK_INT(len, 6);
    CHECK_MEM(buf, 6, "ABCDEF");
    /* full from the front: it doubles, up to the bound */
    start = 0;
    len = HTTP_SERVER_REQ_BUF_INITIAL;
    CHECK_INT(http_reqbuf_room(buf, &start, &len, HTTP_SERVER_REQ_BUF_INITIAL),
              2 * HTTP_SERVER_REQ_BUF_INITIAL);
    CHECK_INT(len, HTTP_SERVER_REQ_BUF_INITIAL);
    len = HTTP_SERVER_REQ_BUF_MAX / 2;
    CHECK_INT(http_reqbuf_room(buf, &start, &len, HTTP_SERVER_REQ_BUF_MAX / 2),
              HTTP_SERVER_REQ_BUF_MAX);
    len = HTTP_SERVER_REQ_BUF_MAX;
    CHECK_INT(http_reqbuf_room(buf, &start, &len, HTTP_SERVER_REQ_BUF_MAX), 0);
}

int main(void)
{
    test_reqbuf_room();
    UNIT_DONE();
}
