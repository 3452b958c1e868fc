/*
 * A simulated node's HCA as libibumad shows it (prefix simnode_): under umad2sim, the
 * node that SIM_HOST names, its ports as OpenSM configured them in ibsim. Read the way
 * any IB port is read: umad_get_port (port GUID, P_Key table) and directed-route SMPs
 * to the local port (hop count 0) for NodeDescription, NodeInfo and PortInfo.
 *
 * umad2sim gives a process one device with one port, its node's first (ibsim attaches
 * every client there); the node's other ports (port 2 of a two-port HCA) are read by
 * local SMPs through it (docs/simulated-rack.md, "Two-port HCAs").
 *
 * User: the verbs shim (sim/verbs/vsim_*.c: ibv_query_port and its port events). One
 * simnode per process is enough and better: umad2sim hands every SMI MAD of the process to the last agent registered.
 *
 * Threads: any; a mutex serialises the SMPs of one simnode.
 */
#ifndef IBGW_SIM_VERBS_SIM_NODE_H
#define IBGW_SIM_VERBS_SIM_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/ib_simfab.h"

struct simnode {
	char name[SIMFAB_NAME_MAX]; /* NodeDescription, trailing blanks cut */
	uint8_t umad_port;          /* the port umad2sim serves this process */
	uint8_t num_ports;          /* NodeInfo NumPorts */
	uint64_t node_guid;         /* host order */
	int umad_fd, umad_agent;
	pthread_mutex_t lock;
};

/* One port's state as PortInfo and umad_get_port tell it. */
struct simnode_port {
	struct simfab_port_info info; /* name, port_num, lmc, mtu, GUIDs, LIDs, P_Keys */
	uint8_t state;                /* PortInfo PortState: 1 Down .. 4 Active */
	uint8_t sm_sl, subnet_timeout;
	bool client_rereg; /* PortInfo ClientReregister (the SM asks clients to re-join) */
};

/* Open the local HCA through libibumad, for port want_port (1-based; it picks the umad
 * port that reaches it), and read NodeDescription and NodeInfo. Returns 0 or -errno
 * (logged: no IB port, i.e. not a rack node under libumad2sim; SMPs unanswered). */
int simnode_open(struct simnode *n, uint8_t want_port);
/* Read port_num's identity and state (PortInfo SMP, umad_get_port). 0 or -errno. */
int simnode_read_port(struct simnode *n, uint8_t port_num, struct simnode_port *out);
void simnode_close(struct simnode *n);
/* The verbs shim's umad_recv offers every MAD it reads here: an answer to one of our
 * SMPs, read on another agent's fd (umad2sim hands all SMI MADs of a process to the agent
 * registered last), is kept for the SMP waiting for it. True when taken. Any thread. */
bool simnode_smp_divert(const void *umad, int len);

#endif
