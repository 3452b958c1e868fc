/*
 * The engine's shared state: snapshots of the interface table and knobs (copied, edited
 * and published by the control thread, freed after a grace period), the per-worker
 * rings and message pools, and the counters. See engine/engine.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/engine_pvt.h"
#include "engine/ring.h"
#include "lib/log.h"
#include "pkt/ip.h"

static const char *const drop_names[FWD_DROP_COUNT] = {
	[FWD_DROP_ETH_FRAME] = "eth_frame",
	[FWD_DROP_ETHERTYPE] = "ethertype",
	[FWD_DROP_NOT_FOR_US] = "not_for_us",
	[FWD_DROP_IB_RX] = "ib_rx",
	[FWD_DROP_IF_DOWN] = "if_down",
	[FWD_DROP_IP_INVALID] = "ip_invalid",
	[FWD_DROP_MARTIAN] = "martian",
	[FWD_DROP_L2_BCAST] = "l2_broadcast",
	[FWD_DROP_NO_ROUTE] = "no_route",
	[FWD_DROP_BLACKHOLE] = "blackhole",
	[FWD_DROP_TTL_EXPIRED] = "ttl_expired",
	[FWD_DROP_TOO_BIG] = "too_big",
	[FWD_DROP_FRAG_FAILED] = "frag_failed",
	[FWD_DROP_SAME_IF_ICMP] = "icmp_no_route_back",
	[FWD_DROP_NO_BUF] = "no_buffer",
	[FWD_DROP_PUNT_FULL] = "punt_full",
	[FWD_DROP_PUNT_TOO_BIG] = "punt_too_big",
	[FWD_DROP_TX_FULL] = "tx_full",
	[FWD_DROP_TX_ERROR] = "tx_error",
	[FWD_DROP_IPV6_ROUTED_LL] = "ipv6_link_local_routed",
	[FWD_DROP_LOOP] = "loop",
	[FWD_DROP_MULTICAST] = "multicast",
	[FWD_DROP_GSO] = "gso",
	[FWD_DROP_PUNT_LIMITED] = "punt_rate_limited",
};

const char *fwd_drop_name(enum fwd_drop d)
{
	return (unsigned)d < FWD_DROP_COUNT && drop_names[d] ? drop_names[d] : "unknown";
}

static const char *const punt_names[FWD_PUNT_COUNT] = {
	[FWD_PUNT_ARP] = "arp",     [FWD_PUNT_ND] = "nd",
	[FWD_PUNT_LOCAL] = "local", [FWD_PUNT_UNRESOLVED] = "unresolved",
	[FWD_PUNT_MCAST] = "mcast",
};

const char *fwd_punt_name(enum fwd_punt p)
{
	return (unsigned)p < FWD_PUNT_COUNT ? punt_names[p] : "unknown";
}

static const char *const pclass_names[FWD_PCLASS_COUNT] = {
	[FWD_PCLASS_CONTROL] = "control",  [FWD_PCLASS_NEIGH] = "neighbour",
	[FWD_PCLASS_UNRES] = "unresolved", [FWD_PCLASS_LOCAL] = "local",
	[FWD_PCLASS_MCAST] = "mcast",
};

const char *fwd_pclass_name(enum fwd_pclass c)
{
	return (unsigned)c < FWD_PCLASS_COUNT ? pclass_names[c] : "unknown";
}

void fwd_knobs_defaults(struct fwd_knobs *k)
{
	memset(k, 0, sizeof(*k));
	k->mss_clamp = true;
	k->icmp_errors = true;
	k->ip4_src_classes = ip4_martian_default.src_classes;
	k->ip4_dst_classes = ip4_martian_default.dst_classes;
	k->ip6_src_classes = ip6_martian_default.src_classes;
	k->ip6_dst_classes = ip6_martian_default.dst_classes;
}

/* ---- snapshots ---------------------------------------------------------------------- */

static void snap_fixup(struct fwd_snap *s)
{
	const struct fwd_knobs *k = &s->knobs;

	s->m4 = (struct ip4_martian_cfg){
		.src_classes = k->ip4_src_classes,
		.dst_classes = k->ip4_dst_classes,
		.extra_src = k->n_martian4_src ? s->knobs.martian4_src : NULL,
		.extra_dst = k->n_martian4_dst ? s->knobs.martian4_dst : NULL,
		.n_extra_src = k->n_martian4_src,
		.n_extra_dst = k->n_martian4_dst,
	};
	s->m6 = (struct ip6_martian_cfg){ .src_classes = k->ip6_src_classes,
					  .dst_classes = k->ip6_dst_classes };
}

/* A private copy of the current snapshot to edit. */
static struct fwd_snap *snap_edit(struct fwd_engine *e)
{
	struct fwd_snap *n = malloc(sizeof(*n));

	if (!n)
		return NULL;
	memcpy(n, atomic_load_explicit(&e->snap, memory_order_relaxed), sizeof(*n));
	return n;
}

