/*
 * The per-packet pipeline (engine/forward.h): classify, validate, martians, local
 * delivery, route (ECMP), TTL, neighbour, MTU (fragment or ICMP), MSS, emit. Pure over
 * buffers and the engine's snapshot: no I/O, no allocation, no locks, no logging. A
 * packet that cannot be forwarded ends with one verdict and one counted reason.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/engine_pvt.h"
#include "pkt/eth_frame.h"
#include "engine/forward.h"
#include "pkt/frag.h"
#include "pkt/gso.h"
#include "pkt/icmp.h"
#include "pkt/ip.h"
#include "ipoib/ipoib_link.h"
#include "pkt/mss.h"
#include "pkt/nd.h"

#define SCRATCH_SIZE (4 * FWD_SCRATCH_PKT)

/* A per-packet stage (route_out -> output -> emit): inlined into its callers whatever
 * the compiler's size estimate says. As calls of ten arguments each they cost about 80
 * instructions a forwarded packet, 12% of the pipeline (bench/fwd_instr.sh). */
#define STAGE inline __attribute__((always_inline))

int fwd_ctx_init(struct fwd_ctx *c, struct fwd_engine *e, unsigned worker)
{
	int ret;

	memset(c, 0, sizeof(*c));
	if (worker >= e->n_workers)
		return -EINVAL;
	c->e = e;
	c->worker = worker;
	c->st = e->wk[worker].st;
	c->fib = rt_fib(e->rt); /* until the first packet names its tenant's */
	c->seed = e->seed;
	c->ip_id = (uint16_t)(e->seed ^ worker);
	ret = icmp_rl_init(&c->rl, c->rl_b, FWD_RL_BUCKETS, &e->cfg.icmp_rl);
	if (ret < 0)
		return ret;
	c->scratch = malloc(SCRATCH_SIZE);
	if (!c->scratch)
		return -ENOMEM;
	c->scratch_cap = SCRATCH_SIZE;
	c->snap = fwd_engine_snap(e);
	return 0;
}

void fwd_ctx_fini(struct fwd_ctx *c)
{
	free(c->scratch);
	c->scratch = NULL;
}

void fwd_ctx_begin(struct fwd_ctx *c, uint64_t now_ns)
{
	c->snap = fwd_engine_snap(c->e);
	c->warmed.n = c->warmed.next = 0;
	c->now_ns = now_ns;
	c->now_ms = now_ns / 1000000u;
}

/* ---- next hops held for order (struct fwd_held) --------------------------------------- */

static struct fwd_held_hop *held_set(struct fwd_held *h, uint32_t ifindex, int family,
				     const uint8_t *nh)
{
	uint32_t k = ifindex * 0x9e3779b1u ^ (uint32_t)family, w;

	for (unsigned i = 0; i < (family == AF_INET ? 4u : 16u); i += 4) {
		memcpy(&w, nh + i, 4);
		k = (k ^ w) * 0x85ebca6bu;
		k ^= k >> 16; /* the high octets down too: hosts differ in the last ones */
	}
	k = (k ^ k >> 15) * 0x846ca68bu;
	return h->set[(k >> 16) % FWD_HELD_SETS];
}

static bool held_is(const struct fwd_held_hop *x, uint32_t ifindex, int family, const uint8_t *nh)
{
	return x->count && x->ifindex == ifindex && x->family == family &&
	       !memcmp(x->nh, nh, family == AF_INET ? 4 : 16);
}

static struct fwd_held_hop *held_find(struct fwd_held *h, uint32_t ifindex, int family,
				      const uint8_t *nh)
{
	struct fwd_held_hop *s = held_set(h, ifindex, family, nh);

	for (unsigned i = 0; i < FWD_HELD_WAYS; i++)
		if (held_is(&s[i], ifindex, family, nh))
			return &s[i];
	return NULL;
}

bool fwd_held_add(struct fwd_ctx *c, uint32_t ifindex, int family, const uint8_t *nh)
{
	struct fwd_held_hop *s = held_set(&c->held, ifindex, family, nh), *free_way = NULL;

	for (unsigned i = 0; i < FWD_HELD_WAYS; i++) {
		if (held_is(&s[i], ifindex, family, nh)) {
			s[i].count++;
			return true;
		}
		if (!s[i].count && !free_way)
			free_way = &s[i];
	}
	if (!free_way)
		return false;
	free_way->count = 1;
	free_way->ifindex = (uint16_t)ifindex;
	free_way->family = (uint8_t)family;
	memcpy(free_way->nh, nh, family == AF_INET ? 4 : 16);
	c->held.n++;
	return true;
}

void fwd_held_done(struct fwd_ctx *c, uint32_t ifindex, int family, const uint8_t *nh)
{
	struct fwd_held_hop *x = held_find(&c->held, ifindex, family, nh);

	if (x && !--x->count)
		c->held.n--;
}

static uint8_t *scratch_alloc(struct fwd_ctx *c, size_t n)
{
	uint8_t *p;

	n = (n + 63) & ~(size_t)63;
	if (c->scratch_cap - c->scratch_used < n)
		return NULL;
	p = c->scratch + c->scratch_used;
	c->scratch_used += n;
	return p;
}

static inline void res_init(struct fwd_result *res)
{
	res->v = FWD_V_DROP;
	res->drop = FWD_DROP_COUNT;
	res->n_tx = 0;
}

static inline void drop(struct fwd_result *res, enum fwd_drop d)
{
	res->v = FWD_V_DROP;
	res->drop = d;
}

static inline void punt(struct fwd_result *res, enum fwd_punt p, const struct fwd_if *ifp,
			const uint8_t *data, size_t len)
{
	res->v = FWD_V_PUNT;
	res->punt = p;
	res->punt_if = ifp;
	res->punt_data = data;
	res->punt_len = (uint32_t)len;
}

/* ---- addresses ------------------------------------------------------------------- */

/* Our address of this family on ifp, else on any interface (ICMP error source). */
static const uint8_t *src_addr(const struct fwd_snap *s, const struct fwd_if *ifp, int family)
{
	if (ifp) {
		for (unsigned i = 0; i < ifp->n_addrs; i++) {
			const struct ip_addr *a = &ifp->addrs[i].addr;

			if (a->family == family &&
			    !(family == AF_INET6 && ip6_is_link_local(a->bytes)))
				return a->bytes;
		}
	}
	for (unsigned k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *f = &s->ifs[k];

		for (unsigned i = 0; f->index && i < f->n_addrs; i++) {
			const struct ip_addr *a = &f->addrs[i].addr;

			if (a->family == family &&
			    !(family == AF_INET6 && ip6_is_link_local(a->bytes)))
				return a->bytes;
		}
	}
	return NULL;
}

