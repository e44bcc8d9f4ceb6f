/* http_conditional.h — validators (ETag, Last-Modified) and the
 * If-None-Match / If-Modified-Since evaluation of RFC 9110 §13. */
#ifndef KTCP_CORE_HTTP_CONDITIONAL_H
#define KTCP_CORE_HTTP_CONDITIONAL_H

#include "compat.h"

/* Upper bound of what http_etag_format() writes, without NUL. */
#define HTTP_ETAG_MAX 62

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

#endif /* KTCP_CORE_HTTP_CONDITIONAL_H */
