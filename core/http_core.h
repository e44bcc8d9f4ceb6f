/* http_core.h — everything core/ offers, for engines that want one include. */
#ifndef KTCP_CORE_HTTP_CORE_H
#define KTCP_CORE_HTTP_CORE_H

#include "http_access.h"
#include "http_buf.h"
#include "http_cache.h"
#include "http_conditional.h"
#include "http_conf.h"
#include "http_date.h"
#include "http_encoding.h"
#include "http_headers.h"
#include "http_limits.h"
#include "http_listing.h"
#include "http_mime.h"
#include "http_parser.h"
#include "http_path.h"
#include "http_plan.h"
#include "http_proxy.h"
#include "http_range.h"
#include "http_rate.h"
#include "http_response.h"
#include "http_vhost.h"

#endif /* KTCP_CORE_HTTP_CORE_H */