static void snap_publish(struct fwd_engine *e, struct fwd_snap *n)
{
	struct fwd_snap *old = atomic_load_explicit(&e->snap, memory_order_relaxed);

	n->gen = old->gen + 1;
	n->eth_queues = e->eth_queues ? e->eth_queues : 1;
	snap_fixup(n);
	atomic_store_explicit(&e->snap, n, memory_order_release);
	if (e->cfg.defer)
		e->cfg.defer(e->cfg.defer_ctx, free, old);
	else
		free(old);
}

const struct fwd_snap *fwd_engine_snap(const struct fwd_engine *e)
{
	return atomic_load_explicit(&((struct fwd_engine *)e)->snap, memory_order_acquire);
}

const struct fwd_snap *fwd_engine_current(const struct fwd_engine *e)
{
	return fwd_engine_snap(e);
}

uint32_t fwd_engine_flow_seed(const struct fwd_engine *e)
{
	return e->seed;
}

unsigned fwd_engine_n_workers(const struct fwd_engine *e)
{
	return e->n_workers;
}

/* ---- message pools ------------------------------------------------------------------ */

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 2;

	while (p < n)
		p <<= 1;
	return p;
}

/* The shares of a pool of `pool` messages (>= 16: every reserve at least 1, their sum
 * 3/4 of the pool). Worker side: the punts (engine/engine.h, fwd_msg_get); control
 * side: P/8 kept for CONTROL (heartbeats, the cm's MADs), the rest anyone's. */
static void pool_init(struct fwd_pool *p, struct fwd_msg *mem, unsigned pool, bool worker)
{
	static const unsigned wres[FWD_PCLASS_COUNT] = { 4, 4, 8, 16, 16 }; /* pool / x */
	static const unsigned wcap[FWD_PCLASS_COUNT] = { 2, 2, 4, 8, 4 };

	p->n = 0;
	p->unused_reserve = 0;
	for (unsigned c = 0; c < FWD_PCLASS_COUNT; c++) {
		p->in_use[c] = 0;
		if (worker) {
			p->reserve[c] = pool / wres[c];
			p->cap[c] = pool / wcap[c];
		} else {
			p->reserve[c] = c == FWD_PCLASS_CONTROL ? pool / 8 : 0;
			p->cap[c] = pool;
		}
		p->unused_reserve += p->reserve[c];
	}
	for (unsigned i = 0; i < pool; i++)
		p->free[p->n++] = &mem[i];
}

static int wk_init(struct fwd_engine *e, unsigned w, unsigned pool)
{
	struct fwd_wk *k = &e->wk[w];
	uint32_t rsz = pow2_at_least(2 * pool);

	/* The heartbeat rings hold what can be in them at once: the worker's CONTROL share
	 * (punts one way, their returns the other) and the heartbeat pool. */
	uint32_t hsz = pow2_at_least(pool / 2 + FWD_HB_POOL);

	k->to_ctl = ring_new(rsz);
	k->to_wk = ring_new(rsz);
	k->hb_rx = ring_new(hsz);
	k->hb_tx = ring_new(hsz);
	k->wmem = calloc(pool, sizeof(*k->wmem));
	k->cmem = calloc(pool, sizeof(*k->cmem));
	k->hmem = calloc(FWD_HB_POOL, sizeof(*k->hmem));
	k->wp.free = calloc(pool, sizeof(*k->wp.free));
	k->cp.free = calloc(pool, sizeof(*k->cp.free));
	k->hp.free = calloc(FWD_HB_POOL, sizeof(*k->hp.free));
	if (posix_memalign((void **)&k->st, 64, sizeof(*k->st)))
		k->st = NULL;
	if (!k->to_ctl || !k->to_wk || !k->hb_rx || !k->hb_tx || !k->wmem || !k->cmem || !k->hmem ||
	    !k->wp.free || !k->cp.free || !k->hp.free || !k->st)
		return -ENOMEM;
	memset(k->st, 0, sizeof(*k->st));
	for (unsigned i = 0; i < pool; i++) {
		k->wmem[i].owner = FWD_OWNER_WORKER;
		k->wmem[i].worker = (uint16_t)w;
		k->cmem[i].owner = FWD_OWNER_CONTROL;
		k->cmem[i].worker = (uint16_t)w;
	}
	for (unsigned i = 0; i < FWD_HB_POOL; i++) {
		k->hmem[i].owner = FWD_OWNER_HB;
		k->hmem[i].worker = (uint16_t)w;
	}
	pool_init(&k->wp, k->wmem, pool, true);
	pool_init(&k->cp, k->cmem, pool, false);
	pool_init(&k->hp, k->hmem, FWD_HB_POOL, false);
	k->parked = 0;
	return 0;
}

static void wk_fini(struct fwd_wk *k)
{
	if (k->to_ctl)
		ring_free(k->to_ctl);
	if (k->to_wk)
		ring_free(k->to_wk);
	if (k->hb_rx)
		ring_free(k->hb_rx);
	if (k->hb_tx)
		ring_free(k->hb_tx);
	free(k->wmem);
	free(k->cmem);
	free(k->hmem);
	free(k->wp.free);
	free(k->cp.free);
	free(k->hp.free);
	free(k->st);
}

static struct fwd_pool *pool_of(struct fwd_wk *k, enum fwd_msg_owner side)
{
	return side == FWD_OWNER_WORKER ? &k->wp : side == FWD_OWNER_CONTROL ? &k->cp : &k->hp;
}

