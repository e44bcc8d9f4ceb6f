/* httpd-send.c — the output layer: a planned head, gathered with a body in
 * memory into one writev. Whether the bytes may wait in the socket for
 * more (MSG_MORE) is the caller's, from the plan. */
#include <sys/uio.h>

#include "httpd.h"

/* p's head into r->hbuf: the kept head of r->file when it fits p, else
 * built (and kept, if p's is one to keep and none is yet). */
static int plan_head(struct httpd_req *r, const struct http_plan *p)
{
    struct httpd_memo *memo =
        r->file ? &r->file->memo[p->head.keep_alive] : NULL;
    int n;

    if (!memo)
        return http_plan_head(p, r->hbuf, r->hcap);
    int state = atomic_load_explicit(&memo->state, memory_order_acquire);
    if (state == HTTPD_MEMO_READY) {
        n = http_plan_head_memo(p, &memo->m, r->hbuf, r->hcap);
        if (n > 0)
            return n;
    }
    n = http_plan_head(p, r->hbuf, r->hcap);
    /* one maker; a plan whose head is not one to keep leaves it empty */
    if (n > 0 && state == HTTPD_MEMO_EMPTY &&
        atomic_compare_exchange_strong(&memo->state, &state, HTTPD_MEMO_MAKING))
        atomic_store_explicit(&memo->state,
                              http_head_memo_make(p, &memo->m)
                                  ? HTTPD_MEMO_READY
                                  : HTTPD_MEMO_EMPTY,
                              memory_order_release);
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
        if (rt_sendv(r->c, iov, 2, false, httpd_cfg.idle_timeout_ms) > 0 &&
            !e.head_only)
            r->sent += e.body_len;
        return false;
    }
    r->status = p->status;
    struct iovec iov[2] = {
        {.iov_base = r->hbuf, .iov_len = (size_t) n},
        {.iov_base = (void *) body, .iov_len = body_len},
    };
    int cnt = (body && body_len && !p->head_only) ? 2 : 1;
    ssize_t s = rt_sendv(r->c, iov, cnt, more, httpd_cfg.idle_timeout_ms);
    if (s < 0)
        return false;
    if (cnt == 2)
        r->sent += body_len;
    return true;
}
