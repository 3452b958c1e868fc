/*
 * IP multicast across the gateway: IGMP / MLD membership per interface, the querier,
 * the IB joins and the forwarding (see dp_mcast.h).
 *
 * Threads: control thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <json-c/json.h>

#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_json.h"
#include "gateway/dp_mcast.h"
#include "lib/evloop.h"
#include "lib/ib_gid.h"
#include "lib/ipoib.h"
#include "lib/log.h"
#include "mgmt/ctl_proto.h"
#include "mgmt/ctl_server.h"
#include "mgmt/metrics_http.h"
#include "pkt/igmp.h"
#include "pkt/ip.h"
#include "pkt/mld.h"
#include "table/mgroup.h"

#define MC_MAX_IFS    DP_MAX_LINKS
#define MC_RECHECK_MS 1000
#define MC_PKT_MAX    4200

struct mc_stats {
	uint64_t reports, leaves, queries_heard, bad; /* IGMP / MLD received */
	uint64_t queries_sent;
	uint64_t rx_data;          /* group traffic received here */
	uint64_t forwarded;        /* copies sent out of this interface */
	uint64_t no_members;       /* received, no other interface wants it */
	uint64_t ttl_expired;      /* received with TTL / hop limit <= 1 */
	uint64_t link_scope;       /* received to a link-local group or from a link-local source */
	uint64_t not_served;       /* failover: this box does not serve an end */
	uint64_t rate_limited;     /* copies dropped by rate_limit_pps (into this interface) */
	uint64_t send_failed;      /* copies not sent (no buffer, too big, down) */
	uint64_t joins, leaves_ib; /* IPoIB: full joins made / left for other sides' members */
};

/* One interface that forwards multicast. Owner: control thread. */
struct mc_if {
	char name[GW_NAME_MAX];
	bool ib;
	struct gw_mcast_config cfg;
	bool configured;
	uint32_t ifindex;
	bool joined;           /* the report groups joined (MACs / MGIDs) */
	bool warned;           /* ... could not be: logged */
	const void *port;      /* the IPoIB link / Ethernet port they were joined on */
	uint32_t ifgen;        /* and its interface's fwd_if.gen (a rebuilt link may get
				* the address of the one it replaces back from malloc) */
	bool started;          /* querier started */
	struct mg_table *t;    /* members heard here */
	struct mg_table *full; /* IPoIB: groups whose MGID we joined full for other sides */
	struct mc_stats st;
};

struct dp_mcast {
	struct gw_dp *dp;
	struct evtimer *timer;
	struct mc_if ifs[MC_MAX_IFS];
	unsigned n;
};

static const uint8_t report_v4[2][4] = { { 224, 0, 0, 22 }, { 224, 0, 0, 2 } };

static struct mc_if *by_name(struct dp_mcast *mc, const char *name)
{
	for (unsigned i = 0; i < mc->n; i++)
		if (!strcmp(mc->ifs[i].name, name))
			return &mc->ifs[i];
	return NULL;
}