struct fwd_msg *fwd_msg_get(struct fwd_engine *e, unsigned w, enum fwd_msg_owner side,
			    enum fwd_pclass c)
{
	struct fwd_pool *p = pool_of(&e->wk[w], side);
	struct fwd_msg *m;

	if ((unsigned)c >= FWD_PCLASS_COUNT || !p->n || p->in_use[c] >= p->cap[c])
		return NULL;
	if (p->in_use[c] < p->reserve[c])
		p->unused_reserve--; /* from its own reserve */
	else if (p->n <= p->unused_reserve)
		return NULL; /* what is left is the other classes' reserves */
	p->in_use[c]++;
	m = p->free[--p->n];
	m->cls = (uint8_t)c;
	return m;
}

unsigned fwd_msg_pool_free(const struct fwd_engine *e, unsigned w, enum fwd_msg_owner side)
{
	return pool_of((struct fwd_wk *)&e->wk[w], side)->n;
}

void fwd_msg_recycle(struct fwd_engine *e, struct fwd_msg *m)
{
	struct fwd_pool *p = pool_of(&e->wk[m->worker], m->owner);

	if (p->in_use[m->cls]-- <= p->reserve[m->cls])
		p->unused_reserve++;
	p->free[p->n++] = m;
}

void fwd_msg_put(struct fwd_engine *e, struct fwd_msg *m, enum fwd_msg_owner caller)
{
	struct fwd_wk *k = &e->wk[m->worker];
	void *p = m;

	/* A retired slot's pools are the control thread's alone (engine/engine.h). */
	if (m->owner == caller || (caller == FWD_OWNER_CONTROL && k->retired)) {
		fwd_msg_recycle(e, m);
		return;
	}
	/* Back to its owner. The ring holds both pools: it cannot be full. */
	if (caller == FWD_OWNER_WORKER) {
		(void)ring_enqueue_burst(k->to_ctl, &p, 1);
		ring_wake_if_sleeping(k->to_ctl);
	} else {
		(void)ring_enqueue_burst(k->to_wk, &p, 1);
		ring_wake_if_sleeping(k->to_wk);
	}
}

/* ---- punt classes and limits ---------------------------------------------------------- */

void fwd_punt_defaults(struct fwd_punt_config *c, unsigned pool)
{
	memset(c, 0, sizeof(*c));
	c->per_src[FWD_PCLASS_NEIGH] = (struct fwd_punt_limit){ 100, 200 };
	c->total[FWD_PCLASS_NEIGH] = (struct fwd_punt_limit){ 5000, 2000 };
	c->per_src[FWD_PCLASS_UNRES] = (struct fwd_punt_limit){ 100, 200 };
	c->total[FWD_PCLASS_UNRES] = (struct fwd_punt_limit){ 1000, 1000 };
	c->per_src[FWD_PCLASS_LOCAL] = (struct fwd_punt_limit){ 100, 200 };
	c->total[FWD_PCLASS_LOCAL] = (struct fwd_punt_limit){ 1000, 500 };
	/* A multicast stream is one source at stream rates (a video: thousands of packets a
	 * second); the control thread forwards some 50,000 a second (bench/mcast.sh). */
	c->per_src[FWD_PCLASS_MCAST] = (struct fwd_punt_limit){ 5000, 1000 };
	c->total[FWD_PCLASS_MCAST] = (struct fwd_punt_limit){ 20000, 2000 };
	c->park_max = pool / 8 ? pool / 8 : 1;
}

void fwd_punt_rl_init(struct fwd_punt_rl *rl, const struct fwd_punt_config *c)
{
	memset(rl, 0, sizeof(*rl));
	rl->cfg = c;
}

/* GCRA (a token bucket as one time): a packet may go when the bucket's theoretical
 * arrival time is at most (burst - 1) intervals ahead; it moves it one interval on. */
static bool gcra_ok(uint64_t tat, const struct fwd_punt_limit *l, uint64_t now)
{
	if (!l->rate || tat <= now)
		return true;
	return tat - now <= (uint64_t)(l->burst ? l->burst - 1 : 0) * (1000000000u / l->rate);
}

static uint64_t gcra_next(uint64_t tat, const struct fwd_punt_limit *l, uint64_t now)
{
	return (tat > now ? tat : now) + (l->rate ? 1000000000u / l->rate : 0);
}

