/*
 * The af_packet backend of the Ethernet port table (port/eth_port.h).
 *
 * One AF_PACKET socket (SOCK_RAW, ETH_P_ALL) per queue, bound to the device, with
 * PACKET_AUXDATA (the kernel strips the outer VLAN tag before any packet tap sees the
 * frame, on veth and on NICs alike; auxdata gives it back), PACKET_IGNORE_OUTGOING
 * (no copies of our own or the kernel's transmits), PACKET_QDISC_BYPASS, and a
 * classic BPF filter that keeps only the port's VLAN (or only untagged frames), so a
 * device carrying several VLAN ports does not copy every frame into every socket.
 * The filter is attached before the socket is bound to a protocol: no frame of
 * another VLAN is ever queued. User space checks the tag again.
 *
 * Queues: every queue's socket joins the port's PACKET_FANOUT group (PACKET_FANOUT_HASH,
 * its id chosen by the kernel for the first, PACKET_FANOUT_FLAG_UNIQUEID): the kernel
 * hands each frame to one socket of the group by its flow hash. A socket bound to the
 * device but not yet in the group would receive every frame (a copy of what the group
 * delivers): so a socket is bound and joined with a filter that drops everything, and
 * gets the VLAN filter only once it is a member. Memberships (multicast, promiscuous)
 * are a socket's: they are made on queue 0's, which lives as long as the port.
 *
 * Two I/O engines:
 *
 *   io_uring  receive: one multishot RECVMSG with buffer selection from a provided
 *             buffer ring whose entries are the pool's buffers (buffer id = pool
 *             index). The kernel writes io_uring's recvmsg header, the sockaddr_ll
 *             (packet type), the auxdata cmsg and the frame into the buffer; rx_burst
 *             reaps completions without a system call while any are queued, refills
 *             the ring from the free list, and re-arms the multishot when the kernel
 *             ended it (ring empty: -ENOBUFS); the ring runs its task work
 *             cooperatively (COOP_TASKRUN: no interrupt of a polling worker).
 *             send: a chain of linked SENDMSG (MSG_DONTWAIT) per burst on a second
 *             ring, submitted and reaped in one io_uring_enter; a full socket fails
 *             the link and ends the accepted prefix. Two rings, so send completions
 *             never interleave with receive completions.
 *   mmsg      recvmmsg/sendmmsg with MSG_DONTWAIT, per-slot iovecs, names and cmsgs
 *             prepared once at open. Used when io_uring cannot be set up (seccomp,
 *             io_uring_disabled, old kernel); logged once per process.
 *
 * Buffers: one allocation of n_bufs * buf_size shared by the queues; a free stack under
 * a mutex (buf_get and buf_put from any thread; a queue takes and returns whole batches
 * with one lock). A buffer is free, held by a caller, or posted for receive on one queue
 * (its state says which: a queue that closes takes its posted buffers back). Each queue
 * keeps rx_depth / (queues running) posted.
 *
 * Threads: see port/eth_port.h. Fields of one queue's thread are marked [queue];
 * control-only [control]; fields set at open and read-only after are unmarked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <liburing.h>
#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port/eth_port.h"
#include "pkt/ip.h"
#include "lib/log.h"

#define BATCH_MAX   64 /* frames per recvmmsg/sendmmsg/SENDMSG chain */
#define NAME_LEN    24 /* sockaddr_ll (20) padded: the cmsg that follows is 8-aligned */
#define CTL_LEN     CMSG_SPACE(sizeof(struct tpacket_auxdata)) /* 40 */
#define RX_USERDATA 1
#define BGID        0

/* The virtio_net_hdr is the first thing of the payload, the frame follows it. Without
 * PACKET_VNET_HDR the receive msghdr asks for 10 bytes more control room instead, so the
 * frame starts at the same place. */
_Static_assert(sizeof(struct io_uring_recvmsg_out) + NAME_LEN + CTL_LEN + GSO_VNET_LEN ==
		   ETHP_RX_HEADROOM,
	       "receive headroom");

/* A buffer's state: free, held, or posted on queue q (BUF_POSTED + q). Read and written
 * with relaxed atomics: a queue marks its own posted buffers held without the lock. */
enum buf_state {
	BUF_FREE,
	BUF_HELD,
	BUF_POSTED
};

struct afp_queue {
	struct ethp_port *port;
	unsigned id;
	int fd;
	uint8_t posted_state; /* BUF_POSTED + id */

	/* io_uring receive [queue]. */
	struct io_uring rx_ring;
	struct io_uring_buf_ring *br;
	size_t br_len;
	unsigned br_entries;
	unsigned posted;
	bool rx_armed;
	struct msghdr rx_msg;
	/* io_uring send [queue]. */
	struct io_uring tx_ring;
	bool rings; /* both rings set up */

	/* mmsg receive [queue]: stash[i] is posted in slot i. */
	struct mmsghdr rmsg[BATCH_MAX];
	struct iovec riov[BATCH_MAX];
	struct sockaddr_ll rname[BATCH_MAX];
	uint8_t rctl[BATCH_MAX][CTL_LEN] __attribute__((aligned(8)));
	struct ethp_buf *stash[BATCH_MAX];
	unsigned n_stash;

	/* Send scratch [queue]. */
	struct mmsghdr tmsg[BATCH_MAX];
	struct iovec tiov[BATCH_MAX][2];
	uint8_t thdr[BATCH_MAX][GSO_VNET_LEN + ETHP_HDR_MAX + 4];

	struct ethp_stats st;  /* [queue] writes, relaxed */
	uint64_t kernel_drops; /* [control] PACKET_STATISTICS accumulated */
};

struct ethp_port {
	char dev[IF_NAMESIZE];
	int ifindex;
	uint16_t vlan;
	bool uring; /* queue 0 decided: every queue uses the same engine */
	bool vnet;  /* PACKET_VNET_HDR: a virtio_net_hdr before every frame, both ways */
	bool vnet_wanted;
	enum ethp_io_mode io;
	int fanout; /* the PACKET_FANOUT group id (queue 0 made it) */
	_Atomic bool link_up;
	_Atomic uint32_t mtu;
	_Atomic unsigned depth; /* buffers each queue keeps posted: rx_depth / n_queues */

	/* Pool. */
	uint8_t *mem;
	size_t mem_len;
	struct ethp_buf *bufs;
	unsigned n_bufs, buf_size, rx_depth;
	pthread_mutex_t free_lock;
	uint32_t *free_ids; /* [free_lock] stack */
	unsigned n_free;    /* [free_lock] */
	uint8_t *state;     /* enum buf_state per buffer: [free_lock], but a queue marks
			     * its own posted buffers held (relaxed atomics) */

