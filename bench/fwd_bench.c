/*
 * fwd_bench: the forwarding pipeline's rate per core, in memory, against a minimal
 * DPDK-style loop doing the same parse / lookup / rewrite, in the same process.
 *
 * Ours: fwd_fast_burst and fwd_input_ib (after ipoib_rx_classify of a UD receive
 * buffer) or fwd_input_eth on a real engine: the route table holds tor-geoipdb's IPv4 prefixes
 * (bench/bench_geoip.h; about 560k), alternately routed via 50,000 gateways on an
 * Ethernet interface and 50,000 on an IPoIB interface, all 100,000 resolved in the
 * engine's neighbour tables. Per packet: classify, ip4_validate (checksum included),
 * martians, FIB lookup, TTL / MTU checks, neighbour lookup and use hint, TTL - 1
 * (RFC 1624), emit (Ethernet: 14-byte header into the descriptor, no copy; IPoIB: copy
 * into a send buffer behind the 4-octet header), the descriptor queued as the worker
 * queues it, counters. In bursts of 32 as the worker runs them: the burst's common
 * case stage by stage (fwd_fast_burst), the rest through fwd_input_*; once more with
 * every packet through fwd_input_* alone ("per packet"), to show what the stages are
 * worth.
 *
 * Reference ("minimal"): Ethernet or IPoIB header check, version / IHL / length / TTL
 * (no checksum check: NICs verify it), rte_lpm lookup, an open-addressing hash of the
 * 100,000 neighbours (one multiply, one compare), TTL - 1 with the incremental
 * checksum, the same header write or copy, the same descriptor. Without DPDK (no
 * IBGW_HAVE_DPDK) the reference uses lpm4 for its lookup; with DPDK it runs both.
 *
 * IPv6 (when tor-geoipdb's geoip6 is there): its prefixes on the same engine, alternately
 * via 20,000 gateways on each side, all resolved; ours staged and per packet only
 * (the reference loops are IPv4).
 *
 * Two workers (issue 13: "two workers sharing one port pair's queues at least 1.8x one
 * worker on a flow mix, in memory"): the engine has two workers; each set's packets are
 * dealt to them by flow (every other packet: each has a destination of its own), as a
 * port's queues would deal them, and both run at once, each on its own CPU, with its own
 * context, counters and send buffers, reading the one FIB and neighbour tables. Printed:
 * the packets of both per second of wall time against one worker alone on the whole set
 * in the same round (ideal: 2.0; the machine needs two idle CPUs).
 *
 * Packets: IPv4/UDP, 64 and 1500 octets at the IP layer, destinations inside random
 * prefixes of the side they route to (a different prefix per packet), sources on the
 * ingress side. Every round restores the packets (untimed), then times PASSES passes
 * over them per implementation, in rotating order. Printed: Mpackets/s medians and
 * ratios of medians (ref time / ours: above 1, ours is faster). Before timing, every
 * implementation must pick the same next hop (MAC or QPN) for every packet, or the
 * program aborts.
 *
 *   fwd_bench [--rounds R] [--packets N] [--geoip FILE] [--geoip6 FILE] [--eal "EAL ARGS"]
 *             [--ours-only] [--set TEXT]
 *
 * --ours-only times the pipeline alone (no reference built or run, no "per packet" run,
 * no two workers), so that `perf record` sees what ours spends its time on; --set times
 * only the sets whose name contains TEXT ("IPoIB->Ethernet   64"). The timed loops are
 * functions of their own (run_ours, run_ref) for bench/fwd_instr.sh to count the
 * instructions of under callgrind.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/bench_geoip.h"
#include "engine/engine.h"
#include "engine/forward.h"
#include "ipoib/ipoib_link.h"
#include "table/lpm4.h"
#include "table/neigh.h"
#include "table/route.h"

#ifdef IBGW_HAVE_DPDK
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wvla"   /* rte_lpm.h's bulk lookup */
#pragma GCC diagnostic ignored "-Wundef" /* rte_ring_elem_pvt.h under clang */
#include <rte_eal.h>
#include <rte_lpm.h>
#include <rte_version.h>
#pragma GCC diagnostic pop
#endif

#define NGW      50000 /* next hops per side: 100,000 neighbours */
#define NGW6     20000 /* IPv6 next hops per side: 40,000 more neighbours */
#define PASSES   40    /* TTL 255 leaves room for them */
#define TXQ      64
#define GRH      40
#define MAX_IMPL 4
#define BURST    32 /* the worker's default receive burst */

static int rounds = 9;
static unsigned npkts = 16384;
static bool ours_only;       /* --ours-only: time the ibgw pipeline alone (for perf record) */
static const char *only_set; /* --set: the sets whose name contains this */

/* ---- helpers ---- */

/* The set is timed (--set names it, or no --set). */
static bool set_chosen(const char *name)
{
	return !only_set || strstr(name, only_set);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p) {
		fprintf(stderr, "fwd_bench: out of memory\n");
		exit(1);
	}
	return p;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "fwd_bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* ---- addressing ---- */

/* Gateway g of side s (0: Ethernet, 100.64.0.0/15; 1: IPoIB, 100.96.0.0/15), host order. */
static uint32_t gw_addr(int s, uint32_t g)
{
	return (s ? 0x64600000u : 0x64400000u) + 2 + g;
}

static void gw_mac(uint32_t g, uint8_t mac[6])
{
	mac[0] = 0x02, mac[1] = 0x42;
	mac[2] = (uint8_t)(g >> 24), mac[3] = (uint8_t)(g >> 16), mac[4] = (uint8_t)(g >> 8);
	mac[5] = (uint8_t)g;
}

static uint32_t gw_qpn(uint32_t g)
{
	return 0x100000u + g;
}

