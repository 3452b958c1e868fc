/*
 * The data plane in the Prometheus text format (gw_dp_metrics): per link, per IB port and
 * its SA client, per worker, the slow path and the route table. Every family is written
 * whole (HELP, TYPE, then its samples) in the order docs/operations.md ("Metrics") lists.
 *
 * Only what is cheap to read: counters and table sizes the modules keep. Nothing here
 * walks the route table or the path cache (one scrape must not stall the control loop on
 * a full Internet table); neighbours and groups are walked, bounded by their tables'
 * limits. Series that exist at all exist from the start, at zero, so rate() works from
 * the first scrape.
 *
 * Threads: control thread (the tables' writer; the workers' counters are atomics).
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/eth_frame.h"
#include "pkt/gso.h"
#include "table/route.h"
#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_portfail.h"
#include "gateway/dp_dhcp.h"
#include "gateway/dp_mcast.h"
#include "gateway/dp_ra.h"
#include "mgmt/metrics_http.h"

#define LABEL_MAX 160

/* A u64 field of a struct, by offset: the tables below name counters this way. */
struct u64_field {
	const char *name, *help;
	size_t off;
};

static uint64_t u64_at(const void *base, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

static void sample(FILE *out, const char *name, const char *labels, uint64_t v)
{
	fprintf(out, "%s{%s} %" PRIu64 "\n", name, labels, v);
}

/* A sample with one more label, whose value is one of our constant names (no escaping). */
static void sample_by(FILE *out, const char *name, const char *labels, const char *key,
		      const char *value, uint64_t v)
{
	fprintf(out, "%s{%s,%s=\"%s\"} %" PRIu64 "\n", name, labels, key, value, v);
}

/* ---- links ----------------------------------------------------------------------------- */

/* One link as this scrape saw it: everything read once, then written family by family. */
struct link_snap {
	const struct dp_link *k;
	const struct fwd_if *f; /* NULL: not in the engine */
	char label[LABEL_MAX];  /* link="ib0",tenant="default" */
	bool counted;           /* its port is open: the counters below are read */
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
	struct ipoib_link_stats ib;
	struct ethp_stats eth;
	bool has_neigh;
	struct neigh_stats neigh;
	unsigned by_state[NEIGH_STATE_COUNT];
	unsigned groups_joined, groups_joining, connections;
	const struct cm_stats *cm; /* connected mode only */
	unsigned long port_moves;  /* to the other HCA port (dp_portfail) */
};

static int count_neigh(void *arg, const struct neigh_info *ni)
{
	struct link_snap *s = arg;

	if (ni->state < NEIGH_STATE_COUNT)
		s->by_state[ni->state]++;
	return 0;
}

static int count_group(void *arg, const struct ipoib_mcast_info *mi)
{
	struct link_snap *s = arg;

	if (mi->joined)
		s->groups_joined++;
	else
		s->groups_joining++;
	return 0;
}

static int count_conn(void *arg, const struct ipoib_conn_info *ci)
{
	struct link_snap *s = arg;

	s->connections += ci->up;
	return 0;
}

static void snap_ipoib(struct dp_link *k, struct link_snap *s)
{
	ipoib_link_stats(k->link, &s->ib);
	s->rx_packets = s->ib.rx_packets;
	s->rx_bytes = s->ib.rx_bytes;
	s->tx_packets = s->ib.tx_packets;
	s->tx_bytes = s->ib.tx_bytes;
	ipoib_link_mcast_foreach(k->link, count_group, s);
	if (k->mode == GW_IPOIB_CONNECTED) {
		ipoib_link_conn_foreach(k->link, count_conn, s);
		s->cm = ipoib_link_cm_stats(k->link);
	}
}

static void snap_eth(struct dp_link *k, struct link_snap *s)
{
	k->eops->stats(k->eth, &s->eth);
	s->rx_packets = s->eth.rx_packets;
	s->rx_bytes = s->eth.rx_bytes;
	s->tx_packets = s->eth.tx_packets;
	s->tx_bytes = s->eth.tx_bytes;
}

static void snap_link(struct gw_dp *dp, struct dp_link *k, struct link_snap *s)
{
	char name[GW_NAME_MAX * 2], tenant[GW_NAME_MAX * 2];

	s->k = k;
	s->f = fwd_snap_if(fwd_engine_current(dp->e), k->ifindex);
	/* Every link's families carry its tenant, so a tenant's traffic sums by label. */
	snprintf(
	    s->label, sizeof(s->label), "link=\"%s\",tenant=\"%s\"",
	    metrics_label_escape(k->name, name, sizeof(name)),
	    metrics_label_escape(k->tenant[0] ? k->tenant : "default", tenant, sizeof(tenant)));
	s->port_moves = k->kind == DP_IPOIB ? dp_portfail_moves(dp, k) : 0;
	if (k->kind == DP_IPOIB && k->link) {
		s->counted = true;
		snap_ipoib(k, s);
	} else if (k->kind == DP_ETH && k->eth) {
		s->counted = true;
		snap_eth(k, s);
	}
	if (s->f && s->f->neigh) {
		s->has_neigh = true;
		neigh_table_stats(s->f->neigh, &s->neigh);
		neigh_foreach(s->f->neigh, count_neigh, s);
	}
}

static void write_link_state(FILE *out, const struct link_snap *s, unsigned n)
{
	char dev[LABEL_MAX], lbl[3 * LABEL_MAX];

	metrics_family(
	    out, "ibgw_link_info", "gauge",
	    "A configured link or interface: its kind (ipoib, ether), device and backend.");
	for (unsigned i = 0; i < n; i++) {
		snprintf(lbl, sizeof(lbl), "%s,kind=\"%s\",device=\"%s\",backend=\"%s\"",
			 s[i].label, s[i].k->kind == DP_IPOIB ? "ipoib" : "ether",
			 metrics_label_escape(s[i].k->device, dev, sizeof(dev)), s[i].k->backend);
		sample(out, "ibgw_link_info", lbl, 1);
	}
	metrics_family(out, "ibgw_link_up", "gauge",
		       "1 when the link carries traffic (gwctl show links: UP), else 0.");
	for (unsigned i = 0; i < n; i++)
		sample(out, "ibgw_link_up", s[i].label, s[i].f && s[i].f->up);
	metrics_family(out, "ibgw_link_mtu_bytes", "gauge", "The link's IP MTU in bytes.");
	for (unsigned i = 0; i < n; i++)
		sample(out, "ibgw_link_mtu_bytes", s[i].label,
		       s[i].f ? s[i].f->mtu : s[i].k->cfg_mtu);
}

static const struct u64_field link_counters[] = {
	{ "ibgw_link_receive_packets_total", "Packets received on the link.",
	  offsetof(struct link_snap, rx_packets) },
	{ "ibgw_link_receive_bytes_total", "Bytes received on the link.",
	  offsetof(struct link_snap, rx_bytes) },
	{ "ibgw_link_transmit_packets_total", "Packets sent on the link.",
	  offsetof(struct link_snap, tx_packets) },
	{ "ibgw_link_transmit_bytes_total", "Bytes sent on the link.",
	  offsetof(struct link_snap, tx_bytes) },
};

static void write_link_counters(FILE *out, const struct link_snap *s, unsigned n)
{
	for (size_t c = 0; c < sizeof(link_counters) / sizeof(link_counters[0]); c++) {
		metrics_family(out, link_counters[c].name, "counter", link_counters[c].help);
		for (unsigned i = 0; i < n; i++)
			if (s[i].counted)
				sample(out, link_counters[c].name, s[i].label,
				       u64_at(&s[i], link_counters[c].off));
	}
	metrics_family(
	    out, "ibgw_link_drops_total", "counter",
	    "Packets the link's port dropped, by reason (IPoIB and Ethernet reasons differ).");
	for (unsigned i = 0; i < n; i++) {
		if (!s[i].counted)
			continue;
		if (s[i].k->kind == DP_IPOIB) {
			for (int r = 0; r < IPOIB_DROP_COUNT; r++)
				sample_by(out, "ibgw_link_drops_total", s[i].label, "reason",
					  ipoib_drop_name((enum ipoib_drop)r), s[i].ib.drops[r]);
		} else {
			for (int r = 0; r < ETHP_DROP_MAX; r++)
				sample_by(out, "ibgw_link_drops_total", s[i].label, "reason",
					  ethp_drop_name((enum ethp_drop)r), s[i].eth.drops[r]);
		}
	}
}

static const struct u64_field neigh_counters[] = {
	{ "ibgw_neighbour_resolution_failures_total",
	  "Neighbour resolutions that failed (INCOMPLETE or PROBE to FAILED).",
	  offsetof(struct neigh_stats, res_failed) },
	{ "ibgw_neighbour_queue_drops_total",
	  "Packets waiting for resolution that were dropped (queue overflow or failure).",
	  offsetof(struct neigh_stats, unres_discards) },
	{ "ibgw_neighbour_table_full_total",
	  "Neighbour entries refused because the table was full.",
	  offsetof(struct neigh_stats, table_full) },
	{ "ibgw_neighbour_unresolved_evictions_total",
	  "INCOMPLETE neighbour entries evicted for a newer one (max_unresolved or a full table).",
	  offsetof(struct neigh_stats, unres_evictions) },
	{ "ibgw_neighbour_stale_evictions_total",
	  "STALE neighbour entries evicted for a newcomer because the table was full.",
	  offsetof(struct neigh_stats, stale_evictions) },
	{ "ibgw_neighbour_learn_refused_total",
	  "ARP/ND senders outside the link's subnets that were not learned.",
	  offsetof(struct neigh_stats, learn_refused) },
};

static void write_neighbours(FILE *out, const struct link_snap *s, unsigned n)
{
	metrics_family(out, "ibgw_neighbours", "gauge", "Neighbour entries of the link, by state.");
	for (unsigned i = 0; i < n; i++) {
		if (!s[i].has_neigh)
			continue;
		for (int st = NEIGH_NONE + 1; st < NEIGH_STATE_COUNT; st++)
			sample_by(out, "ibgw_neighbours", s[i].label, "state",
				  neigh_state_name((enum neigh_state)st), s[i].by_state[st]);
	}
	for (size_t c = 0; c < sizeof(neigh_counters) / sizeof(neigh_counters[0]); c++) {
		metrics_family(out, neigh_counters[c].name, "counter", neigh_counters[c].help);
		for (unsigned i = 0; i < n; i++)
			if (s[i].has_neigh)
				sample(out, neigh_counters[c].name, s[i].label,
				       u64_at(&s[i].neigh, neigh_counters[c].off));
	}
}

static const struct u64_field ipoib_counters[] = {
	{ "ibgw_ipoib_receive_multicast_packets_total", "Multicast packets received.",
	  offsetof(struct ipoib_link_stats, rx_mcast) },
	{ "ibgw_ipoib_transmit_multicast_packets_total", "Multicast packets sent.",
	  offsetof(struct ipoib_link_stats, tx_mcast) },
	{ "ibgw_ipoib_receive_arp_packets_total", "ARP packets received.",
	  offsetof(struct ipoib_link_stats, rx_arp) },
	{ "ibgw_ipoib_transmit_arp_packets_total", "ARP packets sent.",
	  offsetof(struct ipoib_link_stats, tx_arp) },
	{ "ibgw_ipoib_receive_nd_packets_total", "Neighbor Discovery packets received.",
	  offsetof(struct ipoib_link_stats, rx_nd) },
	{ "ibgw_ipoib_transmit_nd_packets_total", "Neighbor Discovery packets sent.",
	  offsetof(struct ipoib_link_stats, tx_nd) },
	{ "ibgw_ipoib_joins_total", "Multicast joins the SA answered.",
	  offsetof(struct ipoib_link_stats, joins) },
	{ "ibgw_ipoib_join_failures_total", "Multicast joins that failed.",
	  offsetof(struct ipoib_link_stats, join_failures) },
	{ "ibgw_ipoib_up_transitions_total", "Times the link went UP.",
	  offsetof(struct ipoib_link_stats, up_count) },
	{ "ibgw_ipoib_down_transitions_total", "Times the link went DOWN.",
	  offsetof(struct ipoib_link_stats, down_count) },
	{ "ibgw_ipoib_paths_resolved_total", "PathRecords resolved for neighbours.",
	  offsetof(struct ipoib_link_stats, paths_resolved) },
	{ "ibgw_ipoib_path_failures_total", "PathRecord resolutions that failed.",
	  offsetof(struct ipoib_link_stats, path_failures) },
	{ "ibgw_ipoib_paths_freed_total",
	  "Paths freed: no neighbour or connection needed them for a minute.",
	  offsetof(struct ipoib_link_stats, paths_freed) },
	{ "ibgw_ipoib_ud_qp_recoveries_total",
	  "Times the UD QP (or one of its receive work queues) went to the error state and "
	  "was brought back, with the same QPN.",
	  offsetof(struct ipoib_link_stats, ud_qp_recoveries) },
	{ "ibgw_ipoib_address_handles_rebuilt_total",
	  "Address handles rebuilt after a path changed.",
	  offsetof(struct ipoib_link_stats, ah_rebuilt) },
	{ "ibgw_ipoib_rc_receive_packets_total",
	  "Packets received on connections (connected mode).",
	  offsetof(struct ipoib_link_stats, rc_rx_packets) },
	{ "ibgw_ipoib_rc_receive_bytes_total", "Bytes received on connections (connected mode).",
	  offsetof(struct ipoib_link_stats, rc_rx_bytes) },
	{ "ibgw_ipoib_rc_transmit_packets_total",
	  "Packets the control side sent on connections (the workers' are per connection).",
	  offsetof(struct ipoib_link_stats, rc_tx_packets) },
	{ "ibgw_ipoib_rc_transmit_bytes_total",
	  "Bytes the control side sent on connections (the workers' are per connection).",
	  offsetof(struct ipoib_link_stats, rc_tx_bytes) },
	{ "ibgw_ipoib_rc_transmit_errors_total",
	  "RC send completions in error (the connection's QP failed).",
	  offsetof(struct ipoib_link_stats, rc_tx_errors) },
	{ "ibgw_ipoib_connection_requests_total", "Connections this side started (REQ).",
	  offsetof(struct ipoib_link_stats, conn_requests) },
	{ "ibgw_ipoib_connections_established_total", "Connections that came up.",
	  offsetof(struct ipoib_link_stats, conn_up) },
	{ "ibgw_ipoib_connections_closed_total", "Connections that went down.",
	  offsetof(struct ipoib_link_stats, conn_down) },
	{ "ibgw_ipoib_connection_failures_total", "Connection attempts that never came up.",
	  offsetof(struct ipoib_link_stats, conn_failed) },
	{ "ibgw_ipoib_connection_queued_packets_total",
	  "Packets that waited for a connection to come up.",
	  offsetof(struct ipoib_link_stats, conn_queued) },
	{ "ibgw_ipoib_ud_to_rc_peer_packets_total",
	  "Unicast packets sent on UD to a peer offering RC (no connection yet).",
	  offsetof(struct ipoib_link_stats, ud_to_rc_peer) },
};

static const struct u64_field cm_counters[] = {
	{ "ibgw_ipoib_cm_receive_mads_total", "CM MADs received (connected mode).",
	  offsetof(struct cm_stats, rx_mads) },
	{ "ibgw_ipoib_cm_transmit_mads_total", "CM MADs sent (connected mode).",
	  offsetof(struct cm_stats, tx_mads) },
	{ "ibgw_ipoib_cm_transmit_errors_total", "CM MADs that could not be sent.",
	  offsetof(struct cm_stats, tx_errors) },
	{ "ibgw_ipoib_cm_retransmits_total", "CM MADs sent again for want of an answer.",
	  offsetof(struct cm_stats, retransmits) },
	{ "ibgw_ipoib_cm_timeouts_total", "CM exchanges given up after the last resend.",
	  offsetof(struct cm_stats, timeouts) },
};

static bool is_ipoib(const struct link_snap *s)
{
	return s->counted && s->k->kind == DP_IPOIB;
}

static void write_ipoib(FILE *out, const struct link_snap *s, unsigned n)
{
	for (size_t c = 0; c < sizeof(ipoib_counters) / sizeof(ipoib_counters[0]); c++) {
		metrics_family(out, ipoib_counters[c].name, "counter", ipoib_counters[c].help);
		for (unsigned i = 0; i < n; i++)
			if (is_ipoib(&s[i]))
				sample(out, ipoib_counters[c].name, s[i].label,
				       u64_at(&s[i].ib, ipoib_counters[c].off));
	}
	metrics_family(out, "ibgw_ipoib_multicast_groups", "gauge",
		       "Multicast groups of the link, by state (joined, joining).");
	for (unsigned i = 0; i < n; i++) {
		if (!is_ipoib(&s[i]))
			continue;
		sample_by(out, "ibgw_ipoib_multicast_groups", s[i].label, "state", "joined",
			  s[i].groups_joined);
		sample_by(out, "ibgw_ipoib_multicast_groups", s[i].label, "state", "joining",
			  s[i].groups_joining);
	}
	metrics_family(out, "ibgw_ipoib_port_moves_total", "counter",
		       "Times the link moved to its other HCA port (backup_port) because its port "
		       "went down.");
	for (unsigned i = 0; i < n; i++)
		if (is_ipoib(&s[i]))
			sample(out, "ibgw_ipoib_port_moves_total", s[i].label, s[i].port_moves);
	metrics_family(out, "ibgw_ipoib_connections", "gauge",
		       "Connections carrying traffic now (connected mode).");
	for (unsigned i = 0; i < n; i++)
		if (is_ipoib(&s[i]) && s[i].cm)
			sample(out, "ibgw_ipoib_connections", s[i].label, s[i].connections);
	for (size_t c = 0; c < sizeof(cm_counters) / sizeof(cm_counters[0]); c++) {
		metrics_family(out, cm_counters[c].name, "counter", cm_counters[c].help);
		for (unsigned i = 0; i < n; i++)
			if (is_ipoib(&s[i]) && s[i].cm)
				sample(out, cm_counters[c].name, s[i].label,
				       u64_at(s[i].cm, cm_counters[c].off));
	}
}

static void write_ethernet(FILE *out, const struct link_snap *s, unsigned n)
{
	metrics_family(out, "ibgw_ethernet_carrier", "gauge",
		       "1 when the kernel reports carrier on the interface's device, else 0.");
	for (unsigned i = 0; i < n; i++)
		if (s[i].k->kind == DP_ETH)
			sample(out, "ibgw_ethernet_carrier", s[i].label, s[i].k->carrier);
}

static int write_links(struct gw_dp *dp, FILE *out)
{
	struct link_snap *s = calloc(dp->n_links ? dp->n_links : 1, sizeof(*s));
	unsigned n = 0;

	if (!s)
		return -ENOMEM;
	/* Only configured links: a slot a reload emptied is neither kind. */
	for (unsigned i = 0; i < dp->n_links; i++)
		if (dp->links[i].kind == DP_IPOIB || dp->links[i].kind == DP_ETH)
			snap_link(dp, &dp->links[i], &s[n++]);
	write_link_state(out, s, n);
	write_link_counters(out, s, n);
	write_neighbours(out, s, n);
	write_ipoib(out, s, n);
	write_ethernet(out, s, n);
	free(s);
	return 0;
}

/* ---- IB ports and their SA clients ------------------------------------------------------- */

static void port_label(const struct dp_port *p, char *buf, size_t len)
{
	char dev[LABEL_MAX / 2];

	snprintf(buf, len, "device=\"%s\",port=\"%u\"",
		 metrics_label_escape(p->device, dev, sizeof(dev)), p->num);
}

static void write_port_gauge(FILE *out, struct gw_dp *dp, const char *name, const char *help,
			     uint64_t (*get)(const struct dp_port *p))
{
	char lbl[LABEL_MAX];

	metrics_family(out, name, "gauge", help);
	for (unsigned i = 0; i < dp->n_ports; i++) {
		port_label(&dp->ports[i], lbl, sizeof(lbl));
		sample(out, name, lbl, get(&dp->ports[i]));
	}
}

static uint64_t port_open(const struct dp_port *p)
{
	return p->port != NULL;
}

static uint64_t port_state(const struct dp_port *p)
{
	return p->port ? p->pi.state : 0;
}

static uint64_t port_lid(const struct dp_port *p)
{
	return p->port ? p->pi.lid : 0;
}

static uint64_t port_sm_lid(const struct dp_port *p)
{
	return p->port ? p->pi.sm_lid : 0;
}

static uint64_t port_queues(const struct dp_port *p)
{
	return p->port ? p->ops->queues(p->port) : 0;
}

static const struct u64_field sa_counters[] = {
	{ "ibgw_sa_mads_sent_total", "MADs the SA client sent (requests, resends, report answers).",
	  offsetof(struct sa_stats, sent) },
	{ "ibgw_sa_mads_received_total", "MADs the SA client received.",
	  offsetof(struct sa_stats, received) },
	{ "ibgw_sa_responses_total", "Responses matched to a request.",
	  offsetof(struct sa_stats, responses) },
	{ "ibgw_sa_timeouts_total", "Requests that timed out (each try).",
	  offsetof(struct sa_stats, timeouts) },
	{ "ibgw_sa_retries_total", "Requests sent again after a timeout.",
	  offsetof(struct sa_stats, retries) },
	{ "ibgw_sa_request_failures_total", "Requests given up after the last retry.",
	  offsetof(struct sa_stats, failed) },
	{ "ibgw_sa_send_errors_total", "MADs the transport refused to send.",
	  offsetof(struct sa_stats, send_errors) },
	{ "ibgw_sa_status_errors_total", "Responses with a non-zero MAD status.",
	  offsetof(struct sa_stats, status_errors) },
	{ "ibgw_sa_unsolicited_total", "Unsolicited MADs received (Report, Notice).",
	  offsetof(struct sa_stats, unsolicited) },
	{ "ibgw_sa_reports_total", "Trap reports received.", offsetof(struct sa_stats, reports) },
	{ "ibgw_sa_path_queries_total", "PathRecord lookups asked of the client.",
	  offsetof(struct sa_stats, path_queries) },
	{ "ibgw_sa_path_cache_hits_total", "PathRecord lookups answered from the cache.",
	  offsetof(struct sa_stats, path_hits) },
	{ "ibgw_sa_path_cache_misses_total", "PathRecord lookups that queried the SA.",
	  offsetof(struct sa_stats, path_misses) },
	{ "ibgw_sa_path_coalesced_total", "PathRecord lookups joined to a query in flight.",
	  offsetof(struct sa_stats, path_coalesced) },
	{ "ibgw_sa_path_local_total", "PathRecords built locally (GID routes).",
	  offsetof(struct sa_stats, path_local) },
	{ "ibgw_sa_path_negative_total", "PathRecord queries cached as failed.",
	  offsetof(struct sa_stats, path_negative) },
	{ "ibgw_sa_path_invalidated_total", "Path cache entries invalidated.",
	  offsetof(struct sa_stats, path_invalidated) },
	{ "ibgw_sa_path_revalidated_total", "Path cache entries queried again (revalidation).",
	  offsetof(struct sa_stats, path_revalidated) },
	{ "ibgw_sa_path_seeded_total", "Paths learned from the failover peer's state sync.",
	  offsetof(struct sa_stats, path_seeded) },
	{ "ibgw_sa_joins_total", "Multicast joins the SA answered.",
	  offsetof(struct sa_stats, joins) },
	{ "ibgw_sa_join_failures_total", "Multicast joins that failed.",
	  offsetof(struct sa_stats, join_failures) },
	{ "ibgw_sa_leaves_total", "Multicast leaves sent.", offsetof(struct sa_stats, leaves) },
	{ "ibgw_sa_subscriptions_total", "Trap subscriptions made.",
	  offsetof(struct sa_stats, subscriptions) },
	{ "ibgw_sa_down_total", "Times the SA stopped answering.",
	  offsetof(struct sa_stats, sa_down) },
	{ "ibgw_sa_up_total", "Times the SA answered again after being down.",
	  offsetof(struct sa_stats, sa_up) },
	{ "ibgw_sa_probes_total", "Probes sent to an SA that was not answering.",
	  offsetof(struct sa_stats, probes) },
	{ "ibgw_sa_reregisters_total",
	  "Rejoin/resubscribe rounds (client reregister, SM or LID change, port back ACTIVE).",
	  offsetof(struct sa_stats, reregisters) },
	{ "ibgw_sa_port_downs_total", "Times the port left ACTIVE.",
	  offsetof(struct sa_stats, port_downs) },
};

struct sa_gauge {
	const char *name, *help;
	uint64_t (*get)(const struct sa_stats *st);
};

static uint64_t sa_outstanding(const struct sa_stats *st)
{
	return st->outstanding;
}

static uint64_t sa_queued(const struct sa_stats *st)
{
	return st->queued;
}

static uint64_t sa_paths(const struct sa_stats *st)
{
	return st->paths;
}

static uint64_t sa_paths_stale(const struct sa_stats *st)
{
	return st->paths_stale;
}

static uint64_t sa_groups(const struct sa_stats *st)
{
	return st->groups;
}

static uint64_t sa_reachable(const struct sa_stats *st)
{
	return st->sa_reachable;
}

static const struct sa_gauge sa_gauges[] = {
	{ "ibgw_sa_outstanding_requests", "Requests sent and not answered yet.", sa_outstanding },
	{ "ibgw_sa_queued_requests", "Requests waiting for a free slot.", sa_queued },
	{ "ibgw_sa_path_cache_entries", "Entries in the PathRecord cache.", sa_paths },
	{ "ibgw_sa_path_cache_stale_entries", "Path cache entries waiting for revalidation.",
	  sa_paths_stale },
	{ "ibgw_sa_multicast_groups", "Multicast memberships the client keeps.", sa_groups },
	{ "ibgw_sa_reachable", "1 while the SA answers, else 0.", sa_reachable },
};

static int write_sa(FILE *out, struct gw_dp *dp)
{
	struct sa_stats *st = calloc(DP_MAX_PORTS, sizeof(*st));
	char lbl[DP_MAX_PORTS][LABEL_MAX];

	if (!st)
		return -ENOMEM;
	for (unsigned i = 0; i < dp->n_ports; i++) {
		port_label(&dp->ports[i], lbl[i], sizeof(lbl[i]));
		if (dp->ports[i].sa)
			sa_client_stats(dp->ports[i].sa, &st[i]);
	}
	for (size_t c = 0; c < sizeof(sa_counters) / sizeof(sa_counters[0]); c++) {
		metrics_family(out, sa_counters[c].name, "counter", sa_counters[c].help);
		for (unsigned i = 0; i < dp->n_ports; i++)
			if (dp->ports[i].sa)
				sample(out, sa_counters[c].name, lbl[i],
				       u64_at(&st[i], sa_counters[c].off));
	}
	metrics_family(out, "ibgw_sa_bad_mads_total", "counter",
		       "MADs the SA client refused, by reason.");
	for (unsigned i = 0; i < dp->n_ports; i++) {
		for (int r = 0; dp->ports[i].sa && r < SA_BAD_MAX; r++)
			sample_by(out, "ibgw_sa_bad_mads_total", lbl[i], "reason",
				  sa_bad_reason_name((enum sa_bad_reason)r), st[i].bad[r]);
	}
	for (size_t g = 0; g < sizeof(sa_gauges) / sizeof(sa_gauges[0]); g++) {
		metrics_family(out, sa_gauges[g].name, "gauge", sa_gauges[g].help);
		for (unsigned i = 0; i < dp->n_ports; i++)
			if (dp->ports[i].sa)
				sample(out, sa_gauges[g].name, lbl[i], sa_gauges[g].get(&st[i]));
	}
	metrics_family(out, "ibgw_sa_timeout_seconds", "gauge",
		       "The SA client's current base timeout per request.");
	for (unsigned i = 0; i < dp->n_ports; i++)
		if (dp->ports[i].sa)
			fprintf(out, "ibgw_sa_timeout_seconds{%s} %.3f\n", lbl[i],
				st[i].timeout_ms / 1000.0);
	free(st);
	return 0;
}

static int write_ports(FILE *out, struct gw_dp *dp)
{
	write_port_gauge(
	    out, dp, "ibgw_ib_port_open",
	    "1 when the IB port could be opened, 0 when not (gwctl show links says why).",
	    port_open);
	write_port_gauge(
	    out, dp, "ibgw_ib_port_state",
	    "The IB port's PortState: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE (0: not open).",
	    port_state);
	write_port_gauge(out, dp, "ibgw_ib_port_lid", "The IB port's LID (0: none yet).", port_lid);
	write_port_gauge(out, dp, "ibgw_ib_port_sm_lid", "The LID of the port's subnet manager.",
			 port_sm_lid);
	write_port_gauge(out, dp, "ibgw_ib_port_queues",
			 "The IB port's receive queues, each polled by one worker (0: not open).",
			 port_queues);
	return write_sa(out, dp);
}

/* ---- workers --------------------------------------------------------------------------- */

static const struct u64_field worker_counters[] = {
	{ "ibgw_worker_receive_packets_total", "Packets the worker received.",
	  offsetof(struct fwd_stats, rx_packets) },
	{ "ibgw_worker_receive_bytes_total", "Bytes the worker received.",
	  offsetof(struct fwd_stats, rx_bytes) },
	{ "ibgw_worker_transmit_packets_total", "Packets the worker sent.",
	  offsetof(struct fwd_stats, tx_packets) },
	{ "ibgw_worker_transmit_bytes_total",
	  "Bytes the worker sent (Ethernet: with the header; IPoIB: with the IPoIB header).",
	  offsetof(struct fwd_stats, tx_bytes) },
	{ "ibgw_worker_fragmented_packets_total", "IPv4 packets fragmented.",
	  offsetof(struct fwd_stats, fragmented) },
	{ "ibgw_worker_fragments_sent_total", "IPv4 fragments sent.",
	  offsetof(struct fwd_stats, frags_sent) },
	{ "ibgw_worker_mss_clamped_total", "TCP SYNs whose MSS was clamped.",
	  offsetof(struct fwd_stats, mss_clamped) },
	{ "ibgw_worker_gso_sent_whole_total",
	  "GSO packets (an Ethernet port's frames over the MTU) sent whole, to a port that "
	  "segments them or over an IPoIB connection whose MTU holds them.",
	  offsetof(struct fwd_stats, gso_whole) },
	{ "ibgw_worker_gso_segmented_total", "GSO packets segmented here (docs/dataplane.md).",
	  offsetof(struct fwd_stats, gso_segmented) },
	{ "ibgw_worker_gso_segments_total", "Segments the GSO packets segmented here made.",
	  offsetof(struct fwd_stats, gso_segments) },
	{ "ibgw_worker_gro_merged_total",
	  "Packets merged from two or more TCP segments received from IPoIB (receive coalescing).",
	  offsetof(struct fwd_stats, gro_merged) },
	{ "ibgw_worker_gro_segments_total", "TCP segments in the merged packets.",
	  offsetof(struct fwd_stats, gro_segments) },
	{ "ibgw_worker_icmp_errors_sent_total", "ICMP errors sent.",
	  offsetof(struct fwd_stats, icmp_sent) },
	{ "ibgw_worker_icmp_rate_limited_total", "ICMP errors not sent: rate limit.",
	  offsetof(struct fwd_stats, icmp_rate_limited) },
	{ "ibgw_worker_icmp_not_sent_total", "ICMP errors not sent, for any reason.",
	  offsetof(struct fwd_stats, icmp_not_sent) },
	{ "ibgw_worker_unresolved_held_total",
	  "Packets punted behind earlier ones of their next hop still on the control thread "
	  "(a flow keeps its order across a resolution).",
	  offsetof(struct fwd_stats, unres_held) },
	{ "ibgw_worker_control_frames_sent_total", "Frames the worker sent for the control thread.",
	  offsetof(struct fwd_stats, ctl_tx) },
	{ "ibgw_worker_loops_total", "Passes of the worker's polling loop.",
	  offsetof(struct fwd_stats, loops) },
	{ "ibgw_worker_sleeps_total", "Times the worker went to sleep (nothing to do).",
	  offsetof(struct fwd_stats, sleeps) },
	{ "ibgw_worker_wakeups_total", "Times the worker woke from sleep.",
	  offsetof(struct fwd_stats, wakeups) },
};

/* One family with a reason label over every worker: names[r] for r in [first, n). */
static void write_worker_reasons(FILE *out, const struct fwd_stats *st, unsigned n_workers,
				 const char *name, const char *help, size_t off, int first, int n,
				 const char *(*reason)(int r))
{
	metrics_family(out, name, "counter", help);
	for (unsigned w = 0; w < n_workers; w++) {
		for (int r = first; r < n; r++)
			fprintf(out, "%s{worker=\"%u\",reason=\"%s\"} %" PRIu64 "\n", name, w,
				reason(r), u64_at(&st[w], off + (size_t)r * sizeof(uint64_t)));
	}
}

static const char *drop_name(int r)
{
	return fwd_drop_name((enum fwd_drop)r);
}

static const char *punt_name(int r)
{
	return fwd_punt_name((enum fwd_punt)r);
}

static const char *pclass_name(int r)
{
	return fwd_pclass_name((enum fwd_pclass)r);
}

/* One family with a class label (enum fwd_pclass) over every worker. */
static void write_worker_classes(FILE *out, const struct fwd_stats *st, unsigned n_workers,
				 const char *name, const char *help, size_t off)
{
	metrics_family(out, name, "counter", help);
	for (unsigned w = 0; w < n_workers; w++) {
		for (int c = 0; c < FWD_PCLASS_COUNT; c++)
			fprintf(out, "%s{worker=\"%u\",class=\"%s\"} %" PRIu64 "\n", name, w,
				pclass_name(c), u64_at(&st[w], off + (size_t)c * sizeof(uint64_t)));
	}
}

static const char *ip_name(int r)
{
	return ip_reason_name((enum ip_reason)r);
}

static const char *ethf_name(int r)
{
	return ethf_result_name((enum ethf_result)r);
}

static const char *icmp_name(int r)
{
	return icmp_reason_name((enum icmp_reason)r);
}

static const char *gso_name(int r)
{
	return gso_result_name((enum gso_result)r);
}

static void write_worker_families(FILE *out, const struct fwd_stats *st, unsigned n)
{
	for (size_t c = 0; c < sizeof(worker_counters) / sizeof(worker_counters[0]); c++) {
		metrics_family(out, worker_counters[c].name, "counter", worker_counters[c].help);
		for (unsigned w = 0; w < n; w++)
			fprintf(out, "%s{worker=\"%u\"} %" PRIu64 "\n", worker_counters[c].name, w,
				u64_at(&st[w], worker_counters[c].off));
	}
	metrics_family(out, "ibgw_worker_forwarded_packets_total", "counter",
		       "Packets forwarded, by IP family.");
	for (unsigned w = 0; w < n; w++) {
		fprintf(
		    out,
		    "ibgw_worker_forwarded_packets_total{worker=\"%u\",family=\"ipv4\"} %" PRIu64
		    "\n",
		    w, st[w].forwarded4);
		fprintf(
		    out,
		    "ibgw_worker_forwarded_packets_total{worker=\"%u\",family=\"ipv6\"} %" PRIu64
		    "\n",
		    w, st[w].forwarded6);
	}
	write_worker_reasons(out, st, n, "ibgw_worker_drops_total",
			     "Packets the worker dropped, by reason (docs/packet-rules.md).",
			     offsetof(struct fwd_stats, drops), 0, FWD_DROP_COUNT, drop_name);
	write_worker_reasons(out, st, n, "ibgw_worker_punts_total",
			     "Packets handed to the control thread, by reason.",
			     offsetof(struct fwd_stats, punts), 0, FWD_PUNT_COUNT, punt_name);
	write_worker_classes(out, st, n, "ibgw_worker_punt_class_sent_total",
			     "Punts handed to the control thread, by class (docs/dataplane.md).",
			     offsetof(struct fwd_stats, pclass_sent));
	write_worker_classes(out, st, n, "ibgw_worker_punt_class_budget_drops_total",
			     "Punts dropped: their class's share of the message pool was in use.",
			     offsetof(struct fwd_stats, pclass_no_budget));
	write_worker_classes(
	    out, st, n, "ibgw_worker_punt_class_rate_limited_total",
	    "Punts refused by their class's rate limit (per source or per worker).",
	    offsetof(struct fwd_stats, pclass_limited));
	write_worker_reasons(
	    out, st, n, "ibgw_worker_ip_rejects_total",
	    "IP packets refused (the reason behind the ip_invalid and martian drops).",
	    offsetof(struct fwd_stats, ip), IP_OK + 1, IP_REASON_COUNT, ip_name);
	write_worker_reasons(out, st, n, "ibgw_worker_ethernet_frame_errors_total",
			     "Ethernet frames refused (the reason behind the eth_frame drops).",
			     offsetof(struct fwd_stats, eth), ETHF_OK + 1, ETHF_ERR_MAX, ethf_name);
	write_worker_reasons(out, st, n, "ibgw_worker_icmp_not_built_total",
			     "ICMP errors not built, by reason.", offsetof(struct fwd_stats, icmp),
			     ICMP_OK + 1, ICMP_REASON_COUNT, icmp_name);
	write_worker_reasons(out, st, n, "ibgw_worker_gso_refused_total",
			     "GSO packets refused (the reason behind the gso drops, and UDP "
			     "datagrams too big for the egress).",
			     offsetof(struct fwd_stats, gso), GSO_OK + 1, GSO_RESULT_COUNT,
			     gso_name);
}

static int write_workers(FILE *out, struct gw_dp *dp)
{
	unsigned n = fwd_engine_n_workers(dp->e);
	struct fwd_stats *st = calloc(n ? n : 1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	for (unsigned w = 0; w < n; w++)
		fwd_engine_stats(dp->e, (int)w, &st[w]);
	metrics_single(out, "ibgw_workers", "gauge", "Forwarding workers running.", n);
	write_worker_families(out, st, n);
	free(st);
	return 0;
}

/* ---- slow path, routes ----------------------------------------------------------------- */

static void write_slowpath(FILE *out, struct gw_dp *dp)
{
	struct fwd_sp_stats sp;

	fwd_sp_stats(dp->e, &sp);
	metrics_single(out, "ibgw_slowpath_messages_total", "counter",
		       "Messages the control thread took from the workers.", sp.msgs);
	metrics_family(
	    out, "ibgw_slowpath_events_total", "counter",
	    "What the slow path did (ARP/ND answers, parked and resolved packets...), by reason.");
	for (int r = 0; r < FWD_SP_REASON_COUNT; r++)
		fprintf(out, "ibgw_slowpath_events_total{reason=\"%s\"} %" PRIu64 "\n",
			fwd_sp_reason_name((enum fwd_sp_reason)r), sp.r[r]);
	metrics_family(out, "ibgw_proxy_decisions_total", "counter",
		       "Proxy ARP/ND decisions, by reason.");
	for (int r = 0; r < PROXY_REASON_COUNT; r++)
		fprintf(out, "ibgw_proxy_decisions_total{reason=\"%s\"} %" PRIu64 "\n",
			proxy_reason_name((enum proxy_reason)r), sp.proxy[r]);
}

static void write_routes(FILE *out, struct gw_dp *dp)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} fam[] = {
		{ "ibgw_route_prefixes", "Prefixes in the tenant's route table.",
		  offsetof(struct rt_stats, prefixes) },
		{ "ibgw_routes",
		  "Routes in the tenant's route table (all sources, selected or not).",
		  offsetof(struct rt_stats, routes) },
		{ "ibgw_route_nexthops", "Distinct next hops in use in the tenant's table.",
		  offsetof(struct rt_stats, nexthops) },
		{ "ibgw_route_nexthop_groups",
		  "Distinct multipath next-hop groups in use in the tenant's table.",
		  offsetof(struct rt_stats, groups) },
	};
	struct rt_stats rs[GW_TENANTS_MAX];
	char lbl[GW_TENANTS_MAX][GW_NAME_MAX * 2 + 16], esc[GW_NAME_MAX * 2];

	for (unsigned t = 0; t < GW_TENANTS_MAX; t++) {
		const struct dp_tenant *d = dp_tenant_at(dp, t);

		if (!d)
			continue;
		rt_stats(d->rt, &rs[t]);
		snprintf(lbl[t], sizeof(lbl[t]), "tenant=\"%s\"",
			 metrics_label_escape(dp_tenant_label(d), esc, sizeof(esc)));
	}
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		metrics_family(out, fam[f].name, "gauge", fam[f].help);
		for (unsigned t = 0; t < GW_TENANTS_MAX; t++) {
			uint32_t v;

			if (!dp_tenant_at(dp, t))
				continue;
			memcpy(&v, (const char *)&rs[t] + fam[f].off, sizeof(v));
			sample(out, fam[f].name, lbl[t], v);
		}
	}
}

int gw_dp_metrics(struct gw_dp *dp, FILE *out)
{
	int err;

	if (!dp)
		return 0; /* not built yet: the daemon's own families only */
	err = write_links(dp, out);
	if (err < 0)
		return err;
	err = write_ports(out, dp);
	if (err < 0)
		return err;
	err = write_workers(out, dp);
	if (err < 0)
		return err;
	write_slowpath(out, dp);
	write_routes(out, dp);
	dp_ha_metrics(dp, out);
	dp_ra_metrics(dp, out);
	dp_mcast_metrics(dp, out);
	dp_dhcp_metrics(dp, out);
	return 0;
}
