/*
 * The control thread's half of the data plane (engine/slowpath.h): punted ARP/ND, proxy
 * ARP/ND, echo to our addresses, packets parked for resolution, learned host routes of
 * proxied neighbours. Everything it sends goes to a worker as a message: the interface's,
 * or the one whose parked packet it is (struct sp_ib_held).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pkt/arp.h"
#include "pkt/dhcp.h"
#include "pkt/dhcp6.h"
#include "engine/engine_pvt.h"
#include "pkt/eth_frame.h"
#include "pkt/icmp.h"
#include "pkt/ip.h"
#include "ipoib/ipoib_link.h"
#include "pkt/nd.h"
#include "pkt/proxy.h"
#include "engine/ring.h"
#include "engine/slowpath.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include <sys/epoll.h>

#define SP_RL_BUCKETS 256

/*
 * IPoIB egress: a worker's unresolved packet is copied into an IB buffer that the link
 * queues while it resolves (ipoib_link_xmit_ip). The worker's message, which holds the
 * next hop on the worker (struct fwd_held), stays here until the link posts that buffer:
 * the send then goes through the worker's own ring and the message after it, so the
 * worker sends the hop's next packets behind it. An entry also ends when the link posts
 * a later copy of the same hop, queued or at once (it dropped this one: the oldest of a
 * full queue), when its buffer is queued again (ditto), or after SP_IB_HELD_MS (the link
 * gave the resolution up, or the interface went). Full: the message goes back at once,
 * as before.
 */
#define SP_IB_HELD    256
#define SP_IB_HELD_MS 5000
struct sp_ib_held {
	const struct ibp_buf *b;
	struct fwd_msg *m;
	uint64_t seq; /* order of arrival */
	uint64_t since_ns;
};

struct fwd_sp {
	struct fwd_engine *e;
	struct evloop *loop;
	struct evtimer *timer;
	struct fwd_sp_stats st;
	struct icmp_ratelimit rl; /* our ICMP errors (unreachable) */
	struct icmp_rl_bucket rl_b[SP_RL_BUCKETS];
	struct icmp_ratelimit prl; /* proxy answers, per asker */
	struct icmp_rl_bucket prl_b[SP_RL_BUCKETS];
	uint16_t udp_port; /* fwd_sp_udp_bind */
	fwd_sp_udp_fn udp_fn;
	void *udp_ctx;
	uint16_t echo_id; /* fwd_sp_echo_bind */
	fwd_sp_echo_fn echo_fn;
	void *echo_ctx;
	fwd_sp_rs_fn rs_fn; /* fwd_sp_rs_bind */
	void *rs_ctx;
	fwd_sp_dhcp_fn dhcp_fn; /* fwd_sp_dhcp_bind */
	void *dhcp_ctx;
	uint32_t dhcp_ifmask;
	fwd_sp_mcast_fn mcast_fn; /* fwd_sp_mcast_bind */
	void *mcast_ctx;
	struct sp_ib_held ib_held[SP_IB_HELD];
	unsigned n_ib_held;
	uint64_t ib_held_seq;
	const struct ibp_buf *ib_now; /* the copy unresolved() is handing to its link */
	struct fwd_msg *ib_now_msg;   /* and the message it copies */
	bool ib_now_posted;
};

static const char *const sp_names[FWD_SP_REASON_COUNT] = {
	[FWD_SP_ARP_BAD] = "arp_bad",
	[FWD_SP_ND_BAD] = "nd_bad",
	[FWD_SP_ARP_ANSWERED] = "arp_answered",
	[FWD_SP_NA_ANSWERED] = "na_answered",
	[FWD_SP_PROXY_ANSWERED] = "proxy_answered",
	[FWD_SP_PROXY_RESOLVE] = "proxy_resolve",
	[FWD_SP_PROXY_IGNORED] = "proxy_ignored",
	[FWD_SP_ECHO_ANSWERED] = "echo_answered",
	[FWD_SP_LOCAL_DROPPED] = "local_dropped",
	[FWD_SP_PARKED] = "parked",
	[FWD_SP_RESOLVED_SENT] = "resolved_sent",
	[FWD_SP_UNRES_DROPPED] = "unresolved_dropped",
	[FWD_SP_UNREACH_SENT] = "unreachable_sent",
	[FWD_SP_ICMP_LIMITED] = "icmp_rate_limited",
	[FWD_SP_NO_MSG] = "no_message",
	[FWD_SP_RING_FULL] = "ring_full",
	[FWD_SP_LEARNED_ROUTE] = "learned_route",
	[FWD_SP_ANNOUNCED] = "announced",
	[FWD_SP_IB_CTL] = "ipoib_ctl",
	[FWD_SP_UDP_DELIVERED] = "udp_delivered",
	[FWD_SP_UDP_SENT] = "udp_sent",
	[FWD_SP_UNRES_DISCARDED] = "unresolved_discarded",
	[FWD_SP_IF_GONE] = "interface_gone",
	[FWD_SP_RESEND_FAILED] = "resend_failed",
	[FWD_SP_OWN_CLAIMED] = "own_address_claimed",
	[FWD_SP_PARK_LIMITED] = "park_limited",
};

const char *fwd_sp_reason_name(enum fwd_sp_reason r)
{
	return (unsigned)r < FWD_SP_REASON_COUNT ? sp_names[r] : "unknown";
}

static uint64_t now_ns(const struct fwd_engine *e)
{
	if (e->cfg.now_ms)
		return e->cfg.now_ms(e->cfg.now_ctx) * 1000000u;
	return evloop_now_ns();
}

static const struct fwd_if *sp_if(struct fwd_engine *e, uint32_t index)
{
	return fwd_snap_if(fwd_engine_current(e), index);
}

/* The routes of interface index's tenant (the engine's when it is gone). */
static struct rt_table *if_rt(struct fwd_engine *e, uint32_t index)
{
	const struct fwd_if *f = sp_if(e, index);

	return f ? f->rt : e->rt;
}

/* ---- sending through the workers --------------------------------------------------- */

/* A control message of class c (CONTROL: heartbeats, the cm's MADs, the tiebreaker's
 * echo; the others leave that class a share of the pool: fwd_msg_get). */
static struct fwd_msg *ctl_msg_on(struct fwd_sp *sp, const struct fwd_if *f, unsigned worker,
				  enum fwd_pclass c)
{
	struct fwd_msg *m = fwd_msg_get(sp->e, worker, FWD_OWNER_CONTROL, c);

	if (!m) {
		sp->st.r[FWD_SP_NO_MSG]++;
		return NULL;
	}
	m->ifindex = (uint16_t)f->index;
	m->ifgen = f->gen;
	m->own = false;
	return m;
}

static struct fwd_msg *ctl_msg(struct fwd_sp *sp, const struct fwd_if *f, enum fwd_pclass c)
{
	return ctl_msg_on(sp, f, f->worker, c);
}

static int ctl_enqueue(struct fwd_sp *sp, struct fwd_msg *m)
{
	struct ring *r = sp->e->wk[m->worker].to_wk;
	void *p = m;

	if (ring_enqueue_burst(r, &p, 1) != 1) {
		sp->st.r[FWD_SP_RING_FULL]++;
		fwd_msg_recycle(sp->e, m);
		return -ENOBUFS;
	}
	ring_wake_if_sleeping(r);
	return 0;
}

int fwd_sp_send_eth(struct fwd_engine *e, uint32_t ifindex, const uint8_t *frame, size_t len)
{
	const struct fwd_if *f = sp_if(e, ifindex);
	struct fwd_msg *m;

	if (!f || f->kind != FWD_IF_ETH || len > FWD_MSG_DATA || len < ETHF_HLEN)
		return -EINVAL;
	m = ctl_msg(e->sp, f, FWD_PCLASS_NEIGH);
	if (!m)
		return -ENOBUFS;
	m->type = FWD_MSG_TX_ETH;
	memcpy(m->data, frame, len);
	m->len = (uint32_t)len;
	return ctl_enqueue(e->sp, m);
}

static bool same_hop(const struct fwd_msg *a, const struct fwd_msg *b)
{
	return a->ifindex == b->ifindex && a->family == b->family &&
	       !memcmp(a->nh, b->nh, a->family == AF_INET ? 4 : 16);
}

static void parked_done(struct fwd_engine *e, const struct fwd_msg *m);

/* Entry i of the IPoIB holds ends: its message goes back to its worker. */
static void ib_held_end(struct fwd_sp *sp, unsigned i)
{
	struct fwd_msg *m = sp->ib_held[i].m;

	sp->ib_held[i] = sp->ib_held[--sp->n_ib_held];
	parked_done(sp->e, m);
	fwd_msg_put(sp->e, m, FWD_OWNER_CONTROL);
}

/* The link queued b, a copy of m: it waits for the post. A buffer is queued once at a
 * time: an entry that still names b is stale (the link dropped that copy and the pool
 * handed the buffer out again). */
static void ib_held_add(struct fwd_sp *sp, const struct ibp_buf *b, struct fwd_msg *m)
{
	for (unsigned i = sp->n_ib_held; i-- > 0;)
		if (sp->ib_held[i].b == b)
			ib_held_end(sp, i);
	sp->ib_held[sp->n_ib_held++] = (struct sp_ib_held){
		.b = b, .m = m, .seq = ++sp->ib_held_seq, .since_ns = now_ns(sp->e)
	};
}

/* The link posts buffer b: the worker whose message waits for it, if one does (*hold:
 * the entry, which ib_held_release ends once the send is queued), else -1. The copy
 * unresolved() is handing over, posted at once, is its message's worker's, and every
 * entry still waiting for its hop is older (the link would have queued this one
 * behind it): those copies were dropped. */
