/*
 * Unit tests for a live reload's decisions (gateway/reconf.c), the functions
 * gw_dp_reconfigure runs: given the links as they run (built here from a first config,
 * as gateway/dataplane.c's ipoib_add and eth_add record them) and a second config, what
 * becomes of each link and interface (kept, updated with which changes, rebuilt and why,
 * removed), which are added, when an IB port's GID route table is rebuilt, and when an
 * IB port is reopened for bigger buffers or more queues. No ports, no root.
 */
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
#include "gateway/reconf.h"
#include "test/unit/config_load.h"

#define MAX_RUN 16

/* The running links of a gateway started on cfg (the fields ipoib_add and eth_add set),
 * IPoIB links first; proxy6 holds their IPv6 proxy prefixes. */
struct running {
	struct gw_reconf_link run[MAX_RUN];
	struct ip_prefix proxy6[MAX_RUN][GW_RECONF_MAX_PROXY];
	unsigned n;
};

static void start(struct running *r, const struct gw_config *cfg)
{
	memset(r, 0, sizeof(*r));
	for (unsigned i = 0; i < cfg->n_ipoib_links; i++) {
		const struct gw_ipoib_link_config *c = &cfg->ipoib_links[i];
		struct gw_reconf_link *k = &r->run[r->n];

		k->kind = GW_RECONF_IPOIB;
		snprintf(k->name, sizeof(k->name), "%s", c->name);
		snprintf(k->tenant, sizeof(k->tenant), "%s", c->tenant);
		snprintf(k->backend, sizeof(k->backend), "%s", gw_ipoib_backend_name(c->backend));
		snprintf(k->device, sizeof(k->device), "%s", c->device);
		k->port = c->port;
		k->pkey = c->pkey;
		k->mode = c->mode;
		k->mcast_hop_limit = c->mcast_hop_limit;
		k->mtu = c->mtu;
		k->addrs = c->addresses;
		k->n_addrs = c->n_addresses;
		k->proxy_nd = c->proxy.nd;
		k->proxy6 = r->proxy6[r->n];
		for (unsigned j = 0; j < c->proxy.n_prefixes; j++)
			if (c->proxy.prefixes[j].addr.family == AF_INET6)
				r->proxy6[r->n][k->n_proxy6++] = c->proxy.prefixes[j];
		r->n++;
	}
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++) {
		const struct gw_eth_if_config *c = &cfg->eth_ifs[i];
		struct gw_reconf_link *k = &r->run[r->n++];

		k->kind = GW_RECONF_ETH;
		snprintf(k->name, sizeof(k->name), "%s", c->name);
		snprintf(k->tenant, sizeof(k->tenant), "%s", c->tenant);
		snprintf(k->backend, sizeof(k->backend), "%s", gw_eth_backend_name(c->backend));
		snprintf(k->device, sizeof(k->device), "%s", c->device);
		k->vlan = c->vlan;
		k->mtu = c->mtu;
		k->addrs = c->addresses;
		k->n_addrs = c->n_addresses;
	}
}

/* The reload from the running links of `from` to config `to`: one verdict per running
 * link, and the names to add ("ib1 eth1", in the order gw_dp_reconfigure adds them). */
struct reload {
	struct gw_config *from, *to;
	struct running r;
	struct gw_reconf_verdict v[MAX_RUN];
	char adds[256];
};

static void reload(struct reload *x, const char *from, const char *to)
{
	size_t len = 0;

	x->from = load(from);
	x->to = load(to);
	start(&x->r, x->from);
	gw_reconf_plan(x->r.run, x->r.n, x->to, x->v);
	x->adds[0] = 0;
	for (unsigned i = 0; i < x->to->n_ipoib_links; i++)
		if (gw_reconf_to_add(x->r.run, x->v, x->r.n, x->to->ipoib_links[i].name))
			len += (size_t)snprintf(x->adds + len, sizeof(x->adds) - len, "%s%s",
						len ? " " : "", x->to->ipoib_links[i].name);
	for (unsigned i = 0; i < x->to->n_eth_ifs; i++)
		if (gw_reconf_to_add(x->r.run, x->v, x->r.n, x->to->eth_ifs[i].name))
			len += (size_t)snprintf(x->adds + len, sizeof(x->adds) - len, "%s%s",
						len ? " " : "", x->to->eth_ifs[i].name);
}

static void done(struct reload *x)
{
	gw_config_free(x->from);
	gw_config_free(x->to);
}

static const struct gw_reconf_verdict *verdict(const struct reload *x, const char *name)
{
	for (unsigned i = 0; i < x->r.n; i++)
		if (!strcmp(x->r.run[i].name, name))
			return &x->v[i];
	fail_msg("no running link %s", name);
	return NULL;
}

