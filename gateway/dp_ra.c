/*
 * Router advertisements: what is sent when, on which interface (see dp_ra.h). The
 * packets are pkt/nd.h's (nd_build_ra), the timing its nd_ra_interval / nd_ra_solicited
 * (pure, unit-tested); this file keeps per-interface state, one timer on the control
 * loop, and hands the frames to the workers (Ethernet: fwd_sp_send_eth; IPoIB: the
 * link's xmit, through the engine's post hook).
 *
 * Threads: control thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <json-c/json.h>

#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_json.h"
#include "gateway/dp_ra.h"
#include "lib/evloop.h"
#include "lib/ib_gid.h"
#include "lib/ipoib.h"
#include "lib/log.h"
#include "mgmt/ctl_server.h"
#include "mgmt/ctl_proto.h"
#include "mgmt/metrics_http.h"
#include "pkt/eth_frame.h"
#include "pkt/nd.h"

#define RA_MAX_IFS     DP_MAX_LINKS
#define RA_UCAST_MAX   8    /* unicast answers waiting per interface; more: multicast */
#define RA_RECHECK_MS  1000 /* link state and failover looked at, at least this often */
#define RA_FINAL_COUNT ND_MAX_FINAL_RTR_ADVERTISEMENTS
#define RA_FINAL_GAP   ND_MIN_DELAY_BETWEEN_RAS

struct ra_stats {
	uint64_t sent;         /* RAs sent (every kind) */
	uint64_t sent_final;   /* of which with router lifetime 0 */
	uint64_t rs_received;  /* valid RSs on this interface */
	uint64_t rs_unicast;   /* answered to the solicitor */
	uint64_t rs_multicast; /* answered (or to be) by a multicast RA */
	uint64_t rs_ignored;   /* received while not advertising */
	uint64_t send_failed;  /* no buffer, ring full, interface gone */
};

struct ra_ucast {
	uint64_t due;
	uint8_t dst[16];
	uint8_t lladdr[IPOIB_HWADDR_LEN]; /* 6 or 20 octets */
};

/* One interface configured to advertise. Owner: control thread. */
struct ra_if {
	char name[GW_NAME_MAX];
	bool ib;
	struct gw_ra_config cfg;
	bool configured;     /* in the config as running (false: being removed) */
	bool was_configured; /* ... before the config being applied (reload notes) */
	uint32_t ifindex;    /* the engine interface as last seen (0: none) */
	uint8_t ll[16];      /* our link-local address there */
	bool have_ll;
	bool ll_added; /* Ethernet: ll is an engine address of ifindex */
	bool joined;   /* all-routers group / MAC joined on ifindex */
	bool on;       /* advertising */
	unsigned initial;
	uint64_t next;       /* next unsolicited RA (ms), while on */
	uint64_t mcast_due;  /* a multicast answer to an RS (0: none) */
	uint64_t last_mcast; /* last multicast RA (0: none) */
	struct ra_ucast uc[RA_UCAST_MAX];
	unsigned n_uc;
	unsigned final_left; /* final RAs still to send */
	uint64_t final_due;
	uint64_t last_sent; /* ms, 0: never */
	struct ra_stats st;
};

struct dp_ra {
	struct gw_dp *dp;
	struct evtimer *timer;
	uint64_t rnd;
	struct ra_if ifs[RA_MAX_IFS];
	unsigned n;
};

static uint32_t rnd32(struct dp_ra *ra)
{
	/* xorshift64*: the intervals need spreading between routers, not secrecy. */
	ra->rnd ^= ra->rnd >> 12;
	ra->rnd ^= ra->rnd << 25;
	ra->rnd ^= ra->rnd >> 27;
	return (uint32_t)((ra->rnd * 0x2545f4914f6cdd1dull) >> 32);
}

static struct ra_if *by_name(struct dp_ra *ra, const char *name)
{
	for (unsigned i = 0; i < ra->n; i++)
		if (!strcmp(ra->ifs[i].name, name))
			return &ra->ifs[i];
	return NULL;
}

/* ---- sending ------------------------------------------------------------------------ */

/* The prefixes of one RA: the configured ones, else those of the interface's IPv6
 * addresses (global and ULA), once each, autonomous when /64. */
