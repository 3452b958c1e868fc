/*
 * The verbs shim's CM MAD carrier under libibumad (vsim_gsi.c; docs/verbs-sim.md,
 * "CM MADs"): what vsim_umad.c's libibumad entry points and the progress thread call.
 * Functions returning int give 0 / an id, or -errno; -ENOENT means "not the shim's:
 * pass the call to libibumad".
 */
#ifndef IBGW_SIM_VERBS_VSIM_GSI_H
#define IBGW_SIM_VERBS_VSIM_GSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vsim_port;

void vsim_gsi_port_opened(int portid, int port_num);
void vsim_gsi_port_closed(int portid);
int vsim_gsi_register(int portid, int mgmt_class);
bool vsim_gsi_unregister(int portid, int agent_id);
int vsim_gsi_fd(int portid); /* -1: none */
int vsim_gsi_recv(int portid, void *umad, int *length);
int vsim_gsi_send(int portid, const void *umad, int length);
/* A QP1 packet the fabric delivered to a port of a context (ctx->lock held). */
void vsim_gsi_rx(struct vsim_port *port, const uint8_t *wire, size_t len);

#endif