/* IPv6 gateway g of side s (0: Ethernet, fd00:e::/64; 1: IPoIB, fd00:b::/64). */
static void gw6_addr(int s, uint32_t g, uint8_t a[16])
{
	uint32_t h = 2 + g;

	memset(a, 0, 16);
	a[0] = 0xfd, a[1] = 0x00, a[3] = s ? 0x0b : 0x0e;
	a[12] = (uint8_t)(h >> 24), a[13] = (uint8_t)(h >> 16), a[14] = (uint8_t)(h >> 8);
	a[15] = (uint8_t)h;
}

static const uint8_t our_mac[6] = { 0x02, 0x99, 0, 0, 0, 1 };

/* ---- fake IB send buffers (the emit's one copy lands here) ---- */

#define NIB 256
struct fbpool {
	struct ibp_buf bufs[NIB];
	struct ibp_buf *free[NIB];
	unsigned n;
};
/* Each worker thread its own (a worker's sends complete on its own thread here). */
static __thread struct fbpool *fbp;

static void fb_init(struct fbpool *p)
{
	for (unsigned b = 0; b < NIB; b++) {
		p->bufs[b] = (struct ibp_buf){ .data = xmalloc(2100), .cap = 2100, .id = b };
		p->free[p->n++] = &p->bufs[b];
	}
}

static struct ibp_buf *fb_get(struct ibp_port *p)
{
	(void)p;
	return fbp->n ? fbp->free[--fbp->n] : NULL;
}

static void fb_put(struct ibp_port *p, struct ibp_buf *b)
{
	(void)p;
	fbp->free[fbp->n++] = b;
}

static const struct ibp_ops fake_ib = { .name = "bench", .buf_get = fb_get, .buf_put = fb_put };
static int dummy_port, dummy_qp, dummy_ah;

static void nop_solicit(void *c, const struct neigh_entry *e, const struct neigh_link *l)
{
	(void)c, (void)e, (void)l;
}
static void nop_xmit(void *c, const struct neigh_entry *e, const struct neigh_link *l, void *p)
{
	(void)c, (void)e, (void)l, (void)p;
}
static void nop_drop(void *c, void *p)
{
	(void)c, (void)p;
}
static const struct neigh_ops nops = { .solicit = nop_solicit, .xmit = nop_xmit, .drop = nop_drop };

/* ---- the engine ---- */

/* One worker's state: its pipeline context, result and send queue. */
/* A worker's state, on cache lines of its own: two lanes written at once on one line
 * would bounce it between the CPUs on every packet. */
struct lane {
	_Alignas(64) struct ours *o;
	struct fwd_ctx c;
	struct fwd_result res;
	/* Descriptor queues as the worker's (engine/worker.c queue_tx): only the egress
	 * kind's part of each result is copied. */
	struct ethp_tx etxq[TXQ];
	struct ibp_send itxq[TXQ];
	unsigned ntx;
};

#define LANES 2

struct ours {
	struct rt_table *rt;
	struct fwd_engine *e;
	struct neigh_table *ibn;
	const struct fwd_if *eth, *ib;
	uint32_t ie, iib; /* their ifindexes */
	struct lane l[LANES];
};

/* Gateway g of side s, resolved (REACHABLE): a MAC on Ethernet, a QPN on IPoIB. */
static void gw_neighbour(struct ours *o, uint32_t ie, int s, uint32_t g, int family,
			 const uint8_t *addr)
{
	struct neigh_link ll = { .usable = true };
	struct neigh_table *t = s ? o->ibn : fwd_snap_if(fwd_engine_current(o->e), ie)->neigh;

	if (s) {
		ll.len = 20;
		ll.ah = &dummy_ah;
		ll.qpn = gw_qpn(g);
		ll.mtu = 2044;
	} else {
		ll.len = 6;
		gw_mac(g, ll.addr);
	}
	if (!neigh_update(t, family, addr, &ll, NEIGH_F_CREATE | NEIGH_F_SOLICITED))
		die("neighbour", ENOSPC);
}

static void big_table_params(struct neigh_params *p)
{
	memset(p, 0, sizeof(*p));
	p->gc_thresh1 = p->gc_thresh2 = p->gc_thresh3 = 4 * NGW;
	p->base_reachable_ms = 3600000; /* REACHABLE through the run */
	neigh_params_defaults(p);
}