static int ib_held_worker(struct fwd_sp *sp, const struct ibp_buf *b, struct sp_ib_held *hold)
{
	if (sp->ib_now && sp->ib_now == b) {
		sp->ib_now_posted = true;
		*hold = (struct sp_ib_held){ .m = sp->ib_now_msg, .seq = UINT64_MAX };
		return sp->ib_now_msg->worker;
	}
	for (unsigned i = 0; i < sp->n_ib_held; i++)
		if (sp->ib_held[i].b == b) {
			*hold = sp->ib_held[i];
			return hold->m->worker;
		}
	return -1;
}

/* The entry and every older one of its hop end (those the link dropped: the oldest of a
 * full queue; a post that failed), their messages behind the send on the worker's
 * ring. */
static void ib_held_release(struct fwd_sp *sp, const struct sp_ib_held *hold)
{
	for (unsigned i = sp->n_ib_held; i-- > 0;)
		if (sp->ib_held[i].seq <= hold->seq && same_hop(sp->ib_held[i].m, hold->m))
			ib_held_end(sp, i);
}

int fwd_sp_send_ib(struct fwd_engine *e, uint32_t ifindex, const struct ibp_send *s,
		   enum fwd_pclass c)
{
	const struct fwd_if *f = sp_if(e, ifindex);
	struct sp_ib_held hold = { 0 };
	struct fwd_msg *m;
	int w, ret;

	if (!f || f->kind != FWD_IF_IPOIB)
		return -EINVAL;
	w = s->buf ? ib_held_worker(e->sp, s->buf, &hold) : -1;
	if (w < 0 || e->wk[w].retired)
		w = (int)f->worker;
	m = ctl_msg_on(e->sp, f, (unsigned)w, c);
	if (m) {
		m->type = FWD_MSG_TX_IB;
		m->ib_send = *s;
		m->len = 0;
		ret = ctl_enqueue(e->sp, m);
	} else {
		ret = -ENOBUFS;
	}
	if (hold.m) /* its worker sends the hop's next packets after this one */
		ib_held_release(e->sp, &hold);
	return ret;
}

/* Our own IP packet (echo reply, ICMP error): routed here, emitted by the worker. */
static void send_own_ip(struct fwd_sp *sp, struct rt_table *rt, int family, const uint8_t *pkt,
			size_t len, enum fwd_pclass c)
{
	struct ip_addr dst = { .family = (uint8_t)family };
	const struct rt_fib_nh *nh;
	const struct fwd_if *out;
	struct fwd_msg *m;

	memcpy(dst.bytes, family == AF_INET ? pkt + 16 : pkt + 24, family == AF_INET ? 4 : 16);
	nh = rt_lookup(rt, &dst, 0);
	if (!nh || (nh->type != RT_NH_GATEWAY && nh->type != RT_NH_CONNECTED) ||
	    !(out = sp_if(sp->e, nh->ifindex)) || len > FWD_MSG_DATA)
		return;
	m = ctl_msg(sp, out, c);
	if (!m)
		return;
	m->type = FWD_MSG_TX_IP;
	m->own = true;
	m->family = (uint8_t)family;
	memcpy(m->nh, nh->type == RT_NH_GATEWAY ? nh->gw : dst.bytes, 16);
	memcpy(m->data, pkt, len);
	m->len = (uint32_t)len;
	(void)ctl_enqueue(sp, m);
}

/* ---- addresses and where they live ---------------------------------------------------- */

static bool is_own(const struct fwd_snap *s, const struct rt_table *rt, int family,
		   const uint8_t *a, uint32_t *where)
{
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *f = &s->ifs[k];

		if (f->rt != rt) /* another tenant's: the same address may be there too */
			continue;
		for (unsigned i = 0; f->index && i < f->n_addrs; i++) {
			if (f->addrs[i].addr.family == family &&
			    !memcmp(f->addrs[i].addr.bytes, a, family == AF_INET ? 4 : 16)) {
				if (where)
					*where = k;
				return true;
			}
		}
	}
	return false;
}

/* Our address on f for the family (IPv4: inside the target's prefix if possible). */
static const uint8_t *if_src(const struct fwd_if *f, int family, const uint8_t *near)
{
	const uint8_t *first = NULL;

	for (unsigned i = 0; i < f->n_addrs; i++) {
		const struct ip_prefix *p = &f->addrs[i];
		struct ip_addr a = { .family = (uint8_t)family };

		if (p->addr.family != family)
			continue;
		if (!first)
			first = p->addr.bytes;
		if (near) {
			memcpy(a.bytes, near, family == AF_INET ? 4 : 16);
			if (ip_prefix_contains(p, &a))
				return p->addr.bytes;
		}
	}
	return first;
}

bool fwd_neigh_usable(const struct fwd_if *f, int family, const uint8_t *a)
{
	struct neigh_entry *n = f->neigh ? neigh_lookup(f->neigh, family, a) : NULL;
	enum neigh_state s;

	if (!n)
		return false;
	s = neigh_entry_state(n);
	return s == NEIGH_REACHABLE || s == NEIGH_STALE || s == NEIGH_DELAY || s == NEIGH_PROBE ||
	       s == NEIGH_PERMANENT;
}

static bool in_proxy_prefix(const struct fwd_if *f, int family, const uint8_t *a)
{
	struct ip_addr x = { .family = (uint8_t)family };

	memcpy(x.bytes, a, family == AF_INET ? 4 : 16);
	for (unsigned i = 0; i < f->proxy.n_prefixes; i++)
		if (ip_prefix_contains(&f->proxy.prefixes[i], &x))
			return true;
	return false;
}

struct where_ctx {
	struct fwd_engine *e;
	const struct fwd_if *in;
	uint32_t other; /* the interface found for OTHER_SIDE / OTHER_PREFIX */
};

static enum proxy_where where_lookup(void *arg, int family, const uint8_t *addr)
{
	struct where_ctx *w = arg;
	const struct fwd_snap *s = fwd_engine_current(w->e);

	if (is_own(s, w->in->rt, family, addr, NULL))
		return PROXY_WHERE_SELF;
	if (fwd_neigh_usable(w->in, family, addr))
		return PROXY_WHERE_ASKER_SIDE;
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *f = &s->ifs[k];

		if (f->index && k != w->in->index && f->up && f->rt == w->in->rt &&
		    fwd_neigh_usable(f, family, addr)) {
			w->other = k;
			return PROXY_WHERE_OTHER_SIDE;
		}
	}
	if (in_proxy_prefix(w->in, family, addr))
		return PROXY_WHERE_ASKER_SIDE;
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *f = &s->ifs[k];

		if (f->index && k != w->in->index && f->up && f->rt == w->in->rt &&
		    in_proxy_prefix(f, family, addr)) {
			w->other = k;
			return PROXY_WHERE_OTHER_PREFIX;
		}
	}
	return PROXY_WHERE_UNKNOWN;
}

/*
 * Everything proxy_arp/proxy_nd need for a request that arrived on `in` (side A): the
 * interface's proxy settings, its link address, the where-lookup (whose w.other names
 * side B afterwards) and the rate limiter. env points into the struct: initialise it
 * where it stays.
 */
struct proxy_call {
	struct proxy_cfg cfg;
	struct proxy_link link;
	struct where_ctx w;
	struct proxy_env env;
};

static void proxy_call_init(struct proxy_call *pc, struct fwd_sp *sp, const struct fwd_if *in,
			    bool enabled, bool ib)
{
	pc->cfg = (struct proxy_cfg){ .enabled = enabled,
				      .answer_unresolved = in->proxy.answer_unresolved,
				      .defend_dad = in->proxy.defend_dad,
				      .router = in->proxy.router };
	pc->link = (struct proxy_link){ .ib = ib, .lladdr = ib ? in->hwaddr : in->mac };
	pc->w = (struct where_ctx){ .e = sp->e, .in = in };
	pc->env = (struct proxy_env){ .cfg = &pc->cfg,
				      .link = &pc->link,
				      .lookup = where_lookup,
				      .ctx = &pc->w,
				      .rl = &sp->prl,
				      .now_ns = now_ns(sp->e) };
}

/* ---- proxied neighbours: learned routes, announcements, ND groups ------------------------ */

/* IPoIB: the gratuitous ARP goes to the link's broadcast group, the unsolicited NA to
 * the all-nodes group's MGID, both through the link (which posts on its UD QP). */
static void announce_ib(struct fwd_sp *sp, const struct fwd_if *a, int family, const uint8_t *addr)
{
	struct proxy_link pl = { .ib = true, .lladdr = a->hwaddr };
	struct ibp_buf *b;
	size_t n;
	int ret;

	if (!a->link)
		return;
	b = ipoib_link_buf(a->link);
	if (!b)
		return;
	if (family == AF_INET)
		n = proxy_announce_arp(&pl, ip_be32(addr), false, b->data + IPOIB_ENCAP_LEN,
				       b->cap - IPOIB_ENCAP_LEN);
	else
		n = proxy_announce_nd(&pl, addr, a->proxy.router, b->data + IPOIB_ENCAP_LEN,
				      b->cap - IPOIB_ENCAP_LEN);
	if (!n) {
		a->ib_ops->buf_put(a->ib_port, b);
		return;
	}
	b->len = (uint32_t)n;
	if (family == AF_INET) {
		ret = ipoib_link_xmit_bcast(a->link, ETHF_TYPE_ARP, b);
	} else {
		union ib_gid mgid;

		if (ipoib_mgid_from_ipv6(nd_all_nodes, ipoib_link_pkey(a->link), IB_MGID_SCOPE_LINK,
					 &mgid) < 0) {
			a->ib_ops->buf_put(a->ib_port, b);
			return;
		}
		ret = ipoib_link_xmit_mcast(a->link, &mgid, ETHF_TYPE_IPV6, b);
	}
	if (ret >= 0)
		sp->st.r[FWD_SP_ANNOUNCED]++;
}

