/*
 * capture: packet capture on one interface (see capture.h). Workers write records into
 * their own ring of the capture; the control thread reads them.
 *
 * A ring is a power-of-two byte array with a free-running head (written by its worker)
 * and tail (written by the control thread). A record is a 4-octet length (the whole
 * record, a multiple of 4), the pcap record header and the packet; a record that would
 * cross the end of the array is preceded by a wrap mark (CAP_WRAP) and starts at offset
 * 0. The worker copies the whole packet in before the filter runs on it, then commits
 * only the snaplen it keeps: the filter sees every octet whatever the snaplen.
 */
#include "engine/capture.h"
#include "engine/engine_pvt.h"
#include "lib/ib_bytes.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pcap/bpf.h>

#define CAP_RING_DEFAULT (1u << 20)
#define CAP_RING_MIN     (1u << 17) /* two records of the largest packet */
#define CAP_WRAP         0xffffffffu
#define CAP_LEN_HDR      4
#define ETH_HDR          14
#define CAP_FILTER_MAX   4096 /* instructions: the kernel's BPF_MAXINSNS */

struct cap_ring {
	_Alignas(64) _Atomic uint64_t head; /* producer: the worker */
	_Alignas(64) _Atomic uint64_t tail; /* consumer: the control thread */
	/* the worker's counters (FWD_INC), read by the control thread */
	_Alignas(64) uint64_t matched, filtered, dropped;
	uint8_t *buf;
};

struct fwd_capture {
	uint32_t ifindex;
	int linktype;
	unsigned dirs;
	uint32_t snaplen;
	struct bpf_insn *filter;
	unsigned filter_len;
	size_t size; /* of each ring: a power of two */
	struct cap_ring ring[FWD_WORKERS_MAX];
};

static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

static void cap_free(void *arg)
{
	struct fwd_capture *c = arg;

	for (unsigned i = 0; i < FWD_WORKERS_MAX; i++)
		free(c->ring[i].buf);
	free(c->filter);
	free(c);
}

int fwd_capture_start(struct fwd_engine *e, const struct fwd_capture_config *cfg,
		      struct fwd_capture **out)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(e), cfg->ifindex);
	struct fwd_capture *c;
	size_t size = CAP_RING_MIN;

	if (!f || f->kind == FWD_IF_NONE)
		return -ENODEV;
	if (!cfg->dirs || cfg->dirs & ~(FWD_CAPTURE_RX | FWD_CAPTURE_TX) || !cfg->snaplen ||
	    (cfg->filter_len && !cfg->filter) || cfg->filter_len > CAP_FILTER_MAX ||
	    cfg->ring_bytes > (1u << 30))
		return -EINVAL;
	if (atomic_load(&e->cap[cfg->ifindex]))
		return -EBUSY;
	while (size < (cfg->ring_bytes ? cfg->ring_bytes : CAP_RING_DEFAULT))
		size <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ifindex = cfg->ifindex;
	c->linktype =
	    f->kind == FWD_IF_IPOIB ? FWD_CAPTURE_LINKTYPE_IPOIB : FWD_CAPTURE_LINKTYPE_ETHERNET;
	c->dirs = cfg->dirs;
	c->snaplen = cfg->snaplen < FWD_CAPTURE_MAX_PACKET ? cfg->snaplen : FWD_CAPTURE_MAX_PACKET;
	c->size = size;
	if (cfg->filter_len) {
		c->filter = malloc(cfg->filter_len * sizeof(*c->filter));
		if (!c->filter) {
			cap_free(c);
			return -ENOMEM;
		}
		memcpy(c->filter, cfg->filter, cfg->filter_len * sizeof(*c->filter));
		c->filter_len = cfg->filter_len;
	}
	/* Every slot, not only the running workers: fwd_worker_set_count may start more
	 * while the capture runs. The pages are touched only as records arrive. */
	for (unsigned i = 0; i < FWD_WORKERS_MAX; i++) {
		c->ring[i].buf = malloc(size);
		if (!c->ring[i].buf) {
			cap_free(c);
			return -ENOMEM;
		}
	}
	atomic_store_explicit(&e->cap[cfg->ifindex], c, memory_order_release);
	*out = c;
	return 0;
}