static void ours_build(struct ours *o, const struct pfx4 *p, size_t n, uint32_t groups)
{
	struct rt_config rc = { .max_nexthops = 2 * NGW + 2 * NGW6 + 1024,
				.lpm4_groups = groups + groups / 4 };
	struct fwd_engine_config ec = { .n_workers = LANES, .flow_seed = 7, .msg_pool = 16 };
	struct neigh_config nc = { .ops = &nops };
	struct fwd_if_config ei = { .name = "eth0",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)(void *)&dummy_port,
				    .mac = our_mac };
	struct fwd_if_config ii = { .name = "ib0",
				    .kind = FWD_IF_IPOIB,
				    .mtu = 2044,
				    .ib_ops = &fake_ib,
				    .ib_port = (struct ibp_port *)(void *)&dummy_port };
	struct ipoib_hwaddr hw = { .qpn = 0x48 };
	uint32_t ie, ib;
	int ret;
	double t0 = bench_now();

	big_table_params(&ec.eth_neigh);
	big_table_params(&nc.params);
	if ((ret = rt_create(&o->rt, &rc)) < 0)
		die("rt_create", ret);
	ec.rt = o->rt;
	if ((ret = fwd_engine_new(&ec, &o->e)) < 0)
		die("fwd_engine_new", ret);
	if ((ret = neigh_table_new(&nc, &o->ibn)) < 0)
		die("neigh_table_new", ret);
	ii.neigh = o->ibn;
	if ((ret = fwd_engine_if_add(o->e, &ei, &ie)) < 0 ||
	    (ret = fwd_engine_if_add(o->e, &ii, &ib)) < 0 ||
	    (ret = fwd_engine_if_set_up(o->e, ie, true)) < 0 ||
	    (ret = fwd_engine_if_set_ipoib(o->e, ib, (struct ibp_qp *)(void *)&dummy_qp, 0xb1b, &hw,
					   2044)) < 0)
		die("interfaces", ret);
	for (int s = 0; s < 2; s++) {
		struct ip_prefix a = { .addr.family = AF_INET, .len = 15 };
		uint32_t x = htonl(gw_addr(s, 0) - 1);

		memcpy(a.addr.bytes, &x, 4);
		if ((ret = fwd_engine_if_add_addr(o->e, s ? ib : ie, &a)) < 0)
			die("address", ret);
	}
	/* 100,000 resolved neighbours. */
	for (uint32_t g = 0; g < NGW; g++) {
		for (int s = 0; s < 2; s++) {
			uint32_t a = htonl(gw_addr(s, g));

			gw_neighbour(o, ie, s, g, AF_INET, (const uint8_t *)&a);
		}
	}
	/* The prefixes, alternately behind each side. */
	for (size_t i = 0; i < n; i++) {
		int s = (int)(i & 1);
		struct rt_route r = { .source = RT_SRC_STATIC, .nnh = 1 };
		uint32_t a = htonl(p[i].addr), gw = htonl(gw_addr(s, (uint32_t)(i / 2) % NGW));

		r.prefix.addr.family = AF_INET;
		r.prefix.len = p[i].len;
		memcpy(r.prefix.addr.bytes, &a, 4);
		r.nh[0] = (struct rt_nexthop){ .type = RT_NH_GATEWAY, .ifindex = s ? ib : ie };
		r.nh[0].gw.family = AF_INET;
		memcpy(r.nh[0].gw.bytes, &gw, 4);
		if ((ret = rt_add(o->rt, &r)) < 0 && ret != -EEXIST)
			die("rt_add", ret);
	}
	for (unsigned w = 0; w < LANES; w++) {
		o->l[w].o = o;
		if ((ret = fwd_ctx_init(&o->l[w].c, o->e, w)) < 0)
			die("fwd_ctx_init", ret);
		fwd_ctx_begin(&o->l[w].c, 1000000000ull);
	}
	o->eth = fwd_snap_if(o->l[0].c.snap, ie);
	o->ib = fwd_snap_if(o->l[0].c.snap, ib);
	o->ie = ie;
	o->iib = ib;
	printf("  engine: %zu routes, 100000 neighbours, built in %.1f s\n", n, bench_now() - t0);
}

/* IPv6 on the same engine: an address on each side, 2 x NGW6 resolved neighbours, the
 * geoip6 prefixes alternately behind each side. */
static void ours_build6(struct ours *o, const struct pfx6 *p, size_t n)
{
	double t0 = bench_now();
	int ret;

	for (int s = 0; s < 2; s++) {
		struct ip_prefix a = { .addr.family = AF_INET6, .len = 64 };

		gw6_addr(s, 0, a.addr.bytes);
		a.addr.bytes[15] = 1;
		if ((ret = fwd_engine_if_add_addr(o->e, s ? o->iib : o->ie, &a)) < 0)
			die("IPv6 address", ret);
	}
	for (uint32_t g = 0; g < NGW6; g++) {
		for (int s = 0; s < 2; s++) {
			uint8_t a[16];

			gw6_addr(s, g, a);
			gw_neighbour(o, o->ie, s, g, AF_INET6, a);
		}
	}
	for (size_t i = 0; i < n; i++) {
		int s = (int)(i & 1);
		struct rt_route r = { .source = RT_SRC_STATIC, .nnh = 1 };

		r.prefix.addr.family = AF_INET6;
		r.prefix.len = p[i].len;
		memcpy(r.prefix.addr.bytes, p[i].addr, 16);
		r.nh[0] =
		    (struct rt_nexthop){ .type = RT_NH_GATEWAY, .ifindex = s ? o->iib : o->ie };
		r.nh[0].gw.family = AF_INET6;
		gw6_addr(s, (uint32_t)(i / 2) % NGW6, r.nh[0].gw.bytes);
		if ((ret = rt_add(o->rt, &r)) < 0 && ret != -EEXIST)
			die("rt_add (IPv6)", ret);
	}
	for (unsigned w = 0; w < LANES; w++)
		fwd_ctx_begin(&o->l[w].c, 1000000000ull);
	o->eth = fwd_snap_if(o->l[0].c.snap, o->ie);
	o->ib = fwd_snap_if(o->l[0].c.snap, o->iib);
	printf("  engine: %zu IPv6 routes, %u IPv6 neighbours, built in %.1f s\n", n, 2 * NGW6,
	       bench_now() - t0);
}

/* ---- the reference: rte_lpm (or lpm4), a neighbour hash, a minimal parse ---- */

struct rneigh {
	uint32_t ip; /* host order; 0: empty */
	uint32_t qpn;
	void *ah;
	uint8_t mac[6];
};

struct ref {
	const char *name;
	uint32_t (*lookup)(void *t, uint32_t dst); /* 0: no route; else gw index + 1 */
	void *t;
	struct rneigh *nb;
	uint32_t mask;
	uint32_t *gw_of; /* next hop value - 1 -> gateway address (host order) */
	struct ethp_tx etx[TXQ];
	struct ibp_send itx[TXQ];
	unsigned n;
};