bool fwd_punt_rl_allow(struct fwd_punt_rl *rl, enum fwd_pclass c, uint32_t key, uint64_t now_ns)
{
	const struct fwd_punt_limit *ls, *lt;
	unsigned i1 = key % FWD_PRL_SLOTS, i2 = (key >> 8) % FWD_PRL_SLOTS, i;

	if ((unsigned)c >= FWD_PCLASS_COUNT)
		return true;
	ls = &rl->cfg->per_src[c];
	lt = &rl->cfg->total[c];
	if (!ls->rate && !lt->rate)
		return true;
	if (i2 == i1)
		i2 ^= 1;
	/* The source's slot; else an idle one (its bucket full again) becomes its own;
	 * else it is charged to the fuller of its two (shared until one idles). */
	if (rl->slot[c][i1].tag == key)
		i = i1;
	else if (rl->slot[c][i2].tag == key)
		i = i2;
	else if (rl->slot[c][i1].tat <= now_ns || rl->slot[c][i2].tat <= now_ns) {
		i = rl->slot[c][i1].tat <= now_ns ? i1 : i2;
		rl->slot[c][i].tag = key;
		rl->slot[c][i].tat = now_ns;
	} else {
		i = rl->slot[c][i1].tat <= rl->slot[c][i2].tat ? i1 : i2;
	}
	if (!gcra_ok(rl->slot[c][i].tat, ls, now_ns) || !gcra_ok(rl->total_tat[c], lt, now_ns))
		return false;
	if (ls->rate)
		rl->slot[c][i].tat = gcra_next(rl->slot[c][i].tat, ls, now_ns);
	if (lt->rate)
		rl->total_tat[c] = gcra_next(rl->total_tat[c], lt, now_ns);
	return true;
}

/* FNV-1a over the source, seeded, then mixed (murmur3's finaliser); never 0. */
static uint32_t src_hash(uint32_t seed, uint32_t kind, const uint8_t *a, size_t n)
{
	uint32_t h = 2166136261u ^ seed ^ kind;

	for (size_t i = 0; i < n; i++)
		h = (h ^ a[i]) * 16777619u;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h ? h : 1;
}

/* Whether the IP packet p is UDP to the bound control or heartbeat port or an echo with
 * the bound identifier (no extension headers, first fragment: what the slow path takes):
 * the reply the tiebreaker receives, or (sent) the request it sends. */
static bool ip_is_control(const struct fwd_engine *e, const uint8_t *p, size_t len, bool sent)
{
	uint32_t port =
	    atomic_load_explicit(&((struct fwd_engine *)e)->ctl_udp_port, memory_order_relaxed);
	uint32_t hb =
	    atomic_load_explicit(&((struct fwd_engine *)e)->hb_port, memory_order_relaxed);
	uint32_t echo =
	    atomic_load_explicit(&((struct fwd_engine *)e)->ctl_echo_id, memory_order_relaxed);
	size_t l4;
	uint8_t proto;

	if (len >= IP4_HDR_LEN && (p[0] >> 4) == 4) {
		l4 = (size_t)(p[0] & 15u) * 4;
		proto = p[9];
		if ((ip_be16(p + 6) & 0x3fff) != 0) /* a fragment */
			return false;
	} else if (len >= IP6_HDR_LEN && (p[0] >> 4) == 6) {
		l4 = IP6_HDR_LEN;
		proto = p[6];
	} else {
		return false;
	}
	if (len < l4 + 8)
		return false;
	if (proto == 17)
		return (port && ip_be16(p + l4 + 2) == port) || (hb && ip_be16(p + l4 + 2) == hb);
	if (proto == ((p[0] >> 4) == 4 ? 1 : 58))
		return echo && p[l4] == ((p[0] >> 4) == 4 ? (sent ? 8 : 0) : (sent ? 128 : 129)) &&
		       ip_be16(p + l4 + 4) == (echo & 0xffff);
	return false;
}

enum fwd_pclass fwd_punt_classify(const struct fwd_engine *e, enum fwd_punt p, bool ib,
				  const uint8_t *data, size_t len, uint32_t ib_src, uint32_t *key)
{
	uint8_t b[4];

	switch (p) {
	case FWD_PUNT_ARP:
	case FWD_PUNT_ND:
		if (ib) {
			ip_put32(b, ib_src);
			*key = src_hash(e->seed, 1, b, 4);
		} else {
			*key = src_hash(e->seed, 2, data + 6, len >= 12 ? 6 : 0);
		}
		return FWD_PCLASS_NEIGH;
	case FWD_PUNT_LOCAL:
	case FWD_PUNT_UNRESOLVED:
	case FWD_PUNT_MCAST:
		if (len >= IP4_HDR_LEN && (data[0] >> 4) == 4)
			*key = src_hash(e->seed, 4, data + 12, 4);
		else if (len >= IP6_HDR_LEN && (data[0] >> 4) == 6)
			*key = src_hash(e->seed, 6, data + 8, 16);
		else
			*key = src_hash(e->seed, 0, data, 0);
		if (p == FWD_PUNT_UNRESOLVED)
			return FWD_PCLASS_UNRES;
		if (p == FWD_PUNT_MCAST)
			return FWD_PCLASS_MCAST;
		return ip_is_control(e, data, len, false) ? FWD_PCLASS_CONTROL : FWD_PCLASS_LOCAL;
	default:
		*key = 1;
		return FWD_PCLASS_LOCAL;
	}
}

struct ring *fwd_engine_ring_to_ctl(struct fwd_engine *e, unsigned w)
{
	return e->wk[w].to_ctl;
}

struct ring *fwd_engine_ring_to_worker(struct fwd_engine *e, unsigned w)
{
	return e->wk[w].to_wk;
}

struct ring *fwd_engine_ring_hb(struct fwd_engine *e, unsigned w, bool to_worker)
{
	return to_worker ? e->wk[w].hb_tx : e->wk[w].hb_rx;
}

