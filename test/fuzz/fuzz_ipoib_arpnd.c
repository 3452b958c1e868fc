/*
 * libFuzzer harness for the IPoIB link's ARP and ND input (ipoib/arpnd.c) as the gateway
 * runs it: a receive completion of the link's UD QP is classified by ipoib_link_rx and
 * fwd_input_ib (the worker's steps), punted through the worker -> control ring, and the
 * slow path hands it to ipoib_link_input_ctl (learning, answers for the link's addresses,
 * spoof refusal) and then to the proxy for the Ethernet side. The link is a real one on a
 * fake port and a fake SA client (defined here: the join, leave and path query the link
 * makes), up with its addresses, its subnets for learning and proxying as an input's
 * first octet chooses; a fresh link per input (its neighbours, paths and groups start
 * empty), the engine and its Ethernet interface kept. The fuzzer's thread plays the
 * worker, the control thread and the SA.
 *
 * Input: octet 0 configures the link (bit 0 accept_spoofed_arp, 1 proxy ARP, 2 proxy ND,
 * 3 answer_unresolved, 4 subnets for learning set, 5 the SA answers paths it knows at
 * once, 6 the groups other than the broadcast group left unanswered at start). Then a
 * script; each step's first octet picks the operation (bits 0-2):
 *   0 a raw receive: meta octet (bit 0 GRH, 1 to a group, 2-3 the source: peer A, B,
 *     C or the link itself; 4-5 the ethertype: ARP, IPv6, IPv4 or the next two octets;
 *     6 ICMPv6 checksum fixed), a length octet, that many payload octets;
 *   1 an ARP from a template: 3 octets (op, sender and target hardware address, sender
 *     and target IP from small tables, receive meta);
 *   2 an ND message from a template: 3 octets (type, option and its address, source,
 *     destination kind, hop limit, target, NA flags);
 *   3 Ethernet side: an ARP request/reply or NS/NA from a host there (2 octets), which
 *     the proxy on the IPoIB side may then answer for, or which asks for an address
 *     living on IPoIB (the link resolves it);
 *   4 the SA answers what is pending (paths, joins): success or failure, the DLID;
 *   5 time passes (engine neighbour timers) and the link ticks;
 *   6 hand back what control sent to the Ethernet side (checked);
 *   7 a neighbour learned elsewhere (ipoib_link_neigh_learn, the failover sync's).
 * Checks, whatever arrives:
 * - every send on the link is on its UD QP with its Q_Key and a live address handle (a
 *   group's for QPN 0xffffff), within the MTU, and is ARP that parses with the link's
 *   hardware address as sender or ND that parses (checksum, IPoIB options) whose
 *   link-layer option is the link's;
 * - every frame sent on Ethernet leaves from the interface's MAC and parses;
 * - with the subnets set, every neighbour of the link lies in them or is IPv6
 *   link-local (or was learned through ipoib_link_neigh_learn);
 * - nothing is lost: after the link is stopped and freed, every IB buffer is back in the
 *   pool, every address handle destroyed, every group left, and the engine's message
 *   pools hold what they held before.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/ring.h"
#include "engine/slowpath.h"
#include "ipoib/ipoib_link.h"
#include "pkt/arp.h"
#include "pkt/eth_frame.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "port/eth_port.h"
#include "sm-client/sa.h"
#include "table/neigh.h"
#include "table/route.h"
#include "lib/ipoib.h"
#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(int line, const char *what)
{
	fprintf(stderr, "fuzz_ipoib_arpnd.c:%d: invariant broken: %s\n", line, what);
	abort();
}
#define check(c) ((c) ? (void)0 : fail(__LINE__, #c))

/* ---- the fake IB port ---------------------------------------------------------------- */

#define NBUF     128
#define BUFCAP   4200
#define MAXAH    256
#define LINK_QPN 0x48
#define QKEY     0x0b1bu
#define OWN_GUID 0x0002c90300a10005ull
#define OWN_LID  5

struct ibp_port {
	int unused;
};
struct ibp_qp {
	uint32_t qpn;
	bool live;
	struct ibp_buf *posted[NBUF]; /* receive buffers, in posting order */
	unsigned n_posted;
};
struct ibp_ah {
	struct ibp_ah_attr a;
};

static struct ibp_port fport;
static struct ibp_qp fqp;
static uint8_t mem[NBUF][BUFCAP];
static struct ibp_buf bufs[NBUF];
static struct ibp_buf *freel[NBUF];
static unsigned nfree;
static struct ibp_ah *ahs[MAXAH];
static unsigned n_ahs;