	struct afp_queue *q[ETHP_QUEUES_MAX]; /* [control] writes; 0..n_queues-1 exist */
	unsigned n_queues;                    /* [control] */
	struct ethp_stats gone;               /* [control] counters of queues closed */
};

#define CNT_ADD(q, field, n) __atomic_store_n(&(q)->st.field, (q)->st.field + (n), __ATOMIC_RELAXED)

static atomic_bool mmsg_logged;

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

static void give_back(struct ethp_port *p, struct ethp_buf *const *bufs, unsigned n, uint8_t from)
{
	unsigned i;

	pthread_mutex_lock(&p->free_lock);
	for (i = 0; i < n; i++) {
		uint32_t id = bufs[i]->id;

		if (id >= p->n_bufs || &p->bufs[id] != bufs[i] ||
		    __atomic_load_n(&p->state[id], __ATOMIC_RELAXED) != from) {
			log_error("eth %s: buffer %u returned while not held (ignored)", p->dev,
				  id);
			continue;
		}
		__atomic_store_n(&p->state[id], BUF_FREE, __ATOMIC_RELAXED);
		p->free_ids[p->n_free++] = id;
	}
	pthread_mutex_unlock(&p->free_lock);
}

static struct ethp_buf *afp_buf_get(struct ethp_port *p)
{
	struct ethp_buf *b;

	return take_free(p, &b, 1, BUF_HELD) ? b : NULL;
}

static void afp_buf_put(struct ethp_port *p, struct ethp_buf *b)
{
	if (b)
		give_back(p, &b, 1, BUF_HELD);
}

static void afp_rx_done(struct ethp_port *p, const struct ethp_rx *rxs, unsigned n)
{
	struct ethp_buf *bufs[BATCH_MAX];

	while (n) {
		unsigned k = n < BATCH_MAX ? n : BATCH_MAX;

		for (unsigned i = 0; i < k; i++)
			bufs[i] = rxs[i].buf;
		give_back(p, bufs, k, BUF_HELD);
		rxs += k;
		n -= k;
	}
}

/* A buffer posted on its queue becomes held by the caller (a receive completed into
 * it), or posted again (a receive refused before the caller saw it): only that queue's
 * thread changes a buffer posted on it, so without the lock. */
static void buf_mark(struct ethp_port *p, struct ethp_buf *b, uint8_t state)
{
	__atomic_store_n(&p->state[b->id], state, __ATOMIC_RELAXED);
}

/* Queue q closes: its posted buffers are free again. */
static void take_back_posted(struct afp_queue *q)
{
	struct ethp_port *p = q->port;

	pthread_mutex_lock(&p->free_lock);
	for (unsigned id = 0; id < p->n_bufs; id++) {
		if (__atomic_load_n(&p->state[id], __ATOMIC_RELAXED) != q->posted_state)
			continue;
		__atomic_store_n(&p->state[id], BUF_FREE, __ATOMIC_RELAXED);
		p->free_ids[p->n_free++] = id;
	}
	pthread_mutex_unlock(&p->free_lock);
}

/* ---- receive: the common part ---- */

/*
 * The offload metadata, with PACKET_VNET_HDR: a GSO frame's is checked against the
 * frame and kept in the descriptor; a frame from a local sender (a veth peer, a VM's
 * tap) may carry a TCP/UDP checksum left to offload (NEEDS_CSUM; without the vnet
 * header, TP_STATUS_CSUMNOTREADY): forwarded as is, the far end drops the segment, so
 * it is computed here, over the pseudo-header and the whole L4 segment, as the
 * offloading NIC would have. A GSO frame's segments get theirs when they are cut.
 * stripped: an in-band tag was removed (csum_start counted it). Returns false (counted)
 * when the metadata does not fit the frame.
 */
static bool offload_meta(struct afp_queue *q, uint8_t *data, uint32_t len, const uint8_t *vnet,
			 const struct tpacket_auxdata *aux, bool stripped, struct ethp_rx *rx)
{
	uint16_t type = (uint16_t)(data[12] << 8 | data[13]);
	bool partial = false;

	rx->gso = (struct gso_pkt){ 0 };
	if (vnet) {
		struct gso_vnet v;

		gso_vnet_read(&v, vnet);
		if (stripped && (v.flags & GSO_VNET_F_NEEDS_CSUM)) {
			if (v.csum_start < 4) {
				CNT_ADD(q, drops[ETHP_DROP_RX_GSO], 1);
				return false;
			}
			v.csum_start -= 4;
		}
		if (gso_check(&v, data, len, &rx->gso, &partial) != GSO_OK) {
			CNT_ADD(q, drops[ETHP_DROP_RX_GSO], 1);
			return false;
		}
		if (rx->gso.kind != GSO_NONE) {
			CNT_ADD(q, rx_gso, 1);
			return true;
		}
	} else {
		partial = aux && (aux->tp_status & TP_STATUS_CSUMNOTREADY);
	}
	if (partial && (type == ETH_P_IP || type == ETH_P_IPV6) &&
	    gso_l4_csum_fill(data + ETH_HLEN, len - ETH_HLEN))
		CNT_ADD(q, rx_csum_completed, 1);
	return true;
}

/* Check the frame's VLAN against the port's, strip an in-band tag; fill *rx.
 * Returns false (counted) when the frame is not for this port. */
static bool accept_frame(struct afp_queue *q, struct ethp_buf *b, uint8_t *data, uint32_t len,
			 uint8_t pkttype, const struct tpacket_auxdata *aux, const uint8_t *vnet,
			 struct ethp_rx *rx)
{
	uint16_t tci = 0;
	bool tagged = false, stripped = false;

	if (len < ETH_HLEN) {
		CNT_ADD(q, drops[ETHP_DROP_RX_RUNT], 1);
		return false;
	}
	if (aux && (aux->tp_status & TP_STATUS_VLAN_VALID)) {
		if ((aux->tp_status & TP_STATUS_VLAN_TPID_VALID) &&
		    aux->tp_vlan_tpid != ETH_P_8021Q)
			goto wrong_vlan;
		tci = aux->tp_vlan_tci;
		tagged = true;
	} else if (data[12] == 0x81 && data[13] == 0x00) {
		if (len < ETH_HLEN + 4) {
			CNT_ADD(q, drops[ETHP_DROP_RX_RUNT], 1);
			return false;
		}
		tci = (uint16_t)(data[14] << 8 | data[15]);
		memmove(data + 4, data, 12);
		data += 4;
		len -= 4;
		tagged = stripped = true;
	} else if (data[12] == 0x88 && data[13] == 0xa8) {
		goto wrong_vlan;
	}
	if ((tci & 0x0fff) != q->port->vlan)
		goto wrong_vlan;
	if (!offload_meta(q, data, len, vnet, aux, stripped, rx))
		return false;
	rx->buf = b;
	rx->data = data;
	rx->len = len;
	rx->vlan_tci = tci;
	rx->pkttype = pkttype;
	rx->flags = tagged ? ETHP_RX_VLAN : 0;
	CNT_ADD(q, rx_packets, 1);
	CNT_ADD(q, rx_bytes, len);
	return true;
wrong_vlan:
	CNT_ADD(q, drops[ETHP_DROP_RX_VLAN], 1);
	return false;
}

