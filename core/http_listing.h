/* http_listing.h — directory listing as HTML, one piece at a time.
 *
 * A listing of any size is rendered into a small buffer: begin, then one
 * entry per call, then end; whenever a call returns -1 the buffer is full
 * (nothing of that call was kept), so send what is there — typically as one
 * chunk — reset the buffer and repeat the call.
 */
#ifndef KTCP_CORE_HTTP_LISTING_H
#define KTCP_CORE_HTTP_LISTING_H

#include "compat.h"
#include "http_buf.h"

/* Room that always suffices for one entry whose name is at most 255 bytes
 * (NAME_MAX), and for begin with a path of at most 1024 bytes. */
#define HTTP_LISTING_ENTRY_MAX 4096

/* A listing's opening. dir is the normalised relative path of the
 * directory as http_path_normalize() gives it ("." or "a/b"); the title
 * shows "/a/b/" and a "../" link is added unless dir is the root. In
 * parts, for a directory path whose escaped title may not fit one
 * buffer: start with a zeroed cursor; 0 when the opening is
 * complete, -1 when b is full (what fit is kept, the cursor says where to
 * go on): send b, empty it, call again. An empty buffer of
 * HTTP_LISTING_ENTRY_MAX bytes always takes the next part. */
struct http_listing_cursor {
    unsigned int stage;
    size_t off;
};
int http_listing_begin_part(struct http_buf *b,
                            const char *dir,
                            size_t dir_len,
                            struct http_listing_cursor *c);

/* Is a directory entry listed? Never "." and ".."; a name starting with
 * '.' only with dotfiles allowed, or ".well-known" in the root (the same
 * rule as http_path_hidden, so a listing links to nothing that answers
 * 404). */
bool http_listing_visible(const char *dir,
                          size_t dir_len,
                          const char *name,
                          size_t name_len,
                          bool dotfiles);
/* One row: link (percent-encoded, '/' appended for directories), visible
 * name (HTML-escaped), size (bytes; "-" for directories) and mtime. */
int http_listing_entry(struct http_buf *b,
                       const char *name,
                       size_t name_len,
                       bool is_dir,
                       uint64_t size,
                       int64_t mtime);
int http_listing_end(struct http_buf *b);
/* A last row saying that only the first `shown` entries are listed (the
 * directory has more than a listing holds). */
int http_listing_truncated(struct http_buf *b, uint64_t shown);

/* The names of one directory, collected before any row is rendered so that
 * the rows come sorted. Core fills, grows and sorts both arrays in the
 * engine's memory (struct http_names_mem). */
struct http_names {
    char *buf;     /* the names, each NUL-terminated, back to back */
    size_t len;    /* bytes used in buf */
    size_t cap;    /* size of buf */
    uint32_t *off; /* where each name starts in buf */
    size_t count;  /* names held */
    size_t max;    /* room in off */
};

/* Add one name (name_len bytes, no NUL in them): 0, or -1 when buf or off
 * is full (nothing added). */
int http_names_add(struct http_names *n, const char *name, size_t name_len);
/* Sort by name in byte order (unsigned, as strcmp: nginx's autoindex
 * order); in place, no allocation, O(n log n). */
void http_names_sort(struct http_names *n);
/* The engine's memory for a name list (cold: a listing's start and each
 * growth, and the table it is packed into): its listing budget (charge:
 * false, nothing charged, past it) and its allocator (free takes NULL). */
struct http_names_mem {
    bool (*charge)(size_t size);
    void (*uncharge)(size_t size);
    void *(*alloc)(size_t size);
    void (*free)(void *p);
};

/* A block of size bytes charged against the listing budget, or NULL with
 * *err set (-HTTP_EBUSY past the budget, -HTTP_ENOMEM, nothing charged). */
void *http_names_get(const struct http_names_mem *m, size_t size, int *err);

/* Give n its first arrays (HTTP_SERVER_LISTING_NAMES_START bytes,
 * HTTP_SERVER_LISTING_OFFS_START offsets): 0, or get's error (n then
 * holds what it got, for http_names_free). */
int http_names_start(struct http_names *n, const struct http_names_mem *m);
/* Room for a name of need bytes (its NUL included) that http_names_add
 * refused: each array doubles within the listing's bounds
 * (HTTP_SERVER_LISTING_MAX_ENTRIES names, HTTP_SERVER_LISTING_MAX_NAME_BYTES
 * bytes of them), its contents copied. 0; -HTTP_ENOSPC when the listing
 * may hold no more; get's error (n unchanged but for an array already
 * grown). */
int http_names_grow(struct http_names *n,
                    size_t need,
                    const struct http_names_mem *m);
/* Put n's arrays back. */
void http_names_free(struct http_names *n, const struct http_names_mem *m);

/* A directory's listed names, sorted, as a cache keeps them: one block
 * (the header, then count offsets, then the names), immutable once
 * published on its directory's object. */
struct http_name_table {
    size_t bytes; /* the whole block, this header included */
    uint32_t count;
    bool truncated; /* the directory has more than a listing holds */
    bool root;      /* built as the root (/.well-known/ listed) */
    bool dotfiles;  /* built with names starting with '.' listed */
    uint32_t *off;  /* count offsets into names, in sorted order */
    char *names;    /* NUL-terminated, back to back */
};

/* The bytes of the block packing n. */
size_t http_names_table_size(const struct http_names *n);
/* Pack n (sorted) into t, a block of http_names_table_size(n) bytes. */
void http_names_pack(const struct http_names *n,
                     struct http_name_table *t,
                     bool truncated,
                     bool root,
                     bool dotfiles);
/* Was t (or NULL) built for a listing of this kind? */
bool http_names_table_fits(const struct http_name_table *t,
                           bool root,
                           bool dotfiles);
#endif /* KTCP_CORE_HTTP_LISTING_H */