static struct ibp_buf *f_buf_get(struct ibp_port *p)
{
	check(p == &fport);
	return nfree ? freel[--nfree] : NULL;
}
static void f_buf_put(struct ibp_port *p, struct ibp_buf *b)
{
	check(p == &fport);
	check(b && b >= bufs && b < bufs + NBUF && nfree < NBUF);
	for (unsigned i = 0; i < nfree; i++)
		check(freel[i] != b); /* returned twice */
	freel[nfree++] = b;
}
static int f_create_qp(struct ibp_port *p, const struct ibp_qp_init *init, struct ibp_qp **out)
{
	check(p == &fport && !fqp.live);
	check(init->type == IBP_QPT_UD && init->qkey == QKEY);
	fqp.qpn = LINK_QPN;
	fqp.live = true;
	fqp.n_posted = 0;
	*out = &fqp;
	return 0;
}
static int f_qp_ready(struct ibp_qp *qp, const struct ibp_qp_connect *rc)
{
	check(qp == &fqp && !rc);
	return 0;
}
static void f_destroy_qp(struct ibp_qp *qp)
{
	check(qp == &fqp && qp->live);
	/* the receive buffers come back, as the flushed completions give them */
	for (unsigned i = 0; i < qp->n_posted; i++)
		f_buf_put(&fport, qp->posted[i]);
	qp->n_posted = 0;
	qp->live = false;
}
static uint32_t f_qp_num(const struct ibp_qp *qp)
{
	return qp->qpn;
}
static bool ah_live(const struct ibp_ah *ah)
{
	for (unsigned i = 0; i < n_ahs; i++)
		if (ahs[i] == ah)
			return true;
	return false;
}
static int f_create_ah(struct ibp_port *p, const struct ibp_ah_attr *attr, struct ibp_ah **out)
{
	struct ibp_ah *ah;

	check(p == &fport);
	if (n_ahs == MAXAH || !(ah = calloc(1, sizeof(*ah))))
		return -ENOMEM;
	ah->a = *attr;
	ahs[n_ahs++] = ah;
	*out = ah;
	return 0;
}
static void f_destroy_ah(struct ibp_ah *ah)
{
	for (unsigned i = 0; i < n_ahs; i++)
		if (ahs[i] == ah) {
			ahs[i] = ahs[--n_ahs];
			free(ah);
			return;
		}
	fail(__LINE__, "an address handle destroyed that is not live");
}
static int f_attach(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	check(qp == &fqp && qp->live && ib_gid_is_multicast(mgid) && mlid >= 0xc000);
	return 0;
}
static int f_detach(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	(void)mgid, (void)mlid;
	check(qp == &fqp && qp->live);
	return 0;
}
static int f_post_recv(struct ibp_qp *qp, unsigned queue, struct ibp_buf **b, unsigned n)
{
	(void)queue;
	check(qp == &fqp && qp->live);
	for (unsigned i = 0; i < n; i++) {
		check(qp->n_posted < NBUF);
		qp->posted[qp->n_posted++] = b[i];
	}
	return (int)n;
}

static struct ipoib_link *ibl;
static uint8_t own_hw[IPOIB_HWADDR_LEN];
static unsigned ib_sends;

static bool arp_sane(const uint8_t *p, size_t n)
{
	struct arp_pkt a;
	enum arp_reason r = arp_parse(p, n, ARP_HTYPE_IB, &a);

	/* The answer to a probe goes to 0.0.0.0, and the answer to a neighbour announcing
	 * an address we defend goes from it to it (as Linux sends both): arp_parse refuses
	 * them on receipt, nothing else (see fuzz_slowpath_nd.c). */
	if ((r == ARP_TPA_INVALID && n >= ARP_IB_LEN && ip_be16(p + 6) == ARP_OP_REPLY &&
	     !ip_be32(p + 52)) ||
	    r == ARP_REPLY_TO_SELF)
		r = ARP_OK, a.sha = p + 8;
	return r == ARP_OK && !memcmp(a.sha, own_hw, IPOIB_HWADDR_LEN);
}

static bool nd_sane(const uint8_t *p, size_t n)
{
	struct nd_msg m;

	if (nd_parse(p, n, ND_LINK_IB, &m) != ND_OK)
		return false;
	if (m.type == ND_NA && m.tllao && memcmp(m.tllao, own_hw, IPOIB_HWADDR_LEN))
		return false;
	if (m.sllao && memcmp(m.sllao, own_hw, IPOIB_HWADDR_LEN))
		return false;
	return m.type == ND_NS || m.type == ND_NA;
}

/* Every send of the link (through the engine's hook: no worker runs, so it is posted
 * here directly): checked, then completed at once. */
static int f_post_send(unsigned queue, struct ibp_send *s, unsigned n)
{
	(void)queue;
	for (unsigned i = 0; i < n; i++) {
		struct ibp_buf *b = s[i].buf;
		uint16_t et;

		check(s[i].qp == &fqp && fqp.live);
		check(s[i].remote_qkey == QKEY);
		check(s[i].ah && ah_live(s[i].ah));
		check(b && b->len >= IPOIB_ENCAP_LEN && b->len <= b->cap);
		check(b->len - IPOIB_ENCAP_LEN <= ipoib_link_mtu(ibl));
		check(s[i].remote_qpn <= 0xffffff);
		if (s[i].remote_qpn == 0xffffff)
			check(ib_gid_is_multicast(&s[i].ah->a.dgid));
		et = ip_be16(b->data);
		if (et == 0x0806)
			check(arp_sane(b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN));
		else
			check(et == 0x86dd &&
			      nd_sane(b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN));
		ib_sends++;
		f_buf_put(&fport, b);
	}
	return (int)n;
}

static unsigned f_queues(struct ibp_port *port)
{
	(void)port;
	return 1;
}

static const struct ibp_ops fake_ib = {
	.name = "fuzz",
	.queues = f_queues,
	.buf_get = f_buf_get,
	.buf_put = f_buf_put,
	.create_qp = f_create_qp,
	.qp_ready = f_qp_ready,
	.destroy_qp = f_destroy_qp,
	.qp_num = f_qp_num,
	.create_ah = f_create_ah,
	.destroy_ah = f_destroy_ah,
	.attach_mcast = f_attach,
	.detach_mcast = f_detach,
	.post_send = f_post_send,
	.post_recv = f_post_recv,
};

/* ---- the fake SA client: what the link asks waits for an "SA answers" step ---------- */

