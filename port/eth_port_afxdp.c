/*
 * The af_xdp backend of the Ethernet port table (port/eth_port.h), on libxdp's AF_XDP
 * socket helpers and libbpf (docs/ethernet-ports.md, "The af_xdp backend").
 *
 * UMEM: the port's pool is the UMEM, n_bufs chunks of one page or half of one (aligned
 * mode). Every device RX queue d ("devq") has an AF_XDP socket bound to it, all sharing
 * the UMEM, each with its own fill, completion, RX and TX rings. The XDP program
 * (port/bpf/eth_port_afxdp.bpf.c, built in) redirects the frames of the port's VLAN to
 * the socket of the queue they arrived on, through an XSKMAP indexed by queue; every
 * other frame goes on to the kernel's stack. It is attached through a BPF link, native
 * (driver) mode where the driver has it, else generic (SKB) mode: the link's fd is the
 * attachment, so closing the port, the process's exit or its death detaches it.
 * Sockets are bound zero-copy where the driver offers it, else in copy mode.
 *
 * Queues: engine queue w owns the devqs w, w + n, w + 2n, ... (n engine queues): every
 * device queue is drained by exactly one engine queue; an engine queue past the
 * device's queue count receives nothing. The device's RSS spreads the flows over its
 * queues, so the frames of one flow arrive on one devq, in order. wait_fd is an epoll
 * fd over the engine queue's devq sockets. Engine queue w sends on devq w mod (devqs).
 * Each devq has a mutex: its owner takes it for a receive burst (when a lock-free look
 * at the rings finds work: devq_idle), the queue sending on it for a send burst; it is contended only when there are more engine queues than devqs
 * (two of them send on one devq) and while set_queues hands a devq to another owner.
 *
 * Transmit copies each frame (its tag inserted) into a pool chunk, puts the chunks on
 * the TX ring and kicks the kernel (sendto): tx_burst holds no reference to the caller's
 * memory when it returns. The chunks come back through the completion ring, reaped by
 * the next burst on that devq.
 *
 * Buffers: a free stack under a mutex (buf_get and buf_put from any thread). A buffer is
 * free, held by a caller, or with the kernel on devq d (fill, RX or TX ring): its state
 * byte says which. Each devq keeps its ring's depth of buffers on its fill ring (at least
 * its share of RX_DESC_PORT: the pool grows at open to feed them).
 *
 * Threads: see port/eth_port.h. Fields of one devq are [devq lock]; of one engine queue
 * [queue]; control-only [control]; set at open and read-only after, unmarked.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "port/eth_port.h"
#include "pkt/gso.h"
#include "lib/log.h"

#ifndef XSK_PROG_OBJ
#error "XSK_PROG_OBJ: the compiled XDP program's path (the Makefile sets it)"
#endif

/* The XDP program's object, built in (the Makefile compiles it with clang -target bpf). */
#define INCBIN(sym, file)                                                                          \
	__asm__(".section .rodata\n.balign 16\n.globl " #sym "\n.hidden " #sym "\n" #sym           \
		":\n.incbin \"" file "\"\n.globl " #sym "_end\n.hidden " #sym "_end\n" #sym        \
		"_end:\n.previous\n")
INCBIN(ethp_xsk_prog, XSK_PROG_OBJ);
extern const char ethp_xsk_prog[], ethp_xsk_prog_end[];

#define BATCH_MAX 64
#define DEVQ_MAX  64  /* the program's XSKMAP size */
#define TX_RING   256 /* frames in flight per devq */
/* Receive descriptors of a port, spread over its devqs (4096: two devqs get libxdp's
 * default ring of 2048 each), at most RX_DESC_DEVQ_MAX per devq. */
#define RX_DESC_PORT     4096
#define RX_DESC_DEVQ_MAX 2048
/* Bytes the kernel leaves before a received frame: its XDP headroom (256) and ours (2),
 * so that the IP header after a 14-byte Ethernet header lands 16-aligned (272). */
#define FRAME_HEADROOM 2
#define RX_OFFSET      (XDP_PACKET_HEADROOM + FRAME_HEADROOM)

enum buf_state {
	BUF_FREE,
	BUF_HELD,
	BUF_KERNEL /* + devq: on that devq's fill, RX or TX ring */
};

struct xdp_devq {
	pthread_mutex_t lock;
	unsigned id;
	uint8_t kernel_state; /* BUF_KERNEL + id */
	struct xsk_socket *xsk;
	int fd;
	struct xsk_ring_cons rx;   /* [lock] */
	struct xsk_ring_prod tx;   /* [lock] */
	struct xsk_ring_prod fill; /* [lock] */
	struct xsk_ring_cons comp; /* [lock] */
	unsigned posted;           /* [lock] buffers on the fill and RX rings (relaxed
				    * atomic stores: devq_idle peeks) */
	unsigned tx_out;           /* [lock] buffers on the TX ring, not completed */
	unsigned owner;            /* [lock] the engine queue that receives from it */
};

struct xdp_queue {
	unsigned id;
	int epfd;
	struct ethp_stats st; /* [queue] writes, relaxed */
};

struct ethp_port {
	char dev[IF_NAMESIZE];
	int ifindex;
	uint16_t vlan;
	_Atomic bool link_up;
	_Atomic uint32_t mtu;
	_Atomic uint64_t mac; /* the device's MAC (packet types), low 48 bits */
	const char *io;       /* "af_xdp-zc", "af_xdp-copy", "af_xdp-skb" */

