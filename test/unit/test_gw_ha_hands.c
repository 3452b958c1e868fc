/*
 * Unit tests for the failover pair's hands (gateway/ha_hands.c), the functions
 * gateway/dp_ha.c runs: the heartbeat paths and groups a config gives (and the paths each
 * group tracks), which service addresses a group claims when it becomes MASTER here,
 * announces, and gives up when it leaves, which addresses are not the box's own, and
 * which of the peer's state-sync records are taken (inside the prefixes the config puts
 * on their link) or refused. The engine is a recording fake
 * (struct gw_hands_ops), as ha_fsm's tests fake the sends.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "gateway/config.h"
#include "gateway/ha_hands.h"
#include "test/unit/config_load.h"

#define PAIR                                                                                       \
	"gateway: {name: gw1}\n"                                                                   \
	"ipoib_links:\n"                                                                           \
	"  - {name: ib0, backend: verbs, device: gw1, addresses: [10.10.0.1/24]}\n"                \
	"  - {name: ib1, backend: verbs, device: gw1, port: 2, addresses: [10.11.0.1/24]}\n"       \
	"ethernet_interfaces:\n"                                                                   \
	"  - {name: eth0, addresses: [10.20.0.1/24, \"fd00:20::1/64\"]}\n"                         \
	"failover:\n"                                                                              \
	"  priority: 120\n"                                                                        \
	"  key_file: /etc/ibgw/failover.key\n"                                                     \
	"  groups:\n"                                                                              \
	"    - name: both\n"                                                                       \
	"      addresses:\n"                                                                       \
	"        - {address: 10.10.0.254/24, dev: ib0}\n"                                          \
	"        - {address: 10.20.0.254/24, dev: eth0}\n"                                         \
	"        - {address: \"fd00:20::fe/64\", dev: eth0}\n"                                     \
	"    - name: ib1only\n"                                                                    \
	"      priority: 10\n"                                                                     \
	"      addresses:\n"                                                                       \
	"        - {address: 10.11.0.254/24, dev: ib1}\n"                                          \
	"    - name: empty\n"

/* The box as dp_ha.c sets it up, with a fake engine: links "up" are in it. */
struct box {
	struct gw_config *cfg;
	char paths[HA_MAX_PATHS][GW_NAME_MAX];
	unsigned n_paths;
	struct ha_group_cfg groups[HA_MAX_GROUPS];
	unsigned n_groups;
	struct gw_hands_addr addrs[GW_HANDS_MAX_ADDRS];
	unsigned n_addrs;
	const char *up[4];  /* links in the engine */
	const char *broken; /* a link whose engine refuses addresses */
	char log[1024];     /* "+10.10.0.254/24@ib0 -... !..." */
};

static void box_start(struct box *b, const char *yaml)
{
	memset(b, 0, sizeof(*b));
	b->cfg = load(yaml);
	b->n_paths = gw_hands_paths(b->cfg, b->paths, HA_MAX_PATHS);
	b->n_groups = gw_hands_groups(b->cfg, (const char(*)[GW_NAME_MAX])b->paths, b->n_paths,
				      b->groups, b->addrs, &b->n_addrs);
}

static void box_done(struct box *b)
{
	gw_config_free(b->cfg);
}

static void note(struct box *b, char op, const struct gw_hands_addr *a)
{
	char buf[IP_PREFIX_STRLEN];
	size_t len = strlen(b->log);

	snprintf(b->log + len, sizeof(b->log) - len, "%s%c%s@%s", len ? " " : "", op,
		 ip_prefix_format(&a->addr, buf, sizeof(buf)), a->dev);
}

static bool is_up(const struct box *b, const char *dev)
{
	for (unsigned i = 0; i < 4; i++)
		if (b->up[i] && !strcmp(b->up[i], dev))
			return true;
	return false;
}

static int fake_add(void *ctx, const struct gw_hands_addr *a)
{
	struct box *b = ctx;

	if (!is_up(b, a->dev))
		return -ENODEV;
	if (b->broken && !strcmp(b->broken, a->dev))
		return -ENOSPC;
	note(b, '+', a);
	return 0;
}

static void fake_del(void *ctx, const struct gw_hands_addr *a)
{
	note(ctx, '-', a);
}

static void fake_announce(void *ctx, const struct gw_hands_addr *a)
{
	note(ctx, '!', a);
}

static const struct gw_hands_ops ops = { fake_add, fake_del, fake_announce };