/* ---- egress ---------------------------------------------------------------------- */

/* An Ethernet frame's descriptor: the header to mac, the packet by reference. */
static STAGE void eth_tx_fill(struct fwd_tx *t, const struct fwd_if *out, const uint8_t *mac,
			      uint16_t ethertype, const uint8_t *pkt, size_t len)
{
	t->ifp = out;
	memcpy(t->eth.hdr, mac, 6);
	memcpy(t->eth.hdr + 6, out->mac, 6);
	t->eth.hdr[12] = (uint8_t)(ethertype >> 8);
	t->eth.hdr[13] = (uint8_t)ethertype;
	t->eth.hdr_len = ETHF_HLEN;
	t->eth.gso = (struct gso_pkt){ 0 };
	t->eth.l4_off = 0;
	t->eth.data = pkt;
	t->eth.len = (uint32_t)len;
}

/* A buffer of the IPoIB egress's pool for a packet of len octets behind the IPoIB
 * header; NULL when none is free or it would not fit (either: FWD_DROP_NO_BUF). */
static STAGE struct ibp_buf *ib_tx_buf(const struct fwd_if *out, size_t len)
{
	struct ibp_buf *b = out->ib_ops->buf_get(out->ib_port);

	if (b && len + IPOIB_ENCAP_LEN > b->cap) {
		out->ib_ops->buf_put(out->ib_port, b);
		return NULL;
	}
	return b;
}

/* An IPoIB send of b, whose packet (len octets) is in place behind the header: the
 * header, and where it goes (the neighbour's connection (RC QP) when one is published,
 * else the UD QP, its AH and QPN, the link's Q_Key). */
static STAGE void ib_tx_fill(struct fwd_tx *t, const struct fwd_if *out,
			     const struct neigh_link *ll, uint16_t ethertype, struct ibp_buf *b,
			     size_t len)
{
	t->ifp = out;
	b->data[0] = (uint8_t)(ethertype >> 8);
	b->data[1] = (uint8_t)ethertype;
	b->data[2] = b->data[3] = 0;
	b->len = (uint32_t)(len + IPOIB_ENCAP_LEN);
	t->ib = (struct ibp_send){ .buf = b };
	if (out->link) {
		ipoib_link_send_fill(out->link, ll, &t->ib);
	} else {
		t->ib.qp = out->ud_qp;
		t->ib.ah = ll->ah;
		t->ib.remote_qpn = ll->qpn;
		t->ib.remote_qkey = out->qkey;
	}
}

/* Put pkt[0..len) on the wire to ll: Ethernet by reference, IPoIB by one copy. With a
 * plan, segment seg of the GSO packet pkt instead (len: the segment's length): cut into
 * scratch for Ethernet, straight into the IB buffer for IPoIB (still one copy). */
static STAGE bool emit_seg(struct fwd_ctx *c, const struct fwd_if *out, const struct neigh_link *ll,
			   uint16_t ethertype, const uint8_t *pkt, size_t len,
			   const struct gso_plan *plan, unsigned seg, struct fwd_result *res)
{
	struct fwd_tx *t;

	if (res->n_tx == FWD_TX_MAX) {
		drop(res, FWD_DROP_NO_BUF);
		return false;
	}
	t = &res->tx[res->n_tx];
	/* Per packet: a switch on the kind, not the ops table (engine_pvt.h). */
	if (out->kind == FWD_IF_ETH) {
		if (plan) {
			uint8_t *mem = scratch_alloc(c, len);

			if (!mem) {
				drop(res, FWD_DROP_NO_BUF);
				return false;
			}
			gso_segment(plan, pkt, seg, mem);
			pkt = mem;
		}
		eth_tx_fill(t, out, ll->addr, ethertype, pkt, len);
	} else {
		struct ibp_buf *b;

		if (!out->ud_qp) {
			drop(res, FWD_DROP_IF_DOWN);
			return false;
		}
		b = ib_tx_buf(out, len);
		if (!b) {
			drop(res, FWD_DROP_NO_BUF);
			return false;
		}
		if (plan)
			gso_segment(plan, pkt, seg, b->data + IPOIB_ENCAP_LEN);
		else
			memcpy(b->data + IPOIB_ENCAP_LEN, pkt, len);
		ib_tx_fill(t, out, ll, ethertype, b, len);
	}
	res->n_tx++;
	return true;
}

/* The neighbour nh on egress out, usable, as emit reads it; NULL when it is not. The
 * entry's slot in the flat index holds state, link and the use hint together, found
 * through the route's hint (nh_hint, a gateway's) when it still holds. An Ethernet
 * egress reads the MAC from the slot itself (not the link's line) into mac_ll, a
 * stand-in link whose addr is all that Ethernet's emit reads. */
static STAGE const struct neigh_link *egress_neigh(const struct fwd_ctx *c,
						   const struct fwd_if *out, int family,
						   const uint8_t *nh, uint32_t *nh_hint,
						   struct neigh_link *mac_ll)
{
	if (out->kind == FWD_IF_ETH)
		return neigh_lookup_mac(out->neigh, family, nh, c->now_ms, nh_hint, mac_ll->addr)
			   ? mac_ll
			   : NULL;
	return neigh_lookup_link(out->neigh, family, nh, c->now_ms, nh_hint);
}

/* The MTU toward ll on out: the interface's, or an IPoIB destination's when smaller. */
static STAGE uint32_t egress_mtu(const struct fwd_if *out, const struct neigh_link *ll)
{
	if (out->kind == FWD_IF_IPOIB && ll->mtu && ll->mtu < out->mtu)
		return ll->mtu;
	return out->mtu;
}

static STAGE bool emit(struct fwd_ctx *c, const struct fwd_if *out, const struct neigh_link *ll,
		       uint16_t ethertype, const uint8_t *pkt, size_t len, struct fwd_result *res)
{
	return emit_seg(c, out, ll, ethertype, pkt, len, NULL, 0, res);
}

static void icmp_error(struct fwd_ctx *c, const struct fwd_if *in, int family, const uint8_t *pkt,
		       size_t len, uint8_t type, uint8_t code, uint32_t param, bool l2_mcast,
		       struct fwd_result *res);

/*
 * The egress stage of a GSO packet (an Ethernet port's super-frame, its L4 checksum
 * possibly partial), once its neighbour is known: never "too big" for being large.
 * - an Ethernet port that segments (tx_gso): whole, with the segment size and the
 *   pseudo-header sum for the kernel to finish; TCP segments the egress MTU cannot
 *   carry get a smaller segment size;
 * - a destination whose MTU holds the whole packet (an IPoIB connection): whole, its
 *   checksum computed;
 * - else segmented here (pkt/gso.h) to the egress MTU. TCP is cut anywhere; UDP
 *   datagrams are the sender's, and one that does not fit gets what a datagram of that
 *   size would (ICMP frag needed with DF, packet too big for IPv6; counted gso[]).
 * TTL - 1 once, before the cut: every segment carries it.
 */