/* The auxdata among the cmsgs; o is io_uring's header (its cmsgs are bounded by it),
 * NULL for a plain msghdr. */
static const struct tpacket_auxdata *find_aux(struct msghdr *mh, struct io_uring_recvmsg_out *o,
					      struct cmsghdr *c, struct tpacket_auxdata *copy)
{
	for (; c; c = o ? io_uring_recvmsg_cmsg_nexthdr(o, mh, c) : CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA &&
		    c->cmsg_len >= CMSG_LEN(sizeof(*copy))) {
			memcpy(copy, CMSG_DATA(c), sizeof(*copy));
			return copy;
		}
	}
	return NULL;
}

/* ---- receive: io_uring ---- */

/* The buffers a queue keeps posted: its share of the port's receive depth. */
static unsigned queue_depth(const struct afp_queue *q)
{
	return atomic_load_explicit(&q->port->depth, memory_order_relaxed);
}

static void uring_refill(struct afp_queue *q)
{
	struct ethp_port *p = q->port;
	struct ethp_buf *got[BATCH_MAX];
	unsigned want, n, i, depth = queue_depth(q), mask = io_uring_buf_ring_mask(q->br_entries);

	while (q->posted < depth) {
		want = depth - q->posted;
		if (want > BATCH_MAX)
			want = BATCH_MAX;
		n = take_free(p, got, want, q->posted_state);
		if (n == 0)
			return;
		for (i = 0; i < n; i++)
			io_uring_buf_ring_add(q->br, got[i]->base, got[i]->cap,
					      (unsigned short)got[i]->id, mask, (int)i);
		io_uring_buf_ring_advance(q->br, (int)n);
		q->posted += n;
	}
}

static int uring_arm_rx(struct afp_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->rx_ring);
	int r;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_recvmsg_multishot(sqe, q->fd, &q->rx_msg, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, RX_USERDATA);
	r = io_uring_submit(&q->rx_ring);
	if (r < 0)
		return r;
	q->rx_armed = true;
	return 0;
}

static int uring_rx_burst(struct afp_queue *q, struct ethp_rx *rxs, unsigned max)
{
	struct ethp_port *p = q->port;
	struct io_uring_cqe *cqes[BATCH_MAX];
	unsigned got = 0;
	int r;

	uring_refill(q);
	if (!q->rx_armed && q->posted > 0) {
		r = uring_arm_rx(q);
		if (r < 0)
			return r;
	}
	while (got < max) {
		unsigned want = max - got, n, i;

		if (want > BATCH_MAX)
			want = BATCH_MAX;
		n = io_uring_peek_batch_cqe(&q->rx_ring, cqes, want);
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			struct io_uring_cqe *c = cqes[i];
			struct io_uring_recvmsg_out *o;
			struct ethp_buf *b;
			struct tpacket_auxdata auxc;
			const struct tpacket_auxdata *aux;
			const struct sockaddr_ll *sll;
			uint8_t *data, *vnet;
			uint32_t len;

			if (!(c->flags & IORING_CQE_F_MORE))
				q->rx_armed = false;
			if (!(c->flags & IORING_CQE_F_BUFFER))
				continue; /* -ENOBUFS (ring ran dry) or an error: re-arm */
			b = &p->bufs[c->flags >> IORING_CQE_BUFFER_SHIFT];
			q->posted--;
			buf_mark(p, b, BUF_HELD);
			o = c->res > 0 ? io_uring_recvmsg_validate(b->base, c->res, &q->rx_msg)
				       : NULL;
			if (!o) {
				afp_buf_put(p, b);
				continue;
			}
			if (o->flags & MSG_TRUNC) {
				CNT_ADD(q, drops[ETHP_DROP_RX_TRUNCATED], 1);
				afp_buf_put(p, b);
				continue;
			}
			sll = io_uring_recvmsg_name(o);
			aux = find_aux(&q->rx_msg, o, io_uring_recvmsg_cmsg_firsthdr(o, &q->rx_msg),
				       &auxc);
			data = io_uring_recvmsg_payload(o, &q->rx_msg);
			len = io_uring_recvmsg_payload_length(o, c->res, &q->rx_msg);
			vnet = NULL;
			if (p->vnet) {
				if (len < GSO_VNET_LEN) {
					CNT_ADD(q, drops[ETHP_DROP_RX_RUNT], 1);
					afp_buf_put(p, b);
					continue;
				}
				vnet = data;
				data += GSO_VNET_LEN;
				len -= GSO_VNET_LEN;
			}
			if (accept_frame(q, b, data, len,
					 o->namelen >= sizeof(*sll) ? sll->sll_pkttype : 0, aux,
					 vnet, &rxs[got]))
				got++;
			else
				afp_buf_put(p, b);
		}
		io_uring_cq_advance(&q->rx_ring, n);
	}
	if (!q->rx_armed) {
		uring_refill(q);
		if (q->posted > 0) {
			r = uring_arm_rx(q);
			if (r < 0 && got == 0)
				return r;
		}
	}
	return (int)got;
}

/* ---- receive: recvmmsg ---- */

