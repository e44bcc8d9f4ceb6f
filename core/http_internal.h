/* http_internal.h — what core's own files call one another with, and its
 * unit tests (tests/unit) with them: nothing here is the engines' API.
 * The public headers (http_*.h) hold only what kernel/ or user/ call;
 * make check-layers keeps it that way (scripts/check-layers).
 */
#ifndef KTCP_CORE_HTTP_INTERNAL_H
#define KTCP_CORE_HTTP_INTERNAL_H

#include "http_access.h"
#include "http_buf.h"
#include "http_cache.h"
#include "http_conditional.h"
#include "http_date.h"
#include "http_encoding.h"
#include "http_headers.h"
#include "http_listing.h"
#include "http_mime.h"
#include "http_parser.h"
#include "http_path.h"
#include "http_plan.h"
#include "http_range.h"
#include "http_response.h"
#include "http_vhost.h"

/* ---- http_access.h ---- */

/* s[0..len): an IPv4 address (dotted quad, each part 0..255 without
 * leading zeros) or an IPv6 address (RFC 4291 text, "::" once, an IPv4
 * tail allowed; no zone), optionally "/N" (IPv4 0..32, IPv6 0..128; no
 * prefix: one address), or "all". Host bits after the prefix must be
 * zero: "10.0.0.1/8" is refused rather than read as 10.0.0.0/8. 0, or -1
 * with *why saying what is wrong. */
int http_cidr_parse(const char *s,
                    size_t len,
                    struct http_access_rule *out,
                    const char **why);

/* ---- http_buf.h ---- */

/* Decimal/hex digits of v into out (no NUL); returns the count (<= 20). */
size_t http_format_u64(uint64_t v, char *out);

size_t http_format_hex(uint64_t v, char *out);

/* ---- http_cache.h ---- */

/* What a path entry costs: the fixed overhead, its path and extra bytes
 * the engine keeps with it. */
size_t http_cache_entry_charge(size_t path_len, size_t extra);
/* What an object costs with body bytes of its file kept in memory. */
size_t http_cache_obj_charge(size_t body);
void http_cache_acct_charge(struct http_cache_acct *a, size_t bytes, int objs);

/* A gzip copy of len bytes (its head of head bytes) added to an object;
 * a worthless one (not smaller, or unreadable) costs its head alone. */
size_t http_cache_gz_charge(size_t head, size_t len, bool worthless);
/* Can an entry and its object be kept within budget bytes? One that
 * cannot is served once and freed by its last put. */
bool http_cache_keeps(size_t entry_charge, size_t obj_charge, size_t budget);
/* The bytes an entry leaving the table holds from now on (its held, for
 * its release): its own charge, and its object's when sole (the object's
 * only holder). */
size_t http_cache_acct_hold(struct http_cache_acct *a,
                            size_t entry_charge,
                            size_t obj_charge,
                            bool sole);
/* A hit (at most once per HTTP_SERVER_LRU_TOUCH_MS, http_cache_due): to
 * the front. */
void http_lru_touch(struct http_lru *l, struct http_lru_node *n);
/* An entry out of the table (evicted, stale, replaced): off the list and
 * onto *gone, whose entries the caller puts after dropping its lock. */
void http_lru_leave(struct http_lru_node *n, struct http_lru_node **gone);
/* After a charge (a new copy, a listing's table): when over budget
 * (http_cache_acct_over), take the lock, evict, drop it and put what
 * left. */
void http_cache_evict_if_over(struct http_cache *c, size_t budget);
/* Under the lock: n's entry, just put into the table, to the LRU front;
 * an eviction onto *gone when the table is over budget. */
void http_cache_enter_locked(struct http_cache *c,
                             struct http_lru_node *n,
                             size_t budget,
                             struct http_lru_node **gone);

/* What leaves with an entry's last put: its own charge, and its object's
 * when the entry is the object's only holder. */
size_t http_cache_leaving(size_t entry_charge, size_t obj_charge, bool sole);
/* Is an insert or a new gzip copy to start an eviction: bytes (in the
 * table) past the budget? */
