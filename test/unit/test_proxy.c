/*
 * pkt/proxy: every decision and reason of proxy ARP and proxy ND, with a small table
 * standing in for the caller's neighbour tables and proxy prefixes; the replies built
 * are parsed back and checked field by field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "pkt/proxy.h"

/* Side A (Ethernet) has 10.0.0.1-9; side B (IPoIB) has 10.0.0.20 learned and the
 * prefix 10.0.0.32/27 configured; the gateway is 10.0.0.254. IPv6 likewise with
 * 2001:db8::/64 host parts. */
static enum proxy_where where(void *ctx, int family, const uint8_t *a)
{
	unsigned last = family == AF_INET ? a[3] : a[15];

	(void)ctx;
	if (last == 254)
		return PROXY_WHERE_SELF;
	if (last >= 1 && last <= 9)
		return PROXY_WHERE_ASKER_SIDE;
	if (last == 20)
		return PROXY_WHERE_OTHER_SIDE;
	if (last >= 32 && last < 64)
		return PROXY_WHERE_OTHER_PREFIX;
	return PROXY_WHERE_UNKNOWN;
}

static const uint8_t gw_mac[6] = { 0x02, 0, 0, 0, 0, 0xfe };
static const uint8_t host_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t gw_ib[20] = { 0x80, 0, 0, 0x48, 0xfe, 0x80, [13] = 2, 0xc9, 3, 0, 1, 0, 1 };
static const uint8_t host_ib[20] = { 0x80, 0, 0, 0x49, 0xfe, 0x80, [13] = 2, 0xc9, 3, 0, 1, 0, 2 };

static struct proxy_cfg cfg = { .enabled = true, .defend_dad = true };
static struct proxy_link eth = { .ib = false, .lladdr = gw_mac };
static struct proxy_env env = { .cfg = &cfg, .link = &eth, .lookup = where };

static struct proxy_decision ask_arp(uint16_t op, uint32_t spa, uint32_t tpa, const uint8_t *sha,
				     uint8_t *out)
{
	uint8_t req[64];
	struct arp_pkt a;
	size_t n = arp_build(req, sizeof(req), eth.ib ? 32 : 1, op, sha, spa, NULL, tpa);

	assert_int_equal(arp_parse(req, n, 0, &a), ARP_OK);
	return proxy_arp(&env, &a, NULL, out, 64);
}

