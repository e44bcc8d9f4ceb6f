/* httpd-config.c — the settings every layer reads (httpd.h): those fixed
 * until a restart, and the live object a SIGHUP replaces whole, both set
 * by httpd-settings.c; defined here, below every layer, so that reading
 * them makes no file depend on the one that builds them (which calls
 * into those layers: the pair would be a cycle, scripts/check-layers). */
#include "httpd.h"

struct httpd_config httpd_cfg = {.root_fd = -1, .access_log_fd = -1};