	/* Pool = UMEM. */
	uint8_t *mem;
	size_t mem_len;
	struct ethp_buf *bufs;
	unsigned n_bufs, chunk, rx_depth, depth;
	pthread_mutex_t free_lock;
	uint32_t *free_ids; /* [free_lock] stack */
	unsigned n_free;    /* [free_lock] */
	uint8_t *state;     /* enum buf_state per buffer: [free_lock], but a devq's lock
			     * holder marks its own kernel buffers held */

	struct xsk_umem *umem;
	struct xdp_devq *devq;
	unsigned n_devq;
	struct bpf_object *obj;
	int map_fd, link_fd;
	int ctl_fd; /* AF_PACKET, unbound: ioctls and memberships */

	struct xdp_queue *q[ETHP_QUEUES_MAX]; /* [control] writes; 0..n_queues-1 exist */
	_Atomic unsigned n_queues;
	struct ethp_stats gone; /* [control] counters of queues closed */
};

#define CNT_ADD(q, field, n) __atomic_store_n(&(q)->st.field, (q)->st.field + (n), __ATOMIC_RELAXED)

static atomic_bool mode_logged;

/* ---- pool ---- */

static unsigned take_free(struct ethp_port *p, struct ethp_buf **out, unsigned n, uint8_t to)
{
	unsigned i;

	pthread_mutex_lock(&p->free_lock);
	if (n > p->n_free)
		n = p->n_free;
	for (i = 0; i < n; i++) {
		uint32_t id = p->free_ids[--p->n_free];

		__atomic_store_n(&p->state[id], to, __ATOMIC_RELAXED);
		out[i] = &p->bufs[id];
	}
	pthread_mutex_unlock(&p->free_lock);
	return n;
}

static void give_back_ids(struct ethp_port *p, const uint32_t *ids, unsigned n, uint8_t from)
{
	pthread_mutex_lock(&p->free_lock);
	for (unsigned i = 0; i < n; i++) {
		uint32_t id = ids[i];

		if (id >= p->n_bufs || __atomic_load_n(&p->state[id], __ATOMIC_RELAXED) != from) {
			log_error("eth %s: buffer %u returned while not held (ignored)", p->dev,
				  id);
			continue;
		}
		__atomic_store_n(&p->state[id], BUF_FREE, __ATOMIC_RELAXED);
		p->free_ids[p->n_free++] = id;
	}
	pthread_mutex_unlock(&p->free_lock);
}

static struct ethp_buf *axp_buf_get(struct ethp_port *p)
{
	struct ethp_buf *b;

	return take_free(p, &b, 1, BUF_HELD) ? b : NULL;
}

static void axp_buf_put(struct ethp_port *p, struct ethp_buf *b)
{
	if (!b)
		return;
	if (b->id >= p->n_bufs || &p->bufs[b->id] != b) {
		log_error("eth %s: a buffer not of this pool returned (ignored)", p->dev);
		return;
	}
	give_back_ids(p, &b->id, 1, BUF_HELD);
}

static void axp_rx_done(struct ethp_port *p, const struct ethp_rx *rxs, unsigned n)
{
	uint32_t ids[BATCH_MAX];

	while (n) {
		unsigned k = n < BATCH_MAX ? n : BATCH_MAX;

		for (unsigned i = 0; i < k; i++)
			ids[i] = rxs[i].buf->id;
		give_back_ids(p, ids, k, BUF_HELD);
		rxs += k;
		n -= k;
	}
}

/* ---- the devq's rings [devq lock] ---- */

