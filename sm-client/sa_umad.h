/*
 * sa_umad: the SA client's transport on libibumad (hardware, or ibsim's umad2sim).
 *
 * Opens one port, registers a GSI agent for the SA class (class 0x03, version 2;
 * rmpp_version 1 when asked, so that the kernel reassembles multi-segment answers on
 * hardware), sends MADs to the SA from the control thread, and receives in a small
 * MAD thread: umad2sim's fds are not kernel fds (epoll/io_uring cannot watch them, and
 * its poll() looks at one umad fd only), so the thread waits with poll() and a timeout,
 * reads each MAD with umad_recv and hands it over through a bounded single-producer/
 * single-consumer ring plus an eventfd the control loop watches.
 *
 * Port state: umad_get_port reads sysfs, which umad2sim writes once when the process
 * starts (a snapshot: a port going down, a new LID or a new SM never show there). So
 * sa_umad_poll_port asks the port itself: a directed-route SubnGet(PortInfo) with hop
 * count 0 (answered by the local port even when its link is down, on hardware and
 * under ibsim), through a second agent (class 0x81) on the same fd. The answer comes
 * back through the MAD thread like any MAD and is handed to cfg.port_cb on the control
 * thread, with the GUID and P_Keys from umad_get_port and LID, SM LID, SM SL, LMC,
 * state and SubnetTimeOut from the PortInfo.
 *
 * Thread ownership:
 *   - the MAD thread owns the receive side: poll/umad_recv, the ring's head index, the
 *     drop counter (atomic);
 *   - the control thread owns everything else: umad_send (libibumad and umad2sim allow
 *     a send concurrently with a receive on the same fd), the ring's tail index, the
 *     eventfd's read side, umad_get_port, the sa_client;
 *   - ring slots are handed over with release/acquire on the indexes.
 */
#ifndef IBGW_SM_CLIENT_SA_UMAD_H
#define IBGW_SM_CLIENT_SA_UMAD_H

#include <stdbool.h>
#include <stdint.h>

#include "sm-client/sa.h"

struct evloop;
struct sa_umad;

struct sa_umad_config {
	const char *ca_name; /* NULL: the first CA */
	int port;            /* 0: the first active port */
	bool rmpp;           /* ask the kernel for RMPP (hardware); umad2sim ignores it */
	unsigned ring_size;  /* MADs queued between the threads; 0: 256 (power of two) */
	struct evloop *loop; /* the control loop that watches the eventfd */
	/* Called on the control thread with each PortInfo answer (sa_umad_poll_port). */
	void (*port_cb)(void *arg, const struct sa_port_info *pi);
	void *port_arg;
};

extern const struct sa_transport_ops sa_umad_ops; /* ctx: struct sa_umad * */

/* Open the port and register the agent (no thread yet). Returns 0 or -errno. */
int sa_umad_open(const struct sa_umad_config *cfg, struct sa_umad **out);
/* Read the port (umad_get_port): LIDs, SM, GID prefix, GUID, P_Keys, state. */
int sa_umad_port_info(struct sa_umad *u, struct sa_port_info *out);
/* Send a PortInfo SMP to the local port; the answer goes to cfg.port_cb (on the
 * control thread, after sa_umad_start). Call it periodically (once a second). Returns 0
 * or -errno. Control thread. */
int sa_umad_poll_port(struct sa_umad *u);
/* Deliver received MADs to client c (on the control thread) and start the MAD thread. */
int sa_umad_start(struct sa_umad *u, struct sa_client *c);
/* Stop the thread, unregister, close. */
void sa_umad_close(struct sa_umad *u);

struct sa_umad_stats {
	uint64_t received, dropped_ring_full, recv_errors, sent, send_errors;
	uint64_t port_polls, port_answers;
};
void sa_umad_stats(const struct sa_umad *u, struct sa_umad_stats *out);

#endif
