/*
 * heartbeat: UDP to one port of the gateway's addresses, taken and sent by a thread of
 * its own (the failover's heartbeat thread, gateway/dp_ha.c) straight through the
 * workers, beside the control thread rather than through it: nothing the control thread
 * is busy with (a reload of many routes, a flood of punts, a burst of control requests)
 * delays a heartbeat in or out.
 *
 * Per worker slot there are two rings, worker -> heartbeat thread (the datagrams to the
 * bound port, class CONTROL of the worker's pool, and the returns of the heartbeat
 * pool's messages) and back (sends, and the returns of the worker's), and a small pool
 * of messages for sends through that worker. The workers write fwd_hb_fd() when they
 * hand something over; the heartbeat thread wakes a sleeping worker as the control
 * thread does (through the worker's control ring's announcement).
 *
 * A send goes out only to a neighbour already resolved on the interface (an own
 * packet: a worker never parks it); otherwise fwd_hb_send_udp says -EAGAIN and the
 * caller hands it to the control thread (fwd_sp_send_udp resolves and parks).
 *
 * Threads: fwd_hb_bind: the control thread. fwd_hb_poll and fwd_hb_send_udp: the
 * heartbeat thread, or any one thread at a time under the caller's lock, registered
 * with liburcu QSBR and online while it calls them (they read the engine's snapshot).
 * fwd_hb_fd: any.
 */
#ifndef IBGW_ENGINE_HEARTBEAT_H
#define IBGW_ENGINE_HEARTBEAT_H

#include "engine/slowpath.h"

/* The heartbeat thread's messages per worker: the sends in flight through it. */
#define FWD_HB_POOL 16

/* Datagrams to port on our addresses go to the heartbeat channel from now on (0:
 * none; those already handed over are still polled). The port must not be the one of
 * fwd_sp_udp_bind. 0 or -EINVAL. */
int fwd_hb_bind(struct fwd_engine *e, uint16_t port);
/* Whether the IP packet p is UDP to the bound port (a quick look: a worker punting it
 * hands it over; the full checks are fwd_hb_poll's). Any thread. */
bool fwd_hb_match(const struct fwd_engine *e, const uint8_t *p, size_t len);
/* An eventfd (non-blocking), readable when a worker handed something over: the
 * heartbeat thread waits on it and reads it before fwd_hb_poll. */
int fwd_hb_fd(const struct fwd_engine *e);
/* Every datagram handed over to fn (valid IP and UDP: see fwd_udp_parse in
 * engine_pvt.h), the returned messages to their pools. Returns how many datagrams. */
unsigned fwd_hb_poll(struct fwd_engine *e, fwd_sp_udp_fn fn, void *ctx);
/* As fwd_sp_send_udp (TTL / hop limit 255, dst on ifindex's link), through the worker
 * of ifindex: 0, -EINVAL, -ENODEV (not up), -EMSGSIZE, -ENOBUFS (no message of this
 * channel free, or its ring full), -EAGAIN (dst not resolved there: use the slow path). */
int fwd_hb_send_udp(struct fwd_engine *e, uint32_t ifindex, const struct ip_addr *src,
		    const struct ip_addr *dst, uint16_t sport, uint16_t dport, const void *payload,
		    size_t len);

struct fwd_hb_stats {
	uint64_t delivered; /* datagrams handed to fn */
	uint64_t refused;   /* handed over but not a valid datagram to the port */
	uint64_t sent;
	uint64_t no_msg; /* a send found no message free */
};
/* The heartbeat thread's counters (read them under the caller's lock). */
void fwd_hb_stats(const struct fwd_engine *e, struct fwd_hb_stats *out);

#endif
