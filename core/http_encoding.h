/* http_encoding.h — Accept-Encoding negotiation (RFC 9110 §12.5.3). */
#ifndef KTCP_CORE_HTTP_ENCODING_H
#define KTCP_CORE_HTTP_ENCODING_H

#include "compat.h"

enum http_encoding {
    HTTP_ENCODING_NONE_ACCEPTABLE = -1, /* even identity refused: 406 or
                                           identity anyway, server's choice */
    HTTP_ENCODING_IDENTITY = 0,
    HTTP_ENCODING_GZIP = 1,
};

#endif /* KTCP_CORE_HTTP_ENCODING_H */