static struct mc_if *by_ifindex(struct dp_mcast *mc, uint32_t ifindex)
{
	for (unsigned i = 0; i < mc->n; i++)
		if (mc->ifs[i].configured && mc->ifs[i].ifindex == ifindex)
			return &mc->ifs[i];
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct mg_params params_of(const struct gw_mcast_config *c)
{
	return (struct mg_params){ .robustness = c->robustness,
				   .query_interval_ms = c->query_interval_s * 1000 };
}

static int mgid_of(const struct ip_addr *g, uint16_t pkey, union ib_gid *out)
{
	if (g->family == AF_INET)
		return ipoib_mgid_from_ipv4(ip_be32(g->bytes), pkey, IB_MGID_SCOPE_LINK, out);
	return ipoib_mgid_from_ipv6(g->bytes, pkey, IB_MGID_SCOPE_LINK, out);
}

/* Link-local groups never cross: 224.0.0.0/24, and IPv6 scopes 0..2. */
static bool link_scope(const struct ip_addr *g)
{
	if (g->family == AF_INET)
		return g->bytes[0] == 224 && !g->bytes[1] && !g->bytes[2];
	return (g->bytes[1] & 0x0f) <= 2;
}

/* ---- IB joins ------------------------------------------------------------------------- */

struct want_walk {
	struct dp_mcast *mc;
	struct mc_if *ib;
};

/* Whether an interface other than x has members of g. */
static bool wanted_elsewhere(struct dp_mcast *mc, const struct mc_if *x, const struct ip_addr *g)
{
	for (unsigned i = 0; i < mc->n; i++) {
		struct mc_if *o = &mc->ifs[i];

		if (o != x && o->configured && o->t && mg_find(o->t, g))
			return true;
	}
	return false;
}

static int join_cb(void *ctx, struct mg_group *g)
{
	struct want_walk *w = ctx;
	struct dp_link *k = dp_link_by_name(w->mc->dp, w->ib->name);
	union ib_gid mgid;
	bool created;

	if (mg_find(w->ib->full, &g->addr) || !k || !k->link ||
	    mgid_of(&g->addr, k->pkey, &mgid) < 0)
		return 0;
	if (ipoib_link_mcast_join(k->link, &mgid) == 0 &&
	    mg_report(w->ib->full, &g->addr, 0, &created)) {
		w->ib->st.joins++;
		log_info("%s: joined the MGID of a group with members on another side",
			 w->ib->name);
	}
	return 0;
}

struct leave_walk {
	struct dp_mcast *mc;
	struct mc_if *ib;
	bool all;
	bool have;
	struct ip_addr found;
};

static int leave_find_cb(void *ctx, struct mg_group *g)
{
	struct leave_walk *w = ctx;

	if (w->all || !wanted_elsewhere(w->mc, w->ib, &g->addr)) {
		w->found = g->addr;
		w->have = true;
		return 1;
	}
	return 0;
}

/* The IPoIB links' full memberships follow the other sides' members. */
static void sync_joins(struct dp_mcast *mc)
{
	for (unsigned i = 0; i < mc->n; i++) {
		struct mc_if *ib = &mc->ifs[i];
		struct dp_link *k;
		bool on;

		if (!ib->ib || !ib->full)
			continue;
		k = dp_link_by_name(mc->dp, ib->name);
		on = ib->configured && k && k->link && ipoib_link_is_up(k->link);
		if (on) {
			struct want_walk w = { mc, ib };

			for (unsigned j = 0; j < mc->n; j++)
				if (&mc->ifs[j] != ib && mc->ifs[j].configured && mc->ifs[j].t)
					mg_foreach(mc->ifs[j].t, join_cb, &w);
		}
		for (;;) {
			struct leave_walk lw = { .mc = mc, .ib = ib, .all = !on };
			union ib_gid mgid;

			mg_foreach(ib->full, leave_find_cb, &lw);
			if (!lw.have)
				break;
			if (k && k->link && mgid_of(&lw.found, k->pkey, &mgid) == 0) {
				(void)ipoib_link_mcast_leave(k->link, &mgid);
				/* still sent into (members on the link): send-only again */
				if (on && mg_find(ib->t, &lw.found))
					(void)ipoib_link_mcast_sendonly(k->link, &mgid);
			}
			mg_remove(ib->full, &lw.found);
			ib->st.leaves_ib++;
		}
	}
}

/* ---- sending -------------------------------------------------------------------------- */

/* Our source address of family on the interface: IPv4 its first address; IPv6 its
 * link-local one (IPoIB: the port GUID's, Ethernet: the MAC's EUI-64). */
static bool our_addr(struct dp_mcast *mc, const struct mc_if *r, int family, uint8_t out[16])
{
	const struct fwd_if *f =
	    r->ifindex ? fwd_snap_if(fwd_engine_current(mc->dp->e), r->ifindex) : NULL;
	struct dp_link *k = dp_link_by_name(mc->dp, r->name);

	if (!f)
		return false;
	if (family == AF_INET) {
		for (unsigned i = 0; i < f->n_addrs; i++)
			if (f->addrs[i].addr.family == AF_INET) {
				memcpy(out, f->addrs[i].addr.bytes, 4);
				return true;
			}
		return false;
	}
	if (r->ib) {
		union ib_gid gid;

		if (!k || !k->link)
			return false;
		ipoib_link_gid(k->link, &gid);
		ipoib_ipv6_link_local(ib_gid_guid(&gid), out);
		return true;
	}
	memset(out, 0, 16);
	out[0] = 0xfe;
	out[1] = 0x80;
	out[8] = f->mac[0] ^ 0x02;
	out[9] = f->mac[1];
	out[10] = f->mac[2];
	out[11] = 0xff;
	out[12] = 0xfe;
	memcpy(out + 13, f->mac + 3, 3);
	return true;
}

/* A general (g NULL) or group-specific query of family on r. */
static void send_query(struct dp_mcast *mc, struct mc_if *r, int family, const struct ip_addr *g)
{
	uint8_t pkt[MLD_QUERY_PKT_MAX], src[16];
	uint32_t qi = r->cfg.query_interval_s;
	size_t n;

	if (!our_addr(mc, r, family, src))
		return;
	if (family == AF_INET)
		n = igmp_build_query(pkt, sizeof(pkt), ip_be32(src), g ? ip_be32(g->bytes) : 0, 3,
				     g ? 10 : 100, r->cfg.robustness, qi);
	else
		n = mld_build_query(pkt, sizeof(pkt), src, g ? g->bytes : NULL, 2, g ? 1000 : 10000,
				    r->cfg.robustness, qi);
	if (n && fwd_sp_send_mcast(mc->dp->e, r->ifindex, pkt, n) == 0)
		r->st.queries_sent++;
	else
		r->st.send_failed++;
}

/* ---- the punts ------------------------------------------------------------------------ */

static void membership(struct dp_mcast *mc, struct mc_if *r, const struct ip_addr *g,
		       enum igmp_effect e, uint64_t now)
{
	bool created;

