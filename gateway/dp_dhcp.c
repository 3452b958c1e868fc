/*
 * DHCPv4 relay agent: which interfaces relay, the slow path's callback, the sends (see
 * dp_dhcp.h). The message rewrites and the reply's destination are pkt/dhcp.h's (pure,
 * unit-tested); this file keeps per-interface counters and picks interfaces and
 * addresses.
 *
 * Threads: control thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_json.h"
#include "gateway/dp_dhcp.h"
#include "lib/evloop.h"
#include "lib/ib_gid.h"
#include "lib/ipoib.h"
#include "lib/log.h"
#include "mgmt/ctl_proto.h"
#include "mgmt/ctl_server.h"
#include "mgmt/metrics_http.h"
#include "pkt/dhcp.h"
#include "pkt/dhcp6.h"

#define DHCP_RECHECK_MS 1000 /* interfaces that came up or went away, looked at this often */
#define DHCP_XID_CACHE  32   /* IPoIB: recent clients' addresses, by transaction id */
#define DHCP_XID_TTL_MS 60000

struct dhcp_stats {
	uint64_t requests;        /* client messages received on the interface */
	uint64_t relayed;         /* of which sent on to the servers */
	uint64_t to_servers;      /* datagrams sent to servers (relayed x servers) */
	uint64_t opt82_added;     /* option 82 appended */
	uint64_t opt82_no_room;   /* option 82 asked, left out: the message would not fit */
	uint64_t replies;         /* server replies for clients on the interface */
	uint64_t replies_bcast;   /* of which broadcast on the link */
	uint64_t replies_unicast; /* of which unicast (ciaddr, yiaddr at the client's address) */
	uint64_t ib_no_client_hw; /* IPoIB unicast wanted, no type-32 client identifier */
	uint64_t hops_exceeded;   /* client messages past max_hops: dropped */
	uint64_t bad;             /* not DHCP (dhcp_parse refused), or a reply from a client */
	uint64_t send_failed;     /* no route to a server, no buffer, interface down */
	uint64_t not_serving;     /* client messages left to the pair's other box */
};

/* An IPoIB client's address as its request's client identifier (type 32) gave it:
 * servers need not echo option 61 in their replies (dnsmasq does not), so the relay
 * remembers it for the reply with the same xid. */
struct dhcp_xid {
	uint32_t xid;
	uint64_t at; /* ms; 0: free */
	uint8_t hw[DHCP_IPOIB_HWLEN];
};

/* One interface configured to relay. Owner: control thread. */
struct dhcp_if {
	char name[GW_NAME_MAX];
	bool ib;
	struct gw_dhcp_relay_config cfg;
	uint32_t ifindex; /* the engine interface as last seen (0: none) */
	bool v4, v6;      /* IPv4 / IPv6 servers configured: DHCPv4 / DHCPv6 relayed */
	uint32_t joined;  /* DHCPv6: ff02::1:2 (MAC or MGID) joined on this ifindex (0: no) */
	struct dhcp_xid xids[DHCP_XID_CACHE];
	unsigned next_xid;
	struct dhcp_stats st;
};

static void xid_note(struct dhcp_if *r, const struct dhcp_info *di)
{
	uint64_t now = evloop_now_ms();
	struct dhcp_xid *x = NULL;

	if (!r->ib || !di->client_id || di->client_id_len != 1 + DHCP_IPOIB_HWLEN ||
	    di->client_id[0] != DHCP_HTYPE_IPOIB)
		return;
	for (unsigned i = 0; i < DHCP_XID_CACHE && !x; i++)
		if (r->xids[i].at && r->xids[i].xid == di->xid)
			x = &r->xids[i];
	if (!x) {
		x = &r->xids[r->next_xid];
		r->next_xid = (r->next_xid + 1) % DHCP_XID_CACHE;
	}
	x->xid = di->xid;
	x->at = now ? now : 1;
	memcpy(x->hw, di->client_id + 1, DHCP_IPOIB_HWLEN);
}

