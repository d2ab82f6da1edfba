/* SPDX-License-Identifier: GPL-2.0 */
/* rmx frames in the kernel: a context bound to an interface (rmx_frames.c). */
#ifndef RMX_FRAMES_H
#define RMX_FRAMES_H

#include <linux/types.h>
#include <linux/wait.h>

struct rmx_bound;

/* RMX_BIND: binds *bound (NULL before) and wakes `wq` (moving `events`)
 * when a frame is queued. */
long rmx_bind_req(struct rmx_bound **bound, wait_queue_head_t *wq, atomic_t *events,
		  void __user *uarg);
long rmx_send_req(struct rmx_bound *b, void __user *uarg);
long rmx_recv_req(struct rmx_bound *b, void __user *uarg);
bool rmx_frames_queued(struct rmx_bound *b);
/* Unbinds and frees b (NULL is fine); no frame is queued or wakes after. */
void rmx_unbind(struct rmx_bound *b);

int rmx_frames_init(void);
void rmx_frames_exit(void);

#endif
