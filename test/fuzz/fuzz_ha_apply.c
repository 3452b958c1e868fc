/*
 * libFuzzer harness for the failover pair's receive side past the decoders (which
 * fuzz_ha_wire and fuzz_ha_sync cover): valid, authenticated heartbeats with arbitrary
 * content driving ha/ha_fsm (with the hands of gateway/ha_hands.c claiming and giving up
 * the service addresses, as gateway/dp_ha.c does), and valid state-sync messages with
 * arbitrary records going through ha_fsm_sync_accept to gateway/ha_hands.c's accept
 * decisions (gw_hands_sync_neigh / gw_hands_sync_route, against the scopes of a config).
 * One fresh FSM per input, on a simulated clock; the fuzzer's thread plays the control
 * thread. The input is a script: heartbeats (path, echo, interval, groups' states,
 * priorities and flags), time, path up/down, switchover, tiebreaker answers, stalls, and
 * sync messages (records' links, addresses, link-layer lengths, prefixes, next hops).
 *
 * Checks, whatever the peer (or a holder of the key) sends:
 * - after every step a group's addresses are held exactly when it is MASTER, and a group
 *   that tracks a path that is down is not MASTER;
 * - every heartbeat the FSM sends decodes with the key, from this node, in rising sequence;
 * - a heartbeat or a sync message accepted once is refused when replayed;
 * - a neighbour record is taken only on a link of its kind (20-octet address on IPoIB,
 *   6 on Ethernet), inside that link's scopes, for an address that is neither the box's
 *   nor a service address, and on Ethernet only when the table does not know it; one
 *   refused lies outside the scopes;
 * - a route record is taken only as a host route without next hops, connected on the
 *   interface that knows the address, inside that link's scopes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gateway/config.h"
#include "gateway/ha_hands.h"
#include "ha/ha_fsm.h"
#include "ha/ha_sync.h"
#include "ha/ha_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: say which, then abort (libFuzzer saves the input). */
static void fail(int line, const char *what)
{
	fprintf(stderr, "fuzz_ha_apply.c:%d: invariant broken: %s\n", line, what);
	abort();
}
#define check(c) ((c) ? (void)0 : fail(__LINE__, #c))

static const char yaml[] =
    "gateway: {name: gw1}\n"
    "ipoib_links:\n"
    "  - {name: ib0, backend: verbs, device: gw1, addresses: [10.10.0.1/24, \"fd00:10::1/64\"]}\n"
    "  - {name: ib1, backend: verbs, device: gw1, port: 2, addresses: [10.11.0.1/24]}\n"
    "ethernet_interfaces:\n"
    "  - name: eth0\n"
    "    addresses: [10.20.0.1/24, \"fd00:20::1/64\"]\n"
    "    proxy_prefixes: [10.10.0.128/25]\n"
    "failover:\n"
    "  priority: 120\n"
    "  key_file: /etc/ibgw/failover.key\n"
    "  groups:\n"
    "    - name: both\n"
    "      addresses:\n"
    "        - {address: 10.10.0.254/24, dev: ib0}\n"
    "        - {address: 10.20.0.254/24, dev: eth0}\n"
    "        - {address: \"fd00:20::fe/64\", dev: eth0}\n"
    "    - name: ib1only\n"
    "      priority: 10\n"
    "      addresses:\n"
    "        - {address: 10.11.0.254/24, dev: ib1}\n"
    "    - name: empty\n";

static const char *const links[] = { "ib0", "ib1", "eth0", "nosuch" };
static const enum gw_hands_link link_kinds[] = { GW_HANDS_LINK_IPOIB, GW_HANDS_LINK_IPOIB,
						 GW_HANDS_LINK_ETH, GW_HANDS_LINK_NONE };
/* Addresses near the config's: subnets, own, service, proxied, foreign. */
static const char *const near4[] = { "10.10.0.0", "10.10.0.128", "10.11.0.0",
				     "10.20.0.0", "10.30.0.0",   "192.0.2.0" };
