// SPDX-License-Identifier: GPL-2.0
/*
 * rmx's Linux module: the C glue around the Rust half (rmx-kmod over
 * rmx-kernel). It owns what only C can hold: the misc device, one
 * context per open, each region's page array and MMU interval notifier,
 * and the page of generations userspace maps. Every protocol rule
 * (descriptors, the pin schedule, the pinned-page limit, what an
 * invalidation does) is the Rust half's.
 *
 * Two locks per context: `ioctl` runs one request at a time (pinning,
 * faulting and inserting or removing notifiers happen under it), `lock`
 * guards the Rust context and is the only one the notifier's callback
 * takes, so nothing that may wait for an invalidation runs under it.
 */
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "rmx_frames.h"
#include "rmx_rust.h"
#include "rmx_uapi.h"

static unsigned int pin_limit = 262144;
module_param(pin_limit, uint, 0644);
MODULE_PARM_DESC(pin_limit,
		 "pages one open of /dev/rmx may hold pinned (read at each open); past it, regions no communication uses are unpinned, least recently used first");

static atomic_long_t rmx_pinned = ATOMIC_LONG_INIT(0);

/* Contexts opened so far: each seeds its descriptors apart. */
static atomic_t rmx_opened = ATOMIC_INIT(0);

static int rmx_count_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(kp->arg));
}

const struct kernel_param_ops rmx_count_ops = {
	.get = rmx_count_get,
};
module_param_cb(pinned_pages, &rmx_count_ops, &rmx_pinned, 0444);
MODULE_PARM_DESC(pinned_pages, "pages pinned by every context (read-only)");

static unsigned int region_bytes;
module_param(region_bytes, uint, 0444);
MODULE_PARM_DESC(region_bytes,
		 "bytes each open of /dev/rmx holds per region it may declare (read-only; a declared region adds 8 per page)");

struct rmx_ctx;

struct rmx_slot {
	struct mmu_interval_notifier mni;
	struct rmx_ctx *ctx;
	struct page **pages;
	u64 start, len;
	u32 npages;
	u16 idx;
	bool watched, unwatch;
};

struct rmx_ctx {
	struct mutex ioctl;
	struct mutex lock;
	wait_queue_head_t changed;
	atomic_t events; /* moves on every wake-up of `changed` */
	pid_t tgid;
	const struct mm_struct *mm;
	struct page *shared;
	struct rmx_bound *bound; /* the interface bound to, under `ioctl` */
	void *rs;
	void *rs_slots;
	u32 nslots;
	struct rmx_slot slots[];
};

/* Callbacks of the Rust half (the context's lock is held). */

s64 rmx_glue_pin(void *glue, u16 slot, u32 first, u64 addr, u32 count)
{
	struct rmx_ctx *c = glue;
	struct rmx_slot *s = &c->slots[slot];
	long n;

	if (slot >= c->nslots || !s->pages || (u64)first + count > s->npages || count > INT_MAX)
		return -EINVAL;
	n = pin_user_pages_fast(addr, count, FOLL_WRITE | FOLL_LONGTERM, s->pages + first);
	if (n > 0)
		atomic_long_add(n, &rmx_pinned);
	return n == 0 ? -EFAULT : n;
}

void rmx_glue_unpin(void *glue, u16 slot, u32 first, u32 count)
{
	struct rmx_ctx *c = glue;
	struct rmx_slot *s = &c->slots[slot];

	if (WARN_ON_ONCE(slot >= c->nslots || !s->pages || (u64)first + count > s->npages))
		return;
	unpin_user_pages_dirty_lock(s->pages + first, count, true);
	atomic_long_sub(count, &rmx_pinned);
}

int rmx_glue_watch(void *glue, u16 slot, u64 start, u64 len)
{
	struct rmx_ctx *c = glue;

	if (slot >= c->nslots)
		return -EINVAL;
	/* Inserted by the request once the lock is dropped. */
	c->slots[slot].start = start;
	c->slots[slot].len = len;
	return 0;
}

void rmx_glue_unwatch(void *glue, u16 slot)
{
	struct rmx_ctx *c = glue;

	if (slot < c->nslots)
		c->slots[slot].unwatch = true;
}

u64 rmx_glue_read_begin(void *glue, u16 slot)
{
	struct rmx_ctx *c = glue;

	return mmu_interval_read_begin(&c->slots[slot].mni);
}