static inline uint32_t nb_hash(uint32_t ip)
{
	return (ip * 0x9e3779b1u) >> 8;
}

static void ref_neigh_init(struct ref *r)
{
	uint32_t sz = 1;

	while (sz < 4 * NGW)
		sz <<= 1;
	r->nb = xmalloc(sz * sizeof(*r->nb));
	r->mask = sz - 1;
	for (int s = 0; s < 2; s++) {
		for (uint32_t g = 0; g < NGW; g++) {
			uint32_t ip = gw_addr(s, g), h = nb_hash(ip) & r->mask;

			while (r->nb[h].ip)
				h = (h + 1) & r->mask;
			r->nb[h].ip = ip;
			r->nb[h].qpn = gw_qpn(g);
			r->nb[h].ah = &dummy_ah;
			gw_mac(g, r->nb[h].mac);
		}
	}
}

static inline const struct rneigh *ref_neigh(const struct ref *r, uint32_t ip)
{
	uint32_t h = nb_hash(ip) & r->mask;

	while (r->nb[h].ip != ip) {
		if (!r->nb[h].ip)
			return NULL;
		h = (h + 1) & r->mask;
	}
	return &r->nb[h];
}

/* TTL - 1 with RFC 1624 (checksum + 0x0100 in one's complement). */
static inline void ttl_dec(uint8_t *ip)
{
	uint32_t c = (uint32_t)(ip[10] << 8 | ip[11]) + 0x0100;

	ip[8]--;
	c = (c & 0xffff) + (c >> 16);
	ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
}

/* The IP part: checks, route, neighbour, TTL. */
static inline const struct rneigh *ref_route(struct ref *r, uint8_t *ip, size_t len)
{
	uint32_t dst, v;

	if (len < 20 || ip[0] != 0x45 || (size_t)(ip[2] << 8 | ip[3]) > len || ip[8] <= 1)
		return NULL;
	memcpy(&dst, ip + 16, 4);
	v = r->lookup(r->t, ntohl(dst));
	if (!v)
		return NULL;
	ttl_dec(ip);
	return ref_neigh(r, r->gw_of[v - 1]);
}

/* IPoIB -> Ethernet: a UD receive buffer (GRH area, IPoIB header, IP). */
static inline bool ref_ib(struct ref *r, uint8_t *buf, size_t len)
{
	uint8_t *ip = buf + GRH + 4;
	const struct rneigh *nb;
	struct ethp_tx *t;

	if (len < GRH + 4 + 20 || buf[GRH] != 0x08 || buf[GRH + 1] != 0x00)
		return false;
	nb = ref_route(r, ip, len - GRH - 4);
	if (!nb)
		return false;
	t = &r->etx[r->n++ & (TXQ - 1)];
	memcpy(t->hdr, nb->mac, 6);
	memcpy(t->hdr + 6, our_mac, 6);
	t->hdr[12] = 0x08, t->hdr[13] = 0x00;
	t->hdr_len = 14;
	t->data = ip;
	t->len = (uint32_t)(len - GRH - 4);
	return true;
}

/* Ethernet -> IPoIB: a frame; the packet is copied into an IB send buffer. */
static inline bool ref_eth(struct ref *r, uint8_t *fr, size_t len)
{
	const struct rneigh *nb;
	struct ibp_send *t;
	struct ibp_buf *b;

	if (len < 34 || fr[12] != 0x08 || fr[13] != 0x00 || memcmp(fr, our_mac, 6))
		return false;
	nb = ref_route(r, fr + 14, len - 14);
	if (!nb || !(b = fb_get(NULL)))
		return false;
	b->data[0] = 0x08, b->data[1] = 0x00, b->data[2] = b->data[3] = 0;
	memcpy(b->data + 4, fr + 14, len - 14);
	b->len = (uint32_t)(len - 14 + 4);
	t = &r->itx[r->n++ & (TXQ - 1)];
	*t = (struct ibp_send){ .qp = (struct ibp_qp *)(void *)&dummy_qp,
				.ah = nb->ah,
				.remote_qpn = nb->qpn,
				.remote_qkey = 0xb1b,
				.buf = b };
	fb_put(NULL, b); /* the send completes at once here */
	return true;
}

static uint32_t lookup_lpm4(void *t, uint32_t dst)
{
	return lpm4_lookup(t, dst);
}

#ifdef IBGW_HAVE_DPDK
static uint32_t lookup_rte(void *t, uint32_t dst)
{
	uint32_t nh;

	return rte_lpm_lookup(t, dst, &nh) == 0 ? nh : 0;
}
#endif

/* ---- ours, per packet as the worker runs it ---- */

/* A frame queued as the worker's queue_tx does. */
static inline void ours_queue(struct lane *l, const struct fwd_tx *t)
{
	if (t->ifp->kind == FWD_IF_ETH) {
		l->etxq[l->ntx++ & (TXQ - 1)] = t->eth;
	} else {
		l->itxq[l->ntx++ & (TXQ - 1)] = t->ib;
		fb_put(NULL, t->ib.buf); /* the send completes at once */
	}
}

static inline void ours_take(struct lane *l)
{
	for (unsigned i = 0; i < l->res.n_tx; i++)
		ours_queue(l, &l->res.tx[i]);
	if (l->res.v == FWD_V_DROP && l->res.drop < FWD_DROP_COUNT)
		l->c.st->drops[l->res.drop]++;
	fwd_ctx_scratch_reset(&l->c);
}

/* One receive burst as the worker runs it: classify, the burst's common case stage by
 * stage (fwd_fast_burst), the rest each through fwd_input_*; with !staged every packet
 * through fwd_input_* alone (the design before the stages, measured for comparison).
 * Returns how many were sent. */
