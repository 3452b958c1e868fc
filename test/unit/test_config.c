/*
 * Unit tests for the configuration loader (gateway/config.c): every kind of error with
 * its exact message and position, the defaults, the normalised printer (print, load
 * again, get an equal config), the JSON form, limits, the punt limits' defaults against
 * the engine's, and that docs/config.md carries the key reference generated from the
 * schema tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "engine/engine.h"
#include "gateway/config.h"
#include "lib/log.h"

/* Load text; return all errors joined by newlines ("" when it loads), caller frees. */
static char *errors_of(const char *text, struct gw_config **out)
{
	struct gw_config_errors errs;
	struct gw_config *cfg = NULL;
	char *joined = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&joined, &len);
	int rc = gw_config_load_buffer("t.yaml", text, strlen(text), &cfg, &errs);

	assert_non_null(f);
	for (unsigned i = 0; i < errs.n; i++)
		fprintf(f, "%s%s", i ? "\n" : "", errs.msgs[i]);
	fclose(f);
	if (rc == 0) {
		assert_int_equal(errs.n, 0);
		assert_non_null(cfg);
	} else {
		assert_true(errs.n > 0);
		assert_null(cfg);
	}
	gw_config_errors_free(&errs);
	if (out)
		*out = cfg;
	else
		gw_config_free(cfg);
	return joined;
}

static struct gw_config *load_ok(const char *text)
{
	struct gw_config *cfg;
	char *e = errors_of(text, &cfg);

	if (*e)
		fail_msg("unexpected errors:\n%s", e);
	free(e);
	return cfg;
}

struct err_case {
	const char *what, *yaml, *errors;
};