#define MAXQ 64
static struct sa_client *const fsa = (struct sa_client *)&fport; /* never dereferenced */
static struct {
	struct {
		union ib_gid dgid;
		sa_path_cb cb;
		void *arg;
	} q[MAXQ];
	unsigned nq;
	struct {
		union ib_gid mgid;
		bool full, answered;
		sa_mcast_cb cb;
		void *arg;
	} j[MAXQ];
	unsigned nj;
	union ib_gid known[MAXQ]; /* paths answered: the cache */
	unsigned nknown;
	bool answer_known; /* input flag: answer a known path at once (as the cache does) */
	uint16_t next_mlid;
} sa;

static void path_of(const union ib_gid *dgid, uint16_t dlid, struct sa_path *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->dgid = *dgid;
	ib_gid_set(&sp->sgid, 0xfe80000000000000ull, OWN_GUID);
	sp->dlid = dlid;
	sp->slid = OWN_LID;
	sp->pkey = 0xffff;
	sp->mtu = IB_MTU_2048;
	sp->hop_limit = ib_gid_prefix(dgid) != 0xfe80000000000000ull ? 2 : 0;
}

int sa_path_resolve(struct sa_client *c, const struct sa_path_query *q, sa_path_cb cb, void *arg)
{
	check(c == fsa);
	if (sa.answer_known)
		for (unsigned i = 0; i < sa.nknown; i++)
			if (ib_gid_equal(&sa.known[i], &q->dgid)) {
				struct sa_path sp;

				path_of(&q->dgid, (uint16_t)(10 + i), &sp);
				cb(arg, 0, &sp);
				return 1;
			}
	if (sa.nq == MAXQ)
		return -ENOMEM;
	sa.q[sa.nq].dgid = q->dgid;
	sa.q[sa.nq].cb = cb;
	sa.q[sa.nq].arg = arg;
	sa.nq++;
	return 0;
}

int sa_mcast_join(struct sa_client *c, const struct sa_mcast_params *p, sa_mcast_cb cb, void *arg)
{
	check(c == fsa);
	for (unsigned i = 0; i < sa.nj; i++)
		if (ib_gid_equal(&sa.j[i].mgid, &p->mgid))
			return -EEXIST;
	if (sa.nj == MAXQ)
		return -ENOMEM;
	sa.j[sa.nj].mgid = p->mgid;
	sa.j[sa.nj].full = p->join_state == SA_JOIN_FULL;
	sa.j[sa.nj].answered = false;
	sa.j[sa.nj].cb = cb;
	sa.j[sa.nj].arg = arg;
	sa.nj++;
	return 0;
}

int sa_mcast_leave(struct sa_client *c, const union ib_gid *mgid)
{
	check(c == fsa);
	for (unsigned i = 0; i < sa.nj; i++)
		if (ib_gid_equal(&sa.j[i].mgid, mgid)) {
			sa.j[i] = sa.j[--sa.nj];
			return 0;
		}
	return -ENOENT;
}

static void join_answer(unsigned i, int status)
{
	struct sa_mcast_group g;

	memset(&g, 0, sizeof(g));
	g.mgid = sa.j[i].mgid;
	g.mlid = sa.next_mlid++;
	g.qkey = QKEY;
	g.mtu = IB_MTU_2048;
	g.pkey = 0xffff;
	sa.j[i].answered = status == 0;
	sa.j[i].cb(sa.j[i].arg, status, status ? NULL : &g);
}

/* Answer what is pending, in order: bit k of pattern (cyclic) says whether the k-th
 * answer fails; dlid_base varies the paths (a changed answer rebuilds the AH). What an
 * answer makes the link ask again waits for the next step. */
static void sa_answers(uint8_t pattern, uint16_t dlid_base)
{
	unsigned n = sa.nq, k = 0;

	for (unsigned i = 0; i < n && sa.nq; i++, k++) {
		union ib_gid gid = sa.q[0].dgid;
		sa_path_cb cb = sa.q[0].cb;
		void *arg = sa.q[0].arg;
		struct sa_path sp;

		memmove(&sa.q[0], &sa.q[1], (sa.nq - 1) * sizeof(sa.q[0]));
		sa.nq--;
		if (pattern >> (k & 7) & 1) {
			cb(arg, -ETIMEDOUT, NULL);
			continue;
		}
		if (sa.nknown < MAXQ)
			sa.known[sa.nknown++] = gid;
		path_of(&gid, (uint16_t)(dlid_base + i), &sp);
		cb(arg, 0, &sp);
	}
	n = sa.nj;
	for (unsigned i = 0; i < n && i < sa.nj; i++, k++)
		if (!sa.j[i].answered)
			join_answer(i, pattern >> (k & 7) & 1 ? -ETIMEDOUT : 0);
}

/* ---- the engine: the IPoIB interface (per input) and an Ethernet one (kept) ---------- */

static uint64_t fake_now = 1000000;
static uint64_t now_fn(void *ctx)
{
	(void)ctx;
	return fake_now;
}

static int dummy_eth;
static int fake_mc_add(struct ethp_port *port, const uint8_t mac[ETHP_ADDR_LEN])
{
	check(port == (struct ethp_port *)&dummy_eth);
	check(mac[0] == 0x33 && mac[1] == 0x33 && mac[2] == 0xff);
	return 0;
}
static const struct ethp_ops fake_eth = { .name = "fake", .mc_add = fake_mc_add };
static const uint8_t eth_mac[6] = { 2, 0, 0, 0, 2, 1 };