/* Keep the devq's share of the receive depth on its fill ring. */
static void fill_refill(struct ethp_port *p, struct xdp_devq *dq)
{
	struct ethp_buf *got[BATCH_MAX];
	uint32_t idx;

	while (dq->posted < p->depth) {
		unsigned want = p->depth - dq->posted, n, r;

		if (want > BATCH_MAX)
			want = BATCH_MAX;
		n = take_free(p, got, want, dq->kernel_state);
		if (n == 0)
			break;
		r = xsk_ring_prod__reserve(&dq->fill, n, &idx);
		for (unsigned i = 0; i < r; i++)
			*xsk_ring_prod__fill_addr(&dq->fill, idx + i) =
			    (uint64_t)got[i]->id * p->chunk;
		xsk_ring_prod__submit(&dq->fill, r);
		__atomic_store_n(&dq->posted, dq->posted + r, __ATOMIC_RELAXED);
		if (r < n) {
			uint32_t ids[BATCH_MAX];

			for (unsigned i = r; i < n; i++)
				ids[i - r] = got[i]->id;
			give_back_ids(p, ids, n - r, dq->kernel_state);
			break;
		}
	}
	/* A zero-copy driver may wait to be told the fill ring has buffers again. */
	if (xsk_ring_prod__needs_wakeup(&dq->fill))
		recvfrom(dq->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/* Sent chunks back to the pool. */
static void comp_reap(struct ethp_port *p, struct xdp_devq *dq)
{
	uint32_t ids[BATCH_MAX], idx;
	unsigned n;

	while ((n = xsk_ring_cons__peek(&dq->comp, BATCH_MAX, &idx)) > 0) {
		for (unsigned i = 0; i < n; i++)
			ids[i] =
			    (uint32_t)(*xsk_ring_cons__comp_addr(&dq->comp, idx + i) / p->chunk);
		xsk_ring_cons__release(&dq->comp, n);
		give_back_ids(p, ids, n, dq->kernel_state);
		dq->tx_out -= n;
	}
}

/* Frames on the TX ring the kernel has not taken yet. */
static bool tx_pending(const struct xdp_devq *dq)
{
	return __atomic_load_n(dq->tx.consumer, __ATOMIC_ACQUIRE) != *dq->tx.producer;
}

/*
 * Kick the kernel to send what is on the TX ring. In copy mode each sendto moves up to
 * 32 frames into skbs and returns EAGAIN while more remain; a busy device leaves them on
 * the ring for the next kick (every burst on the devq kicks while frames wait).
 * Returns 0, or the errno of a send that failed for good.
 */
static int tx_kick(struct xdp_devq *dq)
{
	for (unsigned i = 0; i < TX_RING / 32 + 2 && tx_pending(dq); i++) {
		if (sendto(dq->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
			continue;
		if (errno == EAGAIN || errno == EBUSY || errno == EINTR)
			continue;
		if (errno == ENOBUFS)
			break;
		return errno;
	}
	return 0;
}

/* ---- receive ---- */

static uint8_t pkttype_of(const struct ethp_port *p, const uint8_t *dst)
{
	uint64_t mac = atomic_load_explicit(&p->mac, memory_order_relaxed), d = 0;

	if (dst[0] & 1) {
		static const uint8_t bc[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

		return memcmp(dst, bc, 6) == 0 ? ETHP_PKT_BROADCAST : ETHP_PKT_MULTICAST;
	}
	for (unsigned i = 0; i < 6; i++)
		d = d << 8 | dst[i];
	return d == mac ? ETHP_PKT_HOST : ETHP_PKT_OTHERHOST;
}

/* Check the frame's VLAN (the program did; a tag is checked again and stripped), fill
 * *rx. Returns false (counted) when the frame is not for this port. */
static bool accept_frame(struct ethp_port *p, struct xdp_queue *q, struct ethp_buf *b,
			 uint8_t *data, uint32_t len, struct ethp_rx *rx)
{
	uint16_t tci = 0;
	bool tagged = false;

	if (len < ETH_HLEN) {
		CNT_ADD(q, drops[ETHP_DROP_RX_RUNT], 1);
		return false;
	}
	if (data[12] == 0x81 && data[13] == 0x00) {
		if (len < ETH_HLEN + 4) {
			CNT_ADD(q, drops[ETHP_DROP_RX_RUNT], 1);
			return false;
		}
		tci = (uint16_t)(data[14] << 8 | data[15]);
		memmove(data + 4, data, 12);
		data += 4;
		len -= 4;
		tagged = true;
	} else if (data[12] == 0x88 && data[13] == 0xa8) {
		CNT_ADD(q, drops[ETHP_DROP_RX_VLAN], 1);
		return false;
	}
	if ((tci & 0x0fff) != p->vlan) {
		CNT_ADD(q, drops[ETHP_DROP_RX_VLAN], 1);
		return false;
	}
	/* A local sender's checksum left to offload (a veth peer, a VM's tap) reaches XDP
	 * with no word of it: completed here when it looks like one (pkt/gso.h). */
	if (len > ETH_HLEN &&
	    ((data[12] == 0x08 && data[13] == 0x00) || (data[12] == 0x86 && data[13] == 0xdd)) &&
	    gso_l4_csum_fix_partial(data + ETH_HLEN, len - ETH_HLEN))
		CNT_ADD(q, rx_csum_completed, 1);
	rx->buf = b;
	rx->data = data;
	rx->len = len;
	rx->vlan_tci = tci;
	rx->pkttype = pkttype_of(p, data);
	rx->flags = tagged ? ETHP_RX_VLAN : 0;
	rx->gso = (struct gso_pkt){ 0 };
	CNT_ADD(q, rx_packets, 1);
	CNT_ADD(q, rx_bytes, len);
	return true;
}

static unsigned devq_rx(struct ethp_port *p, struct xdp_queue *q, struct xdp_devq *dq,
			struct ethp_rx *rxs, unsigned max)
{
	uint32_t refused[BATCH_MAX], idx;
	unsigned n, got = 0, n_ref = 0;

	if (max > BATCH_MAX)
		max = BATCH_MAX;
	n = xsk_ring_cons__peek(&dq->rx, max, &idx);
	for (unsigned i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&dq->rx, idx + i);
		uint64_t addr = xsk_umem__extract_addr(d->addr);
		uint32_t id = (uint32_t)(addr / p->chunk);
		struct ethp_buf *b = &p->bufs[id];

		__atomic_store_n(&p->state[id], BUF_HELD, __ATOMIC_RELAXED);
		if (accept_frame(p, q, b, p->mem + xsk_umem__add_offset_to_addr(d->addr), d->len,
				 &rxs[got]))
			got++;
		else
			refused[n_ref++] = id;
	}
	if (n) {
		xsk_ring_cons__release(&dq->rx, n);
		__atomic_store_n(&dq->posted, dq->posted - n, __ATOMIC_RELAXED);
	}
	if (n_ref)
		give_back_ids(p, refused, n_ref, BUF_HELD);
	fill_refill(p, dq);
	if (dq->tx_out) {
		comp_reap(p, dq);
		if (tx_pending(dq))
			tx_kick(dq);
	}
	return got;
}

/*
 * Nothing for a receive burst to do on dq: no frame on its RX ring, its fill ring full,
 * nothing waiting on its TX ring and no completion to reap. Read without the lock, a
 * hint (the lock holder reads everything again): a frame that lands just after is seen
 * by the next burst, or makes the queue's epoll fd readable. Spares a lock and an unlock
 * per idle device queue per burst (11% of a busy worker's samples, bench/README.md).
 * Completions must count: a queue that only sends (the egress of a forwarded stream)
 * gets no receive event, and buffers left on its completion ring drain the pool until
 * the ingress has none to fill with (seen under load: whole flows lost in afxdp.sh).
 */
static bool devq_idle(const struct ethp_port *p, const struct xdp_devq *dq)
{
	return __atomic_load_n(dq->rx.producer, __ATOMIC_ACQUIRE) ==
		   __atomic_load_n(dq->rx.consumer, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&dq->posted, __ATOMIC_RELAXED) >= p->depth &&
	       __atomic_load_n(dq->tx.consumer, __ATOMIC_ACQUIRE) ==
		   __atomic_load_n(dq->tx.producer, __ATOMIC_RELAXED) &&
	       __atomic_load_n(dq->comp.producer, __ATOMIC_ACQUIRE) ==
		   __atomic_load_n(dq->comp.consumer, __ATOMIC_RELAXED);
}

static struct xdp_queue *queue_of(struct ethp_port *p, unsigned q)
{
	return q < ETHP_QUEUES_MAX ? p->q[q] : NULL;
}

static int axp_rx_burst(struct ethp_port *p, unsigned qi, struct ethp_rx *rxs, unsigned max)
{
	struct xdp_queue *q = queue_of(p, qi);
	unsigned n = atomic_load_explicit(&p->n_queues, memory_order_acquire), got = 0;

	if (!q)
		return -EINVAL;
	for (unsigned d = qi; d < p->n_devq && got < max; d += n) {
		struct xdp_devq *dq = &p->devq[d];

		/* Busy: a send burst of another queue, or set_queues moving it. */
		if (devq_idle(p, dq) || pthread_mutex_trylock(&dq->lock) != 0)
			continue;
		if (dq->owner == qi)
			got += devq_rx(p, q, dq, rxs + got, max - got);
		pthread_mutex_unlock(&dq->lock);
	}
	return (int)got;
}

/* ---- send ---- */

/* Copy the frame (the port's tag inserted) into chunk b. false: invalid (header shorter
 * than 14 or longer than ETHP_HDR_MAX, a GSO frame, payload larger than the MTU or than
 * a chunk). */
static bool build_tx(struct ethp_port *p, const struct ethp_tx *t, uint8_t *out, uint32_t *len)
{
	unsigned hl = t->hdr_len, mtu = atomic_load_explicit(&p->mtu, memory_order_relaxed);
	uint64_t wire = (uint64_t)hl + t->len + (p->vlan ? 4 : 0);

	if (t->gso.kind != GSO_NONE || hl < ETH_HLEN || hl > ETHP_HDR_MAX || (t->len && !t->data) ||
	    (uint64_t)hl + t->len - ETH_HLEN > mtu || wire > p->chunk)
		return false;
	if (p->vlan) {
		memcpy(out, t->hdr, 12);
		out[12] = 0x81;
		out[13] = 0x00;
		out[14] = (uint8_t)(p->vlan >> 8);
		out[15] = (uint8_t)p->vlan;
		memcpy(out + 16, t->hdr + 12, hl - 12);
		hl += 4;
	} else {
		memcpy(out, t->hdr, hl);
	}
	if (t->len)
		memcpy(out + hl, t->data, t->len);
	*len = (uint32_t)wire;
	return true;
}

/* One send burst on dq (its lock held): returns the prefix consumed; *full when the
 * pool or the TX ring had no room. */
static unsigned devq_tx(struct ethp_port *p, struct xdp_queue *q, struct xdp_devq *dq,
			const struct ethp_tx *txs, unsigned n, bool *full)
{
	struct ethp_buf *got[BATCH_MAX];
	uint32_t idx, spare[BATCH_MAX];
	unsigned done = 0;
	int err;

	comp_reap(p, dq);
	while (done < n) {
		unsigned want = n - done, k, r, used = 0, i;

		if (want > BATCH_MAX)
			want = BATCH_MAX;
		if (want > TX_RING - dq->tx_out)
			want = TX_RING - dq->tx_out;
		k = want ? take_free(p, got, want, dq->kernel_state) : 0;
		r = k ? xsk_ring_prod__reserve(&dq->tx, k, &idx) : 0;
		if (r == 0) {
			for (i = 0; i < k; i++)
				spare[i] = got[i]->id;
			give_back_ids(p, spare, k, dq->kernel_state);
			*full = true;
			break;
		}
		/* r descriptors reserved: fill them with the next valid frames; an invalid
		 * frame is consumed and counted. */
		for (; used < r && done < n; done++) {
			struct xdp_desc *d;
			uint32_t len;

			if (!build_tx(p, &txs[done], got[used]->base, &len)) {
				CNT_ADD(q, drops[ETHP_DROP_TX_INVALID], 1);
				continue;
			}
			d = xsk_ring_prod__tx_desc(&dq->tx, idx + used);
			d->addr = (uint64_t)got[used]->id * p->chunk;
			d->len = len;
			d->options = 0;
			CNT_ADD(q, tx_packets, 1);
			CNT_ADD(q, tx_bytes, len);
			used++;
		}
		/* The ring's reservation cannot be given back in part: the unused slots
		 * carry nothing only if none was used, else they are filled in order, so
		 * reserve exactly what was used (the producer index moves by used). */
		dq->tx.cached_prod -= r - used;
		xsk_ring_prod__submit(&dq->tx, used);
		dq->tx_out += used;
		for (i = used; i < k; i++)
			spare[i - used] = got[i]->id;
		if (k > used)
			give_back_ids(p, spare, k - used, dq->kernel_state);
		if (r < k && done < n) {
			*full = true;
			break;
		}
	}
	err = tx_kick(dq);
	if (err)
		log_debug("eth %s: AF_XDP send kick: %s", p->dev, strerror(err));
	return done;
}

static int axp_tx_burst(struct ethp_port *p, unsigned qi, const struct ethp_tx *txs, unsigned n)
{
	struct xdp_queue *q = queue_of(p, qi);
	struct xdp_devq *dq;
	bool full = false;
	unsigned done;

	if (!q)
		return -EINVAL;
	if (!atomic_load_explicit(&p->link_up, memory_order_relaxed)) {
		CNT_ADD(q, drops[ETHP_DROP_TX_LINK_DOWN], n);
		return (int)n;
	}
	dq = &p->devq[qi % p->n_devq];
	pthread_mutex_lock(&dq->lock);
	done = devq_tx(p, q, dq, txs, n, &full);
	pthread_mutex_unlock(&dq->lock);
	if (full)
		CNT_ADD(q, drops[ETHP_DROP_TX_FULL], 1);
	return (int)done;
}

/* ---- control ---- */

static int if_ioctl(const struct ethp_port *p, unsigned long req, struct ifreq *ifr)
{
	memset(ifr, 0, sizeof(*ifr));
	memcpy(ifr->ifr_name, p->dev, sizeof(p->dev));
	return ioctl(p->ctl_fd, req, ifr) < 0 ? -errno : 0;
}

static int axp_query(struct ethp_port *p, struct ethp_port_attr *a)
{
	struct ifreq ifr;
	uint64_t mac = 0;
	int r;

	memset(a, 0, sizeof(*a));
	a->ifindex = p->ifindex;
	a->vlan = p->vlan;
	a->io = p->io;
	a->gso = false;
	if ((r = if_ioctl(p, SIOCGIFHWADDR, &ifr)) < 0)
		return r;
	memcpy(a->mac, ifr.ifr_hwaddr.sa_data, ETHP_ADDR_LEN);
	for (unsigned i = 0; i < ETHP_ADDR_LEN; i++)
		mac = mac << 8 | a->mac[i];
	atomic_store(&p->mac, mac);
	if ((r = if_ioctl(p, SIOCGIFMTU, &ifr)) < 0)
		return r;
	a->mtu = (uint32_t)ifr.ifr_mtu;
	/* Said at open and again when a change of the device's MTU makes it not fit. */
	if (atomic_exchange(&p->mtu, a->mtu) != a->mtu &&
	    a->mtu + ETH_HLEN + 4u > p->chunk - RX_OFFSET)
		log_warning("eth %s: MTU %u: frames over %u octets do not fit a %u-byte UMEM chunk "
			    "and are dropped (rx_kernel)",
			    p->dev, a->mtu, p->chunk - RX_OFFSET, p->chunk);
	if ((r = if_ioctl(p, SIOCGIFFLAGS, &ifr)) < 0)
		return r;
	a->link_up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	return 0;
}

static void axp_set_link(struct ethp_port *p, bool up)
{
	atomic_store(&p->link_up, up);
}

/* The device's filter must still admit the frames: memberships on the port's packet
 * socket, which receives nothing itself (protocol 0, unbound). */
static int membership(struct ethp_port *p, int opt, unsigned short type, const uint8_t *mac)
{
	struct packet_mreq mr;

	memset(&mr, 0, sizeof(mr));
	mr.mr_ifindex = p->ifindex;
	mr.mr_type = type;
	if (mac) {
		mr.mr_alen = ETHP_ADDR_LEN;
		memcpy(mr.mr_address, mac, ETHP_ADDR_LEN);
	}
	return setsockopt(p->ctl_fd, SOL_PACKET, opt, &mr, sizeof(mr)) < 0 ? -errno : 0;
}

static int axp_mc_add(struct ethp_port *p, const uint8_t mac[ETHP_ADDR_LEN])
{
	if (!(mac[0] & 1))
		return -EINVAL;
	return membership(p, PACKET_ADD_MEMBERSHIP, PACKET_MR_MULTICAST, mac);
}

static int axp_mc_del(struct ethp_port *p, const uint8_t mac[ETHP_ADDR_LEN])
{
	return membership(p, PACKET_DROP_MEMBERSHIP, PACKET_MR_MULTICAST, mac);
}

static int axp_set_promisc(struct ethp_port *p, bool on)
{
	return membership(p, on ? PACKET_ADD_MEMBERSHIP : PACKET_DROP_MEMBERSHIP, PACKET_MR_PROMISC,
			  NULL);
}

static void stats_add(struct ethp_stats *st, const struct ethp_stats *qs)
{
	st->rx_packets += __atomic_load_n(&qs->rx_packets, __ATOMIC_RELAXED);
	st->rx_bytes += __atomic_load_n(&qs->rx_bytes, __ATOMIC_RELAXED);
	st->tx_packets += __atomic_load_n(&qs->tx_packets, __ATOMIC_RELAXED);
	st->tx_bytes += __atomic_load_n(&qs->tx_bytes, __ATOMIC_RELAXED);
	st->rx_csum_completed += __atomic_load_n(&qs->rx_csum_completed, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < ETHP_DROP_MAX; i++)
		st->drops[i] += __atomic_load_n(&qs->drops[i], __ATOMIC_RELAXED);
}

/* The kernel's drops: XDP_STATISTICS of each socket (totals, they live with the port):
 * frames lost for want of a fill buffer or RX ring room, or too large for a chunk. */
static void axp_stats(struct ethp_port *p, struct ethp_stats *st)
{
	*st = p->gone;
	for (unsigned i = 0; i < atomic_load(&p->n_queues); i++)
		stats_add(st, &p->q[i]->st);
	for (unsigned d = 0; d < p->n_devq; d++) {
		struct xdp_statistics xs;
		socklen_t len = sizeof(xs);

		if (getsockopt(p->devq[d].fd, SOL_XDP, XDP_STATISTICS, &xs, &len) < 0)
			continue;
		st->drops[ETHP_DROP_RX_KERNEL] += xs.rx_dropped + xs.rx_ring_full;
		st->drops[ETHP_DROP_TX_ERROR] += xs.tx_invalid_descs;
	}
}

static int axp_wait_fd(struct ethp_port *p, unsigned qi)
{
	struct xdp_queue *q = queue_of(p, qi);

	return q ? q->epfd : -EINVAL;
}

/* The sockets are level-triggered (readable while their RX ring holds frames). */
static int axp_arm(struct ethp_port *p, unsigned qi)
{
	return queue_of(p, qi) ? 0 : -EINVAL;
}

/* Give devq d to engine queue owner (its epoll set follows). */
static void devq_move(struct ethp_port *p, struct xdp_devq *dq, unsigned owner)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = dq->id };

	pthread_mutex_lock(&dq->lock);
	if (dq->owner != owner) {
		if (dq->owner < ETHP_QUEUES_MAX && p->q[dq->owner])
			epoll_ctl(p->q[dq->owner]->epfd, EPOLL_CTL_DEL, dq->fd, NULL);
		dq->owner = owner;
		if (epoll_ctl(p->q[owner]->epfd, EPOLL_CTL_ADD, dq->fd, &ev) < 0)
			log_errno(LOG_ERR, errno, "eth %s: epoll for device queue %u", p->dev,
				  dq->id);
	}
	pthread_mutex_unlock(&dq->lock);
}

static void queue_close(struct ethp_port *p, struct xdp_queue *q)
{
	if (!q)
		return;
	if (q->epfd >= 0)
		close(q->epfd);
	stats_add(&p->gone, &q->st);
	free(q);
}

static int axp_set_queues(struct ethp_port *p, unsigned n)
{
	unsigned old = atomic_load(&p->n_queues);

	if (n == 0 || n > ETHP_QUEUES_MAX)
		return -EINVAL;
	for (unsigned i = old; i < n; i++) {
		struct xdp_queue *q = calloc(1, sizeof(*q));

		if (q)
			q->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (!q || q->epfd < 0) {
			int r = q ? -errno : -ENOMEM;

			free(q);
			for (unsigned k = old; k < i; k++) {
				queue_close(p, p->q[k]);
				p->q[k] = NULL;
			}
			return r;
		}
		q->id = i;
		p->q[i] = q;
	}
	for (unsigned d = 0; d < p->n_devq; d++)
		devq_move(p, &p->devq[d], d % n);
	atomic_store_explicit(&p->n_queues, n, memory_order_release);
	for (unsigned i = n; i < old; i++) {
		queue_close(p, p->q[i]);
		p->q[i] = NULL;
	}
	return 0;
}

/* ---- open/close ---- */

/* libbpf's and libxdp's messages, one line each at debug level (their own debug
 * chatter dropped). */
static int lib_print(const char *lib, bool chatter, const char *fmt, va_list ap)
{
	char line[512];
	size_t len;

	if (chatter)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	len = strlen(line);
	if (len && line[len - 1] == '\n')
		line[len - 1] = 0;
	log_debug("%s: %s", lib, line);
	return 0;
}

static int bpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return lib_print("libbpf", level == LIBBPF_DEBUG, fmt, ap);
}

static int xdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
	return lib_print("libxdp", level == LIBXDP_DEBUG, fmt, ap);
}

