/*
 * forward: the per-packet pipeline (prefix fwd_), as functions over buffers that a unit
 * test drives without threads or ports: one input packet + the engine's snapshot ->
 * a verdict (transmit these frames / punt to the control thread / drop with a reason)
 * and the output frames. The worker (engine/worker.h) does the I/O around it.
 *
 * Order of operations (docs/packet-rules.md, docs/dataplane.md):
 *   classify   Ethernet: ethf_parse, frames to other MACs dropped, ARP -> punt, ND ->
 *              punt; IPoIB: the ipoib_rx of ipoib_link_rx (ARP and ND punted)
 *   validate   ip4_validate / ip6_validate
 *   martians   ip4_check_addrs / ip6_check_addrs with the snapshot's knobs
 *   local      a destination that is one of the gateway's addresses (the FIB's LOCAL
 *              next hop) -> punt (echo answered by the slow path)
 *   route      rt_fib_lookup4/6, ECMP by rt_flow_hash4/6 (5-tuple; 3-tuple for
 *              fragments and port-less protocols) -- the one flow hash of the engine
 *   TTL        ip4_ttl_decrement / ip6_hop_decrement; expiry -> ICMP time exceeded
 *   neighbour  neigh_lookup on the egress interface (RCU); not usable -> punt
 *              (FWD_PUNT_UNRESOLVED: the control thread resolves and parks it)
 *   MTU        the neighbour's (IPoIB: per destination) or the interface's; IPv4 with
 *              DF clear -> fragments; DF -> ICMP frag needed; IPv6 -> packet too big.
 *              A GSO packet (an Ethernet port's super-frame, struct gso_pkt) is never
 *              too big: sent whole to an Ethernet port that segments (ethp attr.gso),
 *              whole over IPoIB when the destination's MTU holds it (connected mode),
 *              else segmented here (pkt/gso.h) to the egress MTU, each segment with its
 *              own headers and full checksums
 *   MSS        mss_clamp4/6 on SYNs when the knob is on
 *   emit       to Ethernet: header (+VLAN by the port) in the descriptor and a pointer
 *              to the IP packet where it lies (no copy); to IPoIB: one copy into a
 *              buffer of the egress port's pool behind the 4-octet IPoIB header, an
 *              ibp_send with the link's UD QP, the neighbour's AH and QPN
 * ICMP errors are built by the worker into its scratch memory, rate limited per worker,
 * and sent through the same route/neighbour/emit stages toward the packet's source.
 *
 * A burst first goes through fwd_fast_burst: the common case of the same order (a
 * valid unicast packet routed to a usable neighbour within the MTU), one stage over the
 * whole burst before the next; what it leaves comes through fwd_input_* one by one.
 *
 * Threads: a struct fwd_ctx belongs to one worker (or one test); every function here
 * runs on that thread, inside its RCU read-side state.
 */
#ifndef IBGW_ENGINE_FORWARD_H
#define IBGW_ENGINE_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "ipoib/ipoib_link.h"
#include "pkt/icmp.h"

/* Outputs of one input: a 65520 packet into 1500 MTU is 45 fragments; a GSO packet is
 * at most GSO_SEGS_MAX segments. */
#define FWD_TX_MAX GSO_SEGS_MAX
/* Scratch one input may need (fragments, ICMP, GSO segments for an Ethernet egress:
 * 64 KiB of payload and GSO_SEGS_MAX headers of up to GSO_HDR_MAX, each rounded to 64). */
#define FWD_SCRATCH_PKT (112 * 1024)
#define FWD_RL_BUCKETS  1024

/* Packets one fwd_fast_burst call takes (a receive burst, or a run of it). */
#define FWD_BURST_MAX 64

/*
 * The FIB lookups fwd_fast_burst made for the packets it left to fwd_input_*, for those
 * to take instead of looking up again: the entry of the same packet (its IP header's address), the same FIB and the
 * same destination, in input order. Emptied by fwd_ctx_begin (a lookup result is an
 * index into the FIB, good only until the worker's next quiescent state) and by a
 * burst after inputs took from it; filled across the calls that take one burst in runs
 * (IPoIB: one per link). A caller that changes the tables itself between a
 * burst and its inputs (a single-threaded test, tables without a defer) calls
 * fwd_ctx_begin in between: a route slot may be reused at once there.
 */
struct fwd_warmed {
	unsigned n, next;
	const uint8_t *ip[FWD_BURST_MAX];
	const struct rt_fib *fib[FWD_BURST_MAX];
	uint32_t v[FWD_BURST_MAX];
	uint8_t dst[FWD_BURST_MAX][16]; /* network order; IPv4 in the first 4 */
};