static struct rt_table *rt;
static struct fwd_engine *eng;
static struct fwd_ctx wctx;
static struct fwd_result res;
static uint32_t ieth, iib;
static unsigned free_worker, free_control;

static struct ip_prefix prefix(const char *s, bool host)
{
	struct ip_prefix p;

	check(ip_prefix_parse(s, host, &p) == 0);
	return p;
}

static const char *const ib_addrs[] = { "10.1.0.1/24", "2001:db8:1::1/64" };
static const char *const ib_lives[] = { "10.2.0.128/25", "2001:db8:2::8000/113" };

static void setup(void)
{
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 1, .flow_seed = 3, .now_ms = now_fn };
	struct fwd_if_config c = { .name = "eth1",
				   .kind = FWD_IF_ETH,
				   .mtu = 1500,
				   .eth_ops = &fake_eth,
				   .eth = (struct ethp_port *)&dummy_eth,
				   .mac = eth_mac };
	struct fwd_proxy_config pc = { .proxy_arp = true,
				       .proxy_nd = true,
				       .defend_dad = true,
				       .router = true,
				       .answer_unresolved = true,
				       .n_prefixes = 2 };
	struct ip_prefix p;

	log_init("fuzz_ipoib_arpnd", LOG_TARGET_STDERR, LOG_ERR);
	for (unsigned k = 0; k < NBUF; k++) {
		bufs[k] = (struct ibp_buf){ .data = mem[k], .cap = BUFCAP, .id = k };
		freel[nfree++] = &bufs[k];
	}
	check(rt_create(&rt, &rc) == 0);
	ec.rt = rt;
	check(fwd_engine_new(&ec, &eng) == 0);
	check(fwd_engine_if_add(eng, &c, &ieth) == 0);
	check(fwd_engine_if_set_up(eng, ieth, true) == 0);
	p = prefix("10.2.0.1/24", true);
	check(fwd_engine_if_add_addr(eng, ieth, &p) == 0);
	p = prefix("2001:db8:2::1/64", true);
	check(fwd_engine_if_add_addr(eng, ieth, &p) == 0);
	/* Hosts of the IPoIB side's subnets living behind eth1: the link answers for them. */
	pc.prefixes[0] = prefix("10.1.0.128/25", false);
	pc.prefixes[1] = prefix("2001:db8:1::8000/113", false);
	check(fwd_engine_if_set_proxy(eng, ieth, &pc) == 0);
	check(fwd_ctx_init(&wctx, eng, 0) == 0);
	free_worker = fwd_msg_pool_free(eng, 0, FWD_OWNER_WORKER);
	free_control = fwd_msg_pool_free(eng, 0, FWD_OWNER_CONTROL);
}

static struct ip_prefix on_link[4];
static unsigned n_on_link;
static bool on_link_set;

/* A link up with its addresses, in the engine as the gateway adds it. */
static void link_up(uint8_t cfg)
{
	struct ibp_port_attr pa = { .state = IBP_PORT_ACTIVE,
				    .lid = OWN_LID,
				    .gid_prefix = 0xfe80000000000000ull,
				    .port_guid = OWN_GUID,
				    .pkeys = { 0xffff },
				    .n_pkeys = 1 };
	struct ipoib_link_config lc = {
		.name = "ib0",
		.ops = &fake_ib,
		.port = &fport,
		.sa = fsa,
		.attr = &pa,
		.role = IPOIB_ROLE_GATEWAY,
		.accept_spoofed_arp = cfg & 1,
		.recv_depth = 4,
		.send_depth = 4,
		.post = fwd_engine_ib_post_send,
	};
	struct fwd_proxy_config pc = { .proxy_arp = (cfg & 2) != 0,
				       .proxy_nd = (cfg & 4) != 0,
				       .answer_unresolved = (cfg & 8) != 0,
				       .defend_dad = true,
				       .router = true,
				       .n_prefixes = 2 };
	struct fwd_if_config fc = { .name = "ib0",
				    .kind = FWD_IF_IPOIB,
				    .mtu = 2044,
				    .ib_ops = &fake_ib,
				    .ib_port = &fport };
	struct ipoib_hwaddr hw;
	union ib_gid bc;
	uint32_t ix;

	memset(&sa, 0, sizeof(sa));
	sa.next_mlid = 0xc000;
	sa.answer_known = (cfg & 32) != 0;
	check(fwd_engine_if_reserve(eng, &iib) == 0);
	lc.post_ctx = fwd_engine_if_post_ctx(eng, iib);
	check(ipoib_link_new(&lc, &ibl) == 0);
	check(ipoib_link_start(ibl) == 0);
	/* The broadcast group first: the link comes up with its answer. */
	check(ipoib_mgid_broadcast(0xffff, IB_MGID_SCOPE_LINK, &bc) == 0);
	for (unsigned i = 0; i < sa.nj; i++)
		if (ib_gid_equal(&sa.j[i].mgid, &bc))
			join_answer(i, 0);
	check(ipoib_link_is_up(ibl));
	if (!(cfg & 64))
		sa_answers(0, 0);
	ipoib_link_hwaddr(ibl, &hw);
	check(hw.qpn == LINK_QPN);
	check(ipoib_hwaddr_encode(&hw, own_hw, sizeof(own_hw)) == IPOIB_HWADDR_LEN);
	fc.index = iib;
	fc.link = ibl;
	fc.neigh = ipoib_link_neigh(ibl);
	check(fwd_engine_if_add(eng, &fc, &ix) == 0 && ix == iib);
	check(fwd_engine_if_set_ipoib(eng, iib, ipoib_link_ud_qp(ibl), ipoib_link_qkey(ibl), &hw,
				      ipoib_link_mtu(ibl)) == 0);
	check(fwd_engine_if_set_up(eng, iib, true) == 0);
	n_on_link = 0;
	for (unsigned i = 0; i < 2; i++) {
		struct ip_prefix p = prefix(ib_addrs[i], true);

		check(fwd_engine_if_add_addr(eng, iib, &p) == 0);
		check(ipoib_link_add_addr(ibl, p.addr.family, p.addr.bytes) == 0);
		on_link[n_on_link++] = p;
	}
	for (unsigned i = 0; i < 2; i++)
		on_link[n_on_link++] = pc.prefixes[i] = prefix(ib_lives[i], false);
	check(fwd_engine_if_set_proxy(eng, iib, &pc) == 0);
	on_link_set = (cfg & 16) != 0;
	if (on_link_set)
		check(ipoib_link_set_on_link(ibl, on_link, n_on_link) == 0);
}

