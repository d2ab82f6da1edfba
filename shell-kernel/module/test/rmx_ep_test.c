// SPDX-License-Identifier: GPL-2.0
/*
 * rmx_ep_test.ko: the embedded endpoint's suite (capi/tests/c/ep_suite.h,
 * which librmx's C test runs in userspace) run in the kernel against
 * rmx.ko's exports when the module loads. Loading fails (EINVAL) if a
 * check failed, with what failed in the kernel's log.
 */
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "rmx.h"

/* vmalloc's memory is page-aligned, more than RMX_EP_ALIGN asks. */
#define SUITE_ALLOC(n) vmalloc((n) ? (n) : 1)
#define SUITE_FREE(p) vfree(p)
#define SUITE_SAY(fmt, ...) pr_info("rmx_ep_test: " fmt "\n", ##__VA_ARGS__)
#define SUITE_FAIL(fmt, ...) pr_err("rmx_ep_test: " fmt "\n", ##__VA_ARGS__)
#define SUITE_WHY() "the code says which"
#define SUITE_YIELD() cond_resched()
#include "ep_suite.h"

static int __init rmx_ep_test_init(void)
{
	struct port *mem = vzalloc(2 * sizeof(struct port));
	int r;

	if (!mem)
		return -ENOMEM;
	r = ep_suite(mem);
	vfree(mem);
	return r ? -EINVAL : 0;
}

static void __exit rmx_ep_test_exit(void)
{
}

module_init(rmx_ep_test_init);
module_exit(rmx_ep_test_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rmx's embedded endpoint suite, run in the kernel against rmx.ko");
