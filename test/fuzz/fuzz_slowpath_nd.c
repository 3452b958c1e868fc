/*
 * libFuzzer harness for the slow path's ARP and ND handling on Ethernet (engine/slowpath.c:
 * what the control thread does with a punted ARP / ND frame: learn the sender, answer for
 * the gateway's addresses, proxy for the other interface, resolve there), driven through
 * the worker -> control ring as worker.c punts. Runs on the fuzzer's thread, which plays
 * both the worker and the control thread. Two Ethernet interfaces, both proxying ARP and
 * ND, each with an IPv4 and an IPv6 subnet and a proxy prefix living on it.
 *
 * The input is a script; each step's first octet picks the operation (bits 0-1: ARP punt,
 * ND punt, time moving on with the neighbour timers, or a drain of what control sent),
 * bit 2 the interface, bit 3 whether an ND body gets its ICMPv6 checksum fixed (so the
 * parser is passed); a punt then takes a length octet and the frame's octets after the
 * Ethernet addresses (destination, source: 12 octets from the input, then the type, then
 * the body). Checks, whatever the neighbours send:
 * - every frame control sends leaves one of the two interfaces, from that interface's
 *   MAC, as ARP that parses with the interface's MAC as sender (the answer to a probe
 *   has target 0.0.0.0, and the answer to a neighbour announcing one of our addresses goes
 *   from it to it: arp_parse refuses both on receipt, allowed here), or as IPv6 ND that parses
 *   (valid checksum, Ethernet options) and, for an NA, carries the interface's MAC;
 * - every neighbour entry of an interface's table lies where that interface may learn or
 *   resolve it: its subnets, its proxy prefixes, a route connected through it, or IPv6
 *   link-local (issue 20: a flood of senders from elsewhere creates nothing);
 * - the port is asked to join only solicited-node groups (33:33:ff:..);
 * - no message is lost: once everything control sent is handed back, both of the
 *   worker's pools hold what they held before the input.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/engine.h"
#include "engine/ring.h"
#include "engine/slowpath.h"
#include "pkt/arp.h"
#include "pkt/eth_frame.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "port/eth_port.h"
#include "table/neigh.h"
#include "table/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: say which, then abort (libFuzzer saves the input). */
static void fail(int line, const char *what)
{
	fprintf(stderr, "fuzz_slowpath_nd.c:%d: invariant broken: %s\n", line, what);
	abort();
}
#define check(c) ((c) ? (void)0 : fail(__LINE__, #c))

static uint64_t fake_now = 1000000;
static uint64_t now_fn(void *ctx)
{
	(void)ctx;
	return fake_now;
}

static int dummy_port;

/* The port: only the solicited-node memberships of proxied addresses are asked of it. */
static int fake_mc_add(struct ethp_port *port, const uint8_t mac[ETHP_ADDR_LEN])
{
	static const uint8_t sn[3] = { 0x33, 0x33, 0xff };

	check(port == (struct ethp_port *)&dummy_port);
	check(!memcmp(mac, sn, 3)); /* a solicited-node group's MAC, nothing else */
	return 0;
}

static const struct ethp_ops fake_eth_ops = { .name = "fake", .mc_add = fake_mc_add };
static const uint8_t macs[2][6] = { { 2, 0, 0, 0, 1, 1 }, { 2, 0, 0, 0, 2, 1 } };

static struct rt_table *rt;
static struct fwd_engine *eng;
static uint32_t ifs[2];
static unsigned free_worker, free_control;

static void add_addr(uint32_t ix, const char *s)
{
	struct ip_prefix p;

	check(ip_prefix_parse(s, true, &p) == 0);
	check(fwd_engine_if_add_addr(eng, ix, &p) == 0);
}

static void set_proxy(uint32_t ix, const char *p4, const char *p6)
{
	struct fwd_proxy_config pc = {
		.proxy_arp = true, .proxy_nd = true, .defend_dad = true, .n_prefixes = 2
	};

	check(ip_prefix_parse(p4, false, &pc.prefixes[0]) == 0);
	check(ip_prefix_parse(p6, false, &pc.prefixes[1]) == 0);
	check(fwd_engine_if_set_proxy(eng, ix, &pc) == 0);
}