static const uint8_t *xid_find(const struct dhcp_if *r, uint32_t xid)
{
	uint64_t now = evloop_now_ms();

	for (unsigned i = 0; i < DHCP_XID_CACHE; i++)
		if (r->xids[i].at && r->xids[i].xid == xid && now - r->xids[i].at < DHCP_XID_TTL_MS)
			return r->xids[i].hw;
	return NULL;
}

struct dp_dhcp {
	struct gw_dp *dp;
	struct evtimer *timer;
	uint32_t mask; /* as bound */
	struct dhcp_if ifs[DP_MAX_LINKS];
	unsigned n;
	uint64_t unmatched; /* replies whose giaddr is no relaying interface's; requests on
			     * an interface that does not relay; not DHCP there */
};

static struct dhcp_if *by_ifindex(struct dp_dhcp *d, uint32_t ifindex)
{
	for (unsigned i = 0; i < d->n; i++)
		if (d->ifs[i].ifindex && d->ifs[i].ifindex == ifindex)
			return &d->ifs[i];
	return NULL;
}

/* Our first IPv4 address on f (the giaddr there); false: none. */
/* The relay's IPv4 address on the interface: in a failover pair the service address this
 * box holds there (it moves with the service, so the server's answer reaches whichever
 * box then holds it, and servers that name the relay as router name the right one),
 * else the interface's first IPv4 address. */
static bool relay_v4(struct dp_dhcp *d, const struct dhcp_if *r, const struct fwd_if *f,
		     uint8_t out[4]);

static bool if_v4(const struct fwd_if *f, uint8_t out[4])
{
	for (unsigned i = 0; f && i < f->n_addrs; i++)
		if (f->addrs[i].addr.family == AF_INET) {
			memcpy(out, f->addrs[i].addr.bytes, 4);
			return true;
		}
	return false;
}

static bool relay_v4(struct dp_dhcp *d, const struct dhcp_if *r, const struct fwd_if *f,
		     uint8_t out[4])
{
	struct ip_addr a;

	if (dp_ha_service_addr(d->dp, r->name, AF_INET, &a) == 0) {
		memcpy(out, a.bytes, 4);
		return true;
	}
	return if_v4(f, out);
}

/* The routes the relay on r sends and takes its servers' answers through: its
 * interface's tenant's (addresses may repeat in another tenant). */
static struct rt_table *relay_rt(struct dp_dhcp *d, const struct dhcp_if *r)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(d->dp->e), r->ifindex);

	return f ? f->rt : NULL;
}

/* The relaying interface that owns giaddr in tenant rt (the reply's arrival's). */
static struct dhcp_if *by_giaddr(struct dp_dhcp *d, const struct rt_table *rt,
				 const uint8_t giaddr[4])
{
	const struct fwd_snap *s = fwd_engine_current(d->dp->e);

	for (unsigned i = 0; i < d->n; i++) {
		const struct fwd_if *f =
		    d->ifs[i].ifindex ? fwd_snap_if(s, d->ifs[i].ifindex) : NULL;

		for (unsigned j = 0; f && f->rt == rt && j < f->n_addrs; j++)
			if (f->addrs[j].addr.family == AF_INET &&
			    !memcmp(f->addrs[j].addr.bytes, giaddr, 4))
				return &d->ifs[i];
	}
	return NULL;
}

/* ---- the two directions -------------------------------------------------------------- */

