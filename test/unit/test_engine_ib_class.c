/*
 * The share of the control thread's message pool an IPoIB link's send takes while the
 * workers run (engine/engine.c, fwd_engine_ib_post_send and its ib_send_class). The link
 * encapsulates ARP/ND answers, solicitations, parked packets and the gateway's own IP
 * with no word of why, so the failover pair's heartbeats (UDP to the bound port) and the
 * tiebreaker's echo requests (the bound identifier) are told by content: they take the
 * CONTROL class, whose reserve a burst of ARP/ND answers cannot use; everything else
 * takes NEIGH. Both kinds reach the link when they waited for the IPoIB neighbour's
 * resolution (slow path's unresolved: parked in the link, released through its post).
 *
 * One worker thread runs (worker 1, polling nothing) so that the hook goes through the
 * rings; the link's interface is worker 0's, which this test plays: it reads what the
 * hook queued for it. No link is needed: the hook's context is the interface's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/engine.h"
#include "engine/ring.h"
#include "engine/slowpath.h"
#include "engine/worker.h"
#include "pkt/arp.h"
#include "pkt/ip.h"
#include "table/neigh.h"
#include "table/route.h"
#include "lib/addr.h"
#include "lib/ipoib.h"

/* gateway/dp_ha.c's HA_UDP_PORT and TB_ECHO_ID: the heartbeats' port, the tiebreaker's
 * echo identifier. */
#define HB_PORT 7789
#define TB_ID   0x6962

static unsigned direct_posts;

static int f_post_send(unsigned queue, struct ibp_send *s, unsigned n)
{
	(void)s, (void)queue;
	direct_posts += n; /* only while no worker runs */
	return (int)n;
}

static unsigned f_queues(struct ibp_port *port)
{
	(void)port;
	return 1;
}

static int f_cq_fd(struct ibp_port *port, unsigned queue)
{
	(void)port, (void)queue;
	return -1;
}

/* The worker looks at the port's queues (rescan), never polls them: no receive here. */
static const struct ibp_ops fake_ib = {
	.name = "fake", .queues = f_queues, .cq_fd = f_cq_fd, .post_send = f_post_send
};
static int dummy_port;

static void nsol(void *c, const struct neigh_entry *e, const struct neigh_link *l)
{
	(void)c, (void)e, (void)l;
}
static void nxmit(void *c, const struct neigh_entry *e, const struct neigh_link *l, void *p)
{
	(void)c, (void)e, (void)l, (void)p;
}
static void ndrop(void *c, void *p)
{
	(void)c, (void)p;
}
static const struct neigh_ops nops = { .solicit = nsol, .xmit = nxmit, .drop = ndrop };

struct env {
	struct rt_table *rt;
	struct fwd_engine *e;
	struct neigh_table *nt;
	uint32_t ib;
	void *hook;
	struct ibp_buf bufs[512];
	uint8_t mem[512][128];
	unsigned nbuf;
};

static void udp_cb(void *ctx, uint32_t ifindex, const struct ip_addr *src,
		   const struct ip_addr *dst, uint16_t sport, uint8_t ttl, const uint8_t *payload,
		   size_t len)
{
	(void)ctx, (void)ifindex, (void)src, (void)dst, (void)sport, (void)ttl, (void)payload;
	(void)len;
}

static void echo_cb(void *ctx, const struct ip_addr *from, uint16_t id, uint16_t seq)
{
	(void)ctx, (void)from, (void)id, (void)seq;
}

static int setup(void **state)
{
	struct env *v = calloc(1, sizeof(*v));
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 2, .flow_seed = 3 };
	struct neigh_config nc = { .ops = &nops };
	struct fwd_if_config c = { .name = "ib0",
				   .kind = FWD_IF_IPOIB,
				   .worker = 0,
				   .mtu = 2044,
				   .ib_ops = &fake_ib,
				   .ib_port = (struct ibp_port *)&dummy_port };

	assert_non_null(v);
	assert_int_equal(rt_create(&v->rt, &rc), 0);
	ec.rt = v->rt;
	assert_int_equal(fwd_engine_new(&ec, &v->e), 0);
	assert_int_equal(neigh_table_new(&nc, &v->nt), 0);
	c.neigh = v->nt;
	assert_int_equal(fwd_engine_if_add(v->e, &c, &v->ib), 0);
	v->hook = fwd_engine_if_post_ctx(v->e, v->ib);
	assert_non_null(v->hook);
	assert_int_equal(fwd_sp_udp_bind(v->e, HB_PORT, udp_cb, NULL), 0);
	assert_int_equal(fwd_sp_echo_bind(v->e, TB_ID, echo_cb, NULL), 0);
	/* Worker 1 runs: the control thread is no longer alone on the ports. */
	assert_int_equal(fwd_worker_start(v->e, 1, NULL), 0);
	direct_posts = 0;
	*state = v;
	return 0;
}

static int teardown(void **state)
{
	struct env *v = *state;

	fwd_worker_stop_all(v->e);
	fwd_engine_free(v->e);
	neigh_table_free(v->nt);
	rt_destroy(v->rt);
	free(v);
	return 0;
}

