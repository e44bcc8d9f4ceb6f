/* http_conf.c — the lines of a settings file; see http_conf.h. */
#include "http_conf.h"
#include "http_internal.h"

static bool conf_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

bool http_conf_next(const char *text,
                    size_t len,
                    size_t *pos,
                    struct http_conf_line *l)
{
    while (*pos < len) {
        size_t s = *pos, e = s, n;

        while (e < len && text[e] != '\n')
            e++;
        *pos = e < len ? e + 1 : e;
        l->number++;
        while (s < e && conf_blank(text[s]))
            s++;
        while (e > s && conf_blank(text[e - 1]))
            e--;
        if (s == e || text[s] == '#')
            continue;
        if (e - s >= 2 && text[s] == '-' && text[s + 1] == '-')
            s += 2;
        n = s;
        while (n < e && !conf_blank(text[n]))
            n++;
        l->name = text + s;
        l->name_len = n - s;
        while (n < e && conf_blank(text[n]))
            n++;
        l->value = text + n;
        l->value_len = e - n;
        return true;
    }
    return false;
}