static void output_gso(struct fwd_ctx *c, const struct fwd_if *in, const struct fwd_if *out,
		       const struct neigh_link *ll, int family, uint8_t *p, size_t len,
		       bool decrement, const struct gso_pkt *g, uint32_t mtu,
		       struct fwd_result *res)
{
	uint16_t et = family == AF_INET ? ETHF_TYPE_IPV4 : ETHF_TYPE_IPV6;
	struct gso_plan plan;
	enum gso_result r = gso_plan(p, len, g, mtu, &plan);

	if (r == GSO_SEGMENT_TOO_BIG && (family == AF_INET6 || (p[6] & 0x40))) {
		if (decrement)
			icmp_error(c, in, family, p, len,
				   family == AF_INET ? ICMP4_DEST_UNREACH : ICMP6_PACKET_TOO_BIG,
				   family == AF_INET ? ICMP4_CODE_FRAG_NEEDED : 0, mtu, false, res);
		FWD_INC(c->st->gso[r]);
		drop(res, FWD_DROP_TOO_BIG);
		return;
	}
	if (r != GSO_OK) {
		FWD_INC(c->st->gso[r]);
		drop(res, FWD_DROP_GSO);
		return;
	}
	if (decrement &&
	    (family == AF_INET ? ip4_ttl_decrement(p) : ip6_hop_decrement(p)) != IP_OK) {
		drop(res, FWD_DROP_TTL_EXPIRED);
		return;
	}
	if (out->kind == FWD_IF_ETH && out->tx_gso && plan.n > 1) {
		gso_l4_seed(&plan, p);
		if (!emit(c, out, ll, et, p, len, res))
			return;
		res->tx[res->n_tx - 1].eth.gso = (struct gso_pkt){ g->kind, plan.mss };
		res->tx[res->n_tx - 1].eth.l4_off = plan.l4_off;
		FWD_INC(c->st->gso_whole);
		res->v = FWD_V_TX;
		return;
	}
	if (len <= mtu || plan.n == 1) {
		gso_l4_csum_fill(p, len);
		if (emit(c, out, ll, et, p, len, res)) {
			FWD_INC(c->st->gso_whole);
			res->v = FWD_V_TX;
		}
		return;
	}
	if (plan.n > FWD_TX_MAX - res->n_tx) {
		FWD_INC(c->st->gso[GSO_TOO_MANY_SEGS]);
		drop(res, FWD_DROP_GSO);
		return;
	}
	for (unsigned i = 0; i < plan.n; i++)
		if (!emit_seg(c, out, ll, et, p, gso_seg_len(&plan, i), &plan, i, res))
			return;
	FWD_INC(c->st->gso_segmented);
	FWD_ADD(c->st->gso_segments, plan.n);
	res->v = FWD_V_TX;
}

/*
 * The egress stage: neighbour, MTU (fragment / too big), TTL, MSS, emit. decrement:
 * a forwarded packet (TTL - 1 here, after the MTU check, so an ICMP error quotes the
 * packet as it came); false for our own ICMP errors.
 */
static STAGE void output(struct fwd_ctx *c, const struct fwd_if *in, const struct fwd_if *out,
			 int family, const uint8_t *nh, uint32_t *nh_hint, uint8_t *p, size_t len,
			 bool decrement, const struct gso_pkt *g, struct fwd_result *res)
{
	struct neigh_link mac_ll;
	const struct neigh_link *ll = egress_neigh(c, out, family, nh, nh_hint, &mac_ll);
	uint32_t mtu;

	/* A forwarded packet whose next hop still has earlier packets on the control
	 * thread goes after them (struct fwd_held). */
	if (ll && in && c->held.n && held_find(&c->held, out->index, family, nh)) {
		FWD_INC(c->st->unres_held);
		ll = NULL;
	}

	if (!ll) {
		if (!decrement) {
			/* Our own error toward an unresolved source: not worth parking. */
			FWD_INC(c->st->icmp_not_sent);
			return;
		}
		punt(res, FWD_PUNT_UNRESOLVED, out, p, len);
		res->punt_family = (uint8_t)family;
		memcpy(res->punt_nh, nh, family == AF_INET ? 4 : 16);
		return;
	}
	mtu = egress_mtu(out, ll);
	if (g && g->kind != GSO_NONE) {
		output_gso(c, in, out, ll, family, p, len, decrement, g, mtu, res);
		return;
	}

	if (family == AF_INET) {
		unsigned ihl = (p[0] & 0x0fu) * 4;
		bool df = (p[6] & 0x40) != 0;

		if (len > mtu && df) {
			if (decrement)
				icmp_error(c, in, AF_INET, p, len, ICMP4_DEST_UNREACH,
					   ICMP4_CODE_FRAG_NEEDED, mtu, false, res);
			drop(res, FWD_DROP_TOO_BIG);
			return;
		}
		if (decrement && ip4_ttl_decrement(p) != IP_OK) {
			drop(res, FWD_DROP_TTL_EXPIRED);
			return;
		}
		if (c->snap->knobs.mss_clamp && p[9] == 6 && !(ip_be16(p + 6) & IP4_OFF_MASK) &&
		    len >= ihl + 14 && (p[ihl + 13] & 0x02)) {
			if (mss_clamp4(p, len, mss_for_mtu4(mtu), NULL) == MSS_CLAMPED)
				FWD_INC(c->st->mss_clamped);
		}
		if (len > mtu) {
			struct frag4_piece pieces[FWD_TX_MAX];
			size_t n = frag4_count(p, len, mtu), made = 0;
			enum ip_reason ipwhy;
			uint8_t *mem;

			if (n == 0 || n > FWD_TX_MAX - res->n_tx ||
			    !(mem = scratch_alloc(c, n * ((mtu + 63) & ~63u)))) {
				drop(res, n == 0 ? FWD_DROP_FRAG_FAILED : FWD_DROP_NO_BUF);
				return;
			}
			for (size_t i = 0; i < n; i++)
				pieces[i] =
				    (struct frag4_piece){ .buf = mem + i * ((mtu + 63) & ~63u),
							  .cap = mtu };
			if (frag4_fragment(p, len, mtu, pieces, n, &made, &ipwhy) != FRAG_OK) {
				drop(res, FWD_DROP_FRAG_FAILED);
				return;
			}
			FWD_INC(c->st->fragmented);
			for (size_t i = 0; i < made; i++)
				if (!emit(c, out, ll, ETHF_TYPE_IPV4, pieces[i].buf, pieces[i].len,
					  res))
					return;
			FWD_ADD(c->st->frags_sent, made);
			res->v = FWD_V_TX;
			return;
		}
		if (emit(c, out, ll, ETHF_TYPE_IPV4, p, len, res))
			res->v = FWD_V_TX;
		return;
	}

	if (len > mtu) {
		if (decrement)
			icmp_error(c, in, AF_INET6, p, len, ICMP6_PACKET_TOO_BIG, 0, mtu, false,
				   res);
		drop(res, FWD_DROP_TOO_BIG);
		return;
	}
	if (decrement && ip6_hop_decrement(p) != IP_OK) {
		drop(res, FWD_DROP_TTL_EXPIRED);
		return;
	}
	if (c->snap->knobs.mss_clamp && p[6] == 6 && len >= IP6_HDR_LEN + 14 &&
	    (p[IP6_HDR_LEN + 13] & 0x02)) {
		if (mss_clamp6(p, len, mss_for_mtu6(mtu), NULL) == MSS_CLAMPED)
			FWD_INC(c->st->mss_clamped);
	}
	if (emit(c, out, ll, ETHF_TYPE_IPV6, p, len, res))
		res->v = FWD_V_TX;
}