static void from_client(struct dp_dhcp *d, struct dhcp_if *r, const uint8_t *p, size_t len,
			const struct dhcp_info *di)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(d->dp->e), r->ifindex);
	struct dhcp_relay_params rp = {
		.max_hops = r->cfg.max_hops,
		.option82 = r->cfg.option82,
		.circuit_id = (const uint8_t *)r->name,
		.circuit_len = strlen(r->name),
		.remote_id = (const uint8_t *)r->cfg.remote_id,
		.remote_len = strlen(r->cfg.remote_id),
	};
	uint8_t out[DHCP_MAX_LEN];
	enum dhcp_result why;
	bool added;
	size_t n;

	r->st.requests++;
	if (!dp_ha_serves(d->dp, r->name)) {
		r->st.not_serving++; /* the pair's MASTER relays: one copy per request */
		return;
	}
	if (!relay_v4(d, r, f, rp.giaddr)) {
		r->st.send_failed++; /* no giaddr: the config refuses it, a reload may race */
		return;
	}
	/* Within the interface's MTU, less the IP and UDP headers the servers' path adds. */
	n = dhcp_relay_request(p, len, di, &rp, out,
			       f->mtu > 28 && f->mtu - 28 < sizeof(out) ? f->mtu - 28 : sizeof(out),
			       &added, &why);
	if (!n) {
		if (why == DHCP_HOPS_EXCEEDED)
			r->st.hops_exceeded++;
		else
			r->st.send_failed++;
		return;
	}
	if (added)
		r->st.opt82_added++;
	else if (rp.option82 && !di->has_relay_info)
		r->st.opt82_no_room++;
	r->st.relayed++;
	xid_note(r, di);
	for (unsigned i = 0; i < r->cfg.n_servers; i++) {
		int ret = fwd_sp_send_udp_routed(d->dp->e, relay_rt(d, r), &r->cfg.servers[i],
						 DHCP_SERVER_PORT, DHCP_SERVER_PORT, out, n, NULL);

		if (ret < 0)
			r->st.send_failed++;
		else
			r->st.to_servers++;
	}
}

static void from_server(struct dp_dhcp *d, const struct rt_table *rt, const uint8_t *p, size_t len,
			const struct dhcp_info *di)
{
	struct dhcp_if *r = by_giaddr(d, rt, di->giaddr);
	struct ip_addr src = { .family = AF_INET }, dst = { .family = AF_INET };
	uint8_t out[DHCP_MAX_LEN];
	struct dhcp_dest to;
	size_t n;
	int ret;

	if (!r) {
		d->unmatched++;
		return;
	}
	r->st.replies++;
	n = dhcp_relay_reply(p, len, di, out, sizeof(out));
	if (!n) {
		r->st.send_failed++;
		return;
	}
	dhcp_reply_dest(di, r->ib, &to);
	if (to.ib_no_hw) {
		const uint8_t *hw = xid_find(r, di->xid);

		if (hw) {
			to.kind = DHCP_DEST_YIADDR_HW;
			memcpy(to.ip, di->yiaddr, 4);
			memcpy(to.hw, hw, DHCP_IPOIB_HWLEN);
			to.hw_len = DHCP_IPOIB_HWLEN;
		} else {
			r->st.ib_no_client_hw++;
		}
	}
	memcpy(src.bytes, di->giaddr, 4);
	memcpy(dst.bytes, to.ip, 4);
	switch (to.kind) {
	case DHCP_DEST_CIADDR:
		ret = fwd_sp_send_udp(d->dp->e, r->ifindex, &src, &dst, DHCP_SERVER_PORT,
				      DHCP_CLIENT_PORT, out, n);
		break;
	case DHCP_DEST_YIADDR_HW:
		ret = fwd_sp_send_udp_ll(d->dp->e, r->ifindex, &src, &dst, DHCP_SERVER_PORT,
					 DHCP_CLIENT_PORT, out, n, to.hw);
		break;
	case DHCP_DEST_BCAST:
	default:
		ret = fwd_sp_send_udp_ll(d->dp->e, r->ifindex, &src, &dst, DHCP_SERVER_PORT,
					 DHCP_CLIENT_PORT, out, n, NULL);
		break;
	}
	if (ret < 0)
		r->st.send_failed++;
	else if (to.kind == DHCP_DEST_BCAST)
		r->st.replies_bcast++;
	else
		r->st.replies_unicast++;
}

/* ---- DHCPv6 (RFC 8415 19) ------------------------------------------------------------ */

static bool is_ll6(const uint8_t *a)
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

/* Our IPv6 address on f: link-local (ll) or global / unique-local (!ll). */
static const uint8_t *if_v6(const struct fwd_if *f, bool ll)
{
	for (unsigned i = 0; f && i < f->n_addrs; i++)
		if (f->addrs[i].addr.family == AF_INET6 && is_ll6(f->addrs[i].addr.bytes) == ll &&
		    f->addrs[i].addr.bytes[0] != 0xff)
			return f->addrs[i].addr.bytes;
	return NULL;
}