/* A buffer as the link hands it to its post: the IPoIB header, then the payload. */
static struct ibp_buf *encap(struct env *v, uint16_t ethertype, const uint8_t *pl, size_t n)
{
	struct ibp_buf *b;

	assert_true(v->nbuf < 512 && n + IPOIB_ENCAP_LEN <= 128);
	b = &v->bufs[v->nbuf];
	*b = (struct ibp_buf){ .data = v->mem[v->nbuf], .cap = 128, .id = v->nbuf };
	v->nbuf++;
	ip_put16(b->data, ethertype);
	ip_put16(b->data + 2, 0);
	memcpy(b->data + IPOIB_ENCAP_LEN, pl, n);
	b->len = (uint32_t)(n + IPOIB_ENCAP_LEN);
	return b;
}

static void addr(const char *s, uint8_t *out)
{
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(s, &a), 0);
	memcpy(out, a.bytes, a.family == AF_INET ? 4 : 16);
}

/* A UDP datagram src -> dst (either family), ports sport -> dport, 8 octets of payload. */
static size_t udp(uint8_t *p, const char *src, const char *dst, uint16_t sport, uint16_t dport)
{
	uint8_t s[16], d[16];
	int family = strchr(src, ':') ? AF_INET6 : AF_INET;
	size_t hl;

	addr(src, s);
	addr(dst, d);
	hl = ip_hdr_build(p, family, s, d, 17, 64, 16, false);
	ip_put16(p + hl, sport);
	ip_put16(p + hl + 2, dport);
	ip_put16(p + hl + 4, 16);
	ip_put16(p + hl + 6, 0);
	memcpy(p + hl + 8, "hb-msg!", 8);
	return hl + 16;
}

/* An echo (ICMP type 8/0, ICMPv6 128/129) with identifier id. */
static size_t echo(uint8_t *p, const char *src, const char *dst, bool request, uint16_t id)
{
	uint8_t s[16], d[16];
	int family = strchr(src, ':') ? AF_INET6 : AF_INET;
	size_t hl;

	addr(src, s);
	addr(dst, d);
	hl = ip_hdr_build(p, family, s, d, family == AF_INET ? 1 : 58, 64, 16, false);
	memset(p + hl, 0, 16);
	p[hl] = family == AF_INET ? (request ? 8 : 0) : (request ? 128 : 129);
	ip_put16(p + hl + 4, id);
	ip_put16(p + hl + 6, 1);
	return hl + 16;
}

static size_t arp(uint8_t *p)
{
	uint8_t sha[IPOIB_HWADDR_LEN] = { 0, 0, 0, 0x48, 0xfe, 0x80, [19] = 5 };

	return arp_build(p, ARP_MAX_LEN, ARP_HTYPE_IB, ARP_OP_REPLY, sha, 0x0a010001, NULL,
			 0x0a010002);
}

/* Post b through the link's hook: 1 and the class of the message it took for worker 0,
 * or 0 (refused: no message of its class left) and -1. */
static int post(struct env *v, struct ibp_buf *b, int *cls)
{
	struct ibp_send s = { .buf = b, .remote_qpn = 0x49, .remote_qkey = 0x0b1b };
	void *p = NULL;
	int r = fwd_engine_ib_post_send(v->hook, &s);

	*cls = -1;
	if (r == 1) {
		struct fwd_msg *m;

		assert_int_equal(ring_dequeue_burst(fwd_engine_ring_to_worker(v->e, 0), &p, 1), 1);
		m = p;
		assert_int_equal(m->type, FWD_MSG_TX_IB);
		assert_ptr_equal(m->ib_send.buf, b);
		*cls = m->cls;
		fwd_msg_put(v->e, m, FWD_OWNER_WORKER); /* "sent": back to control */
		fwd_sp_poll(v->e);
	}
	return r;
}

static int class_of(struct env *v, uint16_t ethertype, const uint8_t *pl, size_t n)
{
	int cls;

	assert_int_equal(post(v, encap(v, ethertype, pl, n), &cls), 1);
	return cls;
}

/* Heartbeats and the tiebreaker's echo requests take CONTROL, in both families; ARP,
 * ND, other UDP, other echoes and an echo reply do not. */
