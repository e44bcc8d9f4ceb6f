/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * ktcp_compat_unaligned.h - get_unaligned/put_unaligned on every supported
 * kernel: Linux 6.12 moved <asm/unaligned.h> to <linux/unaligned.h>.
 */
#ifndef KTCP_COMPAT_UNALIGNED_H
#define KTCP_COMPAT_UNALIGNED_H

#include <linux/version.h>

/* checkpatch: LINUX_VERSION_CODE: built for 6.1 and 6.12; checkpatch: CONSTANT_COMPARISON: idiom */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

#endif /* KTCP_COMPAT_UNALIGNED_H */