static void from_client6(struct dp_dhcp *d, struct dhcp_if *r, const struct ip_addr *src,
			 const uint8_t *p, size_t len)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(d->dp->e), r->ifindex);
	const uint8_t *link = if_v6(f, false);
	uint8_t out[DHCP6_MAX_LEN];
	enum dhcp6_result why;
	struct ip_addr svc;
	size_t n;

	r->st.requests++;
	if (!dp_ha_serves(d->dp, r->name)) {
		r->st.not_serving++;
		return;
	}
	if (dp_ha_service_addr(d->dp, r->name, AF_INET6, &svc) == 0 && !is_ll6(svc.bytes))
		link = svc.bytes; /* the address that moves with the service, as for giaddr */
	if (!link) {
		r->st.send_failed++;
		return;
	}
	n = dhcp6_relay_forward(p, len, link, src->bytes, (const uint8_t *)r->name, strlen(r->name),
				out, sizeof(out), &why);
	if (!n) {
		if (why == DHCP6_HOPS_EXCEEDED)
			r->st.hops_exceeded++;
		else if (why == DHCP6_NO_ROOM)
			r->st.send_failed++;
		else
			r->st.bad++;
		return;
	}
	r->st.relayed++;
	for (unsigned i = 0; i < r->cfg.n_servers; i++) {
		if (r->cfg.servers[i].family != AF_INET6)
			continue;
		if (fwd_sp_send_udp_routed(d->dp->e, relay_rt(d, r), &r->cfg.servers[i],
					   DHCP6_SERVER_PORT, DHCP6_SERVER_PORT, out, n, NULL) < 0)
			r->st.send_failed++;
		else
			r->st.to_servers++;
	}
}

static void from_server6(struct dp_dhcp *d, const struct rt_table *rt, const uint8_t *p, size_t len)
{
	struct dhcp6_relay_reply rr;
	struct dhcp_if *r = NULL;
	struct ip_addr src = { .family = AF_INET6 }, peer = { .family = AF_INET6 };
	const struct fwd_if *f;
	const uint8_t *a;

	if (dhcp6_parse_relay_reply(p, len, &rr) != DHCP6_OK) {
		d->unmatched++;
		return;
	}
	for (unsigned i = 0; i < d->n && !r && rr.ifid; i++)
		if (d->ifs[i].v6 && strlen(d->ifs[i].name) == rr.ifid_len &&
		    !memcmp(d->ifs[i].name, rr.ifid, rr.ifid_len))
			r = &d->ifs[i];
	f = r && r->ifindex ? fwd_snap_if(fwd_engine_current(d->dp->e), r->ifindex) : NULL;
	if (!f || f->rt != rt) { /* none, or in another tenant than the reply's */
		d->unmatched++;
		return;
	}
	r->st.replies++;
	a = if_v6(f, true);
	if (!a)
		a = if_v6(f, false);
	if (!a) {
		r->st.send_failed++;
		return;
	}
	memcpy(src.bytes, a, 16);
	memcpy(peer.bytes, rr.peer, 16);
	/* To the client (546), or to the relay nearer it that sent us a Relay-Forward. */
	if (fwd_sp_send_udp(d->dp->e, r->ifindex, &src, &peer, DHCP6_SERVER_PORT,
			    rr.msg[0] == DHCP6_RELAY_REPL ? DHCP6_SERVER_PORT : DHCP6_CLIENT_PORT,
			    rr.msg, rr.msg_len) < 0)
		r->st.send_failed++;
	else
		r->st.replies_unicast++;
}

static void on_dhcp6(struct dp_dhcp *d, struct dhcp_if *r, uint32_t ifindex,
		     const struct ip_addr *src, uint16_t sport, const uint8_t *p, size_t len)
{
	if (len >= 1 && p[0] == DHCP6_RELAY_REPL && sport == DHCP6_SERVER_PORT) {
		const struct fwd_if *in = fwd_snap_if(fwd_engine_current(d->dp->e), ifindex);

		from_server6(d, in ? in->rt : NULL, p, len);
		return;
	}
	if (!r || !r->v6) {
		d->unmatched++;
		return;
	}
	from_client6(d, r, src, p, len);
}