static const struct err_case err_cases[] = {
	{ "unknown key with a suggestion", "gateway:\n  name: gw1\n  workrs: 2\n",
	  "t.yaml:3:3: unknown key 'workrs' in gateway (did you mean 'workers'?)" },
	{ "unknown key at the top, none close", "gatway: {}\nzzz: 1\n",
	  "t.yaml:1:1: unknown key 'gatway' at the top level (did you mean 'gateway'?)\n"
	  "t.yaml:2:1: unknown key 'zzz' at the top level" },
	{ "unknown key in a list item", "ipoib_links:\n  - {name: ib0, device: d, pkye: 1}\n",
	  "t.yaml:2:28: unknown key 'pkye' in ipoib_links[0] (did you mean 'pkey'?)" },
	{ "scalar where a mapping goes", "control: /run/x.sock\n",
	  "t.yaml:1:10: control: expected a mapping of keys, got '/run/x.sock'" },
	{ "mapping where a list goes", "routes:\n  prefix: 10.0.0.0/8\n",
	  "t.yaml:2:3: routes: expected a list ('- ' items), got a mapping" },
	{ "list where a scalar goes", "gateway: {name: [a]}\n",
	  "t.yaml:1:17: gateway.name: expected a string, got a list" },
	{ "not an integer", "gateway: {workers: two}\n",
	  "t.yaml:1:20: gateway.workers: expected an integer (decimal or 0x hex), got 'two'" },
	{ "quoted integer", "gateway: {workers: \"2\"}\n",
	  "t.yaml:1:20: gateway.workers: expected an integer, got the quoted string '2' (remove the quotes)" },
	{ "leading zero", "gateway: {workers: 02}\n",
	  "t.yaml:1:20: gateway.workers: '02' has a leading zero; write it without (or as 0x hex)" },
	{ "out of range", "gateway: {workers: 65}\n",
	  "t.yaml:1:20: gateway.workers: 65 is out of range 1..16" },
	{ "negative", "ethernet_interfaces: [{name: e, vlan: -1}]\n",
	  "t.yaml:1:39: ethernet_interfaces[0].vlan: -1 is out of range 0..4094" },
	{ "yes is not a boolean", "ethernet_interfaces: [{name: e, proxy_arp: yes}]\n",
	  "t.yaml:1:44: ethernet_interfaces[0].proxy_arp: expected true or false, got 'yes' (did you mean true?)" },
	{ "off is not a boolean", "failover: {preempt: off, key_file: /k}\n",
	  "t.yaml:1:21: failover.preempt: expected true or false, got 'off' (did you mean false?)" },
	{ "duplicate key", "gateway:\n  name: a\n  name: b\n",
	  "t.yaml:3:3: duplicate key 'name' in gateway (first at line 2)" },
	{ "duplicate names across links and interfaces",
	  "ipoib_links: [{name: x0, device: d}]\nethernet_interfaces: [{name: x0}]\n",
	  "t.yaml:2:30: duplicate name 'x0' (first at line 1); links and interfaces need distinct names" },
	/* Secure by default: a key, or auth none said out loud. */
	{ "failover without a key", "failover:\n  priority: 120\n",
	  "t.yaml:2:3: failover: missing key 'key_file': the pair's shared secret (e.g. "
	  "/etc/ibgw/failover.key, 16..1024 random octets, mode 0600), or auth: none to run "
	  "unauthenticated" },
	{ "empty failover section", "failover:\n",
	  "t.yaml:1:10: failover: missing key 'key_file': the pair's shared secret (e.g. "
	  "/etc/ibgw/failover.key, 16..1024 random octets, mode 0600), or auth: none to run "
	  "unauthenticated" },
	{ "empty key_file", "failover: {auth: hmac-sha256, key_file: \"\"}\n",
	  "t.yaml:1:41: failover.key_file: \"\" with auth hmac-sha256: name the file holding the "
	  "pair's shared secret, or set auth: none to run unauthenticated" },
	{ "key_file with auth none", "failover: {auth: none, key_file: /k}\n",
	  "t.yaml:1:34: failover.key_file: given with auth: none; leave one of them out" },
	{ "unknown auth", "failover: {auth: md5, key_file: /k}\n",
	  "t.yaml:1:18: failover.auth: unknown value 'md5' (expected hmac-sha256 or none)" },
	{ "duplicate group names", "failover:\n  groups: [{name: g}, {name: g}]\n  key_file: /k\n",
	  "t.yaml:2:30: duplicate group name 'g' (first at line 2)" },
	{ "unknown route dev",
	  "ethernet_interfaces: [{name: eth0}]\nroutes: [{prefix: 10.0.0.0/8, dev: eth1}]\n",
	  "t.yaml:2:36: route dev 'eth1' is not an IPoIB link or Ethernet interface (did you mean 'eth0'?)" },
	{ "gid route link must be IPoIB",
	  "ethernet_interfaces: [{name: eth0}]\ngid_routes: [{prefix: \"fec0::/64\", link: eth0}]\n",
	  "t.yaml:2:42: gid_route link 'eth0' is not an IPoIB link" },
	{ "gid route without any IPoIB link", "gid_routes: [{prefix: \"fec0::/64\"}]\n",
	  "t.yaml:1:14: gid_routes[0]: no IPoIB link to reach the routers through (add one to ipoib_links)" },
	{ "unknown failover path and address dev",
	  "failover:\n  paths: [ib9]\n  groups: [{name: g, addresses: [{address: 10.0.0.1/24, dev: x}]}]\n"
	  "  key_file: /k\n",
	  "t.yaml:2:10: failover.paths: 1 path but no peer_addresses (give the peer's address on each path, in order)\n"
	  "t.yaml:2:11: failover path 'ib9' is not an IPoIB link or Ethernet interface\n"
	  "t.yaml:3:62: address dev 'x' is not an IPoIB link or Ethernet interface" },
	/* found by fuzz_config: left out, peer_addresses was not checked, but its printed
	 * form (peer_addresses: []) was refused */
	{ "paths without peer_addresses",
	  "ipoib_links: [{name: i, device: d}]\nfailover: {paths: [i], key_file: /k}\n",
	  "t.yaml:2:19: failover.paths: 1 path but no peer_addresses (give the peer's address on each path, in order)" },
	{ "overlapping addresses",
	  "ethernet_interfaces:\n  - {name: a, addresses: [10.0.0.1/16]}\n  - {name: b, addresses: [10.0.200.1/24]}\n",
	  "t.yaml:3:27: address 10.0.200.1/24 overlaps 10.0.0.1/16 on 'a' (line 2)" },
	{ "duplicate route",
	  "ethernet_interfaces: [{name: e}]\nroutes:\n  - {prefix: 10.0.0.0/8, dev: e}\n  - {prefix: 10.0.0.0/8, dev: e}\n",
	  "t.yaml:4:14: duplicate route 10.0.0.0/8 (first at line 3); a backup route needs a different metric" },
	{ "host bits in a route", "routes: [{prefix: 10.1.2.3/16, dev: e}]\n",
	  "t.yaml:1:19: routes[0].prefix: '10.1.2.3/16' has host bits set (did you mean 10.1.0.0/16?)\n"
	  "t.yaml:1:37: route dev 'e' is not an IPoIB link or Ethernet interface" },
	{ "bad prefix length", "ethernet_interfaces: [{name: e, addresses: [10.0.0.1/33]}]\n",
	  "t.yaml:1:45: ethernet_interfaces[0].addresses[0]: '10.0.0.1/33' is not a prefix: the length after '/' must be a number 0..32" },
	{ "malformed GID prefix",
	  "ipoib_links: [{name: i, device: d}]\ngid_routes: [{prefix: \"fec0::g/64\"}]\n",
	  "t.yaml:2:23: gid_routes[0].prefix: 'fec0::g/64' is not a prefix: 'fec0::g' is not an IPv4 or IPv6 address" },
	{ "IPv4 GID prefix",
	  "ipoib_links: [{name: i, device: d}]\ngid_routes: [{prefix: 10.0.0.0/8}]\n",
	  "t.yaml:2:23: gid_routes[0].prefix: '10.0.0.0/8' is not a GID prefix (GIDs are written like IPv6: fec0:0:0:1::/64)" },
	{ "P_Key 0x0000", "ipoib_links: [{name: i, device: d, pkey: 0x0000}]\n",
	  "t.yaml:1:42: ipoib_links[0].pkey: 0x0000 is not a valid P_Key (0x0000 and 0x8000 are reserved)" },
	{ "P_Key 0x8000", "ipoib_links: [{name: i, device: d, pkey: 0x8000}]\n",
	  "t.yaml:1:42: ipoib_links[0].pkey: 0x8000 is not a valid P_Key (0x0000 and 0x8000 are reserved)" },
	{ "worker_cpus count", "gateway:\n  workers: 3\n  worker_cpus: [1, 2]\n",
	  "t.yaml:3:16: gateway.worker_cpus: 2 CPUs listed for 3 workers (list one CPU per worker, or none)" },
	{ "dead interval",
	  "failover: {heartbeat_interval_ms: 100, dead_interval_ms: 299, key_file: /k}\n",
	  "t.yaml:1:58: failover.dead_interval_ms: 299 is less than 3 heartbeat intervals (3 x 100 = 300 ms)" },
	{ "datagram MTU", "ipoib_links: [{name: i, device: d, mtu: 4093}]\n",
	  "t.yaml:1:41: ipoib_links[0].mtu: 4093 is too large for datagram mode (at most 4092: the 4096-byte IB MTU less the 4-byte IPoIB header; use mode: connected for more)" },
	{ "connected MTU", "ipoib_links: [{name: i, device: d, mode: connected, mtu: 65521}]\n",
	  "t.yaml:1:58: ipoib_links[0].mtu: 65521 is out of range 68..65520" },
	{ "Ethernet MTU", "ethernet_interfaces: [{name: e, mtu: 9217}]\n",
	  "t.yaml:1:38: ethernet_interfaces[0].mtu: 9217 is out of range 68..9216" },
	{ "anchor and alias", "gateway: &g {name: a}\ncontrol: *g\n",
	  "t.yaml:1:10: anchors and aliases are not supported (found anchor '&g')\n"
	  "t.yaml:2:10: anchors and aliases are not supported (found alias '*g')" },
	{ "not UTF-8", "gateway:\n  name: \xff\n",
	  "t.yaml:2:9: invalid leading UTF-8 octet (0xff); the file must be UTF-8 text" },
	{ "tab", "gateway:\n\tname: a\n",
	  "t.yaml:2:1: tab character; YAML indentation must use spaces" },
	{ "syntax", "gateway: [a\n",
	  "t.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence at line 1, column 10)" },
	{ "long name", "ipoib_links: [{name: abcdefghijabcdefghijabcdefghijab, device: d}]\n",
	  "t.yaml:1:22: ipoib_links[0].name: 'abcdefghijabcdefghijabcdefghijab' is longer than 31 characters" },
	{ "long value quoted without cutting a UTF-8 character",
	  "gateway: {name: a\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9}\n",
	  "t.yaml:1:17: gateway.name: 'a\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...' is longer than 31 characters" },
	{ "missing required keys", "ipoib_links:\n  - mode: connected\n",
	  "t.yaml:2:5: ipoib_links[0]: missing key 'name'\nt.yaml:2:5: ipoib_links[0]: missing key 'device'" },
	{ "enum typo", "ipoib_links: [{name: i, device: d, mode: conected}]\n",
	  "t.yaml:1:42: ipoib_links[0].mode: unknown value 'conected' (expected datagram or connected; did you mean 'connected'?)" },
	{ "retired backend", "ipoib_links: [{name: i, device: d, backend: sim}]\n",
	  "t.yaml:1:45: ipoib_links[0].backend: 'sim': the sim backend is retired; use verbs (on the simulated rack under libibverbs2sim.so, docs/verbs-sim.md)" },
	{ "octal mode range", "control: {socket_mode: 01000}\n",
	  "t.yaml:1:24: control.socket_mode: 01000 is out of range 0000..0777" },
	{ "top level not a mapping", "42\n",
	  "t.yaml:1:1: the top level must be a mapping of sections (gateway:, ipoib_links:, ...), got '42'" },
	{ "two documents", "gateway: {}\n---\ngateway: {}\n",
	  "t.yaml:2:1: a second YAML document; the file must hold exactly one" },
	{ "tag", "gateway: {name: !!str a}\n",
	  "t.yaml:1:17: tags are not supported (found 'tag:yaml.org,2002:str')" },
	{ "NUL in a quoted string", "gateway: {name: \"a\\0b\"}\n",
	  "t.yaml:1:17: gateway.name: contains a NUL character" },
	{ "control character in a string", "gateway: {name: \"a\\tb\"}\n",
	  "t.yaml:1:17: gateway.name: contains the non-printing character U+0009" },
	/* escapes that load but could not be printed back (found by fuzz_config) */
	{ "C1 control in a path", "control: {socket: \"/run/a\\x80b\"}\n",
	  "t.yaml:1:19: control.socket: contains the non-printing character U+0080" },
	{ "line separator in a string", "gateway: {name: \"a\\u2028b\"}\n",
	  "t.yaml:1:17: gateway.name: contains the non-printing character U+2028" },
	{ "byte order mark in a string", "failover: {key_file: \"/k\\uFEFF\"}\n",
	  "t.yaml:1:22: failover.key_file: contains the non-printing character U+FEFF" },
	{ "non-character in a name list", "failover: {paths: [\"\\uFFFF\"], key_file: /k}\n",
	  "t.yaml:1:20: failover.paths[0]: contains the non-printing character U+FFFF" },
	{ "next hop family", "routes: [{prefix: \"fd00::/8\", via: 10.0.0.1}]\n",
	  "t.yaml:1:36: routes[0].via: next hop 10.0.0.1 is IPv4 but the prefix is IPv6" },
	{ "route with neither via nor dev", "routes: [{prefix: 10.0.0.0/8}]\n",
	  "t.yaml:1:10: routes[0]: a route needs 'via' (next hops) or 'dev' (directly connected)" },
	{ "router MTU",
	  "ipoib_links: [{name: i, device: d}]\ngid_routes: [{prefix: \"fec0::/64\", routers: [{lid: 1, mtu: 1000}]}]\n",
	  "t.yaml:2:60: gid_routes[0].routers[0].mtu: 1000 is not an IB MTU (256, 512, 1024, 2048 or 4096)" },
	{ "LID range",
	  "ipoib_links: [{name: i, device: d}]\ngid_routes: [{prefix: \"fec0::/64\", routers: [{lid: 0xc000}]}]\n",
	  "t.yaml:2:52: gid_routes[0].routers[0].lid: 0xc000 is out of range 0x0001..0xbfff" },
	{ "neighbour thresholds out of order", "neighbours: {gc_thresh2: 2000}\n",
	  "t.yaml:1:26: neighbours.gc_thresh2: gc_thresh2 (2000) is above gc_thresh3 (1024); want gc_thresh1 <= gc_thresh2 <= gc_thresh3" },
	{ "resolutions could take the whole table",
	  "neighbours: {gc_thresh1: 8, gc_thresh2: 32, gc_thresh3: 64, max_unresolved: 64}\n",
	  "t.yaml:1:77: neighbours.max_unresolved: 64 would let resolutions take the whole table; want less than gc_thresh3 (64)" },
	{ "more parked than the unresolved class holds", "punt: {msg_pool: 100, park_max: 26}\n",
	  "t.yaml:1:33: punt.park_max: 26 is more than the unresolved class may hold; want at most msg_pool / 4 (25)" },
	{ "a bucket of no punt", "punt: {unresolved: {per_worker_burst: 0}}\n",
	  "t.yaml:1:39: punt.unresolved.per_worker_burst: 0 is out of range 1..1000000" },
	{ "the control class has no limits", "punt: {control: {per_source_rate: 1}}\n",
	  "t.yaml:1:8: unknown key 'control' in punt" },
	{ "a limit outside its class", "punt: {per_source_rate: 1}\n",
	  "t.yaml:1:8: unknown key 'per_source_rate' in punt" },
};

