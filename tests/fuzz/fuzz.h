/* fuzz.h — what the libFuzzer targets share: REQUIRE, which abort()s on a
 * broken invariant (libFuzzer and replay_main.c both report that), and a
 * reader that cuts one input into the numbers and strings a target needs.
 *
 * Structured inputs are length-prefixed: a field is one length byte, then
 * that many bytes (fewer if the input ends). Numbers are little-endian.
 * Whatever the input, every reader returns something: an exhausted input
 * reads as zeros and empty fields.
 */
#ifndef KTCP_TESTS_FUZZ_H
#define KTCP_TESTS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define REQUIRE(c)   \
    do {             \
        if (!(c))    \
            abort(); \
    } while (0)

struct fuzz_input {
    const uint8_t *p;
    size_t left;
};

static inline uint64_t fuzz_uint(struct fuzz_input *in, unsigned bytes)
{
    uint64_t v = 0;
    unsigned i;

    for (i = 0; i < bytes && in->left; i++, in->p++, in->left--)
        v |= (uint64_t) in->p[0] << (8 * i);
    return v;
}

static inline bool fuzz_bool(struct fuzz_input *in)
{
    return fuzz_uint(in, 1) & 1;
}

static inline const char *fuzz_field(struct fuzz_input *in, size_t *len)
{
    const char *s;
    size_t n = (size_t) fuzz_uint(in, 1);

    if (n > in->left)
        n = in->left;
    s = (const char *) in->p;
    in->p += n;
    in->left -= n;
    *len = n;
    return s;
}

/* Everything not read yet. */
static inline const char *fuzz_rest(struct fuzz_input *in, size_t *len)
{
    const char *s = (const char *) in->p;

    *len = in->left;
    in->p += in->left;
    in->left = 0;
    return s;
}

#endif /* KTCP_TESTS_FUZZ_H */