static void announce_on(struct fwd_sp *sp, const struct fwd_if *a, int family, const uint8_t *addr)
{
	uint8_t buf[ETHF_HLEN + ND_MAX_LEN];
	struct proxy_link pl = { .ib = a->kind == FWD_IF_IPOIB,
				 .lladdr = a->kind == FWD_IF_ETH ? a->mac : a->hwaddr };
	size_t n;

	if (a->kind == FWD_IF_IPOIB) {
		announce_ib(sp, a, family, addr);
		return;
	}
	if (family == AF_INET) {
		n = proxy_announce_arp(&pl, ip_be32(addr), false, buf + ETHF_HLEN,
				       sizeof(buf) - ETHF_HLEN);
		memset(buf, 0xff, 6);
		buf[12] = 0x08;
		buf[13] = 0x06;
	} else {
		n = proxy_announce_nd(&pl, addr, a->proxy.router, buf + ETHF_HLEN,
				      sizeof(buf) - ETHF_HLEN);
		nd_mcast_mac(nd_all_nodes, buf);
		buf[12] = 0x86;
		buf[13] = 0xdd;
	}
	memcpy(buf + 6, a->mac, 6);
	if (n && fwd_sp_send_eth(sp->e, a->index, buf, ETHF_HLEN + n) == 0)
		sp->st.r[FWD_SP_ANNOUNCED]++;
}

/* A neighbour (family, addr) was learned or confirmed on interface b. When another
 * interface proxies that family, route the address to b (a learned host route) and,
 * when that route is new or moved, announce it on the proxying interfaces. */
static void neighbour_learned(struct fwd_sp *sp, uint32_t b, int family, const uint8_t *addr)
{
	const struct fwd_snap *s = fwd_engine_current(sp->e);
	struct rt_route r = { .source = RT_SRC_LEARNED, .metric = 0, .nnh = 1 };
	struct rt_table *rt = if_rt(sp->e, b);
	const struct rt_fib_nh *cur;
	bool proxied = false;

	/* Proxying stays inside the neighbour's tenant: only its interfaces count. */
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *a = &s->ifs[k];

		if (a->index && k != b && a->rt == rt &&
		    (family == AF_INET ? a->proxy.proxy_arp : a->proxy.proxy_nd))
			proxied = true;
	}
	if (!proxied || is_own(s, rt, family, addr, NULL))
		return;
	r.prefix.addr.family = (uint8_t)family;
	memcpy(r.prefix.addr.bytes, addr, family == AF_INET ? 4 : 16);
	r.prefix.len = family == AF_INET ? 32 : 128;
	cur = rt_lookup(rt, &r.prefix.addr, 0);
	if (cur && cur->type == RT_NH_CONNECTED && cur->ifindex == b) {
		/* Already routed to b: by the learned route or by b's connected prefix. Only
		 * a learned route needs no work; a connected one may still need the host
		 * route when the prefix is shared with a proxying interface. */
		struct rt_route probe = r;

		probe.nh[0] = (struct rt_nexthop){ .type = RT_NH_CONNECTED, .ifindex = b };
		if (rt_add(rt, &probe) == -EEXIST)
			return;
		sp->st.r[FWD_SP_LEARNED_ROUTE]++;
	} else {
		r.nh[0] = (struct rt_nexthop){ .type = RT_NH_CONNECTED, .ifindex = b };
		if (rt_replace(rt, &r) < 0)
			return;
		sp->st.r[FWD_SP_LEARNED_ROUTE]++;
	}
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *a = &s->ifs[k];

		if (!a->index || k == b || !a->up || a->rt != rt ||
		    !(family == AF_INET ? a->proxy.proxy_arp : a->proxy.proxy_nd))
			continue;
		announce_on(sp, a, family, addr);
		if (family == AF_INET6 && a->kind == FWD_IF_ETH && a->eth_ops->mc_add) {
			uint8_t grp[16], mac[6];

			nd_solicited_node(addr, grp);
			nd_mcast_mac(grp, mac);
			(void)a->eth_ops->mc_add(a->eth, mac);
		}
	}
}

void fwd_sp_announce(struct fwd_engine *e, uint32_t from_ifindex, int family, const uint8_t *addr)
{
	const struct fwd_snap *s = fwd_engine_current(e);
	struct rt_table *rt = if_rt(e, from_ifindex);

	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *a = &s->ifs[k];

		if (a->index && k != from_ifindex && a->up && a->rt == rt &&
		    (family == AF_INET ? a->proxy.proxy_arp : a->proxy.proxy_nd))
			announce_on(e->sp, a, family, addr);
	}
}

void fwd_sp_if_changed(struct fwd_engine *e, uint32_t ifindex)
{
	(void)e;
	(void)ifindex;
}

/* ---- ARP and ND on Ethernet ---------------------------------------------------------- */

static void eth_reply(struct fwd_sp *sp, const struct fwd_if *in, const uint8_t *dst_mac,
		      uint16_t type, const uint8_t *body, size_t n)
{
	uint8_t f[ETHF_HLEN + ND_MAX_LEN + 8];

	if (n > sizeof(f) - ETHF_HLEN)
		return;
	memcpy(f, dst_mac, 6);
	memcpy(f + 6, in->mac, 6);
	f[12] = (uint8_t)(type >> 8);
	f[13] = (uint8_t)type;
	memcpy(f + ETHF_HLEN, body, n);
	(void)fwd_sp_send_eth(sp->e, in->index, f, ETHF_HLEN + n);
}

static void resolve_other(struct fwd_sp *sp, uint32_t k, int family, const uint8_t *addr)
{
	const struct fwd_if *f = sp_if(sp->e, k);

	/* Ethernet: the table's solicit sends the ARP request / NS. IPoIB: the table is
	 * the link's (ipoib_link_neigh): its solicit sends the ARP request / NS to the
	 * broadcast / solicited-node group, and the answer (ipoib_link_input_ctl) binds
	 * the neighbour to its path. Nothing waits on it: the asker retries. */
	if (f && f->neigh && f->up)
		(void)neigh_resolve(f->neigh, family, addr, NULL);
}

/*
 * Whether a sender heard on in may create a neighbour entry (issue 20, RFC 6583): only
 * inside in's subnets (its addresses, the prefixes that live on it, a route that reaches
 * it directly through in) or IPv6 link-local. Anything else gets NEIGH_F_OFF_LINK: not
 * learned, and counted learn_refused by the table when it had no entry; answering is
 * not affected.
 */
static unsigned learn_create(const struct fwd_if *in, int family, const uint8_t *addr)
{
	struct ip_addr a = { .family = (uint8_t)family };
	const struct rt_fib_nh *nh;

	if (neigh_on_link(in->addrs, in->n_addrs, family, addr) ||
	    neigh_on_link(in->proxy.prefixes, in->proxy.n_prefixes, family, addr))
		return NEIGH_F_CREATE;
	memcpy(a.bytes, addr, family == AF_INET ? 4 : 16);
	nh = rt_lookup(in->rt, &a, 0);
	if (nh && nh->type == RT_NH_CONNECTED && nh->ifindex == in->index)
		return NEIGH_F_CREATE;
	return NEIGH_F_OFF_LINK;
}

static void eth_arp(struct fwd_sp *sp, const struct fwd_if *in, const uint8_t *frame, size_t len)
{
	struct arp_pkt a;
	struct neigh_link ll = { .len = 6, .usable = true };
	uint8_t spa[4], tpa[4], out[ARP_MAX_LEN];
	enum arp_reason r = arp_parse(frame + ETHF_HLEN, len - ETHF_HLEN, ARP_HTYPE_ETHER, &a);
	enum arp_kind kind;
	const struct fwd_snap *s = fwd_engine_current(sp->e);
	bool for_us;
	struct neigh_entry *ne = NULL;

	if (r != ARP_OK) {
		sp->st.r[FWD_SP_ARP_BAD]++;
		return;
	}
	kind = arp_classify(&a);
	ip_put32(spa, a.spa);
	ip_put32(tpa, a.tpa);
	memcpy(ll.addr, a.sha, 6);
	if (!memcmp(a.sha, in->mac, 6))
		return; /* our own, looped back */
	if (a.spa && is_own(s, in->rt, AF_INET, spa, NULL)) {
		/* Another host claims one of our addresses: a conflict or a spoof. Learning
		 * it would make a neighbour entry for our own address. */
		sp->st.r[FWD_SP_OWN_CLAIMED]++;
		return;
	}
	for_us = if_src(in, AF_INET, NULL) && is_own(s, in->rt, AF_INET, tpa, NULL);
	/* Only addresses of this interface are answered here; others are proxy matters. */
	if (for_us) {
		uint32_t where = 0;

		(void)is_own(s, in->rt, AF_INET, tpa, &where);
		for_us = where == in->index;
	}
	if (a.spa) {
		if (kind == ARP_KIND_REPLY)
			ne = neigh_update(in->neigh, AF_INET, spa, &ll,
					  NEIGH_F_SOLICITED | NEIGH_F_OVERRIDE);
		else if (for_us && kind == ARP_KIND_REQUEST)
			ne = neigh_update(in->neigh, AF_INET, spa, &ll,
					  learn_create(in, AF_INET, spa) | NEIGH_F_OVERRIDE);
		else
			ne = neigh_update(in->neigh, AF_INET, spa, &ll, NEIGH_F_OVERRIDE);
		if (ne)
			neighbour_learned(sp, in->index, AF_INET, spa);
	}
	if (kind == ARP_KIND_REPLY || kind == ARP_KIND_GRATUITOUS_REPLY)
		return;
	if (for_us) {
		size_t n = arp_build_reply(out, sizeof(out), &a, in->mac);

		if (n) {
			eth_reply(sp, in, a.sha, ETHF_TYPE_ARP, out, n);
			sp->st.r[FWD_SP_ARP_ANSWERED]++;
		}
		return;
	}
	{
		struct proxy_call pc;
		struct proxy_decision d;

		proxy_call_init(&pc, sp, in, in->proxy.proxy_arp, false);
		d = proxy_arp(&pc.env, &a, frame + 6, out, sizeof(out));

		sp->st.proxy[d.reason]++;
		if (d.action == PROXY_ANSWER) {
			eth_reply(sp, in, a.sha, ETHF_TYPE_ARP, out, d.len);
			sp->st.r[FWD_SP_PROXY_ANSWERED]++;
		} else if (d.action == PROXY_RESOLVE) {
			resolve_other(sp, pc.w.other, AF_INET, tpa);
			sp->st.r[FWD_SP_PROXY_RESOLVE]++;
		} else {
			sp->st.r[FWD_SP_PROXY_IGNORED]++;
		}
	}
}