	if (link_scope(g))
		return; /* link-local groups are nobody's to forward */
	if (e == IGMP_EFFECT_JOIN) {
		r->st.reports++;
		if (mg_report(r->t, g, now, &created) && created) {
			char b[IP_ADDR_STRLEN];
			struct dp_link *k = r->ib ? dp_link_by_name(mc->dp, r->name) : NULL;
			union ib_gid mgid;

			log_info("%s: group %s has members", r->name,
				 ip_addr_format(g, b, sizeof(b)));
			/* IPoIB: the gateway will send into the group: join send-only now rather
			 * than at the first packet (which would wait for the join) */
			if (k && k->link && mgid_of(g, k->pkey, &mgid) == 0)
				(void)ipoib_link_mcast_sendonly(k->link, &mgid);
			sync_joins(mc);
		}
	} else if (e == IGMP_EFFECT_LEAVE) {
		r->st.leaves++;
		(void)mg_leave(r->t, g, now, r->cfg.querier && mg_is_querier(r->t, g->family, now));
	}
}

static void igmp_in(struct dp_mcast *mc, struct mc_if *r, const uint8_t *p, size_t len,
		    uint64_t now)
{
	struct igmp_msg m;
	uint32_t src;
	struct ip_addr g = { .family = AF_INET };
	uint8_t ours[16];

	if (igmp_parse_packet(p, len, &src, &m) != IGMP_OK) {
		r->st.bad++;
		return;
	}
	switch (m.type) {
	case IGMP_V1_REPORT:
	case IGMP_V2_REPORT:
	case IGMP_V2_LEAVE:
		ip_put32(g.bytes, m.group);
		membership(mc, r, &g,
			   m.type == IGMP_V2_LEAVE ? IGMP_EFFECT_LEAVE : IGMP_EFFECT_JOIN, now);
		break;
	case IGMP_V3_REPORT:
		for (unsigned i = 0; i < m.nrec; i++) {
			struct igmp_rec rec;

			igmp_record(&m, i, &rec);
			ip_put32(g.bytes, rec.group);
			membership(mc, r, &g, igmp_rec_effect(rec.type, rec.nsrc), now);
		}
		break;
	case IGMP_QUERY: {
		uint8_t s[4];

		ip_put32(s, src);
		r->st.queries_heard++;
		mg_query_heard(r->t, AF_INET, s, our_addr(mc, r, AF_INET, ours) ? ours : NULL, now);
		break;
	}
	default:
		break;
	}
}

static void mld_in(struct dp_mcast *mc, struct mc_if *r, const uint8_t *p, size_t len, uint64_t now)
{
	struct mld_msg m;
	const uint8_t *src;
	struct ip_addr g = { .family = AF_INET6 };
	uint8_t ours[16];
	enum mld_result res = mld_parse_packet(p, len, &src, &m);

	if (res == MLD_UNSPEC_SRC)
		return; /* RFC 3810 5.2.13: a report from :: is ignored */
	if (res != MLD_OK) {
		r->st.bad++;
		return;
	}
	switch (m.type) {
	case MLD_V1_REPORT:
	case MLD_V1_DONE:
		memcpy(g.bytes, m.group, 16);
		membership(mc, r, &g, m.type == MLD_V1_DONE ? IGMP_EFFECT_LEAVE : IGMP_EFFECT_JOIN,
			   now);
		break;
	case MLD_V2_REPORT:
		for (unsigned i = 0; i < m.nrec; i++) {
			struct mld_rec rec;

			mld_record(&m, i, &rec);
			memcpy(g.bytes, rec.group, 16);
			membership(mc, r, &g, mld_rec_effect(rec.type, rec.nsrc), now);
		}
		break;
	case MLD_QUERY:
		r->st.queries_heard++;
		mg_query_heard(r->t, AF_INET6, src, our_addr(mc, r, AF_INET6, ours) ? ours : NULL,
			       now);
		break;
	default:
		break;
	}
}

/* Group traffic received on r: a copy out of every other interface with members. */
static void forward(struct dp_mcast *mc, struct mc_if *r, const uint8_t *p, size_t len)
{
	static uint8_t copy[MC_PKT_MAX];
	const struct fwd_snap *s = fwd_engine_current(mc->dp->e);
	const struct fwd_if *in = fwd_snap_if(s, r->ifindex);
	struct ip_addr g;
	bool v4 = p[0] >> 4 == 4, any = false;
	uint8_t ttl = v4 ? p[8] : p[7];
	uint64_t ns = now_ns();

	r->st.rx_data++;
	g.family = v4 ? AF_INET : AF_INET6;
	memcpy(g.bytes, p + (v4 ? 16 : 24), v4 ? 4 : 16);
	if (link_scope(&g) || (v4 ? p[12] == 169 && p[13] == 254 : ip6_is_link_local(p + 8))) {
		r->st.link_scope++;
		return;
	}
	if (ttl <= 1) {
		r->st.ttl_expired++; /* no ICMP for multicast (RFC 1812 4.3.2.7) */
		return;
	}
	if (len > sizeof(copy)) {
		r->st.send_failed++;
		return;
	}
	for (unsigned i = 0; i < mc->n; i++) {
		struct mc_if *o = &mc->ifs[i];
		struct mg_group *m;
		int ret;

		const struct fwd_if *out = fwd_snap_if(s, o->ifindex);

		/* Groups are a tenant's own: never forwarded into another tenant. */
		if (o == r || !o->configured || !out || !in || out->rt != in->rt || !o->t ||
		    !(m = mg_find(o->t, &g)))
			continue;
		any = true;
		if (!dp_ha_serves(mc->dp, r->name) || !dp_ha_serves(mc->dp, o->name)) {
			r->st.not_served++;
			continue;
		}
		if (!mg_rate_ok(m, o->cfg.rate_limit_pps, ns)) {
			o->st.rate_limited++;
			continue;
		}
		memcpy(copy, p, len);
		if (v4)
			(void)ip4_ttl_decrement(copy);
		else
			(void)ip6_hop_decrement(copy);
		ret = fwd_sp_send_mcast(mc->dp->e, o->ifindex, copy, len);
		if (ret == 0) {
			m->packets++;
			m->bytes += len;
			o->st.forwarded++;
		} else {
			o->st.send_failed++;
		}
	}
	if (!any)
		r->st.no_members++;
}

static bool is_mld(const uint8_t *p, size_t len)
{
	struct ip6_info ii;

	if (ip6_validate(p, len, &ii) != IP_OK || ii.proto != MLD_ICMPV6 || ii.l4_off >= ii.pkt_len)
		return false;
	switch (p[ii.l4_off]) {
	case MLD_QUERY:
	case MLD_V1_REPORT:
	case MLD_V1_DONE:
	case MLD_V2_REPORT:
		return true;
	default:
		return false;
	}
}

static void on_mcast(void *ctx, uint32_t ifindex, const uint8_t *p, size_t len)
{
	struct dp_mcast *mc = ctx;
	struct mc_if *r = by_ifindex(mc, ifindex);
	uint64_t now = evloop_now_ms();

	if (!r || !r->t || len < IP4_HDR_LEN)
		return;
	if (p[0] >> 4 == 4) {
		if (p[9] == IGMP_PROTO)
			igmp_in(mc, r, p, len, now);
		else
			forward(mc, r, p, len);
	} else if (len >= IP6_HDR_LEN) {
		if (is_mld(p, len))
			mld_in(mc, r, p, len, now);
		else if (p[6] != MLD_ICMPV6 || !ip6_is_link_local(p + 8))
			forward(mc, r, p, len);
		else
			r->st.link_scope++;
	}
}

/* ---- the timer ------------------------------------------------------------------------ */

/* Where reports, leaves and dones go: 224.0.0.22, 224.0.0.2, ff02::16, ff02::2. */
static const uint8_t report_macs[4][6] = { { 1, 0, 0x5e, 0, 0, 0x16 },
					   { 1, 0, 0x5e, 0, 0, 2 },
					   { 0x33, 0x33, 0, 0, 0, 0x16 },
					   { 0x33, 0x33, 0, 0, 0, 2 } };

static int report_mgid(int i, uint16_t pkey, union ib_gid *out)
{
	if (i < 2)
		return ipoib_mgid_from_ipv4(ip_be32(report_v4[i]), pkey, IB_MGID_SCOPE_LINK, out);
	return ipoib_mgid_from_ipv6(i == 2 ? mld_v2_routers : mld_all_routers, pkey,
				    IB_MGID_SCOPE_LINK, out);
}

/* What r last attached to: its IPoIB link or Ethernet port (a reload may rebuild it). */
static const void *port_of(const struct mc_if *r, const struct dp_link *k)
{
	return r->ib ? (const void *)k->link : (const void *)k->eth;
}

static int sendonly_cb(void *ctx, struct mg_group *g)
{
	struct dp_link *k = ctx;
	union ib_gid mgid;

	if (mgid_of(&g->addr, k->pkey, &mgid) == 0)
		(void)ipoib_link_mcast_sendonly(k->link, &mgid);
	return 0;
}

/* The report groups on r's interface (once per link or port: a rebuilt one is joined
 * again, with the send-only joins of the groups with members there). Returns whether
 * the link or port changed. */
static bool attach(struct mc_if *r, struct dp_link *k, const struct fwd_if *f)
{
	bool ok = true, changed = false;

	if (r->port != port_of(r, k) || r->ifgen != f->gen) {
		changed = r->port != NULL;
		r->port = port_of(r, k);
		r->ifgen = f->gen;
		r->joined = false;
		if (r->full)
			mg_flush(r->full, NULL, NULL); /* the old link's memberships went with it */
		if (changed && r->ib && k->link)
			mg_foreach(r->t, sendonly_cb, k);
	}
	if (r->joined || !r->port)
		return changed;
	for (int i = 0; i < 4; i++) {
		union ib_gid mgid;

		if (!r->ib)
			ok &= k->eops && k->eops->mc_add &&
			      k->eops->mc_add(k->eth, report_macs[i]) == 0;
		else
			ok &= report_mgid(i, k->pkey, &mgid) == 0 &&
			      ipoib_link_mcast_join(k->link, &mgid) == 0;
	}
	r->joined = ok;
	if (!ok && !r->warned)
		log_warning("%s: ip_multicast: cannot join the IGMP/MLD report groups", r->name);
	r->warned = !ok;
	return changed;
}

/* Undo attach, and the send-only joins, on an interface whose section went (reload). */
static int leave_cb(void *ctx, struct mg_group *g)
{
	struct dp_link *k = ctx;
	union ib_gid mgid;

	if (mgid_of(&g->addr, k->pkey, &mgid) == 0)
		(void)ipoib_link_mcast_leave(k->link, &mgid);
	return 0;
}

static void detach(struct dp_mcast *mc, struct mc_if *r)
{
	struct dp_link *k = dp_link_by_name(mc->dp, r->name);

	if (!k || !r->port || r->port != port_of(r, k))
		return;
	for (int i = 0; r->joined && i < 4; i++) {
		union ib_gid mgid;

		if (!r->ib && k->eops && k->eops->mc_del)
			(void)k->eops->mc_del(k->eth, report_macs[i]);
		else if (r->ib && report_mgid(i, k->pkey, &mgid) == 0)
			(void)ipoib_link_mcast_leave(k->link, &mgid);
	}
	if (r->ib && r->t)
		mg_foreach(r->t, leave_cb, k);
	r->joined = false;
}

struct expire_ctx {
	struct dp_mcast *mc;
	struct mc_if *r;
	bool any;
};

static void group_gone(void *ctx, struct mg_table *t, struct mg_group *g)
{
	struct expire_ctx *x = ctx;
	char b[IP_ADDR_STRLEN];

	(void)t;
	x->any = true;
	log_info("%s: group %s has no members any more", x->r->name,
		 ip_addr_format(&g->addr, b, sizeof(b)));
	if (x->r->ib && !mg_find(x->r->full, &g->addr)) {
		struct dp_link *k = dp_link_by_name(x->mc->dp, x->r->name);
		union ib_gid mgid;

		/* nothing to send into any more (a full membership for another side's
		 * members stays) */
		if (k && k->link && mgid_of(&g->addr, k->pkey, &mgid) == 0)
			(void)ipoib_link_mcast_leave(k->link, &mgid);
	}
}

struct specific_ctx {
	struct dp_mcast *mc;
	struct mc_if *r;
	uint64_t now;
};

static int specific_cb(void *ctx, struct mg_group *g)
{
	struct specific_ctx *s = ctx;

	if (mg_specific_due(s->r->t, g, s->now))
		send_query(s->mc, s->r, g->addr.family, &g->addr);
	return 0;
}

static void bind_mask(struct dp_mcast *mc)
{
	uint32_t mask = 0;

	for (unsigned i = 0; i < mc->n; i++) {
		struct dp_link *k = dp_link_by_name(mc->dp, mc->ifs[i].name);

		if (mc->ifs[i].configured && k && k->ifindex && k->ifindex < 32)
			mask |= 1u << k->ifindex;
	}
	fwd_sp_mcast_bind(mc->dp->e, mask, mask ? on_mcast : NULL, mc);
}

static void run(struct dp_mcast *mc)
{
	uint64_t now = evloop_now_ms(), next = now + MC_RECHECK_MS;
	bool changed = false;

	for (unsigned i = 0; i < mc->n; i++) {
		struct mc_if *r = &mc->ifs[i];
		struct dp_link *k = dp_link_by_name(mc->dp, r->name);
		const struct fwd_if *f;
		struct expire_ctx x = { mc, r, false };
		struct specific_ctx sc = { mc, r, now };
		uint64_t due;

		if (!r->configured || !r->t)
			continue;
		r->ifindex = k && k->kind != DP_NONE ? k->ifindex : 0;
		f = r->ifindex ? fwd_snap_if(fwd_engine_current(mc->dp->e), r->ifindex) : NULL;
		if (!f || !f->up)
			continue;
		changed |= attach(r, k, f);
		if (r->cfg.querier && !r->started) {
			mg_start(r->t, now);
			r->started = true;
		}
		if (r->cfg.querier && dp_ha_serves(mc->dp, r->name)) {
			if (mg_general_due(r->t, AF_INET, now))
				send_query(mc, r, AF_INET, NULL);
			if (mg_general_due(r->t, AF_INET6, now))
				send_query(mc, r, AF_INET6, NULL);
			mg_foreach(r->t, specific_cb, &sc);
		}
		mg_expire(r->t, now, group_gone, &x);
		changed |= x.any;
		due = mg_next_due(r->t);
		if (due < next)
			next = due > now ? due : now + 1;
	}
	if (changed)
		sync_joins(mc);
	bind_mask(mc); /* an interface rebuilt by a reload may have a new index */
	evtimer_start(mc->timer, next - now, 0);
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	run(arg);
}

/* ---- config --------------------------------------------------------------------------- */

static void take(struct dp_mcast *mc, const char *name, bool ib, const struct gw_mcast_config *c)
{
	struct mc_if *r = by_name(mc, name);
	struct mg_params p = params_of(c);

	if (!c->enabled)
		return;
	if (!r) {
		if (mc->n >= MC_MAX_IFS)
			return;
		r = &mc->ifs[mc->n++];
		memset(r, 0, sizeof(*r));
		snprintf(r->name, sizeof(r->name), "%s", name);
		r->t = mg_new(&p);
		r->full = ib ? mg_new(NULL) : NULL;
		if (!r->t || (ib && !r->full)) {
			log_error("%s: ip_multicast: out of memory", name);
			mg_free(r->t);
			mg_free(r->full);
			mc->n--;
			return;
		}
		log_info("%s: ip multicast forwarding on", name);
	}
	r->ib = ib;
	r->cfg = *c;
	r->configured = true;
	mg_set_params(r->t, &p);
}

static void free_if(struct dp_mcast *mc, struct mc_if *r)
{
	(void)mc;
	mg_free(r->t);
	mg_free(r->full);
	r->t = r->full = NULL;
}

void dp_mcast_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	struct dp_mcast *mc = dp->mcast;

