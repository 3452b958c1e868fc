/*
 * An IB router's forwarding decision and header rewrite (see router.h). Tables are
 * small fixed arrays scanned per packet: a simulated router holds a handful of routes
 * and groups, and the fabric calls it from its one switching thread.
 */
#include "sim/fabric/router.h"

#include <errno.h>
#include <string.h>

#include "lib/ib_bytes.h"
#include "lib/ib_hdr.h"

static bool lid_unicast(uint16_t lid)
{
	return lid != 0 && lid < IB_LID_MC_FIRST;
}

static bool port_ok(const struct router *rt, unsigned port)
{
	return port >= 1 && port <= ROUTER_PORTS_MAX && rt->port[port].used;
}

int router_port_set(struct router *rt, unsigned port, uint16_t lid, uint64_t gid_prefix,
		    uint64_t guid, unsigned mtu_bytes)
{
	struct router_port *p;

	if (port < 1 || port > ROUTER_PORTS_MAX || !lid_unicast(lid) || mtu_bytes == 0)
		return -EINVAL;
	p = &rt->port[port];
	p->used = true;
	p->lid = lid;
	p->gid_prefix = gid_prefix;
	p->guid = guid;
	p->mtu_bytes = mtu_bytes;
	for (unsigned sl = 0; sl < 15; sl++)
		p->sl2vl[sl] = (uint8_t)sl;
	p->sl2vl[15] = 0; /* VL15 carries SMPs only, which no router forwards */
	return 0;
}

/* gid with the bits past plen cleared. */
static void gid_mask(const union ib_gid *gid, unsigned plen, union ib_gid *out)
{
	for (unsigned i = 0; i < IB_GID_LEN; i++) {
		unsigned bits = plen >= 8 * (i + 1) ? 8 : plen > 8 * i ? plen - 8 * i : 0;

		out->raw[i] = bits ? (uint8_t)(gid->raw[i] & (0xff00 >> bits)) : 0;
	}
}

int router_route_add(struct router *rt, const union ib_gid *prefix, unsigned plen, unsigned port,
		     uint16_t next_hop)
{
	struct router_route r = { .plen = (uint8_t)plen,
				  .port = (uint8_t)port,
				  .next_hop = next_hop };

	if (plen > 128 || port < 1 || port > ROUTER_PORTS_MAX ||
	    (next_hop && !lid_unicast(next_hop)))
		return -EINVAL;
	gid_mask(prefix, plen, &r.prefix);
	for (unsigned i = 0; i < rt->n_routes; i++)
		if (rt->route[i].plen == plen && ib_gid_equal(&rt->route[i].prefix, &r.prefix)) {
			rt->route[i] = r;
			return 0;
		}
	if (rt->n_routes == ROUTER_ROUTES_MAX)
		return -ENOSPC;
	rt->route[rt->n_routes++] = r;
	return 0;
}

const struct router_route *router_lookup(const struct router *rt, const union ib_gid *dgid)
{
	const struct router_route *best = NULL;

	for (unsigned i = 0; i < rt->n_routes; i++) {
		const struct router_route *r = &rt->route[i];
		union ib_gid m;

		if (best && r->plen <= best->plen)
			continue;
		gid_mask(dgid, r->plen, &m);
		if (ib_gid_equal(&m, &r->prefix))
			best = r;
	}
	return best;
}

static struct router_group *group_find(const struct router *rt, const union ib_gid *mgid)
{
	for (unsigned i = 0; i < rt->n_groups; i++)
		if (ib_gid_equal(&rt->group[i].mgid, mgid))
			return (struct router_group *)&rt->group[i];
	return NULL;
}

int router_group_join(struct router *rt, const union ib_gid *mgid, unsigned port, uint16_t mlid)
{
	struct router_group *g;

	if (!ib_gid_is_multicast(mgid) || port < 1 || port > ROUTER_PORTS_MAX ||
	    (mlid && (mlid < IB_LID_MC_FIRST || mlid == IB_LID_PERMISSIVE)))
		return -EINVAL;
	g = group_find(rt, mgid);
	if (!g) {
		if (!mlid)
			return 0;
		if (rt->n_groups == ROUTER_GROUPS_MAX)
			return -ENOSPC;
		g = &rt->group[rt->n_groups++];
		memset(g, 0, sizeof(*g));
		g->mgid = *mgid;
	}
	g->mlid[port] = mlid;
	return 0;
}

bool router_joined(const struct router *rt, unsigned port, const union ib_gid *mgid, uint16_t mlid)
{
	const struct router_group *g;

	if (port < 1 || port > ROUTER_PORTS_MAX || !mlid)
		return false;
	g = group_find(rt, mgid);
	return g && g->mlid[port] == mlid;
}