bool rmx_glue_read_retry(void *glue, u16 slot, u64 seq)
{
	struct rmx_ctx *c = glue;

	return mmu_interval_read_retry(&c->slots[slot].mni, seq);
}

void __noreturn rmx_glue_bug(void)
{
	BUG();
}

/* Tells readers a region may have changed. */
static void rmx_wake(struct rmx_ctx *c)
{
	atomic_inc(&c->events);
	wake_up_interruptible(&c->changed);
}

/* The notifier: the range changed (unmapped, protected, split, moved). */
static bool rmx_invalidate_cb(struct mmu_interval_notifier *mni,
			      const struct mmu_notifier_range *range, unsigned long cur_seq)
{
	struct rmx_slot *s = container_of(mni, struct rmx_slot, mni);
	struct rmx_ctx *c = s->ctx;

	/* Unpinning may sleep: a caller that cannot wait is told so. */
	if (!mmu_notifier_range_blockable(range))
		return false;
	mutex_lock(&c->lock);
	mmu_interval_set_seq(mni, cur_seq);
	rmx_invalidate(c->rs, c, s->idx, range->start, range->end);
	mutex_unlock(&c->lock);
	rmx_wake(c);
	return true;
}

static const struct mmu_interval_notifier_ops rmx_mni_ops = {
	.invalidate = rmx_invalidate_cb,
};

/* Removes the notifiers the Rust half unwatched, and their page arrays
 * (with `ioctl` held, `lock` not). */
static void rmx_settle(struct rmx_ctx *c)
{
	u32 i;

	for (i = 0; i < c->nslots; i++) {
		struct rmx_slot *s = &c->slots[i];

		if (!s->unwatch)
			continue;
		s->unwatch = false;
		if (s->watched)
			mmu_interval_notifier_remove(&s->mni);
		s->watched = false;
		kvfree(s->pages);
		s->pages = NULL;
		s->npages = 0;
	}
}

static bool rmx_forked(const struct rmx_ctx *c)
{
	return c->tgid != task_tgid_nr(current) || c->mm != current->mm;
}

static struct rmx_slot *rmx_slot_of(struct rmx_ctx *c, u32 desc)
{
	return &c->slots[(desc & 0xffff) % c->nslots];
}

static long rmx_declare_req(struct rmx_ctx *c, void __user *uarg)
{
	u8 arg[sizeof(struct rmx_declare)];
	struct rmx_declare d;
	struct rmx_slot *s;
	s64 len, desc, pages;
	u8 *segs;
	long r;

	BUILD_BUG_ON(sizeof(struct rmx_declare) != 16);
	if (copy_from_user(arg, uarg, sizeof(arg)))
		return -EFAULT;
	len = rmx_declare_len(arg);
	if (len < 0)
		return len;
	memcpy(&d, arg, sizeof(d));
	segs = kmalloc(len, GFP_KERNEL);
	if (!segs)
		return -ENOMEM;
	if (copy_from_user(segs, u64_to_user_ptr(d.segments), len)) {
		kfree(segs);
		return -EFAULT;
	}
	mutex_lock(&c->lock);
	desc = rmx_declare(c->rs, c, arg, segs, len);
	pages = desc < 0 ? 0 : rmx_region_pages(c->rs, desc);
	mutex_unlock(&c->lock);
	kfree(segs);
	if (desc < 0)
		return desc;
	s = rmx_slot_of(c, desc);
	s->pages = kvcalloc(pages, sizeof(*s->pages), GFP_KERNEL | __GFP_NOWARN);
	s->npages = s->pages ? pages : 0;
	r = s->pages ? 0 : -ENOMEM;
	if (!r)
		r = mmu_interval_notifier_insert(&s->mni, current->mm, s->start, s->len, &rmx_mni_ops);
	if (!r)
		s->watched = true;
	d.desc = desc;
	if (!r && copy_to_user(uarg, &d, sizeof(d)))
		r = -EFAULT;
	if (r) {
		mutex_lock(&c->lock);
		rmx_undeclare(c->rs, c, desc);
		mutex_unlock(&c->lock);
		rmx_settle(c);
	}
	return r;
}

/* A request naming a region by its descriptor alone: undeclare it, or
 * unpin it and keep it declared. */
static long rmx_desc_req(struct rmx_ctx *c, void __user *uarg, bool undeclare)
{
	u32 desc;
	long r;

	if (get_user(desc, (u32 __user *)uarg))
		return -EFAULT;
	mutex_lock(&c->lock);
	r = undeclare ? rmx_undeclare(c->rs, c, desc) : rmx_unpin(c->rs, c, desc);
	mutex_unlock(&c->lock);
	rmx_settle(c);
	return r;
}

