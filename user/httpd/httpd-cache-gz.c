/* httpd-cache-gz.c — the gzip copies of cached objects: a copy is built
 * by the gzip threads (httpd-gzip.c), once per object (its building flag),
 * and published by core (http_cache_gz); until then requests get
 * identity. Only a small body already in memory is compressed on the
 * spot; an entry out of the table gets no copy (core's http_cache_gz_make
 * decides). Here: the build's job, its read of the file and its queueing;
 * the objects and their references are httpd-cache.c's. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

/* The not-smaller marker, for a build that cannot read its file: identity
 * for this version from then on, and no build again. */
static struct http_gz *gz_worthless(void)
{
    struct http_gz *gz = calloc(1, sizeof(*gz));
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
    char *tmp = NULL;
    const char *src = o->c.body;

    if (!src) {
        /* the file as the object knows it, or nothing */
        int fd = httpd_open_beneath(b->root, b->path, O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && httpd_obj_is(&o->c, &st) &&
            (tmp = malloc(o->c.id.size ? o->c.id.size : 1)) &&
            httpd_read_all(fd, tmp, o->c.id.size) == 0)
            src = tmp;
        if (fd >= 0)
            close(fd);
    }
    http_cache_gz_built(&httpd_cache_core, &o->c,
                        src ? httpd_gzip(src, o->c.id.size) : gz_worthless(),
                        httpd_cfg.cache_size);
    free(tmp);
    httpd_obj_put(o);
    free(b);
}

static bool queue(struct http_cache_entry *e)
{
    struct httpd_file *f = caa_container_of(e, struct httpd_file, c);
    struct build *b = malloc(sizeof(*b) + f->path_len + 1);
    if (!b)
        return false;
    b->job.run = build_run;
    http_ref_get(&e->obj->refs); /* the build's */
    b->obj = httpd_obj_of(f);
    b->root = f->root.fd;
    memcpy(b->path, f->path, f->path_len + 1);
    if (httpd_gzip_queue(&b->job))
        return true;
    httpd_obj_put(b->obj); /* the queue is full */
    free(b);
    return false;
}

static const struct http_cache_gz_ops gz_ops = {httpd_gzip, queue};

const struct http_gz *httpd_cache_gzip(struct httpd_file *f)
{
    return http_cache_gz(&httpd_cache_core, &f->c, &gz_ops,
                         httpd_cfg.cache_size);
}