static void test_errors_table(void **state)
{
	unsigned bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
		const struct err_case *c = &err_cases[i];
		char *got = errors_of(c->yaml, NULL);

		if (strcmp(got, c->errors) != 0) {
			print_error("%s:\n  got:      %s\n  expected: %s\n", c->what, got,
				    c->errors);
			bad++;
		}
		free(got);
	}
	if (bad)
		fail_msg("%u of %zu error cases differ", bad,
			 sizeof(err_cases) / sizeof(err_cases[0]));
}

static void test_defaults(void **state)
{
	struct gw_config *c = load_ok("ipoib_links: [{name: ib0, device: mlx5_0}, "
				      "{name: ib1, device: mlx5_0, mode: connected}]\n"
				      "ethernet_interfaces: [{name: eth0}]\n"
				      "gid_routes: [{prefix: \"fec0::/64\"}]\n");

	(void)state;
	assert_true(c->name[0] != '\0'); /* the host name */
	assert_int_equal(c->workers, 1);
	assert_int_equal(c->n_worker_cpus, 0);
	assert_string_equal(c->socket, "/run/ibgw/ibgwd.sock");
	assert_string_equal(c->readonly_socket, "");
	assert_int_equal(c->socket_mode, 0660);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_int_equal(c->log_target, LOG_TARGET_AUTO);
	assert_int_equal(c->n_ipoib_links, 2);
	assert_int_equal(c->ipoib_links[0].backend, GW_IB_BACKEND_VERBS);
	assert_int_equal(c->ipoib_links[0].port, 1);
	assert_int_equal(c->ipoib_links[0].pkey, 0xffff);
	assert_int_equal(c->ipoib_links[0].mode, GW_IPOIB_DATAGRAM);
	assert_int_equal(c->ipoib_links[0].mtu, 2044);
	assert_int_equal(c->ipoib_links[1].mtu, 65520);
	assert_false(c->ipoib_links[0].proxy.arp);
	assert_int_equal(c->ipoib_links[0].pos.line, 1);
	assert_int_equal(c->ipoib_links[0].pos.column, 15);
	assert_int_equal(c->eth_ifs[0].backend, GW_ETH_BACKEND_AF_PACKET);
	assert_string_equal(c->eth_ifs[0].device, "eth0");
	assert_int_equal(c->eth_ifs[0].vlan, 0);
	assert_int_equal(c->eth_ifs[0].mtu, 1500);
	assert_int_equal(c->gid_routes[0].source, GW_GID_ROUTE_SA);
	assert_string_equal(c->gid_routes[0].link, "ib0"); /* the first IPoIB link */
	assert_false(c->failover.enabled);
	assert_int_equal(c->neighbours.gc_thresh1, 128); /* Linux's */
	assert_int_equal(c->neighbours.gc_thresh2, 512);
	assert_int_equal(c->neighbours.gc_thresh3, 1024);
	assert_int_equal(c->neighbours.max_unresolved, 256);
	assert_int_equal(c->neighbours.unres_qlen, 3);
	assert_int_equal(c->neighbours.base_reachable_time_ms, 30000);
	gw_config_free(c);

	/* The punt limits are the engine's own defaults (fwd_punt_defaults), key by key. */
	c = load_ok("");
	{
		struct fwd_punt_config d;
		const struct gw_punt_class_config *cl[FWD_PCLASS_COUNT] = {
			[FWD_PCLASS_NEIGH] = &c->punt.neighbour,
			[FWD_PCLASS_UNRES] = &c->punt.unresolved,
			[FWD_PCLASS_LOCAL] = &c->punt.local,
			[FWD_PCLASS_MCAST] = &c->punt.mcast,
		};

		fwd_punt_defaults(&d, 256);
		assert_int_equal(c->punt.msg_pool, 256); /* the engine's when 0 */
		assert_int_equal(c->punt.park_max, d.park_max);
		for (unsigned k = FWD_PCLASS_NEIGH; k < FWD_PCLASS_COUNT; k++) {
			assert_int_equal(cl[k]->per_source_rate, d.per_src[k].rate);
			assert_int_equal(cl[k]->per_source_burst, d.per_src[k].burst);
			assert_int_equal(cl[k]->per_worker_rate, d.total[k].rate);
			assert_int_equal(cl[k]->per_worker_burst, d.total[k].burst);
		}
		/* control: never limited, so the config has no keys for it */
		assert_int_equal(d.per_src[FWD_PCLASS_CONTROL].rate, 0);
		assert_int_equal(d.total[FWD_PCLASS_CONTROL].rate, 0);
	}
	gw_config_free(c);

	/* park_max follows msg_pool when not given; a class given in part keeps the rest;
	 * park_max may be the whole unresolved cap. */
	c = load_ok("punt: {msg_pool: 64, local: {per_source_rate: 0}}\n");
	assert_int_equal(c->punt.park_max, 8);
	assert_int_equal(c->punt.local.per_source_rate, 0);
	assert_int_equal(c->punt.local.per_source_burst, 200);
	gw_config_free(c);
	c = load_ok("punt: {msg_pool: 64, park_max: 16}\n");
	assert_int_equal(c->punt.park_max, 16);
	gw_config_free(c);

	/* max_unresolved follows gc_thresh3 when not given. */
	c = load_ok("neighbours: {gc_thresh1: 50, gc_thresh2: 100, gc_thresh3: 200}\n");
	assert_int_equal(c->neighbours.max_unresolved, 50);
	gw_config_free(c);

	c = load_ok("failover:\n  priority: 120\n  groups: [{name: a}, {name: b, priority: 7}]\n"
		    "  key_file: /etc/ibgw/failover.key\n");
	assert_true(c->failover.enabled);
	assert_int_equal(c->failover.auth, GW_FAILOVER_AUTH_HMAC);
	assert_string_equal(c->failover.key_file, "/etc/ibgw/failover.key");
	assert_true(c->failover.preempt);
	assert_int_equal(c->failover.heartbeat_interval_ms, 10);
	assert_int_equal(c->failover.dead_interval_ms, 40);
	assert_int_equal(c->failover.rt_priority, 10);
	assert_int_equal(c->failover.groups[0].priority, 120); /* from failover.priority */
	assert_int_equal(c->failover.groups[1].priority, 7);
	assert_false(c->failover.has_tiebreaker);
	gw_config_free(c);

	c = load_ok("failover: {auth: none}\n"); /* the explicit opt-out */
	assert_int_equal(c->failover.auth, GW_FAILOVER_AUTH_NONE);
	assert_string_equal(c->failover.key_file, "");
	gw_config_free(c);
}