/* Pins the next chunk of `desc`: 1 all pinned, 0 not yet, or an errno. */
static long rmx_pin_step(struct rmx_ctx *c, u32 desc)
{
	struct rmx_job job;
	struct rmx_slot *s;
	u64 seq;
	s64 got, r;

	mutex_lock(&c->lock);
	r = rmx_begin_pin(c->rs, c, desc, &job);
	mutex_unlock(&c->lock);
	if (r == 0)
		return 1;
	if (r != 1)
		return r < 0 ? r : -EBUSY;
	s = rmx_slot_of(c, job.desc);
	/* Never unwatched here (requests run one at a time); if it were, the
	 * job still ends, so the region is not left mid-pin. */
	seq = 0;
	got = WARN_ON_ONCE(!s->watched) ? -EINVAL : rmx_run_job(c, &job, &seq);
	mutex_lock(&c->lock);
	r = rmx_end_pin(c->rs, c, &job, seq, got);
	mutex_unlock(&c->lock);
	return r;
}

/* Steps one region may take before it is refused as invalidated on every
 * step (each step pins at least one page or reports a race). */
static long rmx_steps(struct rmx_ctx *c, u32 desc)
{
	s64 pages;

	mutex_lock(&c->lock);
	pages = rmx_region_pages(c->rs, desc);
	mutex_unlock(&c->lock);
	return pages < 0 ? pages : 4 * pages + 64;
}

static long rmx_pin_req(struct rmx_ctx *c, void __user *uarg)
{
	struct rmx_pin p;
	long r, steps, i;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.flags & ~RMX_PIN_ALL)
		return -EINVAL;
	if (!(p.flags & RMX_PIN_ALL))
		return rmx_pin_step(c, p.desc);
	steps = rmx_steps(c, p.desc);
	if (steps < 0)
		return steps;
	for (i = 0; i < steps; i++) {
		r = rmx_pin_step(c, p.desc);
		if (r)
			return r;
		if (fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
	}
	return -EBUSY;
}

/* Where a region copy's other side is: a user buffer either way, or (kbuf
 * set) kernel memory the region is copied into, such as a frame being
 * built. */
struct rmx_side {
	u8 __user *ubuf;
	u8 *kbuf;
	bool to_region;
};

static int rmx_copy_piece(const struct rmx_side *o, void *k, u64 done, u64 n)
{
	if (o->kbuf) {
		memcpy(o->kbuf + done, k, n);
		return 0;
	}
	if (o->to_region)
		return copy_from_user(k, o->ubuf + done, n) ? -EFAULT : 0;
	return copy_to_user(o->ubuf + done, k, n) ? -EFAULT : 0;
}

/* Copies `len` bytes at `offset` of region `desc` to or from `o`, through
 * the region's pinned pages, pinning them chunk by chunk as the copy
 * reaches them. */
static long rmx_region_copy(struct rmx_ctx *c, u32 desc, u64 offset, u64 len,
			    const struct rmx_side *o)
{
	struct rmx_piece p;
	struct page *pg;
	u64 done = 0, n;
	long r, steps;
	s64 bytes;
	void *k;

	steps = rmx_steps(c, desc);
	if (steps < 0)
		return steps;
	mutex_lock(&c->lock);
	bytes = rmx_region_bytes(c->rs, desc);
	r = bytes < 0 ? bytes : rmx_use(c->rs, desc, true);
	mutex_unlock(&c->lock);
	if (r < 0)
		return r;
	if (len > bytes || offset > bytes - len) {
		r = -EINVAL;
		goto out;
	}
	while (done < len) {
		if (fatal_signal_pending(current)) {
			r = -EINTR;
			goto out;
		}
		pg = NULL;
		mutex_lock(&c->lock);
		r = rmx_piece(c->rs, desc, offset + done, &p);
		if (r == 1 && p.page < rmx_slot_of(c, desc)->npages) {
			/* A reference of our own: an invalidation may unpin the
			 * page while we copy, but not free it under us. */
			pg = rmx_slot_of(c, desc)->pages[p.page];
			get_page(pg);
		}
		mutex_unlock(&c->lock);
		if (r < 0)
			goto out;
		if (!pg) {
			/* An overlap miss: pin the next chunk, then go on. */
			r = steps-- > 0 ? rmx_pin_step(c, desc) : -EBUSY;
			if (r < 0)
				goto out;
			continue;
		}
		n = min_t(u64, p.len, len - done);
		k = kmap_local_page(pg);
		r = rmx_copy_piece(o, k + p.at, done, n);
		kunmap_local(k);
		put_page(pg);
		if (r < 0)
			goto out;
		done += n;
		cond_resched();
	}
	r = 0;
out:
	mutex_lock(&c->lock);
	rmx_use(c->rs, desc, false);
	mutex_unlock(&c->lock);
	return r;
}