void fwd_output_ip(struct fwd_ctx *c, const struct fwd_if *out, int family, const uint8_t *nh,
		   uint8_t *pkt, size_t len, struct fwd_result *res)
{
	res_init(res);
	if (!out || !out->up) {
		drop(res, FWD_DROP_IF_DOWN);
		return;
	}
	/* A parked packet: its ICMP errors go back through the egress's tenant (the
	 * ingress's unless a route leaks between tenants). */
	c->fib = out->fib;
	output(c, NULL, out, family, nh, NULL, pkt, len, true, NULL, res);
	if (res->v == FWD_V_TX) {
		if (family == AF_INET)
			FWD_INC(c->st->forwarded4);
		else
			FWD_INC(c->st->forwarded6);
	}
}

void fwd_output_local(struct fwd_ctx *c, const struct fwd_if *out, int family, const uint8_t *nh,
		      uint8_t *pkt, size_t len, struct fwd_result *res)
{
	res_init(res);
	if (!out || !out->up) {
		drop(res, FWD_DROP_IF_DOWN);
		return;
	}
	c->fib = out->fib;
	output(c, NULL, out, family, nh, NULL, pkt, len, false, NULL, res);
	if (res->v == FWD_V_DROP && res->n_tx == 0 && res->drop == FWD_DROP_COUNT)
		drop(res, FWD_DROP_NO_BUF); /* unresolved: not parked twice */
}

/* Route our own ICMP error back toward its destination and emit it (no TTL change). */
static void send_own(struct fwd_ctx *c, int family, uint8_t *p, size_t len, struct fwd_result *res)
{
	const struct rt_fib_nh *nh;
	const struct fwd_if *out;
	const uint8_t *dst = family == AF_INET ? p + 16 : p + 24;
	uint32_t v;
	enum fwd_verdict keep_v = res->v;
	enum fwd_drop keep_d = res->drop;

	v = family == AF_INET ? rt_fib_lookup4(c->fib, ip_be32(dst)) : rt_fib_lookup6(c->fib, dst);
	nh = rt_fib_nexthop(c->fib, v, 0);
	if (!nh || (nh->type != RT_NH_GATEWAY && nh->type != RT_NH_CONNECTED) ||
	    !(out = fwd_snap_if(c->snap, nh->ifindex)) || !out->up) {
		FWD_INC(c->st->drops[FWD_DROP_SAME_IF_ICMP]);
		FWD_INC(c->st->icmp_not_sent);
		return;
	}
	if (nh->type == RT_NH_GATEWAY)
		output(c, NULL, out, family, nh->gw, rt_fib_nh_hint(nh), p, len, false, NULL, res);
	else
		output(c, NULL, out, family, dst, NULL, p, len, false, NULL, res);
	/* The original packet's verdict stands; the error only adds a frame. */
	res->v = keep_v;
	res->drop = keep_d;
}

static void icmp_error(struct fwd_ctx *c, const struct fwd_if *in, int family, const uint8_t *pkt,
		       size_t len, uint8_t type, uint8_t code, uint32_t param, bool l2_mcast,
		       struct fwd_result *res)
{
	struct icmp_err err = {
		.type = type, .code = code, .param = param, .ll_multicast = l2_mcast
	};
	const uint8_t *dst = family == AF_INET ? pkt + 12 : pkt + 8;
	size_t cap = family == AF_INET ? ICMP4_ERR_MAX : ICMP6_ERR_MAX, olen;
	enum icmp_reason r;
	uint8_t *out;

	if (!c->snap->knobs.icmp_errors)
		return;
	err.src = src_addr(c->snap, in, family);
	if (!err.src) {
		FWD_INC(c->st->icmp_not_sent);
		return;
	}
	if (!icmp_rl_allow(&c->rl, family, dst, type, code, c->now_ns)) {
		FWD_INC(c->st->icmp_rate_limited);
		FWD_INC(c->st->icmp[ICMP_RATE_LIMITED]);
		return;
	}
	out = scratch_alloc(c, cap);
	if (!out) {
		FWD_INC(c->st->icmp_not_sent);
		return;
	}
	if (family == AF_INET) {
		err.ip_id = c->ip_id++;
		r = icmp4_error(&err, pkt, len, out, cap, &olen);
	} else {
		r = icmp6_error(&err, pkt, len, out, cap, &olen);
	}
	if (r != ICMP_OK) {
		FWD_INC(c->st->icmp[r]);
		FWD_INC(c->st->icmp_not_sent);
		return;
	}
	{
		unsigned before = res->n_tx;

		send_own(c, family, out, olen, res);
		if (res->n_tx > before)
			FWD_INC(c->st->icmp_sent);
	}
}

/* ---- routing --------------------------------------------------------------------- */

static inline bool has_ports(uint8_t proto)
{
	return proto == 6 || proto == 17 || proto == 132 || proto == 136;
}

static inline uint32_t flow4(const struct fwd_ctx *c, const uint8_t *p, const struct ip4_info *ii)
{
	uint32_t src, dst;
	uint16_t sp = 0, dp = 0;

	memcpy(&src, p + 12, 4);
	memcpy(&dst, p + 16, 4);
	if (has_ports(ii->proto) && ii->frag_off == 0 && !ii->mf &&
	    ii->tot_len >= ii->hdr_len + 4) {
		memcpy(&sp, p + ii->hdr_len, 2);
		memcpy(&dp, p + ii->hdr_len + 2, 2);
	}
	return rt_flow_hash4(c->seed, src, dst, ii->proto, sp, dp);
}

