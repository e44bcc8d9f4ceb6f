/* http_date.c — HTTP-date without libc time functions or floating point.
 *
 * The civil-date conversion counts in 400-year eras (146097 days, the
 * Gregorian cycle), with years starting on March 1st so that the leap day
 * is the last day of a year; that turns the month lengths into a linear
 * formula and needs no tables or loops.
 */
#include "http_date.h"
#include "http_internal.h"

static const char weekday_names[7][4] = {"Thu", "Fri", "Sat", "Sun",
                                         "Mon", "Tue", "Wed"}; /* 1970-01-01 */
static const char month_names[12][4] = {"Jan", "Feb", "Mar", "Apr",
                                        "May", "Jun", "Jul", "Aug",
                                        "Sep", "Oct", "Nov", "Dec"};
static const char *const weekday_long[7] = {"Thursday", "Friday", "Saturday",
                                            "Sunday",   "Monday", "Tuesday",
                                            "Wednesday"};

/* Floor division: C truncates toward zero, dates before 1970 need floor. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

int64_t http_days_from_civil(int64_t year, unsigned month, unsigned day)
{
    int64_t y = year - (month <= 2);
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400; /* 0..399 */
    int64_t mp = month > 2 ? (int64_t) month - 3 : (int64_t) month + 9;
    int64_t doy = (153 * mp + 2) / 5 + (int64_t) day - 1; /* 0..365 */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;  /* 0..146096 */

    return era * 146097 + doe - 719468; /* 719468: 0000-03-01 to 1970-01-01 */
}

void http_civil_from_days(int64_t days,
                          int64_t *year,
                          unsigned *month,
                          unsigned *day)
{
    int64_t z = days + 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    unsigned m = (unsigned) (mp < 10 ? mp + 3 : mp - 9);

    *day = (unsigned) (doy - (153 * mp + 2) / 5 + 1);
    *month = m;
    *year = yoe + era * 400 + (m <= 2);
}

static void put2(char *p, unsigned v)
{
    p[0] = (char) ('0' + v / 10);
    p[1] = (char) ('0' + v % 10);
}

/* Seconds of 0000-01-01 and 9999-12-31T23:59:59, the range four digits of
 * year can show. */
#define DATE_MIN (-62167219200LL)
#define DATE_MAX (253402300799LL)

size_t http_date_format(int64_t t, char *out)
{
    int64_t days, secs, year;
    unsigned month, day, hh, mm, ss;
    int64_t wd;

    if (t < DATE_MIN)
        t = DATE_MIN;
    if (t > DATE_MAX)
        t = DATE_MAX;
    days = floor_div(t, 86400);
    secs = t - days * 86400;
    http_civil_from_days(days, &year, &month, &day);
    hh = (unsigned) (secs / 3600);
    mm = (unsigned) (secs / 60 % 60);
    ss = (unsigned) (secs % 60);
    wd = days - floor_div(days, 7) * 7;

    memcpy(out, weekday_names[wd], 3);
    out[3] = ',';
    out[4] = ' ';
    put2(out + 5, day);
    out[7] = ' ';
    memcpy(out + 8, month_names[month - 1], 3);
    out[11] = ' ';
    put2(out + 12, (unsigned) (year / 100));
    put2(out + 14, (unsigned) (year % 100));
    out[16] = ' ';
    put2(out + 17, hh);
    out[19] = ':';
    put2(out + 20, mm);
    out[22] = ':';
    put2(out + 23, ss);
    memcpy(out + 25, " GMT", 4);
    out[HTTP_DATE_LEN] = '\0';
    return HTTP_DATE_LEN;
}

/* A tiny cursor over the input: every helper advances only on success. */
struct cursor {
    const char *s;
    size_t len;
    size_t pos;
};

static bool take_char(struct cursor *c, char ch)
{
    if (c->pos < c->len && c->s[c->pos] == ch) {
        c->pos++;
        return true;
    }
    return false;
}

static bool take_lit(struct cursor *c, const char *lit, size_t n)
{
    if (c->len - c->pos >= n && memcmp(c->s + c->pos, lit, n) == 0) {
        c->pos += n;
        return true;
    }
    return false;
}

static bool take_digits(struct cursor *c, size_t n, unsigned *v)
{
    size_t i;
    unsigned r = 0;

    if (c->len - c->pos < n)
        return false;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) c->s[c->pos + i];
        if (!http_is_digit(ch))
            return false;
        r = r * 10 + (ch - '0');
    }
    c->pos += n;
    *v = r;
    return true;
}

