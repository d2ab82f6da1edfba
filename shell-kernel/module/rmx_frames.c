// SPDX-License-Identifier: GPL-2.0
/*
 * rmx frames sent and received in the kernel. A context bound to an
 * interface as one endpoint has the rmx frames sent to that endpoint
 * queued for it, and sends whole frames from it. Which endpoint a frame
 * is for, and whether a send comes from the endpoint sending it, the Rust
 * half decides with rmx-core's frame decoder.
 *
 * A frame sent to the sender's own interface address (endpoints sharing an
 * interface that does not loop, such as one end of a veth pair) is queued
 * for its endpoint here, as the wire would never bring it back.
 *
 * Each binding is a packet_type of its own on its interface (as each
 * AF_PACKET socket is): the receive path gets every frame of the bound
 * EtherType there and keeps those for its endpoint. A binding holds its
 * interface; when the interface goes away (NETDEV_UNREGISTER) the binding
 * lets go of it and later sends fail with ENODEV.
 */
#include <linux/capability.h>
#include <linux/etherdevice.h>
#include <linux/if_ether.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/nsproxy.h>
#include <linux/sched.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <net/net_namespace.h>

#include "rmx_frames.h"
#include "rmx_rust.h"
#include "rmx_uapi.h"

/* Bytes of headers the receive path reads to route a frame. */
#define RMX_FRAME_HEAD 30

static unsigned int rx_frames = 1024;
module_param(rx_frames, uint, 0444);
MODULE_PARM_DESC(rx_frames, "frames a context may have queued; more are dropped");

static atomic_long_t rmx_dropped = ATOMIC_LONG_INIT(0);

module_param_cb(frames_dropped, &rmx_count_ops, &rmx_dropped, 0444);
MODULE_PARM_DESC(frames_dropped, "frames dropped because their context's queue was full (read-only)");

static atomic_long_t rmx_region_frames = ATOMIC_LONG_INIT(0);

module_param_cb(region_frames, &rmx_count_ops, &rmx_region_frames, 0444);
MODULE_PARM_DESC(region_frames, "frames sent with their data copied from a region's pinned pages (read-only)");

void rmx_count_region_frame(void)
{
	atomic_long_inc(&rmx_region_frames);
}

struct rmx_bound {
	struct packet_type pt;
	struct list_head link; /* on rmx_bindings, under rmx_bind_lock */
	spinlock_t dev_lock; /* guards dev */
	struct net_device *dev; /* held; NULL once the interface is gone */
	const struct net *net;
	struct sk_buff_head rxq;
	wait_queue_head_t *wq;
	atomic_t *events;
	int ifindex;
	u16 endpoint, ethertype;
	u8 mac[ETH_ALEN];
};

static LIST_HEAD(rmx_bindings);
static DEFINE_MUTEX(rmx_bind_lock);

/* Queues skb (its data after the Ethernet header) for b, or drops it
 * when b's queue is full; consumes it either way. */
static int rmx_queue(struct rmx_bound *b, struct sk_buff *skb)
{
	if (skb_queue_len(&b->rxq) >= rx_frames) {
		atomic_long_inc(&rmx_dropped);
		kfree_skb(skb);
		return NET_RX_DROP;
	}
	skb_queue_tail(&b->rxq, skb);
	atomic_inc(b->events);
	wake_up_interruptible(b->wq);
	return NET_RX_SUCCESS;
}

static int rmx_rcv(struct sk_buff *skb, struct net_device *dev, struct packet_type *pt,
		   struct net_device *orig)
{
	struct rmx_bound *b = pt->af_packet_priv;
	u8 buf[RMX_FRAME_HEAD];
	const u8 *head;
	int len = skb->len + ETH_HLEN, hl = min_t(int, len, RMX_FRAME_HEAD);

	if (skb->pkt_type == PACKET_OTHERHOST || !skb_mac_header_was_set(skb) ||
	    skb->data - skb_mac_header(skb) != ETH_HLEN)
		goto drop;
	head = skb_header_pointer(skb, -ETH_HLEN, hl, buf);
	if (!head || rmx_frame_dest(head, hl, len, b->ethertype) != b->endpoint)
		goto drop;
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb)
		return NET_RX_DROP;
	return rmx_queue(b, skb);
drop:
	kfree_skb(skb);
	return NET_RX_DROP;
}

/* Lets go of the interface (rmx_bind_lock held). */
static void rmx_detach(struct rmx_bound *b)
{
	struct net_device *dev;

	spin_lock(&b->dev_lock);
	dev = b->dev;
	b->dev = NULL;
	spin_unlock(&b->dev_lock);
	if (!dev)
		return;
	dev_remove_pack(&b->pt); /* waits for receive paths under way */
	dev_put(dev);
}