	if (!mc) {
		bool any = false;

		for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
			any |= cfg->ipoib_links[i].mcast.enabled;
		for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
			any |= cfg->eth_ifs[i].mcast.enabled;
		if (!any)
			return;
		mc = calloc(1, sizeof(*mc));
		if (mc)
			mc->timer = evtimer_new(dp->loop, on_timer, mc);
		if (!mc || !mc->timer) {
			log_error("ip multicast: out of memory: not forwarded");
			free(mc);
			return;
		}
		mc->dp = dp;
		dp->mcast = mc;
	}
	for (unsigned i = 0; i < mc->n; i++)
		mc->ifs[i].configured = false;
	for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
		take(mc, cfg->ipoib_links[i].name, true, &cfg->ipoib_links[i].mcast);
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
		take(mc, cfg->eth_ifs[i].name, false, &cfg->eth_ifs[i].mcast);
	/* Interfaces no longer configured: their IB joins left, their state freed. */
	sync_joins(mc);
	for (unsigned i = 0; i < mc->n;) {
		if (mc->ifs[i].configured) {
			i++;
			continue;
		}
		log_info("%s: ip multicast forwarding off", mc->ifs[i].name);
		detach(mc, &mc->ifs[i]);
		free_if(mc, &mc->ifs[i]);
		mc->ifs[i] = mc->ifs[--mc->n];
	}
	bind_mask(mc);
	run(mc);
}