static const char *take_log(struct box *b)
{
	static char out[1024];

	snprintf(out, sizeof(out), "%s", b->log);
	b->log[0] = 0;
	return out;
}

/* Paths: every link then interface by default, as listed otherwise; a group tracks
 * the paths its addresses are on. */
static void paths_and_groups(void **state)
{
	struct box b;
	(void)state;

	box_start(&b, PAIR);
	assert_int_equal(b.n_paths, 3);
	assert_string_equal(b.paths[0], "ib0");
	assert_string_equal(b.paths[1], "ib1");
	assert_string_equal(b.paths[2], "eth0");
	assert_int_equal(b.n_groups, 3);
	assert_string_equal(b.groups[0].name, "both");
	assert_int_equal(b.groups[0].priority, 120);
	assert_int_equal(b.groups[0].track_paths, 1u << 0 | 1u << 2);
	assert_string_equal(b.groups[1].name, "ib1only");
	assert_int_equal(b.groups[1].priority, 10);
	assert_int_equal(b.groups[1].track_paths, 1u << 1);
	assert_int_equal(b.groups[2].track_paths, 0);
	assert_int_equal(b.n_addrs, 4);
	for (unsigned i = 0; i < b.n_addrs; i++)
		assert_false(b.addrs[i].held);
	assert_int_equal(b.addrs[3].group, 1);
	box_done(&b);

	/* Listed paths: an address on a link that is no path tracks nothing. */
	box_start(&b, "ipoib_links: [{name: ib0, device: d, addresses: [10.0.0.1/24]}]\n"
		      "ethernet_interfaces: [{name: eth0, addresses: [10.1.0.1/24]}]\n"
		      "failover:\n"
		      "  key_file: /etc/ibgw/failover.key\n"
		      "  paths: [eth0]\n"
		      "  peer_addresses: [10.1.0.2]\n"
		      "  groups: [{name: g, addresses: [{address: 10.0.0.9/24, dev: ib0},\n"
		      "                                 {address: 10.1.0.9/24, dev: eth0}]}]\n");
	assert_int_equal(b.n_paths, 1);
	assert_string_equal(b.paths[0], "eth0");
	assert_int_equal(b.groups[0].track_paths, 1u << 0);
	box_done(&b);
}

/* MASTER: the group's addresses on their links (not another group's), each once;
 * those on a link not in the engine yet follow when it is; BACKUP: given up. */
static void claim_announce_give_up(void **state)
{
	struct box b;
	(void)state;

	box_start(&b, PAIR);
	b.up[0] = "ib0";
	b.up[1] = "ib1";
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 0, &ops, &b), 1);
	assert_string_equal(take_log(&b), "+10.10.0.254/24@ib0");
	gw_hands_announce(b.addrs, b.n_addrs, 0, &ops, &b);
	assert_string_equal(take_log(&b), "!10.10.0.254/24@ib0");
	/* Claimed again (a link came up): only what is not held yet. */
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 0, &ops, &b), 0);
	assert_string_equal(take_log(&b), "");
	b.up[2] = "eth0";
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 0, &ops, &b), 2);
	assert_string_equal(take_log(&b), "+10.20.0.254/24@eth0 +fd00:20::fe/64@eth0");
	gw_hands_announce(b.addrs, b.n_addrs, 0, &ops, &b);
	assert_string_equal(take_log(&b),
			    "!10.10.0.254/24@ib0 !10.20.0.254/24@eth0 !fd00:20::fe/64@eth0");
	/* Group ib1only is not MASTER here: its address is not ours to hold. */
	assert_false(b.addrs[3].held);
	/* BACKUP: every held address of the group goes, nothing of the others. */
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 1, &ops, &b), 1);
	take_log(&b);
	assert_int_equal(gw_hands_give_up(b.addrs, b.n_addrs, 0, &ops, &b), 3);
	assert_string_equal(take_log(&b),
			    "-10.10.0.254/24@ib0 -10.20.0.254/24@eth0 -fd00:20::fe/64@eth0");
	assert_true(b.addrs[3].held);
	assert_int_equal(gw_hands_give_up(b.addrs, b.n_addrs, 0, &ops, &b), 0);
	gw_hands_announce(b.addrs, b.n_addrs, 0, &ops, &b); /* nothing held: nothing said */
	assert_string_equal(take_log(&b), "");
	/* A group without addresses claims nothing. */
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 2, &ops, &b), 0);
	box_done(&b);
}

/* An address the engine refuses is not held (tried again at the next claim); a link
 * taken out by a reload takes its addresses with it (claimed again when it is back). */