static int mmsg_rx_burst(struct afp_queue *q, struct ethp_rx *rxs, unsigned max)
{
	struct ethp_port *p = q->port;
	struct ethp_buf *keep[BATCH_MAX];
	unsigned n = max < BATCH_MAX ? max : BATCH_MAX, i, got = 0, kept = 0;
	int r;

	if (q->n_stash < n)
		q->n_stash += take_free(p, q->stash + q->n_stash, n - q->n_stash, q->posted_state);
	if (q->n_stash < n)
		n = q->n_stash;
	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned at = ETHP_RX_HEADROOM - (p->vnet ? GSO_VNET_LEN : 0);

		q->riov[i].iov_base = q->stash[i]->base + at;
		q->riov[i].iov_len = q->stash[i]->cap - at;
		q->rmsg[i].msg_hdr.msg_namelen = sizeof(q->rname[i]);
		q->rmsg[i].msg_hdr.msg_controllen = CTL_LEN;
		q->rmsg[i].msg_hdr.msg_flags = 0;
	}
	r = recvmmsg(q->fd, q->rmsg, n, MSG_DONTWAIT, NULL);
	if (r < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	for (i = 0; i < (unsigned)r; i++) {
		struct msghdr *mh = &q->rmsg[i].msg_hdr;
		struct ethp_buf *b = q->stash[i];
		struct tpacket_auxdata auxc;
		const struct tpacket_auxdata *aux;
		uint32_t len = q->rmsg[i].msg_len;

		if (p->vnet && len < GSO_VNET_LEN) {
			CNT_ADD(q, drops[ETHP_DROP_RX_RUNT], 1);
			keep[kept++] = b;
			continue;
		}
		if (p->vnet)
			len -= GSO_VNET_LEN;
		if (mh->msg_flags & MSG_TRUNC) {
			CNT_ADD(q, drops[ETHP_DROP_RX_TRUNCATED], 1);
			keep[kept++] = b;
			continue;
		}
		aux = find_aux(mh, NULL, CMSG_FIRSTHDR(mh), &auxc);
		buf_mark(p, b, BUF_HELD);
		if (accept_frame(q, b, b->base + ETHP_RX_HEADROOM, len, q->rname[i].sll_pkttype,
				 aux, p->vnet ? b->base + ETHP_RX_HEADROOM - GSO_VNET_LEN : NULL,
				 &rxs[got])) {
			got++;
		} else {
			buf_mark(p, b, q->posted_state);
			keep[kept++] = b;
		}
	}
	/* Unused and refused buffers stay posted, in front of those not reached. */
	memmove(q->stash + kept, q->stash + r, (q->n_stash - (unsigned)r) * sizeof(q->stash[0]));
	memcpy(q->stash, keep, kept * sizeof(keep[0]));
	q->n_stash = q->n_stash - (unsigned)r + kept;
	return (int)got;
}

/* Queue q of p, or NULL when it does not exist (a caller's mistake). */
static struct afp_queue *queue_of(struct ethp_port *p, unsigned q)
{
	return q < ETHP_QUEUES_MAX ? p->q[q] : NULL;
}

static int afp_rx_burst(struct ethp_port *p, unsigned qi, struct ethp_rx *rxs, unsigned max)
{
	struct afp_queue *q = queue_of(p, qi);

	if (!q)
		return -EINVAL;
	if (max == 0)
		return 0;
	return p->uring ? uring_rx_burst(q, rxs, max) : mmsg_rx_burst(q, rxs, max);
}

/* ---- send ---- */

/* The virtio_net_hdr of a frame to send: zero, or a GSO frame's (the kernel segments
 * it: gso_size, where its L4 header and checksum are, the checksum to complete). hl is
 * the L2 header's length on the wire. false: not a GSO frame this port can send. */
static bool tx_vnet(const struct ethp_tx *t, unsigned hl, uint8_t *out)
{
	struct gso_vnet v = { 0 };
	bool tcp = t->gso.kind == GSO_TCP;

	if (t->gso.kind != GSO_NONE) {
		unsigned field = tcp ? 16 : 6, l4h = tcp ? 20 : 8;

		if ((t->gso.kind != GSO_TCP && t->gso.kind != GSO_UDP) || !t->gso.size ||
		    t->len < 1 || (uint32_t)t->l4_off + l4h > t->len)
			return false;
		v.flags = GSO_VNET_F_NEEDS_CSUM;
		v.gso_type = !tcp                   ? GSO_VNET_UDP_L4
			     : t->data[0] >> 4 == 4 ? GSO_VNET_TCPV4
						    : GSO_VNET_TCPV6;
		/* CWR set: a device without TSO_ECN must leave it to software GSO */
		if (tcp && (t->data[t->l4_off + 13] & 0x80))
			v.gso_type |= GSO_VNET_ECN;
		v.gso_size = t->gso.size;
		v.csum_start = (uint16_t)(hl + t->l4_off);
		v.csum_offset = (uint16_t)field;
		v.hdr_len = (uint16_t)(v.csum_start + field + 2);
	}
	gso_vnet_write(out, &v);
	return true;
}

/* Build slot i's header (the port's tag inserted, the virtio_net_hdr before it) and
 * iovecs. Returns false when the frame is invalid: header shorter than 14 or longer
 * than ETHP_HDR_MAX, payload (everything after the first 14 bytes) larger than the MTU
 * (a GSO frame: than an IP packet, and only with the vnet header). */
static bool build_tx(struct afp_queue *q, const struct ethp_tx *t, unsigned i)
{
	struct ethp_port *p = q->port;
	struct msghdr *mh = &q->tmsg[i].msg_hdr;
	uint8_t *h = q->thdr[i] + (p->vnet ? GSO_VNET_LEN : 0);
	unsigned hl = t->hdr_len, mtu = atomic_load_explicit(&p->mtu, memory_order_relaxed);

	if (t->gso.kind != GSO_NONE) {
		if (!p->vnet)
			return false;
		mtu = 65535;
	}
	if (hl < ETH_HLEN || hl > ETHP_HDR_MAX || (t->len && !t->data) ||
	    (uint64_t)hl + t->len - ETH_HLEN > mtu)
		return false;
	if (p->vnet && !tx_vnet(t, hl + (p->vlan ? 4 : 0), q->thdr[i]))
		return false;
	if (p->vlan) {
		memcpy(h, t->hdr, 12);
		h[12] = 0x81;
		h[13] = 0x00;
		h[14] = (uint8_t)(p->vlan >> 8);
		h[15] = (uint8_t)p->vlan;
		memcpy(h + 16, t->hdr + 12, hl - 12);
		hl += 4;
	} else {
		memcpy(h, t->hdr, hl);
	}
	memset(mh, 0, sizeof(*mh));
	q->tiov[i][0].iov_base = q->thdr[i];
	q->tiov[i][0].iov_len = hl + (p->vnet ? GSO_VNET_LEN : 0);
	q->tiov[i][1].iov_base = (void *)t->data;
	q->tiov[i][1].iov_len = t->len;
	mh->msg_iov = q->tiov[i];
	mh->msg_iovlen = t->len ? 2 : 1;
	return true;
}

static void count_sent(struct afp_queue *q, const struct ethp_tx *t)
{
	CNT_ADD(q, tx_packets, 1);
	CNT_ADD(q, tx_bytes, (uint64_t)t->hdr_len + t->len + (q->port->vlan ? 4 : 0));
	if (t->gso.kind != GSO_NONE)
		CNT_ADD(q, tx_gso, 1);
}

/* A send error: true if it ends the burst (queue full), else the frame is dropped. */
static bool tx_error(struct afp_queue *q, int err)
{
	switch (err) {
	case EAGAIN:
	case ENOBUFS:
	case EINTR:
		return true;
	case ENETDOWN:
	case ENXIO:
		CNT_ADD(q, drops[ETHP_DROP_TX_LINK_DOWN], 1);
		return false;
	case EMSGSIZE:
	case EINVAL:
		CNT_ADD(q, drops[ETHP_DROP_TX_INVALID], 1);
		return false;
	default:
		CNT_ADD(q, drops[ETHP_DROP_TX_ERROR], 1);
		return false;
	}
}