static void test_arp(void **state)
{
	uint8_t out[64];
	struct arp_pkt r;
	struct proxy_decision d;

	(void)state;
	d = ask_arp(1, 0x0a000001, 0x0a000014, host_mac, out);
	assert_int_equal(d.action, PROXY_ANSWER);
	assert_int_equal(d.reason, PROXY_R_ANSWERED);
	assert_int_equal(d.len, 28);
	assert_int_equal(arp_parse(out, d.len, 1, &r), ARP_OK);
	assert_int_equal(r.op, ARP_OP_REPLY);
	assert_int_equal(r.spa, 0x0a000014);
	assert_int_equal(r.tpa, 0x0a000001);
	assert_memory_equal(r.sha, gw_mac, 6);
	assert_memory_equal(r.tha, host_mac, 6);

	static const struct {
		const char *what;
		uint16_t op;
		uint32_t spa, tpa;
		const uint8_t *sha;
		enum proxy_action act;
		enum proxy_reason why;
	} t[] = {
		{ "configured prefix", 1, 0x0a000001, 0x0a000021, host_mac, PROXY_RESOLVE,
		  PROXY_R_RESOLVE },
		{ "target on asker side", 1, 0x0a000001, 0x0a000002, host_mac, PROXY_IGNORE,
		  PROXY_R_TARGET_ASKER_SIDE },
		{ "target self", 1, 0x0a000001, 0x0a0000fe, host_mac, PROXY_IGNORE,
		  PROXY_R_TARGET_SELF },
		{ "target unknown", 1, 0x0a000001, 0x0a000070, host_mac, PROXY_IGNORE,
		  PROXY_R_TARGET_UNKNOWN },
		{ "our own request", 1, 0x0a0000fe, 0x0a000014, gw_mac, PROXY_IGNORE,
		  PROXY_R_FROM_OURSELVES },
		{ "sender lives on B", 1, 0x0a000014, 0x0a000015, host_mac, PROXY_IGNORE,
		  PROXY_R_SENDER_OTHER_SIDE },
		{ "reply", 2, 0x0a000001, 0x0a000014, host_mac, PROXY_IGNORE, PROXY_R_NOT_REQUEST },
		{ "announcement", 1, 0x0a000014, 0x0a000014, host_mac, PROXY_IGNORE,
		  PROXY_R_GRATUITOUS },
		{ "gratuitous reply", 2, 0x0a000014, 0x0a000014, host_mac, PROXY_IGNORE,
		  PROXY_R_GRATUITOUS },
		{ "probe for B's address", 1, 0, 0x0a000014, host_mac, PROXY_ANSWER,
		  PROXY_R_ANSWERED },
		{ "probe for a prefix address", 1, 0, 0x0a000021, host_mac, PROXY_IGNORE,
		  PROXY_R_TARGET_UNKNOWN },
	};
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		d = ask_arp(t[k].op, t[k].spa, t[k].tpa, t[k].sha, out);
		if (d.action != t[k].act || d.reason != t[k].why)
			fail_msg("%s: got %d %s", t[k].what, d.action, proxy_reason_name(d.reason));
	}
	/* the probe's answer: a reply to 0.0.0.0 at the prober's MAC (RFC 5227 conflict) */
	d = ask_arp(1, 0, 0x0a000014, host_mac, out);
	assert_int_equal(out[7], 2);
	assert_memory_equal(out + 18, host_mac, 6);
	assert_memory_equal(out + 24, "\0\0\0\0", 4);
	cfg.defend_dad = false;
	d = ask_arp(1, 0, 0x0a000014, host_mac, out);
	assert_int_equal(d.reason, PROXY_R_DAD_NOT_DEFENDED);
	cfg.defend_dad = true;
	cfg.answer_unresolved = true;
	d = ask_arp(1, 0x0a000001, 0x0a000021, host_mac, out);
	assert_int_equal(d.action, PROXY_ANSWER);
	cfg.answer_unresolved = false;
	cfg.enabled = false;
	d = ask_arp(1, 0x0a000001, 0x0a000014, host_mac, out);
	assert_int_equal(d.reason, PROXY_R_DISABLED);
	cfg.enabled = true;

	/* loop protection by the frame's source address */
	uint8_t req[64];
	struct arp_pkt a;
	size_t n = arp_build_request(req, sizeof(req), 1, host_mac, 0x0a000001, 0x0a000014);
	assert_int_equal(arp_parse(req, n, 1, &a), ARP_OK);
	d = proxy_arp(&env, &a, gw_mac, out, sizeof(out));
	assert_int_equal(d.reason, PROXY_R_FROM_OURSELVES);
	d = proxy_arp(&env, &a, NULL, out, 27);
	assert_int_equal(d.reason, PROXY_R_NO_SPACE);

	/* rate limit per asker: burst 2 */
	struct icmp_rl_bucket b[16];
	struct icmp_ratelimit rl;
	struct icmp_rl_cfg rc = {
		.per_dst_rate = 1, .per_dst_burst = 2, .v4_prefix_len = 32, .v6_prefix_len = 128
	};
	assert_int_equal(icmp_rl_init(&rl, b, 16, &rc), 0);
	env.rl = &rl;
	env.now_ns = 5000000000ull;
	assert_int_equal(proxy_arp(&env, &a, NULL, out, 64).action, PROXY_ANSWER);
	assert_int_equal(proxy_arp(&env, &a, NULL, out, 64).action, PROXY_ANSWER);
	assert_int_equal(proxy_arp(&env, &a, NULL, out, 64).reason, PROXY_R_RATE_LIMITED);
	env.rl = NULL;

	/* IPoIB side: the request must be IPoIB ARP; the answer carries our QPN+GID */
	struct proxy_link ib = { .ib = true, .lladdr = gw_ib };
	env.link = &ib;
	d = proxy_arp(&env, &a, NULL, out, 64);
	assert_int_equal(d.reason, PROXY_R_WRONG_LINK);
	n = arp_build_request(req, sizeof(req), 32, host_ib, 0x0a000001, 0x0a000014);
	assert_int_equal(arp_parse(req, n, 32, &a), ARP_OK);
	d = proxy_arp(&env, &a, NULL, out, 64);
	assert_int_equal(d.len, 56);
	assert_int_equal(arp_parse(out, 56, 32, &r), ARP_OK);
	assert_memory_equal(r.sha, gw_ib, 20);
	assert_memory_equal(r.tha, host_ib, 20);
	/* our own address with another flags octet is still ours */
	uint8_t gw_ib_uc[20];
	memcpy(gw_ib_uc, gw_ib, 20);
	gw_ib_uc[0] = 0;
	n = arp_build_request(req, sizeof(req), 32, gw_ib_uc, 0x0a0000fe, 0x0a000014);
	assert_int_equal(arp_parse(req, n, 32, &a), ARP_OK);
	assert_int_equal(proxy_arp(&env, &a, NULL, out, 64).reason, PROXY_R_FROM_OURSELVES);

	/* announcements */
	n = proxy_announce_arp(&ib, 0x0a000014, false, out, 64);
	assert_int_equal(arp_parse(out, n, 32, &r), ARP_OK);
	assert_int_equal(arp_classify(&r), ARP_KIND_ANNOUNCE);
	assert_memory_equal(r.sha, gw_ib, 20);
	env.link = &eth;
}