void dp_mcast_stop(struct gw_dp *dp)
{
	struct dp_mcast *mc = dp->mcast;

	if (!mc)
		return;
	fwd_sp_mcast_bind(dp->e, 0, NULL, NULL);
	for (unsigned i = 0; i < mc->n; i++)
		mc->ifs[i].configured = false;
	sync_joins(mc);
	for (unsigned i = 0; i < mc->n; i++)
		free_if(mc, &mc->ifs[i]);
	evtimer_free(mc->timer);
	free(mc);
	dp->mcast = NULL;
}

/* ---- gwctl and metrics ---------------------------------------------------------------- */

struct show_walk {
	struct ctl_reply *r;
	const struct mc_if *x;
	uint16_t pkey;
	uint64_t now;
	int status;
};

static int group_cb(void *ctx, struct mg_group *g)
{
	struct show_walk *w = ctx;
	struct json_object *o = json_object_new_object();
	char b[IP_ADDR_STRLEN];

	add_str(o, "group", ip_addr_format(&g->addr, b, sizeof(b)));
	add_str(o, "dev", w->x->name);
	add_str(o, "side", w->x->ib ? "ipoib" : "ethernet");
	if (w->x->ib) {
		union ib_gid mgid;
		char gs[IB_GID_STRLEN];

		if (mgid_of(&g->addr, w->pkey, &mgid) == 0) {
			ib_gid_format(&mgid, gs, sizeof(gs));
			add_str(o, "mgid", gs);
		}
	}
	add_int(o, "expires_ms", (int64_t)(g->expires_ms > w->now ? g->expires_ms - w->now : 0));
	add_int(o, "packets", (int64_t)g->packets);
	add_int(o, "bytes", (int64_t)g->bytes);
	add_int(o, "rate_limited", (int64_t)g->rate_limited);
	if (ctl_reply_record(w->r, o) < 0) {
		w->status = CTL_EFAILED;
		return 1;
	}
	return 0;
}