static void eth_nd(struct fwd_sp *sp, const struct fwd_if *in, const uint8_t *frame, size_t len)
{
	const uint8_t *ip = frame + ETHF_HLEN;
	struct nd_msg m;
	struct neigh_link ll = { .len = 6, .usable = true };
	uint8_t out[ND_MAX_LEN];
	const struct fwd_snap *s = fwd_engine_current(sp->e);
	enum nd_reason r = nd_parse(ip, len - ETHF_HLEN, ND_LINK_ETHER, &m);
	uint32_t where = 0;
	uint8_t dmac[6];

	if (r != ND_OK) {
		sp->st.r[FWD_SP_ND_BAD]++;
		return;
	}
	if (m.type == ND_NA) {
		unsigned fl = 0;
		struct neigh_entry *ne;

		if (m.tllao)
			memcpy(ll.addr, m.tllao, 6);
		if (m.flags & ND_NA_SOLICITED)
			fl |= NEIGH_F_SOLICITED;
		if (m.flags & ND_NA_OVERRIDE)
			fl |= NEIGH_F_OVERRIDE;
		ne = neigh_update(in->neigh, AF_INET6, m.target, m.tllao ? &ll : NULL, fl);
		if (ne)
			neighbour_learned(sp, in->index, AF_INET6, m.target);
		return;
	}
	if (m.type == ND_RS) {
		if (sp->rs_fn)
			sp->rs_fn(sp->rs_ctx, in->index, &m, frame + 6);
		return;
	}
	if (m.type != ND_NS)
		return; /* RA, Redirect: not taken by a gateway */
	if (!m.dad && is_own(s, in->rt, AF_INET6, m.src, NULL)) {
		/* Another host gives one of our addresses as its source (as in eth_arp). */
		sp->st.r[FWD_SP_OWN_CLAIMED]++;
		return;
	}
	if (!m.dad && m.sllao) {
		memcpy(ll.addr, m.sllao, 6);
		if (neigh_update(in->neigh, AF_INET6, m.src, &ll,
				 learn_create(in, AF_INET6, m.src) | NEIGH_F_OVERRIDE))
			neighbour_learned(sp, in->index, AF_INET6, m.src);
	}
	if (is_own(s, in->rt, AF_INET6, m.target, &where) && where == in->index) {
		size_t n = nd_build_na_reply(out, sizeof(out), ND_LINK_ETHER, &m, m.target,
					     ND_NA_OVERRIDE | (in->proxy.router ? ND_NA_ROUTER : 0),
					     in->mac);

		if (!n)
			return;
		if (m.dad)
			nd_mcast_mac(nd_all_nodes, dmac);
		else
			memcpy(dmac, m.sllao ? m.sllao : frame + 6, 6);
		eth_reply(sp, in, dmac, ETHF_TYPE_IPV6, out, n);
		sp->st.r[FWD_SP_NA_ANSWERED]++;
		return;
	}
	{
		struct proxy_call pc;
		struct proxy_decision d;

		proxy_call_init(&pc, sp, in, in->proxy.proxy_nd, false);
		d = proxy_nd(&pc.env, &m, frame + 6, out, sizeof(out));
		sp->st.proxy[d.reason]++;
		if (d.action == PROXY_ANSWER) {
			if (m.dad)
				nd_mcast_mac(nd_all_nodes, dmac);
			else
				memcpy(dmac, m.sllao ? m.sllao : frame + 6, 6);
			eth_reply(sp, in, dmac, ETHF_TYPE_IPV6, out, d.len);
			sp->st.r[FWD_SP_PROXY_ANSWERED]++;
		} else if (d.action == PROXY_RESOLVE) {
			resolve_other(sp, pc.w.other, AF_INET6, m.target);
			sp->st.r[FWD_SP_PROXY_RESOLVE]++;
		} else {
			sp->st.r[FWD_SP_PROXY_IGNORED]++;
		}
	}
}

/* ---- ARP and ND on IPoIB: the link first, then the proxy for the other interfaces ---- */

/* A proxied NA on IPoIB: the decision as on Ethernet (the link address is the link's
 * 20 octets), sent through ipoib_link_xmit_hw to the asker's source link-layer option
 * (its QPN + GID; the link resolves the path), or to all-nodes for a DAD NS. An NS
 * without the option has no IPoIB answer address: ignored (RFC 4861 lets it be). */
static void ib_proxy_nd(struct fwd_sp *sp, const struct fwd_if *in, const struct nd_msg *nm)
{
	struct proxy_call pc;
	uint8_t out[ND_MAX_LEN];
	struct proxy_decision d;

	proxy_call_init(&pc, sp, in, true, true);
	d = proxy_nd(&pc.env, nm, NULL, out, sizeof(out));

	sp->st.proxy[d.reason]++;
	if (d.action == PROXY_RESOLVE) {
		resolve_other(sp, pc.w.other, AF_INET6, nm->target);
		sp->st.r[FWD_SP_PROXY_RESOLVE]++;
		return;
	}
	if (d.action != PROXY_ANSWER) {
		sp->st.r[FWD_SP_PROXY_IGNORED]++;
		return;
	}
	{
		struct ibp_buf *b = ipoib_link_buf(in->link);
		struct ipoib_hwaddr hw;
		int ret = -EINVAL;

		if (!b)
			return;
		if (d.len + IPOIB_ENCAP_LEN > b->cap) {
			in->ib_ops->buf_put(in->ib_port, b);
			return;
		}
		memcpy(b->data + IPOIB_ENCAP_LEN, out, d.len);
		b->len = (uint32_t)d.len;
		if (nm->dad) {
			union ib_gid mgid;

			if (ipoib_mgid_from_ipv6(nd_all_nodes, ipoib_link_pkey(in->link),
						 IB_MGID_SCOPE_LINK, &mgid) == 0)
				ret = ipoib_link_xmit_mcast(in->link, &mgid, ETHF_TYPE_IPV6, b);
			else
				in->ib_ops->buf_put(in->ib_port, b);
		} else if (nm->sllao && ipoib_hwaddr_decode(nm->sllao, 20, &hw) >= 0) {
			ret = ipoib_link_xmit_hw(in->link, &hw, ETHF_TYPE_IPV6, b);
		} else {
			in->ib_ops->buf_put(in->ib_port, b);
		}
		if (ret >= 0)
			sp->st.r[FWD_SP_PROXY_ANSWERED]++;
	}
}

static void ib_ctl(struct fwd_sp *sp, const struct fwd_if *in, struct fwd_msg *m)
{
	struct ipoib_rx rx = {
		.kind = m->punt == FWD_PUNT_ARP ? IPOIB_RX_ARP : IPOIB_RX_ND,
		.ethertype = m->ethertype,
		.data = m->data,
		.len = m->len,
		.src_qpn = m->src_qpn,
		.slid = m->slid,
		.has_grh = m->has_grh,
		.mcast = m->mcast,
		.sgid = m->sgid,
		.dgid = m->dgid,
	};
	int ret;

	if (!in->link)
		return;
	ret = ipoib_link_input_ctl(in->link, &rx);
	sp->st.r[FWD_SP_IB_CTL]++;
	if (ret < 0)
		return;
	if (m->punt == FWD_PUNT_ARP) {
		struct arp_pkt a;
		uint8_t spa[4];

		if (arp_parse(m->data, m->len, ARP_HTYPE_IB, &a) != ARP_OK)
			return;
		ip_put32(spa, a.spa);
		if (a.spa)
			neighbour_learned(sp, in->index, AF_INET, spa);
		/* Proxy answers on IPoIB go out through ipoib_link_xmit_hw: the decision is
		 * made here, the send needs the link's path to the asker. */
		if (in->proxy.proxy_arp && arp_classify(&a) == ARP_KIND_REQUEST) {
			struct proxy_call pc;
			uint8_t out[ARP_MAX_LEN];
			struct proxy_decision d;

			proxy_call_init(&pc, sp, in, true, true);
			d = proxy_arp(&pc.env, &a, NULL, out, sizeof(out));

			sp->st.proxy[d.reason]++;
			if (d.action == PROXY_ANSWER) {
				struct ipoib_hwaddr hw;
				struct ibp_buf *b = ipoib_link_buf(in->link);

				if (b && ipoib_hwaddr_decode(a.sha, 20, &hw) >= 0) {
					memcpy(b->data + IPOIB_ENCAP_LEN, out, d.len);
					b->len = (uint32_t)d.len;
					(void)ipoib_link_xmit_hw(in->link, &hw, ETHF_TYPE_ARP, b);
					sp->st.r[FWD_SP_PROXY_ANSWERED]++;
				} else if (b) {
					in->ib_ops->buf_put(in->ib_port, b);
				}
			} else if (d.action == PROXY_RESOLVE) {
				uint8_t tpa[4];

				ip_put32(tpa, a.tpa);
				resolve_other(sp, pc.w.other, AF_INET, tpa);
				sp->st.r[FWD_SP_PROXY_RESOLVE]++;
			} else {
				sp->st.r[FWD_SP_PROXY_IGNORED]++;
			}
		}
	} else {
		struct nd_msg nm;

		if (nd_parse(m->data, m->len, ND_LINK_IB, &nm) != ND_OK)
			return;
		if (nm.type == ND_RS && sp->rs_fn)
			sp->rs_fn(sp->rs_ctx, in->index, &nm, NULL);
		if (nm.type == ND_NA)
			neighbour_learned(sp, in->index, AF_INET6, nm.target);
		else if (nm.type == ND_NS && !nm.dad)
			neighbour_learned(sp, in->index, AF_INET6, nm.src);
		if (nm.type == ND_NS && in->proxy.proxy_nd &&
		    !is_own(fwd_engine_current(sp->e), in->rt, AF_INET6, nm.target, NULL))
			ib_proxy_nd(sp, in, &nm);
	}
}

