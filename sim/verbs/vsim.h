/*
 * libibverbs2sim (sim/verbs/vsim_*.c): the libibverbs entry points the product uses,
 * implemented as a software HCA on the simulated fabric (docs/verbs-sim.md). A process
 * on the simulated rack gets it with LD_PRELOAD, next to libumad2sim; nothing includes
 * this header there: the program calls plain ibv_* functions.
 *
 * This header is for the shim's unit tests, which link its objects directly and have
 * no umad2sim: they describe the nodes themselves instead of reading them through
 * libibumad.
 *
 * Environment of the shim:
 *   IBVSIM_SOCKET   the fabric's socket (default $IBGW_RACK_STATE/fabric.sock)
 *   IBVSIM_PORT_MS  how often the simulated HCA re-reads its ports for events
 *                   (PortInfo by SMP; default 500 ms)
 *   IBVSIM_RSS=0    an HCA without UD RSS (read at each call): ibv_query_device_ex
 *                   reports no rss_caps and no WQs, and WQs, indirection tables, RSS
 *                   QPs and source-QPN QPs fail with EOPNOTSUPP
 * and the faults it makes on demand, to drive the error paths of the code above it
 * (each read by the verb at each call: set or unset between calls):
 *   IBVSIM_FAULT_REG_MR=E     every ibv_reg_mr fails with errno E (12: ENOMEM, what a
 *                             too low RLIMIT_MEMLOCK gives)
 *   IBVSIM_FAULT_CQ_DEPTH=N   a CQ created meanwhile holds at most N completions while
 *                             it reports the size asked for (a provider short of its
 *                             word): more outstanding overrun it (IBV_EVENT_CQ_ERR)
 *   IBVSIM_FAULT_MODIFY_QP=E  every ibv_modify_qp from RESET to INIT fails with errno E
 *                             (a QP that cannot be brought back)
 *   IBVSIM_FAULT_FILE=PATH    (read when a device is opened; default ibvsim-fault.PID
 *                             in the working directory) a file the port watchers look
 *                             for every IBVSIM_PORT_MS, to fault a running program:
 *                             removed when read, then each line applied once: "qp QPN
 *                             [INDEX]" or "wq QPN INDEX", as vsim_test_fault below
 */
#ifndef IBGW_SIM_VERBS_VSIM_H
#define IBGW_SIM_VERBS_VSIM_H

#include "sim/verbs/sim_node.h"

#define VSIM_MAX_PORTS  2
#define VSIM_TEST_NODES 4

/* A node as the tests describe it: its name (the device's) and its ports. */
struct vsim_test_node {
	char name[SIMFAB_NAME_MAX];
	unsigned n_ports;
	struct simnode_port port[VSIM_MAX_PORTS];
};

/*
 * Tests only: the device list is these nodes (copied), not the node libibumad shows.
 * Call before the first ibv_get_device_list. Later calls replace a node's port
 * description in place (its next re-read raises the events a change means: LID,
 * P_Key, SM, client reregister, port state); n = 0 goes back to libibumad.
 */
void vsim_test_set_nodes(const struct vsim_test_node *nodes, unsigned n);

/* Tests only: how many verbs objects (PD, MR, CQ, channel, QP...) contexts still held
 * when they were closed, over the process's life (each is also logged). */
unsigned vsim_test_objects_leaked(void);

/* Tests only: a fault on demand in node's context (NULL: the first with that QPN): UD
 * QP qpn goes to ERR and raises IBV_EVENT_QP_FATAL (for an RSS receive QP, which holds
 * no WQEs, its index-th source-QPN send QP by QPN), or (wq) the WQ at entry index of
 * RSS QP qpn's indirection table goes to ERR and raises IBV_EVENT_WQ_FATAL; posted WRs
 * flush. 0, -ENOENT (no such QP), -EINVAL (no such part, or it is not running). */
int vsim_test_fault(const char *node, uint32_t qpn, unsigned index, bool wq);

/* Tests only: UD datagrams the shim dropped for want of a receive WQE (a QP's or SRQ's
 * receive queue empty, an RSS QP's WQ empty or not RDY), over the process's life. */
unsigned long vsim_test_rx_drops(void);

#endif