static void test_values(void **state)
{
	struct gw_config *c = load_ok(
	    "gateway: {name: g, workers: 0x2, worker_cpus: [3, 5]}\n"
	    "control: {socket_mode: \"0640\"}\n"
	    "logging: {level: debug, target: syslog}\n"
	    "ipoib_links: [{name: ib0, device: d, pkey: 0x7fff, addresses: [10.0.0.1/24]}]\n"
	    "routes: [{prefix: 10.9.0.0/16, via: [10.0.0.7, 10.0.0.8], metric: 5}]\n"
	    "failover: {tiebreaker_address: \"fd00::9\", key_file: /k}\n");

	(void)state;
	assert_int_equal(c->workers, 2);
	assert_int_equal(c->worker_cpus[1], 5);
	assert_int_equal(c->socket_mode, 0640);
	assert_int_equal(c->log_level, LOG_DEBUG);
	assert_int_equal(c->log_target, LOG_TARGET_SYSLOG);
	assert_int_equal(c->ipoib_links[0].pkey, 0xffff); /* full-membership bit set */
	assert_int_equal(c->ipoib_links[0].addresses[0].len, 24);
	assert_int_equal(c->routes[0].n_via, 2);
	assert_int_equal(c->routes[0].via[1].bytes[3], 8);
	assert_int_equal(c->routes[0].metric, 5);
	assert_true(c->failover.has_tiebreaker);
	assert_int_equal(c->failover.tiebreaker.family, AF_INET6);
	gw_config_free(c);
}

