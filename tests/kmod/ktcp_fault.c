// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * ktcp_fault — test-only: commits on request the faults the kernels'
 * detectors must report, so make check-debug (KASAN, lockdep, kmemleak) and
 * make check (a release kernel booted with slub_debug) can prove their
 * checks fail on them. Loaded only by tests/kmod/test_detectors.py in the
 * VM.
 *
 *   insmod ktcp_fault.ko fault=none|leak|lock_inversion|use_after_free|
 *                              write_after_free|double_free
 *
 * leak: allocates LEAK_SIZE bytes that start with LEAK_TAG and drops the
 * only pointer (kmemleak: "unreferenced object ... (size 1234)").
 * lock_inversion: takes a then b, later b then a, in one thread: no
 * deadlock happens, lockdep reports the cycle that could.
 * use_after_free: reads a byte of a freed allocation (KASAN).
 * write_after_free: writes a byte of a freed 64-byte allocation (slub_debug
 * poisoning: "Poison overwritten" when the cache is next checked; KFENCE:
 * "use-after-free write" if it sampled the allocation).
 * double_free: frees a 64-byte allocation twice (slub_debug: "Object already
 * free"; load it only on a kernel booted with slub_debug or KASAN).
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
MODULE_PARM_DESC(
	fault,
	"none, leak, lock_inversion, use_after_free, write_after_free or double_free");

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

static noinline void fault_write_after_free(void)
{
	char *p = kmalloc(64, GFP_KERNEL);

	if (!p)
		return;
	kfree(p);
	OPTIMIZER_HIDE_VAR(p);
	WRITE_ONCE(p[8], 0x5a);
}

static noinline void fault_double_free(void)
{
	char *p = kmalloc(64, GFP_KERNEL);

	if (!p)
		return;
	kfree(p);
	OPTIMIZER_HIDE_VAR(p);
	kfree(p);
}

static int __init ktcp_fault_init(void)
{
	if (!strcmp(fault, "leak"))
		fault_leak();
	else if (!strcmp(fault, "lock_inversion"))
		fault_lock_inversion();
	else if (!strcmp(fault, "use_after_free"))
		fault_use_after_free();
	else if (!strcmp(fault, "write_after_free"))
		fault_write_after_free();
	else if (!strcmp(fault, "double_free"))
		fault_double_free();
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