static void setup(void)
{
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 1, .flow_seed = 3, .now_ms = now_fn };

	check(rt_create(&rt, &rc) == 0);
	ec.rt = rt;
	check(fwd_engine_new(&ec, &eng) == 0);
	for (unsigned i = 0; i < 2; i++) {
		struct fwd_if_config c = { .name = i ? "eth2" : "eth1",
					   .kind = FWD_IF_ETH,
					   .mtu = 1500,
					   .eth_ops = &fake_eth_ops,
					   .eth = (struct ethp_port *)&dummy_port,
					   .mac = macs[i] };

		check(fwd_engine_if_add(eng, &c, &ifs[i]) == 0);
		check(fwd_engine_if_set_up(eng, ifs[i], true) == 0);
	}
	add_addr(ifs[0], "10.1.0.1/24");
	add_addr(ifs[0], "2001:db8:1::1/64");
	add_addr(ifs[1], "10.2.0.1/24");
	add_addr(ifs[1], "2001:db8:2::1/64");
	/* Hosts of eth1's /24 and /64 that live behind eth2, and the other way round. */
	set_proxy(ifs[0], "10.2.0.128/25", "2001:db8:2::8000/113");
	set_proxy(ifs[1], "10.1.0.128/25", "2001:db8:1::8000/113");
	free_worker = fwd_msg_pool_free(eng, 0, FWD_OWNER_WORKER);
	free_control = fwd_msg_pool_free(eng, 0, FWD_OWNER_CONTROL);
}

/* One frame control sent: the invariants on what leaves the gateway. */
static void check_sent(const struct fwd_msg *m)
{
	unsigned k = m->ifindex == ifs[0] ? 0 : 1;
	uint16_t type;

	check(m->ifindex == ifs[0] || m->ifindex == ifs[1]);
	check(m->len >= ETHF_HLEN);
	check(!memcmp(m->data + 6, macs[k], 6));
	type = ip_be16(m->data + 12);
	if (type == ETHF_TYPE_ARP) {
		const uint8_t *b = m->data + ETHF_HLEN;
		struct arp_pkt a;
		enum arp_reason r = arp_parse(b, m->len - ETHF_HLEN, ARP_HTYPE_ETHER, &a);

		/* The answer to a probe (sender 0.0.0.0, RFC 5227) goes to 0.0.0.0, as Linux
		 * answers it: arp_parse refuses that target on receipt, nothing else. */
		if (r == ARP_TPA_INVALID && m->len - ETHF_HLEN >= 28 && ip_be16(b + 6) == 2 &&
		    !ip_be32(b + 24))
			r = ARP_OK, a.sha = b + 8;
		/* The answer to an announcement of our own address (a conflict) is a reply
		 * from it to it, with the claimant's MAC as target, as Linux sends it:
		 * arp_parse calls that a reply to self on receipt. */
		if (r == ARP_REPLY_TO_SELF)
			r = ARP_OK, a.sha = b + 8;
		check(r == ARP_OK);
		check(!memcmp(a.sha, macs[k], 6));
	} else {
		struct nd_msg nm;

		check(type == ETHF_TYPE_IPV6);
		check(nd_parse(m->data + ETHF_HLEN, m->len - ETHF_HLEN, ND_LINK_ETHER, &nm) ==
		      ND_OK);
		if (nm.type == ND_NA)
			check(nm.tllao && !memcmp(nm.tllao, macs[k], 6));
		if (nm.type == ND_NS && nm.sllao)
			check(!memcmp(nm.sllao, macs[k], 6));
	}
}

/* Hand back everything control sent (checked), as the worker does after sending. */
static void drain(void)
{
	void *p;

	while (ring_dequeue_burst(fwd_engine_ring_to_worker(eng, 0), &p, 1) == 1) {
		struct fwd_msg *m = p;

		if (m->owner == FWD_OWNER_WORKER) { /* a punt of ours coming back */
			fwd_msg_recycle(eng, m);
			continue;
		}
		check(m->type == FWD_MSG_TX_ETH);
		check_sent(m);
		fwd_msg_put(eng, m, FWD_OWNER_WORKER);
	}
	fwd_sp_poll(eng); /* control takes its messages back */
}

struct scope_ctx {
	const struct fwd_if *f;
};