/* Overlap is refused between links, not within one: a link may hold several addresses
 * of one subnet (a secondary address), only the very same prefix twice is an error. */
static void test_same_link_addresses(void **state)
{
	struct gw_config *c =
	    load_ok("ipoib_links: [{name: ib0, device: d, addresses: [10.0.0.1/24, 10.0.0.2/24, "
		    "10.0.0.3/16, \"fd00::1/64\", \"fd00::2/64\"]}]\n"
		    "ethernet_interfaces: [{name: eth0, addresses: [10.1.0.1/24, 10.1.0.9/24]}]\n");

	(void)state;
	assert_int_equal(c->ipoib_links[0].n_addresses, 5);
	assert_int_equal(c->eth_ifs[0].n_addresses, 2);
	gw_config_free(c);
}

static char *print_to_string(const struct gw_config *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	gw_config_print_yaml(c, f);
	fclose(f);
	return buf;
}

static const char full_config[] =
    "gateway: {name: rt, workers: 2, worker_cpus: [0, 1]}\n"
    "control: {socket: \"/tmp/a b.sock\", readonly_socket: /tmp/ro.sock, socket_group: \"yes\"}\n"
    "ipoib_links:\n"
    "  - {name: ib0, backend: verbs, device: gw1, mode: connected, addresses: [10.0.0.1/24, "
    "\"fd00::1/64\"], proxy_arp: true, proxy_prefixes: [10.1.0.0/16]}\n"
    "  - {name: ib1, device: gw1, pkey: 0x8002, mtu: 4092}\n"
    "ethernet_interfaces:\n"
    "  - {name: eth0, backend: af_packet, vlan: 7, mtu: 9000, addresses: [10.1.0.1/16], proxy_nd: "
    "true}\n"
    "routes:\n"
    "  - {prefix: 0.0.0.0/0, via: 10.1.0.254}\n"
    "  - {prefix: \"fd00:5::/64\", dev: ib0, metric: 3}\n"
    "gid_routes:\n"
    "  - {prefix: \"fec0:0:0:1::/64\", source: local, link: ib1, routers: [{lid: 0x10, sl: 2, "
    "mtu: 4096, hop_limit: 9}, {lid: 0x11}]}\n"
    "failover:\n"
    "  priority: 200\n"
    "  preempt: false\n"
    "  key_file: /etc/ibgw/key\n"
    "  paths: [ib0, eth0]\n"
    "  peer_addresses: [10.0.0.2, 10.1.0.2]\n"
    "  tiebreaker_address: 10.1.0.254\n"
    "  groups: [{name: g, addresses: [{address: 10.1.0.100/16, dev: eth0}]}]\n"
    "punt: {msg_pool: 128, neighbour: {per_source_rate: 0}, local: {per_worker_burst: 9}}\n";