int dp_mcast_show(struct gw_dp *dp, struct ctl_reply *reply)
{
	struct dp_mcast *mc = dp->mcast;
	uint64_t now = evloop_now_ms();

	for (unsigned i = 0; mc && i < mc->n; i++) {
		const struct mc_if *r = &mc->ifs[i];
		struct dp_link *k = dp_link_by_name(dp, r->name);
		struct json_object *o = json_object_new_object();
		struct show_walk w = { reply, r, k ? k->pkey : 0xffff, now, CTL_OK };

		add_str(o, "interface", r->name);
		add_str(o, "side", r->ib ? "ipoib" : "ethernet");
		json_object_object_add(
		    o, "querier4",
		    json_object_new_boolean(r->started && mg_is_querier(r->t, AF_INET, now)));
		json_object_object_add(
		    o, "querier6",
		    json_object_new_boolean(r->started && mg_is_querier(r->t, AF_INET6, now)));
		add_int(o, "groups", r->t ? mg_count(r->t) : 0);
		add_int(o, "rate_limit_pps", r->cfg.rate_limit_pps);
		add_int(o, "reports", (int64_t)r->st.reports);
		add_int(o, "leaves", (int64_t)r->st.leaves);
		add_int(o, "queries_sent", (int64_t)r->st.queries_sent);
		add_int(o, "queries_heard", (int64_t)r->st.queries_heard);
		add_int(o, "bad", (int64_t)r->st.bad);
		add_int(o, "rx_data", (int64_t)r->st.rx_data);
		add_int(o, "forwarded", (int64_t)r->st.forwarded);
		add_int(o, "no_members", (int64_t)r->st.no_members);
		add_int(o, "ttl_expired", (int64_t)r->st.ttl_expired);
		add_int(o, "link_scope", (int64_t)r->st.link_scope);
		add_int(o, "not_served", (int64_t)r->st.not_served);
		add_int(o, "rate_limited", (int64_t)r->st.rate_limited);
		add_int(o, "send_failed", (int64_t)r->st.send_failed);
		if (r->ib) {
			add_int(o, "ib_joins", (int64_t)r->st.joins);
			add_int(o, "ib_leaves", (int64_t)r->st.leaves_ib);
		}
		if (ctl_reply_record(reply, o) < 0)
			return CTL_EFAILED;
		if (r->t)
			mg_foreach(r->t, group_cb, &w);
		if (w.status != CTL_OK)
			return w.status;
	}
	return CTL_OK;
}