static void refused_and_link_gone(void **state)
{
	struct box b;
	(void)state;

	box_start(&b, PAIR);
	b.up[0] = "ib0";
	b.up[1] = "eth0";
	b.broken = "eth0";
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 0, &ops, &b), 1);
	assert_false(b.addrs[1].held);
	b.broken = NULL;
	assert_int_equal(gw_hands_claim(b.addrs, b.n_addrs, 0, &ops, &b), 2);
	take_log(&b);
	gw_hands_link_gone(b.addrs, b.n_addrs, "eth0");
	assert_true(b.addrs[0].held);
	assert_false(b.addrs[1].held);
	assert_false(b.addrs[2].held);
	assert_int_equal(gw_hands_give_up(b.addrs, b.n_addrs, 0, &ops, &b), 1);
	assert_string_equal(take_log(&b), "-10.10.0.254/24@ib0");
	box_done(&b);
}

static struct ip_addr addr(const char *s)
{
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(s, &a), 0);
	return a;
}

/* Service addresses, held here or not, in any group; the box's own and others' are
 * not service addresses. */
static void service_addresses(void **state)
{
	struct box b;
	struct ip_addr a;
	(void)state;

	box_start(&b, PAIR);
	a = addr("10.10.0.254");
	assert_true(gw_hands_is_service(b.addrs, b.n_addrs, &a));
	a = addr("fd00:20::fe");
	assert_true(gw_hands_is_service(b.addrs, b.n_addrs, &a));
	a = addr("10.11.0.254");
	assert_true(gw_hands_is_service(b.addrs, b.n_addrs, &a));
	a = addr("10.10.0.1"); /* ib0's own: is_ours in dp_ha.c checks the links */
	assert_false(gw_hands_is_service(b.addrs, b.n_addrs, &a));
	a = addr("10.10.0.253");
	assert_false(gw_hands_is_service(b.addrs, b.n_addrs, &a));
	box_done(&b);
}

static int asked;

static bool known_yes(void *ctx)
{
	(void)ctx;
	asked++;
	return true;
}

static bool known_no(void *ctx)
{
	(void)ctx;
	asked++;
	return false;
}

/* Where the peer's sync may put hosts: a link's subnets, its connected routes, and the
 * other links' proxy prefixes (on the link whose subnet holds them, else on every other
 * link). */
#define SCOPED                                                                                     \
	"ipoib_links:\n"                                                                           \
	"  - {name: ib0, device: d, addresses: [10.10.0.1/24, \"fd00:10::1/64\"],\n"               \
	"     proxy_arp: true, proxy_prefixes: [10.10.0.128/25, 10.20.0.64/26]}\n"                 \
	"ethernet_interfaces:\n"                                                                   \
	"  - {name: eth0, addresses: [10.20.0.1/24], proxy_arp: true,\n"                           \
	"     proxy_prefixes: [10.10.0.0/25]}\n"                                                   \
	"  - {name: eth1, addresses: [10.30.0.1/24]}\n"                                            \
	"routes:\n"                                                                                \
	"  - {prefix: 10.50.0.0/24, dev: eth0}\n"                                                  \
	"  - {prefix: 10.60.0.0/16, via: 10.20.0.254}\n"                                           \
	"failover: {key_file: /etc/ibgw/failover.key}\n"

static bool inside(const struct gw_hands_scope *sc, unsigned n, const char *link, const char *a)
{
	struct ip_addr x = addr(a);

	return gw_hands_in_scope(sc, n, link, &x);
}