/* The device's RX queues (those of /sys/class/net/DEV/queues/rx-N): every one gets a
 * socket, so that no frame the program redirects is lost. */
static unsigned rx_queue_count(const char *dev)
{
	char path[64 + IF_NAMESIZE];
	struct dirent *e;
	unsigned n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", dev);
	dir = opendir(path);
	if (!dir)
		return 1;
	while ((e = readdir(dir)))
		n += strncmp(e->d_name, "rx-", 3) == 0;
	closedir(dir);
	return n ? n : 1;
}

/* Load the program with the port's VLAN and attach it: native mode, else generic. */
static int prog_attach(struct ethp_port *p, bool *skb_mode)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "ibgw_xsk");
	LIBBPF_OPTS(bpf_link_create_opts, lo);
	struct bpf_program *prog;
	struct bpf_map *rodata, *map;
	int r;

	p->obj =
	    bpf_object__open_mem(ethp_xsk_prog, (size_t)(ethp_xsk_prog_end - ethp_xsk_prog), &oo);
	if (!p->obj) {
		r = -errno;
		log_errno(LOG_ERR, -r, "eth %s: XDP program", p->dev);
		return r;
	}
	rodata = bpf_object__find_map_by_name(p->obj, ".rodata");
	if (!rodata || bpf_map__set_initial_value(rodata, &p->vlan, sizeof(p->vlan)) < 0) {
		log_error("eth %s: XDP program: no .rodata for the VLAN", p->dev);
		return -EINVAL;
	}
	r = bpf_object__load(p->obj);
	if (r < 0) {
		log_errno(LOG_ERR, -r,
			  "eth %s: loading the XDP program (needs CAP_BPF and CAP_NET_ADMIN; "
			  "ibgwd keeps CAP_BPF only when started with an af_xdp interface)",
			  p->dev);
		return r;
	}
	prog = bpf_object__find_program_by_name(p->obj, "ibgw_xsk_vlan");
	map = bpf_object__find_map_by_name(p->obj, "xsks");
	if (!prog || !map)
		return -EINVAL;
	p->map_fd = bpf_map__fd(map);
	lo.flags = XDP_FLAGS_DRV_MODE;
	p->link_fd = bpf_link_create(bpf_program__fd(prog), p->ifindex, BPF_XDP, &lo);
	*skb_mode = false;
	if (p->link_fd < 0 && p->link_fd != -EBUSY && p->link_fd != -EEXIST) {
		log_errno(LOG_INFO, -p->link_fd, "eth %s: XDP native mode", p->dev);
		lo.flags = XDP_FLAGS_SKB_MODE;
		p->link_fd = bpf_link_create(bpf_program__fd(prog), p->ifindex, BPF_XDP, &lo);
		*skb_mode = true;
	}
	if (p->link_fd < 0) {
		r = p->link_fd;
		p->link_fd = -1;
		if (r == -EBUSY || r == -EEXIST)
			log_error("eth %s: the device has an XDP program already (another af_xdp "
				  "port, or one attached with ip or xdp-loader): one af_xdp port "
				  "per device",
				  p->dev);
		else
			log_errno(LOG_ERR, -r, "eth %s: attaching the XDP program", p->dev);
		return r;
	}
	return 0;
}