void dp_mcast_metrics(struct gw_dp *dp, FILE *out)
{
	struct dp_mcast *mc = dp->mcast;
	static const struct {
		const char *name, *help;
		size_t off;
	} fam[] = {
		{ "ibgw_mcast_reports_total", "IGMP/MLD membership reports (records) received.",
		  offsetof(struct mc_stats, reports) },
		{ "ibgw_mcast_leaves_total", "IGMP leaves / MLD dones (records) received.",
		  offsetof(struct mc_stats, leaves) },
		{ "ibgw_mcast_queries_sent_total", "IGMP/MLD queries sent.",
		  offsetof(struct mc_stats, queries_sent) },
		{ "ibgw_mcast_bad_total", "IGMP/MLD messages refused by the parsers.",
		  offsetof(struct mc_stats, bad) },
		{ "ibgw_mcast_rx_total", "IP multicast group packets received.",
		  offsetof(struct mc_stats, rx_data) },
		{ "ibgw_mcast_forwarded_total", "IP multicast copies sent out of the interface.",
		  offsetof(struct mc_stats, forwarded) },
		{ "ibgw_mcast_no_members_total", "Group packets no other interface wanted.",
		  offsetof(struct mc_stats, no_members) },
		{ "ibgw_mcast_ttl_expired_total", "Group packets received with TTL / hop limit 1.",
		  offsetof(struct mc_stats, ttl_expired) },
		{ "ibgw_mcast_link_scope_total",
		  "Group packets to a link-local group or from a link-local source.",
		  offsetof(struct mc_stats, link_scope) },
		{ "ibgw_mcast_not_served_total",
		  "Group packets not forwarded: this box does not serve an end (failover backup).",
		  offsetof(struct mc_stats, not_served) },
		{ "ibgw_mcast_rate_limited_total",
		  "Copies into the interface dropped by rate_limit_pps.",
		  offsetof(struct mc_stats, rate_limited) },
		{ "ibgw_mcast_send_failed_total", "Copies or queries not sent.",
		  offsetof(struct mc_stats, send_failed) },
	};
	char lbl[128];

	if (!mc || !mc->n)
		return;
	metrics_family(out, "ibgw_mcast_groups", "gauge", "Groups with members on the interface.");
	for (unsigned i = 0; i < mc->n; i++)
		fprintf(out, "ibgw_mcast_groups{dev=\"%s\"} %u\n",
			metrics_label_escape(mc->ifs[i].name, lbl, sizeof(lbl)),
			mc->ifs[i].t ? mg_count(mc->ifs[i].t) : 0);
	for (size_t m = 0; m < sizeof(fam) / sizeof(fam[0]); m++) {
		metrics_family(out, fam[m].name, "counter", fam[m].help);
		for (unsigned i = 0; i < mc->n; i++)
			fprintf(out, "%s{dev=\"%s\"} %llu\n", fam[m].name,
				metrics_label_escape(mc->ifs[i].name, lbl, sizeof(lbl)),
				(unsigned long long)*(
				    const uint64_t *)((const char *)&mc->ifs[i].st + fam[m].off));
	}
}