static void test_round_trip(void **state)
{
	struct gw_config *a = load_ok(full_config), *b;
	char *ta, *tb;
	struct json_object *ja, *jb;

	(void)state;
	ta = print_to_string(a);
	b = load_ok(ta);
	tb = print_to_string(b);
	assert_string_equal(ta, tb);
	/* Equal configs: every value the JSON form carries is the same. */
	ja = gw_config_to_json(a);
	jb = gw_config_to_json(b);
	assert_true(json_object_equal(ja, jb));
	/* And a few fields compared directly, not through any printer. */
	assert_int_equal(a->ipoib_links[1].pkey, b->ipoib_links[1].pkey);
	assert_true(ip_addr_equal(&a->routes[0].via[0], &b->routes[0].via[0]));
	assert_int_equal(a->gid_routes[0].routers[0].hop_limit,
			 b->gid_routes[0].routers[0].hop_limit);
	assert_string_equal(a->socket, b->socket);
	assert_string_equal(b->socket_group, "yes");
	assert_int_equal(b->failover.groups[0].priority, 200);
	/* Strings that YAML would read otherwise are quoted. */
	assert_non_null(strstr(ta, "  socket: \"/tmp/a b.sock\"\n"));
	assert_non_null(strstr(ta, "  socket_group: \"yes\"\n"));
	assert_non_null(strstr(ta, "    pkey: 0x8002\n"));
	assert_non_null(strstr(ta, "      - lid: 0x0010\n"));
	json_object_put(ja);
	json_object_put(jb);
	free(ta);
	free(tb);
	gw_config_free(a);
	gw_config_free(b);
}

