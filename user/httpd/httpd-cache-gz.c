/* httpd-cache-gz.c — the gzip copies of cached objects: a copy is built
 * by the gzip threads (httpd-gzip.c), once per object (its building flag),
 * and published by core (http_cache_gz); until then requests get
 * identity. Only a small body already in memory is compressed on the
 * spot; an entry out of the table gets no copy (core's http_cache_gz_make
 * decides). Here: the build's job and its queueing (core's
 * http_cache_gz_build reads the file and publishes the copy); the objects
 * and their references are httpd-cache.c's. */
#include <stdlib.h>
#include <string.h>

#include "httpd.h"

struct build {
    struct httpd_gzip_job job;
    struct http_cache_obj *obj;
    struct httpd_root root; /* the entry's tree: a reload may close it,
                               and then the object's identity check
                               refuses what the descriptor opens */
    char path[];
};

static const struct http_cache_gz_ops gz_ops;

static void build_run(struct httpd_gzip_job *job)
{
    struct build *b = caa_container_of(job, struct build, job);
    http_cache_gz_build(&httpd_cache_core, b->obj, &b->root, b->path, &gz_ops,
                        httpd_cfg.cache_size);
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
    b->obj = e->obj;
    b->root = f->root;
    memcpy(b->path, f->path, f->path_len + 1);
    if (httpd_gzip_queue(&b->job))
        return true;
    http_cache_obj_put(&httpd_cache_core, b->obj); /* the queue is full */
    free(b);
    return false;
}

static const struct http_cache_gz_ops gz_ops = {httpd_gzip, queue, httpd_gzip,
                                                NULL};

const struct http_gz *httpd_cache_gzip(struct httpd_file *f)
{
    return http_cache_gz(&httpd_cache_core, &f->c, &gz_ops,
                         httpd_cfg.cache_size);
}
