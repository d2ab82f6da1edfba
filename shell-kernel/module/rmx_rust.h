/* SPDX-License-Identifier: GPL-2.0 */
/* The Rust half's C ABI (src/exports.rs) and the callbacks it makes. */
#ifndef RMX_RUST_H
#define RMX_RUST_H

#include <linux/types.h>

#include "rmx_uapi.h" /* struct rmx_change */

struct rmx_job {
	u32 desc;
	u32 first;
	u64 addr;
	u32 count;
	u32 pad;
};

struct rmx_piece {
	u32 page;
	u32 at;
	u32 len;
};

size_t rmx_ctx_bytes(void);
size_t rmx_ctx_align(void);
size_t rmx_slots_bytes(void);
u32 rmx_slots(void);
u32 rmx_shared_words(void);
int rmx_ctx_init(void *ctx, void *slots, u32 *shared, u64 limit, u16 seed);
void rmx_ctx_close(void *ctx, void *glue);
s64 rmx_declare_len(const u8 *arg);
s64 rmx_declare(void *ctx, void *glue, const u8 *arg, const u8 *segs, size_t len);
s64 rmx_undeclare(void *ctx, void *glue, u32 desc);
s64 rmx_unpin(void *ctx, void *glue, u32 desc);
s64 rmx_region_pages(void *ctx, u32 desc);
s64 rmx_region_bytes(void *ctx, u32 desc);
s64 rmx_use(void *ctx, u32 desc, bool on);
s64 rmx_begin_pin(void *ctx, void *glue, u32 desc, struct rmx_job *job);
s64 rmx_run_job(void *glue, const struct rmx_job *job, u64 *seq);
s64 rmx_end_pin(void *ctx, void *glue, const struct rmx_job *job, u64 seq, s64 got);
s64 rmx_piece(void *ctx, u32 desc, u64 offset, struct rmx_piece *piece);
bool rmx_changed(void *ctx);
size_t rmx_changes(void *ctx, struct rmx_change *out, size_t max);
void rmx_invalidate(void *ctx, void *glue, u32 slot, u64 start, u64 end);
int rmx_frame_dest(const u8 *head, size_t head_len, size_t len, u16 ethertype);
int rmx_frame_check_send(const u8 *frame, size_t len, u16 ethertype, const u8 *mac, u16 endpoint);

/* Called back by the Rust half: with the context's lock held, except
 * pin and read_begin, which rmx_run_job calls without it. */
s64 rmx_glue_pin(void *glue, u16 slot, u32 first, u64 addr, u32 count);
void rmx_glue_unpin(void *glue, u16 slot, u32 first, u32 count);
int rmx_glue_watch(void *glue, u16 slot, u64 start, u64 len);
void rmx_glue_unwatch(void *glue, u16 slot);
u64 rmx_glue_read_begin(void *glue, u16 slot);
bool rmx_glue_read_retry(void *glue, u16 slot, u64 seq);
void __noreturn rmx_glue_bug(void);

#endif