static unsigned ra_prefixes(const struct ra_if *r, const struct fwd_if *f, struct nd_prefix *px,
			    uint8_t store[][16])
{
	unsigned n = 0;

	if (r->cfg.n_prefixes) {
		for (unsigned i = 0; i < r->cfg.n_prefixes && n < ND_RA_MAX_PREFIX; i++) {
			const struct gw_ra_prefix_config *c = &r->cfg.prefixes[i];

			px[n++] = (struct nd_prefix){
				.prefix = c->prefix.addr.bytes,
				.len = c->prefix.len,
				.flags = (uint8_t)((c->on_link ? ND_PFX_ON_LINK : 0) |
						   (c->autonomous ? ND_PFX_AUTO : 0)),
				.valid = c->valid_lifetime_s,
				.preferred = c->preferred_lifetime_s,
			};
		}
		return n;
	}
	for (unsigned i = 0; i < f->n_addrs && n < ND_RA_MAX_PREFIX; i++) {
		const struct ip_prefix *a = &f->addrs[i];
		struct ip_prefix m = *a;
		bool dup = false;

		if (a->addr.family != AF_INET6 || ip6_is_link_local(a->addr.bytes) ||
		    ip6_is_multicast(a->addr.bytes) || a->len == 128)
			continue;
		ip_prefix_mask(&m);
		for (unsigned j = 0; j < n && !dup; j++)
			dup = px[j].len == m.len && !memcmp(store[j], m.addr.bytes, 16);
		if (dup)
			continue;
		memcpy(store[n], m.addr.bytes, 16);
		px[n] = (struct nd_prefix){
			.prefix = store[n],
			.len = m.len,
			.flags = (uint8_t)(ND_PFX_ON_LINK | (m.len == 64 ? ND_PFX_AUTO : 0)),
			.valid = 2592000,
			.preferred = 604800,
		};
		n++;
	}
	return n;
}

/* One RA on r's interface: to all-nodes (dst NULL) or to dst at lladdr; final: router
 * lifetime 0. Returns 0 or a negative errno (counted). */
static int send_ra(struct dp_ra *ra, struct ra_if *r, const uint8_t *dst, const uint8_t *lladdr,
		   bool final)
{
	struct gw_dp *dp = ra->dp;
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(dp->e), r->ifindex);
	struct nd_prefix px[ND_RA_MAX_PREFIX];
	uint8_t store[ND_RA_MAX_PREFIX][16];
	struct nd_ra_params p = {
		.cur_hop_limit = r->cfg.hop_limit,
		.flags = (uint8_t)((r->cfg.managed ? ND_RA_MANAGED : 0) |
				   (r->cfg.other_config ? ND_RA_OTHER : 0)),
		.router_lifetime = final ? 0 : (uint16_t)r->cfg.router_lifetime_s,
		.reachable_ms = r->cfg.reachable_time_ms,
		.retrans_ms = r->cfg.retrans_timer_ms,
		.mtu = r->cfg.mtu,
		.prefix = px,
	};
	int ret = -ENODEV;

	if (!f || !f->up || !r->have_ll)
		goto out;
	p.n_prefix = ra_prefixes(r, f, px, store);
	if (!r->ib) {
		uint8_t frame[ETHF_HLEN + ND_RA_MAX_LEN];
		size_t n = nd_build_ra(frame + ETHF_HLEN, sizeof(frame) - ETHF_HLEN, ND_LINK_ETHER,
				       r->ll, dst ? dst : nd_all_nodes, &p, f->mac);

		ret = -EMSGSIZE;
		if (!n)
			goto out;
		if (dst)
			memcpy(frame, lladdr, 6);
		else
			nd_mcast_mac(nd_all_nodes, frame);
		memcpy(frame + 6, f->mac, 6);
		frame[12] = ETHF_TYPE_IPV6 >> 8;
		frame[13] = ETHF_TYPE_IPV6 & 0xff;
		ret = fwd_sp_send_eth(dp->e, r->ifindex, frame, ETHF_HLEN + n);
	} else {
		struct ipoib_link *l = f->link;
		struct ibp_buf *b = l ? ipoib_link_buf(l) : NULL;
		size_t n;

		ret = -ENOBUFS;
		if (!b)
			goto out;
		n = nd_build_ra(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, ND_LINK_IB,
				r->ll, dst ? dst : nd_all_nodes, &p, f->hwaddr);
		if (!n) {
			f->ib_ops->buf_put(f->ib_port, b);
			ret = -EMSGSIZE;
			goto out;
		}
		b->len = (uint32_t)n;
		if (dst) {
			struct ipoib_hwaddr hw;

			ret = ipoib_hwaddr_decode(lladdr, IPOIB_HWADDR_LEN, &hw);
			if (ret >= 0)
				ret = ipoib_link_xmit_hw(l, &hw, ETHF_TYPE_IPV6, b);
			else
				f->ib_ops->buf_put(f->ib_port, b);
		} else {
			union ib_gid mgid;

			ret = ipoib_mgid_from_ipv6(nd_all_nodes, ipoib_link_pkey(l),
						   IB_MGID_SCOPE_LINK, &mgid);
			if (ret == 0)
				ret = ipoib_link_xmit_mcast(l, &mgid, ETHF_TYPE_IPV6, b);
			else
				f->ib_ops->buf_put(f->ib_port, b);
		}
	}
