/*
 * The simulated fabric's switching core (see fabric.h for the path of a packet).
 *
 * Per packet there is no allocation and no logging: ports live in a fixed array,
 * LIDs map to ports through a 48K-entry table, each port's QPs sit in an open-addressed
 * hash table (linear probing, backward-shift deletion, so no tombstones), multicast
 * attachments in one array scanned per multicast packet, and held (delayed) packets
 * in slots allocated once, the first time a delay is set, ordered by a binary heap on
 * (due time, arrival number) so packets with equal delays keep their order.
 */
#include "sim/fabric/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_hdr.h"
#include "sim/fabric/router.h"

#define QP_SLOTS  8192 /* power of two, twice FABRIC_QPS_MAX */
#define QPN_FIRST 0x48 /* where an HCA's QPN counter starts: above the special QPs */

_Static_assert((QP_SLOTS & (QP_SLOTS - 1)) == 0 && QP_SLOTS >= 2 * FABRIC_QPS_MAX,
	       "QP table is a power of two, at most half full");

struct qp {
	uint32_t qpn; /* 0: empty slot */
	uint32_t qkey;
	uint16_t pkey_index;
	uint8_t type;
};

struct port {
	bool used;
	int node;
	int subnet; /* index in fabric.subnets, by the port's GID prefix */
	int router; /* -1, or the router (fabric.routers) this port belongs to */
	uint32_t gen;
	struct simfab_port_info info;
	unsigned mtu_bytes;
	struct qp *qps;
	unsigned n_qps;
	uint32_t next_qpn;
	struct fabric_port_stats st;
};

struct node {
	char name[SIMFAB_NAME_MAX];
	bool down;
	uint64_t ports_down; /* bit N: port N of the node set down alone (1..63) */
	uint32_t loss_ppm, delay_ms;
	struct fabric_port_stats st; /* all its ports, since the fabric started */
};

struct mc {
	bool used;
	int port;
	uint32_t qpn;
	uint16_t mlid;
	union ib_gid mgid;
};

/* A GID prefix and the LIDs of its ports: each IB subnet has its own LID space. */
struct subnet {
	bool used;
	uint64_t prefix;
	int8_t lid_port[IB_LID_MC_FIRST]; /* -1: no port */
};

/* A router node: its forwarding state, and the fabric port of each of its ports. */
struct fab_router {
	bool used;
	int node;
	struct router rt;
	int8_t port[ROUTER_PORTS_MAX + 1]; /* fabric port index by port number, -1: none */
};

struct held {
	uint64_t due, seq;
	int port, subnet;
	uint32_t gen, src_qpn;
	uint16_t len;
	uint8_t pkt[IB_PACKET_MAX_LEN];
};

struct fabric {
	struct fabric_ops ops;
	void *arg;
	struct port ports[FABRIC_PORTS_MAX];
	struct node nodes[FABRIC_NODES_MAX];
	unsigned n_nodes;
	struct subnet subnets[FABRIC_SUBNETS_MAX];
	struct fab_router routers[FABRIC_ROUTERS_MAX];
	struct mc mc[FABRIC_MCAST_MAX];
	unsigned mc_end; /* one past the last used attachment */
	uint64_t rng;
	uint32_t loss_ppm, delay_ms;
	uint32_t gen;
	/* Held packets: slots, a heap of slot numbers, a stack of free slots. */
	struct held *held;
	uint16_t *heap, *free_slots;
	unsigned n_held, n_free;
	uint64_t held_seq;
	uint64_t now_ns; /* of the packet being switched (captures of routed copies) */
	struct fabric_stats st;
};
_Static_assert(FABRIC_PORTS_MAX <= 127, "port numbers fit lid_port's int8_t");
_Static_assert(FABRIC_DELAY_SLOTS <= 65536, "slot numbers fit uint16_t");

static const struct {
	const char *name, *str;
} drops[FABRIC_DROP_COUNT] = {
	[FABRIC_OK] = { "ok", "not dropped" },
	[FABRIC_DROP_BAD_LENGTH] = { "bad_length", "LRH PktLen, GRH PayLen or pad inconsistent" },
	[FABRIC_DROP_BAD_HEADER] = { "bad_header", "LVer, LNH, IPVer, NxtHdr, TVer or opcode" },
	[FABRIC_DROP_BAD_VCRC] = { "bad_vcrc", "VCRC mismatch" },
	[FABRIC_DROP_BAD_ICRC] = { "bad_icrc", "ICRC mismatch" },
	[FABRIC_DROP_LINK_DOWN] = { "link_down", "sending or receiving port down" },
	[FABRIC_DROP_LOSS] = { "loss", "dropped by the configured loss" },
	[FABRIC_DROP_SRC_QP] = { "src_qp", "sending QP unknown, of another type, or not SrcQP" },
	[FABRIC_DROP_SLID] = { "slid", "SLID is not one of the sending port's LIDs" },
	[FABRIC_DROP_SGID] = { "sgid", "GRH SGID is not the sending port's GID" },
	[FABRIC_DROP_SRC_PKEY] = { "src_pkey", "P_Key is not the sending QP's" },
	[FABRIC_DROP_QKEY_CONTROLLED] = { "qkey_controlled",
					  "controlled Q_Key from an unprivileged port" },
	[FABRIC_DROP_NO_ROUTE] = { "no_route", "no port has the DLID" },
	[FABRIC_DROP_MCAST_HDR] = { "mcast_header",
				    "multicast without GRH, multicast DGID or DestQP 0xFFFFFF" },
	[FABRIC_DROP_MCAST_NO_MEMBER] = { "mcast_no_member", "no other QP attached to the group" },
	[FABRIC_DROP_PKEY] = { "pkey", "P_Key does not match the receiving QP's" },
	[FABRIC_DROP_PKEY_LIMITED] = { "pkey_limited", "both P_Keys are limited members" },
	[FABRIC_DROP_DGID] = { "dgid", "GRH DGID is not the receiving port's GID" },
	[FABRIC_DROP_NO_QP] = { "no_qp", "no such QP on the receiving port" },
	[FABRIC_DROP_QP_TYPE] = { "qp_type", "receiving QP is not of the opcode's transport" },
	[FABRIC_DROP_QKEY] = { "qkey", "Q_Key differs from the receiving QP's" },
	[FABRIC_DROP_MTU] = { "mtu", "payload above the MTU" },
	[FABRIC_DROP_RX_OVERFLOW] = { "rx_overflow", "receiving port could not take it" },
	[FABRIC_DROP_DELAY_OVERFLOW] = { "delay_overflow", "too many packets held by a delay" },
	[FABRIC_DROP_ROUTER_HDR] = { "router_header",
				     "to a router without GRH, or DGID and DLID disagree" },
	[FABRIC_DROP_HOP_LIMIT] = { "hop_limit", "to a router with hop limit 0 or 1, or a loop" },
	[FABRIC_DROP_ROUTER_NO_ROUTE] = { "router_no_route",
					  "no route at the router, or no other member" },
};