/* Send the frames built in slots [first, m) as one chain of linked SENDMSGs. A
 * failure cancels the rest of the chain. Returns the first slot not consumed (a
 * dropped frame is consumed); *full when the socket's queue was full. */
static unsigned uring_send(struct afp_queue *q, const struct ethp_tx *txs, unsigned first,
			   unsigned m, bool *full)
{
	struct io_uring_cqe *cqes[BATCH_MAX];
	struct io_uring_sqe *sqe = NULL, *last = NULL;
	int res[BATCH_MAX];
	unsigned i, n = 0, got;

	for (i = first; i < m; i++) {
		sqe = io_uring_get_sqe(&q->tx_ring);
		if (!sqe)
			break;
		last = sqe;
		io_uring_prep_sendmsg(sqe, q->fd, &q->tmsg[i].msg_hdr, MSG_DONTWAIT);
		io_uring_sqe_set_data64(sqe, i);
		sqe->flags |= IOSQE_IO_LINK;
		res[i] = -ECANCELED;
		n++;
	}
	if (n == 0) {
		*full = true;
		return first;
	}
	last->flags &= (uint8_t)~IOSQE_IO_LINK; /* the chain ends here */
	if (io_uring_submit_and_wait(&q->tx_ring, n) < 0) {
		*full = true; /* nothing reaped: retried by the caller later */
		return first;
	}
	got = io_uring_peek_batch_cqe(&q->tx_ring, cqes, n);
	for (i = 0; i < got; i++)
		res[cqes[i]->user_data] = cqes[i]->res;
	io_uring_cq_advance(&q->tx_ring, got);
	for (i = first; i < first + n; i++) {
		if (res[i] >= 0) {
			count_sent(q, &txs[i]);
			continue;
		}
		if (res[i] == -ECANCELED)
			return i;
		if (tx_error(q, -res[i])) {
			*full = true;
			return i;
		}
		return i + 1;
	}
	return first + n;
}

static unsigned mmsg_send(struct afp_queue *q, const struct ethp_tx *txs, unsigned m, bool *full)
{
	unsigned done = 0, i;
	int r;

	while (done < m) {
		r = sendmmsg(q->fd, q->tmsg + done, m - done, MSG_DONTWAIT);
		if (r > 0) {
			for (i = done; i < done + (unsigned)r; i++)
				count_sent(q, &txs[i]);
			done += (unsigned)r;
			continue;
		}
		if (tx_error(q, errno)) {
			*full = true;
			break;
		}
		done++; /* dropped, counted */
	}
	return done;
}

static int afp_tx_burst(struct ethp_port *p, unsigned qi, const struct ethp_tx *txs, unsigned n)
{
	struct afp_queue *q = queue_of(p, qi);
	unsigned done = 0;
	bool full = false;

	if (!q)
		return -EINVAL;
	if (!atomic_load_explicit(&p->link_up, memory_order_relaxed)) {
		CNT_ADD(q, drops[ETHP_DROP_TX_LINK_DOWN], n);
		return (int)n;
	}
	while (done < n && !full) {
		const struct ethp_tx *t = txs + done;
		unsigned m = 0, chunk = n - done, sent;

		if (chunk > BATCH_MAX)
			chunk = BATCH_MAX;
		/* A batch stops before an invalid frame, which is then dropped alone. */
		while (m < chunk && build_tx(q, &t[m], m))
			m++;
		if (m == 0) {
			CNT_ADD(q, drops[ETHP_DROP_TX_INVALID], 1);
			done++;
			continue;
		}
		if (p->uring) {
			sent = 0;
			while (sent < m && !full)
				sent = uring_send(q, t, sent, m, &full);
		} else {
			sent = mmsg_send(q, t, m, &full);
		}
		done += sent;
	}
	if (full)
		CNT_ADD(q, drops[ETHP_DROP_TX_FULL], 1);
	return (int)done;
}

/* ---- control ---- */

static void ifr_of(const struct ethp_port *p, struct ifreq *ifr)
{
	memset(ifr, 0, sizeof(*ifr));
	memcpy(ifr->ifr_name, p->dev, sizeof(p->dev));
}

/* The control thread's socket for ioctls and memberships: queue 0's. */
static int ctl_fd(const struct ethp_port *p)
{
	return p->q[0]->fd;
}

static int if_ioctl(const struct ethp_port *p, unsigned long req, struct ifreq *ifr)
{
	ifr_of(p, ifr);
	return ioctl(ctl_fd(p), req, ifr) < 0 ? -errno : 0;
}

/* An ethtool get/set of one value (struct ethtool_value): 0 or -errno. */
static int ethtool_value(const struct ethp_port *p, uint32_t cmd, uint32_t *data)
{
	struct ethtool_value ev = { .cmd = cmd, .data = *data };
	struct ifreq ifr;
	int r;

	ifr_of(p, &ifr);
	ifr.ifr_data = (char *)&ev;
	r = ioctl(ctl_fd(p), SIOCETHTOOL, &ifr) < 0 ? -errno : 0;
	*data = ev.data;
	return r;
}

/*
 * Receive merging. With GRO on, the device hands every packet tap a TCP stream's
 * segments merged into frames of up to 64 KiB, as a Linux router's stack gets them.
 * With the vnet header and buffers that hold such a frame, it arrives whole with its
 * metadata and is forwarded as a GSO frame: whole where the egress takes one, cut again
 * to its segments where it does not (engine/forward.c, output_gso). So GRO is then left
 * as the device has it (nearly every NIC driver: on; a veth: off). Otherwise a merged
 * frame does not fit a buffer (rx_truncated: the whole run lost), so GRO is turned off.
 * LRO is turned off either way: what it merges cannot be cut back into the segments
 * that came (Linux turns it off on a forwarding device). What is turned off stays off
 * (a restart turns it off again; the device may carry other ports). Without
 * CAP_NET_ADMIN it says what to do instead.
 */
/* One receive offload off: get says whether bit is set, set writes the value without
 * it (GRO: the value 0/1 itself; LRO: a flag among the device's flags). */
static void offload_off(struct ethp_port *p, const char *name, const char *feature, uint32_t get,
			uint32_t set, uint32_t bit)
{
	uint32_t v = 0;
	int r;

	if (ethtool_value(p, get, &v) < 0 || !(v & bit))
		return;
	v &= ~bit;
	r = ethtool_value(p, set, &v);
	if (r < 0)
		log_errno(LOG_WARNING, -r,
			  "eth %s: %s is on and cannot be turned off: TCP segments the device "
			  "merges are dropped; run `ethtool -K %s %s off`",
			  p->dev, name, p->dev, feature);
	else
		log_notice("eth %s: %s turned off (frames are forwarded as received)", p->dev,
			   name);
}