static void scopes(void **state)
{
	struct gw_config *cfg = load(SCOPED);
	unsigned n = gw_hands_scopes(cfg, NULL, 0);
	struct gw_hands_scope sc[16];
	(void)state;

	/* 4 subnets, 1 connected route, 10.10.0.128/25 on every link but ib0 (no other
	 * subnet holds it), 10.20.0.64/26 on eth0 only (its subnet), 10.10.0.0/25 on ib0 */
	assert_int_equal(n, 4 + 1 + 2 + 1 + 1);
	assert_int_equal(gw_hands_scopes(cfg, sc, 3), n); /* fills 3, says how many */
	assert_int_equal(gw_hands_scopes(cfg, sc, 16), n);
	assert_true(inside(sc, n, "ib0", "10.10.0.7"));
	assert_true(inside(sc, n, "ib0", "fd00:10::7"));
	assert_false(inside(sc, n, "eth0", "10.10.0.7")); /* ib0's subnet, not proxied there */
	assert_true(inside(sc, n, "eth0", "10.20.0.7"));
	assert_true(inside(sc, n, "eth0", "10.50.0.9"));   /* connected route dev eth0 */
	assert_false(inside(sc, n, "eth0", "10.60.0.9"));  /* a route through a next hop */
	assert_true(inside(sc, n, "eth0", "10.10.0.130")); /* ib0 proxies it: lives there */
	assert_true(inside(sc, n, "eth1", "10.10.0.130"));
	assert_true(inside(sc, n, "ib0", "10.10.0.130")); /* its subnet all the same */
	assert_true(inside(sc, n, "eth0", "10.20.0.70"));
	assert_false(inside(sc, n, "eth1", "10.20.0.70")); /* home: eth0's subnet */
	assert_false(inside(sc, n, "eth1", "10.20.0.7"));
	assert_false(inside(sc, n, "eth0", "192.168.1.1"));
	assert_false(inside(sc, n, "ib9", "10.10.0.7"));
	gw_config_free(cfg);
}

/* A neighbour of the peer's sync: taken inside its link's scopes (else refused), where
 * this box does not know better, with a hardware address of the link's kind; never this
 * box's own addresses. */