const char *fabric_drop_name(enum fabric_drop r)
{
	return (unsigned)r < FABRIC_DROP_COUNT ? drops[r].name : "unknown";
}

const char *fabric_drop_str(enum fabric_drop r)
{
	return (unsigned)r < FABRIC_DROP_COUNT ? drops[r].str : "unknown reason";
}

enum fabric_drop fabric_drop_from_parse(enum ib_pkt_err err)
{
	switch (err) {
	case IB_PKT_OK:
		return FABRIC_OK;
	case IB_PKT_ERR_VCRC:
		return FABRIC_DROP_BAD_VCRC;
	case IB_PKT_ERR_ICRC:
		return FABRIC_DROP_BAD_ICRC;
	case IB_PKT_ERR_LVER:
	case IB_PKT_ERR_LNH:
	case IB_PKT_ERR_IPVER:
	case IB_PKT_ERR_NXTHDR:
	case IB_PKT_ERR_TVER:
	case IB_PKT_ERR_OPCODE:
		return FABRIC_DROP_BAD_HEADER;
	default:
		return FABRIC_DROP_BAD_LENGTH;
	}
}

/* ---- small helpers --------------------------------------------------------------- */

static uint64_t rng_next(struct fabric *f)
{
	/* xorshift64*: fixed seed, reproducible loss patterns in tests. */
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return f->rng * 0x2545f4914f6cdd1dull;
}

static bool lose(struct fabric *f, uint32_t ppm)
{
	if (ppm == 0)
		return false;
	if (ppm >= FABRIC_PPM)
		return true;
	return (rng_next(f) >> 32) % FABRIC_PPM < ppm;
}

static struct port *port_get(struct fabric *f, int port)
{
	if (port < 0 || port >= FABRIC_PORTS_MAX || !f->ports[port].used)
		return NULL;
	return &f->ports[port];
}

static int node_find(const struct fabric *f, const char *name)
{
	for (unsigned i = 0; i < f->n_nodes; i++)
		if (!strcmp(f->nodes[i].name, name))
			return (int)i;
	return -1;
}

static int node_get(struct fabric *f, const char *name)
{
	int n = node_find(f, name);

	if (n >= 0)
		return n;
	if (f->n_nodes == FABRIC_NODES_MAX || strlen(name) >= SIMFAB_NAME_MAX)
		return -ENOSPC;
	snprintf(f->nodes[f->n_nodes].name, SIMFAB_NAME_MAX, "%s", name);
	return (int)f->n_nodes++;
}

static bool gid_is_port(const union ib_gid *gid, const struct simfab_port_info *info)
{
	return ib_gid_prefix(gid) == info->gid_prefix && ib_gid_guid(gid) == info->port_guid;
}

/* ---- QP table -------------------------------------------------------------------- */

static unsigned qp_hash(uint32_t qpn)
{
	return (qpn * 2654435761u) & (QP_SLOTS - 1);
}

static struct qp *qp_find(struct port *p, uint32_t qpn)
{
	if (qpn == 0)
		return NULL;
	for (unsigned i = qp_hash(qpn);; i = (i + 1) & (QP_SLOTS - 1)) {
		if (p->qps[i].qpn == qpn)
			return &p->qps[i];
		if (p->qps[i].qpn == 0)
			return NULL;
	}
}

static struct qp *qp_insert(struct port *p, uint32_t qpn)
{
	unsigned i = qp_hash(qpn);

	while (p->qps[i].qpn)
		i = (i + 1) & (QP_SLOTS - 1);
	p->qps[i].qpn = qpn;
	p->n_qps++;
	return &p->qps[i];
}

static void qp_erase(struct port *p, struct qp *q)
{
	unsigned i = (unsigned)(q - p->qps), j = i;

	/* Backward-shift deletion: move later entries of the run into the hole when
	 * their home slot does not lie cyclically in (hole, their slot]. */
	for (;;) {
		j = (j + 1) & (QP_SLOTS - 1);
		if (p->qps[j].qpn == 0)
			break;
		unsigned home = qp_hash(p->qps[j].qpn);
		bool stay = i <= j ? (i < home && home <= j) : (i < home || home <= j);

		if (!stay) {
			p->qps[i] = p->qps[j];
			i = j;
		}
	}
	memset(&p->qps[i], 0, sizeof(p->qps[i]));
	p->n_qps--;
}

/* ---- lifecycle ------------------------------------------------------------------- */

int fabric_new(const struct fabric_config *cfg, const struct fabric_ops *ops, void *arg,
	       struct fabric **out)
{
	struct fabric *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->ops = *ops;
	f->arg = arg;
	f->rng = cfg && cfg->seed ? cfg->seed : 0x9e3779b97f4a7c15ull;
	*out = f;
	return 0;
}

void fabric_free(struct fabric *f)
{
	if (!f)
		return;
	for (int i = 0; i < FABRIC_PORTS_MAX; i++)
		free(f->ports[i].qps);
	free(f->held);
	free(f->heap);
	free(f->free_slots);
	free(f);
}

/* ---- ports ----------------------------------------------------------------------- */

/* The subnet of a GID prefix, or -1 (get: made when new, -ENOSPC when full). */
static int subnet_find(const struct fabric *f, uint64_t prefix)
{
	for (int i = 0; i < FABRIC_SUBNETS_MAX; i++)
		if (f->subnets[i].used && f->subnets[i].prefix == prefix)
			return i;
	return -1;
}

static int subnet_get(struct fabric *f, uint64_t prefix)
{
	int i = subnet_find(f, prefix);

	if (i >= 0)
		return i;
	for (i = 0; i < FABRIC_SUBNETS_MAX; i++)
		if (!f->subnets[i].used) {
			f->subnets[i].used = true;
			f->subnets[i].prefix = prefix;
			memset(f->subnets[i].lid_port, -1, sizeof(f->subnets[i].lid_port));
			return i;
		}
	return -ENOSPC;
}