static bool rmx_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

long rmx_bind_req(struct rmx_bound **bound, wait_queue_head_t *wq, atomic_t *events,
		  void __user *uarg)
{
	struct net *net = current->nsproxy->net_ns;
	struct net_device *dev;
	struct rmx_bound *b, *o;
	struct rmx_bind a;
	long r = 0;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (*bound)
		return -EISCONN;
	if (a.mtu || !rmx_zero(a.mac, sizeof(a.mac)) || !rmx_zero(a.pad, sizeof(a.pad)) ||
	    !a.name[0] || strnlen(a.name, sizeof(a.name)) == sizeof(a.name) ||
	    a.ethertype < ETH_P_802_3_MIN)
		return -EINVAL;
	if (!ns_capable(net->user_ns, CAP_NET_RAW))
		return -EPERM;
	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	mutex_lock(&rmx_bind_lock);
	dev = dev_get_by_name(net, a.name);
	if (!dev) {
		r = -ENODEV;
		goto fail;
	}
	if (dev->addr_len != ETH_ALEN || dev->hard_header_len != ETH_HLEN) {
		r = -EINVAL; /* not an Ethernet */
		goto fail;
	}
	list_for_each_entry(o, &rmx_bindings, link) {
		if (o->dev && o->net == net && o->ifindex == dev->ifindex &&
		    o->endpoint == a.endpoint && o->ethertype == a.ethertype) {
			r = -EADDRINUSE;
			goto fail;
		}
	}
	a.mtu = dev->mtu;
	memcpy(a.mac, dev->dev_addr, ETH_ALEN);
	if (copy_to_user(uarg, &a, sizeof(a))) {
		r = -EFAULT;
		goto fail;
	}
	spin_lock_init(&b->dev_lock);
	skb_queue_head_init(&b->rxq);
	b->dev = dev;
	b->net = net;
	b->ifindex = dev->ifindex;
	b->endpoint = a.endpoint;
	b->ethertype = a.ethertype;
	memcpy(b->mac, a.mac, ETH_ALEN);
	b->wq = wq;
	b->events = events;
	b->pt.type = htons(a.ethertype);
	b->pt.dev = dev;
	b->pt.func = rmx_rcv;
	b->pt.af_packet_priv = b;
	dev_add_pack(&b->pt);
	list_add(&b->link, &rmx_bindings);
	mutex_unlock(&rmx_bind_lock);
	*bound = b;
	return 0;
fail:
	mutex_unlock(&rmx_bind_lock);
	if (dev)
		dev_put(dev);
	kfree(b);
	return r;
}

/* A frame from b to an endpoint of its own interface address: queued for
 * that endpoint, or lost as on a wire when nobody is bound there. */
static void rmx_deliver_local(struct rmx_bound *b, struct sk_buff *skb)
{
	struct rmx_bound *o, *to = NULL;
	int ep = rmx_frame_dest(skb->data, min_t(size_t, skb->len, RMX_FRAME_HEAD), skb->len,
				b->ethertype);

	skb_reset_mac_header(skb);
	skb_pull(skb, ETH_HLEN);
	skb->pkt_type = PACKET_HOST;
	mutex_lock(&rmx_bind_lock);
	list_for_each_entry(o, &rmx_bindings, link) {
		if (o->dev && o->ifindex == b->ifindex && o->net == b->net &&
		    o->ethertype == b->ethertype && o->endpoint == ep) {
			to = o;
			break;
		}
	}
	if (to)
		rmx_queue(to, skb);
	else
		kfree_skb(skb);
	mutex_unlock(&rmx_bind_lock);
}

struct sk_buff *rmx_frame_alloc(struct rmx_bound *b, u64 len, struct net_device **devp)
{
	struct net_device *dev;
	struct sk_buff *skb;
	long r;

	if (!b)
		return ERR_PTR(-ENOTCONN);
	spin_lock(&b->dev_lock);
	dev = b->dev;
	if (dev)
		dev_hold(dev);
	spin_unlock(&b->dev_lock);
	if (!dev)
		return ERR_PTR(-ENODEV);
	if (!(dev->flags & IFF_UP)) {
		r = -ENETDOWN;
		goto fail;
	}
	if (len < ETH_HLEN || len > dev->mtu + ETH_HLEN) {
		r = -EMSGSIZE;
		goto fail;
	}
	skb = alloc_skb(LL_RESERVED_SPACE(dev) + len + dev->needed_tailroom, GFP_KERNEL);
	if (!skb) {
		r = -ENOBUFS;
		goto fail;
	}
	skb_reserve(skb, LL_RESERVED_SPACE(dev));
	skb_put(skb, len);
	*devp = dev;
	return skb;
fail:
	dev_put(dev);
	return ERR_PTR(r);
}