static int umem_create(struct ethp_port *p, unsigned ring)
{
	struct xsk_umem_config uc = {
		.fill_size = ring,
		.comp_size = TX_RING,
		.frame_size = p->chunk,
		.frame_headroom = FRAME_HEADROOM,
	};

	return xsk_umem__create(&p->umem, p->mem, p->mem_len, &p->devq[0].fill, &p->devq[0].comp,
				&uc);
}

/* Devq d's socket on the shared UMEM; the first one decides zero-copy or copy. */
static int devq_open(struct ethp_port *p, unsigned d, unsigned ring, uint32_t bind_flags)
{
	struct xdp_devq *dq = &p->devq[d];
	struct xsk_socket_config sc = {
		.rx_size = ring,
		.tx_size = TX_RING,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = (uint16_t)bind_flags,
	};
	int r;

	/* A socket closed just before (a restart, a reload) frees its queue in the kernel
	 * a little later (longer on a busy machine): until then the bind says EBUSY. Up to
	 * three seconds of retries. */
	for (int tries = 0;; tries++) {
		r = xsk_socket__create_shared(&dq->xsk, p->dev, d, p->umem, &dq->rx, &dq->tx,
					      &dq->fill, &dq->comp, &sc);
		if (r != -EBUSY || tries >= 300)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
	if (r < 0) {
		dq->xsk = NULL;
		return r;
	}
	dq->fd = xsk_socket__fd(dq->xsk);
	return 0;
}

static void axp_close(struct ethp_port *p)
{
	if (!p)
		return;
	/* The program first: frames go back to the kernel, none to a closing socket. */
	if (p->link_fd >= 0)
		close(p->link_fd);
	for (unsigned i = 0; i < ETHP_QUEUES_MAX; i++)
		queue_close(p, p->q[i]);
	for (unsigned d = 0; p->devq && d < p->n_devq; d++) {
		if (p->devq[d].xsk)
			xsk_socket__delete(p->devq[d].xsk);
		pthread_mutex_destroy(&p->devq[d].lock);
	}
	if (p->umem)
		xsk_umem__delete(p->umem);
	if (p->obj)
		bpf_object__close(p->obj);
	if (p->ctl_fd >= 0)
		close(p->ctl_fd);
	pthread_mutex_destroy(&p->free_lock);
	if (p->mem)
		munmap(p->mem, p->mem_len);
	free(p->devq);
	free(p->bufs);
	free(p->free_ids);
	free(p->state);
	free(p);
}

static int axp_open(const struct ethp_port_config *cfg, struct ethp_port **out)
{
	struct ethp_port *p;
	struct ethp_port_attr attr;
	unsigned i, ring = 64;
	bool skb_mode = false, zc = false;
	long page = sysconf(_SC_PAGESIZE);
	int r;

	if (!cfg || !cfg->device || !*cfg->device || strlen(cfg->device) >= IF_NAMESIZE ||
	    cfg->vlan > 4094)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->free_lock, NULL);
	p->ctl_fd = p->link_fd = p->map_fd = -1;
	strcpy(p->dev, cfg->device);
	p->vlan = cfg->vlan;
	p->n_bufs = cfg->n_bufs ? cfg->n_bufs : 1024;
	/* A chunk is half a page or a page (aligned UMEM): a larger buf_size (room for GSO
	 * frames, which AF_XDP does not deliver) is cut to one page. */
	p->chunk = cfg->buf_size && cfg->buf_size <= 2048 ? 2048 : (unsigned)page;
	p->rx_depth = cfg->rx_depth ? cfg->rx_depth : p->n_bufs / 2;
	r = -EINVAL;
	if (p->n_bufs < 16 || p->n_bufs > 32768 || (cfg->buf_size && cfg->buf_size < 256) ||
	    cfg->buf_size > ETHP_BUF_MAX || p->rx_depth >= p->n_bufs || page < 2048) {
		log_error("eth %s: bad pool (n_bufs %u, buf_size %u, rx_depth %u)", p->dev,
			  p->n_bufs, cfg->buf_size, p->rx_depth);
		goto fail;
	}
	p->ifindex = (int)if_nametoindex(p->dev);
	if (p->ifindex == 0) {
		r = -ENODEV;
		log_error("eth %s: no such device", p->dev);
		goto fail;
	}
	libbpf_set_print(bpf_print);
	libxdp_set_print(xdp_print);
	p->n_devq = rx_queue_count(p->dev);
	if (p->n_devq > DEVQ_MAX) {
		log_error("eth %s: %u RX queues; af_xdp serves at most %u", p->dev, p->n_devq,
			  DEVQ_MAX);
		goto fail;
	}
	/* Each devq's fill and RX rings hold its share of the receive depth, and at least
	 * its share of RX_DESC_PORT: a burst the worker meets late (asleep, or off its
	 * CPU) waits there; past the ring the kernel drops it (afxdp.sh lost 15-60 % of
	 * back-to-back datagrams with 256-deep rings). The pool grows to feed them. */
	p->depth = p->rx_depth / p->n_devq;
	if (p->depth < RX_DESC_PORT / p->n_devq)
		p->depth = RX_DESC_PORT / p->n_devq;
	if (p->depth > RX_DESC_DEVQ_MAX)
		p->depth = RX_DESC_DEVQ_MAX;
	if (p->depth < 64)
		p->depth = 64;
	while (ring < p->depth)
		ring <<= 1;
	p->depth = ring;
	if (p->n_bufs < p->n_devq * (p->depth + TX_RING) + p->n_bufs / 2)
		p->n_bufs = p->n_devq * (p->depth + TX_RING) + p->n_bufs / 2;
	p->rx_depth = p->n_devq * p->depth;

	/* The pool, which is the UMEM. */
	p->mem_len = (size_t)p->n_bufs * p->chunk;
	p->mem = mmap(NULL, p->mem_len, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	p->bufs = calloc(p->n_bufs, sizeof(*p->bufs));
	p->free_ids = calloc(p->n_bufs, sizeof(*p->free_ids));
	p->state = calloc(p->n_bufs, 1);
	p->devq = calloc(p->n_devq, sizeof(*p->devq));
	if (p->mem == MAP_FAILED) {
		p->mem = NULL;
		r = -ENOMEM;
		goto fail;
	}
	if (!p->bufs || !p->free_ids || !p->state || !p->devq) {
		r = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < p->n_bufs; i++) {
		p->bufs[i].base = p->mem + (size_t)i * p->chunk;
		p->bufs[i].cap = p->chunk;
		p->bufs[i].id = i;
		p->free_ids[i] = p->n_bufs - 1 - i;
	}
	p->n_free = p->n_bufs;
	for (i = 0; i < p->n_devq; i++) {
		pthread_mutex_init(&p->devq[i].lock, NULL);
		p->devq[i].id = i;
		p->devq[i].fd = -1;
		p->devq[i].kernel_state = (uint8_t)(BUF_KERNEL + i);
		p->devq[i].owner = ETHP_QUEUES_MAX; /* none until set_queues */
	}

	p->ctl_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (p->ctl_fd < 0) {
		r = -errno;
		log_errno(LOG_ERR, -r, "eth %s: AF_PACKET socket", p->dev);
		goto fail;
	}
	if ((r = prog_attach(p, &skb_mode)) < 0)
		goto fail;

	/* The sockets: zero-copy where the driver offers it (never in generic mode). */
	r = umem_create(p, ring);
	if (r < 0) {
		p->umem = NULL;
		log_errno(LOG_ERR, -r, "eth %s: AF_XDP UMEM (%zu bytes)", p->dev, p->mem_len);
		goto fail;
	}
	if (!skb_mode) {
		r = devq_open(p, 0, ring, XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP);
		zc = r == 0;
		if (r < 0) {
			/* The failed bind leaves the UMEM's rings in an unknown state: anew. */
			xsk_umem__delete(p->umem);
			p->umem = NULL;
			if ((r = umem_create(p, ring)) < 0) {
				p->umem = NULL;
				goto fail;
			}
		}
	}
	if (!zc) {
		r = devq_open(p, 0, ring, XDP_COPY | XDP_USE_NEED_WAKEUP);
		if (r < 0) {
			log_errno(LOG_ERR, -r, "eth %s: AF_XDP socket on queue 0", p->dev);
			goto fail;
		}
	}
	for (i = 1; i < p->n_devq; i++) {
		r = devq_open(p, i, ring, 0);
		if (r < 0) {
			log_errno(LOG_ERR, -r, "eth %s: AF_XDP socket on queue %u", p->dev, i);
			goto fail;
		}
	}
	p->io = zc ? "af_xdp-zc" : skb_mode ? "af_xdp-skb" : "af_xdp-copy";
	r = axp_set_queues(p, 1);
	if (r < 0)
		goto fail;
	for (i = 0; i < p->n_devq; i++) {
		struct xdp_devq *dq = &p->devq[i];
		uint32_t key = i;

		pthread_mutex_lock(&dq->lock);
		fill_refill(p, dq);
		pthread_mutex_unlock(&dq->lock);
		if (bpf_map_update_elem(p->map_fd, &key, &dq->fd, BPF_ANY) < 0) {
			r = -errno;
			log_errno(LOG_ERR, -r, "eth %s: XSKMAP entry of queue %u", p->dev, i);
			goto fail;
		}
	}
	r = axp_query(p, &attr);
	if (r < 0) {
		log_errno(LOG_ERR, -r, "eth %s: query", p->dev);
		goto fail;
	}
	atomic_store(&p->link_up, attr.link_up);
	if (!atomic_exchange(&mode_logged, true) || zc)
		log_notice("eth %s: AF_XDP %s, XDP program in %s mode, %u RX queue%s, %u-byte "
			   "chunks",
			   p->dev, zc ? "zero-copy" : "copy mode",
			   skb_mode ? "generic (SKB)" : "native", p->n_devq,
			   p->n_devq == 1 ? "" : "s", p->chunk);
	*out = p;
	return 0;
fail:
	axp_close(p);
	return r;
}

const struct ethp_ops ethp_afxdp_ops = {
	.name = "af_xdp",
	.open = axp_open,
	.close = axp_close,
	.query = axp_query,
	.set_link = axp_set_link,
	.mc_add = axp_mc_add,
	.mc_del = axp_mc_del,
	.set_promisc = axp_set_promisc,
	.set_queues = axp_set_queues,
	.buf_get = axp_buf_get,
	.buf_put = axp_buf_put,
	.rx_done = axp_rx_done,
	.rx_burst = axp_rx_burst,
	.tx_burst = axp_tx_burst,
	.wait_fd = axp_wait_fd,
	.arm = axp_arm,
	.stats = axp_stats,
};