/* The port owning unicast lid on subnet s, or -1. */
static int lid_owner(const struct fabric *f, int s, uint16_t lid)
{
	if (s < 0 || lid == 0 || lid >= IB_LID_MC_FIRST)
		return -1;
	return f->subnets[s].lid_port[lid];
}

static int lids_free(const struct fabric *f, const struct simfab_port_info *info, int self)
{
	int s = subnet_find(f, info->gid_prefix);

	for (unsigned l = info->lid; s >= 0 && l < info->lid + (1u << info->lmc); l++)
		if (f->subnets[s].lid_port[l] >= 0 && f->subnets[s].lid_port[l] != self)
			return -EADDRINUSE;
	for (int i = 0; i < FABRIC_PORTS_MAX; i++)
		if (i != self && f->ports[i].used && f->ports[i].info.port_guid == info->port_guid)
			return -EEXIST;
	return 0;
}

static void lids_set(struct fabric *f, int s, const struct simfab_port_info *info, int8_t v)
{
	for (unsigned l = info->lid; l < info->lid + (1u << info->lmc); l++)
		f->subnets[s].lid_port[l] = v;
}

static int port_check(const struct fabric *f, const struct simfab_port_info *info, int self,
		      const char **why)
{
	int rc = simfab_port_info_check(info, why);

	if (rc < 0)
		return rc;
	rc = lids_free(f, info, self);
	if (rc == -EADDRINUSE && why)
		*why = "another attached port has one of these LIDs";
	if (rc == -EEXIST && why)
		*why = "another attached port has this port GUID";
	return rc;
}

/* A port's link is down: its node's, or its own (link NODE down|up PORT). */
static bool port_down(const struct fabric *f, const struct port *p)
{
	const struct node *n = &f->nodes[p->node];

	return n->down || (p->info.port_num < 64 && (n->ports_down >> p->info.port_num & 1));
}

int fabric_port_add(struct fabric *f, const struct simfab_port_info *info, int *port,
		    const char **why)
{
	struct port *p = NULL;
	int rc, i, node, sn;

	rc = port_check(f, info, -1, why);
	if (rc < 0)
		return rc;
	sn = subnet_get(f, info->gid_prefix);
	if (sn < 0) {
		if (why)
			*why = "too many subnets (GID prefixes)";
		return sn;
	}
	for (i = 0; i < FABRIC_PORTS_MAX; i++)
		if (!f->ports[i].used) {
			p = &f->ports[i];
			break;
		}
	node = node_get(f, info->name);
	if (!p || node < 0) {
		if (why)
			*why = !p ? "no free port slot" : "too many node names";
		return -ENOSPC;
	}
	if (!p->qps) {
		p->qps = calloc(QP_SLOTS, sizeof(*p->qps));
		if (!p->qps) {
			if (why)
				*why = "out of memory";
			return -ENOMEM;
		}
	} else {
		memset(p->qps, 0, QP_SLOTS * sizeof(*p->qps));
	}
	p->used = true;
	p->node = node;
	p->subnet = sn;
	p->router = -1;
	p->gen = ++f->gen;
	p->info = *info;
	p->mtu_bytes = simfab_mtu_bytes(info->mtu);
	p->n_qps = 0;
	p->next_qpn = QPN_FIRST;
	memset(&p->st, 0, sizeof(p->st));
	lids_set(f, sn, info, (int8_t)i);
	*port = i;
	return 0;
}

int fabric_port_update(struct fabric *f, int port, const struct simfab_port_info *info,
		       const char **why)
{
	struct port *p = port_get(f, port);
	int rc, sn;

	if (!p)
		return -ENOENT;
	rc = port_check(f, info, port, why);
	if (rc < 0)
		return rc;
	sn = subnet_get(f, info->gid_prefix);
	if (sn < 0) {
		if (why)
			*why = "too many subnets (GID prefixes)";
		return sn;
	}
	if (strcmp(info->name, p->info.name)) {
		int node = node_get(f, info->name);

		if (node < 0) {
			if (why)
				*why = "too many node names";
			return node;
		}
		p->node = node;
	}
	lids_set(f, p->subnet, &p->info, -1);
	p->info = *info;
	p->subnet = sn;
	p->mtu_bytes = simfab_mtu_bytes(info->mtu);
	lids_set(f, sn, info, (int8_t)port);
	return 0;
}

void fabric_port_remove(struct fabric *f, int port)
{
	struct port *p = port_get(f, port);

	if (!p)
		return;
	lids_set(f, p->subnet, &p->info, -1);
	if (p->router >= 0) {
		struct fab_router *r = &f->routers[p->router];

		r->port[p->info.port_num] = -1;
		r->rt.port[p->info.port_num].used = false;
	}
	for (unsigned i = 0; i < f->mc_end; i++)
		if (f->mc[i].used && f->mc[i].port == port)
			f->mc[i].used = false;
	p->used = false;
}

const struct simfab_port_info *fabric_port_info(const struct fabric *f, int port)
{
	if (port < 0 || port >= FABRIC_PORTS_MAX || !f->ports[port].used)
		return NULL;
	return &f->ports[port].info;
}

bool fabric_port_up(const struct fabric *f, int port)
{
	const struct simfab_port_info *info = fabric_port_info(f, port);

	return info && !port_down(f, &f->ports[port]);
}

/* ---- QPs and multicast ----------------------------------------------------------- */

int fabric_qp_create(struct fabric *f, int port, enum simfab_qp_type type, uint32_t qkey,
		     uint32_t *qpn)
{
	return fabric_qp_create_pkey(f, port, type, 0, qkey, qpn);
}

int fabric_qp_create_pkey(struct fabric *f, int port, enum simfab_qp_type type, uint16_t pkey_index,
			  uint32_t qkey, uint32_t *qpn)
{
	struct port *p = port_get(f, port);
	struct qp *q;
	uint32_t n;

	if (!p)
		return -ENOENT;
	if (type < SIMFAB_QP_UD || type > SIMFAB_QP_UC || pkey_index >= p->info.n_pkeys)
		return -EINVAL;
	if ((qkey & IB_QKEY_PRIVILEGED) && !(p->info.flags & SIMFAB_HELLO_PRIVILEGED))
		return -EPERM;
	if (p->n_qps >= FABRIC_QPS_MAX)
		return -ENOSPC;
	/* The next free QPN after the last one given, as an HCA's counter wraps. */
	do {
		n = p->next_qpn;
		p->next_qpn = n >= IB_QPN_MAX - 1 ? QPN_FIRST : n + 1;
	} while (qp_find(p, n));
	q = qp_insert(p, n);
	q->qkey = qkey;
	q->type = (uint8_t)type;
	q->pkey_index = pkey_index;
	*qpn = n;
	return 0;
}