static inline uint32_t flow6(const struct fwd_ctx *c, const uint8_t *p, const struct ip6_info *ii)
{
	uint16_t sp = 0, dp = 0;

	if (has_ports(ii->proto) && !ii->is_frag && ii->pkt_len >= ii->l4_off + 4u) {
		memcpy(&sp, p + ii->l4_off, 2);
		memcpy(&dp, p + ii->l4_off + 2, 2);
	}
	return rt_flow_hash6(c->seed, p + 8, p + 24, ii->proto, sp, dp);
}

/* What differs between IPv4 and IPv6 once a packet is valid and routed. */
struct ip_family {
	int family;
	uint8_t unreach_type, unreach_code, time_exceeded;
	uint8_t src_off, dst_off, alen; /* address offsets and length in the header */
	enum ip_reason expired;         /* the counter of packets whose TTL ran out */
};

static const struct ip_family fam4 = {
	AF_INET, ICMP4_DEST_UNREACH, ICMP4_CODE_NET, ICMP4_TIME_EXCEEDED, 12, 16, 4, IP4_TTL_EXPIRED
};
static const struct ip_family fam6 = {
	AF_INET6, ICMP6_DEST_UNREACH, ICMP6_CODE_NOROUTE, ICMP6_TIME_EXCEEDED, 8, 24,
	16,       IP6_HOP_EXPIRED
};

/*
 * The route's verdict for a valid unicast packet, the same for both families: no route
 * (ICMP unreachable unless it came as link-layer multicast), local delivery, blackhole,
 * link-layer multicast never routed, output interface down, TTL / hop limit expiry
 * (ICMP time exceeded), a packet that would go back where it came from, else output.
 * Returns true when the packet was sent.
 */
static STAGE bool route_out(struct fwd_ctx *c, const struct ip_family *f, const struct fwd_if *in,
			    const struct rt_fib_nh *nh, uint8_t *p, size_t len, uint8_t ttl,
			    bool l2_mcast, const struct gso_pkt *g, struct fwd_result *res)
{
	const struct fwd_if *out;
	const uint8_t *nha;
	uint32_t *hint;

	if (!nh) {
		if (!l2_mcast)
			icmp_error(c, in, f->family, p, len, f->unreach_type, f->unreach_code, 0,
				   false, res);
		drop(res, FWD_DROP_NO_ROUTE);
		return false;
	}
	if (nh->type == RT_NH_LOCAL) {
		punt(res, FWD_PUNT_LOCAL, in, p, len);
		return false;
	}
	if (nh->type == RT_NH_BLACKHOLE) {
		drop(res, FWD_DROP_BLACKHOLE);
		return false;
	}
	if (l2_mcast) {
		drop(res, FWD_DROP_L2_BCAST);
		return false;
	}
	out = fwd_snap_if(c->snap, nh->ifindex);
	if (!out || !out->up) {
		drop(res, FWD_DROP_IF_DOWN);
		return false;
	}
	if (ttl <= 1) {
		icmp_error(c, in, f->family, p, len, f->time_exceeded, 0, 0, false, res);
		FWD_INC(c->st->ip[f->expired]);
		drop(res, FWD_DROP_TTL_EXPIRED);
		return false;
	}
	if (nh->type == RT_NH_GATEWAY) {
		nha = nh->gw;
		hint = rt_fib_nh_hint(nh);
	} else {
		nha = p + f->dst_off; /* one next hop for many neighbours: no hint */
		hint = NULL;
	}
	if (out == in && (f->alen == 4 ? memcmp(nha, p + f->src_off, 4)
				       : memcmp(nha, p + f->src_off, 16)) == 0) {
		drop(res, FWD_DROP_LOOP);
		return false;
	}
	output(c, in, out, f->family, nha, hint, p, len, true, g, res);
	return res->v == FWD_V_TX;
}

/* A whole UDP datagram to port 67 on an interface that relays DHCP (fwd_sp_dhcp_bind). */
static bool dhcp_relayed(const struct fwd_ctx *c, const struct fwd_if *in, const uint8_t *p,
			 const struct ip4_info *ii)
{
	uint32_t mask = atomic_load_explicit(&c->e->dhcp_ifmask, memory_order_relaxed);

	return mask && in->index < 32 && (mask >> in->index & 1) && !ii->frag_off && !ii->mf &&
	       ii->tot_len >= ii->hdr_len + 8u && ip_be16(p + ii->hdr_len + 2) == 67;
}

/* A UDP datagram to ff02::1:2 port 547 (no extension header) on an interface that
 * relays DHCP. */
static bool dhcp6_relayed(const struct fwd_ctx *c, const struct fwd_if *in, const uint8_t *p,
			  const struct ip6_info *ii)
{
	static const uint8_t all_relays[16] = { 0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2 };
	uint32_t mask = atomic_load_explicit(&c->e->dhcp_ifmask, memory_order_relaxed);

	return mask && in->index < 32 && (mask >> in->index & 1) && !ii->n_ext &&
	       ii->pkt_len >= ii->l4_off + 8u && ip_be16(p + ii->l4_off + 2) == 547 &&
	       !memcmp(p + 24, all_relays, 16);
}

/* The interface forwards IP multicast (fwd_sp_mcast_bind). */
static bool mcast_punted(const struct fwd_ctx *c, const struct fwd_if *in)
{
	uint32_t mask = atomic_load_explicit(&c->e->mcast_ifmask, memory_order_relaxed);

	return mask && in->index < 32 && (mask >> in->index & 1);
}

/* The FIB's answer fwd_fast_burst found for this packet (p: its IP header) in this
 * packet's FIB, when it did; inputs come in the warmed order, so the search starts past
 * the last one taken. Same FIB and destination within one RCU turn: the lookup's answer,
 * as of a moment earlier in the turn. */
static inline bool warmed_route(struct fwd_ctx *c, const uint8_t *p, const uint8_t *dst,
				size_t alen, uint32_t *v)
{
	struct fwd_warmed *w = &c->warmed;

	for (unsigned k = w->next; k < w->n; k++) {
		if (w->ip[k] != p)
			continue;
		w->next = k + 1;
		if (w->fib[k] != c->fib ||
		    (alen == 4 ? memcmp(w->dst[k], dst, 4) : memcmp(w->dst[k], dst, 16)))
			return false;
		*v = w->v[k];
		return true;
	}
	return false;
}