static void test_nd(void **state)
{
	uint8_t ns[128], out[128];
	struct nd_msg m, r;
	struct proxy_decision d;
	uint8_t host[16] = { 0x20, 1, 0xd, 0xb8, [15] = 1 },
		tgt[16] = { 0x20, 1, 0xd, 0xb8, [15] = 20 };
	static const uint8_t unspec[16] = { 0 };
	static const uint8_t gw_ll[16] = { 0xfe, 0x80, [15] = 0xfe };
	size_t n;

	(void)state;
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER, host, NULL, tgt, host_mac);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	d = proxy_nd(&env, &m, NULL, out, sizeof(out));
	assert_int_equal(d.action, PROXY_ANSWER);
	assert_int_equal(nd_parse(out, d.len, ND_LINK_ETHER, &r), ND_OK);
	assert_int_equal(r.type, ND_NA);
	assert_int_equal(r.flags, ND_NA_SOLICITED); /* override clear: the owner wins */
	assert_memory_equal(r.target, tgt, 16);
	assert_memory_equal(r.src, tgt, 16);
	assert_memory_equal(r.dst, host, 16);
	assert_memory_equal(r.tllao, gw_mac, 6);
	/* with our link-local as the source and the router flag */
	eth.ip6_src = gw_ll;
	cfg.router = true;
	d = proxy_nd(&env, &m, NULL, out, sizeof(out));
	assert_int_equal(nd_parse(out, d.len, ND_LINK_ETHER, &r), ND_OK);
	assert_memory_equal(r.src, gw_ll, 16);
	assert_int_equal(r.flags, ND_NA_SOLICITED | ND_NA_ROUTER);
	eth.ip6_src = NULL;
	cfg.router = false;

	/* DAD for B's address: defended with an NA to ff02::1, S and O clear */
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER, unspec, NULL, tgt, NULL);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	d = proxy_nd(&env, &m, NULL, out, sizeof(out));
	assert_int_equal(d.action, PROXY_ANSWER);
	assert_int_equal(nd_parse(out, d.len, ND_LINK_ETHER, &r), ND_OK);
	assert_memory_equal(r.dst, nd_all_nodes, 16);
	assert_int_equal(r.flags, 0);
	cfg.defend_dad = false;
	assert_int_equal(proxy_nd(&env, &m, NULL, out, sizeof(out)).reason,
			 PROXY_R_DAD_NOT_DEFENDED);
	cfg.defend_dad = true;

	/* loops: our own option, our own frame source; the asker on B; NAs */
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER, host, NULL, tgt, gw_mac);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(proxy_nd(&env, &m, NULL, out, sizeof(out)).reason, PROXY_R_FROM_OURSELVES);
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER, host, NULL, tgt, NULL);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(proxy_nd(&env, &m, gw_mac, out, sizeof(out)).reason,
			 PROXY_R_FROM_OURSELVES);
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER, host, NULL,
			(uint8_t[16]){ 0x20, 1, 0xd, 0xb8, [15] = 2 }, NULL);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(proxy_nd(&env, &m, NULL, out, sizeof(out)).reason,
			 PROXY_R_TARGET_ASKER_SIDE);
	tgt[15] = 21;
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER,
			(uint8_t[16]){ 0x20, 1, 0xd, 0xb8, [15] = 20 }, NULL, tgt, NULL);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(proxy_nd(&env, &m, NULL, out, sizeof(out)).reason,
			 PROXY_R_SENDER_OTHER_SIDE);
	tgt[15] = 40;
	n = nd_build_ns(ns, sizeof(ns), ND_LINK_ETHER, host, NULL, tgt, NULL);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	d = proxy_nd(&env, &m, NULL, out, sizeof(out));
	assert_int_equal(d.action, PROXY_RESOLVE);
	n = nd_build_unsolicited_na(ns, sizeof(ns), ND_LINK_ETHER, tgt, false, host_mac);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(proxy_nd(&env, &m, NULL, out, sizeof(out)).reason, PROXY_R_GRATUITOUS);
	n = nd_build_na(ns, sizeof(ns), ND_LINK_ETHER, tgt, host, tgt, ND_NA_SOLICITED, host_mac);
	assert_int_equal(nd_parse(ns, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(proxy_nd(&env, &m, NULL, out, sizeof(out)).reason, PROXY_R_NOT_REQUEST);

	/* IPoIB announcement of an address that moved here */
	struct proxy_link ib = { .ib = true, .lladdr = gw_ib };
	n = proxy_announce_nd(&ib, tgt, false, out, sizeof(out));
	assert_int_equal(nd_parse(out, n, ND_LINK_IB, &r), ND_OK);
	assert_int_equal(r.flags, ND_NA_OVERRIDE);
	assert_memory_equal(r.tllao, gw_ib, 20);
	for (int k = 0; k < PROXY_REASON_COUNT; k++)
		assert_string_not_equal(proxy_reason_name((enum proxy_reason)k), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arp),
		cmocka_unit_test(test_nd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