/* ---- address tables for the templates ------------------------------------------------ */

static const char *const v4s[16] = {
	"10.1.0.1",  "10.1.0.2",   "10.1.0.3",   "10.1.0.200",      "10.2.0.2",   "10.2.0.200",
	"10.2.0.1",  "192.0.2.7",  "0.0.0.0",    "255.255.255.255", "10.1.0.255", "224.0.0.1",
	"127.0.0.1", "10.1.0.129", "10.2.0.129", "10.1.0.4",
};
static const char *const v6s[16] = {
	"fe80::", /* the link's own link-local: filled in from its GUID */
	"2001:db8:1::1",
	"2001:db8:1::2",
	"fe80::2",
	"2001:db8:1::8001",
	"2001:db8:2::2",
	"2001:db8:2::8001",
	"2001:db8:2::1",
	"2001:db8:99::1",
	"::",
	"ff02::1",
	"ff02::1:ff00:1",
	"fe80::3",
	"2001:db8:1::3",
	"::1",
	"2001:db8:1::8002",
};
static uint8_t v4tab[16][4], v6tab[16][16];
static uint8_t hwtab[8][IPOIB_HWADDR_LEN];

static void tables(void)
{
	static const struct {
		uint8_t flags;
		uint32_t qpn;
		uint64_t prefix, guid;
	} hws[8] = {
		{ 0, 0x49, 0xfe80000000000000ull, 0x0002c90300a10001ull },     /* peer A */
		{ 0x80, 0x4a, 0xfe80000000000000ull, 0x0002c90300a10002ull },  /* B, RC */
		{ 0, 0x4b, 0xfec0000000000001ull, 0x0002c90300a10003ull },     /* C, routed */
		{ 0, LINK_QPN, 0xfe80000000000000ull, OWN_GUID },              /* ourselves */
		{ 0, 0x149, 0xfe80000000000000ull, 0x0002c90300a10001ull },    /* A, new QPN */
		{ 0, 0x4c, 0xff02000000000000ull, 0x0000000000000001ull },     /* a group */
		{ 0x3f, 0x4d, 0xfe80000000000000ull, 0x0002c90300a10004ull },  /* reserved */
		{ 0, 0xffffff, 0xfe80000000000000ull, 0x0002c90300a10005ull }, /* QPN bcast */
	};
	struct ip_addr a;

	for (unsigned i = 0; i < 16; i++) {
		check(ip_addr_parse(v4s[i], &a) == 0);
		memcpy(v4tab[i], a.bytes, 4);
		check(ip_addr_parse(v6s[i], &a) == 0);
		memcpy(v6tab[i], a.bytes, 16);
	}
	ipoib_ipv6_link_local(OWN_GUID, v6tab[0]);
	for (unsigned i = 0; i < 8; i++) {
		/* encoded by hand: the table holds what ipoib_hwaddr_encode would refuse */
		uint8_t *h = hwtab[i];
		union ib_gid g;

		h[0] = hws[i].flags;
		h[1] = (uint8_t)(hws[i].qpn >> 16);
		h[2] = (uint8_t)(hws[i].qpn >> 8);
		h[3] = (uint8_t)hws[i].qpn;
		ib_gid_set(&g, hws[i].prefix, hws[i].guid);
		memcpy(h + 4, g.raw, 16);
	}
}

/* ---- receives: the worker's steps, then the slow path -------------------------------- */

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

