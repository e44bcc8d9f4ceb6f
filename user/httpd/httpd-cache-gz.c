/* httpd-cache-gz.c — the gzip copies of cached objects: a copy is built
 * by the gzip threads (httpd-gzip.c), once per object (its building flag),
 * and published with an atomic store; until then requests get identity.
 * Only a small body already in memory is compressed on the spot; an entry
 * out of the table gets no copy (core's http_cache_gz_make decides). The
 * objects, their references and the charge are httpd-cache.c's. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

/* Publish gz as o's copy (once) and charge it. */
static const struct httpd_gz *publish(struct httpd_obj *o, struct httpd_gz *gz)
{
    struct httpd_gz *expected = NULL;
    if (!atomic_compare_exchange_strong(&o->gz, &expected, gz)) {
        free(gz); /* cannot happen with the building flag; be safe */
        return expected;
    }
    httpd_cache_charge(
        o, http_cache_gz_charge(sizeof(*gz), gz->len, gz->worthless));
    return gz;
}

/* The not-smaller marker, for a build that cannot read its file: identity
 * for this version from then on, and no build again. */
static struct httpd_gz *gz_worthless(void)
{
    struct httpd_gz *gz = calloc(1, sizeof(*gz));
    if (gz)
        gz->worthless = true;
    return gz;
}

struct build {
    struct httpd_gzip_job job;
    struct httpd_obj *obj;
    int root; /* the entry's tree: a reload may close it, and then the
                 object's identity check refuses what the descriptor
                 opens */
    char path[];
};

static void build_run(struct httpd_gzip_job *job)
{
    struct build *b = caa_container_of(job, struct build, job);
    struct httpd_obj *o = b->obj;
    struct httpd_gz *gz = NULL;
    char *tmp = NULL;
    const char *src = o->body;

    if (!src) {
        /* the file as the object knows it, or nothing */
        int fd = httpd_open_beneath(b->root, b->path, O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && httpd_obj_is(o, &st) &&
            (tmp = malloc(o->id.size ? o->id.size : 1)) &&
            httpd_read_all(fd, tmp, o->id.size) == 0)
            src = tmp;
        if (fd >= 0)
            close(fd);
    }
    gz = src ? httpd_gzip(src, o->id.size) : gz_worthless();
    free(tmp);
    if (gz)
        publish(o, gz);
    else
        atomic_store(&o->building, false); /* out of memory: a later try */
    httpd_obj_put(o);
    free(b);
}

const struct httpd_gz *httpd_cache_gzip(struct httpd_file *f)
{
    struct httpd_obj *o = f->obj;
    struct httpd_gz *gz = atomic_load(&o->gz);
    if (gz)
        return gz;
    enum http_cache_gz_make make =
        http_cache_gz_make(atomic_load(&f->in_table), o->body, o->id.size);
    /* being built: identity until it is there */
    if (make == HTTP_CACHE_GZ_NONE || atomic_exchange(&o->building, true))
        return NULL;
    if (make == HTTP_CACHE_GZ_INLINE) {
        gz = httpd_gzip(o->body, o->id.size);
        if (gz)
            return publish(o, gz);
        atomic_store(&o->building, false);
        return NULL;
    }
    struct build *b = malloc(sizeof(*b) + f->path_len + 1);
    if (!b) {
        atomic_store(&o->building, false);
        return NULL;
    }
    b->job.run = build_run;
    atomic_fetch_add(&o->refs, 1); /* the build's */
    b->obj = o;
    b->root = f->root.fd;
    memcpy(b->path, f->path, f->path_len + 1);
    if (!httpd_gzip_queue(&b->job)) {
        /* the queue is full: a later request tries again */
        atomic_store(&o->building, false);
        httpd_obj_put(o);
        free(b);
    }
    return NULL;
}
