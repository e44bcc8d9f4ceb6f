/* unit.h — the smallest assertion kit that says where it failed.
 *
 * Each CHECK counts; a failure prints file:line and the expression and the
 * run goes on, so one broken case does not hide the others. UNIT_DONE()
 * prints "N passed, M failed" and gives the exit status.
 */
#ifndef KTCP_TESTS_UNIT_H
#define KTCP_TESTS_UNIT_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int unit_passed, unit_failed;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            unit_passed++;                                                     \
        } else {                                                               \
            unit_failed++;                                                     \
            fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                      \
    } while (0)

#define CHECK_INT(a, b)                                                 \
    do {                                                                \
        long long unit_a = (long long) (a), unit_b = (long long) (b);   \
        if (unit_a == unit_b) {                                         \
            unit_passed++;                                              \
        } else {                                                        \
            unit_failed++;                                              \
            fprintf(stderr, "%s:%d: FAILED: %s == %s (%lld != %lld)\n", \
                    __FILE__, __LINE__, #a, #b, unit_a, unit_b);        \
        }                                                               \
    } while (0)

/* Compare n bytes at p with a C string. */
#define CHECK_MEM(p, n, str)                                                \
    do {                                                                    \
        size_t unit_n = (size_t) (n);                                       \
        const char *unit_s = (str);                                         \
        if (unit_n == strlen(unit_s) && memcmp((p), unit_s, unit_n) == 0) { \
            unit_passed++;                                                  \
        } else {                                                            \
            unit_failed++;                                                  \
            fprintf(stderr, "%s:%d: FAILED: %s == \"%s\" (got \"%.*s\")\n", \
                    __FILE__, __LINE__, #p, unit_s, (int) unit_n,           \
                    (const char *) (p));                                    \
        }                                                                   \
    } while (0)

#define CHECK_STR(a, b) CHECK_MEM((a), strlen(a), (b))

#define UNIT_DONE()                                                 \
    do {                                                            \
        printf("%d passed, %d failed\n", unit_passed, unit_failed); \
        return unit_failed ? 1 : 0;                                 \
    } while (0)

#endif /* KTCP_TESTS_UNIT_H */