static long rmx_copy_req(struct rmx_ctx *c, void __user *uarg, bool to_user)
{
	struct rmx_copy a;
	struct rmx_side o;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags)
		return -EINVAL;
	o = (struct rmx_side){ .ubuf = u64_to_user_ptr(a.buf), .to_region = !to_user };
	return rmx_region_copy(c, a.desc, a.offset, a.len, &o);
}

/* RMX_SEND_REGION: the caller's headers, then the region's bytes copied
 * from its pinned pages into the frame. */
static long rmx_send_region_req(struct rmx_ctx *c, void __user *uarg)
{
	struct rmx_send_region a;
	struct net_device *dev;
	struct sk_buff *skb;
	struct rmx_side o;
	long r;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags || a.pad)
		return -EINVAL;
	if (a.rlen > U32_MAX)
		return -EMSGSIZE;
	skb = rmx_frame_alloc(c->bound, (u64)a.len + a.rlen, &dev);
	if (IS_ERR(skb))
		return PTR_ERR(skb);
	o = (struct rmx_side){ .kbuf = skb->data + a.len };
	r = copy_from_user(skb->data, u64_to_user_ptr(a.buf), a.len) ?
		    -EFAULT :
		    rmx_region_copy(c, a.desc, a.offset, a.rlen, &o);
	if (r) {
		rmx_frame_drop(skb, dev);
		return r;
	}
	r = rmx_frame_xmit(c->bound, dev, skb);
	if (!r)
		rmx_count_region_frame();
	return r;
}

static long rmx_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct rmx_ctx *c = f->private_data;
	void __user *uarg = (void __user *)arg;
	long r;

	if (rmx_forked(c))
		return -EIO;
	mutex_lock(&c->ioctl);
	switch (cmd) {
	case RMX_DECLARE:
		r = rmx_declare_req(c, uarg);
		break;
	case RMX_UNDECLARE:
		r = rmx_desc_req(c, uarg, true);
		break;
	case RMX_PIN:
		r = rmx_pin_req(c, uarg);
		break;
	case RMX_READ:
		r = rmx_copy_req(c, uarg, true);
		break;
	case RMX_WRITE:
		r = rmx_copy_req(c, uarg, false);
		break;
	case RMX_UNPIN:
		r = rmx_desc_req(c, uarg, false);
		break;
	case RMX_BIND:
		r = rmx_bind_req(&c->bound, &c->changed, &c->events, uarg);
		break;
	case RMX_SEND:
		r = rmx_send_req(c->bound, uarg);
		mutex_unlock(&c->ioctl);
		return r; /* frames change no region */
	case RMX_SEND_REGION:
		r = rmx_send_region_req(c, uarg);
		break;
	case RMX_RECV:
		r = rmx_recv_req(c->bound, uarg);
		mutex_unlock(&c->ioctl);
		return r;
	default:
		r = -ENOTTY;
	}
	mutex_unlock(&c->ioctl);
	/* Requests change regions too (eviction, undeclaring). */
	rmx_wake(c);
	return r;
}

static bool rmx_pending(struct rmx_ctx *c)
{
	bool r;

	mutex_lock(&c->lock);
	r = rmx_changed(c->rs);
	mutex_unlock(&c->lock);
	return r;
}

