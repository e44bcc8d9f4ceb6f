/* httpd-gzip.c — one-shot gzip of a whole file with zlib, done once per
 * file version and kept in the cache (never per request), and the gzip
 * threads that build the copies off the request path.
 *
 * Why threads of their own rather than the worker after its response: a
 * worker of the epoll and M:N models serves many connections, and a
 * deflate of up to 4 MiB (tens of milliseconds) would stall every one of
 * them; a burst of first requests for distinct large files would stall
 * them all. HTTP_SERVER_GZIP_BUILDERS threads (one per two CPUs, at least
 * one) take builds from a queue of
 * at most HTTP_SERVER_GZIP_QUEUE: what a client can start costs at most
 * that many queued copies, and requests never wait for one. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "httpd.h"

struct http_gz *httpd_gzip(const char *in, size_t len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    /* windowBits 15 + 16: the gzip wrapper */
    if (deflateInit2(&zs, HTTP_SERVER_GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t bound = deflateBound(&zs, len);
    struct http_gz *gz = malloc(sizeof(*gz) + bound);
    if (!gz) {
        deflateEnd(&zs);
        return NULL;
    }
    memset(gz, 0, sizeof(*gz));
    zs.next_in = (Bytef *) in;
    zs.avail_in = (uInt) len;
    zs.next_out = (Bytef *) gz->data;
    zs.avail_out = (uInt) bound;
    int r = deflate(&zs, Z_FINISH);
    gz->len = zs.total_out;
    deflateEnd(&zs);
    if (r != Z_STREAM_END) {
        free(gz);
        return NULL;
    }
    if (gz->len >= len) {
        /* not smaller: remember that, keep nothing */
        struct http_gz *w = realloc(gz, sizeof(*gz));
        gz = w ? w : gz;
        gz->worthless = true;
        gz->len = 0;
        return gz;
    }
    struct http_gz *shrunk = realloc(gz, sizeof(*gz) + gz->len);
    return shrunk ? shrunk : gz;
}

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static struct httpd_gzip_job *queue_head, **queue_tail = &queue_head;
static unsigned int queued;

static void *builder(void *arg)
{
    (void) arg;
    urcu_memb_register_thread(); /* builds touch the cache's RCU tables */
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (!queue_head)
            pthread_cond_wait(&queue_cond, &queue_lock);
        struct httpd_gzip_job *job = queue_head;
        queue_head = job->next;
        if (!queue_head)
            queue_tail = &queue_head;
        queued--;
        pthread_mutex_unlock(&queue_lock);
        job->run(job);
    }
    return NULL;
}

int httpd_gzip_start(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int builders = cpus >= 2 ? (int) (cpus / 2) : 1;
    if (builders > HTTP_SERVER_GZIP_BUILDERS)
        builders = HTTP_SERVER_GZIP_BUILDERS;
    for (int i = 0; i < builders; i++) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&t, &a, builder, NULL);
        pthread_attr_destroy(&a);
        if (err)
            return -err;
        pthread_setname_np(t, "httpd-gzip");
    }
    return 0;
}

bool httpd_gzip_queue(struct httpd_gzip_job *job)
{
    bool ok = false;
    pthread_mutex_lock(&queue_lock);
    if (queued < HTTP_SERVER_GZIP_QUEUE) {
        job->next = NULL;
        *queue_tail = job;
        queue_tail = &job->next;
        queued++;
        ok = true;
        pthread_cond_signal(&queue_cond);
    }
    pthread_mutex_unlock(&queue_lock);
    return ok;
}
