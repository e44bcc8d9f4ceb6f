/* httpd-config.c — the settings every layer reads (httpd.h), set by
 * httpd-main.c; here, below every layer, so that reading them makes no
 * file depend on the one that parses them. */
#include "httpd.h"

struct httpd_config httpd_cfg = {.root_fd = -1, .access_log_fd = -1};
