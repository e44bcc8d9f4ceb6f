/* http_mime.h — Content-Type by file extension. */
#ifndef KTCP_CORE_HTTP_MIME_H
#define KTCP_CORE_HTTP_MIME_H

#include "compat.h"

struct http_mime_type {
    const char *extension;    /* lower case, without the dot */
    const char *content_type; /* with charset for text */
    bool compressible;        /* worth gzip: text, json, js, svg, wasm... */
};

#define HTTP_MIME_DEFAULT "application/octet-stream"

/* ---- a table read from a mime.types file ("type ext ext ...") ----
 *
 * An engine may read the system's table (/etc/mime.types) and pass it to
 * the planner; an extension it lists wins over the built-in table, which
 * stays the fallback for the others. Parsing is bounded: the text the
 * engine reads is capped at HTTP_MIME_FILE_MAX bytes, the table at
 * HTTP_MIME_TABLE_MAX extensions; lines that do not parse (a type that is
 * not "token/token", an overlong type or extension, bytes outside the
 * token set) are skipped, and the first line naming an extension wins. */
#define HTTP_MIME_FILE_MAX (1024 * 1024)
#define HTTP_MIME_TABLE_MAX 8192
#define HTTP_MIME_TYPE_LEN_MAX 127 /* "type/subtype", charset excluded */
#define HTTP_MIME_EXT_LEN_MAX 31

struct http_mime_table {
    struct http_mime_type *types; /* sorted by extension (lower case) */
    size_t count;
};

/* Bytes of string storage http_mime_table_parse may need for text_len
 * bytes of text: lower-cased extensions and the types with a charset. */
#define HTTP_MIME_STORE_SIZE(text_len) (4 * (text_len) + 64)

/* Parse text[0..len) into t->types (room for max entries) with the
 * strings in store[0..store_cap); t->count is set. text/... types get
 * "; charset=utf-8" as the built-in ones do; compressibility is the
 * built-in table's for a known extension, else from the type (text/...,
 * JSON, XML, JavaScript, WebAssembly). Returns the entries kept. */
size_t http_mime_table_parse(struct http_mime_table *t,
                             size_t max,
                             char *store,
                             size_t store_cap,
                             const char *text,
                             size_t len);

#endif /* KTCP_CORE_HTTP_MIME_H */