static int in_scope(void *arg, const struct neigh_info *ni)
{
	const struct fwd_if *f = ((struct scope_ctx *)arg)->f;
	struct ip_addr a = { .family = (uint8_t)ni->family };
	const struct rt_fib_nh *nh;

	if (neigh_on_link(f->addrs, f->n_addrs, ni->family, ni->addr) ||
	    neigh_on_link(f->proxy.prefixes, f->proxy.n_prefixes, ni->family, ni->addr))
		return 0;
	if (ni->family == AF_INET6 && ni->addr[0] == 0xfe && (ni->addr[1] & 0xc0) == 0x80)
		return 0;
	memcpy(a.bytes, ni->addr, ni->family == AF_INET ? 4 : 16);
	nh = rt_lookup(rt, &a, 0);
	check(nh && nh->type == RT_NH_CONNECTED && nh->ifindex == f->index);
	return 0;
}

static void punt(unsigned k, enum fwd_punt why, const uint8_t *frame, size_t len)
{
	uint32_t key;
	enum fwd_pclass c = fwd_punt_classify(eng, why, false, frame, len, 0, &key);
	struct fwd_msg *m = fwd_msg_get(eng, 0, FWD_OWNER_WORKER, c);
	void *p = m;

	if (!m)
		return; /* the class used its share: the worker drops it */
	m->type = FWD_MSG_PUNT_ETH;
	m->punt = (uint8_t)why;
	m->ifindex = (uint16_t)ifs[k];
	m->family = 0;
	memcpy(m->data, frame, len);
	m->len = (uint32_t)len;
	check(ring_enqueue_burst(fwd_engine_ring_to_ctl(eng, 0), &p, 1) == 1);
	fwd_sp_poll(eng);
}

/* An ICMPv6 body's checksum set right, so that nd_parse looks further. */
static void fix_icmp6(uint8_t *ip, size_t len)
{
	uint32_t plen;
	uint64_t s;

	if (len < 44 || ip[6] != 58)
		return;
	plen = ip_be16(ip + 4);
	if (plen > len - 40)
		plen = (uint32_t)(len - 40);
	if (plen < 4)
		return;
	ip[42] = ip[43] = 0;
	s = ip6_pseudo_sum(ip + 8, ip + 24, plen, 58);
	s = ip_csum_add(s, ip + 40, plen);
	ip_put16(ip + 42, (uint16_t)~ip_csum_fold(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	uint8_t frame[ETHF_HLEN + 255];

	if (!ready)
		setup();
	ready = true;
	while (size > 0) {
		uint8_t op = data[0];
		unsigned k = (op >> 2) & 1;

		data++, size--;
		switch (op & 3) {
		case 0:
		case 1: {
			size_t n;

			if (size < 1)
				break;
			n = data[0];
			data++, size--;
			if (n < 12 || n > size)
				n = size < 12 ? size : n > size ? size : n;
			memset(frame, 0, sizeof(frame));
			memcpy(frame, data, n < 12 ? n : 12);
			ip_put16(frame + 12, (op & 3) ? ETHF_TYPE_IPV6 : ETHF_TYPE_ARP);
			if (n > 12)
				memcpy(frame + ETHF_HLEN, data + 12, n - 12);
			if ((op & 8) && n > 12)
				fix_icmp6(frame + ETHF_HLEN, n - 12);
			punt(k, (op & 3) ? FWD_PUNT_ND : FWD_PUNT_ARP, frame,
			     ETHF_HLEN + (n > 12 ? n - 12 : 0));
			data += n, size -= n;
			break;
		}
		case 2:
			fake_now += (uint64_t)(op >> 3) * 250;
			(void)fwd_sp_tick(eng);
			break;
		default:
			drain();
			break;
		}
	}
	drain();
	for (unsigned k = 0; k < 2; k++) {
		const struct fwd_if *f = fwd_snap_if(fwd_engine_current(eng), ifs[k]);
		struct scope_ctx sc = { .f = f };

		neigh_foreach(f->neigh, in_scope, &sc);
		neigh_flush(f->neigh); /* the next input starts from empty tables */
	}
	drain();
	check(fwd_msg_pool_free(eng, 0, FWD_OWNER_WORKER) == free_worker);
	check(fwd_msg_pool_free(eng, 0, FWD_OWNER_CONTROL) == free_control);
	return 0;
}