out:
	if (ret < 0) {
		r->st.send_failed++;
		return ret;
	}
	r->st.sent++;
	if (final)
		r->st.sent_final++;
	r->last_sent = evloop_now_ms();
	return 0;
}

/* ---- which interfaces advertise ------------------------------------------------------ */

/* fe80::/64 + the modified EUI-64 of mac (RFC 4291 2.5.1, appendix A). */
static void ll_of_mac(const uint8_t mac[6], uint8_t out[16])
{
	memset(out, 0, 16);
	out[0] = 0xfe;
	out[1] = 0x80;
	out[8] = mac[0] ^ 0x02;
	out[9] = mac[1];
	out[10] = mac[2];
	out[11] = 0xff;
	out[12] = 0xfe;
	out[13] = mac[3];
	out[14] = mac[4];
	out[15] = mac[5];
}

/* Our link-local address, the engine address (Ethernet) and the all-routers group on
 * the interface r names now; what was set up on an older one is left to it (a rebuilt
 * interface starts bare). */
static void attach(struct dp_ra *ra, struct ra_if *r, struct dp_link *k, const struct fwd_if *f)
{
	static const uint8_t zero[6];

	if (r->ifindex != k->ifindex) {
		r->ifindex = k->ifindex;
		r->have_ll = r->ll_added = r->joined = false;
	}
	if (!r->ib && !r->have_ll && memcmp(f->mac, zero, 6)) {
		ll_of_mac(f->mac, r->ll);
		r->have_ll = true;
	} else if (r->ib && !r->have_ll && k->link && ipoib_link_is_up(k->link)) {
		union ib_gid gid;

		ipoib_link_gid(k->link, &gid);
		ipoib_ipv6_link_local(ib_gid_guid(&gid), r->ll);
		r->have_ll = true;
	}
	if (!r->ib && r->have_ll && !r->ll_added) {
		struct ip_prefix a = { .len = 64 };
		int ret;

		a.addr.family = AF_INET6;
		memcpy(a.addr.bytes, r->ll, 16);
		ret = fwd_engine_if_add_addr(ra->dp->e, r->ifindex, &a);
		r->ll_added = ret == 0 || ret == -EEXIST;
		if (!r->ll_added)
			log_errno(LOG_WARNING, -ret,
				  "%s: router advertisements: link-local address", r->name);
	}
	if (!r->joined) {
		if (!r->ib && k->eops && k->eth && k->eops->mc_add) {
			uint8_t mac[6];

			nd_mcast_mac(nd_all_routers, mac);
			r->joined = k->eops->mc_add(k->eth, mac) == 0;
		} else if (r->ib && k->link) {
			union ib_gid mgid;

			r->joined = ipoib_mgid_from_ipv6(nd_all_routers, k->pkey,
							 IB_MGID_SCOPE_LINK, &mgid) == 0 &&
				    ipoib_link_mcast_join(k->link, &mgid) == 0;
		}
	}
}

/* Undo attach on an interface that no longer advertises by config. */
static void detach(struct dp_ra *ra, struct ra_if *r)
{
	struct dp_link *k = r->ifindex ? dp_link_by_ifindex(ra->dp, r->ifindex) : NULL;

	if (k && r->ll_added) {
		struct ip_prefix a = { .len = 64 };

		a.addr.family = AF_INET6;
		memcpy(a.addr.bytes, r->ll, 16);
		(void)fwd_engine_if_del_addr(ra->dp->e, r->ifindex, &a);
	}
	if (k && r->joined && !r->ib && k->eops && k->eth && k->eops->mc_del) {
		uint8_t mac[6];

		nd_mcast_mac(nd_all_routers, mac);
		(void)k->eops->mc_del(k->eth, mac);
	}
	/* IPoIB: the all-routers membership stays with the link (no leave in its API);
	 * solicitations then reach the slow path and are not answered. */
	r->ll_added = r->joined = false;
}