static void rx_merging_set(struct ethp_port *p)
{
	uint32_t gro = 0;

	if (!p->vnet || p->buf_size < ETHP_RX_HEADROOM + ETHP_GSO_FRAME_MAX)
		offload_off(p, "GRO", "gro", ETHTOOL_GGRO, ETHTOOL_SGRO, 1);
	else if (ethtool_value(p, ETHTOOL_GGRO, &gro) == 0)
		log_info("eth %s: GRO %s (merged TCP segments are forwarded as GSO frames)", p->dev,
			 gro ? "on" : "off");
	offload_off(p, "LRO", "lro", ETHTOOL_GFLAGS, ETHTOOL_SFLAGS, ETH_FLAG_LRO);
}

static int afp_query(struct ethp_port *p, struct ethp_port_attr *a)
{
	struct ifreq ifr;
	int r;

	memset(a, 0, sizeof(*a));
	a->ifindex = p->ifindex;
	a->vlan = p->vlan;
	a->io = p->uring ? "io_uring" : "mmsg";
	a->gso = p->vnet;
	if ((r = if_ioctl(p, SIOCGIFHWADDR, &ifr)) < 0)
		return r;
	memcpy(a->mac, ifr.ifr_hwaddr.sa_data, ETHP_ADDR_LEN);
	if ((r = if_ioctl(p, SIOCGIFMTU, &ifr)) < 0)
		return r;
	a->mtu = (uint32_t)ifr.ifr_mtu;
	atomic_store(&p->mtu, a->mtu);
	if ((r = if_ioctl(p, SIOCGIFFLAGS, &ifr)) < 0)
		return r;
	a->link_up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	return 0;
}

static void afp_set_link(struct ethp_port *p, bool up)
{
	atomic_store(&p->link_up, up);
}

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
	return setsockopt(ctl_fd(p), SOL_PACKET, opt, &mr, sizeof(mr)) < 0 ? -errno : 0;
}

static int afp_mc_add(struct ethp_port *p, const uint8_t mac[ETHP_ADDR_LEN])
{
	if (!(mac[0] & 1))
		return -EINVAL;
	return membership(p, PACKET_ADD_MEMBERSHIP, PACKET_MR_MULTICAST, mac);
}

static int afp_mc_del(struct ethp_port *p, const uint8_t mac[ETHP_ADDR_LEN])
{
	return membership(p, PACKET_DROP_MEMBERSHIP, PACKET_MR_MULTICAST, mac);
}

static int afp_set_promisc(struct ethp_port *p, bool on)
{
	return membership(p, on ? PACKET_ADD_MEMBERSHIP : PACKET_DROP_MEMBERSHIP, PACKET_MR_PROMISC,
			  NULL);
}

/* Add a queue's counters (its thread's, read relaxed) to *st. */
static void stats_add(struct ethp_stats *st, const struct ethp_stats *qs)
{
	st->rx_packets += __atomic_load_n(&qs->rx_packets, __ATOMIC_RELAXED);
	st->rx_bytes += __atomic_load_n(&qs->rx_bytes, __ATOMIC_RELAXED);
	st->tx_packets += __atomic_load_n(&qs->tx_packets, __ATOMIC_RELAXED);
	st->tx_bytes += __atomic_load_n(&qs->tx_bytes, __ATOMIC_RELAXED);
	st->rx_csum_completed += __atomic_load_n(&qs->rx_csum_completed, __ATOMIC_RELAXED);
	st->rx_gso += __atomic_load_n(&qs->rx_gso, __ATOMIC_RELAXED);
	st->tx_gso += __atomic_load_n(&qs->tx_gso, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < ETHP_DROP_MAX; i++)
		st->drops[i] += __atomic_load_n(&qs->drops[i], __ATOMIC_RELAXED);
}

/* PACKET_STATISTICS resets the kernel's counters on each read: accumulated per queue. */
static void kernel_drops_read(struct afp_queue *q)
{
	struct tpacket_stats ks;
	socklen_t len = sizeof(ks);

	if (getsockopt(q->fd, SOL_PACKET, PACKET_STATISTICS, &ks, &len) == 0)
		q->kernel_drops += ks.tp_drops;
}

static void afp_stats(struct ethp_port *p, struct ethp_stats *st)
{
	*st = p->gone;
	for (unsigned i = 0; i < p->n_queues; i++) {
		kernel_drops_read(p->q[i]);
		stats_add(st, &p->q[i]->st);
		st->drops[ETHP_DROP_RX_KERNEL] += p->q[i]->kernel_drops;
	}
}

static int afp_wait_fd(struct ethp_port *p, unsigned qi)
{
	struct afp_queue *q = queue_of(p, qi);

	if (!q)
		return -EINVAL;
	return p->uring ? q->rx_ring.ring_fd : q->fd;
}

static int afp_arm(struct ethp_port *p, unsigned qi)
{
	struct afp_queue *q = queue_of(p, qi);

	if (!q)
		return -EINVAL;
	/* Both fds are level-triggered (a non-empty completion queue, a non-empty
	 * socket queue): nothing to arm. The multishot receive must be running, though. */
	if (p->uring && !q->rx_armed) {
		uring_refill(q);
		if (q->posted > 0)
			return uring_arm_rx(q);
	}
	return 0;
}

/* ---- open/close ---- */

/*
 * The VLAN filter: accept a frame whose outer tag is 802.1Q with VID == vlan (from
 * the kernel's stripped tag, or in-band when nothing was stripped), or, for vlan 0,
 * an untagged or priority-tagged frame. S-tagged (802.1ad) frames never.
 */
static int attach_vlan_filter(int fd, uint16_t vlan)
{
	/* Jump offsets count from the next instruction. */
	struct sock_filter prog[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT),
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0), /* none stripped: 7 */
		/* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_VLAN_TPID),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_8021Q, 0, 11),
		/* 4 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_VLAN_TAG),
		/* 5 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x0fff),
		/* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vlan, 7, 8),
		/* 7 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
		/* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_8021Q, 0, 3), /* untagged: 12 */
		/* 9 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 14),
		/* 10 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x0fff),
		/* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vlan, 2, 3),
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_8021AD, 2, 0),
		/* 13 */ BPF_STMT(BPF_RET | BPF_K, vlan == 0 ? 0x40000u : 0u),
		/* 14 */ BPF_STMT(BPF_RET | BPF_K, 0x40000), /* accept */
		/* 15 */ BPF_STMT(BPF_RET | BPF_K, 0),       /* drop */
	};
	struct sock_fprog fp = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) < 0)
		return -errno;
	return 0;
}