static void test_json(void **state)
{
	struct gw_config *c = load_ok(full_config);
	struct json_object *j = gw_config_to_json(c), *v, *l;

	(void)state;
	assert_true(json_object_object_get_ex(j, "gateway", &v));
	assert_true(json_object_object_get_ex(v, "workers", &v));
	assert_int_equal(json_object_get_int(v), 2);
	assert_true(json_object_object_get_ex(j, "ipoib_links", &l));
	assert_int_equal(json_object_array_length(l), 2);
	v = json_object_array_get_idx(l, 1);
	assert_true(json_object_object_get_ex(v, "pkey", &v));
	assert_string_equal(json_object_get_string(v), "0x8002");
	v = json_object_array_get_idx(l, 0);
	assert_true(json_object_object_get_ex(v, "proxy_arp", &v));
	assert_true(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(j, "control", &v));
	assert_true(json_object_object_get_ex(v, "socket_mode", &v));
	assert_string_equal(json_object_get_string(v), "0660");
	assert_true(json_object_object_get_ex(j, "failover", &v));
	assert_true(json_object_object_get_ex(v, "peer_addresses", &v));
	assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 1)), "10.1.0.2");
	assert_true(json_object_object_get_ex(j, "routes", &l));
	v = json_object_array_get_idx(l, 0);
	assert_false(json_object_object_get_ex(v, "dev", NULL)); /* not given, not shown */
	json_object_put(j);
	gw_config_free(c);

	/* A class's limits nest under punt, as in the YAML. */
	c = load_ok(full_config);
	j = gw_config_to_json(c);
	assert_true(json_object_object_get_ex(j, "punt", &v));
	assert_true(json_object_object_get_ex(v, "park_max", &l));
	assert_int_equal(json_object_get_int(l), 16);
	assert_true(json_object_object_get_ex(v, "local", &v));
	assert_true(json_object_object_get_ex(v, "per_worker_burst", &v));
	assert_int_equal(json_object_get_int(v), 9);
	json_object_put(j);
	gw_config_free(c);

	/* Without a failover section there is no failover key. */
	c = load_ok("");
	j = gw_config_to_json(c);
	assert_false(json_object_object_get_ex(j, "failover", NULL));
	json_object_put(j);
	gw_config_free(c);
}