/* Per-worker pipeline state. Owner: its worker thread. */
/*
 * The next hops this worker punted packets toward unresolved (FWD_PUNT_UNRESOLVED) and
 * has not had all of them back. While a next hop is held, its later packets are punted
 * too, even once its neighbour is usable: they queue behind the earlier ones on the
 * control thread, which sends them all back through this worker's ring in order,
 * instead of overtaking the parked ones as soon as the neighbour is published (a flow
 * keeps its order across a resolution; docs/dataplane.md, "Order"). The worker adds a
 * hop when it hands such a punt over (fwd_held_add) and drops it when the last one comes
 * back, sent or dropped (fwd_held_done). 32 sets of 4: a next hop that finds its set
 * full is not held (a scan fills them; bystanders' hops then resolve as before).
 */
#define FWD_HELD_SETS 32
#define FWD_HELD_WAYS 4
struct fwd_held_hop {
	uint32_t count; /* punts out; 0: a free way */
	uint16_t ifindex;
	uint8_t family;
	uint8_t nh[16];
};
struct fwd_held {
	unsigned n; /* hops held: the data path looks only when there are some */
	struct fwd_held_hop set[FWD_HELD_SETS][FWD_HELD_WAYS];
};

struct fwd_ctx {
	struct fwd_engine *e;
	unsigned worker;
	const struct fwd_snap *snap; /* set per loop turn: fwd_ctx_begin */
	const struct rt_fib *fib;    /* of the packet at hand: its ingress's tenant */
	uint32_t seed;
	struct fwd_stats *st;
	uint64_t now_ns, now_ms;
	struct icmp_ratelimit rl;
	struct icmp_rl_bucket rl_b[FWD_RL_BUCKETS];
	uint16_t ip_id; /* identification of our ICMPv4 errors */
	/* Scratch memory for fragments and ICMP errors; reset when the frames using it
	 * have been transmitted (fwd_ctx_scratch_reset). */
	uint8_t *scratch;
	size_t scratch_cap, scratch_used;
	struct fwd_warmed warmed; /* fwd_fast_burst's routes */
	struct fwd_held held;
};

int fwd_ctx_init(struct fwd_ctx *c, struct fwd_engine *e, unsigned worker);
void fwd_ctx_fini(struct fwd_ctx *c);
/* Start of a loop turn: the current snapshot and the clock. */
void fwd_ctx_begin(struct fwd_ctx *c, uint64_t now_ns);
static inline void fwd_ctx_scratch_reset(struct fwd_ctx *c)
{
	c->scratch_used = 0;
}
static inline bool fwd_ctx_scratch_low(const struct fwd_ctx *c)
{
	return c->scratch_cap - c->scratch_used < FWD_SCRATCH_PKT;
}

enum fwd_verdict {
	FWD_V_DROP = 0, /* counted under res->drop */
	FWD_V_TX,       /* res->tx[0..n_tx) */
	FWD_V_PUNT,     /* res->punt, res->punt_data/len (and res->tx may hold ICMP too) */
};

/* One frame to send. */
struct fwd_tx {
	const struct fwd_if *ifp; /* egress */
	struct ethp_tx eth;       /* FWD_IF_ETH: header + pointer (into the input or scratch) */
	struct ibp_send ib;       /* FWD_IF_IPOIB: buffer (IPoIB header + packet) and where */
};

struct fwd_result {
	enum fwd_verdict v;
	enum fwd_drop drop;
	/* FWD_V_PUNT */
	enum fwd_punt punt;
	const struct fwd_if *punt_if; /* ingress (ARP/ND/LOCAL) or egress (UNRESOLVED) */
	uint8_t punt_family;
	uint8_t punt_nh[16];      /* UNRESOLVED: the neighbour to resolve */
	const uint8_t *punt_data; /* Ethernet: the frame (ARP, ND, LOCAL); IPoIB payload;
				   * UNRESOLVED: the IP packet */
	uint32_t punt_len;
	/* Frames to send (FWD_V_TX; also ICMP errors alongside a drop). */
	unsigned n_tx;
	struct fwd_tx tx[FWD_TX_MAX];
};

/*
 * A burst's common case, stage by stage: every packet through one stage before the
 * next, each stage's answer carried to the next in arrays (VPP's shape), so that the
 * cache misses of one stage overlap across packets and each stage is a short loop:
 *   1 validate   IPv4 without options or fragments, IPv6 without extension headers,
 *                TTL / hop limit above 1, ordinary unicast addresses on both sides (the
 *                martian shortcut, no extra prefixes), not ND
 *   2 route      lpm4/lpm6_lookup_bulk in the ingress's FIB (every IP packet of the
 *                burst, kept for fwd_input_* in struct fwd_warmed), ECMP by flow hash
 *   3 next hop   a gateway or connected route out of another interface that is up;
 *                the neighbour's index slot loaded (neigh_warm_slot)
 *   4 rewrite    the neighbour usable and not held, the packet within the MTU, no MSS
 *                clamping due, an IPoIB buffer to be had: TTL - 1 and the frame's
 *                descriptor in tx[i]
 * A packet that leaves the common case at any stage is left untouched for fwd_input_*,
 * which decides it as it always has (the same verdict for a packet either way: the
 * differential test in test_forward). in: the ingress of every packet. ip[i]: packet
 * i's IP header where it is a candidate (IP, unicast at the link layer, not a GSO
 * frame), else NULL; len[i] its length to the end of the buffer. merge: packets the
 * caller would merge with their neighbours in the burst (the IPoIB receive coalescing)
 * when the egress sends GSO frames whole; such a packet is left to it. tx NULL: stages
 * 1-3 only, to warm the caches and the routes for fwd_input_*. At most FWD_BURST_MAX
 * packets; within one fwd_ctx_begin turn, in the order the inputs then come. Returns
 * the packets done (bit i: tx[i] is to be sent, counted forwarded).
 */