/* Whether r should advertise now, with its interface attached. */
static bool wanted(struct dp_ra *ra, struct ra_if *r)
{
	struct dp_link *k = dp_link_by_name(ra->dp, r->name);
	const struct fwd_if *f;

	if (!r->configured || !k || k->kind == DP_NONE || !k->ifindex)
		return false;
	f = fwd_snap_if(fwd_engine_current(ra->dp->e), k->ifindex);
	if (!f || !f->up)
		return false;
	attach(ra, r, k, f);
	return r->have_ll && dp_ha_serves(ra->dp, r->name);
}

static void start_on(struct dp_ra *ra, struct ra_if *r, uint64_t now)
{
	(void)ra;
	r->on = true;
	r->initial = 0;
	r->next = now; /* the first at once */
	r->mcast_due = 0;
	r->final_left = 0;
	log_info("%s: router advertisements on", r->name);
}

static bool if_up(struct dp_ra *ra, const struct ra_if *r)
{
	const struct fwd_if *f =
	    r->ifindex ? fwd_snap_if(fwd_engine_current(ra->dp->e), r->ifindex) : NULL;

	return f && f->up;
}

static void stop_on(struct ra_if *r, bool up, uint64_t now)
{
	r->on = false;
	r->n_uc = 0;
	r->mcast_due = 0;
	/* Hosts drop us as a default router now rather than after the router lifetime. */
	r->final_left = up ? RA_FINAL_COUNT : 0;
	r->final_due = now;
	log_info("%s: router advertisements off%s", r->name, up ? " (final ones sent)" : "");
}

/* ---- the timer ---------------------------------------------------------------------- */

static void arm(struct dp_ra *ra, uint64_t now)
{
	uint64_t next = now + RA_RECHECK_MS;

	for (unsigned i = 0; i < ra->n; i++) {
		const struct ra_if *r = &ra->ifs[i];

		if (r->on && r->next < next)
			next = r->next;
		if (r->on && r->mcast_due && r->mcast_due < next)
			next = r->mcast_due;
		for (unsigned u = 0; r->on && u < r->n_uc; u++)
			if (r->uc[u].due < next)
				next = r->uc[u].due;
		if (r->final_left && r->final_due < next)
			next = r->final_due;
	}
	evtimer_start(ra->timer, next > now ? next - now : 0, 0);
}

static void run(struct dp_ra *ra)
{
	uint64_t now = evloop_now_ms();

	for (unsigned i = 0; i < ra->n; i++) {
		struct ra_if *r = &ra->ifs[i];
		bool want = wanted(ra, r);

		if (want && !r->on)
			start_on(ra, r, now);
		else if (!want && r->on)
			stop_on(r, r->have_ll && if_up(ra, r), now);
		if (r->on && (r->next <= now || (r->mcast_due && r->mcast_due <= now))) {
			/* Solicited or not, a multicast RA restarts the interval (6.2.6). */
			(void)send_ra(ra, r, NULL, NULL, false);
			r->last_mcast = now;
			r->mcast_due = 0;
			r->next =
			    now + nd_ra_interval(r->cfg.min_interval_ms, r->cfg.max_interval_ms,
						 r->initial, rnd32(ra));
			if (r->initial < ND_MAX_INITIAL_RTR_ADVERTISEMENTS)
				r->initial++;
		}
		for (unsigned u = 0; r->on && u < r->n_uc;) {
			if (r->uc[u].due > now) {
				u++;
				continue;
			}
			(void)send_ra(ra, r, r->uc[u].dst, r->uc[u].lladdr, false);
			r->uc[u] = r->uc[--r->n_uc];
		}
		if (r->final_left && r->final_due <= now) {
			if (!r->on && send_ra(ra, r, NULL, NULL, true) == 0)
				r->final_left--;
			else
				r->final_left =
				    0; /* down or advertising again: nothing to retract */
			r->final_due = now + RA_FINAL_GAP;
		}
	}
	/* Interfaces removed by the config and done with their final RAs go. */
	for (unsigned i = 0; i < ra->n;) {
		struct ra_if *r = &ra->ifs[i];

		if (r->configured || r->on || r->final_left) {
			i++;
			continue;
		}
		detach(ra, r);
		ra->ifs[i] = ra->ifs[--ra->n];
	}
	arm(ra, now);
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	run(arg);
}

