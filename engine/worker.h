/*
 * worker: the forwarding threads (prefix fwd_worker_). Each serves its own queue of
 * every Ethernet port (worker w, queue w: the port spreads received frames over its
 * queues by flow, PACKET_FANOUT), and owns the data path of the IB ports of the
 * interfaces assigned to it (fwd_if_config.worker), each with all its IPoIB links. A
 * loop turn:
 *
 *   snapshot + clock  ->  RX bursts (ethp rx_burst; ibp poll -> ipoib_link_rx, send
 *   completions -> ipoib_link_tx_done)  ->  engine/forward.h per packet  ->  TX bursts
 *   per egress port (ethp tx_burst; ibp post_send)  ->  receive buffers back (ethp
 *   buf_put, ipoib_link_repost)  ->  the control->worker ring (frames to send, parked
 *   packets, returned messages)  ->  punts to the worker->control ring  ->  quiescent
 *   state.
 *
 * Idle: after spin_us without work the worker arms every port (ethp arm, ibp arm),
 * polls once more, announces sleep on its ring (ring_sleep_prepare), goes RCU-offline
 * and sleeps in epoll on the ports' fds and the ring's eventfd.
 *
 * Receive spreads over workers: every worker polls its own queue of every Ethernet port
 * (the device's RSS or PACKET_FANOUT's hash keeps a flow on one) and those left over
 * from more workers (queue q on worker q % pollers: ports never close queues), and the
 * IB ports given to it (queue q of a port on worker (fwd_if.worker + q) % pollers; the
 * HCA's RSS keeps a datagram flow on one queue, an RC connection is on one queue).
 *
 * Transmit crosses workers: a packet leaves through its egress port from the worker
 * that received it, through that worker's own queue of the port: unlocked on Ethernet;
 * on IB the port serialises each queue (a lock per batch, uncontended while the port
 * has a queue per worker; an RC connection's sends go through its own queue). What one
 * queue sends leaves in order, and one flow arrives on one queue, so a flow keeps its
 * order through the gateway.
 *
 * Threads: start/stop from the control thread; the loop runs on its own thread
 * (registered with liburcu QSBR).
 */
#ifndef IBGW_ENGINE_WORKER_H
#define IBGW_ENGINE_WORKER_H

#include <stdint.h>

#include "engine/engine.h"

struct fwd_worker_config {
	int cpu;          /* pin to this CPU; -1: no pinning */
	unsigned spin_us; /* busy polling before sleeping; 0: the default (FWD_WORKER_SPIN_US) */
	unsigned burst;   /* RX burst per port; 0: 32 */
	unsigned rt_priority; /* SCHED_FIFO at this priority (lib/rt_sched.h); 0: normal */
};

#define FWD_WORKER_SPIN_US 50

/* Start worker w of the engine (0 <= w < n_workers) with the ports of the interfaces
 * assigned to it now; interfaces added later with that worker are picked up at the
 * next loop turn. Returns 0 or -errno. */
int fwd_worker_start(struct fwd_engine *e, unsigned w, const struct fwd_worker_config *cfg);
/* Pin a running worker to cpu, or let it run anywhere (-1): a reload's worker_cpus.
 * Returns 0, -ESRCH (not started), -EINVAL (no such CPU) or -errno. */
int fwd_worker_set_cpu(struct fwd_engine *e, unsigned w, int cpu);
/* How long a running worker keeps polling without work before it sleeps (a reload's
 * busy_poll_us): read by the worker at its next loop turn. No effect if not started. */
void fwd_worker_set_spin(struct fwd_engine *e, unsigned w, unsigned spin_us);
/* A running worker to SCHED_FIFO at prio, or back to normal scheduling (0): a reload's
 * worker_rt_priority. Returns 0, -ESRCH (not started) or -errno (-EPERM: not allowed). */
int fwd_worker_set_rt_priority(struct fwd_engine *e, unsigned w, unsigned prio);
/* Run n workers (1..FWD_WORKERS_MAX) instead of the current number, with the
 * interface of each index on worker worker_of[index] (unused indexes ignored): new
 * workers start with cfgs[id] (cfgs has n entries), interfaces that change worker are
 * handed over (the old worker lets go of the port before the new one polls it), and
 * the workers from n on stop (their slots retire: engine/engine.h). Blocks for a grace
 * period: the caller must not be an online RCU reader. Returns 0, -EINVAL, -ENOMEM
 * or -errno of a thread that could not start; on error nothing has changed. */
int fwd_worker_set_count(struct fwd_engine *e, unsigned n, const unsigned worker_of[FWD_IF_MAX],
			 const struct fwd_worker_config *cfgs);
/* Stop every started worker and join them (their messages are returned). */
void fwd_worker_stop_all(struct fwd_engine *e);

#endif