static void assert_verdict(const struct reload *x, const char *name, enum gw_reconf_action a,
			   unsigned changes, const char *reason)
{
	const struct gw_reconf_verdict *v = verdict(x, name);

	assert_int_equal(v->action, a);
	assert_int_equal(v->changes, changes);
	assert_string_equal(v->reason, reason);
}

#define BASE                                                                                       \
	"ipoib_links:\n"                                                                           \
	"  - {name: ib0, backend: verbs, device: gw1, port: 1, backup_port: 2, pkey: 0x8001,\n"    \
	"     mtu: 2044, addresses: [10.0.0.1/24, \"fd00::1/64\"]}\n"                              \
	"  - {name: ib1, backend: verbs, device: gw1, port: 2, addresses: [10.1.0.1/24]}\n"        \
	"ethernet_interfaces:\n"                                                                   \
	"  - {name: eth0, device: veth0, mtu: 1500, addresses: [10.2.0.1/24]}\n"

static void nothing_changed(void **state)
{
	struct reload x;
	(void)state;

	reload(&x, BASE, BASE);
	assert_verdict(&x, "ib0", GW_RECONF_KEEP, 0, "");
	assert_verdict(&x, "ib1", GW_RECONF_KEEP, 0, "");
	assert_verdict(&x, "eth0", GW_RECONF_KEEP, 0, "");
	assert_string_equal(x.adds, "");
	done(&x);
}

static void mtu_change_updates(void **state)
{
	struct reload x;
	(void)state;

	reload(
	    &x, BASE,
	    "ipoib_links:\n"
	    "  - {name: ib0, backend: verbs, device: gw1, port: 1, backup_port: 2, pkey: 0x8001,\n"
	    "     mtu: 1500, addresses: [10.0.0.1/24, \"fd00::1/64\"]}\n"
	    "  - {name: ib1, backend: verbs, device: gw1, port: 2, addresses: [10.1.0.1/24]}\n"
	    "ethernet_interfaces:\n"
	    "  - {name: eth0, device: veth0, mtu: 9000, addresses: [10.2.0.1/24]}\n");
	assert_verdict(&x, "ib0", GW_RECONF_UPDATE, GW_RECONF_MTU, "");
	assert_verdict(&x, "ib1", GW_RECONF_KEEP, 0, "");
	assert_verdict(&x, "eth0", GW_RECONF_UPDATE, GW_RECONF_MTU, "");
	assert_string_equal(x.adds, "");
	done(&x);
}

/* Addresses added, removed or reordered; proxy-ND settings: in place. */
static void addresses_and_proxy_update(void **state)
{
	struct reload x;
	(void)state;

	reload(
	    &x, BASE,
	    "ipoib_links:\n"
	    "  - {name: ib0, backend: verbs, device: gw1, port: 1, backup_port: 2, pkey: 0x8001,\n"
	    "     mtu: 2044, addresses: [\"fd00::1/64\", 10.0.0.1/24]}\n"
	    "  - {name: ib1, backend: verbs, device: gw1, port: 2, addresses: [10.1.0.1/24],\n"
	    "     proxy_nd: true, proxy_prefixes: [\"fd00:9::/64\"]}\n"
	    "ethernet_interfaces:\n"
	    "  - {name: eth0, device: veth0, mtu: 1500, addresses: [10.2.0.1/24, 10.3.0.1/24]}\n");
	assert_verdict(&x, "ib0", GW_RECONF_UPDATE, GW_RECONF_ADDRS, "");
	assert_verdict(&x, "ib1", GW_RECONF_UPDATE, GW_RECONF_PROXY, "");
	assert_verdict(&x, "eth0", GW_RECONF_UPDATE, GW_RECONF_ADDRS, "");
	assert_string_equal(x.adds, "");
	done(&x);

	/* Only IPv6 proxy prefixes count for IPoIB (an IPv4 one is proxy ARP's, not ND's). */
	reload(
	    &x, "ipoib_links: [{name: ib0, device: d, proxy_prefixes: [\"fd00:9::/64\"]}]\n",
	    "ipoib_links: [{name: ib0, device: d, proxy_prefixes: [\"fd00:9::/64\", 10.9.0.0/16]}]\n");
	assert_verdict(&x, "ib0", GW_RECONF_KEEP, 0, "");
	done(&x);
	reload(&x, "ipoib_links: [{name: ib0, device: d, proxy_prefixes: [\"fd00:9::/64\"]}]\n",
	       "ipoib_links: [{name: ib0, device: d, proxy_prefixes: [\"fd00:8::/64\"]}]\n");
	assert_verdict(&x, "ib0", GW_RECONF_UPDATE, GW_RECONF_PROXY, "");
	done(&x);
}

