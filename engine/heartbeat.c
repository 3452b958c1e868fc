/*
 * The heartbeat channel (engine/heartbeat.h): the heartbeat thread's end of the rings
 * between it and the workers. The workers' end is in engine/worker.c (hb_punt, and
 * serve_ring on hb_tx).
 *
 * Threads: the heartbeat thread (one caller at a time), except fwd_hb_bind (control).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine_pvt.h"
#include "engine/heartbeat.h"
#include "engine/ring.h"
#include "pkt/ip.h"

#define HB_BURST 32

int fwd_hb_bind(struct fwd_engine *e, uint16_t port)
{
	if (port && port == atomic_load_explicit(&e->ctl_udp_port, memory_order_relaxed))
		return -EINVAL;
	atomic_store_explicit(&e->hb_port, port, memory_order_relaxed);
	return 0;
}

bool fwd_hb_match(const struct fwd_engine *e, const uint8_t *p, size_t len)
{
	return fwd_ip_is_udp_to(
	    p, len, atomic_load_explicit(&((struct fwd_engine *)e)->hb_port, memory_order_relaxed));
}

int fwd_hb_fd(const struct fwd_engine *e)
{
	return e->hb_efd;
}

/* Back to worker k, which sleeps maybe: it is woken through its control ring's
 * announcement, as the control thread wakes it. The ring holds what can be in it. */
static void to_worker(struct fwd_wk *k, void **m, unsigned n)
{
	if (!n)
		return;
	(void)ring_enqueue_burst(k->hb_tx, m, n);
	ring_wake_if_sleeping(k->to_wk);
}

unsigned fwd_hb_poll(struct fwd_engine *e, fwd_sp_udp_fn fn, void *ctx)
{
	unsigned slots = atomic_load_explicit(&e->hb_slots, memory_order_acquire), got = 0;

	for (unsigned w = 0; w < slots; w++) {
		struct fwd_wk *k = &e->wk[w];
		void *v[HB_BURST], *back[HB_BURST];
		unsigned n, nb;

		do {
			n = ring_dequeue_burst(k->hb_rx, v, HB_BURST);
			nb = 0;
			for (unsigned i = 0; i < n; i++) {
				struct fwd_msg *m = v[i];
				struct fwd_udp u;

				if (m->owner == FWD_OWNER_HB) {
					fwd_msg_recycle(e, m); /* a send went out */
					continue;
				}
				if (fwd_udp_parse(m->data, m->len, &u) &&
				    u.dport ==
					atomic_load_explicit(&e->hb_port, memory_order_relaxed)) {
					e->hb_delivered++;
					got++;
					fn(ctx, m->ifindex, &u.src, &u.dst, u.sport, u.ttl,
					   u.payload, u.len);
				} else {
					e->hb_refused++;
				}
				back[nb++] = m;
			}
			to_worker(k, back, nb);
		} while (n == HB_BURST);
	}
	return got;
}

int fwd_hb_send_udp(struct fwd_engine *e, uint32_t ifindex, const struct ip_addr *src,
		    const struct ip_addr *dst, uint16_t sport, uint16_t dport, const void *payload,
		    size_t len)
{
	const struct fwd_if *out = fwd_snap_if(fwd_engine_current(e), ifindex);
	size_t hl = src->family == AF_INET ? IP4_HDR_LEN : IP6_HDR_LEN;
	struct fwd_msg *m;
	struct fwd_wk *k;
	void *p;

	if (src->family != dst->family || (src->family != AF_INET && src->family != AF_INET6))
		return -EINVAL;
	if (!out || !out->up ||
	    out->worker >= atomic_load_explicit(&e->hb_slots, memory_order_acquire))
		return -ENODEV;
	if (hl + 8 + len > FWD_MSG_DATA || hl + 8 + len > out->mtu)
		return -EMSGSIZE;
	if (!fwd_neigh_usable(out, src->family, dst->bytes))
		return -EAGAIN;
	k = &e->wk[out->worker];
	m = fwd_msg_get(e, out->worker, FWD_OWNER_HB, FWD_PCLASS_CONTROL);
	if (!m) {
		e->hb_no_msg++;
		return -ENOBUFS;
	}
	m->type = FWD_MSG_TX_IP;
	m->ifindex = (uint16_t)ifindex;
	m->ifgen = out->gen;
	m->own = true;
	m->family = src->family;
	memset(m->nh, 0, sizeof(m->nh));
	memcpy(m->nh, dst->bytes, src->family == AF_INET ? 4 : 16);
	m->len =
	    (uint32_t)fwd_udp_build(m->data, FWD_MSG_DATA, src, dst, sport, dport, payload, len);
	p = m;
	if (ring_enqueue_burst(k->hb_tx, &p, 1) != 1) {
		fwd_msg_recycle(e, m);
		e->hb_no_msg++;
		return -ENOBUFS;
	}
	ring_wake_if_sleeping(k->to_wk);
	e->hb_sent++;
	return 0;
}

void fwd_hb_stats(const struct fwd_engine *e, struct fwd_hb_stats *out)
{
	out->delivered = e->hb_delivered;
	out->refused = e->hb_refused;
	out->sent = e->hb_sent;
	out->no_msg = e->hb_no_msg;
}
