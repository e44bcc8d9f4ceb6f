/* compat.h — the only system-facing include of core/ sources.
 *
 * core/ is compiled into khttpd.ko and into the user-space servers, so it may
 * rely on nothing but fixed-width integers, bool, the mem*()/strlen()
 * primitives that both the kernel and libc provide under the same names, and
 * a counter each world makes atomic its own way (http_counter below).
 */
#ifndef KTCP_CORE_COMPAT_H
#define KTCP_CORE_COMPAT_H

#ifdef __KERNEL__
#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/types.h>
#else
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#endif

/* A signed counter that threads add to and read without a lock: the
 * kernel's atomic_long_t, C11's _Atomic long (both inline, no symbol).
 * Core keeps no counter of its own: the engine owns the memory (the
 * cache's bytes, struct http_cache_acct) and core's functions update it. */
#ifdef __KERNEL__
typedef atomic_long_t http_counter;
#define HTTP_COUNTER_INIT(v) ATOMIC_LONG_INIT(v)
static inline void http_counter_add(http_counter *c, long v)
{
    atomic_long_add(v, c);
}
static inline long http_counter_read(const http_counter *c)
{
    return atomic_long_read(c);
}
#else
typedef _Atomic long http_counter;
#define HTTP_COUNTER_INIT(v) (v)
static inline void http_counter_add(http_counter *c, long v)
{
    atomic_fetch_add(c, v);
}
static inline long http_counter_read(const http_counter *c)
{
    return atomic_load((http_counter *) c);
}
#endif

/* The kernel spells these U64_MAX/S64_MAX; libc spells them UINT64_MAX.
 * Our own names keep the core identical in both worlds. */
#define HTTP_U64_MAX ((uint64_t) ~0ULL)
#define HTTP_I64_MAX ((int64_t) (HTTP_U64_MAX >> 1))
#define HTTP_I64_MIN (-HTTP_I64_MAX - 1)

#define HTTP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ASCII-only case folding: locale-dependent tolower() does not exist in the
 * kernel, and HTTP tokens are ASCII by definition. */
static inline unsigned char http_ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char) (c + ('a' - 'A')) : c;
}

static inline bool http_ascii_equal_nocase(const char *a,
                                           size_t a_len,
                                           const char *b,
                                           size_t b_len)
{
    size_t i;

    if (a_len != b_len)
        return false;
    for (i = 0; i < a_len; i++) {
        if (http_ascii_lower((unsigned char) a[i]) !=
            http_ascii_lower((unsigned char) b[i]))
            return false;
    }
    return true;
}

static inline bool http_is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Value of a hex digit, or -1. */
static inline int http_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = http_ascii_lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* tchar of RFC 9110 §5.6.2: the bytes allowed in methods, header names and
 * transfer-coding names. */
static inline bool http_is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || http_is_digit(c))
        return true;
    switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
        return true;
    default:
        return false;
    }
}

#endif /* KTCP_CORE_COMPAT_H */
