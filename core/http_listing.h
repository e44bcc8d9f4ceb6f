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

/* dir is the normalised relative path of the directory as
 * http_path_normalize() gives it ("." or "a/b"); the title shows
 * "/a/b/" and a "../" link is added unless dir is the root. */
int http_listing_begin(struct http_buf *b, const char *dir, size_t dir_len);
/* One row: link (percent-encoded, '/' appended for directories), visible
 * name (HTML-escaped), size (bytes; "-" for directories) and mtime. */
int http_listing_entry(struct http_buf *b,
                       const char *name,
                       size_t name_len,
                       bool is_dir,
                       uint64_t size,
                       int64_t mtime);
int http_listing_end(struct http_buf *b);

/* Building blocks, also used by servers for Location headers. They return
 * -1 (and keep nothing) if b is too small. */
int http_html_escape(struct http_buf *b, const char *s, size_t len);
/* Percent-encode everything except unreserved bytes and, when keep_slash,
 * '/'. */
int http_url_encode(struct http_buf *b,
                    const char *s,
                    size_t len,
                    bool keep_slash);

#endif /* KTCP_CORE_HTTP_LISTING_H */
