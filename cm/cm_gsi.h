/*
 * CM MADs over a port's GSI QP (QP1) through the IB port ops table (port/ib_port.h):
 * the MAD transport of the connection manager on the simulated fabric. (On hardware
 * the kernel owns QP1 and the verbs backend refuses IBP_QPT_GSI; see cm_rdmacm.h.)
 *
 * Sending: cm_gsi_transport.send (ctx: the struct cm_gsi) takes a buffer from the
 * port's pool, makes an address handle for the destination (DLID, SL, GRH if asked),
 * and posts one UD send to remote QP1 with Q_Key 0x80010000. The AH and the buffer are
 * released when the send completes.
 *
 * Receiving: the thread that polls the port hands every completion of the GSI QP
 * (wc->qp == cm_gsi_qp()) to cm_gsi_completion(), which releases finished sends, and
 * for a receive checks it (status OK, from remote QP1, room for a MAD), builds the
 * sender's struct cm_addr (SLID, SL, P_Key index, SGID/flow label/traffic class
 * from the GRH when there is one), calls deliver with the 256-octet MAD, and posts
 * the buffer again.
 *
 * Threads: post_send/post_recv/poll belong to the thread that owns the port's data
 * path (port/ib_port.h); AH create/destroy to the control thread. The CM runs on the
 * control thread; so cm_gsi is meant for a port whose data path the control thread
 * owns -- in the gateway a port handle opened for the control thread alone (the sim
 * fabric lets a node open its port more than once only if the backend allows it; see
 * docs/connected-mode.md) -- or for a single-threaded host role.
 * One cm_gsi per port (the sim backend gives one GSI QP per port); several IPoIB links
 * on the port share it and dispatch (cm.h, "Several IPoIB links").
 */
#ifndef IBGW_CM_CM_GSI_H
#define IBGW_CM_CM_GSI_H

#include <stddef.h>
#include <stdint.h>

#include "cm/cm.h"
#include "port/ib_port.h"

struct cm_gsi;

struct cm_gsi_config {
	const struct ibp_ops *ops;
	struct ibp_port *port;
	uint16_t pkey_index; /* of the GSI QP: its sends carry that P_Key */
	unsigned recv_depth; /* receive buffers kept posted; 0: 64 */
	unsigned send_depth; /* 0: 64 */
	/* Optional, for a port whose data path another thread owns (the gateway's worker):
	 * post(post_ctx, s) takes each MAD send instead of ops->post_send (1: taken; the
	 * send's completion must still reach cm_gsi_completion), and post_recv(post_ctx,
	 * qp, b) each receive buffer given back after open (1: posted). NULL: the ops. */
	int (*post)(void *ctx, struct ibp_send *s);
	int (*post_recv)(void *ctx, struct ibp_qp *qp, struct ibp_buf *b);
	void *post_ctx;
};

struct cm_gsi_stats {
	uint64_t tx, tx_no_buf, tx_no_ah, tx_post_fail, tx_done, tx_errors;
	uint64_t rx, rx_error, rx_short, rx_not_qp1, rx_repost_fail;
};

int cm_gsi_open(const struct cm_gsi_config *cfg, struct cm_gsi **out);
void cm_gsi_close(struct cm_gsi *g);
struct ibp_qp *cm_gsi_qp(const struct cm_gsi *g);
/* Set (or clear, NULL) the post hooks of the config after open (control thread, before
 * the port's owner sees any of the GSI QP's completions or between them). */
void cm_gsi_set_post(struct cm_gsi *g, int (*post)(void *ctx, struct ibp_send *s),
		     int (*post_recv)(void *ctx, struct ibp_qp *qp, struct ibp_buf *b), void *ctx);

typedef void (*cm_gsi_deliver_fn)(void *arg, const uint8_t *mad, size_t len,
				  const struct cm_addr *from);
/* One completion of the GSI QP. 0, or -EINVAL if it is not one of ours. */
int cm_gsi_completion(struct cm_gsi *g, const struct ibp_wc *wc, cm_gsi_deliver_fn deliver,
		      void *arg);
const struct cm_gsi_stats *cm_gsi_get_stats(const struct cm_gsi *g);

extern const struct cm_transport_ops cm_gsi_transport;

#endif
