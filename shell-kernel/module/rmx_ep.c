// SPDX-License-Identifier: GPL-2.0
/*
 * rmx.ko's in-kernel endpoints: rmx-driver's embedded endpoint (the Rust
 * half's rmx_ep_*), exported to other modules under rmx.h's names and
 * contracts, so that a driver embeds rmx over its own port as a C
 * runtime does with librmx. Results are rmx's codes (RMX_ERR_*).
 */
#include <linux/module.h>

#include "rmx.h"

EXPORT_SYMBOL_GPL(rmx_ep_size);
EXPORT_SYMBOL_GPL(rmx_ep_create_version);
EXPORT_SYMBOL_GPL(rmx_ep_progress);
EXPORT_SYMBOL_GPL(rmx_ep_deadline);
EXPORT_SYMBOL_GPL(rmx_ep_isend);
EXPORT_SYMBOL_GPL(rmx_ep_irecv);
EXPORT_SYMBOL_GPL(rmx_ep_test);
EXPORT_SYMBOL_GPL(rmx_ep_cancel);
EXPORT_SYMBOL_GPL(rmx_ep_destroy);
EXPORT_SYMBOL_GPL(rmx_ep_task_size);
EXPORT_SYMBOL_GPL(rmx_ep_task_start);
EXPORT_SYMBOL_GPL(rmx_ep_task_test);
EXPORT_SYMBOL_GPL(rmx_ep_task_abort);
EXPORT_SYMBOL_GPL(rmx_ep_win_size);
EXPORT_SYMBOL_GPL(rmx_ep_win_create);
EXPORT_SYMBOL_GPL(rmx_ep_win_test);
EXPORT_SYMBOL_GPL(rmx_ep_put);
EXPORT_SYMBOL_GPL(rmx_ep_get);
EXPORT_SYMBOL_GPL(rmx_ep_accumulate);
EXPORT_SYMBOL_GPL(rmx_ep_fence);
EXPORT_SYMBOL_GPL(rmx_ep_win_free);
