/* SPDX-License-Identifier: GPL-2.0 */
/* rmx frames in the kernel: a context bound to an interface (rmx_frames.c). */
#ifndef RMX_FRAMES_H
#define RMX_FRAMES_H

#include <linux/types.h>
#include <linux/moduleparam.h>
#include <linux/wait.h>

struct net_device;
struct sk_buff;

struct rmx_bound;

/* RMX_BIND: binds *bound (NULL before) and wakes `wq` (moving `events`)
 * when a frame is queued. */
long rmx_bind_req(struct rmx_bound **bound, wait_queue_head_t *wq, atomic_t *events,
		  void __user *uarg);
long rmx_send_req(struct rmx_bound *b, void __user *uarg);
/* A frame of `len` bytes to fill and hand to rmx_frame_xmit, which sends
 * it from b as RMX_SEND does; *devp holds a reference the two take and
 * give back (an ERR_PTR: none taken). */
struct sk_buff *rmx_frame_alloc(struct rmx_bound *b, u64 len, struct net_device **devp);
long rmx_frame_xmit(struct rmx_bound *b, struct net_device *dev, struct sk_buff *skb);
/* Frees a frame rmx_frame_alloc gave and not sent, and its reference. */
void rmx_frame_drop(struct sk_buff *skb, struct net_device *dev);
/* Counts a frame RMX_SEND_REGION sent (the region_frames parameter). */
void rmx_count_region_frame(void);
long rmx_recv_req(struct rmx_bound *b, void __user *uarg);
bool rmx_frames_queued(struct rmx_bound *b);
/* Unbinds and frees b (NULL is fine); no frame is queued or wakes after. */
void rmx_unbind(struct rmx_bound *b);

/* A read-only module parameter showing the atomic_long_t its arg names
 * (rmx_glue.c). */
extern const struct kernel_param_ops rmx_count_ops;

int rmx_frames_init(void);
void rmx_frames_exit(void);

#endif
