/* http_limits.h — the numbers both engines share: sizes, counts and
 * times that shape what a server keeps, sends and accepts. An engine
 * never defines its own copy of one of these. */
#ifndef KTCP_CORE_HTTP_LIMITS_H
#define KTCP_CORE_HTTP_LIMITS_H

#include "http_headers.h"
#include "http_parser.h"

/* Files up to this size keep their body in the cache and leave with the
 * head in one send; bigger ones are opened per request and sent from the
 * page cache (sendfile, splice). */
#define HTTP_SERVER_SMALL_FILE_MAX (64 * 1024)
/* gzip copies are made for compressible files up to this size; bigger ones
 * go out as identity (compressing them would stall a worker too long). */
#define HTTP_SERVER_GZIP_MAX (4 * 1024 * 1024)
/* zlib's level for gzip copies: its default trade-off. */
#define HTTP_SERVER_GZIP_LEVEL 6
/* A gzip copy is built off the request path: the requests before it is
 * ready get identity. Only a body already in memory and at most this big
 * is compressed on the spot (about a millisecond). */
#define HTTP_SERVER_GZIP_INLINE_MAX (64 * 1024)
/* Background gzip builds: at most this many run at once (and at most one
 * per two CPUs, so builds never take every CPU from the connections), at
 * most this many wait; a file whose build finds the queue full is queued
 * by a later request. A build deflates in slices of this many input bytes,
 * yielding the CPU between them. */
#define HTTP_SERVER_GZIP_BUILDERS 2
#define HTTP_SERVER_GZIP_QUEUE 64
#define HTTP_SERVER_GZIP_SLICE (64 * 1024)
/* Least recently used order: a hit moves its entry to the front only if
 * the entry was not moved within this many milliseconds, so hot entries
 * do not take the cache lock on every hit. */
#define HTTP_SERVER_LRU_TOUCH_MS 100
/* Request bodies are read and dropped up to this size, else 413. */
#define HTTP_SERVER_MAX_BODY (64 * 1024)
/* Trailer bytes after a chunked request body, else 431. */
#define HTTP_SERVER_MAX_TRAILERS 4096
/* The request buffer starts at this size and grows to the maximum; core's
 * limits (8 KiB request line, 16 KiB of fields) answer 414/431 before. */
#define HTTP_SERVER_REQ_BUF_INITIAL 4096
#define HTTP_SERVER_REQ_BUF_MAX (32 * 1024)
/* A response head is built into a buffer of this size. Every field the
 * planner can put in a head is bounded (the longest, Location, by
 * HTTP_PLAN_LOCATION_MAX; a Content-Type by HTTP_MIME_TYPE_LEN_MAX), so
 * every planned head fits; tests/unit/test_http_plan.c builds the
 * largest. An engine that still fails to build one answers the plan's
 * 500 instead (http_plan_head_failed), never a silent close. */
/* The head the planner makes is under 2048 bytes; the operator's fields
 * (http_headers.h) add at most HTTP_HEADERS_HEAD_MAX. */
#define HTTP_SERVER_HEAD_BUF (2048 + HTTP_HEADERS_HEAD_MAX)
/* nginx's "expires": the longest max-age accepted (ten years). */
#define HTTP_SERVER_EXPIRES_MAX (10 * 365 * 24 * 3600)
/* Custom error pages (nginx's "error_page"): at most this many, each a
 * path of at most HTTP_ERROR_PAGE_PATH_MAX bytes. */
#define HTTP_SERVER_ERROR_PAGES_MAX 16
#define HTTP_ERROR_PAGE_PATH_MAX 256
/* Header fields kept for lookups per request. */
#define HTTP_SERVER_MAX_STORED_HEADERS 32
/* Longest normalised path, NUL included. */
#define HTTP_SERVER_PATH_MAX 4096
/* A listing is rendered and sent in pieces of at most this many bytes,
 * by both engines alike: what fits one 8 KiB buffer with room for a chunk
 * header (HTTP_CHUNK_HEADER_MAX) before and the chunk's end and the last
 * chunk (7 bytes) after, so that each listing connection's buffer is one
 * small kmalloc bucket; a row always fits an empty one
 * (HTTP_LISTING_ENTRY_MAX). */
#define HTTP_SERVER_LISTING_BUF (8192 - 18 - 7)
/* A listing collects its directory's names before it sorts them and
 * renders the rows: at most this many names and this many bytes of them
 * per request. A directory with more lists the first names the file system
 * returns (sorted) and a last row saying so. */
#define HTTP_SERVER_LISTING_MAX_ENTRIES 20000
#define HTTP_SERVER_LISTING_MAX_NAME_BYTES (512 * 1024)
/* After an error: how long and for how many reads a closing connection
 * keeps dropping what the client sends, so that the close sends FIN and
 * not an RST that could destroy the response in flight. */
#define HTTP_SERVER_LINGER_MS 1000

/* A 503 (past max_conns, or a file held by a lease being broken) says to
 * try again after this many seconds. */
#define HTTP_RETRY_AFTER_S 1
#define HTTP_SERVER_LINGER_READS 64

/* The parser limits both engines run with. */
#define HTTP_SERVER_LIMITS                                 \
    {                                                      \
        .max_request_line = HTTP_DEFAULT_MAX_REQUEST_LINE, \
        .max_header_bytes = HTTP_DEFAULT_MAX_HEADER_BYTES, \
        .max_headers = HTTP_DEFAULT_MAX_HEADERS,           \
        .max_body = HTTP_SERVER_MAX_BODY,                  \
    }

/* A cached entry is checked against the file system at most once per
 * this many milliseconds; one checker wins the timestamp, the others
 * trust the entry. */
#define HTTP_SERVER_REVALIDATE_MS 1000
/* Bytes a cache charges per entry or object besides its path and body. */
#define HTTP_SERVER_ENTRY_OVERHEAD 256
/* Past its budget, a cache evicts from the LRU tail until its bytes are
 * at most this many tenths of the budget (http_cache_evict_more). */
#define HTTP_SERVER_CACHE_LOW_TENTHS 9
/* A listing's name table starts with this many bytes of names and this
 * many offsets, and doubles up to HTTP_SERVER_LISTING_MAX_NAME_BYTES and
 * HTTP_SERVER_LISTING_MAX_ENTRIES. */
#define HTTP_SERVER_LISTING_NAMES_START 4096
#define HTTP_SERVER_LISTING_OFFS_START 256

#endif /* KTCP_CORE_HTTP_LIMITS_H */