/* The slow path's callback: UDP to port 67, broadcast on a relaying interface or to one
 * of our addresses anywhere. */
static void on_dhcp(void *ctx, uint32_t ifindex, const struct ip_addr *src,
		    const struct ip_addr *dst, uint16_t sport, const uint8_t *payload, size_t len)
{
	struct dp_dhcp *d = ctx;
	struct dhcp_if *r = by_ifindex(d, ifindex);
	struct dhcp_info di;

	(void)dst;
	if (src->family == AF_INET6) {
		on_dhcp6(d, r, ifindex, src, sport, payload, len);
		return;
	}
	if (dhcp_parse(payload, len, &di) != DHCP_OK) {
		if (r)
			r->st.bad++;
		else
			d->unmatched++;
		return;
	}
	if (di.op == DHCP_OP_REPLY) {
		/* From a server (port 67) to giaddr; a client never sends a BOOTREPLY. */
		if (sport != DHCP_SERVER_PORT) {
			if (r)
				r->st.bad++;
			else
				d->unmatched++;
			return;
		}
		const struct fwd_if *in = fwd_snap_if(fwd_engine_current(d->dp->e), ifindex);

		from_server(d, in ? in->rt : NULL, payload, len, &di);
		return;
	}
	if (!r || !r->v4) {
		d->unmatched++; /* a request to us where we do not relay */
		return;
	}
	from_client(d, r, payload, len, &di);
}

/* ---- which interfaces relay ---------------------------------------------------------- */

/* All_DHCP_Relay_Agents_and_Servers on the interface, so that Solicits reach us:
 * 33:33:00:01:00:02 on Ethernet, its MGID with the link's P_Key on IPoIB. (Left
 * joined when the section goes: the relay then drops what arrives, counted.) */
static void join6(struct dhcp_if *r, struct dp_link *k)
{
	bool ok = false;

	if (!r->ib && k->eops && k->eth && k->eops->mc_add) {
		static const uint8_t mac[6] = { 0x33, 0x33, 0, 1, 0, 2 };

		ok = k->eops->mc_add(k->eth, mac) == 0;
	} else if (r->ib && k->link) {
		union ib_gid mgid;

		ok = ipoib_mgid_from_ipv6(dhcp6_all_relays, k->pkey, IB_MGID_SCOPE_LINK, &mgid) ==
			 0 &&
		     ipoib_link_mcast_join(k->link, &mgid) == 0;
	}
	if (ok)
		r->joined = k->ifindex;
}

static void rebind(struct dp_dhcp *d)
{
	uint32_t mask = 0;

	for (unsigned i = 0; i < d->n; i++) {
		struct dp_link *k = dp_link_by_name(d->dp, d->ifs[i].name);

		d->ifs[i].ifindex = k ? k->ifindex : 0;
		if (d->ifs[i].ifindex && d->ifs[i].ifindex < 32)
			mask |= 1u << d->ifs[i].ifindex;
		if (k && d->ifs[i].v6 && d->ifs[i].joined != k->ifindex)
			join6(&d->ifs[i], k);
	}
	if (mask != d->mask) { /* dp_dhcp_config sets d->mask to force this */
		fwd_sp_dhcp_bind(d->dp->e, mask, d->n ? on_dhcp : NULL, d);
		d->mask = mask;
	}
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *ctx)
{
	(void)loop;
	(void)t;
	rebind(ctx);
}