uint64_t fwd_fast_burst(struct fwd_ctx *c, const struct fwd_if *in, uint8_t *const *ip,
			const size_t *len, unsigned n, uint64_t merge, struct fwd_tx *tx);
/* A candidate for fwd_fast_burst from an Ethernet receive: the IP header of an untagged
 * IPv4/IPv6 frame to our MAC (pkttype host, unicast source and destination), not a GSO
 * frame, its version the EtherType's, and its length; else NULL. */
uint8_t *fwd_eth_ip(uint8_t *frame, size_t len, uint8_t pkttype, const struct gso_pkt *gso,
		    size_t *ip_len);
/* The same from a classified IPoIB receive: its IP header (rx->len long) when it is
 * IPv4 or IPv6 of the version its IPoIB type says, sent to our QPN (not multicast). A
 * receive the worker merged (GSO) is no candidate. */
static inline uint8_t *fwd_ib_ip(const struct ipoib_rx *rx)
{
	if (rx->mcast || !rx->len ||
	    !((rx->kind == IPOIB_RX_IP4 && rx->data[0] >> 4 == 4) ||
	      (rx->kind == IPOIB_RX_IP6 && rx->data[0] >> 4 == 6)))
		return NULL;
	return (uint8_t *)(uintptr_t)rx->data; /* fwd_input_ib's too: the payload is ours */
}

/* A frame received on Ethernet interface in (untagged; data/len/pkttype/gso of
 * ethp_rx; gso NULL: not a GSO frame). The frame may be modified in place (TTL,
 * checksum, MSS). */
void fwd_input_eth(struct fwd_ctx *c, const struct fwd_if *in, uint8_t *frame, size_t len,
		   uint8_t pkttype, const struct gso_pkt *gso, struct fwd_result *res);
/* A receive on IPoIB interface in, classified by ipoib_link_rx / ipoib_rx_classify. The
 * payload (rx->data) may be modified in place. gso: NULL, or the metadata of TCP
 * segments the worker merged (pkt/gro.h: the checksum left partial). */
void fwd_input_ib(struct fwd_ctx *c, const struct fwd_if *in, const struct ipoib_rx *rx,
		  const struct gso_pkt *gso, struct fwd_result *res);
/* Whether the TCP packet ip[0..len), received on IPoIB interface in, is worth merging
 * with the segments after it (the worker's receive coalescing): routed, not to the
 * gateway, by a single next hop, out of an Ethernet port that sends GSO frames whole,
 * so that the merged packet leaves as one frame. A lookup in the ingress's FIB. */
bool fwd_gro_wanted(struct fwd_ctx *c, const struct fwd_if *in, const uint8_t *ip, size_t len);
/* The egress stage for an IP packet already routed and TTL-decremented (a packet that
 * waited for resolution, FWD_MSG_TX_IP): neighbour, MTU, MSS, emit. The packet is
 * modified in place. */
void fwd_output_ip(struct fwd_ctx *c, const struct fwd_if *out, int family, const uint8_t *nh,
		   uint8_t *pkt, size_t len, struct fwd_result *res);

/* The same for the gateway's own packets (TTL / hop limit left alone, no ICMP errors). */
void fwd_output_local(struct fwd_ctx *c, const struct fwd_if *out, int family, const uint8_t *nh,
		      uint8_t *pkt, size_t len, struct fwd_result *res);

/* An unresolved punt toward (ifindex, family, nh) was handed to the control thread:
 * false when its set is full (not held: the message must not call fwd_held_done). */
bool fwd_held_add(struct fwd_ctx *c, uint32_t ifindex, int family, const uint8_t *nh);
/* One such punt came back (sent through fwd_output_ip, or dropped). */
void fwd_held_done(struct fwd_ctx *c, uint32_t ifindex, int family, const uint8_t *nh);

/* Count a result in c->st (the worker and tests call it once per input). */
void fwd_count(struct fwd_ctx *c, const struct fwd_result *res);

#endif
