/* http_conf.h — the lines of a settings file, as ktcp-httpd's --config
 * and khttpd's site= file share them: one setting a line, "name value"
 * (the name with or without a leading "--"), the value the rest of the
 * line with the blanks around it trimmed; blank lines and lines starting
 * with '#' skipped. */
#ifndef KTCP_CORE_HTTP_CONF_H
#define KTCP_CORE_HTTP_CONF_H

#include "compat.h"

/* A settings file is read whole, at most this many bytes. */
#define HTTP_CONF_FILE_MAX (64 * 1024)

struct http_conf_line {
    const char *name; /* without "--" */
    size_t name_len;
    const char *value; /* may be empty */
    size_t value_len;
    unsigned int number; /* 1 for the file's first line */
};

/* The next setting of text[*pos..len) into l, *pos past its line; false
 * at the end. l->number counts from the line of *pos, which the caller
 * zeroes with *pos. */
bool http_conf_next(const char *text,
                    size_t len,
                    size_t *pos,
                    struct http_conf_line *l);

#endif /* KTCP_CORE_HTTP_CONF_H */