bool http_cache_over(size_t bytes, size_t budget);
/* The bytes an eviction can free: the total charged less what entries out
 * of the table still hold until their last put (never below zero: the
 * two counters are read apart). */
static inline size_t http_cache_published(size_t total, size_t held)
{
    return total > held ? total - held : 0;
}

/* Does an eviction take the next entry from the LRU tail
 * (http_lru_victim)? Until the bytes in the table are at most 90% of the
 * budget. */
bool http_cache_evict_more(size_t bytes, size_t budget);
/* The bytes an eviction can free now (http_cache_published of the two
 * counters): what http_lru_victim walks down. */
size_t http_cache_acct_published(const struct http_cache_acct *a);
/* Is an insert or a new copy to start an eviction (http_cache_over of the
 * bytes an eviction can free)? */
bool http_cache_acct_over(const struct http_cache_acct *a, size_t budget);
/* e leaves the table (or never enters it): its bytes, and its object's
 * when it is the object's only holder, count as held until its last put. */
void http_cache_hold(struct http_cache *c, struct http_cache_entry *e);
/* An entry into the table: to the front. */
void http_lru_add(struct http_lru *l, struct http_lru_node *n);
/* Under the lock: evict from the LRU tail while the bytes in the table
 * (http_cache_acct_published) are above 90% of budget
 * (HTTP_SERVER_CACHE_LOW_TENTHS), onto *gone: O(1) per entry evicted. */
void http_cache_evict_locked(struct http_cache *c,
                             size_t budget,
                             struct http_lru_node **gone);
/* An entry's or object's last put: bytes (held of them) and objs
 * released. */
void http_cache_acct_release(struct http_cache_acct *a,
                             size_t bytes,
                             size_t held,
                             int objs);
/* A build of o's copy is over: gz published and charged, or (NULL: out
 * of memory) the building flag down for a later try. */
void http_cache_gz_built(struct http_cache *c,
                         struct http_cache_obj *o,
                         struct http_gz *gz,
                         size_t budget);
/* The next entry of a gone list to put, taken off it; NULL at its end. */
struct http_lru_node *http_lru_pop(struct http_lru_node **gone);
/* A stale entry (found, referenced, and no longer what the file system
 * has): out of the table (the lock taken and dropped), the table's
 * reference put, and the finder's. */
void http_cache_drop(struct http_cache *c, struct http_lru_node *n);

/* A load's new object of version id with body (the whole file, or NULL:
 * none kept): its shared part set (one reference, its loader's) and
 * charged, before it can be seen in the engine's table. */
void http_cache_obj_made(struct http_cache *c,
                         struct http_cache_obj *o,
                         const struct http_file_id *id,
                         char *body);
/* An object http_cache_obj_made charged that never entered the table
 * (another load published its version first): its charge returned, and
 * the object freed. */
void http_cache_obj_lost(struct http_cache *c, struct http_cache_obj *o);
/* o (http_cache_obj_made) into the object table (struct http_cache): NULL; or,
 * when the table has the object of its version (a concurrent load's), that one,
 * referenced, and o stays out. */
struct http_cache_obj *http_cache_obj_add(struct http_cache *c,
                                          struct http_cache_obj *o);
/* A load's new entry, of path rel (len bytes) and the file's version id,
 * at now_ms: its shared part (one reference, its loader's; both stamps)
 * and the planner's resource (its meta). */
void http_cache_entry_made(struct http_cache_entry *e,
                           const char *rel,
                           size_t len,
                           const struct http_file_id *id,
                           uint64_t now_ms);
/* e's object o (the loader's reference, now e's): its body in e and its
 * meta, e charged (http_cache_entry_charge of len path bytes and extra). */
void http_cache_entry_holds(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_cache_obj *o,
                            size_t len,
                            size_t extra);
/* A new entry e (referenced by its loader) into the table, replacing the
 * entry of its key, and to the LRU front; false when it cannot be kept
 * within budget (served once, its bytes held until its last put). */