static unsigned ours_burst(struct lane *l, bool from_ib, uint8_t *const *bufs, size_t len,
			   unsigned n, bool staged)
{
	const struct ours *o = l->o;
	const struct fwd_if *in = from_ib ? o->ib : o->eth;
	struct ipoib_rx rx[BURST];
	uint8_t *ip[BURST];
	size_t iplen[BURST];
	struct fwd_tx tx[BURST];
	uint64_t done = 0;
	unsigned sent = 0;

	for (unsigned i = 0; i < n; i++) {
		if (from_ib) {
			ipoib_rx_classify(bufs[i], len, false, &rx[i]);
			ip[i] = fwd_ib_ip(&rx[i]);
			iplen[i] = rx[i].len;
		} else {
			ip[i] = fwd_eth_ip(bufs[i], len, ETHP_PKT_HOST, NULL, &iplen[i]);
		}
	}
	if (staged)
		done = fwd_fast_burst(&l->c, in, ip, iplen, n, 0, tx);
	for (unsigned i = 0; i < n; i++) {
		if (done >> i & 1) {
			ours_queue(l, &tx[i]);
			sent++;
			continue;
		}
		if (from_ib)
			fwd_input_ib(&l->c, in, &rx[i], NULL, &l->res);
		else
			fwd_input_eth(&l->c, in, bufs[i], len, ETHP_PKT_HOST, NULL, &l->res);
		ours_take(l);
		sent += l->res.v == FWD_V_TX;
	}
	return sent;
}

/* ---- packets ---- */

struct pktset {
	const char *name;
	unsigned n; /* packets: npkts (a worker's share: half) */
	bool from_ib;
	size_t iplen, stride, off; /* off: where the IP header starts in a slot */
	uint8_t *pristine, *work;
	uint32_t *dst;
};

/* The IPoIB header behind the GRH area, or an Ethernet header to our MAC. */
static void l2_header(uint8_t *s, bool from_ib, uint16_t type)
{
	uint8_t *t = from_ib ? s + GRH : s + 12;

	if (!from_ib) {
		memcpy(s, our_mac, 6);
		s[6] = 0x02, s[7] = 0x77, s[8] = 1, s[9] = 2, s[10] = 3, s[11] = 4;
	}
	t[0] = (uint8_t)(type >> 8), t[1] = (uint8_t)type;
}

/* A set's memory; returns where the IP header starts in a slot. */
static size_t pktset_alloc(struct pktset *ps, bool from_ib, size_t iplen)
{
	size_t hdr = from_ib ? GRH + 4 : 14;

	ps->n = npkts;
	ps->from_ib = from_ib;
	ps->iplen = iplen;
	ps->off = hdr;
	ps->stride = (hdr + iplen + 63) & ~(size_t)63;
	ps->pristine = xmalloc(npkts * ps->stride);
	ps->work = xmalloc(npkts * ps->stride);
	ps->dst = xmalloc(npkts * sizeof(uint32_t));
	return hdr;
}

static void pkt_build(struct pktset *ps, const struct pfx4 *p, size_t n, bool from_ib, size_t iplen)
{
	size_t hdr = pktset_alloc(ps, from_ib, iplen);

	for (unsigned i = 0; i < npkts; i++) {
		uint8_t *s = ps->pristine + i * ps->stride, *ip = s + hdr;
		uint32_t src =
		    htonl(gw_addr(from_ib ? 1 : 0, (uint32_t)bench_rnd(&rng_state) % NGW) + NGW);
		uint32_t dst;
		uint16_t c;

		/* A prefix routed to the other side (IB -> Ethernet needs an even index), an
		 * address in it that a router forwards (geoip's prefixes cover some
		 * link-local ones, which the engine rightly drops and the minimal loop does
		 * not look at). */
		do {
			size_t k = (bench_rnd(&rng_state) % (n / 2)) * 2 + (from_ib ? 0 : 1);
			uint32_t host =
			    p[k].len == 32 ? 0 : (uint32_t)bench_rnd(&rng_state) >> p[k].len;

			dst = htonl(p[k].addr | host);
		} while (ip4_check_addrs(&ip4_martian_default, ntohl(src), ntohl(dst)) != IP_OK);

		ps->dst[i] = ntohl(dst);
		l2_header(s, from_ib, 0x0800);
		ip[0] = 0x45;
		ip[2] = (uint8_t)(iplen >> 8), ip[3] = (uint8_t)iplen;
		ip[8] = 255;
		ip[9] = 17;
		memcpy(ip + 12, &src, 4);
		memcpy(ip + 16, &dst, 4);
		c = csum(ip, 20);
		ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
		ip[20] = 0x30, ip[21] = 0x39, ip[22] = 0x00, ip[23] = 0x35;
		ip[24] = (uint8_t)((iplen - 20) >> 8), ip[25] = (uint8_t)(iplen - 20);
		for (size_t b = 28; b < iplen; b++)
			ip[b] = (uint8_t)b;
	}
}