struct fwd_stats *fwd_engine_worker_stats(struct fwd_engine *e, unsigned w)
{
	return e->wk[w].st;
}

void fwd_engine_stats(const struct fwd_engine *e, int worker, struct fwd_stats *out)
{
	const unsigned nw = sizeof(*out) / sizeof(uint64_t);
	uint64_t *o = (uint64_t *)out;

	_Static_assert(sizeof(struct fwd_stats) % sizeof(uint64_t) == 0, "counters only");
	memset(out, 0, sizeof(*out));
	for (unsigned w = 0; w < e->n_slots; w++) {
		const uint64_t *s = (const uint64_t *)e->wk[w].st;

		if (worker >= 0 && (unsigned)worker != w)
			continue;
		for (unsigned i = 0; i < nw; i++)
			o[i] += __atomic_load_n(&s[i], __ATOMIC_RELAXED);
	}
}

/* ---- engine ------------------------------------------------------------------------- */

int fwd_engine_new(const struct fwd_engine_config *cfg, struct fwd_engine **out)
{
	struct fwd_engine *e;
	struct fwd_snap *s;
	int ret;

	if (!cfg->rt || cfg->n_workers == 0 || cfg->n_workers > FWD_WORKERS_MAX)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	s = calloc(1, sizeof(*s));
	if (!e || !s) {
		free(e);
		free(s);
		return -ENOMEM;
	}
	e->cfg = *cfg;
	if (!e->cfg.msg_pool)
		e->cfg.msg_pool = 256;
	if (e->cfg.msg_pool < 16)
		e->cfg.msg_pool = 16; /* every class's reserve at least one message */
	if (!e->cfg.punt.park_max)
		fwd_punt_defaults(&e->cfg.punt, e->cfg.msg_pool);
	neigh_params_defaults(&e->cfg.eth_neigh);
	if (!e->cfg.icmp_rl.per_dst_rate) {
		e->cfg.icmp_rl = (struct icmp_rl_cfg){
			.per_dst_rate = 1000,
			.per_dst_burst = 50,
			.total_rate = 10000,
			.total_burst = 500,
			.v4_prefix_len = 24,
			.v6_prefix_len = 64,
			.exempt_pmtu = true,
		};
	}
	e->rt = cfg->rt;
	e->n_workers = cfg->n_workers;
	e->seed = cfg->flow_seed;
	if (!e->seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		e->seed = (uint32_t)(ts.tv_nsec ^ ts.tv_sec * 2654435761u) | 1;
	}
	fwd_knobs_defaults(&s->knobs);
	s->pollers = cfg->n_workers;
	snap_fixup(s);
	atomic_init(&e->snap, s);
	e->hb_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ret = e->hb_efd < 0 ? -errno : fwd_sp_new(e);
	if (ret == 0)
		ret = fwd_engine_slots_grow(e, e->n_workers);
	if (ret < 0)
		goto fail;
	*out = e;
	return 0;
fail:
	fwd_sp_free(e);
	for (unsigned w = 0; w < FWD_WORKERS_MAX; w++)
		wk_fini(&e->wk[w]);
	if (e->hb_efd >= 0)
		close(e->hb_efd);
	free(s);
	free(e);
	return ret;
}

void fwd_engine_free(struct fwd_engine *e)
{
	struct fwd_snap *s;

	if (!e)
		return;
	s = atomic_load_explicit(&e->snap, memory_order_relaxed);
	for (unsigned i = 1; i < FWD_IF_MAX; i++)
		if (e->own_neigh[i] && s->ifs[i].neigh)
			neigh_table_free(s->ifs[i].neigh); /* parked messages dropped */
	fwd_sp_free(e);
	for (unsigned w = 0; w < e->n_slots; w++)
		wk_fini(&e->wk[w]);
	close(e->hb_efd);
	free(s);
	free(e);
}

int fwd_engine_slots_grow(struct fwd_engine *e, unsigned n)
{
	while (e->n_slots < n) {
		unsigned w = e->n_slots;
		int ret = wk_init(e, w, e->cfg.msg_pool);

		if (ret == 0)
			ret = fwd_sp_slot_added(e, w);
		if (ret < 0) {
			wk_fini(&e->wk[w]);
			memset(&e->wk[w], 0, sizeof(e->wk[w]));
			return ret;
		}
		e->n_slots++;
		atomic_store_explicit(&e->hb_slots, e->n_slots, memory_order_release);
	}
	return 0;
}

int fwd_engine_assign(struct fwd_engine *e, const unsigned worker_of[FWD_IF_MAX], unsigned pollers,
		      void (*wait)(void *arg), void *arg)
{
	struct fwd_snap *moving = snap_edit(e), *n = malloc(sizeof(*n));

	if (!moving || !n) {
		free(moving);
		free(n);
		return -ENOMEM;
	}
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		struct fwd_if *f = &moving->ifs[k];

		if (f->index && (f->worker != worker_of[k] || moving->pollers != pollers))
			f->moving = true;
	}
	snap_publish(e, moving);
	wait(arg);
	memcpy(n, fwd_engine_snap(e), sizeof(*n));
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		if (n->ifs[k].index) {
			n->ifs[k].worker = worker_of[k];
			n->ifs[k].moving = false;
		}
	}
	n->pollers = pollers;
	snap_publish(e, n);
	return 0;
}