/* One UD receive on the link's QP: ethertype + payload, meta as in the file's comment. */
static void ib_receive(uint16_t et, const uint8_t *pl, size_t n, uint8_t meta)
{
	static const uint32_t src_qpn[4] = { 0x49, 0x4a, LINK_QPN, 0x4b };
	static const uint16_t src_lid[4] = { 7, 8, OWN_LID, 9 };
	unsigned src = (meta >> 2) & 3;
	struct ibp_wc wc = { .kind = IBP_WC_RECV, .status = IBP_WC_OK, .qp = &fqp };
	struct ipoib_rx rx;
	struct ibp_buf *b;

	if (!fqp.n_posted)
		return; /* no receive buffer: the HCA drops it */
	b = fqp.posted[0];
	memmove(&fqp.posted[0], &fqp.posted[1], --fqp.n_posted * sizeof(fqp.posted[0]));
	if (n > b->cap - IBP_GRH_AREA - IPOIB_ENCAP_LEN)
		n = b->cap - IBP_GRH_AREA - IPOIB_ENCAP_LEN;
	memset(b->data, 0, IBP_GRH_AREA);
	if (meta & 1) {
		union ib_gid s, d;

		memcpy(s.raw, hwtab[src == 2 ? 3 : src == 3 ? 2 : src] + 4, 16);
		if (meta & 2)
			check(ipoib_mgid_broadcast(0xffff, IB_MGID_SCOPE_LINK, &d) == 0);
		else
			ib_gid_set(&d, 0xfe80000000000000ull, OWN_GUID);
		memcpy(b->data + 8, s.raw, 16);
		memcpy(b->data + 24, d.raw, 16);
	}
	ip_put16(b->data + IBP_GRH_AREA, et);
	ip_put16(b->data + IBP_GRH_AREA + 2, 0);
	memcpy(b->data + IBP_GRH_AREA + IPOIB_ENCAP_LEN, pl, n);
	wc.buf = b;
	wc.byte_len = (uint32_t)(IBP_GRH_AREA + IPOIB_ENCAP_LEN + n);
	wc.src_qp = src_qpn[src];
	wc.slid = src_lid[src];
	wc.has_grh = meta & 1;
	/* IP is forwarded by the worker: not this harness's business. */
	if (ipoib_link_rx(ibl, 0, &wc, &rx) == IPOIB_RX_ARP || rx.kind == IPOIB_RX_ND) {
		fwd_ctx_begin(&wctx, fake_now * 1000000);
		fwd_ctx_scratch_reset(&wctx);
		fwd_input_ib(&wctx, fwd_snap_if(wctx.snap, iib), &rx, NULL, &res);
		check(res.v == FWD_V_PUNT && res.punt_len == rx.len);
		check(res.punt == (rx.kind == IPOIB_RX_ARP ? FWD_PUNT_ARP : FWD_PUNT_ND));
	}
	if ((rx.kind == IPOIB_RX_ARP || rx.kind == IPOIB_RX_ND) && res.v == FWD_V_PUNT) {
		uint32_t key;
		enum fwd_pclass c =
		    fwd_punt_classify(eng, res.punt, true, res.punt_data, res.punt_len,
				      (uint32_t)rx.slid << 24 ^ rx.src_qpn, &key);
		struct fwd_msg *m = fwd_msg_get(eng, 0, FWD_OWNER_WORKER, c);
		void *p = m;

		if (m) {
			m->type = FWD_MSG_PUNT_IB;
			m->punt = (uint8_t)res.punt;
			m->ifindex = (uint16_t)iib;
			m->family = 0;
			m->own = false;
			m->ethertype = rx.ethertype;
			m->src_qpn = rx.src_qpn;
			m->slid = rx.slid;
			m->has_grh = rx.has_grh;
			m->mcast = rx.mcast;
			m->sgid = rx.sgid;
			m->dgid = rx.dgid;
			memcpy(m->data, res.punt_data, res.punt_len);
			m->len = res.punt_len;
			check(ring_enqueue_burst(fwd_engine_ring_to_ctl(eng, 0), &p, 1) == 1);
		}
	}
	ipoib_link_repost(ibl, 0, b);
	fwd_sp_poll(eng);
}

/* An ARP from the template octets t[0..2]. */
static void ib_arp(const uint8_t *t)
{
	uint8_t p[ARP_IB_LEN];
	const uint8_t *sha = hwtab[t[0] & 7], *tha = (t[0] & 8) ? hwtab[(t[0] >> 4) & 7] : NULL;
	size_t n =
	    arp_build(p, sizeof(p), ARP_HTYPE_IB, (t[0] & 0x80) ? ARP_OP_REPLY : ARP_OP_REQUEST,
		      sha, ip_be32(v4tab[t[1] & 15]), tha, ip_be32(v4tab[t[1] >> 4]));

	check(n == ARP_IB_LEN);
	ib_receive(0x0806, p, n, t[2]);
}

/* An ND message from the template octets t[0..2]:
 * t[0] bits 0-1 type (NS, NA, RS, RA), 2 option present, 3-5 its address, 6-7 the
 *      destination (0 the target or ours, 1 the target's solicited-node group,
 *      2 all-nodes, 3 our link-local);
 * t[1] bits 0-3 source, 4-7 target;
 * t[2] bits 0-2 NA flags (R, S, O), 3 hop limit 64 instead of 255, 4-7 receive meta. */
static void ib_nd(const uint8_t *t)
{
	static const uint8_t types[4] = { ND_NS, ND_NA, ND_RS, ND_RA };
	uint8_t type = types[t[0] & 3], p[IP6_HDR_LEN + 16 + 16 + 24];
	const uint8_t *src = v6tab[t[1] & 15], *target = v6tab[t[1] >> 4];
	uint8_t dst[16], *icmp = p + IP6_HDR_LEN;
	size_t body, n;

	switch ((t[0] >> 6) & 3) {
	case 0:
		memcpy(dst, type == ND_NS ? target : v6tab[1], 16);
		break;
	case 1:
		nd_solicited_node(target, dst);
		break;
	case 2:
		memcpy(dst, nd_all_nodes, 16);
		break;
	default:
		memcpy(dst, v6tab[0], 16);
		break;
	}
	memset(p, 0, sizeof(p));
	icmp[0] = type;
	switch (type) {
	case ND_NS:
		memcpy(icmp + 8, target, 16);
		body = 24;
		break;
	case ND_NA:
		icmp[4] = (uint8_t)((t[2] & 7) << 5); /* R, S, O */
		memcpy(icmp + 8, target, 16);
		body = 24;
		break;
	case ND_RS:
		body = 8;
		break;
	default: /* RA: hop limit, flags, lifetime, reachable, retrans */
		icmp[4] = 64;
		ip_put16(icmp + 6, 1800);
		body = 16;
		break;
	}
	if (t[0] & 4) {
		icmp[body] = type == ND_NA ? ND_OPT_TLLA : ND_OPT_SLLA;
		icmp[body + 1] = 3;
		memcpy(icmp + body + 2, hwtab[(t[0] >> 3) & 7], IPOIB_HWADDR_LEN);
		body += 24;
	}
	n = IP6_HDR_LEN + body;
	p[0] = 0x60;
	ip_put16(p + 4, (uint16_t)body);
	p[6] = 58;
	p[7] = (t[2] & 8) ? 64 : 255;
	memcpy(p + 8, src, 16);
	memcpy(p + 24, dst, 16);
	fix_icmp6(p, n);
	ib_receive(0x86dd, p, n, (uint8_t)(t[2] >> 4));
}

