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

#endif
