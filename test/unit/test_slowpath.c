/*
 * The slow path through its rings, as a worker would use them: punted ARP for our
 * address, proxy ARP decisions (other side learned / asker's side), resolution with a
 * parked packet released by the ARP reply, echo to our address; the learning guard
 * (senders off the interface's subnets answered, not learned); the IB post hooks
 * while no worker runs (index reservation, direct posts). Two Ethernet interfaces; no
 * threads (the test plays the worker).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "engine/engine.h"
#include "engine/engine_pvt.h"
#include "engine/heartbeat.h"
#include "engine/ring.h"
#include "table/route.h"
#include "engine/slowpath.h"

static uint64_t fake_now = 1000000;
static uint64_t now_fn(void *ctx)
{
	(void)ctx;
	return fake_now;
}

static int dummy_port;
static const uint8_t mac1[6] = { 2, 0, 0, 0, 1, 1 }, mac2[6] = { 2, 0, 0, 0, 2, 1 };
static const uint8_t hmac[6] = { 2, 0, 0, 0, 1, 2 }, h2mac[6] = { 2, 0, 0, 0, 2, 2 };

struct env {
	struct rt_table *rt;
	struct fwd_engine *e;
	uint32_t if1, if2;
};

static uint32_t ip4(const char *s)
{
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(s, &a), 0);
	return (uint32_t)a.bytes[0] << 24 | (uint32_t)a.bytes[1] << 16 | (uint32_t)a.bytes[2] << 8 |
	       a.bytes[3];
}

static int setup(void **state)
{
	struct env *v = calloc(1, sizeof(*v));
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 1, .flow_seed = 3, .now_ms = now_fn };
	struct fwd_if_config c1 = { .name = "eth1",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&dummy_port,
				    .mac = mac1 };
	struct fwd_if_config c2 = c1;
	struct ip_prefix p;

	c2.name = "eth2";
	c2.mac = mac2;
	assert_int_equal(rt_create(&v->rt, &rc), 0);
	ec.rt = v->rt;
	assert_int_equal(fwd_engine_new(&ec, &v->e), 0);
	assert_int_equal(fwd_engine_if_add(v->e, &c1, &v->if1), 0);
	assert_int_equal(fwd_engine_if_add(v->e, &c2, &v->if2), 0);
	assert_int_equal(fwd_engine_if_set_up(v->e, v->if1, true), 0);
	assert_int_equal(fwd_engine_if_set_up(v->e, v->if2, true), 0);
	assert_int_equal(ip_prefix_parse("10.1.0.1/24", true, &p), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, v->if1, &p), 0);
	assert_int_equal(ip_prefix_parse("10.2.0.1/24", true, &p), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, v->if2, &p), 0);
	*state = v;
	return 0;
}

static int teardown(void **state)
{
	struct env *v = *state;

	fwd_engine_free(v->e);
	rt_destroy(v->rt);
	free(v);
	return 0;
}

/* The worker's side of a punt: a message of the punt's class (fwd_punt_classify, as
 * worker.c's do_punt), filled; NULL when the class has used its share. */
static struct fwd_msg *punt_msg(struct env *v, enum fwd_punt why, uint32_t ifindex,
				const uint8_t *data, size_t len, int family, const uint8_t *nh)
{
	uint32_t key;
	enum fwd_pclass c = fwd_punt_classify(v->e, why, false, data, len, 0, &key);
	struct fwd_msg *m = fwd_msg_get(v->e, 0, FWD_OWNER_WORKER, c);

	if (!m)
		return NULL;
	m->type = FWD_MSG_PUNT_ETH;
	m->punt = (uint8_t)why;
	m->ifindex = (uint16_t)ifindex;
	m->family = (uint8_t)family;
	if (nh)
		memcpy(m->nh, nh, family == AF_INET ? 4 : 16);
	if (len)
		memcpy(m->data, data, len);
	m->len = (uint32_t)len;
	return m;
}

static void to_ctl(struct env *v, struct fwd_msg *m)
{
	void *p = m;

	assert_int_equal(ring_enqueue_burst(fwd_engine_ring_to_ctl(v->e, 0), &p, 1), 1);
}

/* The worker's side: punt a message, then collect what control sent back. */
static void punt(struct env *v, enum fwd_punt why, uint32_t ifindex, const uint8_t *data,
		 size_t len, int family, const uint8_t *nh)
{
	struct fwd_msg *m = punt_msg(v, why, ifindex, data, len, family, nh);

	assert_non_null(m);
	to_ctl(v, m);
	fwd_sp_poll(v->e);
}

/* Next message for the worker that is not a returned punt; NULL if none. */
static struct fwd_msg *next_out(struct env *v)
{
	void *p;

	while (ring_dequeue_burst(fwd_engine_ring_to_worker(v->e, 0), &p, 1) == 1) {
		struct fwd_msg *m = p;

		if (m->owner == FWD_OWNER_WORKER && m->type != FWD_MSG_TX_IP) {
			fwd_msg_recycle(v->e, m);
			continue;
		}
		return m;
	}
	return NULL;
}

static void done(struct env *v, struct fwd_msg *m)
{
	fwd_msg_put(v->e, m, FWD_OWNER_WORKER);
	fwd_sp_poll(v->e); /* control takes it back */
}

static size_t arp_frame(uint8_t *f, const uint8_t *src_mac, uint16_t op, const char *spa,
			const char *tpa, const uint8_t *tha)
{
	size_t n;

	memset(f, 0xff, 6);
	memcpy(f + 6, src_mac, 6);
	f[12] = 0x08, f[13] = 0x06;
	n = arp_build(f + 14, 100, ARP_HTYPE_ETHER, op, src_mac, ip4(spa), tha, ip4(tpa));
	assert_true(n > 0);
	return 14 + n;
}

static void arp_for_us_answered_and_learned(void **state)
{
	struct env *v = *state;
	uint8_t f[128], a[4] = { 10, 1, 0, 2 };
	struct fwd_msg *m;
	struct arp_pkt r;
	const struct fwd_if *i1 = fwd_snap_if(fwd_engine_current(v->e), v->if1);
	struct neigh_entry *ne;

	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.1.0.2", "10.1.0.1", NULL), 0, NULL);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_ETH);
	assert_int_equal(m->ifindex, v->if1);
	assert_memory_equal(m->data, hmac, 6);
	assert_memory_equal(m->data + 6, mac1, 6);
	assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r), ARP_OK);
	assert_int_equal(r.op, ARP_OP_REPLY);
	assert_int_equal(r.spa, ip4("10.1.0.1"));
	assert_memory_equal(r.sha, mac1, 6);
	done(v, m);
	ne = neigh_lookup(i1->neigh, AF_INET, a);
	assert_non_null(ne);
	assert_int_equal(neigh_entry_state(ne), NEIGH_STALE);
	assert_memory_equal(neigh_entry_link(ne)->addr, hmac, 6);
}

static size_t ns_frame(uint8_t *f, size_t cap, const char *src, const char *target)
{
	struct ip_addr s, t;
	uint8_t sn[16];
	size_t n;

	assert_int_equal(ip_addr_parse(src, &s), 0);
	assert_int_equal(ip_addr_parse(target, &t), 0);
	nd_solicited_node(t.bytes, sn);
	nd_mcast_mac(sn, f);
	memcpy(f + 6, hmac, 6);
	f[12] = 0x86, f[13] = 0xdd;
	n = nd_build_ns(f + 14, cap - 14, ND_LINK_ETHER, s.bytes, NULL, t.bytes, hmac);
	assert_true(n > 0);
	return 14 + n;
}

/* The answer to a request for us: an ARP reply (IPv4) or an NA (IPv6) from eth1's MAC
 * to the asker's. */