int fwd_engine_eth_queues(struct fwd_engine *e, unsigned n)
{
	const struct fwd_snap *s = fwd_engine_snap(e);
	unsigned old = e->eth_queues ? e->eth_queues : 1; /* a port opens with one */
	struct fwd_snap *pub;
	uint32_t k, j;
	int ret = 0;

	if (n <= e->eth_queues)
		return 0;
	/* Published with the new count: the running workers poll the new queues at once
	 * (queue q on worker q % pollers) until fwd_engine_assign gives them out. */
	pub = snap_edit(e);
	if (!pub)
		return -ENOMEM;
	for (k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *f = &s->ifs[k];

		if (!f->index || f->kind != FWD_IF_ETH)
			continue;
		ret = f->eth_ops->set_queues(f->eth, n);
		if (ret < 0)
			break;
	}
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: cannot run %u queues", s->ifs[k].name, n);
		for (j = 1; j < k; j++) /* back to what they had: closing the new cannot fail */
			if (s->ifs[j].index && s->ifs[j].kind == FWD_IF_ETH)
				(void)s->ifs[j].eth_ops->set_queues(s->ifs[j].eth, old);
		free(pub);
		return ret;
	}
	e->eth_queues = n;
	snap_publish(e, pub);
	return 0;
}

/* ---- interfaces --------------------------------------------------------------------- */

/* Whether an address of f other than addrs[i] (from addrs[from] on) lies in the same
 * subnet: deleting addrs[i] must then keep the subnet's connected route. */
static bool subnet_shared(const struct fwd_if *f, unsigned i, unsigned from)
{
	struct ip_prefix net = f->addrs[i];

	ip_prefix_mask(&net);
	for (unsigned j = from; j < f->n_addrs; j++)
		if (j != i && f->addrs[j].len == net.len &&
		    ip_prefix_contains(&net, &f->addrs[j].addr))
			return true;
	return false;
}

static struct fwd_if *edit_if(struct fwd_snap *n, uint32_t index)
{
	if (index == 0 || index >= FWD_IF_MAX || n->ifs[index].index == 0)
		return NULL;
	return &n->ifs[index];
}

/* The first index neither in use nor reserved (0: none). */
static uint32_t free_index(const struct fwd_engine *e)
{
	const struct fwd_snap *cur = fwd_engine_snap(e);

	for (uint32_t i = 1; i < FWD_IF_MAX; i++)
		if (cur->ifs[i].index == 0 && !e->reserved[i])
			return i;
	return 0;
}

int fwd_engine_if_reserve(struct fwd_engine *e, uint32_t *index)
{
	uint32_t i = free_index(e);

	if (!i)
		return -ENOSPC;
	e->reserved[i] = true;
	e->if_hook[i] = (struct fwd_ib_hook){ .e = e, .ifindex = i };
	*index = i;
	return 0;
}

int fwd_engine_if_add(struct fwd_engine *e, const struct fwd_if_config *c, uint32_t *index)
{
	struct fwd_snap *n;
	struct fwd_if *f;
	uint32_t i;

	if (c->worker >= e->n_workers || (c->kind != FWD_IF_ETH && c->kind != FWD_IF_IPOIB))
		return -EINVAL;
	if (c->kind == FWD_IF_ETH && (!c->eth_ops || !c->eth || !c->mac))
		return -EINVAL;
	if (c->kind == FWD_IF_IPOIB && (!c->ib_ops || !c->ib_port || !c->neigh))
		return -EINVAL;
	if (c->index && (c->index >= FWD_IF_MAX || !e->reserved[c->index]))
		return -EINVAL;
	i = c->index ? c->index : free_index(e);
	if (!i)
		return -ENOSPC;
	n = snap_edit(e);
	if (!n)
		return -ENOMEM;
	f = &n->ifs[i];
	memset(f, 0, sizeof(*f));
	f->index = i;
	f->gen = ++e->if_gen;
	f->kind = c->kind;
	f->ops = c->kind == FWD_IF_ETH ? &fwd_if_eth_ops : &fwd_if_ipoib_ops;
	snprintf(f->name, sizeof(f->name), "%s", c->name ? c->name : "");
	f->mtu = c->mtu;
	f->worker = c->worker;
	f->neigh = c->neigh;
	f->rt = c->rt ? c->rt : e->rt;
	f->fib = rt_fib(f->rt);
	f->proxy.defend_dad = true;
	if (c->kind == FWD_IF_ETH) {
		f->eth_ops = c->eth_ops;
		f->eth = c->eth;
		memcpy(f->mac, c->mac, ETHP_ADDR_LEN);
		f->vlan = c->vlan;
		f->tx_gso = c->tx_gso;
		if (!f->neigh) {
			struct neigh_config nc = {
				.params = e->cfg.eth_neigh,
				.ops = &fwd_sp_neigh_ops,
				.ops_ctx = &e->nctx[i],
				.defer = e->cfg.defer,
				.defer_ctx = e->cfg.defer_ctx,
				.now_ms = e->cfg.now_ms,
				.now_ctx = e->cfg.now_ctx,
				.seed = e->seed ^ i,
			};
			int ret;

			e->nctx[i] = (struct fwd_nctx){ .e = e, .ifindex = i };
			ret = neigh_table_new(&nc, &f->neigh);
			if (ret < 0) {
				free(n);
				return ret;
			}
			e->own_neigh[i] = true;
		}
	} else {
		f->ib_ops = c->ib_ops;
		f->ib_port = c->ib_port;
		f->link = c->link;
	}
	if (c->kind == FWD_IF_ETH && e->eth_queues) {
		/* A queue for each worker before any worker may poll it. */
		int ret = c->eth_ops->set_queues(c->eth, e->eth_queues);

		if (ret < 0) {
			if (e->own_neigh[i])
				neigh_table_free(f->neigh);
			e->own_neigh[i] = false;
			free(n);
			return ret;
		}
	}
	snap_publish(e, n);
	e->reserved[i] = false;
	e->if_hook[i] = (struct fwd_ib_hook){ .e = e, .ops = c->ib_ops, .ifindex = i };
	*index = i;
	return 0;
}