static void ip4_path(struct fwd_ctx *c, const struct fwd_if *in, uint8_t *p, size_t len,
		     bool l2_mcast, const struct gso_pkt *g, struct fwd_result *res)
{
	struct ip4_info ii;
	enum ip_reason r = ip4_validate(p, len, &ii);
	uint32_t v;

	c->fib = in->fib; /* the ingress's tenant; its ICMP errors go back through it too */
	if (r != IP_OK) {
		FWD_INC(c->st->ip[r]);
		drop(res, FWD_DROP_IP_INVALID);
		return;
	}
	len = ii.tot_len;
	if (ii.dst == 0xffffffffu && ii.proto == 17 && dhcp_relayed(c, in, p, &ii)) {
		/* A DHCP client's broadcast (from 0.0.0.0 often): the relay's, before the
		 * martian checks that would drop it. */
		punt(res, FWD_PUNT_LOCAL, in, p, len);
		return;
	}
	if (ip4_is_multicast(ii.dst) && mcast_punted(c, in) && !ip4_is_martian_src(ii.src)) {
		/* IGMP and group traffic: the multicast slow path's (before the martian
		 * checks, which refuse multicast destinations). */
		punt(res, FWD_PUNT_MCAST, in, p, len);
		return;
	}
	r = ip4_check_addrs(&c->snap->m4, ii.src, ii.dst);
	if (r != IP_OK) {
		FWD_INC(c->st->ip[r]);
		drop(res, FWD_DROP_MARTIAN);
		return;
	}
	if (ip4_is_multicast(ii.dst)) {
		drop(res, FWD_DROP_MULTICAST);
		return;
	}
	if (!warmed_route(c, p, p + 16, 4, &v))
		v = rt_fib_lookup4(c->fib, ii.dst);
	if (route_out(c, &fam4, in,
		      rt_fib_nexthop(c->fib, v, (v & RT_FIB_GROUP) ? flow4(c, p, &ii) : 0), p, len,
		      ii.ttl, l2_mcast, g, res))
		FWD_INC(c->st->forwarded4);
}

static void ip6_path(struct fwd_ctx *c, const struct fwd_if *in, uint8_t *p, size_t len,
		     bool l2_mcast, const struct gso_pkt *g, struct fwd_result *res)
{
	struct ip6_info ii;
	enum ip_reason r = ip6_validate(p, len, &ii);
	uint32_t v;

	c->fib = in->fib;
	if (r != IP_OK) {
		FWD_INC(c->st->ip[r]);
		drop(res, FWD_DROP_IP_INVALID);
		return;
	}
	len = ii.pkt_len;
	if (p[24] == 0xff && ii.proto == 17 && dhcp6_relayed(c, in, p, &ii)) {
		/* A DHCPv6 client's Solicit (from its link-local address, to ff02::1:2): the
		 * relay's, before the martian checks that would drop it. */
		punt(res, FWD_PUNT_LOCAL, in, p, len);
		return;
	}
	if (p[24] == 0xff && mcast_punted(c, in) && p[8] != 0xff &&
	    (!ip6_is_unspecified(p + 8) || ii.proto == 58)) {
		/* MLD (from a link-local source, or :: for a report) and group traffic. */
		punt(res, FWD_PUNT_MCAST, in, p, len);
		return;
	}
	r = ip6_check_addrs(&c->snap->m6, p + 8, p + 24);
	if (r != IP_OK) {
		FWD_INC(c->st->ip[r]);
		drop(res, FWD_DROP_MARTIAN);
		return;
	}
	if (ip6_is_multicast(p + 24)) {
		drop(res, FWD_DROP_MULTICAST);
		return;
	}
	if (!warmed_route(c, p, p + 24, 16, &v))
		v = rt_fib_lookup6(c->fib, p + 24);
	if (route_out(c, &fam6, in,
		      rt_fib_nexthop(c->fib, v, (v & RT_FIB_GROUP) ? flow6(c, p, &ii) : 0), p, len,
		      ii.hop_limit, l2_mcast, g, res))
		FWD_INC(c->st->forwarded6);
}

/* ICMPv6 133..137 directly after the fixed header (as ipoib_rx_classify decides). */
static inline bool is_nd(const uint8_t *p, size_t len)
{
	return len >= IP6_HDR_LEN + 4 && (p[0] >> 4) == 6 && p[6] == 58 &&
	       p[IP6_HDR_LEN] >= ND_RS && p[IP6_HDR_LEN] <= ND_REDIRECT;
}

/* ---- a burst, stage by stage (fwd_fast_burst) ----------------------------------------- */

/* Stage 1 for IPv4: the common case ip4_path would forward without a second look (no
 * options, not a fragment, TTL above 1, ordinary unicast addresses, a good checksum:
 * every check ip4_validate, the DHCP and multicast punts and ip4_check_addrs make,
 * decided at once). len: to the end of the buffer. */
static inline bool fast4_valid(const uint8_t *p, size_t len, const struct ip4_martian_cfg *m)
{
	unsigned tot = ip_be16(p + 2);

	return p[0] == 0x45 && tot >= IP4_HDR_LEN && tot <= len &&
	       !(ip_be16(p + 6) & (IP4_F_MF | IP4_OFF_MASK)) && p[8] > 1 && !m->n_extra_src &&
	       !m->n_extra_dst && !ip4_may_be_martian(ip_be32(p + 12)) &&
	       !ip4_may_be_martian(ip_be32(p + 16)) && ip4_hdr_csum_ok(p, IP4_HDR_LEN);
}

/* The same for IPv6: no extension header, hop limit above 1, global unicast on both
 * sides (so no DHCPv6 or multicast punt), not ND. */
static inline bool fast6_valid(const uint8_t *p, size_t len)
{
	return p[0] >> 4 == 6 && IP6_HDR_LEN + (size_t)ip_be16(p + 4) <= len && !ip6_is_ext(p[6]) &&
	       p[7] > 1 && !ip6_may_be_martian(p + 8) && !ip6_may_be_martian(p + 24) &&
	       !is_nd(p, len);
}

/* The flow hash of a packet that passed stage 1, for an ECMP route (flow4/flow6 with
 * the header's fields). */
static uint32_t fast_flow(const struct fwd_ctx *c, const uint8_t *p, int family, size_t ip_len)
{
	if (family == AF_INET) {
		struct ip4_info ii = { .hdr_len = IP4_HDR_LEN,
				       .tot_len = (uint16_t)ip_len,
				       .proto = p[9] };

		return flow4(c, p, &ii);
	}
	struct ip6_info ii = { .pkt_len = (uint32_t)ip_len, .proto = p[6], .l4_off = IP6_HDR_LEN };

	return flow6(c, p, &ii);
}