int fabric_qp_modify(struct fabric *f, int port, uint32_t qpn, uint32_t qkey)
{
	return fabric_qp_modify_pkey(f, port, qpn, -1, qkey);
}

int fabric_qp_modify_pkey(struct fabric *f, int port, uint32_t qpn, int pkey_index, uint32_t qkey)
{
	struct port *p = port_get(f, port);
	struct qp *q;

	if (!p || !(q = qp_find(p, qpn)))
		return -ENOENT;
	if ((qkey & IB_QKEY_PRIVILEGED) && !(p->info.flags & SIMFAB_HELLO_PRIVILEGED))
		return -EPERM;
	if (pkey_index >= (int)p->info.n_pkeys)
		return -EINVAL;
	q->qkey = qkey;
	if (pkey_index >= 0)
		q->pkey_index = (uint16_t)pkey_index;
	return 0;
}

int fabric_qp_destroy(struct fabric *f, int port, uint32_t qpn)
{
	struct port *p = port_get(f, port);
	struct qp *q;

	if (!p || !(q = qp_find(p, qpn)))
		return -ENOENT;
	for (unsigned i = 0; i < f->mc_end; i++)
		if (f->mc[i].used && f->mc[i].port == port && f->mc[i].qpn == qpn)
			f->mc[i].used = false;
	qp_erase(p, q);
	return 0;
}

static struct mc *mc_find(struct fabric *f, int port, uint32_t qpn, const union ib_gid *mgid,
			  uint16_t mlid)
{
	for (unsigned i = 0; i < f->mc_end; i++) {
		struct mc *m = &f->mc[i];

		if (m->used && m->port == port && m->qpn == qpn && m->mlid == mlid &&
		    ib_gid_equal(&m->mgid, mgid))
			return m;
	}
	return NULL;
}

int fabric_mcast_attach(struct fabric *f, int port, uint32_t qpn, const union ib_gid *mgid,
			uint16_t mlid)
{
	struct port *p = port_get(f, port);
	struct qp *q;
	unsigned i;

	if (!p || !(q = qp_find(p, qpn)))
		return -ENOENT;
	if (q->type != SIMFAB_QP_UD || !ib_gid_is_multicast(mgid) || mlid < IB_LID_MC_FIRST ||
	    mlid == IB_LID_PERMISSIVE)
		return -EINVAL;
	if (mc_find(f, port, qpn, mgid, mlid))
		return -EEXIST;
	for (i = 0; i < FABRIC_MCAST_MAX && f->mc[i].used; i++)
		;
	if (i == FABRIC_MCAST_MAX)
		return -ENOSPC;
	f->mc[i] =
	    (struct mc){ .used = true, .port = port, .qpn = qpn, .mlid = mlid, .mgid = *mgid };
	if (i >= f->mc_end)
		f->mc_end = i + 1;
	return 0;
}

int fabric_mcast_detach(struct fabric *f, int port, uint32_t qpn, const union ib_gid *mgid,
			uint16_t mlid)
{
	struct mc *m = port_get(f, port) ? mc_find(f, port, qpn, mgid, mlid) : NULL;

	if (!m)
		return -ENOENT;
	m->used = false;
	while (f->mc_end && !f->mc[f->mc_end - 1].used)
		f->mc_end--;
	return 0;
}

/* ---- settings -------------------------------------------------------------------- */

int fabric_set_link(struct fabric *f, const char *name, bool up)
{
	int n;

	if (!name)
		return -EINVAL;
	n = node_get(f, name);
	if (n < 0)
		return n;
	return fabric_set_port_link(f, name, 0, up);
}

int fabric_set_port_link(struct fabric *f, const char *name, unsigned port_num, bool up)
{
	bool was[FABRIC_PORTS_MAX];
	struct node *nd;
	int n;

	if (!name || port_num > FABRIC_LINK_PORT_MAX)
		return -EINVAL;
	n = node_get(f, name);
	if (n < 0)
		return n;
	nd = &f->nodes[n];
	for (int i = 0; i < FABRIC_PORTS_MAX; i++)
		was[i] = f->ports[i].used && f->ports[i].node == n && !port_down(f, &f->ports[i]);
	if (port_num == 0) {
		nd->down = !up;
		if (up)
			nd->ports_down = 0; /* the whole node up: every port of it */
	} else if (up) {
		nd->ports_down &= ~(1ull << port_num);
	} else {
		nd->ports_down |= 1ull << port_num;
	}
	for (int i = 0; i < FABRIC_PORTS_MAX; i++) {
		if (!f->ports[i].used || f->ports[i].node != n)
			continue;
		if (was[i] != !port_down(f, &f->ports[i]) && f->ops.port_state)
			f->ops.port_state(f->arg, i, !was[i]);
	}
	return 0;
}

int fabric_set_loss(struct fabric *f, const char *name, uint32_t ppm)
{
	int n;

	if (ppm > FABRIC_PPM)
		return -EINVAL;
	if (!name) {
		f->loss_ppm = ppm;
		return 0;
	}
	n = node_get(f, name);
	if (n < 0)
		return n;
	f->nodes[n].loss_ppm = ppm;
	return 0;
}

int fabric_set_delay(struct fabric *f, const char *name, uint32_t ms)
{
	int n;

	if (ms > FABRIC_DELAY_MAX)
		return -EINVAL;
	if (ms && !f->held) {
		f->held = malloc((size_t)FABRIC_DELAY_SLOTS * sizeof(*f->held));
		f->heap = malloc(FABRIC_DELAY_SLOTS * sizeof(*f->heap));
		f->free_slots = malloc(FABRIC_DELAY_SLOTS * sizeof(*f->free_slots));
		if (!f->held || !f->heap || !f->free_slots) {
			free(f->held);
			free(f->heap);
			free(f->free_slots);
			f->held = NULL;
			f->heap = f->free_slots = NULL;
			return -ENOMEM;
		}
		for (unsigned i = 0; i < FABRIC_DELAY_SLOTS; i++)
			f->free_slots[i] = (uint16_t)(FABRIC_DELAY_SLOTS - 1 - i);
		f->n_free = FABRIC_DELAY_SLOTS;
	}
	if (!name) {
		f->delay_ms = ms;
		return 0;
	}
	n = node_get(f, name);
	if (n < 0)
		return n;
	f->nodes[n].delay_ms = ms;
	return 0;
}