static bool take_month(struct cursor *c, unsigned *month)
{
    unsigned i;

    if (c->len - c->pos < 3)
        return false;
    /* HTTP-date is case-sensitive (RFC 9110 §5.6.7) */
    for (i = 0; i < 12; i++) {
        if (memcmp(c->s + c->pos, month_names[i], 3) == 0) {
            c->pos += 3;
            *month = i + 1;
            return true;
        }
    }
    return false;
}

static bool take_time(struct cursor *c,
                      unsigned *hh,
                      unsigned *mm,
                      unsigned *ss)
{
    return take_digits(c, 2, hh) && take_char(c, ':') &&
           take_digits(c, 2, mm) && take_char(c, ':') && take_digits(c, 2, ss);
}

static int take_weekday_short(struct cursor *c)
{
    int i;

    if (c->len - c->pos < 3)
        return -1;
    for (i = 0; i < 7; i++) {
        if (memcmp(c->s + c->pos, weekday_names[i], 3) == 0) {
            c->pos += 3;
            return i;
        }
    }
    return -1;
}

static int take_weekday_long(struct cursor *c)
{
    int i;

    for (i = 0; i < 7; i++) {
        if (take_lit(c, weekday_long[i], strlen(weekday_long[i])))
            return i;
    }
    return -1;
}

static bool valid_fields(int64_t year,
                         unsigned month,
                         unsigned day,
                         unsigned hh,
                         unsigned mm,
                         unsigned ss)
{
    static const uint8_t mdays[12] = {31, 29, 31, 30, 31, 30,
                                      31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

    if (month < 1 || month > 12 || day < 1 || day > mdays[month - 1])
        return false;
    if (month == 2 && day == 29 && !leap)
        return false;
    /* 60 admits a leap second; it is folded into the next minute */
    return hh < 24 && mm < 60 && ss <= 60;
}

bool http_date_parse(const char *s, size_t len, int64_t *t)
{
    struct cursor c = {s, len, 0};
    unsigned day = 0, month = 0, hh = 0, mm = 0, ss = 0, y4 = 0;
    int64_t year, days;
    int wd;

    while (c.pos < c.len && (s[c.pos] == ' ' || s[c.pos] == '\t'))
        c.pos++;
    while (c.len > c.pos && (s[c.len - 1] == ' ' || s[c.len - 1] == '\t'))
        c.len--;

    if (c.len - c.pos > 3 && s[c.pos + 3] == ',') {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        if ((wd = take_weekday_short(&c)) < 0 || !take_lit(&c, ", ", 2) ||
            !take_digits(&c, 2, &day) || !take_char(&c, ' ') ||
            !take_month(&c, &month) || !take_char(&c, ' ') ||
            !take_digits(&c, 4, &y4) || !take_char(&c, ' ') ||
            !take_time(&c, &hh, &mm, &ss) || !take_lit(&c, " GMT", 4))
            return false;
        year = y4;
    } else if (c.len - c.pos > 3 && s[c.pos + 3] == ' ') {
        /* asctime: Sun Nov  6 08:49:37 1994 (day padded with a space) */
        if ((wd = take_weekday_short(&c)) < 0 || !take_char(&c, ' ') ||
            !take_month(&c, &month) || !take_char(&c, ' '))
            return false;
        if (take_char(&c, ' ')) {
            if (!take_digits(&c, 1, &day))
                return false;
        } else if (!take_digits(&c, 2, &day)) {
            return false;
        }
        if (!take_char(&c, ' ') || !take_time(&c, &hh, &mm, &ss) ||
            !take_char(&c, ' ') || !take_digits(&c, 4, &y4))
            return false;
        year = y4;
    } else {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        unsigned y2;
        if ((wd = take_weekday_long(&c)) < 0 || !take_lit(&c, ", ", 2) ||
            !take_digits(&c, 2, &day) || !take_char(&c, '-') ||
            !take_month(&c, &month) || !take_char(&c, '-') ||
            !take_digits(&c, 2, &y2) || !take_char(&c, ' ') ||
            !take_time(&c, &hh, &mm, &ss) || !take_lit(&c, " GMT", 4))
            return false;
        /* RFC 9110 says "50 years in the future means the past" relative
         * to now; without a clock, a fixed pivot keeps it deterministic */
        year = y2 < 70 ? 2000 + y2 : 1900 + y2;
    }
    if (c.pos != c.len || !valid_fields(year, month, day, hh, mm, ss))
        return false;

    days = http_days_from_civil(year, month, day);
    /* The weekday is redundant; a wrong one is tolerated, as recipients
     * commonly do, since the date itself is unambiguous. */
    (void) wd;
    *t = days * 86400 + (int64_t) hh * 3600 + mm * 60 + ss;
    return true;
}