/* ---- the Ethernet side ------------------------------------------------------------- */

static void eth_punt(enum fwd_punt why, const uint8_t *frame, size_t len)
{
	uint32_t key;
	enum fwd_pclass c = fwd_punt_classify(eng, why, false, frame, len, 0, &key);
	struct fwd_msg *m = fwd_msg_get(eng, 0, FWD_OWNER_WORKER, c);
	void *p = m;

	if (!m)
		return;
	m->type = FWD_MSG_PUNT_ETH;
	m->punt = (uint8_t)why;
	m->ifindex = (uint16_t)ieth;
	m->family = 0;
	memcpy(m->data, frame, len);
	m->len = (uint32_t)len;
	check(ring_enqueue_burst(fwd_engine_ring_to_ctl(eng, 0), &p, 1) == 1);
	fwd_sp_poll(eng);
}

/* t[0] bits 0-1: ARP request, ARP reply, NS, NA; 2-3 the host's MAC; t[1] bits 0-3 the
 * sender / source, 4-7 the target. */
static void eth_side(const uint8_t *t)
{
	uint8_t f[ETHF_HLEN + ND_MAX_LEN],
	    mac[6] = { 2, 0, 0, 0, 2, (uint8_t)(2 + ((t[0] >> 2) & 3)) };
	size_t n;

	memcpy(f + 6, mac, 6);
	switch (t[0] & 3) {
	case 0:
	case 1:
		memset(f, 0xff, 6);
		if (t[0] & 1)
			memcpy(f, eth_mac, 6);
		n = arp_build(f + ETHF_HLEN, sizeof(f) - ETHF_HLEN, ARP_HTYPE_ETHER,
			      (t[0] & 1) ? ARP_OP_REPLY : ARP_OP_REQUEST, mac,
			      ip_be32(v4tab[t[1] & 15]), (t[0] & 1) ? eth_mac : NULL,
			      ip_be32(v4tab[t[1] >> 4]));
		ip_put16(f + 12, ETHF_TYPE_ARP);
		eth_punt(FWD_PUNT_ARP, f, ETHF_HLEN + n);
		return;
	case 2:
		n = nd_build_ns(f + ETHF_HLEN, sizeof(f) - ETHF_HLEN, ND_LINK_ETHER,
				v6tab[t[1] & 15], NULL, v6tab[t[1] >> 4], mac);
		break;
	default:
		n = nd_build_na(f + ETHF_HLEN, sizeof(f) - ETHF_HLEN, ND_LINK_ETHER,
				v6tab[t[1] & 15], v6tab[7], v6tab[t[1] & 15],
				ND_NA_SOLICITED | ND_NA_OVERRIDE, mac);
		break;
	}
	if (!n)
		return;
	memcpy(f, eth_mac, 6);
	ip_put16(f + 12, ETHF_TYPE_IPV6);
	eth_punt(FWD_PUNT_ND, f, ETHF_HLEN + n);
}

/* One frame control sent on Ethernet. */
static void check_eth_sent(const struct fwd_msg *m)
{
	uint16_t type;

	check(m->ifindex == ieth && m->len >= ETHF_HLEN);
	check(!memcmp(m->data + 6, eth_mac, 6));
	type = ip_be16(m->data + 12);
	if (type == ETHF_TYPE_ARP) {
		const uint8_t *b = m->data + ETHF_HLEN;
		struct arp_pkt a;
		enum arp_reason r = arp_parse(b, m->len - ETHF_HLEN, ARP_HTYPE_ETHER, &a);

		if ((r == ARP_TPA_INVALID && m->len - ETHF_HLEN >= 28 && ip_be16(b + 6) == 2 &&
		     !ip_be32(b + 24)) ||
		    r == ARP_REPLY_TO_SELF)
			r = ARP_OK, a.sha = b + 8;
		check(r == ARP_OK && !memcmp(a.sha, eth_mac, 6));
	} else {
		struct nd_msg nm;

		check(type == ETHF_TYPE_IPV6);
		check(nd_parse(m->data + ETHF_HLEN, m->len - ETHF_HLEN, ND_LINK_ETHER, &nm) ==
		      ND_OK);
		check(!nm.tllao || !memcmp(nm.tllao, eth_mac, 6));
		check(!nm.sllao || !memcmp(nm.sllao, eth_mac, 6));
	}
}