int fabric_get_settings(const struct fabric *f, int i, struct fabric_settings *out)
{
	if (i < 0) {
		*out = (struct fabric_settings){ .loss_ppm = f->loss_ppm, .delay_ms = f->delay_ms };
		return 0;
	}
	if ((unsigned)i >= f->n_nodes)
		return -ENOENT;
	*out = (struct fabric_settings){ .name = f->nodes[i].name,
					 .down = f->nodes[i].down,
					 .ports_down = f->nodes[i].ports_down,
					 .loss_ppm = f->nodes[i].loss_ppm,
					 .delay_ms = f->nodes[i].delay_ms,
					 .st = &f->nodes[i].st };
	return 0;
}

/* ---- routers --------------------------------------------------------------------- */

static int router_find(const struct fabric *f, const char *name)
{
	for (int i = 0; i < FABRIC_ROUTERS_MAX; i++)
		if (f->routers[i].used && !strcmp(f->nodes[f->routers[i].node].name, name))
			return i;
	return -1;
}

int fabric_router_port(struct fabric *f, const char *name, unsigned port_num, uint16_t lid,
		       uint64_t guid, uint64_t gid_prefix, uint8_t mtu, const char **why)
{
	struct simfab_port_info in = { .port_num = (uint8_t)port_num,
				       .mtu = mtu,
				       .lid = lid,
				       .port_guid = guid,
				       .gid_prefix = gid_prefix,
				       .n_pkeys = 1 };
	struct fab_router *r;
	int ri, rc, fp;

	if (!name || port_num < 1 || port_num > ROUTER_PORTS_MAX || strlen(name) >= SIMFAB_NAME_MAX)
		return -EINVAL;
	snprintf(in.name, sizeof(in.name), "%s", name);
	in.pkeys[0] = IB_PKEY_DEFAULT;
	rc = simfab_port_info_check(&in, why);
	if (rc < 0)
		return rc;
	ri = router_find(f, name);
	if (ri < 0) {
		int node = node_get(f, name);

		if (node < 0)
			return node;
		for (ri = 0; ri < FABRIC_ROUTERS_MAX && f->routers[ri].used; ri++)
			;
		if (ri == FABRIC_ROUTERS_MAX)
			return -ENOSPC;
		r = &f->routers[ri];
		memset(r, 0, sizeof(*r));
		memset(r->port, -1, sizeof(r->port));
		r->used = true;
		r->node = node;
	}
	r = &f->routers[ri];
	fp = r->port[port_num];
	if (fp >= 0)
		rc = fabric_port_update(f, fp, &in, why);
	else
		rc = fabric_port_add(f, &in, &fp, why);
	if (rc < 0)
		return rc;
	f->ports[fp].router = ri;
	r->port[port_num] = (int8_t)fp;
	return router_port_set(&r->rt, port_num, lid, gid_prefix, guid, simfab_mtu_bytes(mtu));
}

const struct router *fabric_router_get(const struct fabric *f, int i, const char **name)
{
	if (i < 0 || i >= FABRIC_ROUTERS_MAX || !f->routers[i].used)
		return NULL;
	*name = f->nodes[f->routers[i].node].name;
	return &f->routers[i].rt;
}

int fabric_router_route(struct fabric *f, const char *name, const union ib_gid *prefix,
			unsigned plen, unsigned port_num, uint16_t next_hop)
{
	int ri = name ? router_find(f, name) : -1;

	if (ri < 0)
		return -ENOENT;
	return router_route_add(&f->routers[ri].rt, prefix, plen, port_num, next_hop);
}

int fabric_router_mcast(struct fabric *f, const char *name, const union ib_gid *mgid,
			unsigned port_num, uint16_t mlid)
{
	int ri = name ? router_find(f, name) : -1;

	if (ri < 0)
		return -ENOENT;
	return router_group_join(&f->routers[ri].rt, mgid, port_num, mlid);
}

int fabric_router_proxy(struct fabric *f, const char *name, const union ib_gid *prefix,
			unsigned plen)
{
	int ri = name ? router_find(f, name) : -1;

	if (ri < 0)
		return -ENOENT;
	return router_proxy_add(&f->routers[ri].rt, prefix, plen);
}

/* ---- counting -------------------------------------------------------------------- */

static void refuse(struct fabric *f, struct fabric_verdict *v, struct port *src, struct port *dst,
		   enum fabric_drop r)
{
	f->st.drops[r]++;
	if (src) {
		src->st.drop_in[r]++;
		f->nodes[src->node].st.drop_in[r]++;
	}
	if (dst) {
		dst->st.drop_out[r]++;
		f->nodes[dst->node].st.drop_out[r]++;
	}
	v->refused++;
	if (v->first == FABRIC_OK)
		v->first = r;
}

void fabric_count_drop(struct fabric *f, int port, enum fabric_drop reason)
{
	struct port *p = port_get(f, port);

	if ((unsigned)reason >= FABRIC_DROP_COUNT || reason == FABRIC_OK)
		return;
	f->st.drops[reason]++;
	if (p) {
		p->st.drop_out[reason]++;
		f->nodes[p->node].st.drop_out[reason]++;
	}
}

/* ---- the packet path ------------------------------------------------------------- */

/* Transport of an opcode: its high three bits (RC 0, UC 1, UD 3). */
static uint8_t qp_type_of(uint8_t opcode)
{
	switch (opcode >> 5) {
	case 0:
		return SIMFAB_QP_RC;
	case 1:
		return SIMFAB_QP_UC;
	case 3:
		return SIMFAB_QP_UD;
	default:
		return 0;
	}
}

/* Does packet P_Key pkey match the receiving key? Sets *limited when the bases are
 * equal but both are limited members. */
static bool pkey_ok(uint16_t pkey, uint16_t mine, bool *limited)
{
	if (ib_pkey_match(pkey, mine))
		return true;
	if (ib_pkey_is_valid(pkey) && ib_pkey_base(pkey) == ib_pkey_base(mine))
		*limited = true;
	return false;
}