static const char *const near6[] = { "fd00:20::", "fd00:10::", "fd00:30::", "fe80::" };
static const char *const own[] = { "10.10.0.1", "10.11.0.1", "10.20.0.1", "fd00:10::1",
				   "fd00:20::1" };

static struct {
	struct ha_key key;
	char paths[8][GW_NAME_MAX];
	unsigned n_paths, n_groups, n_addrs, n_scopes;
	struct ha_group_cfg groups[HA_MAX_GROUPS];
	struct gw_hands_addr addrs0[GW_HANDS_MAX_ADDRS];
	struct gw_hands_scope scopes[64];
	struct ip_addr own[5];
	struct ip_addr near4[6], near6[4];
} w;

/* Per input. */
static struct {
	struct gw_hands_addr addrs[GW_HANDS_MAX_ADDRS];
	struct ha_fsm *fsm;
	bool path_down[8];
	uint64_t sent_seq; /* last heartbeat sequence sent */
	bool known;        /* what the Ethernet table answers */
	bool asked;
	uint32_t where; /* 0 none, else 1 + index into links */
} s;

static const struct ha_origin self = { .node_id = 0x1111, .boot_id = 0xb001, .name = "gw1" };

/* ---- the hands' ops and the FSM's callbacks ---- */

static int op_add(void *ctx, const struct gw_hands_addr *a)
{
	(void)ctx;
	(void)a;
	return 0;
}
static void op_del(void *ctx, const struct gw_hands_addr *a)
{
	(void)ctx;
	(void)a;
}
static void op_announce(void *ctx, const struct gw_hands_addr *a)
{
	(void)ctx;
	check(a->held); /* only held addresses are announced */
}
static const struct gw_hands_ops hands = { op_add, op_del, op_announce };

static void cb_send(void *arg, unsigned path, const uint8_t *msg, size_t len)
{
	struct ha_heartbeat hb;

	(void)arg;
	check(path < w.n_paths);
	check(ha_hb_decode(msg, len, &w.key, &hb, NULL, 0) == HA_WIRE_OK);
	check(hb.hdr.node_id == self.node_id && hb.hdr.boot_id == self.boot_id);
	check(hb.hdr.seq > s.sent_seq);
	s.sent_seq = hb.hdr.seq;
}
static void cb_master(void *arg, unsigned g, const char *reason)
{
	(void)arg;
	(void)reason;
	check(g < w.n_groups);
	gw_hands_claim(s.addrs, w.n_addrs, g, &hands, NULL);
	gw_hands_announce(s.addrs, w.n_addrs, g, &hands, NULL);
}
static void cb_backup(void *arg, unsigned g, enum ha_state now, const char *reason)
{
	(void)arg;
	(void)reason;
	check(g < w.n_groups);
	/* BACKUP or FAULT, and INIT out of a fault (ha_fsm.c's eval_group): never MASTER. */
	check(now != HA_STATE_MASTER && now < HA_STATE_COUNT);
	gw_hands_give_up(s.addrs, w.n_addrs, g, &hands, NULL);
}
static void cb_probe(void *arg)
{
	(void)arg;
}
static const struct ha_fsm_ops fsm_ops = {
	.send = cb_send,
	.become_master = cb_master,
	.become_backup = cb_backup,
	.probe_tiebreaker = cb_probe,
};

static void check_held(void)
{
	for (unsigned i = 0; i < w.n_addrs; i++) {
		enum ha_state st = ha_fsm_group_state(s.fsm, s.addrs[i].group);

		check(s.addrs[i].held == (st == HA_STATE_MASTER));
	}
	for (unsigned g = 0; g < w.n_groups; g++)
		for (unsigned p = 0; p < w.n_paths; p++)
			if (s.path_down[p] && (w.groups[g].track_paths >> p & 1))
				check(ha_fsm_group_state(s.fsm, g) != HA_STATE_MASTER);
}