struct neigh_free_arg {
	struct neigh_table *t;
};

static void neigh_free_later(void *arg)
{
	neigh_table_free(arg);
}

int fwd_engine_if_del(struct fwd_engine *e, uint32_t index)
{
	struct fwd_snap *n;
	struct fwd_if *f;
	struct neigh_table *t;

	if (index && index < FWD_IF_MAX && e->reserved[index]) {
		e->reserved[index] = false; /* never added */
		return 0;
	}
	n = snap_edit(e);
	if (!n)
		return -ENOMEM;
	f = edit_if(n, index);
	if (!f) {
		free(n);
		return -ENOENT;
	}
	for (unsigned a = 0; a < f->n_addrs; a++)
		(void)rt_del_connected(f->rt, &f->addrs[a], index, subnet_shared(f, a, a + 1));
	t = e->own_neigh[index] ? f->neigh : NULL;
	memset(f, 0, sizeof(*f));
	/* A capture of it ends (its owner sees the interface gone and stops it): a later
	 * interface given this index is not captured into it. */
	atomic_store_explicit(&e->cap[index], NULL, memory_order_release);
	snap_publish(e, n);
	if (t) {
		/* Parked packets are dropped now (on this thread); the table goes later. */
		neigh_flush(t);
		if (e->cfg.defer)
			e->cfg.defer(e->cfg.defer_ctx, neigh_free_later, t);
		else
			neigh_table_free(t);
		e->own_neigh[index] = false;
	}
	return 0;
}

#define EDIT_IF(e, index, n, f)                                                                    \
	do {                                                                                       \
		(n) = snap_edit(e);                                                                \
		if (!(n))                                                                          \
			return -ENOMEM;                                                            \
		(f) = edit_if((n), (index));                                                       \
		if (!(f)) {                                                                        \
			free(n);                                                                   \
			return -ENOENT;                                                            \
		}                                                                                  \
	} while (0)

int fwd_engine_if_set_up(struct fwd_engine *e, uint32_t index, bool up)
{
	struct fwd_snap *n;
	struct fwd_if *f;

	EDIT_IF(e, index, n, f);
	f->up = up;
	snap_publish(e, n);
	if (!up && e->own_neigh[index])
		neigh_flush(f->neigh);
	return 0;
}

int fwd_engine_if_set_mtu(struct fwd_engine *e, uint32_t index, uint32_t mtu)
{
	struct fwd_snap *n;
	struct fwd_if *f;

	EDIT_IF(e, index, n, f);
	f->mtu = mtu;
	snap_publish(e, n);
	return 0;
}

int fwd_engine_if_set_mac(struct fwd_engine *e, uint32_t index, const uint8_t mac[6])
{
	struct fwd_snap *n;
	struct fwd_if *f;

	EDIT_IF(e, index, n, f);
	memcpy(f->mac, mac, ETHP_ADDR_LEN);
	snap_publish(e, n);
	return 0;
}

int fwd_engine_if_set_ipoib(struct fwd_engine *e, uint32_t index, struct ibp_qp *qp, uint32_t qkey,
			    const struct ipoib_hwaddr *hw, uint32_t mtu)
{
	struct fwd_snap *n;
	struct fwd_if *f;

	EDIT_IF(e, index, n, f);
	if (f->kind != FWD_IF_IPOIB) {
		free(n);
		return -EINVAL;
	}
	f->ud_qp = qp;
	f->qkey = qkey;
	if (hw && ipoib_hwaddr_encode(hw, f->hwaddr, sizeof(f->hwaddr)) < 0) {
		free(n);
		return -EINVAL;
	}
	if (mtu)
		f->mtu = mtu;
	f->up = qp != NULL;
	snap_publish(e, n);
	return 0;
}

static bool prefix_same(const struct ip_prefix *a, const struct ip_prefix *b)
{
	return a->len == b->len && ip_addr_equal(&a->addr, &b->addr);
}

