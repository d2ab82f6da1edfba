/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * rmx's module as userspace sees it: /dev/rmx, one context per open.
 * rmx-linux's kmod module mirrors these numbers and layouts (a test
 * checks they agree).
 */
#ifndef RMX_UAPI_H
#define RMX_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define RMX_MAGIC 0xCE

/* One user segment of a region. */
struct rmx_segment {
	__u64 addr;
	__u64 len;
};

/* Declares a region of `count` (1..64) segments read from `segments`;
 * `desc` must be 0 and holds the region's descriptor on return. */
struct rmx_declare {
	__u32 count;
	__u32 desc;
	__u64 segments;
};

/* Pins the next chunk of a region, or all of it with RMX_PIN_ALL;
 * returns 1 once every page is pinned, 0 while some are not. */
struct rmx_pin {
	__u32 desc;
	__u32 flags;
};
#define RMX_PIN_ALL 1u

/* Copies `len` bytes at `offset` of a region from (RMX_READ) or into
 * (RMX_WRITE) the user buffer `buf`, through the region's pinned pages,
 * pinning them chunk by chunk as the copy reaches them: what a send or
 * a receive on the region does with its data. */
struct rmx_copy {
	__u32 desc;
	__u32 flags;
	__u64 offset;
	__u64 len;
	__u64 buf;
};

#define RMX_DECLARE _IOWR(RMX_MAGIC, 1, struct rmx_declare)
#define RMX_UNDECLARE _IOW(RMX_MAGIC, 2, __u32)
#define RMX_PIN _IOW(RMX_MAGIC, 3, struct rmx_pin)
#define RMX_READ _IOW(RMX_MAGIC, 4, struct rmx_copy)
#define RMX_WRITE _IOW(RMX_MAGIC, 5, struct rmx_copy)
/* Unpins every page of a region now; it stays declared and is pinned
 * again on next use (pinning and unpinning around every communication,
 * the synchronous mode decoupled pinning is compared with). */
#define RMX_UNPIN _IOW(RMX_MAGIC, 6, __u32)

/* Binds the context, as endpoint `endpoint`, to the interface `name` of
 * the caller's network namespace: rmx frames of EtherType `ethertype`
 * sent there to that endpoint are queued for RMX_RECV. Needs CAP_NET_RAW;
 * once per context (EISCONN after), one context per interface, EtherType
 * and endpoint (EADDRINUSE). On return `mac` and `mtu` are the
 * interface's. */
struct rmx_bind {
	char name[16];
	__u16 endpoint;
	__u16 ethertype;
	__u32 mtu;
	__u8 mac[6];
	__u8 pad[2];
};

/* One whole Ethernet frame at `buf`: RMX_SEND sends the `len` bytes
 * there (an rmx frame from this endpoint, at most the MTU + 14 bytes);
 * RMX_RECV takes the oldest queued frame into them (up to `len`) and
 * returns its length, EAGAIN when none is queued, EMSGSIZE (the frame
 * kept) when it is longer than `len`, or with RMX_RECV_CUT the frame
 * cut to `len` and taken (the whole frame's length returned). RMX_SEND's
 * `flags` must be 0, RMX_RECV's 0 or RMX_RECV_CUT. */
struct rmx_frame {
	__u64 buf;
	__u32 len;
	__u32 flags;
};

#define RMX_RECV_CUT 1u

#define RMX_BIND _IOWR(RMX_MAGIC, 7, struct rmx_bind)
#define RMX_SEND _IOW(RMX_MAGIC, 8, struct rmx_frame)
#define RMX_RECV _IOW(RMX_MAGIC, 9, struct rmx_frame)

/* RMX_SEND_REGION sends the frame made of the `len` bytes at `buf` (its
 * headers, checked as RMX_SEND checks them) followed by the `rlen` bytes
 * at `offset` of region `desc`, copied from the region's pinned pages,
 * pinned as the copy reaches them: a send whose data the caller never
 * copies, as a PULL reply is sent from its region. `flags` and `pad`
 * must be 0. Errors are RMX_SEND's and, for the region, RMX_READ's. */
struct rmx_send_region {
	__u64 buf;
	__u32 len;
	__u32 desc;
	__u64 offset;
	__u64 rlen;
	__u32 flags;
	__u32 pad;
};

#define RMX_SEND_REGION _IOW(RMX_MAGIC, 10, struct rmx_send_region)

/* read() gives what changed since the last read, for an evictor thread:
 * records of struct rmx_change, one per region whose generation moved
 * (unpinned by an invalidation or eviction, undeclared, declared anew),
 * blocking until one does unless O_NONBLOCK; poll() says POLLIN then,
 * and POLLRDBAND while a frame is queued for RMX_RECV. */
struct rmx_change {
	__u32 desc;
	__u32 generation;
};

/* mmap of one page at offset 0, read-only: word 0 the pages the context
 * holds pinned, word 1 + (desc & 0xffff) that region's generation, which
 * changes whenever the region is invalidated, evicted or declared anew. */

#endif