/* ---- the sync side ---- */

static bool known(void *ctx)
{
	(void)ctx;
	s.asked = true;
	return s.known;
}

static uint32_t where(void *ctx, const char **link)
{
	(void)ctx;
	if (!s.where)
		return 0;
	*link = links[s.where - 1];
	return s.where;
}

static bool is_ours(const struct ip_addr *a)
{
	for (unsigned i = 0; i < 5; i++)
		if (ip_addr_equal(a, &w.own[i]))
			return true;
	return gw_hands_is_service(s.addrs, w.n_addrs, a);
}

static void apply(const struct ha_sync_rec *r)
{
	if (r->type == HA_SYNC_NEIGH) {
		const struct ha_sync_neigh *n = &r->u.neigh;
		unsigned li = 3;
		enum gw_hands_neigh what;
		bool ours, in;

		for (unsigned i = 0; i < 3; i++)
			if (!strcmp(n->link, links[i]))
				li = i;
		ours = link_kinds[li] != GW_HANDS_LINK_NONE && is_ours(&n->addr);
		in = gw_hands_in_scope(w.scopes, w.n_scopes, n->link, &n->addr);
		s.asked = false;
		what =
		    gw_hands_sync_neigh(n, link_kinds[li], ours, w.scopes, w.n_scopes, known, NULL);
		check(!s.asked || link_kinds[li] == GW_HANDS_LINK_ETH);
		if (what == GW_HANDS_NEIGH_IPOIB)
			check(link_kinds[li] == GW_HANDS_LINK_IPOIB && n->lladdr_len == 20);
		if (what == GW_HANDS_NEIGH_ETH)
			check(link_kinds[li] == GW_HANDS_LINK_ETH && n->lladdr_len == 6 &&
			      s.asked && !s.known);
		if (what == GW_HANDS_NEIGH_IPOIB || what == GW_HANDS_NEIGH_ETH)
			check(in && !ours);
		if (what == GW_HANDS_NEIGH_REFUSED)
			check(!in);
	} else if (r->type == HA_SYNC_ROUTE) {
		const struct ha_sync_route *sr = &r->u.route;
		struct rt_route rt;
		enum gw_hands_route what =
		    gw_hands_sync_route(sr, w.scopes, w.n_scopes, where, NULL, &rt);

		if (what == GW_HANDS_ROUTE_TAKE) {
			check(sr->n_nexthops == 0);
			check(sr->prefix.len == (sr->prefix.addr.family == AF_INET ? 32 : 128));
			check(ip_addr_equal(&rt.prefix.addr, &sr->prefix.addr) &&
			      rt.prefix.len == sr->prefix.len);
			check(rt.nnh == 1 && rt.nh[0].type == RT_NH_CONNECTED &&
			      rt.nh[0].ifindex == s.where && s.where);
			check(gw_hands_in_scope(w.scopes, w.n_scopes, links[s.where - 1],
						&sr->prefix.addr));
		}
	}
}

static const struct ha_origin peer_a = { .node_id = 0x2222, .boot_id = 0xb002, .name = "gw2" };
static const struct ha_origin peer_b = { .node_id = 0x2222, .boot_id = 0xb003, .name = "gw2" };

static int emitted(void *arg, const uint8_t *msg, size_t len)
{
	struct ha_sync_msg m;
	struct ha_sync_rec r;

	(void)arg;
	check(ha_sync_decode(msg, len, &w.key, &m, NULL, 0) == HA_WIRE_OK);
	if (ha_fsm_sync_accept(s.fsm, &m.hdr) != HA_WIRE_OK)
		return 0;
	check(ha_fsm_sync_accept(s.fsm, &m.hdr) != HA_WIRE_OK); /* a replay */
	while (ha_sync_next(&m, &r))
		apply(&r);
	return 0;
}

/* ---- input ---- */