/* The receiving HCA's checks for one delivery to QP qpn of port dst. */
static enum fabric_drop egress_check(struct fabric *f, struct port *dst, uint32_t qpn,
				     const struct ib_packet *pkt)
{
	uint8_t type = qp_type_of(pkt->bth.opcode);
	bool limited = false, match = false;

	if (port_down(f, dst))
		return FABRIC_DROP_LINK_DOWN;
	if (lose(f, f->nodes[dst->node].loss_ppm))
		return FABRIC_DROP_LOSS;
	if (qpn == IB_QP1) {
		/* The GSI accepts any P_Key of the port's table. */
		for (unsigned i = 0; i < dst->info.n_pkeys && !match; i++)
			match = pkey_ok(pkt->bth.pkey, dst->info.pkeys[i], &limited);
		if (!match)
			return limited ? FABRIC_DROP_PKEY_LIMITED : FABRIC_DROP_PKEY;
		if (type != SIMFAB_QP_UD)
			return FABRIC_DROP_QP_TYPE;
		if (pkt->deth.qkey != IB_QP1_QKEY)
			return FABRIC_DROP_QKEY;
	} else {
		struct qp *q = qp_find(dst, qpn);

		if (!q)
			return FABRIC_DROP_NO_QP;
		if (!pkey_ok(pkt->bth.pkey, dst->info.pkeys[q->pkey_index], &limited))
			return limited ? FABRIC_DROP_PKEY_LIMITED : FABRIC_DROP_PKEY;
		if (q->type != type)
			return FABRIC_DROP_QP_TYPE;
		if (type == SIMFAB_QP_UD && pkt->deth.qkey != q->qkey)
			return FABRIC_DROP_QKEY;
	}
	if (pkt->has_grh && pkt->lrh.dlid < IB_LID_MC_FIRST &&
	    !gid_is_port(&pkt->grh.dgid, &dst->info))
		return FABRIC_DROP_DGID;
	if (pkt->payload_len > dst->mtu_bytes)
		return FABRIC_DROP_MTU;
	return FABRIC_OK;
}

static void egress(struct fabric *f, struct port *src, int dport, uint32_t qpn,
		   const struct ib_packet *pkt, const uint8_t *buf, size_t len,
		   struct fabric_verdict *v)
{
	struct port *dst = &f->ports[dport];
	enum fabric_drop r = egress_check(f, dst, qpn, pkt);

	if (r == FABRIC_OK && f->ops.deliver(f->arg, dport, qpn, buf, len) < 0)
		r = FABRIC_DROP_RX_OVERFLOW;
	if (r != FABRIC_OK) {
		refuse(f, v, src, dst, r);
		return;
	}
	dst->st.tx_packets++;
	dst->st.tx_bytes += len;
	f->nodes[dst->node].st.tx_packets++;
	f->nodes[dst->node].st.tx_bytes += len;
	f->st.delivered++;
	v->delivered++;
}

static void route(struct fabric *f, struct port *src, int sport, int sn, uint32_t src_qpn,
		  const struct ib_packet *pkt, const uint8_t *buf, size_t len, unsigned depth,
		  bool *captured, struct fabric_verdict *v);

struct resolve_ctx {
	struct fabric *f;
	const struct fab_router *r;
};

/* A direct route's destination: the port with that GID on the egress port's subnet. */
static uint16_t resolve(void *arg, unsigned port, const union ib_gid *gid)
{
	const struct resolve_ctx *c = arg;
	int fp = c->r->port[port], sn;

	if (fp < 0)
		return 0;
	sn = c->f->ports[fp].subnet;
	if (ib_gid_is_multicast(gid)) {
		/* A group the router proxies: the MLID its members there attached with. */
		for (unsigned i = 0; i < c->f->mc_end; i++) {
			const struct mc *m = &c->f->mc[i];

			if (m->used && c->f->ports[m->port].subnet == sn &&
			    ib_gid_equal(&m->mgid, gid))
				return m->mlid;
		}
		return 0;
	}
	for (int i = 0; i < FABRIC_PORTS_MAX; i++) {
		const struct port *p = &c->f->ports[i];

		if (p->used && p->subnet == sn && gid_is_port(gid, &p->info))
			return p->info.lid;
	}
	return 0;
}

/* A router port that is up, on a router with another port up: it can carry a packet
 * across. */
static bool router_live(const struct fabric *f, const struct port *rp)
{
	const struct fab_router *r = &f->routers[rp->router];

	if (port_down(f, rp))
		return false;
	for (unsigned p = 1; p <= ROUTER_PORTS_MAX; p++)
		if (p != rp->info.port_num && r->port[p] >= 0 &&
		    !port_down(f, &f->ports[r->port[p]]))
			return true;
	return false;
}

/* Does router port rp take a group it proxies (mgid, sent from the subnet of sgid)? Only
 * when another of its subnets has members of it, as a multicast proxy joins a group on
 * one side for members on another: else the group is none of its business (not taken,
 * not counted as a router's drop). */
static bool proxy_wants(struct fabric *f, const struct port *rp, const union ib_gid *mgid,
			const union ib_gid *sgid)
{
	const struct fab_router *r = &f->routers[rp->router];
	struct resolve_ctx rc = { f, r };

	if (!router_proxies(&r->rt, mgid))
		return false;
	for (unsigned p = 1; p <= ROUTER_PORTS_MAX; p++)
		if (p != rp->info.port_num && r->port[p] >= 0 && r->rt.port[p].used &&
		    r->rt.port[p].gid_prefix != ib_gid_prefix(sgid) && resolve(&rc, p, mgid))
			return true;
	return false;
}

static enum fabric_drop router_drop(enum router_verdict rv)
{
	switch (rv) {
	case ROUTER_FORWARD:
		return FABRIC_OK;
	case ROUTER_DROP_NO_GRH:
		return FABRIC_DROP_ROUTER_HDR;
	case ROUTER_DROP_HOP_LIMIT:
		return FABRIC_DROP_HOP_LIMIT;
	case ROUTER_DROP_MTU:
		return FABRIC_DROP_MTU;
	default:
		return FABRIC_DROP_ROUTER_NO_ROUTE;
	}
}

/*
 * A packet reached router port fp: the router decides, and each copy it sends leaves
 * its egress port onto that port's subnet, where it is routed like any packet (possibly
 * to another router: depth counts them). The arriving packet is captured here, once,
 * unless already captured; each copy is captured on the subnet it goes out on.
 */
static void router_in(struct fabric *f, struct port *src, int fp, const struct ib_packet *pkt,
		      const uint8_t *buf, size_t len, unsigned depth, bool *captured,
		      struct fabric_verdict *v)
{
	struct port *rp = &f->ports[fp];
	struct fab_router *r = &f->routers[rp->router];
	struct resolve_ctx rc = { f, r };
	struct router_hop hops[ROUTER_PORTS_MAX];
	enum fabric_drop why;
	uint8_t out[IB_PACKET_MAX_LEN];
	unsigned n = 0;