/* A TCP SYN that MSS clamping would look at (output's test, without its length check:
 * a short one is left to it too). */
static inline bool fast_syn(const uint8_t *p, int family, size_t ip_len)
{
	if (family == AF_INET)
		return p[9] == 6 && ip_len >= IP4_HDR_LEN + 14 && (p[IP4_HDR_LEN + 13] & TCP_SYN);
	return p[6] == 6 && ip_len >= IP6_HDR_LEN + 14 && (p[IP6_HDR_LEN + 13] & TCP_SYN);
}

/* What each stage of fwd_fast_burst hands the next, per packet. */
struct fast_pkt {
	const struct fwd_if *out;
	const uint8_t *nha; /* the neighbour's address */
	uint32_t *hint;
	const struct neigh_slot *slot;
	uint16_t ip_len;
	uint8_t family;
};

/* Stage 4 of fwd_fast_burst: neighbour, MTU, TTL - 1, the frame, for the packets still
 * in fast. Returns those done. */
static uint64_t rewrite(struct fwd_ctx *c, uint8_t *const *ip, unsigned n, uint64_t fast,
			const struct fast_pkt *k, struct fwd_tx *tx)
{
	const struct fwd_snap *snap = c->snap;
	uint64_t done = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct fwd_if *out;
		int family = k[i].family;
		uint8_t *p = ip[i];
		size_t ip_len = k[i].ip_len;
		uint16_t et = family == AF_INET ? ETHF_TYPE_IPV4 : ETHF_TYPE_IPV6;
		struct neigh_link mac_ll;
		const struct neigh_link *ll;
		struct ibp_buf *b = NULL;

		if (!(fast >> i & 1))
			continue;
		out = k[i].out;
		ll = egress_neigh(c, out, family, k[i].nha, k[i].hint, &mac_ll);
		if (!ll || ip_len > egress_mtu(out, ll) ||
		    (c->held.n && held_find(&c->held, out->index, family, k[i].nha)) ||
		    (snap->knobs.mss_clamp && fast_syn(p, family, ip_len)))
			continue;
		if (out->kind == FWD_IF_IPOIB && !(b = ib_tx_buf(out, ip_len)))
			continue;
		if (family == AF_INET) {
			(void)ip4_ttl_decrement(p);
			FWD_INC(c->st->forwarded4);
		} else {
			p[7]--;
			FWD_INC(c->st->forwarded6);
		}
		if (b) {
			memcpy(b->data + IPOIB_ENCAP_LEN, p, ip_len);
			ib_tx_fill(&tx[i], out, ll, et, b, ip_len);
		} else {
			eth_tx_fill(&tx[i], out, ll->addr, et, p, ip_len);
		}
		done |= 1ull << i;
	}
	return done;
}