static void answered_to_asker(struct env *v, int family)
{
	struct fwd_msg *m = next_out(v);
	struct arp_pkt r;

	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_ETH);
	assert_int_equal(m->ifindex, v->if1);
	assert_memory_equal(m->data, hmac, 6);
	assert_memory_equal(m->data + 6, mac1, 6);
	if (family == AF_INET) {
		assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r), ARP_OK);
		assert_int_equal(r.op, ARP_OP_REPLY);
		assert_int_equal(r.spa, ip4("10.1.0.1"));
	} else {
		assert_int_equal(m->data[12] << 8 | m->data[13], 0x86dd);
		assert_int_equal(m->data[14 + 40], 136); /* Neighbor Advertisement */
	}
	done(v, m);
	assert_null(next_out(v));
}

/* Tenants: eth3, in a tenant of its own, holds eth1's address 10.1.0.1 too. An ARP for it
 * on eth3 is answered there with eth3's MAC (before tenants, the first interface holding
 * the address won and eth3 stayed silent), and one on eth1 by eth1 alone. */
static void arp_answered_in_the_askers_tenant(void **state)
{
	struct env *v = *state;
	struct rt_config rc = { 0 };
	struct rt_table *blue;
	static const uint8_t mac3[6] = { 2, 0, 0, 0, 3, 1 };
	struct fwd_if_config c3 = { .name = "eth3",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&dummy_port,
				    .mac = mac3 };
	struct ip_prefix p;
	struct fwd_msg *m;
	struct arp_pkt r;
	uint32_t if3;
	uint8_t f[128];

	assert_int_equal(rt_create(&blue, &rc), 0);
	c3.rt = blue;
	assert_int_equal(fwd_engine_if_add(v->e, &c3, &if3), 0);
	assert_int_equal(fwd_engine_if_set_up(v->e, if3, true), 0);
	assert_int_equal(ip_prefix_parse("10.1.0.1/24", true, &p), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, if3, &p), 0);

	punt(v, FWD_PUNT_ARP, if3, f,
	     arp_frame(f, h2mac, ARP_OP_REQUEST, "10.1.0.2", "10.1.0.1", NULL), 0, NULL);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_ETH);
	assert_int_equal(m->ifindex, if3);
	assert_memory_equal(m->data + 6, mac3, 6);
	assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r), ARP_OK);
	assert_int_equal(r.op, ARP_OP_REPLY);
	assert_memory_equal(r.sha, mac3, 6);
	done(v, m);
	assert_null(next_out(v));

	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.1.0.2", "10.1.0.1", NULL), 0, NULL);
	answered_to_asker(v, AF_INET);

	assert_int_equal(fwd_engine_if_del(v->e, if3), 0);
	rt_destroy(blue);
}

static uint64_t learn_refused(struct env *v, uint32_t ifindex)
{
	struct neigh_stats st;

	neigh_table_stats(fwd_snap_if(fwd_engine_current(v->e), ifindex)->neigh, &st);
	return st.learn_refused;
}

static bool known(struct env *v, int family, const char *addr)
{
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(addr, &a), 0);
	assert_int_equal(a.family, family);
	return neigh_lookup(fwd_snap_if(fwd_engine_current(v->e), v->if1)->neigh, family,
			    a.bytes) != NULL;
}

/* The Ethernet learning guard (learn_create, issue 20): a request for us, ARP or an NS
 * with a source link-layer address, creates an entry for its sender only when the sender
 * is inside the receiving interface's subnets (its addresses, a route straight out of
 * it) or IPv6 link-local; else it is counted learn_refused and not learned, and the
 * request is answered all the same. A sender in another interface's subnet is off link
 * here too. */
static void learning_refused_off_link(void **state)
{
	struct env *v = *state;
	struct ip_prefix p6;
	struct rt_route r = { .source = RT_SRC_STATIC, .nnh = 1 };
	uint8_t f[160];

	assert_int_equal(ip_prefix_parse("fd00:1::1/64", true, &p6), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, v->if1, &p6), 0);

	/* ARP: off link, and in eth2's subnet, both asked on eth1. */
	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.9.0.7", "10.1.0.1", NULL), 0, NULL);
	answered_to_asker(v, AF_INET);
	assert_false(known(v, AF_INET, "10.9.0.7"));
	assert_int_equal(learn_refused(v, v->if1), 1);
	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.2.0.7", "10.1.0.1", NULL), 0, NULL);
	answered_to_asker(v, AF_INET);
	assert_false(known(v, AF_INET, "10.2.0.7"));
	assert_int_equal(learn_refused(v, v->if1), 2);
	assert_int_equal(learn_refused(v, v->if2), 0);
	/* On link: eth1's subnet, and a prefix routed straight out of eth1. */
	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.1.0.7", "10.1.0.1", NULL), 0, NULL);
	answered_to_asker(v, AF_INET);
	assert_true(known(v, AF_INET, "10.1.0.7"));
	assert_int_equal(ip_prefix_parse("10.7.0.0/24", false, &r.prefix), 0);
	r.nh[0] = (struct rt_nexthop){ .type = RT_NH_CONNECTED, .ifindex = v->if1 };
	assert_int_equal(rt_add(v->rt, &r), 0);
	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.7.0.7", "10.1.0.1", NULL), 0, NULL);
	answered_to_asker(v, AF_INET);
	assert_true(known(v, AF_INET, "10.7.0.7"));
	assert_int_equal(learn_refused(v, v->if1), 2);

	/* ND: an NS for our address with the asker's link-layer address. */
	punt(v, FWD_PUNT_ND, v->if1, f, ns_frame(f, sizeof(f), "fd00:9::7", "fd00:1::1"), 0, NULL);
	answered_to_asker(v, AF_INET6);
	assert_false(known(v, AF_INET6, "fd00:9::7"));
	assert_int_equal(learn_refused(v, v->if1), 3);
	punt(v, FWD_PUNT_ND, v->if1, f, ns_frame(f, sizeof(f), "fd00:1::7", "fd00:1::1"), 0, NULL);
	answered_to_asker(v, AF_INET6);
	assert_true(known(v, AF_INET6, "fd00:1::7"));
	punt(v, FWD_PUNT_ND, v->if1, f, ns_frame(f, sizeof(f), "fe80::7", "fd00:1::1"), 0, NULL);
	answered_to_asker(v, AF_INET6);
	assert_true(known(v, AF_INET6, "fe80::7"));
	assert_int_equal(learn_refused(v, v->if1), 3);

	/* Another host giving one of our own addresses as its source (a conflict or a
	 * spoof): neither learned nor answered, counted. */
	{
		struct fwd_sp_stats st;
		uint64_t before;

		fwd_sp_stats(v->e, &st);
		before = st.r[FWD_SP_OWN_CLAIMED];
		punt(v, FWD_PUNT_ARP, v->if1, f,
		     arp_frame(f, hmac, ARP_OP_REQUEST, "10.1.0.1", "10.1.0.7", NULL), 0, NULL);
		assert_null(next_out(v));
		assert_false(known(v, AF_INET, "10.1.0.1"));
		punt(v, FWD_PUNT_ND, v->if1, f, ns_frame(f, sizeof(f), "fd00:1::1", "fd00:1::1"), 0,
		     NULL);
		assert_null(next_out(v));
		assert_false(known(v, AF_INET6, "fd00:1::1"));
		fwd_sp_stats(v->e, &st);
		assert_int_equal(st.r[FWD_SP_OWN_CLAIMED], before + 2);
	}
}

