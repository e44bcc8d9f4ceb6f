/* listing_whole.h — a listing's opening all or nothing, for the tests:
 * http_listing_begin_part() from a zeroed cursor, and on -1 the buffer
 * left as it was (the unit tests and the listing fuzz target stream
 * whole calls). */
#ifndef KTCP_TESTS_LISTING_WHOLE_H
#define KTCP_TESTS_LISTING_WHOLE_H

#include "http_listing.h"

static inline int listing_begin(struct http_buf *b,
                                const char *dir,
                                size_t dir_len)
{
    struct http_listing_cursor c = {0, 0};
    size_t mark = b->len;

    if (http_listing_begin_part(b, dir, dir_len, &c) < 0) {
        b->len = mark;
        b->overflow = false;
        return -1;
    }
    return 0;
}

#endif /* KTCP_TESTS_LISTING_WHOLE_H */
