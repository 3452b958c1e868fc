/*
 * IPoIB-CM on hardware through librdmacm (AF_IB, RDMA_PS_IB): the kernel's CM owns
 * QP1 and speaks the CM protocol (REQ/REP/RTU, REJ, DREQ/DREP, MRA, retries and
 * timeouts: the kernel's fixed CMA_CM_RESPONSE_TIMEOUT 20 and CMA_MAX_CM_RETRIES 15);
 * this module applies the IPoIB rules around it with the same callbacks as cm.h
 * (qp_create, qp_connect, qp_destroy, up, down) so the IPoIB link code does not care
 * which one runs:
 *
 *   active:  rdma_create_id(RDMA_PS_IB) -> rdma_resolve_addr(AF_IB: our GID -> the
 *            peer's GID, P_Key, service ID 0x1000000000000000 | peer UD QPN) ->
 *            the SA client's path through rdma_set_option(RDMA_OPTION_IB_PATH), or
 *            rdma_resolve_route when that is refused -> qp_create -> rdma_connect
 *            (our QPN, IPoIB private data, SRQ) -> CONNECT_RESPONSE: private data
 *            checked, QP programmed from rdma_init_qp_attr (RTR, RTS) ->
 *            rdma_establish (RTU) -> up
 *   passive: a listening id bound to AF_IB service ID 0x1000000000000000 | our UD QPN
 *            -> CONNECT_REQUEST: private data checked, crossing-REQ rule (loser:
 *            rdma_reject with our private data: REJ "consumer reject") -> qp_create
 *            -> QP programmed -> rdma_accept (REP with our private data) ->
 *            ESTABLISHED (RTU) -> up
 *   teardown: rdma_disconnect (DREQ); DISCONNECTED -> down, qp_destroy.
 *
 * NOT RUNNABLE HERE (no HCA, no kernel RDMA): compiled, never run. And one known
 * limit, read from the kernel's cma.c (cma_select_ib_ps): binding an AF_IB address
 * whose service ID is outside the RDMA IP CM port spaces (0x00000000013F/0106/0111
 * xxxx under RDMA_IB_IP_PS_MASK) fails with EPROTONOSUPPORT, so the passive side
 * (listen on 0x1000000000000000 | QPN) is expected to be refused by current kernels:
 * cm_rdmacm_new then returns -EPROTONOSUPPORT unless cfg.active_only is set. A link
 * that cannot listen must not advertise the RC flag (Linux peers that see it connect
 * to us and never fall back to UD). See docs/connected-mode.md for the alternative
 * (our own cm.c over libibumad with the kernel's ib_cm not loaded).
 *
 * Threads: control thread; cm_rdmacm_fd() goes into its event loop and
 * cm_rdmacm_process() runs when it is readable.
 */
#ifndef IBGW_CM_CM_RDMACM_H
#define IBGW_CM_CM_RDMACM_H

#include <stdbool.h>

#include "cm/cm.h"

struct cm_rdmacm;

struct cm_rdmacm_config {
	struct ipoib_hwaddr local; /* flags, our UD QPN, our port GID */
	uint16_t pkey;
	uint32_t rx_mtu; /* 0: 65524 */
	uint8_t retry_count, rnr_retry;
	int timeout_ms;   /* address and route resolution; 0: 2000 */
	bool active_only; /* go on without a listener if the kernel refuses it */
	const struct cm_callbacks *cb;
	void *cb_ctx;
};

int cm_rdmacm_new(const struct cm_rdmacm_config *cfg, struct cm_rdmacm **out);
void cm_rdmacm_free(struct cm_rdmacm *r);
bool cm_rdmacm_listening(const struct cm_rdmacm *r);
int cm_rdmacm_fd(const struct cm_rdmacm *r);
/* Handle every pending event. 0 or -errno (the event channel failed). */
int cm_rdmacm_process(struct cm_rdmacm *r);
/* Same contract as cm_connect / cm_disconnect. */
int cm_rdmacm_connect(struct cm_rdmacm *r, const struct ipoib_hwaddr *peer,
		      const struct cm_path_info *path);
int cm_rdmacm_disconnect(struct cm_rdmacm *r, const struct ipoib_hwaddr *peer);

#endif