/* A filter that takes no frame: a queue's socket holds it until it is in the group. */
static int attach_drop_filter(int fd)
{
	struct sock_filter prog[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
	struct sock_fprog fp = { .len = 1, .filter = prog };

	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) < 0 ? -errno : 0;
}

/* The receive ring, with cq completion entries and flags besides CQSIZE. */
static int rx_ring_init(struct afp_queue *q, unsigned cq, unsigned flags)
{
	struct io_uring_params par;

	memset(&par, 0, sizeof(par));
	par.flags = IORING_SETUP_CQSIZE | flags;
	par.cq_entries = cq;
	return io_uring_queue_init_params(8, &q->rx_ring, &par);
}

static int setup_uring(struct afp_queue *q, unsigned rx_depth)
{
	struct io_uring_buf_reg reg;
	unsigned cq = 2;
	int r;

	while (cq < 2 * rx_depth && cq < 65536)
		cq <<= 1;
	/* A frame's completion is task work of the queue's thread. By default the kernel
	 * interrupts that thread for it (an IPI when it runs on another CPU), which costs a
	 * polling worker most of its latency on a VM. With COOP_TASKRUN it only raises
	 * IORING_SQ_TASKRUN, and io_uring_peek_batch_cqe enters the kernel to run the work
	 * when it sees the flag; a sleeping thread is still woken. Kernels before 5.19
	 * refuse the flags: then without them. */
	r = rx_ring_init(q, cq, IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG);
	if (r == -EINVAL)
		r = rx_ring_init(q, cq, 0);
	if (r < 0)
		return r;
	r = io_uring_queue_init(BATCH_MAX, &q->tx_ring, 0);
	if (r < 0) {
		io_uring_queue_exit(&q->rx_ring);
		return r;
	}
	/* Room for the whole depth: a queue may be the only one left. */
	q->br_entries = 1;
	while (q->br_entries < rx_depth)
		q->br_entries <<= 1;
	q->br_len = q->br_entries * sizeof(struct io_uring_buf);
	q->br = mmap(NULL, q->br_len, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (q->br == MAP_FAILED) {
		r = -errno;
		q->br = NULL;
		goto fail;
	}
	io_uring_buf_ring_init(q->br);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)q->br;
	reg.ring_entries = q->br_entries;
	reg.bgid = BGID;
	r = io_uring_register_buf_ring(&q->rx_ring, &reg, 0);
	if (r < 0)
		goto fail;
	memset(&q->rx_msg, 0, sizeof(q->rx_msg));
	q->rx_msg.msg_namelen = NAME_LEN;
	q->rx_msg.msg_controllen = CTL_LEN + (q->port->vnet ? 0 : GSO_VNET_LEN);
	q->rings = true;
	return 0;
fail:
	if (q->br)
		munmap(q->br, q->br_len);
	q->br = NULL;
	io_uring_queue_exit(&q->tx_ring);
	io_uring_queue_exit(&q->rx_ring);
	return r;
}

static void setup_mmsg(struct afp_queue *q)
{
	unsigned i;

	for (i = 0; i < BATCH_MAX; i++) {
		struct msghdr *mh = &q->rmsg[i].msg_hdr;

		mh->msg_name = &q->rname[i];
		mh->msg_iov = &q->riov[i];
		mh->msg_iovlen = 1;
		mh->msg_control = q->rctl[i];
	}
}

static int setsockopt_int(int fd, int level, int opt, int val)
{
	return setsockopt(fd, level, opt, &val, sizeof(val)) < 0 ? -errno : 0;
}

/* Close queue q: its counters go to the port's, its posted buffers back to the pool. */
static void queue_close(struct ethp_port *p, struct afp_queue *q)
{
	if (!q)
		return;
	if (q->rings) {
		io_uring_queue_exit(&q->tx_ring);
		io_uring_queue_exit(&q->rx_ring);
	}
	if (q->br)
		munmap(q->br, q->br_len);
	if (q->fd >= 0) {
		kernel_drops_read(q);
		close(q->fd);
	}
	stats_add(&p->gone, &q->st);
	p->gone.drops[ETHP_DROP_RX_KERNEL] += q->kernel_drops;
	take_back_posted(q);
	free(q);
}

/* Join p's fanout group: queue 0 makes it (the kernel picks an unused id), the others
 * join it by that id. */
static int fanout_join(struct ethp_port *p, struct afp_queue *q)
{
	int r;

	if (q->id == 0) {
		int v = 0;
		socklen_t len = sizeof(v);

		r = setsockopt_int(q->fd, SOL_PACKET, PACKET_FANOUT,
				   (PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_UNIQUEID) << 16);
		if (r < 0)
			return r;
		if (getsockopt(q->fd, SOL_PACKET, PACKET_FANOUT, &v, &len) < 0)
			return -errno;
		p->fanout = v & 0xffff;
		return 0;
	}
	return setsockopt_int(q->fd, SOL_PACKET, PACKET_FANOUT,
			      p->fanout | PACKET_FANOUT_HASH << 16);
}

/* Open queue id of p: its socket in the fanout group with the port's options, and its
 * I/O engine (queue 0 decides which: the others follow it). */
