/* http_path.h — turn a request path into a relative file path that cannot
 * leave the served root.
 *
 * Input is the origin-form path of a request (http_request.path): it must
 * start with '/' (or be empty, meaning "/"). Output is a NUL-terminated
 * relative path for openat() under the root: "." for the root itself,
 * otherwise segments joined by '/', never starting with '/', never holding
 * a "." or ".." segment or an empty segment.
 */
#ifndef KTCP_CORE_HTTP_PATH_H
#define KTCP_CORE_HTTP_PATH_H

#include "compat.h"

enum http_path_result {
    HTTP_PATH_OK = 0,
    HTTP_PATH_ERR_NOT_ABSOLUTE = -1,  /* does not start with '/' */
    HTTP_PATH_ERR_BAD_ESCAPE = -2,    /* '%' not followed by two hex digits */
    HTTP_PATH_ERR_ENCODED_SLASH = -3, /* %2f: would hide a segment boundary */
    HTTP_PATH_ERR_BACKSLASH = -4,     /* '\' or %5c, a separator elsewhere */
    HTTP_PATH_ERR_NUL = -5,           /* %00 would truncate the C string */
    HTTP_PATH_ERR_CONTROL = -6,       /* other control bytes (CR, LF, DEL) */
    HTTP_PATH_ERR_BAD_UTF8 = -7,      /* overlong, surrogate, truncated... */
    HTTP_PATH_ERR_ESCAPES_ROOT = -8,  /* ".." above the root */
    HTTP_PATH_ERR_TOO_LONG = -9,      /* output buffer too small */
};

struct http_path_info {
    size_t len;          /* strlen(out) */
    bool trailing_slash; /* path ends with '/' (or a "." / ".." segment) */
    bool is_root;        /* out is "." */
    /* query string after '?', without it and without any '#fragment';
     * offsets into the input */
    size_t query_off;
    size_t query_len;
    bool has_query;
    /* taken by the one-scan path: no segment starts with '.', so none is
     * hidden (http_path_hidden is false) */
    bool plain;
};

#endif /* KTCP_CORE_HTTP_PATH_H */