long rmx_frame_xmit(struct rmx_bound *b, struct net_device *dev, struct sk_buff *skb)
{
	long r = rmx_frame_check_send(skb->data, skb->len, b->ethertype, b->mac, b->endpoint);

	if (r) {
		kfree_skb(skb);
		goto out;
	}
	if (!(dev->flags & IFF_LOOPBACK) && ether_addr_equal(skb->data, b->mac)) {
		rmx_deliver_local(b, skb);
		goto out;
	}
	skb_reset_mac_header(skb);
	skb_set_network_header(skb, ETH_HLEN);
	skb->protocol = htons(b->ethertype);
	skb->dev = dev;
	r = dev_queue_xmit(skb); /* consumes skb */
	if (r > 0)
		r = net_xmit_errno(r);
out:
	dev_put(dev);
	return r;
}

long rmx_send_req(struct rmx_bound *b, void __user *uarg)
{
	struct net_device *dev;
	struct sk_buff *skb;
	struct rmx_frame a;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags)
		return -EINVAL;
	skb = rmx_frame_alloc(b, a.len, &dev);
	if (IS_ERR(skb))
		return PTR_ERR(skb);
	if (copy_from_user(skb->data, u64_to_user_ptr(a.buf), a.len)) {
		rmx_frame_drop(skb, dev);
		return -EFAULT;
	}
	return rmx_frame_xmit(b, dev, skb);
}

void rmx_frame_drop(struct sk_buff *skb, struct net_device *dev)
{
	kfree_skb(skb);
	dev_put(dev);
}

long rmx_recv_req(struct rmx_bound *b, void __user *uarg)
{
	struct rmx_frame a;
	struct sk_buff *skb;
	struct iov_iter iter;
	struct iovec iov;
	unsigned long fl;
	size_t len, n;
	u8 __user *buf;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags & ~RMX_RECV_CUT)
		return -EINVAL;
	if (!b)
		return -ENOTCONN;
	spin_lock_irqsave(&b->rxq.lock, fl);
	skb = skb_peek(&b->rxq);
	if (!skb) {
		spin_unlock_irqrestore(&b->rxq.lock, fl);
		return -EAGAIN;
	}
	len = skb->len + ETH_HLEN;
	if (len > a.len && !(a.flags & RMX_RECV_CUT)) {
		spin_unlock_irqrestore(&b->rxq.lock, fl);
		return -EMSGSIZE;
	}
	__skb_unlink(skb, &b->rxq);
	spin_unlock_irqrestore(&b->rxq.lock, fl);
	n = min_t(size_t, len, a.len);
	buf = u64_to_user_ptr(a.buf);
	if (copy_to_user(buf, skb_mac_header(skb), min_t(size_t, n, ETH_HLEN)) ||
	    (n > ETH_HLEN &&
	     (import_single_range(READ, buf + ETH_HLEN, n - ETH_HLEN, &iov, &iter) ||
	      skb_copy_datagram_iter(skb, 0, &iter, n - ETH_HLEN)))) {
		/* Kept for the next receive: nothing queued is lost. */
		skb_queue_head(&b->rxq, skb);
		return -EFAULT;
	}
	consume_skb(skb);
	return len;
}

bool rmx_frames_queued(struct rmx_bound *b)
{
	return b && !skb_queue_empty_lockless(&b->rxq);
}

void rmx_unbind(struct rmx_bound *b)
{
	if (!b)
		return;
	mutex_lock(&rmx_bind_lock);
	rmx_detach(b);
	list_del(&b->link);
	mutex_unlock(&rmx_bind_lock);
	skb_queue_purge(&b->rxq);
	kfree(b);
}

static int rmx_netdev_event(struct notifier_block *nb, unsigned long ev, void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);
	struct rmx_bound *b;

	if (ev != NETDEV_UNREGISTER)
		return NOTIFY_DONE;
	mutex_lock(&rmx_bind_lock);
	list_for_each_entry(b, &rmx_bindings, link) {
		if (b->dev == dev)
			rmx_detach(b);
	}
	mutex_unlock(&rmx_bind_lock);
	return NOTIFY_DONE;
}

static struct notifier_block rmx_netdev_nb = {
	.notifier_call = rmx_netdev_event,
};

int rmx_frames_init(void)
{
	return register_netdevice_notifier(&rmx_netdev_nb);
}

void rmx_frames_exit(void)
{
	unregister_netdevice_notifier(&rmx_netdev_nb);
}