void fwd_capture_stop(struct fwd_engine *e, struct fwd_capture *c)
{
	struct fwd_capture *expected = c;

	if (!c)
		return;
	atomic_compare_exchange_strong(&e->cap[c->ifindex], &expected, NULL);
	if (e->cfg.defer)
		e->cfg.defer(e->cfg.defer_ctx, cap_free, c);
	else
		cap_free(c);
}

int fwd_capture_linktype(const struct fwd_capture *c)
{
	return c->linktype;
}

static void copy_in(uint8_t *dst, size_t *off, const void *src, size_t len)
{
	if (len) {
		memcpy(dst + *off, src, len);
		*off += len;
	}
}

/* The filter on a packet at p (len octets). IPoIB: behind a made-up Ethernet header in
 * the 14 octets before the payload (the end of the address block and the IPoIB header),
 * put back afterwards. */
static bool cap_match(const struct fwd_capture *c, uint8_t *p, size_t len)
{
	uint8_t saved[ETH_HDR];
	size_t at;
	unsigned r;

	if (!c->filter_len)
		return true;
	if (c->linktype == FWD_CAPTURE_LINKTYPE_ETHERNET)
		return bpf_filter(c->filter, p, (u_int)len, (u_int)len) != 0;
	at = FWD_CAPTURE_IPOIB_ADDR_LEN + 4 - ETH_HDR;
	if (len < FWD_CAPTURE_IPOIB_ADDR_LEN + 4)
		return false;
	memcpy(saved, p + at, ETH_HDR);
	memset(p + at, 0, 12); /* this covers the IPoIB header's type: take it from saved */
	p[at + 12] = saved[FWD_CAPTURE_IPOIB_ADDR_LEN - at];
	p[at + 13] = saved[FWD_CAPTURE_IPOIB_ADDR_LEN - at + 1];
	r = bpf_filter(c->filter, p + at, (u_int)(len - at), (u_int)(len - at));
	memcpy(p + at, saved, ETH_HDR);
	return r != 0;
}

void fwd_capture_packet(struct fwd_capture *c, unsigned worker, unsigned dir, const void *pre,
			size_t pre_len, const void *a, size_t a_len, const void *b, size_t b_len)
{
	size_t len = pre_len + a_len + b_len, need, at, off, keep;
	struct cap_ring *r;
	uint64_t head, tail;
	struct timespec ts;
	uint8_t *rec;

	if (!(c->dirs & dir) || worker >= FWD_WORKERS_MAX)
		return;
	r = &c->ring[worker];
	if (len > FWD_CAPTURE_MAX_PACKET)
		len = FWD_CAPTURE_MAX_PACKET; /* cut below; the filter sees what is kept */
	head = atomic_load_explicit(&r->head, memory_order_relaxed);
	tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	need = pad4(CAP_LEN_HDR + FWD_CAPTURE_REC_HDR_LEN + len);
	at = head & (c->size - 1);
	if (at + need > c->size) { /* the record starts at 0, behind a wrap mark */
		if (head + (c->size - at) + need - tail > c->size) {
			FWD_INC(r->dropped);
			return;
		}
		ib_put_le32(r->buf + at, CAP_WRAP);
		head += c->size - at;
		at = 0;
	} else if (head + need - tail > c->size) {
		FWD_INC(r->dropped);
		return;
	}
	rec = r->buf + at + CAP_LEN_HDR;
	off = FWD_CAPTURE_REC_HDR_LEN;
	{
		size_t room = len;
		size_t n = pre_len < room ? pre_len : room;

		copy_in(rec, &off, pre, n);
		room -= n;
		n = a_len < room ? a_len : room;
		copy_in(rec, &off, a, n);
		room -= n;
		copy_in(rec, &off, b, b_len < room ? b_len : room);
	}
	if (!cap_match(c, rec + FWD_CAPTURE_REC_HDR_LEN, len)) {
		FWD_INC(r->filtered);
		return; /* nothing committed: the next record overwrites it */
	}
	keep = len < c->snaplen ? len : c->snaplen;
	clock_gettime(CLOCK_REALTIME, &ts);
	ib_put_le32(rec, (uint32_t)ts.tv_sec);
	ib_put_le32(rec + 4, (uint32_t)(ts.tv_nsec / 1000));
	ib_put_le32(rec + 8, (uint32_t)keep);
	ib_put_le32(rec + 12, (uint32_t)(pre_len + a_len + b_len));
	need = pad4(CAP_LEN_HDR + FWD_CAPTURE_REC_HDR_LEN + keep);
	ib_put_le32(r->buf + at, (uint32_t)need);
	FWD_INC(r->matched);
	atomic_store_explicit(&r->head, head + need, memory_order_release);
}