static void proxy_arp_for_the_other_side_only(void **state)
{
	struct env *v = *state;
	struct fwd_proxy_config pc = { .proxy_arp = true, .defend_dad = true };
	uint8_t f[128];
	struct fwd_msg *m;
	struct arp_pkt r;
	struct fwd_sp_stats st;

	assert_int_equal(fwd_engine_if_set_proxy(v->e, v->if1, &pc), 0);
	/* A host on eth2 announces itself (reply to nobody: gratuitous) -> no entry without
	 * a request; so it answers our request first. */
	{
		const struct fwd_if *i2 = fwd_snap_if(fwd_engine_current(v->e), v->if2);
		struct neigh_link ll = { .len = 6, .usable = true };
		uint8_t a[4] = { 10, 1, 0, 50 };

		memcpy(ll.addr, h2mac, 6);
		assert_non_null(neigh_update(i2->neigh, AF_INET, a, &ll, NEIGH_F_CREATE));
	}
	/* Who has 10.1.0.50 (on eth2), asked on eth1: the gateway's MAC answers. */
	punt(v, FWD_PUNT_ARP, v->if1, f,
	     arp_frame(f, hmac, ARP_OP_REQUEST, "10.1.0.2", "10.1.0.50", NULL), 0, NULL);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r), ARP_OK);
	assert_int_equal(r.op, ARP_OP_REPLY);
	assert_int_equal(r.spa, ip4("10.1.0.50"));
	assert_memory_equal(r.sha, mac1, 6);
	done(v, m);
	/* Who has 10.1.0.2 (learned on eth1 itself), asked on eth1 by another host: no. */
	{
		const struct fwd_if *i1 = fwd_snap_if(fwd_engine_current(v->e), v->if1);
		struct neigh_link ll = { .len = 6, .usable = true };
		uint8_t a[4] = { 10, 1, 0, 2 };

		memcpy(ll.addr, hmac, 6);
		assert_non_null(neigh_update(i1->neigh, AF_INET, a, &ll, NEIGH_F_CREATE));
	}
	{
		uint8_t other[6] = { 2, 0, 0, 0, 1, 3 };

		punt(v, FWD_PUNT_ARP, v->if1, f,
		     arp_frame(f, other, ARP_OP_REQUEST, "10.1.0.3", "10.1.0.2", NULL), 0, NULL);
	}
	assert_null(next_out(v));
	fwd_sp_stats(v->e, &st);
	assert_int_equal(st.r[FWD_SP_PROXY_ANSWERED], 1);
	assert_true(st.proxy[PROXY_R_TARGET_ASKER_SIDE] >= 1);
	/* eth2 does not proxy: a request there for an eth1 address is ignored. */
	punt(v, FWD_PUNT_ARP, v->if2, f,
	     arp_frame(f, h2mac, ARP_OP_REQUEST, "10.1.0.50", "10.1.0.2", NULL), 0, NULL);
	/* ... but the sender, seen on eth2 for the first time through this request, now has
	 * a learned host route to eth2 and is announced on eth1 (gratuitous ARP, our MAC). */
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->ifindex, v->if1);
	assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r), ARP_OK);
	assert_int_equal(arp_classify(&r), ARP_KIND_ANNOUNCE);
	assert_int_equal(r.spa, ip4("10.1.0.50"));
	assert_memory_equal(r.sha, mac1, 6);
	done(v, m);
	assert_null(next_out(v));
	{
		struct ip_addr a;
		const struct rt_fib_nh *nh;

		assert_int_equal(ip_addr_parse("10.1.0.50", &a), 0);
		nh = rt_lookup(v->rt, &a, 0);
		assert_non_null(nh);
		assert_int_equal(nh->ifindex, v->if2);
	}
}

/* The next message control sent: an ARP request for tpa on eth2, to broadcast. */
static void expect_arp_request(struct env *v, const char *tpa)
{
	struct fwd_msg *m = next_out(v);
	struct arp_pkt r;

	assert_non_null(m);
	assert_int_equal(m->ifindex, v->if2);
	assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r), ARP_OK);
	assert_int_equal(r.op, ARP_OP_REQUEST);
	assert_int_equal(r.tpa, ip4(tpa));
	assert_int_equal(r.spa, ip4("10.2.0.1"));
	done(v, m);
}

static void parked_until_resolved(void **state)
{
	struct env *v = *state;
	uint8_t pkt[60] = { 0x45, 0, 0, 60, 0, 0, 0, 0, 64, 17 }, nh[4] = { 10, 2, 0, 9 };
	uint8_t f[128];
	struct fwd_msg *m;
	struct fwd_sp_stats st;

	memcpy(pkt + 16, nh, 4);
	punt(v, FWD_PUNT_UNRESOLVED, v->if2, pkt, sizeof(pkt), AF_INET, nh);
	expect_arp_request(v, "10.2.0.9");
	assert_null(next_out(v)); /* the packet waits */
	/* The answer releases it to the worker as TX_IP toward 10.2.0.9. */
	punt(v, FWD_PUNT_ARP, v->if2, f,
	     arp_frame(f, h2mac, ARP_OP_REPLY, "10.2.0.9", "10.2.0.1", mac2), 0, NULL);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_IP);
	assert_int_equal(m->owner, FWD_OWNER_WORKER); /* the worker's own punt, parked */
	assert_int_equal(m->ifindex, v->if2);
	assert_memory_equal(m->nh, nh, 4);
	assert_memory_equal(m->data, pkt, sizeof(pkt));
	fwd_msg_recycle(v->e, m);
	fwd_sp_stats(v->e, &st);
	assert_int_equal(st.r[FWD_SP_PARKED], 1);
	assert_int_equal(st.r[FWD_SP_RESOLVED_SENT], 1);
}

/* A packet too big for a message comes without it (worker.c do_punt, len 0): nothing
 * is parked or sent later, but the solicitation goes out, so that the next packets find
 * the neighbour resolved. */
static void too_big_still_resolves(void **state)
{
	struct env *v = *state;
	uint8_t nh[4] = { 10, 2, 0, 9 }, f[128];
	struct fwd_sp_stats st;

	punt(v, FWD_PUNT_UNRESOLVED, v->if2, NULL, 0, AF_INET, nh);
	expect_arp_request(v, "10.2.0.9");
	assert_null(next_out(v));
	/* The answer resolves it and releases nothing. */
	punt(v, FWD_PUNT_ARP, v->if2, f,
	     arp_frame(f, h2mac, ARP_OP_REPLY, "10.2.0.9", "10.2.0.1", mac2), 0, NULL);
	assert_null(next_out(v));
	fwd_sp_stats(v->e, &st);
	assert_int_equal(st.r[FWD_SP_PARKED], 0);
	assert_int_equal(st.r[FWD_SP_UNRES_DISCARDED], 1);
	assert_int_equal(st.r[FWD_SP_RESOLVED_SENT], 0);
}

static void echo_answered(void **state)
{
	struct env *v = *state;
	uint8_t p[64] = { 0x45, 0, 0,  40, 0x12, 0x34, 0, 0, 64, 1, 0, 0, 10, 1,
			  0,    2, 10, 1,  0,    1,    8, 0, 0,  0, 0, 1, 0,  7 };
	struct fwd_msg *m;

	ip_put16(p + 10, (uint16_t)~ip_csum_fold(ip_csum_add(0, p, 20)));
	ip_put16(p + 22, (uint16_t)~ip_csum_fold(ip_csum_add(0, p + 20, 20)));
	punt(v, FWD_PUNT_LOCAL, v->if1, p, 40, 0, NULL);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_IP);
	assert_true(m->own);
	assert_int_equal(m->ifindex, v->if1);
	assert_int_equal(m->data[20], 0); /* echo reply */
	assert_memory_equal(m->data + 16, p + 12, 4);
	assert_int_equal(ip_csum_fold(ip_csum_add(0, m->data, 20)), 0xffff);
	assert_int_equal(ip_csum_fold(ip_csum_add(0, m->data + 20, 20)), 0xffff);
	done(v, m);
}