/* ---- local delivery: UDP to the bound port, echo ----------------------------------- */

/* A UDP datagram to us: to the bound handler when it is for its port and whole (see
 * fwd_udp_parse). True when it was taken. */
static bool udp_in(struct fwd_sp *sp, const struct fwd_msg *m)
{
	struct fwd_udp u;

	if (!sp->udp_fn || !fwd_udp_parse(m->data, m->len, &u) || u.dport != sp->udp_port)
		return false;
	sp->st.r[FWD_SP_UDP_DELIVERED]++;
	sp->udp_fn(sp->udp_ctx, m->ifindex, &u.src, &u.dst, u.sport, u.ttl, u.payload, u.len);
	return true;
}

/* IPv4 UDP to port 67 for us: to the DHCP relay. Broadcasts come only from relaying
 * interfaces (the workers punt those there alone); unicasts to our addresses from any
 * (the servers' replies to giaddr arrive where the servers are). True when taken. */
static bool dhcp_in(struct fwd_sp *sp, const struct fwd_msg *m)
{
	struct fwd_udp u;

	if (!sp->dhcp_fn || !fwd_udp_parse(m->data, m->len, &u) ||
	    u.dport != (u.dst.family == AF_INET ? DHCP_SERVER_PORT : DHCP6_SERVER_PORT))
		return false;
	sp->st.r[FWD_SP_UDP_DELIVERED]++;
	sp->dhcp_fn(sp->dhcp_ctx, m->ifindex, &u.src, &u.dst, u.sport, u.payload, u.len);
	return true;
}

void fwd_sp_dhcp_bind(struct fwd_engine *e, uint32_t ifmask, fwd_sp_dhcp_fn fn, void *ctx)
{
	struct fwd_sp *sp = e->sp;

	if (!sp)
		return;
	sp->dhcp_fn = fn;
	sp->dhcp_ctx = ctx;
	sp->dhcp_ifmask = fn ? ifmask & ~1u : 0;
	atomic_store_explicit(&e->dhcp_ifmask, sp->dhcp_ifmask, memory_order_relaxed);
}

void fwd_sp_mcast_bind(struct fwd_engine *e, uint32_t ifmask, fwd_sp_mcast_fn fn, void *ctx)
{
	struct fwd_sp *sp = e->sp;

	if (!sp)
		return;
	sp->mcast_fn = fn;
	sp->mcast_ctx = ctx;
	atomic_store_explicit(&e->mcast_ifmask, fn ? ifmask & ~1u : 0, memory_order_relaxed);
}

int fwd_sp_send_mcast(struct fwd_engine *e, uint32_t ifindex, const uint8_t *ip, size_t len)
{
	const struct fwd_if *f = sp_if(e, ifindex);
	bool v4 = len >= IP4_HDR_LEN && ip[0] >> 4 == 4;
	uint16_t et = v4 ? ETHF_TYPE_IPV4 : ETHF_TYPE_IPV6;

	if (!f || (!v4 && (len < IP6_HDR_LEN || ip[0] >> 4 != 6)))
		return -EINVAL;
	if (!f->up)
		return -ENODEV;
	if (len > f->mtu)
		return -EMSGSIZE;
	if (f->kind == FWD_IF_ETH) {
		uint8_t frame[ETHF_HLEN + FWD_MSG_DATA];

		if (len > FWD_MSG_DATA - ETHF_HLEN)
			return -EMSGSIZE;
		/* RFC 1112 6.4: 01:00:5e + the group's low 23 bits; RFC 2464 7: 33:33 + the
		 * low 32 bits */
		if (v4) {
			memcpy(frame, "\x01\x00\x5e", 3);
			frame[3] = ip[17] & 0x7f;
			memcpy(frame + 4, ip + 18, 2);
		} else {
			memcpy(frame, "\x33\x33", 2);
			memcpy(frame + 2, ip + 36, 4);
		}
		memcpy(frame + 6, f->mac, 6);
		ip_put16(frame + 12, et);
		memcpy(frame + ETHF_HLEN, ip, len);
		return fwd_sp_send_eth(e, ifindex, frame, ETHF_HLEN + len);
	}
	if (f->kind == FWD_IF_IPOIB && f->link) {
		union ib_gid mgid;
		struct ibp_buf *b;
		int r = v4 ? ipoib_mgid_from_ipv4(ip_be32(ip + 16), ipoib_link_pkey(f->link),
						  IB_MGID_SCOPE_LINK, &mgid)
			   : ipoib_mgid_from_ipv6(ip + 24, ipoib_link_pkey(f->link),
						  IB_MGID_SCOPE_LINK, &mgid);

		if (r < 0)
			return r;
		b = ipoib_link_buf(f->link);
		if (!b)
			return -ENOBUFS;
		if (b->cap < IPOIB_ENCAP_LEN + len) {
			f->ib_ops->buf_put(f->ib_port, b);
			return -EMSGSIZE;
		}
		memcpy(b->data + IPOIB_ENCAP_LEN, ip, len);
		b->len = (uint32_t)len;
		r = ipoib_link_xmit_mcast(f->link, &mgid, et, b);
		return r < 0 ? r : 0;
	}
	return -EINVAL;
}

int fwd_sp_udp_bind(struct fwd_engine *e, uint16_t port, fwd_sp_udp_fn fn, void *ctx)
{
	struct fwd_sp *sp = e->sp;

	if (!sp)
		return -ENODEV;
	if (fn && (sp->udp_fn || !port))
		return -EBUSY;
	sp->udp_port = fn ? port : 0;
	sp->udp_fn = fn;
	sp->udp_ctx = ctx;
	atomic_store_explicit(&e->ctl_udp_port, sp->udp_port, memory_order_relaxed);
	return 0;
}

static bool unresolved(struct fwd_sp *sp, struct fwd_msg *m);

static int send_udp_nh(struct fwd_sp *sp, const struct fwd_if *out, const struct ip_addr *src,
		       const struct ip_addr *dst, const uint8_t *nh, uint16_t sport, uint16_t dport,
		       const void *payload, size_t len);

int fwd_sp_send_udp(struct fwd_engine *e, uint32_t ifindex, const struct ip_addr *src,
		    const struct ip_addr *dst, uint16_t sport, uint16_t dport, const void *payload,
		    size_t len)
{
	struct fwd_sp *sp = e->sp;
	const struct fwd_if *out = sp_if(e, ifindex);

	if (!sp || src->family != dst->family ||
	    (src->family != AF_INET && src->family != AF_INET6))
		return -EINVAL;
	if (!out || !out->up)
		return -ENODEV;
	return send_udp_nh(sp, out, src, dst, dst->bytes, sport, dport, payload, len);
}

int fwd_sp_send_udp_routed(struct fwd_engine *e, struct rt_table *rt, const struct ip_addr *dst,
			   uint16_t sport, uint16_t dport, const void *payload, size_t len,
			   uint32_t *ifindex)
{
	struct fwd_sp *sp = e->sp;
	const struct rt_fib_nh *nh = sp ? rt_lookup(rt ? rt : e->rt, dst, 0) : NULL;
	struct ip_addr src = { .family = dst->family };
	const struct fwd_if *out;
	const uint8_t *a;

	if (!nh || (nh->type != RT_NH_GATEWAY && nh->type != RT_NH_CONNECTED) ||
	    !(out = sp_if(e, nh->ifindex)) || !(a = if_src(out, dst->family, dst->bytes)))
		return -ENETUNREACH;
	if (!out->up)
		return -ENODEV;
	if (ifindex)
		*ifindex = out->index;
	memcpy(src.bytes, a, dst->family == AF_INET ? 4 : 16);
	return send_udp_nh(sp, out, &src, dst, nh->type == RT_NH_GATEWAY ? nh->gw : dst->bytes,
			   sport, dport, payload, len);
}