void dp_dhcp_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	struct dp_dhcp *d = dp->dhcp;
	struct dhcp_if old[DP_MAX_LINKS];
	unsigned n_old;

	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			log_error("dhcp relay: out of memory; no DHCP is relayed");
			return;
		}
		d->dp = dp;
		dp->dhcp = d;
		d->timer = evtimer_new(dp->loop, on_timer, d);
		if (d->timer)
			evtimer_start(d->timer, DHCP_RECHECK_MS, DHCP_RECHECK_MS);
	}
	n_old = d->n;
	memcpy(old, d->ifs, sizeof(old));
	d->n = 0;
	for (unsigned pass = 0; pass < 2; pass++) {
		unsigned cnt = pass ? cfg->n_eth_ifs : cfg->n_ipoib_links;

		for (unsigned i = 0; i < cnt && d->n < DP_MAX_LINKS; i++) {
			const char *name = pass ? cfg->eth_ifs[i].name : cfg->ipoib_links[i].name;
			const struct gw_dhcp_relay_config *c =
			    pass ? &cfg->eth_ifs[i].dhcp : &cfg->ipoib_links[i].dhcp;
			struct dhcp_if *r = &d->ifs[d->n];

			if (!c->enabled)
				continue;
			memset(r, 0, sizeof(*r));
			snprintf(r->name, sizeof(r->name), "%s", name);
			r->ib = !pass;
			r->cfg = *c;
			for (unsigned j = 0; j < c->n_servers; j++) {
				r->v4 |= c->servers[j].family == AF_INET;
				r->v6 |= c->servers[j].family == AF_INET6;
			}
			for (unsigned j = 0; j < n_old; j++)
				if (!strcmp(old[j].name, name)) {
					r->st = old[j].st;
					r->joined = old[j].joined;
				}
			d->n++;
		}
	}
	d->mask = UINT32_MAX; /* bind again whatever the mask */
	rebind(d);
	if (d->n)
		log_info("dhcp relay on %u interface%s", d->n, d->n == 1 ? "" : "s");
}

void dp_dhcp_stop(struct gw_dp *dp)
{
	struct dp_dhcp *d = dp->dhcp;

	if (!d)
		return;
	if (dp->e)
		fwd_sp_dhcp_bind(dp->e, 0, NULL, NULL);
	evtimer_free(d->timer);
	free(d);
	dp->dhcp = NULL;
}

/* ---- gwctl show dhcp, metrics -------------------------------------------------------- */

int gw_dp_show_dhcp(struct gw_dp *dp, struct ctl_reply *reply)
{
	struct dp_dhcp *d = dp->dhcp;

	for (unsigned i = 0; d && i < d->n; i++) {
		const struct dhcp_if *r = &d->ifs[i];
		const struct fwd_if *f =
		    r->ifindex ? fwd_snap_if(fwd_engine_current(dp->e), r->ifindex) : NULL;
		struct json_object *o = json_object_new_object(), *sa = json_object_new_array();
		char buf[IP_ADDR_STRLEN];
		uint8_t gi[4];

		json_object_object_add(o, "dev", json_object_new_string(r->name));
		json_object_object_add(o, "state",
				       json_object_new_string(!f || !f->up ? "down"
							      : dp_ha_serves(dp, r->name)
								  ? "relaying"
								  : "standby"));
		if (relay_v4(d, r, f, gi)) {
			struct ip_addr a = { .family = AF_INET };

			memcpy(a.bytes, gi, 4);
			json_object_object_add(
			    o, "giaddr",
			    json_object_new_string(ip_addr_format(&a, buf, sizeof(buf))));
		}
		for (unsigned j = 0; j < r->cfg.n_servers; j++)
			json_object_array_add(sa, json_object_new_string(ip_addr_format(
						      &r->cfg.servers[j], buf, sizeof(buf))));
		json_object_object_add(o, "servers", sa);
		json_object_object_add(o, "option82", json_object_new_boolean(r->cfg.option82));
		if (r->cfg.remote_id[0])
			json_object_object_add(o, "remote_id",
					       json_object_new_string(r->cfg.remote_id));
		add_int(o, "max_hops", r->cfg.max_hops);
		add_int(o, "requests", (int64_t)r->st.requests);
		add_int(o, "relayed", (int64_t)r->st.relayed);
		add_int(o, "to_servers", (int64_t)r->st.to_servers);
		add_int(o, "option82_added", (int64_t)r->st.opt82_added);
		add_int(o, "option82_no_room", (int64_t)r->st.opt82_no_room);
		add_int(o, "replies", (int64_t)r->st.replies);
		add_int(o, "replies_broadcast", (int64_t)r->st.replies_bcast);
		add_int(o, "replies_unicast", (int64_t)r->st.replies_unicast);
		add_int(o, "ib_no_client_hw", (int64_t)r->st.ib_no_client_hw);
		add_int(o, "hops_exceeded", (int64_t)r->st.hops_exceeded);
		add_int(o, "bad", (int64_t)r->st.bad);
		add_int(o, "send_failed", (int64_t)r->st.send_failed);
		add_int(o, "not_serving", (int64_t)r->st.not_serving);
		if (ctl_reply_record(reply, o) < 0)
			return CTL_EFAILED;
	}
	return CTL_OK;
}