bool http_cache_publish(struct http_cache *c,
                        struct http_cache_entry *e,
                        size_t budget);

void http_cache_touch_locked(struct http_cache *c, struct http_cache_entry *e);
/* A hit: to the LRU front, unless it went there a moment ago (the lock
 * only then). Inline: every hit asks. */
static inline void http_cache_touch(struct http_cache *c,
                                    struct http_cache_entry *e,
                                    uint64_t now_ms)
{
    if (http_cache_claim(&e->used, now_ms, HTTP_SERVER_LRU_TOUCH_MS))
        http_cache_touch_locked(c, e);
}

/* The entry an eviction takes next: the list's tail while the bytes in
 * the table are above 90% of the budget (HTTP_SERVER_CACHE_LOW_TENTHS),
 * else NULL. The caller takes it
 * out of its table and the list (http_lru_leave), so that bytes drop or
 * the list shrinks: the walk ends within the list's length. */
struct http_lru_node *http_lru_victim(const struct http_lru *l,
                                      size_t bytes,
                                      size_t budget);

/* ---- http_conditional.h ---- */

/* Strong, quoted ETag "<mtime hex>.<mtime_nsec hex>-<size hex>-<ino hex>"
 * into out[HTTP_ETAG_MAX + 1], NUL-terminated; returns its length. A zero
 * nanosecond part or inode is left out (then it is nginx's shape
 * "<mtime>-<size>"). The nanoseconds and the inode make a same-size
 * rewrite within one second, or a file replaced by rename, a new tag. */
size_t http_etag_format(uint64_t size,
                        int64_t mtime,
                        uint32_t mtime_nsec,
                        uint64_t ino,
                        char *out);

/* Does an If-None-Match field value match etag (quoted, as formatted)?
 * "*" matches; list members compare weakly (W/ prefixes ignored). A
 * malformed list matches nothing (the full response is the safe answer). */
bool http_if_none_match_matches(const char *field,
                                size_t field_len,
                                const char *etag,
                                size_t etag_len);

/* True if an If-Modified-Since field value is a valid date and mtime is
 * not later than it. */
bool http_if_modified_since_unmodified(const char *field,
                                       size_t field_len,
                                       int64_t mtime);

/* RFC 9110 §13.2.2 for GET/HEAD: If-None-Match when present decides alone,
 * otherwise If-Modified-Since. NULL field = absent. Returns 304 or 200. */
int http_conditional_status(const char *if_none_match,
                            size_t inm_len,
                            const char *if_modified_since,
                            size_t ims_len,
                            const char *etag,
                            size_t etag_len,
                            int64_t mtime);

/* The validator of another representation of the same file (the gzip
 * copy): etag with "-<suffix>" inside the quotes, into
 * out[HTTP_ETAG_MAX + 1 + 1 + strlen(suffix)]; returns its length. An etag
 * that is not quoted is copied unchanged. */
size_t http_etag_variant(const char *etag, const char *suffix, char *out);

/* If-Range (RFC 9110 §13.1.5): does the field name this representation?
 * An entity-tag matches only strongly (W/ never does), a date only when it
 * is exactly the Last-Modified time. A false answer means: ignore Range and
 * send the whole representation. */
bool http_if_range_holds(const char *field,
                         size_t field_len,
                         const char *etag,
                         size_t etag_len,
                         int64_t mtime);

/* ---- http_date.h ---- */

/* Parse IMF-fixdate, RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT"; two-digit
 * years 70..99 are 19xx, 00..69 are 20xx) or asctime ("Sun Nov  6 08:49:37
 * 1994"). Surrounding whitespace is allowed. Returns false if malformed. */
bool http_date_parse(const char *s, size_t len, int64_t *t);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t http_days_from_civil(int64_t year, unsigned month, unsigned day);

void http_civil_from_days(int64_t days,
                          int64_t *year,
                          unsigned *month,
                          unsigned *day);