static void sync_neighbours(void **state)
{
	struct gw_config *cfg = load(SCOPED);
	struct gw_hands_scope sc[16];
	unsigned n = gw_hands_scopes(cfg, sc, 16);
	struct ha_sync_neigh ib = { .addr = addr("10.10.0.7"), .link = "ib0", .lladdr_len = 20 };
	struct ha_sync_neigh eth = { .addr = addr("10.20.0.7"), .link = "eth0", .lladdr_len = 6 };
	struct ha_sync_neigh far = { .addr = addr("192.168.1.7"), .link = "eth0", .lladdr_len = 6 };
	struct ha_sync_neigh cross = { .addr = addr("10.10.0.8"), .link = "eth0", .lladdr_len = 6 };
	struct ha_sync_neigh ll6 = { .addr = addr("fe80::1b:ff:fe00:8"),
				     .link = "eth0",
				     .lladdr_len = 6 };
	struct ha_sync_neigh ll6ib = { .addr = addr("fe80::202:c903:a1:b"),
				       .link = "ib0",
				       .lladdr_len = 20 };
	struct ha_sync_neigh far6 = { .addr = addr("fd99::7"), .link = "eth0", .lladdr_len = 6 };
	(void)state;

	asked = 0;
	assert_int_equal(
	    gw_hands_sync_neigh(&ib, GW_HANDS_LINK_IPOIB, false, sc, n, known_no, NULL),
	    GW_HANDS_NEIGH_IPOIB);
	assert_int_equal(gw_hands_sync_neigh(&ib, GW_HANDS_LINK_IPOIB, true, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_SKIP);
	assert_int_equal(
	    gw_hands_sync_neigh(&eth, GW_HANDS_LINK_IPOIB, false, sc, n, known_no, NULL),
	    GW_HANDS_NEIGH_SKIP);
	assert_int_equal(gw_hands_sync_neigh(&ib, GW_HANDS_LINK_NONE, false, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_SKIP);
	assert_int_equal(
	    gw_hands_sync_neigh(&ib, GW_HANDS_LINK_OTHER, false, sc, n, known_no, NULL),
	    GW_HANDS_NEIGH_SKIP);
	assert_int_equal(gw_hands_sync_neigh(&ib, GW_HANDS_LINK_ETH, false, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_SKIP);
	assert_int_equal(asked, 0); /* the table is asked only for an Ethernet record */
	assert_int_equal(gw_hands_sync_neigh(&eth, GW_HANDS_LINK_ETH, false, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_ETH);
	assert_int_equal(
	    gw_hands_sync_neigh(&eth, GW_HANDS_LINK_ETH, false, sc, n, known_yes, NULL),
	    GW_HANDS_NEIGH_SKIP);
	assert_int_equal(asked, 2);
	assert_int_equal(gw_hands_sync_neigh(&eth, GW_HANDS_LINK_ETH, true, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_SKIP);
	/* Outside what the config puts on the link: refused, the table not asked. */
	assert_int_equal(gw_hands_sync_neigh(&far, GW_HANDS_LINK_ETH, false, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_REFUSED);
	assert_int_equal(
	    gw_hands_sync_neigh(&cross, GW_HANDS_LINK_ETH, false, sc, n, known_no, NULL),
	    GW_HANDS_NEIGH_REFUSED);
	assert_int_equal(
	    gw_hands_sync_neigh(&far, GW_HANDS_LINK_ETH, false, NULL, 0, known_no, NULL),
	    GW_HANDS_NEIGH_REFUSED);
	assert_int_equal(asked, 2);
	/* An IPv6 link-local neighbour is on every link (a router's next hop, an IB host's
	 * first address): taken on the link the record names, never a global one outside. */
	assert_int_equal(gw_hands_sync_neigh(&ll6, GW_HANDS_LINK_ETH, false, sc, n, known_no, NULL),
			 GW_HANDS_NEIGH_ETH);
	assert_int_equal(
	    gw_hands_sync_neigh(&ll6ib, GW_HANDS_LINK_IPOIB, false, sc, n, known_no, NULL),
	    GW_HANDS_NEIGH_IPOIB);
	assert_int_equal(
	    gw_hands_sync_neigh(&far6, GW_HANDS_LINK_ETH, false, sc, n, known_no, NULL),
	    GW_HANDS_NEIGH_REFUSED);
	gw_config_free(cfg);
}

static uint32_t where_eth0(void *ctx, const char **link)
{
	(void)ctx;
	asked++;
	*link = "eth0";
	return 3;
}

static uint32_t where_none(void *ctx, const char **link)
{
	(void)ctx;
	asked++;
	*link = NULL;
	return 0;
}

/* A learned route: a host route, connected where its neighbour is known, inside that
 * link's scopes; next hops, shorter prefixes and foreign addresses are refused. */
static void sync_routes(void **state)
{
	struct gw_config *cfg = load(SCOPED);
	struct gw_hands_scope sc[16];
	unsigned n = gw_hands_scopes(cfg, sc, 16);
	struct ha_sync_route gw = { .metric = 5, .n_nexthops = 2 };
	struct ha_sync_route host = { .metric = 0 }, host6 = { .metric = 0 };
	struct ha_sync_route net = { .metric = 0 }, far = { .metric = 0 };
	struct rt_route rt;
	(void)state;

	assert_int_equal(ip_prefix_parse("10.20.0.99/32", false, &gw.prefix), 0);
	gw.nexthops[0] = addr("10.20.0.1");
	gw.nexthops[1] = addr("10.20.0.2");
	assert_int_equal(ip_prefix_parse("10.20.0.7/32", false, &host.prefix), 0);
	assert_int_equal(ip_prefix_parse("fd00:10::7/128", false, &host6.prefix), 0);
	assert_int_equal(ip_prefix_parse("10.20.0.0/24", false, &net.prefix), 0);
	assert_int_equal(ip_prefix_parse("0.0.0.0/32", false, &far.prefix), 0);

	asked = 0;
	assert_int_equal(gw_hands_sync_route(&gw, sc, n, where_eth0, NULL, &rt),
			 GW_HANDS_ROUTE_REFUSED);
	assert_int_equal(gw_hands_sync_route(&net, sc, n, where_eth0, NULL, &rt),
			 GW_HANDS_ROUTE_REFUSED);
	assert_int_equal(asked, 0); /* refused before any table is asked */
	assert_int_equal(gw_hands_sync_route(&host, sc, n, where_eth0, NULL, &rt),
			 GW_HANDS_ROUTE_TAKE);
	assert_int_equal(rt.source, RT_SRC_LEARNED);
	assert_int_equal(rt.nnh, 1);
	assert_int_equal(rt.nh[0].type, RT_NH_CONNECTED);
	assert_int_equal(rt.nh[0].ifindex, 3);
	assert_int_equal(rt.prefix.len, 32);
	assert_int_equal(gw_hands_sync_route(&host, sc, n, where_none, NULL, &rt),
			 GW_HANDS_ROUTE_SKIP);
	/* known on eth0, but ib0's subnet: not eth0's to hold */
	assert_int_equal(gw_hands_sync_route(&host6, sc, n, where_eth0, NULL, &rt),
			 GW_HANDS_ROUTE_REFUSED);
	assert_int_equal(gw_hands_sync_route(&far, sc, n, where_eth0, NULL, &rt),
			 GW_HANDS_ROUTE_REFUSED);
	gw_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(paths_and_groups),
		cmocka_unit_test(claim_announce_give_up),
		cmocka_unit_test(refused_and_link_gone),
		cmocka_unit_test(service_addresses),
		cmocka_unit_test(scopes),
		cmocka_unit_test(sync_neighbours),
		cmocka_unit_test(sync_routes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