uint64_t fwd_fast_burst(struct fwd_ctx *c, const struct fwd_if *in, uint8_t *const *ip,
			const size_t *len, unsigned n, uint64_t merge, struct fwd_tx *tx)
{
	struct fast_pkt k[FWD_BURST_MAX];
	uint32_t dst4[FWD_BURST_MAX], v4[FWD_BURST_MAX], v6[FWD_BURST_MAX], v[FWD_BURST_MAX];
	uint8_t dst6[FWD_BURST_MAX][16];
	const struct rt_fib_nh *nh[FWD_BURST_MAX];
	const struct rt_fib *fib = in->fib;
	const struct fwd_snap *snap = c->snap;
	struct fwd_warmed *wd = &c->warmed;
	uint64_t fast = 0, done = 0;
	unsigned n4 = 0, n6 = 0;

	if (!in->up) /* dropped by fwd_input_* */
		return 0;
	if (n > FWD_BURST_MAX)
		n = FWD_BURST_MAX;
	/* A new burst (inputs took from the last), or no room: start over. */
	if (wd->next || wd->n + n > FWD_BURST_MAX)
		wd->n = wd->next = 0;

	/* 1: validate; gather every IP packet's destination (the others' routes warm the
	 * caches for fwd_input_*). */
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *p = ip[i];

		k[i].family = 0;
		if (!p || len[i] < IP4_HDR_LEN)
			continue;
		if (p[0] >> 4 == 4) {
			k[i].family = AF_INET;
			k[i].ip_len = ip_be16(p + 2);
			dst4[n4++] = ip_be32(p + 16);
			if (fast4_valid(p, len[i], &snap->m4))
				fast |= 1ull << i;
		} else if (p[0] >> 4 == 6 && len[i] >= IP6_HDR_LEN) {
			k[i].family = AF_INET6;
			k[i].ip_len = (uint16_t)(IP6_HDR_LEN + ip_be16(p + 4));
			memcpy(dst6[n6++], p + 24, 16);
			if (fast6_valid(p, len[i]))
				fast |= 1ull << i;
		}
	}

	/* 2: route, in bulk. */
	if (n4)
		lpm4_lookup_bulk(fib->v4, dst4, v4, n4);
	if (n6)
		lpm6_lookup_bulk(fib->v6, (const uint8_t(*)[16])dst6, v6, n6);
	n4 = n6 = 0;
	for (unsigned i = 0; i < n; i++)
		if (k[i].family)
			v[i] = k[i].family == AF_INET ? v4[n4++] : v6[n6++];

	/* 3: next hop (its line loaded for the whole burst first) and egress; the
	 * neighbour's index slot loaded, then (IPoIB) the link address it points to. */
	for (unsigned i = 0; i < n; i++) {
		if (!k[i].family)
			continue;
		nh[i] = rt_fib_nexthop(fib, v[i],
				       fast >> i & 1 && (v[i] & RT_FIB_GROUP)
					   ? fast_flow(c, ip[i], k[i].family, k[i].ip_len)
					   : 0);
		if (nh[i])
			__builtin_prefetch(nh[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		const struct rt_fib_nh *x = nh[i];
		const struct fwd_if *out;

		if (!k[i].family)
			continue;
		if (!x || x->family != k[i].family ||
		    (x->type != RT_NH_GATEWAY && x->type != RT_NH_CONNECTED)) {
			fast &= ~(1ull << i);
			continue;
		}
		out = fwd_snap_if(snap, x->ifindex);
		if (!out || !out->neigh) {
			fast &= ~(1ull << i);
			continue;
		}
		k[i].out = out;
		if (x->type == RT_NH_GATEWAY) {
			k[i].nha = x->gw;
			k[i].hint = rt_fib_nh_hint(x);
		} else {
			k[i].nha = ip[i] + (k[i].family == AF_INET ? 16 : 24);
			k[i].hint = NULL;
		}
		k[i].slot = neigh_warm_slot(out->neigh, k[i].family, k[i].nha, k[i].hint);
		/* Left to fwd_input_*: an egress down or without its UD QP, a packet back
		 * out of its ingress, one the receive coalescing wants. */
		if (!out->up || out == in || (out->kind == FWD_IF_IPOIB && !out->ud_qp) ||
		    (merge >> i & 1 && out->kind == FWD_IF_ETH && out->tx_gso &&
		     !(v[i] & RT_FIB_GROUP)))
			fast &= ~(1ull << i);
	}
	for (unsigned i = 0; i < n; i++)
		if (fast >> i & 1 && k[i].slot && k[i].out->kind == FWD_IF_IPOIB)
			neigh_warm_link(k[i].slot);
	/* 4: neighbour, MTU, TTL - 1, the frame. */
	if (tx)
		done = rewrite(c, ip, n, fast, k, tx);

	/* The routes of the packets left to fwd_input_* (warmed_route), in their order. */
	for (unsigned i = 0; i < n; i++) {
		unsigned w;

		if (!k[i].family || done >> i & 1)
			continue;
		w = wd->n++;
		wd->ip[w] = ip[i];
		wd->fib[w] = fib;
		wd->v[w] = v[i];
		if (k[i].family == AF_INET)
			memcpy(wd->dst[w], ip[i] + 16, 4);
		else
			memcpy(wd->dst[w], ip[i] + 24, 16);
	}
	return done;
}

uint8_t *fwd_eth_ip(uint8_t *frame, size_t len, uint8_t pkttype, const struct gso_pkt *gso,
		    size_t *ip_len)
{
	uint16_t type;

	if (len < ETHF_HLEN + IP4_HDR_LEN || pkttype != ETHP_PKT_HOST ||
	    ((frame[0] | frame[6]) & 1) || (gso && gso->kind != GSO_NONE))
		return NULL;
	type = (uint16_t)(frame[12] << 8 | frame[13]);
	if (!(type == ETHF_TYPE_IPV4 && frame[ETHF_HLEN] >> 4 == 4) &&
	    !(type == ETHF_TYPE_IPV6 && frame[ETHF_HLEN] >> 4 == 6))
		return NULL;
	*ip_len = len - ETHF_HLEN;
	return frame + ETHF_HLEN;
}

/* ---- ingress --------------------------------------------------------------------- */

void fwd_input_eth(struct fwd_ctx *c, const struct fwd_if *in, uint8_t *frame, size_t len,
		   uint8_t pkttype, const struct gso_pkt *gso, struct fwd_result *res)
{
	struct ethf_info ei;
	enum ethf_result er;
	uint8_t *l3;
	size_t l3len;
	bool l2_mcast;

	res_init(res);
	if (!in || !in->up) {
		drop(res, FWD_DROP_IF_DOWN);
		return;
	}
	er = ethf_parse(frame, len, &ei);
	if (er != ETHF_OK) {
		FWD_INC(c->st->eth[er]);
		drop(res, FWD_DROP_ETH_FRAME);
		return;
	}
	if (pkttype == ETHP_PKT_OTHERHOST) {
		drop(res, FWD_DROP_NOT_FOR_US);
		return;
	}
	if (ei.n_tags) {
		/* Ports hand frames untagged: a tag left is another (inner) VLAN's. */
		drop(res, FWD_DROP_ETHERTYPE);
		return;
	}
	l2_mcast = pkttype == ETHP_PKT_BROADCAST || pkttype == ETHP_PKT_MULTICAST || (frame[0] & 1);
	l3 = frame + ei.l3_off;
	l3len = len - ei.l3_off;
	switch (ei.ethertype) {
	case ETHF_TYPE_IPV4:
		ip4_path(c, in, l3, l3len, l2_mcast, gso, res);
		return;
	case ETHF_TYPE_IPV6:
		if (is_nd(l3, l3len)) {
			punt(res, FWD_PUNT_ND, in, frame, len);
			return;
		}
		ip6_path(c, in, l3, l3len, l2_mcast, gso, res);
		return;
	case ETHF_TYPE_ARP:
		punt(res, FWD_PUNT_ARP, in, frame, len);
		return;
	default:
		drop(res, FWD_DROP_ETHERTYPE);
		return;
	}
}

void fwd_input_ib(struct fwd_ctx *c, const struct fwd_if *in, const struct ipoib_rx *rx,
		  const struct gso_pkt *gso, struct fwd_result *res)
{
	uint8_t *p = (uint8_t *)(uintptr_t)rx->data;

	res_init(res);
	if (!in || !in->up) {
		drop(res, FWD_DROP_IF_DOWN);
		return;
	}
	switch (rx->kind) {
	case IPOIB_RX_IP4:
		ip4_path(c, in, p, rx->len, rx->mcast, gso, res);
		return;
	case IPOIB_RX_IP6:
		ip6_path(c, in, p, rx->len, rx->mcast, gso, res);
		return;
	case IPOIB_RX_ARP:
		punt(res, FWD_PUNT_ARP, in, p, rx->len);
		return;
	case IPOIB_RX_ND:
		punt(res, FWD_PUNT_ND, in, p, rx->len);
		return;
	case IPOIB_RX_DROP:
	default:
		drop(res, FWD_DROP_IB_RX);
		return;
	}
}

bool fwd_gro_wanted(struct fwd_ctx *c, const struct fwd_if *in, const uint8_t *ip, size_t len)
{
	const struct rt_fib_nh *nh;
	const struct fwd_if *out;
	uint32_t v;

	if (len >= 20 && ip[0] >> 4 == 4 && ip[9] == 6)
		v = rt_fib_lookup4(in->fib, ip_be32(ip + 16));
	else if (len >= IP6_HDR_LEN && ip[0] >> 4 == 6 && ip[6] == 6)
		v = rt_fib_lookup6(in->fib, ip + 24);
	else
		return false;
	if (v & RT_FIB_GROUP) /* the next hop is the flow's: not worth hashing twice */
		return false;
	nh = rt_fib_nexthop(in->fib, v, 0);
	if (!nh || (nh->type != RT_NH_GATEWAY && nh->type != RT_NH_CONNECTED))
		return false;
	out = fwd_snap_if(c->snap, nh->ifindex);
	return out && out->up && out->kind == FWD_IF_ETH && out->tx_gso;
}

void fwd_count(struct fwd_ctx *c, const struct fwd_result *res)
{
	switch (res->v) {
	case FWD_V_DROP:
		if (res->drop < FWD_DROP_COUNT)
			FWD_INC(c->st->drops[res->drop]);
		break;
	case FWD_V_PUNT:
		FWD_INC(c->st->punts[res->punt]);
		break;
	case FWD_V_TX:
		break;
	}
}
