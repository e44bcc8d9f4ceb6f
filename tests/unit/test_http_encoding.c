/* Unit tests of q-values and Accept-Encoding negotiation. */
#include "http_encoding.h"
#include "http_internal.h"
#include "unit.h"

#define NEG(f, gz) http_accept_encoding_negotiate((f), strlen(f), (gz))

int main(void)
{
    CHECK_INT(http_qvalue_parse("1", 1), 1000);
    CHECK_INT(http_qvalue_parse("0", 1), 0);
    CHECK_INT(http_qvalue_parse("0.5", 3), 500);
    CHECK_INT(http_qvalue_parse("0.125", 5), 125);
    CHECK_INT(http_qvalue_parse("0.001", 5), 1);
    CHECK_INT(http_qvalue_parse("1.000", 5), 1000);
    CHECK_INT(http_qvalue_parse("1.", 2), 1000);
    CHECK_INT(http_qvalue_parse("1.001", 5), -1);
    CHECK_INT(http_qvalue_parse("0.1234", 6), -1);
    CHECK_INT(http_qvalue_parse("2", 1), -1);
    CHECK_INT(http_qvalue_parse(".5", 2), -1);
    CHECK_INT(http_qvalue_parse("", 0), -1);
    CHECK_INT(http_qvalue_parse("0,5", 3), -1);

    CHECK_INT(http_accept_encoding_negotiate(NULL, 0, true),
              HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzip", false), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("GZIP", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("x-gzip", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("deflate, br", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip, deflate, br", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzip;q=0", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip; q=0.000", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip ; Q=0.5", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzip;q=0.5, identity;q=0.8", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip;q=0.8, identity;q=0.5", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzip;q=0.5, identity;q=0.5", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("*", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("*;q=0", true), HTTP_ENCODING_NONE_ACCEPTABLE);
    CHECK_INT(NEG("*;q=0", false), HTTP_ENCODING_NONE_ACCEPTABLE);
    CHECK_INT(NEG("*;q=0, identity", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip, *;q=0", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzip;q=0, *", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip;q=0.001", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("*;q=0.3, identity;q=0.4", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("*;q=0.5, identity;q=0.4", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("identity;q=0", true), HTTP_ENCODING_NONE_ACCEPTABLE);
    CHECK_INT(NEG("identity;q=0, gzip", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("identity;q=0, gzip", false), HTTP_ENCODING_NONE_ACCEPTABLE);
    CHECK_INT(NEG("identity;q=0, gzip;q=0", true),
              HTTP_ENCODING_NONE_ACCEPTABLE);
    CHECK_INT(NEG("gzip;q=0.1, x-gzip;q=0.9, identity;q=0.5", true),
              HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzip;q=bogus", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip;q=2", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG(" , gzip ,, ", true), HTTP_ENCODING_GZIP);
    CHECK_INT(NEG("gzipper", true), HTTP_ENCODING_IDENTITY);
    CHECK_INT(NEG("gzip;level=9;q=0.7, identity;q=0.6", true),
              HTTP_ENCODING_GZIP);
    UNIT_DONE();
}
