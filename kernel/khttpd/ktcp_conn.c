// SPDX-License-Identifier: MIT OR GPL-2.0
/* kernel/common/ktcp_conn.c built into this module: Kbuild compiles
 * sources under M= only, and each module keeps its own copy.
 */
#include "../common/ktcp_conn.c"
