/* compat.h — the only system-facing include of core/ sources.
 *
 * core/ is compiled into khttpd.ko and into the user-space servers, so it may
 * rely on nothing but fixed-width integers, bool, the mem*()/strlen()
 * primitives that both the kernel and libc provide under the same names, and
 * a counter, a stamp, a reference count, a flag and a pointer published
 * once, each world makes atomic its own way (http_counter, http_stamp,
 * http_ref, http_flag, http_ptr below).
 */
#ifndef KTCP_CORE_COMPAT_H
#define KTCP_CORE_COMPAT_H

#ifdef __KERNEL__
#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/refcount.h>
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
 * cache's bytes, struct http_cache_acct) and core's functions update it.
 * And a stamp (a time in ms) that threads read and move with a
 * compare-and-swap: the kernel's atomic64_t, C11's _Atomic uint64_t. */
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

typedef atomic64_t http_stamp;
static inline void http_stamp_set(http_stamp *s, uint64_t v)
{
    atomic64_set(s, (s64) v);
}
static inline uint64_t http_stamp_read(const http_stamp *s)
{
    return (uint64_t) atomic64_read(s);
}
/* From old to new; false if another thread moved it first. */
static inline bool http_stamp_move(http_stamp *s, uint64_t old, uint64_t new)
{
    return atomic64_cmpxchg(s, (s64) old, (s64) new) == (s64) old;
}

/* A reference count: the kernel's refcount_t (saturating, checked). */
typedef refcount_t http_ref;
static inline void http_ref_init(http_ref *r, int n)
{
    refcount_set(r, n);
}
static inline void http_ref_get(http_ref *r)
{
    refcount_inc(r);
}
/* A reference unless the count is already zero (the object is dying). */
static inline bool http_ref_get_unless_zero(http_ref *r)
{
    return refcount_inc_not_zero(r);
}
/* Drop one; true when it was the last. */
static inline bool http_ref_put(http_ref *r)
{
    return refcount_dec_and_test(r);
}
/* Drop one unless it is the last: false (nothing dropped) when it is. */
static inline bool http_ref_put_not_last(http_ref *r)
{
    return refcount_dec_not_one(r);
}
static inline int http_ref_read(const http_ref *r)
{
    return refcount_read(r);
}

/* A flag threads read, set and take (set, learning who set it first). */
typedef atomic_t http_flag;
static inline bool http_flag_read(const http_flag *f)
{
    return atomic_read(f);
}
static inline void http_flag_set(http_flag *f, bool v)
{
    atomic_set(f, v);
}
/* Set it; false when this thread is the one that set it. */
static inline bool http_flag_take(http_flag *f)
{
    return atomic_xchg(f, 1);
}

/* A pointer set once by one thread and read by others: the store
 * releases what it points to, the load acquires it. */
#define http_ptr(type) type *
#define http_ptr_load(p) smp_load_acquire(p)
#define http_ptr_store(p, v) smp_store_release(p, v)
/* From NULL to v (a full barrier); false when it was set already. */
#define http_ptr_claim(p, v) (cmpxchg(p, NULL, v) == NULL)
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

typedef _Atomic uint64_t http_stamp;
static inline void http_stamp_set(http_stamp *s, uint64_t v)
{
    atomic_store_explicit(s, v, memory_order_relaxed);
}
static inline uint64_t http_stamp_read(const http_stamp *s)
{
    return atomic_load_explicit((http_stamp *) s, memory_order_relaxed);
}
static inline bool http_stamp_move(http_stamp *s, uint64_t old, uint64_t new)
{
    return atomic_compare_exchange_strong(s, &old, new);
}

typedef _Atomic int http_ref;
static inline void http_ref_init(http_ref *r, int n)
{
    atomic_init(r, n);
}
static inline void http_ref_get(http_ref *r)
{
    atomic_fetch_add_explicit(r, 1, memory_order_relaxed);
}
static inline bool http_ref_get_unless_zero(http_ref *r)
{
    int n = atomic_load(r);

    while (n > 0)
        if (atomic_compare_exchange_weak(r, &n, n + 1))
            return true;
    return false;
}
static inline bool http_ref_put(http_ref *r)
{
    return atomic_fetch_sub_explicit(r, 1, memory_order_acq_rel) == 1;
}
static inline bool http_ref_put_not_last(http_ref *r)
{
    int n = atomic_load(r);

    while (n > 1)
        if (atomic_compare_exchange_weak(r, &n, n - 1))
            return true;
    return false;
}
static inline int http_ref_read(const http_ref *r)
{
    return atomic_load((http_ref *) r);
}

typedef _Atomic int http_flag;
static inline bool http_flag_read(const http_flag *f)
{
    return atomic_load((http_flag *) f);
}
static inline void http_flag_set(http_flag *f, bool v)
{
    atomic_store(f, v);
}
static inline bool http_flag_take(http_flag *f)
{
    return atomic_exchange(f, 1);
}

#define http_ptr(type) type *_Atomic
#define http_ptr_load(p) atomic_load_explicit(p, memory_order_acquire)
#define http_ptr_store(p, v) atomic_store_explicit(p, v, memory_order_release)
#define http_ptr_claim(p, v)                                  \
    ({                                                        \
        __typeof__(v) http_ptr_old_ = NULL;                   \
        atomic_compare_exchange_strong(p, &http_ptr_old_, v); \
    })
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