/* ---- solicitations ------------------------------------------------------------------ */

static void on_rs(void *ctx, uint32_t ifindex, const struct nd_msg *rs, const uint8_t *src_mac)
{
	struct dp_ra *ra = ctx;
	struct dp_link *k = dp_link_by_ifindex(ra->dp, ifindex);
	struct ra_if *r = k ? by_name(ra, k->name) : NULL;
	const uint8_t *ll = rs->sllao ? rs->sllao : src_mac;
	uint64_t now = evloop_now_ms();

	if (!r || !r->configured)
		return; /* not an advertising interface: RSs are silently discarded (6.2.6) */
	r->st.rs_received++;
	if (!r->on) {
		r->st.rs_ignored++;
		return;
	}
	if (!ip6_is_unspecified(rs->src) && ll && r->n_uc < RA_UCAST_MAX) {
		struct ra_ucast *u = NULL;

		for (unsigned i = 0; i < r->n_uc && !u; i++)
			if (!memcmp(r->uc[i].dst, rs->src, 16))
				u = &r->uc[i]; /* answered once, timed from the first (6.2.6) */
		if (!u) {
			u = &r->uc[r->n_uc++];
			memcpy(u->dst, rs->src, 16);
			memcpy(u->lladdr, ll, r->ib ? IPOIB_HWADDR_LEN : 6);
			u->due = nd_ra_solicited(now, false, 0, 0, rnd32(ra));
		}
		r->st.rs_unicast++;
	} else {
		if (!r->mcast_due)
			r->mcast_due =
			    nd_ra_solicited(now, true, r->last_mcast, r->next, rnd32(ra));
		r->st.rs_multicast++;
	}
	arm(ra, now);
}

/* ---- config, stop ------------------------------------------------------------------- */

static bool same_cfg(const struct gw_ra_config *a, const struct gw_ra_config *b)
{
	if (a->max_interval_ms != b->max_interval_ms || a->min_interval_ms != b->min_interval_ms ||
	    a->router_lifetime_s != b->router_lifetime_s || a->hop_limit != b->hop_limit ||
	    a->managed != b->managed || a->other_config != b->other_config || a->mtu != b->mtu ||
	    a->reachable_time_ms != b->reachable_time_ms ||
	    a->retrans_timer_ms != b->retrans_timer_ms || a->n_prefixes != b->n_prefixes)
		return false;
	for (unsigned i = 0; i < a->n_prefixes; i++) {
		const struct gw_ra_prefix_config *x = &a->prefixes[i], *y = &b->prefixes[i];

		if (x->prefix.len != y->prefix.len ||
		    !ip_addr_equal(&x->prefix.addr, &y->prefix.addr) || x->on_link != y->on_link ||
		    x->autonomous != y->autonomous || x->valid_lifetime_s != y->valid_lifetime_s ||
		    x->preferred_lifetime_s != y->preferred_lifetime_s)
			return false;
	}
	return true;
}

static void take(struct dp_ra *ra, const char *name, bool ib, const struct gw_ra_config *c)
{
	struct ra_if *r = by_name(ra, name);

	if (!c->enabled)
		return;
	if (!r) {
		if (ra->n == RA_MAX_IFS)
			return;
		r = &ra->ifs[ra->n++];
		memset(r, 0, sizeof(*r));
		snprintf(r->name, sizeof(r->name), "%s", name);
		gw_reload_note(ra->dp->outcome, false, "%s: router advertisements on", name);
	} else if (!r->was_configured) {
		gw_reload_note(ra->dp->outcome, false, "%s: router advertisements on", name);
	} else if (!same_cfg(&r->cfg, c) || r->ib != ib) {
		gw_reload_note(ra->dp->outcome, false, "%s: router advertisements changed", name);
	}
	if (r->ib != ib) {
		/* The name now belongs to the other kind: a new interface. */
		r->ifindex = 0;
		r->have_ll = r->ll_added = r->joined = false;
	}
	r->ib = ib;
	r->cfg = *c;
	r->configured = true;
}