struct udp_seen {
	unsigned n;
	uint32_t ifindex;
	struct ip_addr src, dst;
	uint16_t sport;
	uint8_t ttl;
	char payload[64];
};

static void udp_cb(void *ctx, uint32_t ifindex, const struct ip_addr *src,
		   const struct ip_addr *dst, uint16_t sport, uint8_t ttl, const uint8_t *payload,
		   size_t len)
{
	struct udp_seen *u = ctx;

	u->n++;
	u->ifindex = ifindex;
	u->src = *src;
	u->dst = *dst;
	u->sport = sport;
	u->ttl = ttl;
	snprintf(u->payload, sizeof(u->payload), "%.*s", (int)len, (const char *)payload);
}

/* The control thread's UDP (failover heartbeats) both ways, for each family: what
 * fwd_sp_send_udp hands the worker is a valid datagram out of the given interface to
 * the peer with TTL 255 (also when it waited for ARP first); the same bytes arriving for
 * our address reach the bound handler; a corrupted one, another port, and an IPv6
 * datagram without checksum do not. */
static void udp_both_ways(void **state)
{
	struct env *v = *state;
	struct udp_seen seen = { 0 };
	static const char *const fam[2][2] = { { "10.1.0.1", "10.1.0.9" },
					       { "fd00:1::1", "fd00:1::9" } };
	struct ip_prefix p6;
	uint8_t pkt[128];

	assert_int_equal(ip_prefix_parse("fd00:1::1/64", true, &p6), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, v->if1, &p6), 0);
	assert_int_equal(fwd_sp_udp_bind(v->e, 7789, udp_cb, &seen), 0);
	assert_int_equal(fwd_sp_udp_bind(v->e, 7790, udp_cb, &seen), -EBUSY);
	for (int f = 0; f < 2; f++) {
		struct ip_addr us, peer;
		struct fwd_msg *m;
		size_t len, hl = f ? 40 : 20;

		assert_int_equal(ip_addr_parse(fam[f][0], &us), 0);
		assert_int_equal(ip_addr_parse(fam[f][1], &peer), 0);
		if (f == 0) {
			/* The peer not known yet: ARP for it, the datagram parked meanwhile. */
			uint8_t fr[128];
			struct arp_pkt r;

			assert_int_equal(
			    fwd_sp_send_udp(v->e, v->if1, &us, &peer, 7789, 7789, "hello", 5), 0);
			m = next_out(v);
			assert_non_null(m);
			assert_int_equal(arp_parse(m->data + 14, m->len - 14, ARP_HTYPE_ETHER, &r),
					 ARP_OK);
			assert_int_equal(r.tpa, ip4("10.1.0.9"));
			done(v, m);
			assert_null(next_out(v));
			punt(v, FWD_PUNT_ARP, v->if1, fr,
			     arp_frame(fr, hmac, ARP_OP_REPLY, "10.1.0.9", "10.1.0.1", mac1), 0,
			     NULL);
		} else {
			/* Known: straight to the worker. */
			struct neigh_link ll = { .len = 6, .usable = true };

			memcpy(ll.addr, hmac, 6);
			assert_non_null(
			    neigh_update(fwd_snap_if(fwd_engine_current(v->e), v->if1)->neigh,
					 AF_INET6, peer.bytes, &ll, NEIGH_F_CREATE));
			assert_int_equal(
			    fwd_sp_send_udp(v->e, v->if1, &us, &peer, 7789, 7789, "hello", 5), 0);
		}
		m = next_out(v);
		assert_non_null(m);
		assert_int_equal(m->type, FWD_MSG_TX_IP);
		assert_true(m->own); /* released from the queue, it keeps TTL 255 below */
		assert_int_equal(m->ifindex, v->if1);
		assert_memory_equal(m->nh, peer.bytes, f ? 16 : 4);
		len = m->len;
		assert_int_equal(len, hl + 8 + 5);
		assert_int_equal(m->data[f ? 7 : 8], 255);
		memcpy(pkt, m->data, len);
		done(v, m);
		/* As the peer would send it to us: swap the addresses (checksum unchanged). */
		memcpy(pkt + (f ? 8 : 12), peer.bytes, f ? 16 : 4);
		memcpy(pkt + (f ? 24 : 16), us.bytes, f ? 16 : 4);
		punt(v, FWD_PUNT_LOCAL, v->if1, pkt, len, 0, NULL);
		assert_int_equal(seen.n, 1);
		assert_int_equal(seen.ifindex, v->if1);
		assert_true(ip_addr_equal(&seen.src, &peer));
		assert_true(ip_addr_equal(&seen.dst, &us));
		assert_int_equal(seen.sport, 7789);
		assert_int_equal(seen.ttl, 255);
		assert_string_equal(seen.payload, "hello");
		pkt[hl + 8] ^= 1; /* payload corrupted: the checksum no longer holds */
		punt(v, FWD_PUNT_LOCAL, v->if1, pkt, len, 0, NULL);
		pkt[hl + 8] ^= 1;
		pkt[hl + 3] ^= 1; /* another destination port */
		punt(v, FWD_PUNT_LOCAL, v->if1, pkt, len, 0, NULL);
		pkt[hl + 3] ^= 1;
		if (f) {
			pkt[hl + 6] = pkt[hl + 7] = 0; /* IPv6 needs its checksum */
			punt(v, FWD_PUNT_LOCAL, v->if1, pkt, len, 0, NULL);
		}
		assert_int_equal(seen.n, 1);
		seen.n = 0;
	}
	assert_int_equal(fwd_sp_send_udp(v->e, 99, &seen.src, &seen.dst, 1, 1, "x", 1), -ENODEV);
	assert_int_equal(fwd_sp_udp_bind(v->e, 0, NULL, NULL), 0);
}

/* The heartbeat channel (engine/heartbeat.h), this thread playing the worker's part
 * and the heartbeat thread's: a UDP punt to the bound port is CONTROL and goes to the
 * channel (fwd_ip_is_udp_to, as worker.c's do_punt asks), fwd_hb_poll hands it to fn
 * with its addresses, port and TTL and gives the message back to the worker; a corrupted
 * one is refused and given back too. A send to a peer not resolved says -EAGAIN (the
 * slow path's job); resolved, the worker gets an own IP packet with TTL 255 from the
 * channel's pool, whose messages come back and are all free at the end; the pool's
 * size bounds the sends in flight (-ENOBUFS, counted). */