int fwd_sp_send_udp_ll(struct fwd_engine *e, uint32_t ifindex, const struct ip_addr *src,
		       const struct ip_addr *dst, uint16_t sport, uint16_t dport,
		       const void *payload, size_t len, const uint8_t *lladdr)
{
	static const uint8_t bcast_mac[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct fwd_sp *sp = e->sp;
	const struct fwd_if *out = sp_if(e, ifindex);
	size_t n;
	int ret;

	if (!sp || src->family != AF_INET || dst->family != AF_INET)
		return -EINVAL;
	if (!out || !out->up)
		return -ENODEV;
	if (IP4_HDR_LEN + 8 + len > out->mtu)
		return -EMSGSIZE;
	if (out->kind == FWD_IF_ETH) {
		uint8_t frame[ETHF_HLEN + FWD_MSG_DATA];

		n = fwd_udp_build(frame + ETHF_HLEN, sizeof(frame) - ETHF_HLEN, src, dst, sport,
				  dport, payload, len);
		if (!n)
			return -EMSGSIZE;
		memcpy(frame, lladdr ? lladdr : bcast_mac, 6);
		memcpy(frame + 6, out->mac, 6);
		frame[12] = ETHF_TYPE_IPV4 >> 8;
		frame[13] = ETHF_TYPE_IPV4 & 0xff;
		ret = fwd_sp_send_eth(e, ifindex, frame, ETHF_HLEN + n);
	} else {
		struct ibp_buf *b = out->link ? ipoib_link_buf(out->link) : NULL;
		struct ipoib_hwaddr hw;

		if (!b)
			return -ENOBUFS;
		n = fwd_udp_build(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, src, dst,
				  sport, dport, payload, len);
		ret = n ? 0 : -EMSGSIZE;
		if (!ret && lladdr)
			ret = ipoib_hwaddr_decode(lladdr, IPOIB_HWADDR_LEN, &hw) < 0 ? -EINVAL : 0;
		if (ret < 0) {
			out->ib_ops->buf_put(out->ib_port, b);
			return ret;
		}
		b->len = (uint32_t)n;
		/* The link owns b from here, sent or not. */
		ret = lladdr ? ipoib_link_xmit_hw(out->link, &hw, ETHF_TYPE_IPV4, b)
			     : ipoib_link_xmit_bcast(out->link, ETHF_TYPE_IPV4, b);
		ret = ret < 0 ? -ENOBUFS : 0;
	}
	if (ret == 0)
		sp->st.r[FWD_SP_UDP_SENT]++;
	return ret;
}

static int send_udp_nh(struct fwd_sp *sp, const struct fwd_if *out, const struct ip_addr *src,
		       const struct ip_addr *dst, const uint8_t *nh, uint16_t sport, uint16_t dport,
		       const void *payload, size_t len)
{
	struct fwd_engine *e = sp->e;
	size_t hl = src->family == AF_INET ? IP4_HDR_LEN : IP6_HDR_LEN, n;
	struct fwd_msg *m;

	if (hl + 8 + len > FWD_MSG_DATA || hl + 8 + len > out->mtu)
		return -EMSGSIZE;
	m = ctl_msg(sp, out, FWD_PCLASS_CONTROL);
	if (!m)
		return -ENOBUFS;
	n = fwd_udp_build(m->data, FWD_MSG_DATA, src, dst, sport, dport, payload, len);
	m->type = FWD_MSG_TX_IP;
	m->own = true;
	m->family = src->family;
	memset(m->nh, 0, 16);
	memcpy(m->nh, nh, src->family == AF_INET ? 4 : 16);
	m->len = (uint32_t)n;
	sp->st.r[FWD_SP_UDP_SENT]++;
	if (!fwd_neigh_usable(out, src->family, nh)) {
		/* The worker sends our own packets only to known neighbours: resolve here
		 * (ARP/ND, or the IPoIB link's ARP and PathRecord) with this one parked. */
		m->punt = FWD_PUNT_UNRESOLVED;
		if (!unresolved(sp, m))
			fwd_msg_put(e, m, FWD_OWNER_CONTROL);
		return 0;
	}
	return ctl_enqueue(sp, m) < 0 ? -ENOBUFS : 0;
}

int fwd_sp_echo_bind(struct fwd_engine *e, uint16_t id, fwd_sp_echo_fn fn, void *ctx)
{
	struct fwd_sp *sp = e->sp;

	if (!sp)
		return -ENODEV;
	if (fn && sp->echo_fn)
		return -EBUSY;
	sp->echo_id = id;
	sp->echo_fn = fn;
	sp->echo_ctx = ctx;
	atomic_store_explicit(&e->ctl_echo_id, fn ? 0x10000u | id : 0, memory_order_relaxed);
	return 0;
}

int fwd_sp_send_echo(struct fwd_engine *e, struct rt_table *rt, const struct ip_addr *dst,
		     uint16_t id, uint16_t seq)
{
	struct fwd_sp *sp = e->sp;
	const struct rt_fib_nh *nh = sp ? rt_lookup(rt ? rt : e->rt, dst, 0) : NULL;
	const struct fwd_if *out;
	const uint8_t *src;
	uint8_t p[IP6_HDR_LEN + 16];
	size_t hl = dst->family == AF_INET ? IP4_HDR_LEN : IP6_HDR_LEN, len = hl + 16;
	uint64_t before;

	if (!nh || (nh->type != RT_NH_GATEWAY && nh->type != RT_NH_CONNECTED) ||
	    !(out = sp_if(e, nh->ifindex)) || !(src = if_src(out, dst->family, dst->bytes)))
		return -ENETUNREACH;
	memset(p, 0, sizeof(p));
	ip_hdr_build(p, dst->family, src, dst->bytes, dst->family == AF_INET ? 1 : 58, 64, 16,
		     false);
	p[hl] = dst->family == AF_INET ? 8 : 128; /* echo request */
	ip_put16(p + hl + 4, id);
	ip_put16(p + hl + 6, seq);
	memcpy(p + hl + 8, "ibgw-tb", 8);
	ip_put16(p + hl + 2, (uint16_t)~ip_csum_fold(ip_csum_add(
				 dst->family == AF_INET ? 0 : ip6_pseudo_sum(p + 8, p + 24, 16, 58),
				 p + hl, 16)));
	before = sp->st.r[FWD_SP_NO_MSG] + sp->st.r[FWD_SP_RING_FULL];
	send_own_ip(sp, rt ? rt : e->rt, dst->family, p, len, FWD_PCLASS_CONTROL);
	return sp->st.r[FWD_SP_NO_MSG] + sp->st.r[FWD_SP_RING_FULL] > before ? -ENOBUFS : 0;
}

void fwd_sp_rs_bind(struct fwd_engine *e, fwd_sp_rs_fn fn, void *ctx)
{
	e->sp->rs_fn = fn;
	e->sp->rs_ctx = ctx;
}

/* An echo reply to us: to the bound handler when its identifier is ours. */
static bool echo_reply_in(struct fwd_sp *sp, int family, const uint8_t *ip, const uint8_t *icmp,
			  size_t len)
{
	struct ip_addr from = { .family = (uint8_t)family };

	uint64_t sum = family == AF_INET ? 0 : ip6_pseudo_sum(ip + 8, ip + 24, (uint32_t)len, 58);

	if (!sp->echo_fn || len < 8 || icmp[0] != (family == AF_INET ? 0 : 129) ||
	    ip_be16(icmp + 4) != sp->echo_id || ip_csum_fold(ip_csum_add(sum, icmp, len)) != 0xffff)
		return false;
	memcpy(from.bytes, ip + (family == AF_INET ? 12 : 8), family == AF_INET ? 4 : 16);
	sp->echo_fn(sp->echo_ctx, &from, ip_be16(icmp + 4), ip_be16(icmp + 6));
	return true;
}

int fwd_sp_announce_own(struct fwd_engine *e, uint32_t ifindex, int family, const uint8_t *addr)
{
	const struct fwd_if *a = sp_if(e, ifindex);
	uint64_t before;

	if (!e->sp || !a || !a->up)
		return -ENODEV;
	before = e->sp->st.r[FWD_SP_ANNOUNCED];
	announce_on(e->sp, a, family, addr);
	return e->sp->st.r[FWD_SP_ANNOUNCED] > before ? 0 : -ENOBUFS;
}

static void local_in(struct fwd_sp *sp, struct fwd_msg *m)
{
	uint8_t *p = m->data;
	size_t len = m->len;
	uint8_t tmp[16];

	if (len >= IP4_HDR_LEN && (p[0] >> 4) == 4) {
		struct ip4_info ii;

		if (dhcp_in(sp, m) || udp_in(sp, m))
			return;
		if (ip4_validate(p, len, &ii) == IP_OK && ii.proto == 1 && !ii.frag_off && !ii.mf &&
		    echo_reply_in(sp, AF_INET, p, p + ii.hdr_len, ii.tot_len - ii.hdr_len))
			return;
		if (ip4_validate(p, len, &ii) != IP_OK || ii.proto != 1 || ii.frag_off || ii.mf ||
		    ii.tot_len < ii.hdr_len + 8 || p[ii.hdr_len] != 8) {
			sp->st.r[FWD_SP_LOCAL_DROPPED]++;
			return;
		}
		len = ii.tot_len;
		memcpy(tmp, p + 12, 4);
		memcpy(p + 12, p + 16, 4);
		memcpy(p + 16, tmp, 4);
		p[8] = 64;
		p[10] = p[11] = 0;
		ip_put16(p + 10, (uint16_t)~ip_csum_fold(ip_csum_add(0, p, ii.hdr_len)));
		p[ii.hdr_len] = 0; /* echo reply */
		p[ii.hdr_len + 2] = p[ii.hdr_len + 3] = 0;
		ip_put16(p + ii.hdr_len + 2,
			 (uint16_t)~ip_csum_fold(ip_csum_add(0, p + ii.hdr_len, len - ii.hdr_len)));
		send_own_ip(sp, if_rt(sp->e, m->ifindex), AF_INET, p, len, FWD_PCLASS_LOCAL);
		sp->st.r[FWD_SP_ECHO_ANSWERED]++;
		return;
	}
	if (len >= IP6_HDR_LEN && (p[0] >> 4) == 6) {
		struct ip6_info ii;
		size_t l4;

		if (dhcp_in(sp, m) || udp_in(sp, m))
			return;
		if (ip6_validate(p, len, &ii) == IP_OK && ii.proto == 58 && !ii.n_ext &&
		    echo_reply_in(sp, AF_INET6, p, p + ii.l4_off, ii.pkt_len - ii.l4_off))
			return;
		if (ip6_validate(p, len, &ii) != IP_OK || ii.proto != 58 || ii.is_frag ||
		    ii.pkt_len < ii.l4_off + 8u || p[ii.l4_off] != 128 ||
		    ip6_is_multicast(p + 24)) {
			sp->st.r[FWD_SP_LOCAL_DROPPED]++;
			return;
		}
		/* Reply without the extension headers: fixed header + ICMPv6. */
		l4 = ii.pkt_len - ii.l4_off;
		memmove(p + IP6_HDR_LEN, p + ii.l4_off, l4);
		len = IP6_HDR_LEN + l4;
		memcpy(tmp, p + 8, 16);
		memcpy(p + 8, p + 24, 16);
		memcpy(p + 24, tmp, 16);
		ip_put16(p + 4, (uint16_t)l4);
		p[6] = 58;
		p[7] = 64;
		p[IP6_HDR_LEN] = 129;
		p[IP6_HDR_LEN + 2] = p[IP6_HDR_LEN + 3] = 0;
		ip_put16(p + IP6_HDR_LEN + 2, (uint16_t)~ip_csum_fold(ip_csum_add(
						  ip6_pseudo_sum(p + 8, p + 24, (uint32_t)l4, 58),
						  p + IP6_HDR_LEN, l4)));
		send_own_ip(sp, if_rt(sp->e, m->ifindex), AF_INET6, p, len, FWD_PCLASS_LOCAL);
		sp->st.r[FWD_SP_ECHO_ANSWERED]++;
		return;
	}
	sp->st.r[FWD_SP_LOCAL_DROPPED]++;
}

/* ---- parking ------------------------------------------------------------------------ */

/* A parked packet could not be delivered: host unreachable to its source. */
static void unreachable(struct fwd_sp *sp, struct fwd_msg *m)
{
	int family = m->family;
	const uint8_t *p = m->data;
	uint8_t out[ICMP6_ERR_MAX];
	const uint8_t *src;
	uint32_t where = 0;
	size_t olen;
	struct icmp_err err = { .type = family == AF_INET ? ICMP4_DEST_UNREACH : ICMP6_DEST_UNREACH,
				.code = family == AF_INET ? ICMP4_CODE_HOST : ICMP6_CODE_ADDR };
	const struct fwd_snap *s = fwd_engine_current(sp->e);
	const struct fwd_if *in, *at;
	enum icmp_reason r;

	if (m->len < (family == AF_INET ? IP4_HDR_LEN : IP6_HDR_LEN))
		return;
	if (!icmp_rl_allow(&sp->rl, family, family == AF_INET ? p + 12 : p + 8, err.type, err.code,
			   now_ns(sp->e))) {
		sp->st.r[FWD_SP_ICMP_LIMITED]++;
		return;
	}
	/* The source: our address on the interface the packet waited for, else on another
	 * interface of its tenant. */
	at = sp_if(sp->e, m->ifindex);
	in = at && if_src(at, family, NULL) ? at : NULL;
	for (uint32_t k = 1; k < FWD_IF_MAX && at && !in; k++)
		if (s->ifs[k].index && s->ifs[k].rt == at->rt && if_src(&s->ifs[k], family, NULL))
			in = &s->ifs[k];
	src = in ? if_src(in, family, NULL) : NULL;
	if (!src)
		return;
	(void)where;
	err.src = src;
	r = family == AF_INET ? icmp4_error(&err, p, m->len, out, ICMP4_ERR_MAX, &olen)
			      : icmp6_error(&err, p, m->len, out, ICMP6_ERR_MAX, &olen);
	if (r != ICMP_OK)
		return;
	send_own_ip(sp, if_rt(sp->e, m->ifindex), family, out, olen, FWD_PCLASS_UNRES);
	sp->st.r[FWD_SP_UNREACH_SENT]++;
}

static void neigh_solicit(void *ctx, const struct neigh_entry *ne, const struct neigh_link *ll)
{
	struct fwd_nctx *nc = ctx;
	struct fwd_sp *sp = nc->e->sp;
	const struct fwd_if *f = sp_if(nc->e, nc->ifindex);
	int family = neigh_entry_family(ne);
	const uint8_t *addr = neigh_entry_addr(ne);
	uint8_t body[ND_MAX_LEN], dmac[6];
	const uint8_t *src;
	size_t n;

	if (!f || !f->up)
		return;
	src = if_src(f, family, addr);
	if (!src)
		return;
	if (family == AF_INET) {
		n = arp_build_request(body, sizeof(body), ARP_HTYPE_ETHER, f->mac, ip_be32(src),
				      ip_be32(addr));
		if (ll)
			memcpy(dmac, ll->addr, 6);
		else
			memset(dmac, 0xff, 6);
		if (n)
			eth_reply(sp, f, dmac, ETHF_TYPE_ARP, body, n);
		return;
	}
	n = nd_build_ns(body, sizeof(body), ND_LINK_ETHER, src, ll ? addr : NULL, addr, f->mac);
	if (ll) {
		memcpy(dmac, ll->addr, 6);
	} else {
		uint8_t grp[16];

		nd_solicited_node(addr, grp);
		nd_mcast_mac(grp, dmac);
	}
	if (n)
		eth_reply(sp, f, dmac, ETHF_TYPE_IPV6, body, n);
}

/* A message of a retired slot (engine/engine.h) that still has to go out: copied into a
 * control message of the egress interface's worker, the original back to its pool.
 * Returns false (message recycled) when it cannot go. */
static bool resend(struct fwd_sp *sp, struct fwd_msg *m)
{
	const struct fwd_if *f = sp_if(sp->e, m->ifindex);
	struct fwd_msg *c = f ? ctl_msg(sp, f, (enum fwd_pclass)m->cls) : NULL;

	if (c) {
		uint8_t owner = c->owner, cls = c->cls;
		uint16_t worker = c->worker;

		memcpy(c, m, offsetof(struct fwd_msg, data) + m->len);
		c->owner = owner;
		c->cls = cls;
		c->worker = worker;
	} else if (m->type == FWD_MSG_TX_IB && m->ib_send.buf && f) {
		f->ib_ops->buf_put(f->ib_port, m->ib_send.buf);
	}
	fwd_msg_recycle(sp->e, m);
	return c && ctl_enqueue(sp, c) == 0;
}

/* A worker's message leaves the neighbour queues (sent, or dropped). */
static void parked_done(struct fwd_engine *e, const struct fwd_msg *m)
{
	if (m->owner == FWD_OWNER_WORKER && e->wk[m->worker].parked)
		e->wk[m->worker].parked--;
}

/* A parked message may go: back to its worker, which runs the egress stage again. */
static void neigh_xmit(void *ctx, const struct neigh_entry *ne, const struct neigh_link *ll,
		       void *pkt)
{
	struct fwd_nctx *nc = ctx;
	struct fwd_sp *sp = nc->e->sp;
	struct fwd_msg *m = pkt;
	void *p = m;

	(void)ne;
	(void)ll;
	parked_done(nc->e, m);
	m->type = FWD_MSG_TX_IP; /* own as parked: a forwarded packet's TTL goes down once */
	if (nc->e->wk[m->worker].retired) {
		sp->st.r[resend(sp, m) ? FWD_SP_RESOLVED_SENT : FWD_SP_UNRES_DROPPED]++;
		return;
	}
	sp->st.r[FWD_SP_RESOLVED_SENT]++;
	if (ring_enqueue_burst(nc->e->wk[m->worker].to_wk, &p, 1) != 1) {
		/* Cannot happen (the ring holds both pools); keep the message safe. */
		sp->st.r[FWD_SP_RING_FULL]++;
		return;
	}
	ring_wake_if_sleeping(nc->e->wk[m->worker].to_wk);
}

void fwd_sp_slot_retired(struct fwd_engine *e, unsigned w)
{
	struct ring *r = e->wk[w].to_wk;
	void *v[32];
	unsigned n;

	while ((n = ring_dequeue_burst(r, v, 32)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			struct fwd_msg *m = v[i];

			if (m->owner == FWD_OWNER_WORKER && m->type != FWD_MSG_TX_IP)
				fwd_msg_recycle(e, m); /* a punt handed back */
			else if (!resend(e->sp, m))
				e->sp->st.r[FWD_SP_RESEND_FAILED]++;
		}
	}
}

static void neigh_drop(void *ctx, void *pkt)
{
	struct fwd_nctx *nc = ctx;
	struct fwd_msg *m = pkt;

	parked_done(nc->e, m);
	nc->e->sp->st.r[FWD_SP_UNRES_DROPPED]++;
	unreachable(nc->e->sp, m);
	fwd_msg_put(nc->e, m, FWD_OWNER_CONTROL);
}

const struct neigh_ops fwd_sp_neigh_ops = {
	.solicit = neigh_solicit,
	.xmit = neigh_xmit,
	.drop = neigh_drop,
};

/* Returns true when the message was kept (parked). */
static bool unresolved(struct fwd_sp *sp, struct fwd_msg *m)
{
	const struct fwd_if *out = sp_if(sp->e, m->ifindex);
	unsigned *parked = &sp->e->wk[m->worker].parked;
	int family = m->family, ret;

	if (!out || !out->neigh) {
		sp->st.r[FWD_SP_UNRES_DISCARDED]++;
		return false;
	}
	/* No packet: it was too big for a message (engine/worker.c do_punt). Resolution
	 * starts all the same, so that a flow of big packets alone is not lost for good. */
	if (m->len == 0) {
		sp->st.r[FWD_SP_UNRES_DISCARDED]++;
		if (out->kind == FWD_IF_ETH)
			(void)neigh_resolve(out->neigh, family, m->nh, NULL);
		else if (out->link)
			(void)ipoib_link_resolve(out->link, family, m->nh);
		return false;
	}
	if (out->kind == FWD_IF_ETH) {

		/* A worker's messages parked here hold its UNRES share until resolution ends
		 * (up to mcast_probes * retrans_ms): at most park_max of them, so that a scan
		 * leaves that share to packets in flight. Past it, resolution still starts,
		 * without the packet; the queue of each destination is unres_qlen long (its
		 * oldest dropped, counted in unresolved_dropped). */
		if (m->owner == FWD_OWNER_WORKER && *parked >= sp->e->cfg.punt.park_max) {
			sp->st.r[FWD_SP_PARK_LIMITED]++;
			sp->st.r[FWD_SP_UNRES_DISCARDED]++;
			(void)neigh_resolve(out->neigh, family, m->nh, NULL);
			return false;
		}
		if (m->owner == FWD_OWNER_WORKER)
			(*parked)++;
		sp->st.r[FWD_SP_PARKED]++;
		ret = neigh_resolve(out->neigh, family, m->nh, m); /* owns m from here */
		(void)ret;
		return true;
	}
	/* IPoIB: the link parks and resolves (ARP/NS, PathRecord, AH); the packet goes as
	 * an IB buffer. TTL first: the worker did not decrement a punted packet. */
	if (out->link) {
		struct ibp_buf *b = ipoib_link_buf(out->link);

		if (!b) {
			sp->st.r[FWD_SP_UNRES_DISCARDED]++;
			return false;
		}
		if (m->len + IPOIB_ENCAP_LEN > b->cap ||
		    (!m->own && (family == AF_INET ? ip4_ttl_decrement(m->data)
						   : ip6_hop_decrement(m->data)) != IP_OK)) {
			out->ib_ops->buf_put(out->ib_port, b);
			sp->st.r[FWD_SP_UNRES_DISCARDED]++;
			return false;
		}
		memcpy(b->data + IPOIB_ENCAP_LEN, m->data, m->len);
		b->len = m->len;
		sp->st.r[FWD_SP_PARKED]++;
		sp->ib_now = b;
		sp->ib_now_msg = m;
		sp->ib_now_posted = false;
		ret = ipoib_link_xmit_ip(out->link, family, m->nh,
					 family == AF_INET ? ETHF_TYPE_IPV4 : ETHF_TYPE_IPV6, b);
		sp->ib_now = NULL;
		/* Queued by the link (1, not posted meanwhile): a held message of a worker
		 * waits for the post (SP_IB_HELD). */
		if (ret != 1 || sp->ib_now_posted || !m->held || sp->n_ib_held == SP_IB_HELD ||
		    *parked >= sp->e->cfg.punt.park_max)
			return false;
		(*parked)++;
		ib_held_add(sp, b, m);
		return true;
	}
	sp->st.r[FWD_SP_UNRES_DISCARDED]++;
	return false;
}

/* ---- the rings ---------------------------------------------------------------------- */

static void handle(struct fwd_sp *sp, struct fwd_msg *m)
{
	const struct fwd_if *in = sp_if(sp->e, m->ifindex);
	bool kept = false;

	sp->st.msgs++;
	if (!in) {
		sp->st.r[FWD_SP_IF_GONE]++;
		fwd_msg_put(sp->e, m, FWD_OWNER_CONTROL);
		return;
	}
	switch (m->punt) {
	case FWD_PUNT_ARP:
		if (m->type == FWD_MSG_PUNT_ETH && m->len >= ETHF_HLEN)
			eth_arp(sp, in, m->data, m->len);
		else if (m->type == FWD_MSG_PUNT_IB)
			ib_ctl(sp, in, m);
		break;
	case FWD_PUNT_ND:
		if (m->type == FWD_MSG_PUNT_ETH && m->len >= ETHF_HLEN)
			eth_nd(sp, in, m->data, m->len);
		else if (m->type == FWD_MSG_PUNT_IB)
			ib_ctl(sp, in, m);
		break;
	case FWD_PUNT_LOCAL:
		local_in(sp, m);
		break;
	case FWD_PUNT_UNRESOLVED:
		m->own = false; /* a forwarded packet */
		kept = unresolved(sp, m);
		break;
	case FWD_PUNT_MCAST:
		if (sp->mcast_fn)
			sp->mcast_fn(sp->mcast_ctx, m->ifindex, m->data, m->len);
		break;
	default:
		break;
	}
	if (!kept)
		fwd_msg_put(sp->e, m, FWD_OWNER_CONTROL);
}

unsigned fwd_sp_poll(struct fwd_engine *e)
{
	struct fwd_sp *sp = e->sp;
	unsigned total = 0;

	for (unsigned w = 0; w < e->n_slots; w++) {
		struct ring *r = e->wk[w].to_ctl;
		void *v[32];
		unsigned n;

		while ((n = ring_dequeue_burst(r, v, 32)) > 0) {
			for (unsigned i = 0; i < n; i++) {
				struct fwd_msg *m = v[i];

				if (m->owner == FWD_OWNER_CONTROL)
					fwd_msg_recycle(e, m); /* a return */
				else
					handle(sp, m);
			}
			total += n;
		}
	}
	return total;
}

uint64_t fwd_sp_tick(struct fwd_engine *e)
{
	const struct fwd_snap *s = fwd_engine_current(e);
	uint64_t next = 1000, now = now_ns(e);

	for (unsigned i = e->sp->n_ib_held; i-- > 0;)
		if (now - e->sp->ib_held[i].since_ns >= SP_IB_HELD_MS * 1000000ull)
			ib_held_end(e->sp, i);

	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		if (e->own_neigh[k] && s->ifs[k].neigh) {
			uint64_t t = neigh_tick(s->ifs[k].neigh);

			if (t < next)
				next = t;
		}
	}
	return next;
}