int router_proxy_add(struct router *rt, const union ib_gid *prefix, unsigned plen)
{
	struct router_proxy x;

	if (plen > 128 || plen < 8 || !ib_gid_is_multicast(prefix))
		return -EINVAL;
	gid_mask(prefix, plen, &x.prefix);
	x.plen = (uint8_t)plen;
	for (unsigned i = 0; i < rt->n_proxies; i++)
		if (rt->proxy[i].plen == plen && ib_gid_equal(&rt->proxy[i].prefix, &x.prefix))
			return 0;
	if (rt->n_proxies == ROUTER_PROXIES_MAX)
		return -ENOSPC;
	rt->proxy[rt->n_proxies++] = x;
	return 0;
}

bool router_proxies(const struct router *rt, const union ib_gid *mgid)
{
	for (unsigned i = 0; i < rt->n_proxies; i++) {
		union ib_gid m;

		gid_mask(mgid, rt->proxy[i].plen, &m);
		if (ib_gid_equal(&m, &rt->proxy[i].prefix))
			return true;
	}
	return false;
}

enum router_verdict router_decide(const struct router *rt, unsigned in_port,
				  const struct ib_packet *pkt, router_resolve_fn resolve, void *arg,
				  struct router_hop hops[ROUTER_PORTS_MAX], unsigned *n)
{
	bool mcast = pkt->lrh.dlid >= IB_LID_MC_FIRST && pkt->lrh.dlid != IB_LID_PERMISSIVE;
	const struct router_route *r;
	uint16_t dlid;

	*n = 0;
	if (!pkt->has_grh || mcast != ib_gid_is_multicast(&pkt->grh.dgid))
		return ROUTER_DROP_NO_GRH;
	if (pkt->grh.hop_limit <= 1)
		return ROUTER_DROP_HOP_LIMIT;
	if (mcast) {
		const struct router_group *g = group_find(rt, &pkt->grh.dgid);
		uint64_t from = ib_gid_prefix(&pkt->grh.sgid);

		bool joined;

		if (in_port < 1 || in_port > ROUTER_PORTS_MAX)
			return ROUTER_DROP_NO_ROUTE;
		joined = g && g->mlid[in_port] == pkt->lrh.dlid;
		if (!joined && !(resolve && router_proxies(rt, &pkt->grh.dgid)))
			return ROUTER_DROP_NO_ROUTE;
		for (unsigned p = 1; p <= ROUTER_PORTS_MAX; p++) {
			uint16_t mlid;

			if (p == in_port || !port_ok(rt, p) || rt->port[p].gid_prefix == from)
				continue;
			mlid = joined ? g->mlid[p] : resolve(arg, p, &pkt->grh.dgid);
			if (!mlid || pkt->payload_len > rt->port[p].mtu_bytes)
				continue;
			hops[*n].port = (uint8_t)p;
			hops[*n].dlid = mlid;
			(*n)++;
		}
		return *n ? ROUTER_FORWARD : ROUTER_DROP_NO_ROUTE;
	}
	r = router_lookup(rt, &pkt->grh.dgid);
	if (!r || !port_ok(rt, r->port))
		return ROUTER_DROP_NO_ROUTE;
	dlid = r->next_hop ? r->next_hop : resolve ? resolve(arg, r->port, &pkt->grh.dgid) : 0;
	if (!lid_unicast(dlid))
		return ROUTER_DROP_NO_ROUTE;
	if (pkt->payload_len > rt->port[r->port].mtu_bytes)
		return ROUTER_DROP_MTU;
	hops[0].port = r->port;
	hops[0].dlid = dlid;
	*n = 1;
	return ROUTER_FORWARD;
}

int router_rewrite(const struct router *rt, const struct router_hop *hop,
		   const struct ib_packet *pkt, const uint8_t *buf, size_t len, uint8_t *out)
{
	const struct router_port *p;

	if (!pkt->has_grh || !port_ok(rt, hop->port) || len < IB_LRH_LEN + IB_GRH_LEN + IB_VCRC_LEN)
		return -EINVAL;
	p = &rt->port[hop->port];
	if (out != buf)
		memcpy(out, buf, len);
	/* LRH: VL from the egress port's table on the packet's SL (kept), DLID, SLID. */
	out[0] = (uint8_t)(p->sl2vl[pkt->lrh.sl & 0xf] << 4 | (out[0] & 0xf));
	ib_put_be16(out + 2, hop->dlid);
	ib_put_be16(out + 6, p->lid);
	/* GRH hop limit (octet 7 of the GRH); decide() refused 0 and 1. */
	out[IB_LRH_LEN + 7] = (uint8_t)(pkt->grh.hop_limit - 1);
	return ib_packet_reseal_vcrc(out, len);
}

const char *router_verdict_str(enum router_verdict v)
{
	switch (v) {
	case ROUTER_FORWARD:
		return "forwarded";
	case ROUTER_DROP_NO_GRH:
		return "no GRH, or DGID and DLID disagree on multicast";
	case ROUTER_DROP_HOP_LIMIT:
		return "hop limit 0 or 1";
	case ROUTER_DROP_NO_ROUTE:
		return "no route for the DGID";
	case ROUTER_DROP_MTU:
		return "payload above the egress port's MTU";
	}
	return "unknown";
}