static void test_limits(void **state)
{
	size_t big = (16u << 20) + 1, n;
	char *buf = malloc(big), *text, *e;
	struct gw_config_errors errs;
	struct gw_config *cfg = NULL;

	(void)state;
	assert_non_null(buf);
	memset(buf, '#', big);
	assert_int_equal(gw_config_load_buffer("big.yaml", buf, big, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msgs[0], "big.yaml:1:1: file is larger than 16 MiB");
	gw_config_errors_free(&errs);
	free(buf);

	/* The top mapping is level 1, so the 32nd opening bracket is level 33: refused. */
	text = calloc(1, 200);
	strcpy(text, "a: ");
	for (n = 0; n < 33; n++)
		strcat(text, "[");
	e = errors_of(text, NULL);
	assert_string_equal(e, "t.yaml:1:35: nesting deeper than 32 levels");
	free(e);
	free(text);

	/* 150 bad values: 100 reported, then one line saying there were more. */
	text = calloc(1, 150 * 40 + 16);
	strcpy(text, "routes:\n");
	for (n = 0; n < 150; n++)
		sprintf(text + strlen(text), "  - {prefix: 10.0.0.1/8, dev: x}\n");
	assert_int_equal(gw_config_load_buffer("t.yaml", text, strlen(text), &cfg, &errs), -1);
	assert_int_equal(errs.n, 101);
	assert_string_equal(errs.msgs[100], "t.yaml:102:14: too many errors; stopping after 100");
	gw_config_errors_free(&errs);
	free(text);

	/* A billion-laughs file is refused at its first anchor, before any expansion. */
	e = errors_of("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", NULL);
	assert_non_null(strstr(e, "t.yaml:1:4: anchors and aliases are not supported"));
	free(e);
}

static void test_load_file(void **state)
{
	struct gw_config_errors errs;
	struct gw_config *cfg = NULL;
	char path[] = "/tmp/ibgw-test-config.XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "gateway: {name: f}\n", 19), 19);
	close(fd);
	assert_int_equal(gw_config_load(path, &cfg, &errs), 0);
	assert_string_equal(cfg->name, "f");
	assert_string_equal(cfg->source, path);
	gw_config_errors_free(&errs);
	gw_config_free(cfg);
	unlink(path);
	assert_int_equal(gw_config_load(path, &cfg, &errs), -1);
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msgs[0], ": cannot open: No such file or directory"));
	gw_config_errors_free(&errs);
}

static void test_enum_names(void **state)
{
	(void)state;
	assert_string_equal(gw_ipoib_mode_name(GW_IPOIB_CONNECTED), "connected");
	assert_string_equal(gw_ipoib_backend_name(GW_IB_BACKEND_VERBS), "verbs");
	assert_string_equal(gw_eth_backend_name(GW_ETH_BACKEND_AF_XDP), "af_xdp");
}

/* docs/config.md must carry the reference generated from the tables, unchanged. */
static void test_docs_reference(void **state)
{
	const char *paths[] = { "docs/config.md", "../../docs/config.md",
				"../../../docs/config.md" };
	char *ref = NULL, *doc = NULL;
	size_t rlen = 0, dlen = 0;
	FILE *f = open_memstream(&ref, &rlen), *d = NULL;

	(void)state;
	gw_config_print_reference(f);
	fclose(f);
	for (size_t i = 0; i < 3 && !d; i++)
		d = fopen(paths[i], "r");
	if (!d)
		fail_msg("docs/config.md not found (run from the top of the tree)");
	doc = calloc(1, 1 << 20);
	dlen = fread(doc, 1, (1 << 20) - 1, d);
	fclose(d);
	doc[dlen] = '\0';
	if (!strstr(doc, ref))
		fail_msg("docs/config.md does not contain the key reference; regenerate it:\n%s",
			 ref);

	/* The man page documents every key too: a ".B key" line for each table row. */
	d = NULL;
	for (size_t i = 0; i < 3 && !d; i++) {
		char man[64];

		snprintf(man, sizeof(man), "%.*sdocs/man/ibgwd.yaml.5",
			 (int)(strlen(paths[i]) - 14), paths[i]);
		d = fopen(man, "r");
	}
	if (!d)
		fail_msg("docs/man/ibgwd.yaml.5 not found");
	dlen = fread(doc, 1, (1 << 20) - 1, d);
	doc[dlen] = '\0';
	fclose(d);
	for (char *row = strstr(ref, "\n| `"); row; row = strstr(row + 1, "\n| `")) {
		char key[64], want[80];
		size_t klen = strcspn(row + 4, "`");

		if (klen >= sizeof(key))
			fail_msg("key too long in the reference");
		memcpy(key, row + 4, klen);
		key[klen] = '\0';
		snprintf(want, sizeof(want), "\n.B %s\n", key);
		if (!strstr(doc, want))
			fail_msg("docs/man/ibgwd.yaml.5 does not document key '%s'", key);
	}
	free(doc);
	free(ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors_table),   cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values),         cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_json),           cmocka_unit_test(test_limits),
		cmocka_unit_test(test_load_file),      cmocka_unit_test(test_enum_names),
		cmocka_unit_test(test_docs_reference), cmocka_unit_test(test_same_link_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