static void heartbeat_channel(void **state)
{
	struct env *v = *state;
	struct ring *rx = fwd_engine_ring_hb(v->e, 0, false),
		    *tx = fwd_engine_ring_hb(v->e, 0, true);
	struct udp_seen seen = { 0 };
	struct ip_addr us, peer;
	struct neigh_link ll = { .len = 6, .usable = true };
	struct fwd_hb_stats st;
	struct fwd_msg *m, *held[FWD_HB_POOL];
	uint8_t pkt[128] = { 0 };
	uint32_t key;
	size_t len;
	void *p = NULL;

	assert_int_equal(ip_addr_parse("10.1.0.1", &us), 0);
	assert_int_equal(ip_addr_parse("10.1.0.9", &peer), 0);
	assert_int_equal(fwd_sp_udp_bind(v->e, 7790, udp_cb, &seen), 0);
	assert_false(fwd_hb_match(v->e, pkt, 0));           /* none bound */
	assert_int_equal(fwd_hb_bind(v->e, 7790), -EINVAL); /* the slow path's port */
	assert_int_equal(fwd_hb_bind(v->e, 7789), 0);
	assert_int_equal(fwd_hb_send_udp(v->e, v->if1, &us, &peer, 7789, 7789, "beat", 4), -EAGAIN);
	memcpy(ll.addr, hmac, 6);
	assert_non_null(neigh_update(fwd_snap_if(fwd_engine_current(v->e), v->if1)->neigh, AF_INET,
				     peer.bytes, &ll, NEIGH_F_CREATE));
	assert_int_equal(fwd_msg_pool_free(v->e, 0, FWD_OWNER_HB), FWD_HB_POOL);
	assert_int_equal(fwd_hb_send_udp(v->e, v->if1, &us, &peer, 7789, 7789, "beat", 4), 0);
	assert_int_equal(ring_dequeue_burst(tx, &p, 1), 1);
	m = p;
	assert_int_equal(m->owner, FWD_OWNER_HB);
	assert_int_equal(m->type, FWD_MSG_TX_IP);
	assert_true(m->own);
	assert_int_equal(m->ifindex, v->if1);
	assert_memory_equal(m->nh, peer.bytes, 4);
	assert_int_equal(m->data[8], 255);
	len = m->len;
	assert_int_equal(len, 20 + 8 + 4);
	memcpy(pkt, m->data, len);
	/* The worker sent it and gives it back; the poll takes it into the pool. */
	assert_int_equal(ring_enqueue_burst(rx, &p, 1), 1);
	assert_int_equal(fwd_hb_poll(v->e, udp_cb, &seen), 0);
	assert_int_equal(fwd_msg_pool_free(v->e, 0, FWD_OWNER_HB), FWD_HB_POOL);

	/* As the peer sends it to us: addresses swapped (the checksum holds). */
	memcpy(pkt + 12, peer.bytes, 4);
	memcpy(pkt + 16, us.bytes, 4);
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_LOCAL, false, pkt, len, 0, &key),
			 FWD_PCLASS_CONTROL);
	assert_true(fwd_hb_match(v->e, pkt, len));
	pkt[20 + 3] ^= 1; /* another port */
	assert_false(fwd_hb_match(v->e, pkt, len));
	pkt[20 + 3] ^= 1;
	for (int bad = 0; bad < 2; bad++) {
		m = punt_msg(v, FWD_PUNT_LOCAL, v->if1, pkt, len, 0, NULL);
		assert_non_null(m);
		if (bad)
			m->data[20 + 8] ^= 1; /* the payload no longer matches the checksum */
		p = m;
		assert_int_equal(ring_enqueue_burst(rx, &p, 1), 1);
		assert_int_equal(fwd_hb_poll(v->e, udp_cb, &seen), bad ? 0 : 1);
		assert_int_equal(seen.n, 1);
		/* Given back to the worker whatever became of it. */
		assert_int_equal(ring_dequeue_burst(tx, &p, 1), 1);
		assert_ptr_equal(p, m);
		assert_int_equal(m->owner, FWD_OWNER_WORKER);
		fwd_msg_recycle(v->e, m);
	}
	assert_int_equal(seen.ifindex, v->if1);
	assert_true(ip_addr_equal(&seen.src, &peer));
	assert_true(ip_addr_equal(&seen.dst, &us));
	assert_int_equal(seen.sport, 7789);
	assert_int_equal(seen.ttl, 255);
	assert_string_equal(seen.payload, "beat");

	/* No returns: the pool bounds the sends in flight. */
	for (unsigned i = 0; i < FWD_HB_POOL; i++)
		assert_int_equal(fwd_hb_send_udp(v->e, v->if1, &us, &peer, 7789, 7789, "beat", 4),
				 0);
	assert_int_equal(fwd_hb_send_udp(v->e, v->if1, &us, &peer, 7789, 7789, "beat", 4),
			 -ENOBUFS);
	assert_int_equal(ring_dequeue_burst(tx, (void **)held, FWD_HB_POOL), FWD_HB_POOL);
	assert_int_equal(ring_enqueue_burst(rx, (void **)held, FWD_HB_POOL), FWD_HB_POOL);
	assert_int_equal(fwd_hb_poll(v->e, udp_cb, &seen), 0);
	assert_int_equal(fwd_msg_pool_free(v->e, 0, FWD_OWNER_HB), FWD_HB_POOL);
	fwd_hb_stats(v->e, &st);
	assert_int_equal(st.delivered, 1);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.sent, 1 + FWD_HB_POOL);
	assert_int_equal(st.no_msg, 1);
	assert_int_equal(fwd_hb_bind(v->e, 0), 0);
	assert_int_equal(fwd_sp_udp_bind(v->e, 0, NULL, NULL), 0);
}

struct echo_seen {
	unsigned n;
	struct ip_addr from;
	uint16_t id, seq;
};

static void echo_cb_nop(void *ctx, const struct ip_addr *from, uint16_t id, uint16_t seq)
{
	(void)ctx, (void)from, (void)id, (void)seq;
}

static void echo_cb(void *ctx, const struct ip_addr *from, uint16_t id, uint16_t seq)
{
	struct echo_seen *e = ctx;

	e->n++;
	e->from = *from;
	e->id = id;
	e->seq = seq;
}

/* The tiebreaker's probe: an echo request routed by the RIB from our address on the
 * egress interface; its reply (the request turned around, as a host would) reaches the
 * bound handler; another identifier or a corrupted reply does not (they go to the echo
 * responder or are dropped). */
static void echo_probe(void **state)
{
	struct env *v = *state;
	struct echo_seen seen = { 0 };
	struct ip_addr tb, none;
	struct fwd_msg *m;
	uint8_t pkt[64], tmp[4];
	size_t len;

	assert_int_equal(ip_addr_parse("10.2.0.77", &tb), 0);
	assert_int_equal(ip_addr_parse("192.0.2.1", &none), 0);
	assert_int_equal(fwd_sp_echo_bind(v->e, 0x4242, echo_cb, &seen), 0);
	assert_int_equal(fwd_sp_send_echo(v->e, NULL, &none, 0x4242, 1), -ENETUNREACH);
	assert_int_equal(fwd_sp_send_echo(v->e, NULL, &tb, 0x4242, 7), 0);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_IP);
	assert_int_equal(m->ifindex, v->if2);
	assert_int_equal(ip_be32(m->data + 12), ip4("10.2.0.1"));
	assert_int_equal(m->data[20], 8);
	assert_int_equal(ip_csum_fold(ip_csum_add(0, m->data, 20)), 0xffff);
	assert_int_equal(ip_csum_fold(ip_csum_add(0, m->data + 20, m->len - 20)), 0xffff);
	len = m->len;
	memcpy(pkt, m->data, len);
	done(v, m);
	/* The reply: addresses swapped, type 0, checksum adjusted (8 -> 0 adds 0x0800). */
	memcpy(tmp, pkt + 12, 4);
	memcpy(pkt + 12, pkt + 16, 4);
	memcpy(pkt + 16, tmp, 4);
	pkt[20] = 0;
	pkt[22] = pkt[23] = 0;
	ip_put16(pkt + 22, (uint16_t)~ip_csum_fold(ip_csum_add(0, pkt + 20, len - 20)));
	punt(v, FWD_PUNT_LOCAL, v->if2, pkt, len, 0, NULL);
	assert_int_equal(seen.n, 1);
	assert_true(ip_addr_equal(&seen.from, &tb));
	assert_int_equal(seen.id, 0x4242);
	assert_int_equal(seen.seq, 7);
	pkt[30] ^= 0xff; /* corrupted */
	punt(v, FWD_PUNT_LOCAL, v->if2, pkt, len, 0, NULL);
	assert_int_equal(seen.n, 1);
	assert_int_equal(fwd_sp_echo_bind(v->e, 0, NULL, NULL), 0);
}

/* ---- Router Solicitations (gateway/dp_ra.c's input) ---- */

struct rs_seen {
	unsigned n;
	uint32_t ifindex;
	uint8_t src[16], mac[6];
	bool sllao;
};

