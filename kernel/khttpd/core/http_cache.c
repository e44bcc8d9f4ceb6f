// SPDX-License-Identifier: MIT OR GPL-2.0
/* core/http_cache.c built into khttpd.ko: Kbuild compiles sources under M= only.
 */
#include "../../../core/http_cache.c"