/* The oldest record waiting in ring r, or NULL; *len its record length (after the
 * length word). Steps over a wrap mark. */
static const uint8_t *ring_peek(struct fwd_capture *c, struct cap_ring *r, uint64_t *tail,
				uint64_t *sec_us)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	const uint8_t *p;

	if (*tail == head)
		return NULL;
	p = r->buf + (*tail & (c->size - 1));
	if (ib_get_le32(p) == CAP_WRAP) {
		*tail += c->size - (*tail & (c->size - 1));
		if (*tail == head)
			return NULL;
		p = r->buf;
	}
	*sec_us =
	    (uint64_t)ib_get_le32(p + CAP_LEN_HDR) * 1000000 + ib_get_le32(p + CAP_LEN_HDR + 4);
	return p;
}

size_t fwd_capture_read(struct fwd_capture *c, uint8_t *out, size_t max, uint64_t max_packets,
			uint64_t *packets)
{
	uint64_t tails[FWD_WORKERS_MAX];
	size_t n = 0;

	*packets = 0;
	for (unsigned i = 0; i < FWD_WORKERS_MAX; i++)
		tails[i] = atomic_load_explicit(&c->ring[i].tail, memory_order_relaxed);
	while (*packets < max_packets) {
		const uint8_t *best = NULL;
		uint64_t best_t = UINT64_MAX;
		unsigned bi = 0;
		size_t rl;

		for (unsigned i = 0; i < FWD_WORKERS_MAX; i++) {
			uint64_t t;
			const uint8_t *p = ring_peek(c, &c->ring[i], &tails[i], &t);

			if (p && t < best_t) {
				best = p;
				best_t = t;
				bi = i;
			}
		}
		if (!best)
			break;
		rl = FWD_CAPTURE_REC_HDR_LEN + ib_get_le32(best + CAP_LEN_HDR + 8);
		if (n + rl > max)
			break;
		memcpy(out + n, best + CAP_LEN_HDR, rl);
		n += rl;
		(*packets)++;
		tails[bi] += ib_get_le32(best);
	}
	for (unsigned i = 0; i < FWD_WORKERS_MAX; i++)
		atomic_store_explicit(&c->ring[i].tail, tails[i], memory_order_release);
	return n;
}

void fwd_capture_stats(const struct fwd_capture *c, struct fwd_capture_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < FWD_WORKERS_MAX; i++) {
		out->matched += __atomic_load_n(&c->ring[i].matched, __ATOMIC_RELAXED);
		out->filtered += __atomic_load_n(&c->ring[i].filtered, __ATOMIC_RELAXED);
		out->dropped += __atomic_load_n(&c->ring[i].dropped, __ATOMIC_RELAXED);
	}
}