static void rs_cb(void *ctx, uint32_t ifindex, const struct nd_msg *rs, const uint8_t *src_mac)
{
	struct rs_seen *s = ctx;

	s->n++;
	s->ifindex = ifindex;
	memcpy(s->src, rs->src, 16);
	memcpy(s->mac, src_mac, 6);
	s->sllao = rs->sllao != NULL;
}

/* An RS frame from hmac (ll source fe80::1, to ff02::2), with or without its option. */
static size_t rs_frame(uint8_t *f, bool opt, uint8_t hop)
{
	uint8_t *ip = f + 14, *ic = ip + 40;
	size_t ilen = 8 + (opt ? 8 : 0);
	uint64_t sum;

	memset(f, 0, 14 + 40 + ilen);
	memcpy(f, (const uint8_t[]){ 0x33, 0x33, 0, 0, 0, 2 }, 6);
	memcpy(f + 6, hmac, 6);
	f[12] = 0x86, f[13] = 0xdd;
	ip[0] = 0x60;
	ip[5] = (uint8_t)ilen;
	ip[6] = 58;
	ip[7] = hop;
	ip[8] = 0xfe, ip[9] = 0x80, ip[23] = 1;
	memcpy(ip + 24, nd_all_routers, 16);
	ic[0] = ND_RS;
	if (opt) {
		ic[8] = ND_OPT_SLLA;
		ic[9] = 1;
		memcpy(ic + 10, hmac, 6);
	}
	sum = ip6_pseudo_sum(ip + 8, ip + 24, (uint32_t)ilen, 58);
	ip_put16(ic + 2, (uint16_t)~ip_csum_fold(ip_csum_add(sum, ic, ilen)));
	return 14 + 40 + ilen;
}

/* A valid RS punted on an Ethernet interface reaches the bound handler with the
 * interface and the frame's source MAC; an invalid one (hop limit 254) and one with
 * nobody bound do not; the slow path itself sends nothing for it. */
static void rs_handler(void **state)
{
	struct env *v = *state;
	struct rs_seen seen = { 0 };
	uint8_t f[128];
	size_t n;

	fwd_sp_rs_bind(v->e, rs_cb, &seen);
	n = rs_frame(f, true, 255);
	punt(v, FWD_PUNT_ND, v->if2, f, n, 0, NULL);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.ifindex, v->if2);
	assert_memory_equal(seen.mac, hmac, 6);
	assert_true(seen.sllao);
	assert_int_equal(seen.src[0], 0xfe);
	assert_null(next_out(v));
	n = rs_frame(f, false, 255);
	punt(v, FWD_PUNT_ND, v->if1, f, n, 0, NULL);
	assert_int_equal(seen.n, 2);
	assert_int_equal(seen.ifindex, v->if1);
	assert_false(seen.sllao);
	n = rs_frame(f, true, 254);
	punt(v, FWD_PUNT_ND, v->if1, f, n, 0, NULL);
	assert_int_equal(seen.n, 2);
	fwd_sp_rs_bind(v->e, NULL, NULL);
	n = rs_frame(f, true, 255);
	punt(v, FWD_PUNT_ND, v->if1, f, n, 0, NULL);
	assert_int_equal(seen.n, 2);
}

/* ---- DHCP relay (gateway/dp_dhcp.c's input and sends) ---- */

struct dhcp_seen {
	unsigned n;
	uint32_t ifindex;
	uint16_t sport;
	size_t len;
};

static void dhcp_cb(void *ctx, uint32_t ifindex, const struct ip_addr *src,
		    const struct ip_addr *dst, uint16_t sport, const uint8_t *payload, size_t len)
{
	struct dhcp_seen *s = ctx;

	(void)src;
	(void)dst;
	(void)payload;
	s->n++;
	s->ifindex = ifindex;
	s->sport = sport;
	s->len = len;
}

/* UDP to port 67 for us reaches the bound handler from any interface (a server's reply
 * to giaddr arrives where the servers are); another port does not; unbound, nothing.
 * The link-layer sends: a broadcast frame, a frame to a given MAC. */
static void dhcp_hook_and_sends(void **state)
{
	struct env *v = *state;
	struct dhcp_seen seen = { 0 };
	struct ip_addr src, dst, bc;
	uint8_t pkt[400], payload[300] = { 2 };
	static const uint8_t cmac[6] = { 2, 0, 0, 0, 1, 9 };
	struct fwd_udp u;
	struct fwd_msg *m;
	size_t n;

	assert_int_equal(ip_addr_parse("10.1.0.9", &src), 0);
	assert_int_equal(ip_addr_parse("10.2.0.1", &dst), 0);
	assert_int_equal(ip_addr_parse("255.255.255.255", &bc), 0);
	fwd_sp_dhcp_bind(v->e, 1u << v->if2, dhcp_cb, &seen);
	assert_int_equal(atomic_load(&v->e->dhcp_ifmask), 1u << v->if2);
	n = fwd_udp_build(pkt, sizeof(pkt), &src, &dst, 67, 67, payload, sizeof(payload));
	punt(v, FWD_PUNT_LOCAL, v->if1, pkt, n, 0, NULL);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.ifindex, v->if1);
	assert_int_equal(seen.sport, 67);
	assert_int_equal(seen.len, sizeof(payload));
	n = fwd_udp_build(pkt, sizeof(pkt), &src, &dst, 67, 68, payload, sizeof(payload));
	punt(v, FWD_PUNT_LOCAL, v->if1, pkt, n, 0, NULL);
	assert_int_equal(seen.n, 1);

	/* Broadcast on if1: ff:ff:ff:ff:ff:ff from its MAC, a valid UDP datagram. */
	assert_int_equal(ip_addr_parse("10.1.0.1", &src), 0);
	assert_int_equal(
	    fwd_sp_send_udp_ll(v->e, v->if1, &src, &bc, 67, 68, payload, sizeof(payload), NULL), 0);
	m = next_out(v);
	assert_non_null(m);
	assert_int_equal(m->type, FWD_MSG_TX_ETH);
	assert_memory_equal(m->data, "\xff\xff\xff\xff\xff\xff", 6);
	assert_memory_equal(m->data + 6, mac1, 6);
	assert_int_equal(m->data[12] << 8 | m->data[13], 0x0800);
	assert_true(fwd_udp_parse(m->data + 14, m->len - 14, &u));
	assert_int_equal(u.sport, 67);
	assert_int_equal(u.dport, 68);
	assert_int_equal(u.len, sizeof(payload));
	assert_true(ip_addr_equal(&u.dst, &bc));
	done(v, m);
	/* Unicast to a given MAC, no neighbour resolution. */
	assert_int_equal(ip_addr_parse("10.1.0.50", &dst), 0);
	assert_int_equal(
	    fwd_sp_send_udp_ll(v->e, v->if1, &src, &dst, 67, 68, payload, sizeof(payload), cmac),
	    0);
	m = next_out(v);
	assert_non_null(m);
	assert_memory_equal(m->data, cmac, 6);
	assert_true(fwd_udp_parse(m->data + 14, m->len - 14, &u));
	assert_true(ip_addr_equal(&u.dst, &dst));
	done(v, m);

	fwd_sp_dhcp_bind(v->e, 0, NULL, NULL);
	assert_int_equal(atomic_load(&v->e->dhcp_ifmask), 0);
	n = fwd_udp_build(pkt, sizeof(pkt), &src, &dst, 67, 67, payload, sizeof(payload));
	punt(v, FWD_PUNT_LOCAL, v->if1, pkt, n, 0, NULL);
	assert_int_equal(seen.n, 1);
}

/* ---- punt classes (issue 20) ---- */