	if (port_down(f, rp))
		why = FABRIC_DROP_LINK_DOWN;
	else if (depth >= FABRIC_ROUTE_DEPTH)
		why = FABRIC_DROP_HOP_LIMIT;
	else
		why = router_drop(
		    router_decide(&r->rt, rp->info.port_num, pkt, resolve, &rc, hops, &n));
	if (why != FABRIC_OK)
		refuse(f, v, src, rp, why);
	else {
		rp->st.tx_packets++;
		rp->st.tx_bytes += len;
		f->nodes[rp->node].st.tx_packets++;
		f->nodes[rp->node].st.tx_bytes += len;
	}
	if (!*captured && f->ops.capture)
		f->ops.capture(f->arg, buf, len, why != FABRIC_OK, f->now_ns);
	*captured = true;
	for (unsigned i = 0; i < n; i++) {
		int ep = r->port[hops[i].port];
		struct port *eg = ep >= 0 ? &f->ports[ep] : NULL;
		unsigned before = v->delivered;
		bool cap = false;
		struct ib_packet out_pkt;
		enum ib_pkt_err err;

		if (!eg || port_down(f, eg)) {
			refuse(f, v, src, eg, FABRIC_DROP_LINK_DOWN);
			continue;
		}
		router_rewrite(&r->rt, &hops[i], pkt, buf, len, out);
		f->st.routed++;
		v->routed++;
		eg->st.rx_packets++;
		eg->st.rx_bytes += len;
		f->nodes[eg->node].st.rx_packets++;
		f->nodes[eg->node].st.rx_bytes += len;
		/* The rewrite keeps the packet valid (VCRC resealed, ICRC untouched): parsed
		 * again for the fields it now carries, its CRCs not checked a second time. */
		err = ib_packet_parse_headers(out, len, &out_pkt);
		if (err != IB_PKT_OK) {
			refuse(f, v, eg, NULL, fabric_drop_from_parse(err));
			continue;
		}
		route(f, eg, ep, eg->subnet, 0, &out_pkt, out, len, depth + 1, &cap, v);
		if (!cap && f->ops.capture)
			f->ops.capture(f->arg, out, len, v->delivered == before, f->now_ns);
	}
}

/* Route a checked packet on subnet sn: src is NULL when the sending port left while it
 * was held. A router port owning the DLID (or joined to the group) takes it. */
static void route(struct fabric *f, struct port *src, int sport, int sn, uint32_t src_qpn,
		  const struct ib_packet *pkt, const uint8_t *buf, size_t len, unsigned depth,
		  bool *captured, struct fabric_verdict *v)
{
	uint16_t dlid = pkt->lrh.dlid;
	int dport;

	if (dlid >= IB_LID_MC_FIRST && dlid != IB_LID_PERMISSIVE) {
		bool member = false;

		if (!pkt->has_grh || !ib_gid_is_multicast(&pkt->grh.dgid) ||
		    pkt->bth.dqpn != IB_QPN_MULTICAST ||
		    qp_type_of(pkt->bth.opcode) != SIMFAB_QP_UD) {
			refuse(f, v, src, NULL, FABRIC_DROP_MCAST_HDR);
			return;
		}
		for (unsigned i = 0; i < f->mc_end; i++) {
			struct mc *m = &f->mc[i];

			if (!m->used || m->mlid != dlid || f->ports[m->port].subnet != sn ||
			    !ib_gid_equal(&m->mgid, &pkt->grh.dgid))
				continue;
			/* IB multicast loopback never reaches the sending QP itself. */
			if (src && m->port == sport && m->qpn == src_qpn)
				continue;
			member = true;
			egress(f, src, m->port, m->qpn, pkt, buf, len, v);
		}
		/* Routers joined to the group on this subnet (not the port it came from): one
		 * carries it across, the first that is up on both sides, as multicast routing
		 * elects one forwarder per link (two would deliver every packet twice); when
		 * it dies the next takes over. With none up, the first takes it and counts
		 * the drop. Only a packet sent on this subnet is taken (the reverse-path
		 * rule): what a router brought here from another subnet is not sent on by
		 * the next router. */
		int carrier = -1, first = -1;

		for (int i = 0; i < FABRIC_PORTS_MAX && carrier < 0; i++) {
			struct port *rp = &f->ports[i];

			if (!rp->used || rp->router < 0 || rp->subnet != sn || i == sport ||
			    f->routers[rp->router].rt.port[rp->info.port_num].gid_prefix !=
				ib_gid_prefix(&pkt->grh.sgid) ||
			    (!router_joined(&f->routers[rp->router].rt, rp->info.port_num,
					    &pkt->grh.dgid, dlid) &&
			     !proxy_wants(f, rp, &pkt->grh.dgid, &pkt->grh.sgid)))
				continue;
			member = true;
			if (first < 0)
				first = i;
			if (router_live(f, rp))
				carrier = i;
		}
		if (carrier >= 0 || first >= 0)
			router_in(f, src, carrier >= 0 ? carrier : first, pkt, buf, len, depth,
				  captured, v);
		if (!member)
			refuse(f, v, src, NULL, FABRIC_DROP_MCAST_NO_MEMBER);
		return;
	}
	dport = lid_owner(f, sn, dlid);
	if (dport < 0) {
		refuse(f, v, src, NULL, FABRIC_DROP_NO_ROUTE);
		return;
	}
	if (f->ports[dport].router >= 0) {
		router_in(f, src, dport, pkt, buf, len, depth, captured, v);
		return;
	}
	egress(f, src, dport, pkt->bth.dqpn, pkt, buf, len, v);
}

/* The sending HCA's and the first switch's checks. */
static enum fabric_drop ingress(struct port *p, uint32_t src_qpn, const struct ib_packet *pkt)
{
	uint8_t type = qp_type_of(pkt->bth.opcode);
	uint16_t want_pkey = 0;
	bool pkey_found = false;