/* IPv6/UDP packets to random addresses inside random prefixes of the other side. */
static void pkt_build6(struct pktset *ps, const struct pfx6 *p, size_t n, bool from_ib,
		       size_t iplen)
{
	size_t hdr = pktset_alloc(ps, from_ib, iplen);

	for (unsigned i = 0; i < npkts; i++) {
		uint8_t *s = ps->pristine + i * ps->stride, *ip = s + hdr;
		size_t k = (bench_rnd(&rng_state) % (n / 2)) * 2 + (from_ib ? 0 : 1);
		uint8_t dst[16];

		memset(s, 0, ps->stride);
		memcpy(dst, p[k].addr, 16);
		for (unsigned b = p[k].len; b < 128; b++) /* random host bits */
			if (bench_rnd(&rng_state) & 1)
				dst[b / 8] |= (uint8_t)(0x80 >> (b % 8));
		ps->dst[i] = (uint32_t)dst[12] << 24 | (uint32_t)dst[13] << 16 |
			     (uint32_t)dst[14] << 8 | dst[15];
		l2_header(s, from_ib, 0x86dd);
		ip[0] = 0x60;
		ip[4] = (uint8_t)((iplen - 40) >> 8), ip[5] = (uint8_t)(iplen - 40);
		ip[6] = 17;
		ip[7] = 255;
		gw6_addr(from_ib ? 1 : 0, (uint32_t)bench_rnd(&rng_state) % NGW6 + NGW6, ip + 8);
		memcpy(ip + 24, dst, 16);
		ip[40] = 0x30, ip[41] = 0x39, ip[42] = 0x00, ip[43] = 0x35;
		ip[44] = (uint8_t)((iplen - 40) >> 8), ip[45] = (uint8_t)(iplen - 40);
		for (size_t b = 48; b < iplen; b++)
			ip[b] = (uint8_t)b;
	}
}

static void pkt_restore(struct pktset *ps)
{
	memcpy(ps->work, ps->pristine, ps->n * ps->stride);
}

/* Worker w's share of ps, dealt by flow: packets w, w + LANES, ... */
static void pkt_share(const struct pktset *ps, unsigned w, struct pktset *out)
{
	*out = *ps;
	out->n = 0;
	out->pristine = xmalloc(ps->n / LANES * ps->stride + ps->stride);
	out->work = xmalloc(ps->n / LANES * ps->stride + ps->stride);
	for (unsigned i = w; i < ps->n; i += LANES)
		memcpy(out->pristine + out->n++ * ps->stride, ps->pristine + i * ps->stride,
		       ps->stride);
}