void dp_ra_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	struct dp_ra *ra = dp->ra;
	unsigned n = 0;

	for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
		n += cfg->ipoib_links[i].ra.enabled;
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
		n += cfg->eth_ifs[i].ra.enabled;
	if (!ra && !n)
		return;
	if (!ra) {
		ra = calloc(1, sizeof(*ra));
		if (ra)
			ra->timer = evtimer_new(dp->loop, on_timer, ra);
		if (!ra || !ra->timer) {
			log_error("router advertisements: out of memory: none will be sent");
			free(ra);
			return;
		}
		ra->dp = dp;
		if (getrandom(&ra->rnd, sizeof(ra->rnd), 0) != sizeof(ra->rnd) || !ra->rnd)
			ra->rnd = evloop_now_ms() | 1;
		dp->ra = ra;
		fwd_sp_rs_bind(dp->e, on_rs, ra);
	}
	for (unsigned i = 0; i < ra->n; i++) {
		ra->ifs[i].was_configured = ra->ifs[i].configured;
		ra->ifs[i].configured = false;
	}
	for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
		take(ra, cfg->ipoib_links[i].name, true, &cfg->ipoib_links[i].ra);
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
		take(ra, cfg->eth_ifs[i].name, false, &cfg->eth_ifs[i].ra);
	for (unsigned i = 0; i < ra->n; i++)
		if (ra->ifs[i].was_configured && !ra->ifs[i].configured)
			gw_reload_note(dp->outcome, false,
				       "%s: router advertisements off (final ones with router "
				       "lifetime 0)",
				       ra->ifs[i].name);
	run(ra);
}

void dp_ra_recheck(struct gw_dp *dp)
{
	if (dp->ra)
		run(dp->ra);
}

void dp_ra_stop(struct gw_dp *dp)
{
	struct dp_ra *ra = dp->ra;

	if (!ra)
		return;
	fwd_sp_rs_bind(dp->e, NULL, NULL);
	for (unsigned i = 0; i < ra->n; i++) {
		struct ra_if *r = &ra->ifs[i];

		if (r->on && send_ra(ra, r, NULL, NULL, true) == 0)
			log_info("%s: router advertisements: final one sent (router lifetime 0)",
				 r->name);
		r->on = false;
	}
	evtimer_free(ra->timer);
	free(ra);
	dp->ra = NULL;
}

/* ---- gwctl and metrics -------------------------------------------------------------- */

int gw_dp_show_ra(struct gw_dp *dp, struct ctl_reply *reply)
{
	struct dp_ra *ra = dp->ra;
	uint64_t now = evloop_now_ms();

	for (unsigned i = 0; ra && i < ra->n; i++) {
		const struct ra_if *r = &ra->ifs[i];
		const struct fwd_if *f =
		    r->ifindex ? fwd_snap_if(fwd_engine_current(dp->e), r->ifindex) : NULL;
		struct json_object *o = json_object_new_object(), *pa = json_object_new_array();
		struct nd_prefix px[ND_RA_MAX_PREFIX];
		uint8_t store[ND_RA_MAX_PREFIX][16];
		unsigned np = f ? ra_prefixes(r, f, px, store) : 0;
		char buf[IP_PREFIX_STRLEN];

		json_object_object_add(o, "dev", json_object_new_string(r->name));
		json_object_object_add(o, "state",
				       json_object_new_string(r->on            ? "advertising"
							      : r->final_left  ? "retracting"
							      : !r->configured ? "removed"
									       : "idle"));
		if (r->have_ll) {
			struct ip_addr a = { .family = AF_INET6 };

			memcpy(a.bytes, r->ll, 16);
			json_object_object_add(
			    o, "source",
			    json_object_new_string(ip_addr_format(&a, buf, sizeof(buf))));
		}
		add_int(o, "router_lifetime_s", r->cfg.router_lifetime_s);
		add_int(o, "min_interval_ms", r->cfg.min_interval_ms);
		add_int(o, "max_interval_ms", r->cfg.max_interval_ms);
		add_int(o, "hop_limit", r->cfg.hop_limit);
		add_int(o, "mtu", r->cfg.mtu);
		add_int(o, "reachable_time_ms", r->cfg.reachable_time_ms);
		add_int(o, "retrans_timer_ms", r->cfg.retrans_timer_ms);
		{
			struct json_object *fl = json_object_new_array();

			if (r->cfg.managed)
				json_object_array_add(fl, json_object_new_string("managed"));
			if (r->cfg.other_config)
				json_object_array_add(fl, json_object_new_string("other_config"));
			json_object_object_add(o, "flags", fl);
		}
		for (unsigned j = 0; j < np; j++) {
			struct json_object *x = json_object_new_object();
			struct ip_prefix p = { .len = px[j].len };

			p.addr.family = AF_INET6;
			memcpy(p.addr.bytes, px[j].prefix, 16);
			ip_prefix_mask(&p);
			json_object_object_add(
			    x, "prefix",
			    json_object_new_string(ip_prefix_format(&p, buf, sizeof(buf))));
			json_object_object_add(
			    x, "on_link", json_object_new_boolean(px[j].flags & ND_PFX_ON_LINK));
			json_object_object_add(x, "autonomous",
					       json_object_new_boolean(px[j].flags & ND_PFX_AUTO));
			add_int(x, "valid_lifetime_s", px[j].valid);
			add_int(x, "preferred_lifetime_s", px[j].preferred);
			json_object_array_add(pa, x);
		}
		json_object_object_add(o, "prefixes", pa);
		if (r->on)
			add_int(o, "next_ms", (int64_t)(r->next > now ? r->next - now : 0));
		if (r->last_sent)
			add_int(o, "last_sent_ms_ago", (int64_t)(now - r->last_sent));
		add_int(o, "ra_sent", (int64_t)r->st.sent);
		add_int(o, "ra_sent_final", (int64_t)r->st.sent_final);
		add_int(o, "rs_received", (int64_t)r->st.rs_received);
		add_int(o, "rs_answered_unicast", (int64_t)r->st.rs_unicast);
		add_int(o, "rs_answered_multicast", (int64_t)r->st.rs_multicast);
		add_int(o, "rs_ignored", (int64_t)r->st.rs_ignored);
		add_int(o, "send_failed", (int64_t)r->st.send_failed);
		if (ctl_reply_record(reply, o) < 0)
			return CTL_EFAILED;
	}
	return CTL_OK;
}