/* ---- http_encoding.h ---- */

/* Parse a qvalue ("1", "0.5", "0.125", "1.000") into 0..1000, or -1. */
int http_qvalue_parse(const char *s, size_t len);

/* Choose the response coding. field NULL = header absent (identity).
 * gzip_available: the server has (or can make) a gzip copy. gzip (or its
 * alias x-gzip) wins over identity on equal q; q=0 excludes; "*" covers
 * codings not listed; identity is acceptable unless excluded. */
enum http_encoding http_accept_encoding_negotiate(const char *field,
                                                  size_t len,
                                                  bool gzip_available);

/* ---- http_headers.h ---- */

/* The fields (as a mask of t->h) for a request path normalised by
 * http_path_normalize (rel, its info's is_root and trailing_slash). */
uint32_t http_headers_match(const struct http_headers *t,
                            const char *rel,
                            size_t rel_len,
                            bool is_root,
                            bool trailing_slash);

/* Append the lines of mask and the CORS line to b. */
void http_headers_append(struct http_buf *b,
                         const struct http_headers *t,
                         uint32_t mask);

/* ---- http_listing.h ---- */

/* Building blocks of the listing and of the planner's Location headers.
 * They return -1 (and keep nothing) if b is too small. */
int http_html_escape(struct http_buf *b, const char *s, size_t len);

/* Percent-encode everything except unreserved bytes and, when keep_slash,
 * '/'. */
int http_url_encode(struct http_buf *b,
                    const char *s,
                    size_t len,
                    bool keep_slash);

/* ---- http_mime.h ---- */

/* Type for an extension (no dot, any case); NULL if unknown. */
const struct http_mime_type *http_mime_by_extension(const char *ext,
                                                    size_t len);

/* Type for the last segment of a path; application/octet-stream (not
 * compressible) when the extension is missing or unknown. Never NULL. */
const struct http_mime_type *http_mime_for_path(const char *path, size_t len);

/* The type for a path's extension in t (t may be NULL), falling back to
 * the built-in table (http_mime_for_path). Never NULL. */
const struct http_mime_type *http_mime_table_for_path(
    const struct http_mime_table *t,
    const char *path,
    size_t len);

/* ---- http_parser.h ---- */

/* Short stable identifier ("bare-cr", ...) for logs and tests. */
const char *http_parse_error_name(int result);

/* Find a header by name (case-insensitive) in the stored headers. */
const struct http_header *http_request_find_header(const struct http_parser *p,
                                                   const char *buf,
                                                   const char *name);

const char *http_method_name(enum http_method m);

/* Whether buf[0..len) holds a whole request head (up to its blank line),
 * after any empty lines a client may send first. Engines cork a response
 * (MSG_MORE) only when this says the next request can be answered at once:
 * corked behind a partial head, a response would wait in the socket until
 * TCP's probe timer (~200 ms). Whether the head is valid is the parser's
 * business; an invalid one gets an error response, which pushes anyway. */
bool http_head_buffered(const char *buf, size_t len);

void http_chunked_init(struct http_chunked_decoder *d,
                       uint64_t max_body,
                       uint32_t max_trailer_bytes);
/* Consume from buf[0..len). *consumed is always set; on HTTP_CHUNKED_DATA
 * the data is buf[*data_off .. *data_off + *data_len) and lies inside the
 * consumed bytes. Call again with the rest (buf + *consumed). */
int http_chunked_decode(struct http_chunked_decoder *d,
                        const char *buf,
                        size_t len,
                        size_t *consumed,
                        size_t *data_off,
                        size_t *data_len);

/* ---- http_path.h ---- */

int http_path_normalize(const char *path,
                        size_t path_len,
                        char *out,
                        size_t out_size,
                        struct http_path_info *info);

/* Is a normalised path (as http_path_normalize gives it) hidden, that is
 * does one of its segments start with '.' (".env", ".git/config",
 * "a/.htpasswd")? The root "." is not, and neither is ".well-known" as the
 * first segment (RFC 8615: ACME challenges, security.txt); a dot segment
 * beneath it is. Servers answer 404 for hidden paths unless the operator
 * allows dotfiles. */