/* One timed run: PASSES passes over the set. Returns seconds; *ok the packets sent. */
static __attribute__((noinline)) double run_ours(struct lane *l, struct pktset *ps, bool staged,
						 unsigned *ok)
{
	size_t len = ps->off + ps->iplen;
	unsigned sent = 0;
	double t0 = bench_now();

	for (int pass = 0; pass < PASSES; pass++) {
		for (unsigned i = 0; i < ps->n; i += BURST) {
			uint8_t *bufs[BURST];
			unsigned n = ps->n - i < BURST ? ps->n - i : BURST;
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts); /* the worker's loop turn */
			fwd_ctx_begin(&l->c,
				      (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
			for (unsigned k = 0; k < n; k++)
				bufs[k] = ps->work + (i + k) * ps->stride;
			sent += ours_burst(l, ps->from_ib, bufs, len, n, staged);
		}
	}
	*ok = sent;
	return bench_now() - t0;
}

static __attribute__((noinline)) double run_ref(struct ref *r, struct pktset *ps, unsigned *ok)
{
	size_t len = ps->off + ps->iplen;
	unsigned sent = 0;
	double t0 = bench_now();

	for (int pass = 0; pass < PASSES; pass++) {
		for (unsigned i = 0; i < npkts; i++) {
			uint8_t *s = ps->work + i * ps->stride;

			sent += ps->from_ib ? ref_ib(r, s, len) : ref_eth(r, s, len);
		}
	}
	*ok = sent;
	return bench_now() - t0;
}

/* Every implementation picks the same next hop for every packet (one pass each). */
static void cross_check(struct ours *o, struct ref *refs, int nref, struct pktset *ps)
{
	size_t len = ps->off + ps->iplen;

	pkt_restore(ps);
	for (unsigned i = 0; i < npkts; i++) {
		uint8_t *s = ps->work + i * ps->stride;
		uint8_t want[6];
		uint32_t wqpn = 0;
		bool ok = ours_burst(&o->l[0], ps->from_ib, &s, len, 1, true) == 1;

		if (!ok) {
			fprintf(
			    stderr,
			    "MISMATCH %s packet %u (dst %08x): ours did not forward (drop %s)\n",
			    ps->name, i, ps->dst[i], fwd_drop_name(o->l[0].res.drop));
			exit(1);
		}
		/* the descriptor it queued last (by the stages or fwd_input_*) */
		if (ps->from_ib)
			memcpy(want, o->l[0].etxq[(o->l[0].ntx - 1) & (TXQ - 1)].hdr, 6);
		else
			wqpn = o->l[0].itxq[(o->l[0].ntx - 1) & (TXQ - 1)].remote_qpn;
		for (int k = 0; k < nref; k++) {
			struct ref *r = &refs[k];
			unsigned slot = r->n & (TXQ - 1);

			memcpy(s, ps->pristine + i * ps->stride, len); /* TTL back */
			if (!(ps->from_ib ? ref_ib(r, s, len) : ref_eth(r, s, len)) ||
			    (ps->from_ib ? memcmp(r->etx[slot].hdr, want, 6) != 0
					 : r->itx[slot].remote_qpn != wqpn)) {
				fprintf(stderr, "MISMATCH %s packet %u (dst %08x): %s differs\n",
					ps->name, i, ps->dst[i], r->name);
				exit(1);
			}
		}
	}
}

/* ---- two workers at once ---- */

struct worker_run {
	struct lane *l;
	struct pktset *ps;
	unsigned cpu;
	pthread_barrier_t *go;
	double secs;
	double cpu_share; /* the thread's CPU time over its wall time (1: nobody else ran) */
	unsigned ok;
};

static double thread_cpu_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker_main(void *arg)
{
	struct worker_run *w = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
	if (!fbp) {
		fbp = xmalloc(sizeof(*fbp));
		fbp->n = 0;
		fb_init(fbp);
	}
	pthread_barrier_wait(w->go);
	double c0 = thread_cpu_secs(), t0 = bench_now();

	w->secs = run_ours(w->l, w->ps, true, &w->ok);
	w->cpu_share = (thread_cpu_secs() - c0) / (bench_now() - t0);
	return NULL;
}

/* The workers on their shares at once: wall seconds from the start until the last ends;
 * *cpu the smallest share of its wall time a worker ran (below 1: something else ran on
 * its CPU, and the two workers did not have two CPUs). */
static double run_lanes(struct ours *o, struct pktset *share, unsigned *ok, double *cpu)
{
	pthread_barrier_t go;
	pthread_t th[LANES];
	struct worker_run w[LANES];
	double t0, t1 = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	pthread_barrier_init(&go, NULL, LANES + 1);
	for (unsigned k = 0; k < LANES; k++) {
		pkt_restore(&share[k]);
		w[k] = (struct worker_run){ .l = &o->l[k],
					    .ps = &share[k],
					    .cpu = ncpu > 0 ? k % (unsigned)ncpu : 0,
					    .go = &go };
		if (pthread_create(&th[k], NULL, worker_main, &w[k]) != 0)
			die("pthread_create", EAGAIN);
	}
	pthread_barrier_wait(&go);
	t0 = bench_now();
	*ok = 0;
	*cpu = 1;
	for (unsigned k = 0; k < LANES; k++) {
		pthread_join(th[k], NULL);
		*ok += w[k].ok;
		if (w[k].cpu_share < *cpu)
			*cpu = w[k].cpu_share;
	}
	t1 = bench_now();
	pthread_barrier_destroy(&go);
	return t1 - t0;
}

static void two_workers(struct ours *o, struct pktset *sets, int nsets)
{
	printf("  two workers at once, each on its share of the flows (wall time), against one "
	       "worker on all\n  (CPU got: the least share of its wall time a worker ran, median; "
	       "below 1 another process had its CPU):\n");
	printf("  %-22s %12s %12s %9s %9s\n", "Mpackets/s", "one worker", "two workers", "ratio",
	       "CPU got");
	for (int s = 0; s < nsets; s += 2) { /* the 64-octet sets */
		struct pktset *ps = &sets[s], share[LANES];
		double t1[64], t2[64], cpu[64], m1, m2;
		unsigned want = PASSES * ps->n, ok;

		if (!set_chosen(ps->name))
			continue;
		for (unsigned k = 0; k < LANES; k++)
			pkt_share(ps, k, &share[k]);
		for (int r = 0; r < rounds; r++) {
			pkt_restore(ps);
			t1[r] = run_ours(&o->l[0], ps, true, &ok);
			if (ok != want)
				die("one worker: not all forwarded", EIO);
			t2[r] = run_lanes(o, share, &ok, &cpu[r]);
			if (ok != want)
				die("two workers: not all forwarded", EIO);
		}
		m1 = bench_median(t1, rounds);
		m2 = bench_median(t2, rounds);
		printf("  %-22s %12.2f %12.2f %8.2fx %9.2f\n", ps->name, want / m1 / 1e6,
		       want / m2 / 1e6, m1 / m2, bench_median(cpu, rounds));
		for (unsigned k = 0; k < LANES; k++) {
			free(share[k].pristine);
			free(share[k].work);
		}
	}
}

int main(int argc, char **argv)
{
	const char *g4 = "/usr/share/tor/geoip";
	const char *eal = "--no-huge --no-pci --no-shconf --no-telemetry -m 3072 -l 0 "
			  "--log-level=error";
	struct vec v = { .size = sizeof(struct pfx4) };
	struct ours o;
	struct ref refs[MAX_IMPL];
	int nref = 0;
	struct pktset sets[8] = {
		{ .name = "IPoIB->Ethernet   64" }, { .name = "IPoIB->Ethernet 1500" },
		{ .name = "Ethernet->IPoIB   64" }, { .name = "Ethernet->IPoIB 1500" },
		{ .name = "IPv6 IPoIB->Eth   64" }, { .name = "IPv6 IPoIB->Eth 1500" },
		{ .name = "IPv6 Eth->IPoIB   64" }, { .name = "IPv6 Eth->IPoIB 1500" },
	};
	const char *g6 = "/usr/share/tor/geoip6";
	struct vec v6 = { .size = sizeof(struct pfx6) };
	int nsets = 4;
	const struct pfx4 *p;
	uint32_t groups, *gw_of;
#ifdef IBGW_HAVE_DPDK
	bool have_dpdk = false;
#endif

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--packets") && i + 1 < argc)
			npkts = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--geoip") && i + 1 < argc)
			g4 = argv[++i];
		else if (!strcmp(argv[i], "--geoip6") && i + 1 < argc)
			g6 = argv[++i];
		else if (!strcmp(argv[i], "--eal") && i + 1 < argc)
			eal = argv[++i];
		else if (!strcmp(argv[i], "--ours-only"))
			ours_only = true;
		else if (!strcmp(argv[i], "--set") && i + 1 < argc)
			only_set = argv[++i];
		else {
			fprintf(stderr, "usage: fwd_bench [--rounds R] [--packets N] [--geoip F] "
					"[--geoip6 F] [--eal ARGS] [--ours-only] [--set TEXT]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || npkts < 64)
		return 2;
	if (!load_geoip(g4, false, &v)) {
		printf("fwd_bench: %s not readable: install tor-geoipdb (make bench-deps); "
		       "skipped\n",
		       g4);
		return 0;
	}
	p = v.p;
	groups = groups_needed(p, v.n);
	printf("fwd_bench: %zu IPv4 prefixes from %s, %u packets per set, %d passes per "
	       "round, %d rounds, medians\n",
	       v.n, g4, npkts, PASSES, rounds);
#ifdef IBGW_HAVE_DPDK
	{
		char *copy = strdup(eal), *args[32] = { "fwd_bench" }, *tok, *save = NULL;
		int n = 1;

		for (tok = strtok_r(copy, " ", &save); tok && n < 31;
		     tok = strtok_r(NULL, " ", &save))
			args[n++] = tok;
		have_dpdk = rte_eal_init(n, args) >= 0;
		printf("DPDK %s: EAL %s (%s)\n", rte_version(), have_dpdk ? "up" : "failed", eal);
	}
#else
	(void)eal;
	printf("DPDK was not compiled in (no libdpdk-dev at build time): the reference loop "
	       "runs on lpm4 only\n");
#endif
	fbp = xmalloc(sizeof(*fbp));
	fbp->n = 0;
	fb_init(fbp);
	memset(&o, 0, sizeof(o));
	ours_build(&o, p, v.n, groups);
	/* IPv6: ours staged and per packet only (the references are IPv4 loops). */
	if (load_geoip(g6, true, &v6) && v6.n >= 2) {
		ours_build6(&o, v6.p, v6.n);
		nsets = 8;
	} else {
		printf("  %s not readable: IPv6 skipped\n", g6);
	}

	/* The reference's tables: next hop value = prefix's gateway slot + 1. */
	gw_of = xmalloc(2 * NGW * sizeof(uint32_t));
	for (uint32_t g = 0; g < NGW; g++)
		for (int s = 0; s < 2; s++)
			gw_of[2 * g + (uint32_t)s] = gw_addr(s, g);
#define NH_OF(i) (2 * ((uint32_t)((i) / 2) % NGW) + (uint32_t)((i)&1) + 1)
	if (!ours_only) {
		struct lpm4_config cfg = { .max_groups = groups + groups / 4 };
		struct lpm4 *t;
		int ret;

		if ((ret = lpm4_create(&t, &cfg)) < 0)
			die("lpm4_create", ret);
		for (size_t i = 0; i < v.n; i++)
			if ((ret = lpm4_add(t, p[i].addr, p[i].len, NH_OF(i))) < 0)
				die("lpm4_add", ret);
		refs[nref++] = (struct ref){
			.name = "minimal + lpm4", .lookup = lookup_lpm4, .t = t, .gw_of = gw_of
		};
	}
#ifdef IBGW_HAVE_DPDK
	if (have_dpdk && !ours_only) {
		struct rte_lpm_config lc = { .max_rules = (uint32_t)v.n + 1024,
					     .number_tbl8s = groups + groups / 4 };
		struct rte_lpm *l = rte_lpm_create("fwd_bench", 0, &lc);
		double t0 = bench_now();

		if (!l)
			die("rte_lpm_create", ENOMEM);
		for (size_t i = 0; i < v.n; i++)
			if (rte_lpm_add(l, p[i].addr, p[i].len, NH_OF(i)) < 0)
				die("rte_lpm_add", EINVAL);
		printf("  rte_lpm: built in %.1f s\n", bench_now() - t0);
		refs[nref++] = (struct ref){
			.name = "minimal + rte_lpm", .lookup = lookup_rte, .t = l, .gw_of = gw_of
		};
	}
#endif
	for (int k = 0; k < nref; k++)
		ref_neigh_init(&refs[k]);
	for (int s = 0; s < 4; s++) {
		pkt_build(&sets[s], p, v.n, s < 2, (s & 1) ? 1500 : 64);
		cross_check(&o, refs, nref, &sets[s]);
	}
	for (int s = 4; s < nsets; s++)
		pkt_build6(&sets[s], v6.p, v6.n, s < 6, (s & 1) ? 1500 : 64);
	printf("  cross-check: every implementation chose the same next hop for all %u packets "
	       "of each set\n",
	       4 * npkts);

	printf("  %-22s %-20s %9s %9s\n", "Mpackets/s per core", "implementation", "median",
	       "ours/ref");
	for (int s = 0; s < nsets; s++) {
		struct pktset *ps = &sets[s];
		double t[MAX_IMPL + 2][64], med[MAX_IMPL + 2];
		unsigned want = PASSES * npkts;
		/* ours, ours per packet, the references (IPv4 only) */
		int nimpl = ours_only ? 1 : s < 4 ? nref + 2 : 2;

		if (!set_chosen(ps->name))
			continue;
		for (int r = 0; r < rounds; r++) {
			for (int j = 0; j < nimpl; j++) {
				int k = (j + r) % nimpl; /* rotating order */
				unsigned ok;

				pkt_restore(ps);
				t[k][r] = k < 2 ? run_ours(&o.l[0], ps, k == 0, &ok)
						: run_ref(&refs[k - 2], ps, &ok);
				if (ok != want) {
					fprintf(stderr, "fwd_bench: %s: %u of %u forwarded\n",
						ps->name, ok, want);
					return 1;
				}
			}
		}
		for (int k = 0; k < nimpl; k++)
			med[k] = bench_median(t[k], rounds);
		for (int k = 0; k < nimpl; k++)
			printf("  %-22s %-20s %9.2f %8.2fx\n", k ? "" : ps->name,
			       k == 0   ? "ibgw pipeline"
			       : k == 1 ? "ibgw, per packet"
					: refs[k - 2].name,
			       want / med[k] / 1e6, med[k] / med[0]);
	}
	printf("  (ours/ref: the reference's median time over ours; below 1, the minimal loop "
	       "is faster)\n");
	if (!ours_only)
		two_workers(&o, sets, nsets);
	return 0;
}