static void heartbeats_and_tiebreaker_echo_are_control(void **state)
{
	struct env *v = *state;
	uint8_t p[128];

	assert_int_equal(class_of(v, 0x0800, p, udp(p, "10.1.0.1", "10.1.0.2", HB_PORT, HB_PORT)),
			 FWD_PCLASS_CONTROL);
	assert_int_equal(
	    class_of(v, 0x86dd, p, udp(p, "2001:db8:1::1", "2001:db8:1::2", HB_PORT, HB_PORT)),
	    FWD_PCLASS_CONTROL);
	assert_int_equal(class_of(v, 0x0800, p, echo(p, "10.1.0.1", "10.9.0.1", true, TB_ID)),
			 FWD_PCLASS_CONTROL);
	assert_int_equal(
	    class_of(v, 0x86dd, p, echo(p, "2001:db8:1::1", "2001:db8:9::1", true, TB_ID)),
	    FWD_PCLASS_CONTROL);

	assert_int_equal(class_of(v, 0x0806, p, arp(p)), FWD_PCLASS_NEIGH);
	assert_int_equal(class_of(v, 0x0800, p, udp(p, "10.1.0.1", "10.1.0.2", 53, 53)),
			 FWD_PCLASS_NEIGH);
	/* the heartbeat's port as the source only: someone else's datagram */
	assert_int_equal(class_of(v, 0x0800, p, udp(p, "10.1.0.1", "10.1.0.2", HB_PORT, 53)),
			 FWD_PCLASS_NEIGH);
	assert_int_equal(class_of(v, 0x0800, p, echo(p, "10.1.0.1", "10.9.0.1", true, 0x1234)),
			 FWD_PCLASS_NEIGH);
	/* an answer to someone's echo with the same identifier is not the tiebreaker's */
	assert_int_equal(class_of(v, 0x0800, p, echo(p, "10.1.0.1", "10.9.0.1", false, TB_ID)),
			 FWD_PCLASS_NEIGH);
	/* a heartbeat's octets under another ethertype: not IP, not control */
	assert_int_equal(class_of(v, 0x0806, p, udp(p, "10.1.0.1", "10.1.0.2", HB_PORT, HB_PORT)),
			 FWD_PCLASS_NEIGH);
	/* the payload cut short of the UDP ports */
	assert_int_equal(class_of(v, 0x0800, p, 24), FWD_PCLASS_NEIGH);
	/* unbound: an ordinary datagram again */
	assert_int_equal(fwd_sp_udp_bind(v->e, 0, NULL, NULL), 0);
	assert_int_equal(class_of(v, 0x0800, p, udp(p, "10.1.0.1", "10.1.0.2", HB_PORT, HB_PORT)),
			 FWD_PCLASS_NEIGH);
	assert_int_equal(direct_posts, 0); /* all through worker 0's ring */
}

/* Hand back everything queued for worker 0 (as it does once sent); the class of the
 * message that carried b (-1: none did). */
static int drain(struct env *v, const struct ibp_buf *b)
{
	void *p;
	int cls = -1;

	while (ring_dequeue_burst(fwd_engine_ring_to_worker(v->e, 0), &p, 1) == 1) {
		struct fwd_msg *m = p;

		assert_int_equal(m->type, FWD_MSG_TX_IB);
		if (m->ib_send.buf == b)
			cls = m->cls;
		fwd_msg_put(v->e, m, FWD_OWNER_WORKER);
	}
	fwd_sp_poll(v->e);
	return cls;
}

/* What the classes are for: once a burst of ARP answers has used what the other classes
 * may take of the pool, the next answer is refused and a heartbeat and the tiebreaker's
 * echo still go. */
static void answers_cannot_take_the_heartbeats_share(void **state)
{
	struct env *v = *state;
	struct ibp_send s = { .remote_qpn = 0x49, .remote_qkey = 0x0b1b };
	struct ibp_buf *hb, *tb;
	uint8_t p[128];
	unsigned taken = 0;

	for (;;) {
		s.buf = encap(v, 0x0806, p, arp(p));
		if (fwd_engine_ib_post_send(v->hook, &s) != 1)
			break;
		taken++;
		assert_true(taken < 256);
	}
	assert_int_equal(taken, 256 - 256 / 8); /* the pool less the control reserve */
	s.buf = encap(v, 0x0800, p, udp(p, "10.1.0.1", "10.1.0.2", 53, 53));
	assert_int_equal(fwd_engine_ib_post_send(v->hook, &s), 0);
	s.buf = hb = encap(v, 0x0800, p, udp(p, "10.1.0.1", "10.1.0.2", HB_PORT, HB_PORT));
	assert_int_equal(fwd_engine_ib_post_send(v->hook, &s), 1);
	assert_int_equal(drain(v, hb), FWD_PCLASS_CONTROL);
	for (unsigned i = 0; i < taken; i++) {
		s.buf = encap(v, 0x0806, p, arp(p));
		if (fwd_engine_ib_post_send(v->hook, &s) != 1)
			break;
	}
	s.buf = tb = encap(v, 0x0800, p, echo(p, "10.1.0.1", "10.9.0.1", true, TB_ID));
	assert_int_equal(fwd_engine_ib_post_send(v->hook, &s), 1);
	assert_int_equal(drain(v, tb), FWD_PCLASS_CONTROL);
	assert_int_equal(fwd_msg_pool_free(v->e, 0, FWD_OWNER_CONTROL), 256);
	assert_int_equal(direct_posts, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(heartbeats_and_tiebreaker_echo_are_control, setup,
						teardown),
		cmocka_unit_test_setup_teardown(answers_cannot_take_the_heartbeats_share, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("engine_ib_class", tests, NULL, NULL);
}