/* What an IPoIB link is built on: port, P_Key, mode, device, multicast hop limit, tenant. It is taken down
 * with the reason and added again from the new config. */
static void ipoib_rebuilds(void **state)
{
	static const struct {
		const char *ib0, *reason;
	} cases[] = {
		{ "{name: ib0, backend: verbs, device: gw1, port: 2, mtu: 2044}",
		  "moved to another port" },
		{ "{name: ib0, backend: verbs, device: gw2, port: 1, mtu: 2044}",
		  "moved to another port" },
		{ "{name: ib0, backend: verbs, device: gw1, port: 1, pkey: 0x8002, mtu: 2044}",
		  "P_Key changed" },
		{ "{name: ib0, backend: verbs, device: gw1, port: 1, mode: connected, mtu: 2044}",
		  "mode changed" },
		/* The groups' AHs carry it: built again with the new one. */
		{ "{name: ib0, backend: verbs, device: gw1, port: 1, mtu: 2044, mcast_hop_limit: 2}",
		  "multicast hop limit changed" },
		/* The first difference found names the reason; the rest follows the rebuild. */
		{ "{name: ib0, backend: verbs, device: gw1, port: 2, pkey: 0x8002, mtu: 1500}",
		  "moved to another port" },
		/* Its interface takes the tenant's table when it is made. */
		{ "{name: ib0, tenant: blue, backend: verbs, device: gw1, port: 1, mtu: 2044}",
		  "moved to another tenant" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char to[512];
		struct reload x;

		snprintf(to, sizeof(to),
			 "tenants: [{name: blue}]\n"
			 "ipoib_links:\n  - %s\n  - {name: ib1, backend: verbs, device: gw1}\n",
			 cases[i].ib0);
		reload(
		    &x,
		    "ipoib_links:\n  - {name: ib0, backend: verbs, device: gw1, port: 1, mtu: 2044}\n"
		    "  - {name: ib1, backend: verbs, device: gw1}\n",
		    to);
		assert_verdict(&x, "ib0", GW_RECONF_REBUILD, 0, cases[i].reason);
		assert_verdict(&x, "ib1", GW_RECONF_KEEP, 0, "");
		assert_string_equal(x.adds, "ib0");
		done(&x);
	}
}

/* An Ethernet interface is built on its device, backend, VLAN and tenant. */
static void eth_rebuilds(void **state)
{
	static const char *const to[] = {
		"ethernet_interfaces: [{name: eth0, device: veth1}]\n",
		"ethernet_interfaces: [{name: eth0, device: veth0, vlan: 7}]\n",
		("tenants: [{name: blue}]\n"
		 "ethernet_interfaces: [{name: eth0, device: veth0, tenant: blue}]\n"),
		/* No backend change: af_packet is the only one the loader accepts. */
	};
	(void)state;

	for (size_t i = 0; i < sizeof(to) / sizeof(to[0]); i++) {
		struct reload x;

		reload(&x, "ethernet_interfaces: [{name: eth0, device: veth0}]\n", to[i]);
		assert_verdict(&x, "eth0", GW_RECONF_REBUILD, 0,
			       strstr(to[i], "tenant") ? "moved to another tenant"
						       : "moved to another device or VLAN");
		assert_string_equal(x.adds, "eth0");
		done(&x);
	}
}

static void removed_and_added(void **state)
{
	struct reload x;
	(void)state;

	reload(
	    &x, BASE,
	    "ipoib_links:\n"
	    "  - {name: ib0, backend: verbs, device: gw1, port: 1, backup_port: 2, pkey: 0x8001,\n"
	    "     mtu: 2044, addresses: [10.0.0.1/24, \"fd00::1/64\"]}\n"
	    "  - {name: ib2, backend: verbs, device: gw1, port: 2, addresses: [10.4.0.1/24]}\n"
	    "ethernet_interfaces:\n"
	    "  - {name: eth1, device: veth1, addresses: [10.5.0.1/24]}\n");
	assert_verdict(&x, "ib0", GW_RECONF_KEEP, 0, "");
	assert_verdict(&x, "ib1", GW_RECONF_REMOVE, 0, "removed from the config");
	assert_verdict(&x, "eth0", GW_RECONF_REMOVE, 0, "removed from the config");
	assert_string_equal(x.adds, "ib2 eth1");
	done(&x);

	/* A name that moves from an IPoIB link to an Ethernet interface: out, then in. */
	reload(&x, "ipoib_links: [{name: x0, device: d}]\n",
	       "ethernet_interfaces: [{name: x0, device: veth0}]\n");
	assert_verdict(&x, "x0", GW_RECONF_REMOVE, 0, "removed from the config");
	assert_string_equal(x.adds, "x0");
	done(&x);

	/* From nothing: everything added, IPoIB links first. */
	reload(&x, "gateway: {name: g}\n", BASE);
	assert_int_equal(x.r.n, 0);
	assert_string_equal(x.adds, "ib0 ib1 eth0");
	done(&x);
}

/* A free slot (a link removed by an earlier reload) is left alone and matches no name. */
static void free_slot(void **state)
{
	struct reload x;
	struct gw_reconf_verdict v;
	(void)state;

	reload(&x, BASE, BASE);
	x.r.run[1].kind = GW_RECONF_FREE;
	gw_reconf_link(&x.r.run[1], x.to, &v);
	assert_int_equal(v.action, GW_RECONF_KEEP);
	assert_int_equal(v.changes, 0);
	x.v[1] = v;
	assert_true(gw_reconf_to_add(x.r.run, x.v, x.r.n, "ib1"));
	assert_false(gw_reconf_to_add(x.r.run, x.v, x.r.n, "ib0"));
	done(&x);
}

#define GID_LINKS                                                                                  \
	"ipoib_links:\n"                                                                           \
	"  - {name: ib0, backend: verbs, device: gw1, port: 1, backup_port: 2}\n"                  \
	"  - {name: ib1, backend: verbs, device: gw1, port: 2}\n"
#define GID_ROUTES(lid)                                                                            \
	"gid_routes:\n"                                                                            \
	"  - {prefix: \"fec0:0:0:2::/64\", source: local, routers: [{lid: " lid "}]}\n"            \
	"  - {prefix: \"fec0:0:0:3::/64\", source: local, link: ib1, routers: [{lid: 9}]}\n"       \
	"  - {prefix: \"fec0:0:0:4::/64\", source: sa}\n"

/* A port's local GID routes: their link's port (the first link's by default), never
 * source sa; the signature changes with the routes, and with a link moved to its backup
 * port (its routes go to that port's table). */
static void gid_routes(void **state)
{
	struct gw_config *a = load(GID_LINKS GID_ROUTES("3"));
	struct gw_config *b = load(GID_LINKS GID_ROUTES("3"));
	struct gw_config *c = load(GID_LINKS GID_ROUTES("4"));
	struct gw_config *moved =
	    load("ipoib_links:\n"
		 "  - {name: ib0, backend: verbs, device: gw1, port: 2, backup_port: 1}\n"
		 "  - {name: ib1, backend: verbs, device: gw1, port: 2}\n" GID_ROUTES("3"));
	struct gw_config *none = load(GID_LINKS);
	(void)state;

	assert_true(gw_reconf_gid_route_on(a, &a->gid_routes[0], "verbs", "gw1", 1));
	assert_false(gw_reconf_gid_route_on(a, &a->gid_routes[0], "verbs", "gw1", 2));
	assert_false(gw_reconf_gid_route_on(a, &a->gid_routes[0], "verbs", "gw2", 1));
	assert_true(gw_reconf_gid_route_on(a, &a->gid_routes[1], "verbs", "gw1", 2));
	assert_false(gw_reconf_gid_route_on(a, &a->gid_routes[1], "verbs", "gw1", 1));
	assert_false(gw_reconf_gid_route_on(a, &a->gid_routes[2], "verbs", "gw1", 1));

	/* Equal configs, equal signatures; a router changed on port 1 only. */
	assert_int_equal(gw_reconf_gid_sig(a, "verbs", "gw1", 1),
			 gw_reconf_gid_sig(b, "verbs", "gw1", 1));
	assert_int_not_equal(gw_reconf_gid_sig(a, "verbs", "gw1", 1),
			     gw_reconf_gid_sig(c, "verbs", "gw1", 1));
	assert_int_equal(gw_reconf_gid_sig(a, "verbs", "gw1", 2),
			 gw_reconf_gid_sig(c, "verbs", "gw1", 2));
	/* ib0 on port 2: port 1 has no routes left (the empty signature), port 2 both. */
	assert_int_equal(gw_reconf_gid_sig(moved, "verbs", "gw1", 1),
			 gw_reconf_gid_sig(none, "verbs", "gw1", 1));
	assert_int_not_equal(gw_reconf_gid_sig(moved, "verbs", "gw1", 2),
			     gw_reconf_gid_sig(a, "verbs", "gw1", 2));
	assert_true(gw_reconf_gid_route_on(moved, &moved->gid_routes[0], "verbs", "gw1", 2));
	gw_config_free(a);
	gw_config_free(b);
	gw_config_free(c);
	gw_config_free(moved);
	gw_config_free(none);
}

/* An IB port's sizing: what a config asks of it, and when a reload must reopen it. */
#define SIZE_LINKS(workers, mode0, mode1)                                                          \
	"gateway: {workers: " workers "}\n"                                                        \
	"ipoib_links:\n"                                                                           \
	"  - {name: ib0, backend: verbs, device: gw1, port: 1, mode: " mode0 "}\n"                 \
	"  - {name: ib1, backend: verbs, device: gw1, port: 1, pkey: 0x8001, mode: " mode1 "}\n"   \
	"  - {name: ib2, backend: verbs, device: gw1, port: 2}\n"

static void port_sizing(void **state)
{
	struct gw_config *dg = load(SIZE_LINKS("1", "datagram", "datagram"));
	struct gw_config *cm1 = load(SIZE_LINKS("1", "connected", "datagram"));
	struct gw_config *cm2 = load(SIZE_LINKS("1", "connected", "connected"));
	struct gw_config *dg2 = load(SIZE_LINKS("2", "datagram", "datagram"));
	struct gw_reconf_port_size have, want;
	char why[64];
	(void)state;

	/* What each config asks: connected links counted per port, a queue per worker, and
	 * nothing of a port no link is on. */
	have = gw_reconf_port_want(dg, "verbs", "gw1", 1);
	assert_int_equal(have.connected, 0);
	assert_int_equal(have.queues, 1);
	assert_int_equal(have.datagram, 2); /* datagram links counted: the pool grows */
	want = gw_reconf_port_want(cm2, "verbs", "gw1", 1);
	assert_int_equal(want.connected, 2);
	want = gw_reconf_port_want(cm2, "verbs", "gw1", 2);
	assert_int_equal(want.connected, 0);
	assert_int_equal(want.queues, 1);
	assert_int_equal(want.datagram, 1);
	want = gw_reconf_port_want(cm2, "verbs", "gw1", 3);
	assert_int_equal(want.queues, 0);
	assert_int_equal(gw_reconf_port_want(dg2, "verbs", "gw1", 1).queues, 2);

	/* Datagram -> connected: reopened for the big buffers. */
	want = gw_reconf_port_want(cm1, "verbs", "gw1", 1);
	assert_true(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));
	assert_string_equal(why, "connected-mode buffers");
	/* A second connected link: buffers for both. */
	have = want;
	want = gw_reconf_port_want(cm2, "verbs", "gw1", 1);
	assert_true(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));
	assert_string_equal(why, "buffers for 2 connected links");
	/* Back to datagram, or to one connected link: the bigger buffers are kept. */
	have = want;
	want = gw_reconf_port_want(dg, "verbs", "gw1", 1);
	assert_false(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));
	assert_string_equal(why, "");
	want = gw_reconf_port_want(cm1, "verbs", "gw1", 1);
	assert_false(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));

	/* Nor do more datagram links: they post what the pool has left. */
	have = (struct gw_reconf_port_size){ 0, 1, 2 };
	want = (struct gw_reconf_port_size){ 0, 1, 5 };
	assert_false(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));

	/* More workers alone never reopen a port (the workers' handover is lossless); a
	 * port reopened for buffers gets their queues too, said with it, unless its device
	 * gave fewer queues than it asked. */
	have = gw_reconf_port_want(dg, "verbs", "gw1", 1);
	want = gw_reconf_port_want(dg2, "verbs", "gw1", 1);
	assert_false(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));
	assert_string_equal(why, "");
	want = (struct gw_reconf_port_size){ 1, 2, 0 };
	assert_true(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));
	assert_string_equal(why, "connected-mode buffers and 2 queues");
	have = (struct gw_reconf_port_size){ 0, 2, 0 };
	want = (struct gw_reconf_port_size){ 1, 4, 0 };
	assert_true(gw_reconf_port_reopen(&have, 1, &want, why, sizeof(why)));
	assert_string_equal(why, "connected-mode buffers");
	gw_config_free(dg);
	gw_config_free(cm1);
	gw_config_free(cm2);
	gw_config_free(dg2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nothing_changed),
		cmocka_unit_test(mtu_change_updates),
		cmocka_unit_test(addresses_and_proxy_update),
		cmocka_unit_test(ipoib_rebuilds),
		cmocka_unit_test(eth_rebuilds),
		cmocka_unit_test(removed_and_added),
		cmocka_unit_test(free_slot),
		cmocka_unit_test(gid_routes),
		cmocka_unit_test(port_sizing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