	if (src_qpn == IB_QP1) {
		if (type != SIMFAB_QP_UD || pkt->deth.src_qp != IB_QP1)
			return FABRIC_DROP_SRC_QP;
		/* The GSI may send with any P_Key of its table. */
		for (unsigned i = 0; i < p->info.n_pkeys && !pkey_found; i++)
			pkey_found =
			    ib_pkey_is_valid(pkt->bth.pkey) && p->info.pkeys[i] == pkt->bth.pkey;
	} else {
		struct qp *q = qp_find(p, src_qpn);

		if (!q || q->type != type || (type == SIMFAB_QP_UD && pkt->deth.src_qp != src_qpn))
			return FABRIC_DROP_SRC_QP;
		want_pkey = p->info.pkeys[q->pkey_index];
		pkey_found = ib_pkey_is_valid(want_pkey) && pkt->bth.pkey == want_pkey;
	}
	if (pkt->lrh.slid < p->info.lid || pkt->lrh.slid >= p->info.lid + (1u << p->info.lmc))
		return FABRIC_DROP_SLID;
	if (pkt->has_grh && !gid_is_port(&pkt->grh.sgid, &p->info))
		return FABRIC_DROP_SGID;
	if (!pkey_found)
		return FABRIC_DROP_SRC_PKEY;
	if (type == SIMFAB_QP_UD && (pkt->deth.qkey & IB_QKEY_PRIVILEGED) && src_qpn != IB_QP1 &&
	    !(p->info.flags & SIMFAB_HELLO_PRIVILEGED))
		return FABRIC_DROP_QKEY_CONTROLLED;
	if (pkt->payload_len > p->mtu_bytes)
		return FABRIC_DROP_MTU;
	return FABRIC_OK;
}

static void heap_swap(struct fabric *f, unsigned a, unsigned b)
{
	uint16_t t = f->heap[a];

	f->heap[a] = f->heap[b];
	f->heap[b] = t;
}

static bool heap_less(const struct fabric *f, unsigned a, unsigned b)
{
	const struct held *x = &f->held[f->heap[a]], *y = &f->held[f->heap[b]];

	return x->due < y->due || (x->due == y->due && x->seq < y->seq);
}

static void hold(struct fabric *f, struct port *p, int port, uint32_t src_qpn, const uint8_t *buf,
		 size_t len, uint64_t due)
{
	unsigned i = f->n_held;
	struct held *h = &f->held[f->free_slots[--f->n_free]];

	h->due = due;
	h->seq = f->held_seq++;
	h->port = port;
	h->subnet = p->subnet;
	h->gen = p->gen;
	h->src_qpn = src_qpn;
	h->len = (uint16_t)len;
	memcpy(h->pkt, buf, len);
	f->heap[f->n_held++] = (uint16_t)(h - f->held);
	while (i && heap_less(f, i, (i - 1) / 2)) {
		heap_swap(f, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

void fabric_packet(struct fabric *f, int port, uint32_t src_qpn, const uint8_t *buf, size_t len,
		   uint64_t now_ns, struct fabric_verdict *v)
{
	struct port *p = port_get(f, port);
	struct ib_packet pkt;
	enum ib_pkt_err err;
	enum fabric_drop r;
	bool captured = false;
	uint32_t delay;

	memset(v, 0, sizeof(*v));
	f->now_ns = now_ns;
	f->st.packets++;
	if (!p) {
		/* Not reachable from a connection (HELLO comes first); counted all the same. */
		refuse(f, v, NULL, NULL, FABRIC_DROP_LINK_DOWN);
		goto captured;
	}
	p->st.rx_packets++;
	p->st.rx_bytes += len;
	f->nodes[p->node].st.rx_packets++;
	f->nodes[p->node].st.rx_bytes += len;
	if (port_down(f, p)) {
		refuse(f, v, p, NULL, FABRIC_DROP_LINK_DOWN);
		goto captured;
	}
	err = ib_packet_parse(buf, len, &pkt);
	if (err != IB_PKT_OK) {
		f->st.parse[err]++;
		refuse(f, v, p, NULL, fabric_drop_from_parse(err));
		goto captured;
	}
	r = ingress(p, src_qpn, &pkt);
	if (r == FABRIC_OK && (lose(f, f->loss_ppm) || lose(f, f->nodes[p->node].loss_ppm)))
		r = FABRIC_DROP_LOSS;
	if (r != FABRIC_OK) {
		refuse(f, v, p, NULL, r);
		goto captured;
	}
	delay = f->delay_ms + f->nodes[p->node].delay_ms;
	if (lid_owner(f, p->subnet, pkt.lrh.dlid) >= 0)
		delay += f->nodes[f->ports[lid_owner(f, p->subnet, pkt.lrh.dlid)].node].delay_ms;
	if (delay && f->held) {
		if (f->n_free == 0) {
			refuse(f, v, p, NULL, FABRIC_DROP_DELAY_OVERFLOW);
			goto captured;
		}
		hold(f, p, port, src_qpn, buf, len, now_ns + (uint64_t)delay * 1000000u);
		v->held = true;
		return;
	}
	route(f, p, port, p->subnet, src_qpn, &pkt, buf, len, 0, &captured, v);
captured:
	if (!captured && f->ops.capture)
		f->ops.capture(f->arg, buf, len, v->delivered == 0, now_ns);
}

uint64_t fabric_next_deadline(const struct fabric *f)
{
	return f->n_held ? f->held[f->heap[0]].due : 0;
}

unsigned fabric_poll(struct fabric *f, uint64_t now_ns)
{
	unsigned n = 0;

	f->now_ns = now_ns;
	while (f->n_held && f->held[f->heap[0]].due <= now_ns) {
		uint16_t slot = f->heap[0];
		struct held *h = &f->held[slot];
		struct port *p = &f->ports[h->port];
		struct fabric_verdict v = { 0 };
		struct ib_packet pkt;
		bool captured = false;
		unsigned i = 0;

		f->heap[0] = f->heap[--f->n_held];
		for (;;) {
			unsigned l = 2 * i + 1, m = i;

			if (l < f->n_held && heap_less(f, l, m))
				m = l;
			if (l + 1 < f->n_held && heap_less(f, l + 1, m))
				m = l + 1;
			if (m == i)
				break;
			heap_swap(f, i, m);
			i = m;
		}
		/* Checked at ingress already; parse again only for the header fields. */
		ib_packet_parse_headers(h->pkt, h->len, &pkt);
		if (!p->used || p->gen != h->gen)
			p = NULL;
		route(f, p, h->port, h->subnet, h->src_qpn, &pkt, h->pkt, h->len, 0, &captured, &v);
		if (!captured && f->ops.capture)
			f->ops.capture(f->arg, h->pkt, h->len, v.delivered == 0, now_ns);
		f->free_slots[f->n_free++] = slot;
		n++;
	}
	return n;
}

/* ---- stats ----------------------------------------------------------------------- */

void fabric_stats(const struct fabric *f, struct fabric_stats *out)
{
	*out = f->st;
	out->held = f->n_held;
}

const struct fabric_port_stats *fabric_port_stats(const struct fabric *f, int port)
{
	if (port < 0 || port >= FABRIC_PORTS_MAX || !f->ports[port].used)
		return NULL;
	return &f->ports[port].st;
}
