/* httpd-send.c — the output layer: a planned head, gathered with a body in
 * memory into one writev. Whether the bytes may wait in the socket for
 * more (MSG_MORE) is the caller's, from the plan. */
#define _LGPL_SOURCE /* liburcu's read-side lock inline */
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "httpd.h"

/* p's head into r->hbuf: the kept head of r->file when it has one of p's
 * kind, else built (and kept, if p's is one to keep and none is yet). */
static int plan_head(struct httpd_req *r, const struct http_plan *p)
{
    int kind = r->file ? http_head_memo_kind(p) : HTTP_HEAD_MEMO_NONE;
    if (kind == HTTP_HEAD_MEMO_NONE)
        return http_plan_head(p, r->hbuf, r->hcap);
    struct http_head_memo *_Atomic *slot =
        &r->file->memo[kind][p->head.keep_alive];
    struct http_head_memo *m = atomic_load_explicit(slot, memory_order_acquire);
    int n;
    if (m) {
        n = http_plan_head_memo(p, kind, m, r->hbuf, r->hcap);
        if (n > 0)
            return n;
    }
    n = http_plan_head(p, r->hbuf, r->hcap);
    if (n > 0 && !m) {
        /* the first of its kind keeps it; of two at once, one wins */
        struct http_head_memo *made = malloc(sizeof(*made));
        struct http_head_memo *none = NULL;
        if (made && (!http_head_memo_make(p, made) ||
                     !atomic_compare_exchange_strong(slot, &none, made)))
            free(made);
    }
    return n;
}

bool httpd_send_head(struct httpd_req *r,
                     const struct http_plan *p,
                     const void *body,
                     size_t body_len,
                     bool more)
{
    int n = plan_head(r, p);
    if (n < 0) {
        /* no planned head is that long; should one be, the client gets
         * the plan's 500 and a close rather than nothing */
        struct http_plan e = *p;
        http_plan_head_failed(&e);
        n = http_plan_head(&e, r->hbuf, r->hcap);
        if (n < 0)
            return false;
        r->status = e.status;
        struct iovec iov[2] = {
            {.iov_base = r->hbuf, .iov_len = (size_t) n},
            {.iov_base = e.text, .iov_len = e.head_only ? 0 : e.body_len},
        };
        httpd_live_leave(r); /* the head is built: the first wait next */
        if (rt_sendv(r->c, iov, 2, e.more, httpd_cfg.idle_timeout_ms) > 0 &&
            !e.head_only)
            r->sent += e.body_len;
        rt_shutdown_write(r->c); /* the close's FIN pushes the end */
        return false;
    }
    r->status = p->status;
    struct iovec iov[2] = {
        {.iov_base = r->hbuf, .iov_len = (size_t) n},
        {.iov_base = (void *) body, .iov_len = body_len},
    };
    int cnt = (body && body_len && !p->head_only) ? 2 : 1;
    httpd_live_leave(r); /* the head is built: the first wait next */
    ssize_t s = rt_sendv(r->c, iov, cnt, more, httpd_cfg.idle_timeout_ms);
    if (s < 0)
        return false;
    if (cnt == 2)
        r->sent += body_len;
    return true;
}