/* An IPv4 UDP datagram src -> dst to dport (valid checksums); id in its payload. */
static size_t udp4(uint8_t *p, const char *src, const char *dst, uint16_t dport, uint8_t id)
{
	struct ip_addr s, d;
	size_t hl;
	uint8_t *u;

	assert_int_equal(ip_addr_parse(src, &s), 0);
	assert_int_equal(ip_addr_parse(dst, &d), 0);
	hl = ip_hdr_build(p, AF_INET, s.bytes, d.bytes, 17, 64, 8 + 4, false);
	u = p + hl;
	ip_put16(u, 40000);
	ip_put16(u + 2, dport);
	ip_put16(u + 4, 12);
	ip_put16(u + 6, 0);
	u[8] = id, u[9] = u[10] = u[11] = 0;
	ip_put16(u + 6, (uint16_t)~ip_csum_fold(
			    ip_csum_add(ip4_pseudo_sum(s.bytes, d.bytes, 12, 17), u, 12)));
	return hl + 12;
}

/* Everything waiting for the worker handed back (the test plays the worker). */
static void drain_out(struct env *v)
{
	struct fwd_msg *m;

	while ((m = next_out(v)) != NULL) {
		if (m->owner == FWD_OWNER_WORKER)
			fwd_msg_recycle(v->e, m); /* a released parked packet, "sent" */
		else
			done(v, m);
	}
}

/* What the worker classifies how, and the sources it tells apart. */
static void punt_classes_and_sources(void **state)
{
	struct env *v = *state;
	struct udp_seen seen = { 0 };
	uint8_t a[64], b[64], f[128];
	uint32_t ka, kb, k;

	udp4(a, "10.1.0.66", "10.2.0.100", 53, 0);
	udp4(b, "10.1.0.67", "10.2.0.100", 53, 0);
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_UNRESOLVED, false, a, 32, 0, &ka),
			 FWD_PCLASS_UNRES);
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_UNRESOLVED, false, b, 32, 0, &kb),
			 FWD_PCLASS_UNRES);
	assert_true(ka != kb && ka && kb);
	udp4(b, "10.1.0.66", "10.2.0.101", 7789, 0); /* same source, other destination */
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_UNRESOLVED, false, b, 32, 0, &k),
			 FWD_PCLASS_UNRES);
	assert_int_equal(k, ka);
	/* UDP to us: LOCAL, CONTROL once its port is the bound one (the heartbeats'). */
	udp4(b, "10.1.0.9", "10.1.0.1", 7789, 0);
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_LOCAL, false, b, 32, 0, &k),
			 FWD_PCLASS_LOCAL);
	assert_int_equal(fwd_sp_udp_bind(v->e, 7789, udp_cb, &seen), 0);
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_LOCAL, false, b, 32, 0, &k),
			 FWD_PCLASS_CONTROL);
	udp4(b, "10.1.0.9", "10.1.0.1", 7790, 0);
	assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_LOCAL, false, b, 32, 0, &k),
			 FWD_PCLASS_LOCAL);
	/* Echo replies with the tiebreaker's identifier: CONTROL; requests: LOCAL. */
	{
		uint8_t e[28] = { 0x45, 0,  0,  28, 0, 0, 0, 0, 64, 1, 0,    0,    10, 2,
				  0,    77, 10, 2,  0, 1, 0, 0, 0,  0, 0x42, 0x42, 0,  1 };

		assert_int_equal(fwd_sp_echo_bind(v->e, 0x4242, echo_cb_nop, NULL), 0);
		assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_LOCAL, false, e, 28, 0, &k),
				 FWD_PCLASS_CONTROL);
		e[20] = 8;
		assert_int_equal(fwd_punt_classify(v->e, FWD_PUNT_LOCAL, false, e, 28, 0, &k),
				 FWD_PCLASS_LOCAL);
		assert_int_equal(fwd_sp_echo_bind(v->e, 0, NULL, NULL), 0);
	}
	/* ARP: NEIGH, by the sender's MAC. */
	assert_int_equal(
	    fwd_punt_classify(v->e, FWD_PUNT_ARP, false, f,
			      arp_frame(f, hmac, ARP_OP_REPLY, "10.1.0.2", "10.1.0.1", mac1), 0,
			      &ka),
	    FWD_PCLASS_NEIGH);
	assert_int_equal(
	    fwd_punt_classify(v->e, FWD_PUNT_ARP, false, f,
			      arp_frame(f, h2mac, ARP_OP_REPLY, "10.1.0.2", "10.1.0.1", mac1), 0,
			      &kb),
	    FWD_PCLASS_NEIGH);
	assert_true(ka != kb);
	assert_int_equal(fwd_sp_udp_bind(v->e, 0, NULL, NULL), 0);
}

/* The default limits: one source gets its burst (200) and then 100/s; a second source
 * meanwhile gets its own; the worker's total for the class (1000 at once) holds for
 * many sources; CONTROL is never limited. */
static void rate_limit_per_source(void **state)
{
	struct env *v = *state;
	struct fwd_punt_config c;
	struct fwd_punt_rl *rl = calloc(1, sizeof(*rl));
	uint8_t a[64];
	uint32_t ka, kb;
	uint64_t t0 = 5000000000ull;
	unsigned n = 0;

	assert_non_null(rl);
	fwd_punt_defaults(&c, 256);
	fwd_punt_rl_init(rl, &c);
	udp4(a, "10.1.0.66", "10.2.0.100", 53, 0);
	(void)fwd_punt_classify(v->e, FWD_PUNT_UNRESOLVED, false, a, 32, 0, &ka);
	udp4(a, "10.1.0.67", "10.2.0.100", 53, 0);
	(void)fwd_punt_classify(v->e, FWD_PUNT_UNRESOLVED, false, a, 32, 0, &kb);
	for (unsigned i = 0; i < 1000; i++)
		n += fwd_punt_rl_allow(rl, FWD_PCLASS_UNRES, ka, t0);
	assert_int_equal(n, 200);
	assert_false(fwd_punt_rl_allow(rl, FWD_PCLASS_UNRES, ka, t0 + 5000000)); /* 5 ms */
	n = 0;
	for (unsigned i = 0; i < 50; i++)
		n += fwd_punt_rl_allow(rl, FWD_PCLASS_UNRES, kb, t0 + 5000000);
	assert_int_equal(n, 50); /* the second source is not held back by the first */
	n = 0;
	for (unsigned i = 0; i < 1000; i++)
		n += fwd_punt_rl_allow(rl, FWD_PCLASS_UNRES, ka, t0 + 1000000000ull);
	assert_int_equal(n, 100); /* one second later: 100 more */
	/* Many sources at once: the class's total per worker (1000 burst) caps them. */
	fwd_punt_rl_init(rl, &c);
	n = 0;
	for (uint32_t i = 0; i < 1500; i++)
		n += fwd_punt_rl_allow(rl, FWD_PCLASS_UNRES, 0x9e3779b9u * (i + 1) | 1, t0);
	assert_int_equal(n, 1000);
	for (unsigned i = 0; i < 5000; i++)
		assert_true(fwd_punt_rl_allow(rl, FWD_PCLASS_CONTROL, ka, t0));
	free(rl);
}

/* A scan from one source has used the UNRES share of the worker's pool (its punts wait
 * for a busy control thread): a heartbeat and an ARP reply from another
 * host still find messages, and the slow path handles them; of the scan, park_max
 * packets are parked and the rest discarded (resolution started all the same); parked
 * packets then hold only park_max of the share. */