static void on_ring(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct fwd_engine *e = arg;

	(void)loop;
	(void)fd;
	(void)events;
	for (unsigned w = 0; w < e->n_slots; w++)
		ring_sleep_done(e->wk[w].to_ctl);
	fwd_sp_poll(e);
	for (unsigned w = 0; w < e->n_slots; w++)
		if (!ring_sleep_prepare(e->wk[w].to_ctl))
			fwd_sp_poll(e);
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct fwd_engine *e = arg;
	uint64_t next;

	(void)loop;
	fwd_sp_poll(e);
	next = fwd_sp_tick(e);
	evtimer_start(t, next ? next : 1, 0);
}

int fwd_sp_attach(struct fwd_engine *e, struct evloop *loop)
{
	struct fwd_sp *sp = e->sp;

	if (!loop)
		return 0;
	sp->loop = loop;
	for (unsigned w = 0; w < e->n_slots; w++) {
		int ret = fwd_sp_slot_added(e, w);

		if (ret < 0)
			return ret;
	}
	sp->timer = evtimer_new(loop, on_timer, e);
	if (!sp->timer)
		return -ENOMEM;
	evtimer_start(sp->timer, 100, 0);
	return 0;
}

int fwd_sp_slot_added(struct fwd_engine *e, unsigned w)
{
	int ret;

	if (!e->sp->loop)
		return 0;
	ret = evloop_add_fd(e->sp->loop, ring_fd(e->wk[w].to_ctl), EPOLLIN, on_ring, e);
	if (ret < 0)
		return ret;
	(void)ring_sleep_prepare(e->wk[w].to_ctl);
	return 0;
}

