// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * ktcp_fault — test-only: commits on request the faults the debug kernel's
 * detectors must report, so make check-debug can prove its checks fail on
 * them. Loaded only by tests/kmod/test_detectors.py in the debug VM.
 *
 *   insmod ktcp_fault.ko fault=none|leak|lock_inversion|use_after_free
 *
 * leak: allocates LEAK_SIZE bytes that start with LEAK_TAG and drops the
 * only pointer (kmemleak: "unreferenced object ... (size 1234)").
 * lock_inversion: takes a then b, later b then a, in one thread: no
 * deadlock happens, lockdep reports the cycle that could.
 * use_after_free: reads a byte of a freed allocation (KASAN).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>

#define LEAK_SIZE 1234
#define LEAK_TAG "ktcp_fault leak"

static char *fault = "none";
module_param(fault, charp, 0444);
MODULE_PARM_DESC(fault, "none, leak, lock_inversion or use_after_free");

static DEFINE_MUTEX(ktcp_fault_a);
static DEFINE_MUTEX(ktcp_fault_b);
static void *ktcp_fault_last;

static noinline void fault_leak(void)
{
	char *p = kmalloc(LEAK_SIZE, GFP_KERNEL);

	if (!p)
		return;
	memset(p, 0, LEAK_SIZE);
	strscpy(p, LEAK_TAG, LEAK_SIZE);
	/* Published, then forgotten: no reference remains anywhere. */
	WRITE_ONCE(ktcp_fault_last, p);
	WRITE_ONCE(ktcp_fault_last, NULL);
	pr_info("leaked %d bytes\n", LEAK_SIZE);
}

static noinline void fault_lock_inversion(void)
{
	mutex_lock(&ktcp_fault_a);
	mutex_lock(&ktcp_fault_b);
	mutex_unlock(&ktcp_fault_b);
	mutex_unlock(&ktcp_fault_a);

	mutex_lock(&ktcp_fault_b);
	mutex_lock(&ktcp_fault_a);
	mutex_unlock(&ktcp_fault_a);
	mutex_unlock(&ktcp_fault_b);
	pr_info("took a->b, then b->a\n");
}

static noinline void fault_use_after_free(void)
{
	char *p = kmalloc(64, GFP_KERNEL);

	if (!p)
		return;
	kfree(p);
	OPTIMIZER_HIDE_VAR(p);
	pr_info("read after free: %d\n", READ_ONCE(p[8]));
}

static int __init ktcp_fault_init(void)
{
	if (!strcmp(fault, "leak"))
		fault_leak();
	else if (!strcmp(fault, "lock_inversion"))
		fault_lock_inversion();
	else if (!strcmp(fault, "use_after_free"))
		fault_use_after_free();
	else if (strcmp(fault, "none"))
		return -EINVAL;
	return 0;
}

static void __exit ktcp_fault_exit(void)
{
}

module_init(ktcp_fault_init);
module_exit(ktcp_fault_exit);
MODULE_DESCRIPTION("ktcp test-only faults for the debug kernel's detectors");
MODULE_LICENSE("Dual MIT/GPL");