void dp_dhcp_metrics(struct gw_dp *dp, FILE *out)
{
	struct dp_dhcp *d = dp->dhcp;
	static const struct {
		const char *name, *help;
		size_t off;
	} fam[] = {
		{ "ibgw_dhcp_relay_requests_total", "DHCP client messages received.",
		  offsetof(struct dhcp_stats, requests) },
		{ "ibgw_dhcp_relay_relayed_total", "DHCP client messages relayed to the servers.",
		  offsetof(struct dhcp_stats, relayed) },
		{ "ibgw_dhcp_relay_to_servers_total",
		  "Datagrams sent to DHCP servers (relayed messages times servers).",
		  offsetof(struct dhcp_stats, to_servers) },
		{ "ibgw_dhcp_relay_option82_added_total",
		  "Relay Agent Information options (82) appended.",
		  offsetof(struct dhcp_stats, opt82_added) },
		{ "ibgw_dhcp_relay_option82_no_room_total",
		  "Client messages relayed without option 82: it would not fit.",
		  offsetof(struct dhcp_stats, opt82_no_room) },
		{ "ibgw_dhcp_relay_replies_total", "DHCP server replies for clients here.",
		  offsetof(struct dhcp_stats, replies) },
		{ "ibgw_dhcp_relay_replies_broadcast_total",
		  "Server replies broadcast on the link (IPoIB: the broadcast group).",
		  offsetof(struct dhcp_stats, replies_bcast) },
		{ "ibgw_dhcp_relay_replies_unicast_total", "Server replies unicast to the client.",
		  offsetof(struct dhcp_stats, replies_unicast) },
		{ "ibgw_dhcp_relay_ib_no_client_hw_total",
		  "IPoIB replies broadcast for want of a type-32 client identifier.",
		  offsetof(struct dhcp_stats, ib_no_client_hw) },
		{ "ibgw_dhcp_relay_hops_exceeded_total",
		  "Client messages dropped: they crossed max_hops relays already.",
		  offsetof(struct dhcp_stats, hops_exceeded) },
		{ "ibgw_dhcp_relay_bad_total", "UDP to port 67 here that is no valid DHCP message.",
		  offsetof(struct dhcp_stats, bad) },
		{ "ibgw_dhcp_relay_send_failed_total",
		  "Relayed messages not sent (no route to a server, no buffer, interface down).",
		  offsetof(struct dhcp_stats, send_failed) },
		{ "ibgw_dhcp_relay_not_serving_total",
		  "Client messages not relayed: the failover pair's other box serves the link.",
		  offsetof(struct dhcp_stats, not_serving) },
	};
	char lbl[128];

	if (!d || !d->n)
		return;
	for (size_t m = 0; m < sizeof(fam) / sizeof(fam[0]); m++) {
		metrics_family(out, fam[m].name, "counter", fam[m].help);
		for (unsigned i = 0; i < d->n; i++)
			fprintf(out, "%s{dev=\"%s\"} %llu\n", fam[m].name,
				metrics_label_escape(d->ifs[i].name, lbl, sizeof(lbl)),
				(unsigned long long)*(
				    const uint64_t *)((const char *)&d->ifs[i].st + fam[m].off));
	}
	metrics_family(
	    out, "ibgw_dhcp_relay_unmatched_total", "counter",
	    "UDP to port 67 for no relaying interface (unknown giaddr, no relay there).");
	fprintf(out, "ibgw_dhcp_relay_unmatched_total %llu\n", (unsigned long long)d->unmatched);
}