void fwd_sp_detach(struct fwd_engine *e)
{
	struct fwd_sp *sp = e->sp;

	if (!sp || !sp->loop)
		return;
	for (unsigned w = 0; w < e->n_slots; w++)
		evloop_del_fd(sp->loop, ring_fd(e->wk[w].to_ctl));
	evtimer_free(sp->timer);
	sp->timer = NULL;
	sp->loop = NULL;
}

void fwd_sp_stats(const struct fwd_engine *e, struct fwd_sp_stats *out)
{
	*out = e->sp->st;
}

int fwd_sp_new(struct fwd_engine *e)
{
	struct fwd_sp *sp = calloc(1, sizeof(*sp));
	struct icmp_rl_cfg pc = { .per_dst_rate = 100,
				  .per_dst_burst = 20,
				  .total_rate = 0,
				  .v4_prefix_len = 32,
				  .v6_prefix_len = 128,
				  .seed = e->seed };
	int ret;

	if (!sp)
		return -ENOMEM;
	sp->e = e;
	ret = icmp_rl_init(&sp->rl, sp->rl_b, SP_RL_BUCKETS, &e->cfg.icmp_rl);
	if (ret == 0)
		ret = icmp_rl_init(&sp->prl, sp->prl_b, SP_RL_BUCKETS, &pc);
	if (ret < 0) {
		free(sp);
		return ret;
	}
	e->sp = sp;
	return 0;
}

void fwd_sp_free(struct fwd_engine *e)
{
	if (!e->sp)
		return;
	fwd_sp_detach(e);
	free(e->sp);
	e->sp = NULL;
}