static ssize_t rmx_read(struct file *f, char __user *buf, size_t len, loff_t *off)
{
	struct rmx_ctx *c = f->private_data;
	struct rmx_change out[32];
	size_t n, max = min_t(size_t, len / sizeof(out[0]), ARRAY_SIZE(out));
	int r;

	if (rmx_forked(c))
		return -EIO;
	if (!max)
		return -EINVAL;
	for (;;) {
		/* Read before looking: a change after the look moves it. The
		 * wait's condition takes no lock (it may not sleep). */
		int seen = atomic_read(&c->events);

		mutex_lock(&c->lock);
		n = rmx_changes(c->rs, out, max);
		mutex_unlock(&c->lock);
		if (n)
			break;
		if (f->f_flags & O_NONBLOCK)
			return -EAGAIN;
		r = wait_event_interruptible(c->changed, atomic_read(&c->events) != seen);
		if (r)
			return r;
	}
	if (copy_to_user(buf, out, n * sizeof(out[0])))
		return -EFAULT;
	return n * sizeof(out[0]);
}

static __poll_t rmx_poll(struct file *f, struct poll_table_struct *wait)
{
	struct rmx_ctx *c = f->private_data;

	if (rmx_forked(c))
		return EPOLLERR;
	poll_wait(f, &c->changed, wait);
	return (rmx_pending(c) ? EPOLLIN | EPOLLRDNORM : 0) |
	       (rmx_frames_queued(READ_ONCE(c->bound)) ? EPOLLRDBAND : 0);
}

static int rmx_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct rmx_ctx *c = f->private_data;

	if (rmx_forked(c))
		return -EIO;
	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	vma->vm_flags &= ~VM_MAYWRITE;
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	return vm_insert_page(vma, vma->vm_start, c->shared);
}

static void rmx_ctx_free(struct rmx_ctx *c)
{
	if (c->shared)
		__free_page(c->shared);
	kvfree(c->rs_slots);
	kvfree(c->rs);
	kvfree(c);
}

static int rmx_open(struct inode *inode, struct file *f)
{
	u32 n = rmx_slots(), i;
	struct rmx_ctx *c;
	int r;

	if (rmx_ctx_align() > ARCH_KMALLOC_MINALIGN || rmx_shared_words() * 4 > PAGE_SIZE)
		return -EINVAL;
	c = kvzalloc(struct_size(c, slots, n), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	c->nslots = n;
	c->rs = kvzalloc(rmx_ctx_bytes(), GFP_KERNEL);
	c->rs_slots = kvzalloc(rmx_slots_bytes(), GFP_KERNEL);
	c->shared = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!c->rs || !c->rs_slots || !c->shared) {
		rmx_ctx_free(c);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		c->slots[i].ctx = c;
		c->slots[i].idx = i;
	}
	mutex_init(&c->ioctl);
	mutex_init(&c->lock);
	init_waitqueue_head(&c->changed);
	atomic_set(&c->events, 0);
	c->tgid = task_tgid_nr(current);
	c->mm = current->mm;
	/* An odd step: consecutive contexts' descriptors differ in every slot. */
	r = rmx_ctx_init(c->rs, c->rs_slots, page_address(c->shared), pin_limit,
			 (u16)(atomic_inc_return(&rmx_opened) * 40503u));
	if (r) {
		rmx_ctx_free(c);
		return r;
	}
	f->private_data = c;
	return nonseekable_open(inode, f);
}

static int rmx_release(struct inode *inode, struct file *f)
{
	struct rmx_ctx *c = f->private_data;

	mutex_lock(&c->ioctl);
	rmx_unbind(c->bound);
	c->bound = NULL;
	mutex_lock(&c->lock);
	rmx_ctx_close(c->rs, c);
	mutex_unlock(&c->lock);
	rmx_settle(c);
	mutex_unlock(&c->ioctl);
	rmx_ctx_free(c);
	return 0;
}

static const struct file_operations rmx_fops = {
	.owner = THIS_MODULE,
	.open = rmx_open,
	.release = rmx_release,
	.unlocked_ioctl = rmx_ioctl,
	.read = rmx_read,
	.poll = rmx_poll,
	.mmap = rmx_mmap,
	.llseek = no_llseek,
};

static struct miscdevice rmx_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "rmx",
	.fops = &rmx_fops,
	.mode = 0666,
};

static int __init rmx_init(void)
{
	int r;

	region_bytes = sizeof(struct rmx_slot) + rmx_slots_bytes() / rmx_slots();
	r = rmx_frames_init();
	if (r)
		return r;
	r = misc_register(&rmx_dev);
	if (r)
		rmx_frames_exit();
	return r;
}

static void __exit rmx_exit(void)
{
	misc_deregister(&rmx_dev);
	rmx_frames_exit();
}

module_init(rmx_init);
module_exit(rmx_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rmx: regions declared by descriptor, pinned on demand and progressively, kept correct by MMU interval notifiers");