struct in {
	const uint8_t *p;
	size_t n;
};
static uint8_t u8(struct in *in)
{
	uint8_t v = 0;

	if (in->n)
		v = *in->p++, in->n--;
	return v;
}

static void addr_of(struct in *in, struct ip_addr *a)
{
	uint8_t b = u8(in);

	if (b & 0x80) {
		*a = w.near6[(b >> 3) & 3];
		a->bytes[15] = u8(in);
		a->bytes[14] = (b & 4) ? 0x80 : 0;
	} else {
		*a = w.near4[((b >> 3) & 7) % 6];
		a->bytes[3] = u8(in);
	}
}

static void sync_step(struct in *in, uint64_t *seq)
{
	struct ha_sync_rec recs[4];
	uint8_t b = u8(in);
	unsigned n = (b & 3) + 1;
	const struct ha_origin *o = (b & 4) ? &peer_b : &peer_a;

	memset(recs, 0, sizeof(recs));
	if (b & 8)
		*seq = u8(in); /* may go back: a replayed or reordered sequence */
	for (unsigned i = 0; i < n; i++) {
		uint8_t t = u8(in);

		if (t & 1) {
			struct ha_sync_neigh *ne = &recs[i].u.neigh;

			recs[i].type = HA_SYNC_NEIGH;
			addr_of(in, &ne->addr);
			snprintf(ne->link, sizeof(ne->link), "%s", links[(t >> 1) & 3]);
			ne->lladdr_len = (t & 8) ? 20 : (t & 16) ? 6 : (uint8_t)(1 + t % 20);
			for (unsigned k = 0; k < ne->lladdr_len; k++)
				ne->lladdr[k] = (uint8_t)(k + 2);
			ne->state = 0;
		} else {
			struct ha_sync_route *sr = &recs[i].u.route;
			unsigned full;

			recs[i].type = HA_SYNC_ROUTE;
			addr_of(in, &sr->prefix.addr);
			full = sr->prefix.addr.family == AF_INET ? 32 : 128;
			sr->prefix.len = (t & 2) ? (uint8_t)full : (uint8_t)(u8(in) % (full + 1));
			ip_prefix_mask(&sr->prefix);
			sr->metric = t >> 4;
			sr->n_nexthops = (t & 4) ? 1 : 0;
			if (sr->n_nexthops) {
				sr->nexthops[0] = sr->prefix.addr;
				sr->nexthops[0].bytes[sr->prefix.addr.family == AF_INET ? 3 : 15] =
				    9;
			}
		}
	}
	s.known = (b & 16) != 0;
	s.where = (b >> 5) % 4; /* 0 none, 1 ib0, 2 ib1, 3 eth0 */
	(void)ha_sync_encode(o, seq, &w.key, 1, true, recs, n, 1400, emitted, NULL);
}

static void hb_step(struct in *in, uint64_t *seq, uint64_t now)
{
	struct ha_heartbeat hb;
	uint8_t buf[HA_HB_MAX_LEN];
	uint8_t b = u8(in), c = u8(in);
	const struct ha_origin *o = (b & 1) ? &peer_b : &peer_a;
	unsigned path = (b >> 1) % w.n_paths;
	size_t len;

	memset(&hb, 0, sizeof(hb));
	hb.echo_boot = (b & 8) ? 0 : (b & 16) ? 0xdead : self.boot_id;
	hb.echo_seq = s.sent_seq;
	hb.hears = (c & 1) ? ~0ull : (uint64_t)c;
	hb.interval_ms = (b & 32) ? 20 : 10 + u8(in);
	hb.dead_ms = hb.interval_ms * ((b & 64) ? 4 : 3 + (c >> 5));
	hb.path_id = (uint8_t)path;
	hb.n_groups = (uint8_t)((c >> 1) & 3);
	for (unsigned g = 0; g < hb.n_groups; g++) {
		uint8_t x = u8(in), pr = u8(in);

		hb.groups[g].id = (x & 0x80) ? (uint32_t)x * 77 : ha_group_id(w.groups[x % 3].name);
		hb.groups[g].priority = pr;
		hb.groups[g].state = (uint8_t)(x & 3);
		hb.groups[g].flags = (uint8_t)((x >> 2) & HA_GF_KNOWN);
	}
	*seq += 1 + (b >> 7) * 3;
	len = ha_hb_encode(buf, sizeof(buf), o, *seq, &hb, &w.key);
	if (!len)
		return;
	if (ha_fsm_heartbeat(s.fsm, path, buf, len, now) == HA_WIRE_OK)
		check(ha_fsm_heartbeat(s.fsm, path, buf, len, now) != HA_WIRE_OK);
}