int fwd_engine_if_add_addr(struct fwd_engine *e, uint32_t index, const struct ip_prefix *a)
{
	struct fwd_snap *n;
	struct fwd_if *f;
	int ret;

	EDIT_IF(e, index, n, f);
	for (unsigned i = 0; i < f->n_addrs; i++) {
		if (prefix_same(&f->addrs[i], a)) {
			free(n);
			return -EEXIST;
		}
	}
	if (f->n_addrs == FWD_IF_MAX_ADDRS) {
		free(n);
		return -ENOSPC;
	}
	/* The snapshot first: a packet that finds the local route finds the address. */
	f->addrs[f->n_addrs++] = *a;
	snap_publish(e, n);
	ret = rt_add_connected(f->rt, a, index);
	if (ret < 0 && ret != -EEXIST) {
		(void)fwd_engine_if_del_addr(e, index, a);
		return ret;
	}
	fwd_sp_if_changed(e, index);
	return 0;
}

int fwd_engine_if_del_addr(struct fwd_engine *e, uint32_t index, const struct ip_prefix *a)
{
	struct fwd_snap *n;
	struct fwd_if *f;
	unsigned i;

	EDIT_IF(e, index, n, f);
	for (i = 0; i < f->n_addrs; i++)
		if (prefix_same(&f->addrs[i], a))
			break;
	if (i == f->n_addrs) {
		free(n);
		return -ENOENT;
	}
	(void)rt_del_connected(f->rt, a, index, subnet_shared(f, i, 0));
	f->addrs[i] = f->addrs[--f->n_addrs];
	snap_publish(e, n);
	return 0;
}

int fwd_engine_if_set_proxy(struct fwd_engine *e, uint32_t index, const struct fwd_proxy_config *p)
{
	struct fwd_snap *n;
	struct fwd_if *f;

	if (p->n_prefixes > FWD_IF_MAX_PROXY)
		return -EINVAL;
	EDIT_IF(e, index, n, f);
	f->proxy = *p;
	snap_publish(e, n);
	fwd_sp_if_changed(e, index);
	return 0;
}

int fwd_engine_set_knobs(struct fwd_engine *e, const struct fwd_knobs *k)
{
	struct fwd_snap *n;

	if (k->n_martian4_src > FWD_MARTIAN_MAX || k->n_martian4_dst > FWD_MARTIAN_MAX)
		return -EINVAL;
	n = snap_edit(e);
	if (!n)
		return -ENOMEM;
	n->knobs = *k;
	snap_publish(e, n);
	return 0;
}

uint32_t fwd_engine_if_of_link(const struct fwd_engine *e, const struct ipoib_link *l)
{
	const struct fwd_snap *s = fwd_engine_snap(e);

	for (uint32_t i = 1; i < FWD_IF_MAX; i++)
		if (s->ifs[i].index && s->ifs[i].kind == FWD_IF_IPOIB && s->ifs[i].link == l)
			return i;
	return 0;
}

uint32_t fwd_engine_if_by_name(const struct fwd_engine *e, const char *name)
{
	const struct fwd_snap *s = fwd_engine_snap(e);

	for (uint32_t i = 1; i < FWD_IF_MAX; i++)
		if (s->ifs[i].index && strcmp(s->ifs[i].name, name) == 0)
			return i;
	return 0;
}

/* ---- the control thread's sends on IB (post hooks) ------------------------------------ */

static bool workers_running(const struct fwd_engine *e)
{
	for (unsigned w = 0; w < e->n_slots; w++)
		if (e->wk[w].started)
			return true;
	return false;
}

/* The share of the control thread's pool a send on IB takes. A link's sends are ARP/ND
 * answers and solicitations, parked packets and the gateway's own IP packets, which the
 * link encapsulates with no word of why: the failover pair's heartbeats and the
 * tiebreaker's echo requests are recognised by content, as the worker recognises the
 * heartbeats and the echo replies on receive, so a burst of answers in a flood cannot
 * take their messages (the control class's reserve). Both reach the link when they waited for an IPoIB neighbour. */
static enum fwd_pclass ib_send_class(const struct fwd_ib_hook *h, const struct ibp_send *s)
{
	const struct ibp_buf *b = s->buf;
	uint16_t et;

	if (!b || b->len <= IPOIB_ENCAP_LEN)
		return FWD_PCLASS_NEIGH;
	et = ip_be16(b->data);
	if ((et == 0x0800 || et == 0x86dd) &&
	    ip_is_control(h->e, b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN, true))
		return FWD_PCLASS_CONTROL;
	return FWD_PCLASS_NEIGH;
}

int fwd_engine_ib_post_send(void *ctx, struct ibp_send *s)
{
	struct fwd_ib_hook *h = ctx;

	if (!workers_running(h->e)) /* the control thread is alone on the port */
		return h->ops ? h->ops->post_send(0, s, 1) : 0;
	return fwd_sp_send_ib(h->e, h->ifindex, s, ib_send_class(h, s)) == 0 ? 1 : 0;
}

void *fwd_engine_if_post_ctx(struct fwd_engine *e, uint32_t index)
{
	return index && index < FWD_IF_MAX ? &e->if_hook[index] : NULL;
}
