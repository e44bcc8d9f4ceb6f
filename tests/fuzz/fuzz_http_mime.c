/* libFuzzer target: a mime.types file (http_mime_table_parse) and lookups
 * in the table it makes (http_mime_table_for_path).
 *
 * Invariants: the table never holds more than the room given, its strings
 * lie in the storage given and are NUL-terminated; extensions are unique,
 * lower case, sorted and within HTTP_MIME_EXT_LEN_MAX, types are
 * "type/subtype" within HTTP_MIME_TYPE_LEN_MAX (plus the charset), a
 * lookup of each extension in any case finds its own entry; storage too
 * small never overflows but keeps a prefix of the entries.
 */
#include <string.h>

#include "fuzz.h"
#include "http_internal.h"
#include "http_mime.h"

#define ROOM 64

static void check(const struct http_mime_table *t,
                  const char *store,
                  size_t cap)
{
    char path[HTTP_MIME_EXT_LEN_MAX + 3];

    REQUIRE(t->count <= ROOM);
    for (size_t i = 0; i < t->count; i++) {
        const struct http_mime_type *m = &t->types[i];
        size_t el = strlen(m->extension), tl = strlen(m->content_type);

        REQUIRE(m->extension >= store && m->extension + el < store + cap);
        REQUIRE(m->content_type >= store && m->content_type + tl < store + cap);
        REQUIRE(el > 0 && el <= HTTP_MIME_EXT_LEN_MAX);
        REQUIRE(tl >= 3 &&
                tl <= HTTP_MIME_TYPE_LEN_MAX + sizeof("; charset=utf-8"));
        REQUIRE(memchr(m->content_type, '/', tl) != NULL);
        if (i)
            REQUIRE(strcmp(t->types[i - 1].extension, m->extension) < 0);
        for (size_t k = 0; k < el; k++)
            REQUIRE(!(m->extension[k] >= 'A' && m->extension[k] <= 'Z'));
        /* "x.EXT", upper-cased: its own entry */
        path[0] = 'x';
        path[1] = '.';
        for (size_t k = 0; k < el; k++) {
            char c = m->extension[k];
            path[2 + k] = (c >= 'a' && c <= 'z') ? (char) (c - 32) : c;
        }
        REQUIRE(http_mime_table_for_path(t, path, el + 2) == m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http_mime_type types[ROOM];
    static char store[HTTP_MIME_STORE_SIZE(4096)];
    struct http_mime_table t = {types, 0};
    const char *text = (const char *) data;
    size_t full;

    if (size > 4096)
        size = 4096;
    full = http_mime_table_parse(&t, ROOM, store, HTTP_MIME_STORE_SIZE(size),
                                 text, size);
    REQUIRE(full == t.count);
    check(&t, store, HTTP_MIME_STORE_SIZE(size));
    /* a lookup of anything in the input's last segment never fails */
    REQUIRE(http_mime_table_for_path(&t, text, size) != NULL);

    /* storage for a few entries only: a prefix, never an overflow */
    size_t small = size / 8;
    size_t n = http_mime_table_parse(&t, ROOM, store, small, text, size);
    REQUIRE(n <= full);
    check(&t, store, small ? small : 1);
    return 0;
}