static void setup(void)
{
	struct gw_config *cfg = NULL;
	struct gw_config_errors errs;

	check(gw_config_load_buffer("fuzz.yaml", yaml, strlen(yaml), &cfg, &errs) == 0);
	gw_config_errors_free(&errs);
	check(ha_key_set(&w.key, (const uint8_t *)"fuzzing key 0123", 16) == 0);
	w.n_paths = gw_hands_paths(cfg, w.paths, 8);
	check(w.n_paths > 0 && w.n_paths <= 8);
	w.n_groups = gw_hands_groups(cfg, w.paths, w.n_paths, w.groups, w.addrs0, &w.n_addrs);
	check(w.n_groups == 3);
	w.n_scopes = gw_hands_scopes(cfg, w.scopes, 64);
	check(w.n_scopes <= 64);
	for (unsigned i = 0; i < 5; i++)
		check(ip_addr_parse(own[i], &w.own[i]) == 0);
	for (unsigned i = 0; i < 6; i++)
		check(ip_addr_parse(near4[i], &w.near4[i]) == 0);
	for (unsigned i = 0; i < 4; i++)
		check(ip_addr_parse(near6[i], &w.near6[i]) == 0);
	gw_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct in in = { data, size };
	struct ha_fsm_cfg fc = {
		.self = self, .preempt = true, .preempt_delay_ms = 100, .has_tiebreaker = true
	};
	uint64_t now = 1000, hb_seq = 0, sync_seq = 0;

	if (!ready)
		setup();
	ready = true;
	memset(&s, 0, sizeof(s));
	memcpy(s.addrs, w.addrs0, sizeof(s.addrs));
	fc.n_paths = w.n_paths;
	fc.groups = w.groups;
	fc.n_groups = w.n_groups;
	fc.key = &w.key;
	fc.has_tiebreaker = size > 0 && (data[0] & 0x80);
	check(ha_fsm_new(&fc, &fsm_ops, NULL, now, &s.fsm) == 0);
	while (in.n) {
		uint8_t op = u8(&in);

		switch (op & 7) {
		case 0:
		case 1:
			hb_step(&in, &hb_seq, now);
			break;
		case 2:
			now += (uint64_t)(op >> 3) * 10;
			ha_fsm_tick(s.fsm, now);
			break;
		case 3: {
			unsigned p = (op >> 4) % w.n_paths;

			s.path_down[p] = (op >> 3) & 1;
			ha_fsm_path_state(s.fsm, p, !s.path_down[p], now);
			break;
		}
		case 4:
			(void)ha_fsm_switchover(s.fsm, (op >> 3) % 4, now);
			break;
		case 5:
			ha_fsm_tiebreaker_result(s.fsm, (op >> 3) & 1, now);
			break;
		case 6:
			now += (uint64_t)(op >> 3) * 40;
			ha_fsm_stalled(s.fsm, (uint64_t)(op >> 3) * 40, now);
			ha_fsm_tick(s.fsm, now);
			break;
		default:
			sync_step(&in, &sync_seq);
			break;
		}
		check_held();
	}
	ha_fsm_free(s.fsm);
	return 0;
}