static int queue_open(struct ethp_port *p, unsigned id)
{
	struct afp_queue *q = calloc(1, sizeof(*q));
	struct sockaddr_ll sll;
	int r;

	if (!q)
		return -ENOMEM;
	q->port = p;
	q->id = id;
	q->posted_state = (uint8_t)(BUF_POSTED + id);
	/* The socket: unbound (protocol 0 receives nothing) until the filter is on. */
	q->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (q->fd < 0) {
		r = -errno;
		log_errno(LOG_ERR, -r, "eth %s: AF_PACKET socket", p->dev);
		goto fail;
	}
	if ((r = attach_drop_filter(q->fd)) < 0 ||
	    (r = setsockopt_int(q->fd, SOL_PACKET, PACKET_AUXDATA, 1)) < 0 ||
	    (r = setsockopt_int(q->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)) < 0 ||
	    (r = setsockopt_int(q->fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1)) < 0) {
		log_errno(LOG_ERR, -r, "eth %s: socket options", p->dev);
		goto fail;
	}
	/* GSO frames with their metadata (before the socket is bound: every frame queued
	 * has its header). Without it a frame larger than a buffer is truncated. Queue 0
	 * decides; the others must do the same. */
	if (id == 0 ? p->vnet_wanted : p->vnet) {
		r = setsockopt_int(q->fd, SOL_PACKET, PACKET_VNET_HDR, 1);
		if (r < 0 && id > 0) {
			log_errno(LOG_ERR, -r, "eth %s: queue %u: PACKET_VNET_HDR", p->dev, id);
			goto fail;
		}
		if (r < 0)
			log_errno(LOG_WARNING, -r,
				  "eth %s: PACKET_VNET_HDR: frames larger than the MTU (GSO) "
				  "are dropped",
				  p->dev);
		p->vnet = r == 0;
	}
	/* Queue room for the receive depth of full frames (GSO frames: at least 8 MiB). */
	{
		unsigned room = p->rx_depth * 4096u;

		if (p->vnet && p->buf_size > 4096 && room < (8u << 20))
			room = 8u << 20;
		setsockopt_int(q->fd, SOL_SOCKET, SO_RCVBUFFORCE, (int)room);
	}
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = p->ifindex;
	if (bind(q->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		r = -errno;
		log_errno(LOG_ERR, -r, "eth %s: bind", p->dev);
		goto fail;
	}
	if ((r = fanout_join(p, q)) < 0) {
		log_errno(LOG_ERR, -r, "eth %s: queue %u: PACKET_FANOUT", p->dev, id);
		goto fail;
	}
	if ((r = attach_vlan_filter(q->fd, p->vlan)) < 0) {
		log_errno(LOG_ERR, -r, "eth %s: socket filter", p->dev);
		goto fail;
	}
	setup_mmsg(q);
	if (id == 0 ? p->io != ETHP_IO_MMSG : p->uring) {
		r = setup_uring(q, p->rx_depth);
		if (r == 0) {
			p->uring = true;
		} else if (id > 0 || p->io == ETHP_IO_URING) {
			log_errno(LOG_ERR, -r, "eth %s: queue %u: io_uring", p->dev, id);
			goto fail;
		} else if (!atomic_exchange(&mmsg_logged, true)) {
			log_errno(LOG_WARNING, -r,
				  "eth %s: io_uring unavailable, using recvmmsg/sendmmsg", p->dev);
		}
	}
	p->q[id] = q;
	return 0;
fail:
	queue_close(p, q);
	return r;
}

static void depth_set(struct ethp_port *p, unsigned n)
{
	unsigned d = p->rx_depth / n;

	atomic_store_explicit(&p->depth, d < 8 ? 8 : d, memory_order_relaxed);
}

static int afp_set_queues(struct ethp_port *p, unsigned n)
{
	unsigned old = p->n_queues;
	int r;

	if (n == 0 || n > ETHP_QUEUES_MAX)
		return -EINVAL;
	for (unsigned i = old; i < n; i++) {
		r = queue_open(p, i);
		if (r < 0) {
			for (unsigned k = old; k < i; k++) {
				queue_close(p, p->q[k]);
				p->q[k] = NULL;
			}
			return r;
		}
	}
	for (unsigned i = n; i < old; i++) {
		queue_close(p, p->q[i]);
		p->q[i] = NULL;
	}
	p->n_queues = n;
	depth_set(p, n);
	return 0;
}

static void afp_close(struct ethp_port *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < ETHP_QUEUES_MAX; i++)
		if (p->q[i])
			queue_close(p, p->q[i]);
	pthread_mutex_destroy(&p->free_lock);
	if (p->mem)
		munmap(p->mem, p->mem_len);
	free(p->bufs);
	free(p->free_ids);
	free(p->state);
	free(p);
}

static int afp_open(const struct ethp_port_config *cfg, struct ethp_port **out)
{
	struct ethp_port *p;
	struct ethp_port_attr attr;
	unsigned i;
	int r;

	if (!cfg || !cfg->device || !*cfg->device || strlen(cfg->device) >= IF_NAMESIZE ||
	    cfg->vlan > 4094)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->free_lock, NULL);
	strcpy(p->dev, cfg->device);
	p->vlan = cfg->vlan;
	p->io = cfg->io;
	p->vnet_wanted = !cfg->no_vnet_hdr;
	p->n_bufs = cfg->n_bufs ? cfg->n_bufs : 1024;
	p->buf_size = cfg->buf_size ? cfg->buf_size : 2048;
	p->rx_depth = cfg->rx_depth ? cfg->rx_depth : p->n_bufs / 2;
	r = -EINVAL;
	if (p->n_bufs < 16 || p->n_bufs > 32768 || p->buf_size < ETHP_RX_HEADROOM + 64 ||
	    p->buf_size > ETHP_BUF_MAX || p->rx_depth >= p->n_bufs) {
		log_error("eth %s: bad pool (n_bufs %u, buf_size %u, rx_depth %u)", p->dev,
			  p->n_bufs, p->buf_size, p->rx_depth);
		goto fail;
	}
	p->buf_size = (p->buf_size + 63) & ~63u;
	p->ifindex = (int)if_nametoindex(p->dev);
	if (p->ifindex == 0) {
		r = -ENODEV;
		log_error("eth %s: no such device", p->dev);
		goto fail;
	}

	/* The pool. */
	p->mem_len = (size_t)p->n_bufs * p->buf_size;
	p->mem = mmap(NULL, p->mem_len, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	p->bufs = calloc(p->n_bufs, sizeof(*p->bufs));
	p->free_ids = calloc(p->n_bufs, sizeof(*p->free_ids));
	p->state = calloc(p->n_bufs, 1);
	if (p->mem == MAP_FAILED) {
		p->mem = NULL;
		r = -ENOMEM;
		goto fail;
	}
	if (!p->bufs || !p->free_ids || !p->state) {
		r = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < p->n_bufs; i++) {
		p->bufs[i].base = p->mem + (size_t)i * p->buf_size;
		p->bufs[i].cap = p->buf_size;
		p->bufs[i].id = i;
		p->free_ids[i] = p->n_bufs - 1 - i;
	}
	p->n_free = p->n_bufs;

	r = afp_set_queues(p, 1);
	if (r < 0)
		goto fail;
	rx_merging_set(p);
	r = afp_query(p, &attr);
	if (r < 0) {
		log_errno(LOG_ERR, -r, "eth %s: query", p->dev);
		goto fail;
	}
	atomic_store(&p->link_up, attr.link_up);
	*out = p;
	return 0;
fail:
	afp_close(p);
	return r;
}

const struct ethp_ops ethp_afpacket_ops = {
	.name = "af_packet",
	.open = afp_open,
	.close = afp_close,
	.query = afp_query,
	.set_link = afp_set_link,
	.mc_add = afp_mc_add,
	.mc_del = afp_mc_del,
	.set_promisc = afp_set_promisc,
	.set_queues = afp_set_queues,
	.buf_get = afp_buf_get,
	.buf_put = afp_buf_put,
	.rx_done = afp_rx_done,
	.rx_burst = afp_rx_burst,
	.tx_burst = afp_tx_burst,
	.wait_fd = afp_wait_fd,
	.arm = afp_arm,
	.stats = afp_stats,
};