bool http_path_hidden(const char *rel, size_t len);

/* 403 for an escape above the root, 414 for too long, else 400. */
int http_path_error_status(int result);

const char *http_path_error_name(int result);

/* ---- http_plan.h ---- */

/* Look path's type up in the operator's table t once, for every plan that
 * runs with the same table (the planner falls back to a lookup per request
 * for a resource made without it). */
void http_resource_use_table(struct http_resource *r,
                             const struct http_mime_table *t,
                             const char *path,
                             size_t path_len);

/* Should a cache keep this file's whole body? Small regular files do, when
 * they take at most a quarter of the cache. */
bool http_resource_keep_body(const struct http_resource *r,
                             uint64_t cache_bytes);

/* The planner's resource of a file (http_cache_entry_made fills an
 * entry's from the file's version). */
void http_resource_init(struct http_resource *r,
                        const char *path,
                        size_t path_len,
                        bool is_dir,
                        uint64_t size,
                        int64_t mtime,
                        uint32_t mtime_nsec,
                        uint64_t ino);

/* Status for a failed lookup or open (-errno): 404 for what is not there,
 * 403 for what leads out of the root or may not be read, 503 (with
 * Retry-After) for an open that would have waited (a lease being broken),
 * 500 otherwise. */
int http_errno_status(int err);

/* ---- http_range.h ---- */

/* Parse a Range field value against a representation of size bytes.
 * Accepts "bytes=a-b", "bytes=a-", "bytes=-n" (unit case-insensitive,
 * whitespace around the spec allowed). On SATISFIABLE, *first and *last
 * are inclusive offsets with last < size. */
int http_range_parse(const char *field,
                     size_t len,
                     uint64_t size,
                     uint64_t *first,
                     uint64_t *last);

/* Parse a Range field with one or several range-specs, comma separated
 * (empty elements skipped). IGNORE when any spec is malformed, when there
 * are more than HTTP_RANGES_MAX specs, or when the satisfiable ranges add
 * up to more bytes than size (overlaps); UNSATISFIABLE when none is
 * satisfiable; else SATISFIABLE with rs holding the satisfiable ranges in
 * the order asked (the unsatisfiable ones dropped, RFC 9110 §14.1.1); rs->n is
 * 0 unless SATISFIABLE. */
int http_ranges_parse(const char *field,
                      size_t len,
                      uint64_t size,
                      struct http_range_set *rs);

/* ---- http_response.h ---- */

/* Reason phrase of every status the servers send; "Unknown" otherwise. */
const char *http_status_reason(int status);

/* "HTTP/1.1 200 OK\r\n". version is 10 or 11 (see enum http_version);
 * the response is 1.1 either way as RFC 9110 asks, except that a 1.0
 * client gets "HTTP/1.0" only when version == 10 is passed on purpose. */
void http_response_status_line(struct http_buf *b, int version, int status);

/* "Name: value\r\n". A value holding CR, LF or NUL is refused (header
 * injection): the buffer is poisoned (b->overflow) and -1 returned. */
int http_response_header_len(struct http_buf *b,
                             const char *name,
                             const char *value,
                             size_t value_len);

/* "Content-Range: bytes first-last/size". */
void http_response_content_range(struct http_buf *b,
                                 uint64_t first,
                                 uint64_t last,
                                 uint64_t size);

/* Returns the head length, or -1 if it did not fit (or a value was
 * invalid); b->len is then meaningless. */
int http_response_build(struct http_buf *b, const struct http_response_head *h);

/* ---- http_vhost.h ---- */

/* The entry a Host field's value names, or -1 for the default site, as
 * http_vhosts_request says. */
int http_vhosts_find(const struct http_vhosts *t, const char *host, size_t len);

#endif /* KTCP_CORE_HTTP_INTERNAL_H */