void dp_ra_metrics(struct gw_dp *dp, FILE *out)
{
	struct dp_ra *ra = dp->ra;
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} fam[] = {
		{ "ibgw_ra_sent_total", "counter",
		  "Router advertisements sent (unsolicited, solicited, final).",
		  offsetof(struct ra_stats, sent) },
		{ "ibgw_ra_final_sent_total", "counter",
		  "Router advertisements sent with router lifetime 0 (stopping, failover).",
		  offsetof(struct ra_stats, sent_final) },
		{ "ibgw_ra_rs_received_total", "counter", "Router solicitations received.",
		  offsetof(struct ra_stats, rs_received) },
		{ "ibgw_ra_rs_answered_unicast_total", "counter",
		  "Router solicitations answered to the solicitor.",
		  offsetof(struct ra_stats, rs_unicast) },
		{ "ibgw_ra_rs_answered_multicast_total", "counter",
		  "Router solicitations answered by a multicast advertisement.",
		  offsetof(struct ra_stats, rs_multicast) },
		{ "ibgw_ra_rs_ignored_total", "counter",
		  "Router solicitations received while not advertising (failover backup, down).",
		  offsetof(struct ra_stats, rs_ignored) },
		{ "ibgw_ra_send_failed_total", "counter",
		  "Router advertisements not sent (no buffer, ring full, interface down).",
		  offsetof(struct ra_stats, send_failed) },
	};
	char lbl[128];

	if (!ra || !ra->n)
		return;
	metrics_family(out, "ibgw_ra_advertising", "gauge",
		       "1 while the interface sends router advertisements.");
	for (unsigned i = 0; i < ra->n; i++)
		fprintf(out, "ibgw_ra_advertising{dev=\"%s\"} %d\n",
			metrics_label_escape(ra->ifs[i].name, lbl, sizeof(lbl)), ra->ifs[i].on);
	for (size_t m = 0; m < sizeof(fam) / sizeof(fam[0]); m++) {
		metrics_family(out, fam[m].name, fam[m].type, fam[m].help);
		for (unsigned i = 0; i < ra->n; i++)
			fprintf(out, "%s{dev=\"%s\"} %llu\n", fam[m].name,
				metrics_label_escape(ra->ifs[i].name, lbl, sizeof(lbl)),
				(unsigned long long)*(
				    const uint64_t *)((const char *)&ra->ifs[i].st + fam[m].off));
	}
}