static void scan_leaves_the_other_classes_their_share(void **state)
{
	struct env *v = *state;
	struct udp_seen seen = { 0 };
	struct fwd_msg *scan[300], *m;
	struct fwd_sp_stats st;
	unsigned n = 0, more = 0;
	uint8_t p[64], f[128];
	char dst[32];
	const struct fwd_if *i2 = fwd_snap_if(fwd_engine_current(v->e), v->if2);

	assert_int_equal(fwd_sp_udp_bind(v->e, 7789, udp_cb, &seen), 0);
	/* The scan: one source, a new destination each. */
	for (;;) {
		uint8_t nh[4] = { 10, 2, 0, (uint8_t)(100 + n) };

		snprintf(dst, sizeof(dst), "10.2.0.%u", 100 + n);
		udp4(p, "10.1.0.66", dst, 53, (uint8_t)n);
		m = punt_msg(v, FWD_PUNT_UNRESOLVED, v->if2, p, 32, AF_INET, nh);
		if (!m)
			break;
		scan[n++] = m;
		assert_true(n < 150);
	}
	assert_int_equal(n, 64); /* the UNRES cap of a pool of 256 */
	for (unsigned i = 0; i < n; i++)
		to_ctl(v, scan[i]);
	/* The heartbeat. */
	udp4(p, "10.1.0.9", "10.1.0.1", 7789, 1);
	m = punt_msg(v, FWD_PUNT_LOCAL, v->if1, p, 32, 0, NULL);
	assert_non_null(m);
	assert_int_equal(m->cls, FWD_PCLASS_CONTROL);
	to_ctl(v, m);
	/* An ARP reply from another host, one of those the scan made us resolve (the last:
	 * not parked, its resolution started all the same). */
	m = punt_msg(v, FWD_PUNT_ARP, v->if2, f,
		     arp_frame(f, h2mac, ARP_OP_REPLY, "10.2.0.163", "10.2.0.1", mac2), 0, NULL);
	assert_non_null(m);
	assert_int_equal(m->cls, FWD_PCLASS_NEIGH);
	to_ctl(v, m);

	fwd_sp_poll(v->e);
	fwd_sp_stats(v->e, &st);
	assert_int_equal(st.msgs, 64 + 2);
	assert_int_equal(seen.n, 1);
	{
		uint8_t a[4] = { 10, 2, 0, 163 };
		struct neigh_entry *ne = neigh_lookup(i2->neigh, AF_INET, a);

		assert_non_null(ne);
		assert_int_equal(neigh_entry_state(ne), NEIGH_REACHABLE);
	}
	assert_int_equal(st.r[FWD_SP_PARKED], 32);
	assert_int_equal(st.r[FWD_SP_PARK_LIMITED], 32);
	assert_int_equal(st.r[FWD_SP_UNRES_DISCARDED], 32);
	assert_int_equal(st.r[FWD_SP_RESOLVED_SENT], 0);
	drain_out(v);
	fwd_sp_poll(v->e);
	/* The parked hold 32 of the 64: 32 more fit, then none. */
	while ((m = fwd_msg_get(v->e, 0, FWD_OWNER_WORKER, FWD_PCLASS_UNRES)) != NULL)
		scan[more++] = m;
	assert_int_equal(more, 32);
	while (more)
		fwd_msg_recycle(v->e, scan[--more]);
	assert_int_equal(fwd_sp_udp_bind(v->e, 0, NULL, NULL), 0);
}

/* Per destination: a queue of unres_qlen (3); a fourth and fifth packet drop the oldest
 * (counted); the answer releases the three newest. */
static void parked_bounded_per_destination(void **state)
{
	struct env *v = *state;
	struct fwd_sp_stats st;
	struct fwd_msg *m;
	uint8_t p[64], f[128], nh[4] = { 10, 2, 0, 50 };
	unsigned got = 0;

	for (uint8_t i = 0; i < 5; i++) {
		udp4(p, "10.1.0.66", "10.2.0.50", 53, i);
		punt(v, FWD_PUNT_UNRESOLVED, v->if2, p, 32, AF_INET, nh);
	}
	fwd_sp_stats(v->e, &st);
	assert_int_equal(st.r[FWD_SP_PARKED], 5);
	assert_int_equal(st.r[FWD_SP_UNRES_DROPPED], 2);
	/* Drain the solicitation and the ICMP errors, then answer. */
	while ((m = next_out(v)) != NULL)
		done(v, m);
	punt(v, FWD_PUNT_ARP, v->if2, f,
	     arp_frame(f, h2mac, ARP_OP_REPLY, "10.2.0.50", "10.2.0.1", mac2), 0, NULL);
	while ((m = next_out(v)) != NULL) {
		if (m->type == FWD_MSG_TX_IP && m->owner == FWD_OWNER_WORKER) {
			assert_int_equal(m->data[28], 2 + got); /* ids 2, 3, 4: the newest */
			got++;
			fwd_msg_recycle(v->e, m);
		} else {
			done(v, m);
		}
	}
	assert_int_equal(got, 3);
	assert_int_equal(fwd_msg_pool_free(v->e, 0, FWD_OWNER_WORKER), 256);
}

/* ---- IB post hooks while no worker runs ---- */

static void ib_post_hooks_without_workers(void **state)
{
	struct env *v = *state;
	struct fwd_if_config c = { .name = "eth3",
				   .kind = FWD_IF_ETH,
				   .mtu = 1500,
				   .eth_ops = &ethp_afpacket_ops,
				   .eth = (struct ethp_port *)&dummy_port,
				   .mac = mac1 };
	struct ibp_send s = { 0 };
	uint32_t r, x, r2;

	/* A reserved index is not given to another interface; it is added by name. */
	assert_int_equal(fwd_engine_if_reserve(v->e, &r), 0);
	assert_true(r != v->if1 && r != v->if2);
	assert_non_null(fwd_engine_if_post_ctx(v->e, r));
	assert_null(fwd_engine_if_post_ctx(v->e, 0));
	assert_int_equal(fwd_engine_if_add(v->e, &c, &x), 0);
	assert_true(x != r);
	assert_int_equal(fwd_engine_if_del(v->e, x), 0);
	c.index = r + 1 < FWD_IF_MAX ? r + 1 : 1; /* not reserved */
	assert_int_equal(fwd_engine_if_add(v->e, &c, &x), -EINVAL);
	/* Not added yet: nothing to post with. */
	assert_int_equal(fwd_engine_ib_post_send(fwd_engine_if_post_ctx(v->e, r), &s), 0);
	/* Released, then reserved again. */
	assert_int_equal(fwd_engine_if_del(v->e, r), 0);
	assert_int_equal(fwd_engine_if_reserve(v->e, &r2), 0);
	assert_int_equal(r2, r);
	c.index = r;
	assert_int_equal(fwd_engine_if_add(v->e, &c, &x), 0);
	assert_int_equal(x, r);
	assert_int_equal(fwd_engine_if_del(v->e, x), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(arp_for_us_answered_and_learned, setup, teardown),
		cmocka_unit_test_setup_teardown(arp_answered_in_the_askers_tenant, setup, teardown),
		cmocka_unit_test_setup_teardown(learning_refused_off_link, setup, teardown),
		cmocka_unit_test_setup_teardown(proxy_arp_for_the_other_side_only, setup, teardown),
		cmocka_unit_test_setup_teardown(parked_until_resolved, setup, teardown),
		cmocka_unit_test_setup_teardown(too_big_still_resolves, setup, teardown),
		cmocka_unit_test_setup_teardown(echo_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(udp_both_ways, setup, teardown),
		cmocka_unit_test_setup_teardown(heartbeat_channel, setup, teardown),
		cmocka_unit_test_setup_teardown(echo_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(rs_handler, setup, teardown),
		cmocka_unit_test_setup_teardown(dhcp_hook_and_sends, setup, teardown),
		cmocka_unit_test_setup_teardown(ib_post_hooks_without_workers, setup, teardown),
		cmocka_unit_test_setup_teardown(punt_classes_and_sources, setup, teardown),
		cmocka_unit_test_setup_teardown(rate_limit_per_source, setup, teardown),
		cmocka_unit_test_setup_teardown(scan_leaves_the_other_classes_their_share, setup,
						teardown),
		cmocka_unit_test_setup_teardown(parked_bounded_per_destination, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
