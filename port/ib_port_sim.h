/*
 * What the sim backend (port/ib_port_sim.c) tells beyond the ibp_ops table: its
 * counters, for tests, benchmarks and `gwctl` statistics. Only for ports opened with
 * ibp_sim_ops.
 */
#ifndef IBGW_PORT_IB_PORT_SIM_H
#define IBGW_PORT_IB_PORT_SIM_H

#include <stdint.h>

#include "port/ib_port.h"

struct ibp_sim_stats {
	/* UD */
	uint64_t ud_tx, ud_tx_link_down, ud_tx_full, ud_tx_too_long;
	uint64_t ud_rx, ud_rx_no_wqe, ud_rx_too_long;
	/* RC, summed over the port's RC QPs (living and destroyed) */
	uint64_t rc_tx_pkts, rc_retrans_pkts, rc_timeouts, rc_seq_naks_rcvd, rc_rnr_naks_rcvd;
	uint64_t rc_rx_pkts, rc_dup_pkts, rc_gap_pkts, rc_seq_naks_sent, rc_rnr_naks_sent;
	uint64_t rc_acks_sent, rc_msgs_sent, rc_msgs_rcvd;
	uint64_t rc_tx_link_down; /* packets lost because the port was down */
	uint64_t rc_tx_blocked;   /* times the fabric socket was full (backpressure) */
	/* fabric messages */
	uint64_t rx_bad_packet, rx_unknown_qp, rx_wrong_source, rx_wrong_opcode;
};

/* Counters of a sim port (any thread; takes the port's data-path lock). */
int ibp_sim_stats(struct ibp_port *port, struct ibp_sim_stats *out);

#endif