static void drain(void)
{
	void *p;

	while (ring_dequeue_burst(fwd_engine_ring_to_worker(eng, 0), &p, 1) == 1) {
		struct fwd_msg *m = p;

		if (m->owner == FWD_OWNER_WORKER) { /* a punt of ours coming back */
			fwd_msg_recycle(eng, m);
			continue;
		}
		check(m->type == FWD_MSG_TX_ETH); /* IB sends are posted directly */
		check_eth_sent(m);
		fwd_msg_put(eng, m, FWD_OWNER_WORKER);
	}
	fwd_sp_poll(eng);
}

/* ---- the link's neighbours stay where it may learn them ------------------------------ */

static uint8_t learned_elsewhere[16][16];
static unsigned n_learned_elsewhere;

static int in_scope(void *arg, const struct neigh_info *ni)
{
	(void)arg;
	if (neigh_on_link(on_link, n_on_link, ni->family, ni->addr))
		return 0;
	if (ni->family == AF_INET6 && ni->addr[0] == 0xfe && (ni->addr[1] & 0xc0) == 0x80)
		return 0;
	for (unsigned i = 0; i < n_learned_elsewhere; i++)
		if (!memcmp(learned_elsewhere[i], ni->addr, ni->family == AF_INET ? 4 : 16))
			return 0;
	{
		char as[IP_ADDR_STRLEN];
		struct ip_addr a = { .family = (uint8_t)ni->family };

		memcpy(a.bytes, ni->addr, ni->family == AF_INET ? 4 : 16);
		fprintf(stderr, "neighbour %s (%s)\n", ip_addr_format(&a, as, sizeof(as)),
			neigh_state_name(ni->state));
	}
	fail(__LINE__, "a neighbour learned outside the link's subnets");
	return 0;
}

/* t[0] bit 0 family, 1-4 address, 5-7 hardware address. */
static void learn_elsewhere(uint8_t t)
{
	int family = (t & 1) ? AF_INET6 : AF_INET;
	const uint8_t *a = family == AF_INET ? v4tab[(t >> 1) & 15] : v6tab[(t >> 1) & 15];
	int r = ipoib_link_neigh_learn(ibl, family, a, hwtab[t >> 5]);

	check(r == 0 || r == 1 || r == -EINVAL || r == -ENOSPC);
	if (r == 1 && n_learned_elsewhere < 16)
		memcpy(learned_elsewhere[n_learned_elsewhere++], a, family == AF_INET ? 4 : 16);
}

static void teardown(void)
{
	drain();
	/* proxied neighbours' host routes: the next input starts without them */
	(void)rt_del_source(rt, RT_SRC_LEARNED);
	if (on_link_set)
		neigh_foreach(ipoib_link_neigh(ibl), in_scope, NULL);
	check(fwd_engine_if_del(eng, iib) == 0);
	ipoib_link_stop(ibl);
	check(sa.nj == 0); /* every group left */
	/* The SA client is freed: what it still had to answer is cancelled. */
	for (unsigned i = 0; i < sa.nq; i++)
		sa.q[i].cb(sa.q[i].arg, -ECANCELED, NULL);
	sa.nq = 0;
	ipoib_link_free(ibl);
	ibl = NULL;
	check(!fqp.live);
	check(n_ahs == 0);
	check(nfree == NBUF);
	neigh_flush(fwd_snap_if(fwd_engine_current(eng), ieth)->neigh);
	drain();
	check(fwd_msg_pool_free(eng, 0, FWD_OWNER_WORKER) == free_worker);
	check(fwd_msg_pool_free(eng, 0, FWD_OWNER_CONTROL) == free_control);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;

	if (!ready) {
		setup();
		tables();
		ready = true;
	}
	if (size < 1)
		return 0;
	n_learned_elsewhere = 0;
	link_up(data[0]);
	data++, size--;
	while (size > 0) {
		uint8_t op = data[0];

		data++, size--;
		switch (op & 7) {
		case 0: {
			uint8_t meta, pl[256];
			uint16_t et;
			size_t n;

			if (size < 2)
				goto out;
			meta = data[0];
			n = data[1];
			data += 2, size -= 2;
			et = (meta & 0x30) == 0x00   ? 0x0806
			     : (meta & 0x30) == 0x10 ? 0x86dd
			     : (meta & 0x30) == 0x20 ? 0x0800
						     : 0;
			if (!et) {
				if (size < 2)
					goto out;
				et = ip_be16(data);
				data += 2, size -= 2;
			}
			if (n > size)
				n = size;
			memcpy(pl, data, n);
			data += n, size -= n;
			if (meta & 0x40)
				fix_icmp6(pl, n);
			ib_receive(et, pl, n, meta);
			break;
		}
		case 1:
			if (size < 3)
				goto out;
			ib_arp(data);
			data += 3, size -= 3;
			break;
		case 2:
			if (size < 3)
				goto out;
			ib_nd(data);
			data += 3, size -= 3;
			break;
		case 3:
			if (size < 2)
				goto out;
			eth_side(data);
			data += 2, size -= 2;
			break;
		case 4:
			sa_answers((uint8_t)(op >> 3), (uint16_t)(0x10 + (op >> 3)));
			break;
		case 5:
			fake_now += (uint64_t)(op >> 3) * 250;
			(void)fwd_sp_tick(eng);
			(void)ipoib_link_tick(ibl);
			break;
		case 6:
			drain();
			break;
		default:
			if (size < 1)
				goto out;
			learn_elsewhere(data[0]);
			data++, size--;
			break;
		}
	}
out:
	teardown();
	return 0;
}
