/*
 * CM MADs through libibumad: the MAD transport of the connection manager on hardware,
 * where the kernel owns QP1 (docs/connected-mode.md, "Transports").
 *
 * cm_umad_open opens the port's umad device (umad_open_port), registers one GSI agent
 * for the CM class (0x07, class version 2) with the Send method in its mask, so the
 * kernel's MAD layer hands it the unsolicited CM MADs (REQ, REP, RTU, REJ, MRA, DREQ,
 * DREP) that arrive on the port, and puts the umad fd into the control thread's event
 * loop. Only one agent per port may hold a class/method: while the kernel's ib_cm
 * module is loaded it holds the CM class's Send method on every IB port, and the
 * registration fails (EINVAL from the kernel's method_in_use check in
 * drivers/infiniband/core/mad.c). cm_umad_open then fails with -EBUSY and a reason
 * naming the fix (CM_UMAD_FIX): the gateway refuses connected mode on that port rather
 * than running datagram mode behind the operator's back.
 *
 * Sending: cm_umad_transport.send (ctx: the struct cm_umad) writes one 256-octet MAD to
 * remote QP1 of the destination: umad_set_addr (DLID, QP1, SL, Q_Key 0x80010000),
 * umad_set_grh when the peer is off-subnet (DGID, flow label, hop limit, traffic
 * class; SGID index 0), umad_set_pkey with the P_Key index of the link the MAD belongs
 * to (several IPoIB links on different P_Keys share a port and its agent). No timeout
 * and no retries: the cm retransmits itself. The kernel rewrites the high 32 bits of
 * the transaction ID of what it sends (its agent number); the CM matches messages by
 * communication IDs, never by TID.
 *
 * Receiving: when the fd is readable the control thread reads every queued MAD
 * (non-blocking umad_recv), skips reports of failed sends (non-zero status), MADs
 * shorter than 256 octets or not from QP1, and hands each one to cfg.deliver with the
 * sender's struct cm_addr: SLID, SL, P_Key index, and the GRH fields (SGID, flow label,
 * traffic class; hop limit 0xff for the answer) when it came with one.
 *
 * Threads: everything here runs on the control thread (open, send, the fd callback,
 * close). The umad fd is a kernel character device fd (epoll-able). Under ibsim's
 * umad2sim it is not (a number above 1024 that only umad2sim's poll() knows), and
 * ibsim does not deliver unsolicited CM MADs to a umad agent anyway: on the simulated
 * rack the verbs shim takes the CM class for itself and carries its MADs on the
 * fabric's QP1 (docs/verbs-sim.md, "CM MADs").
 */
#ifndef IBGW_CM_CM_UMAD_H
#define IBGW_CM_CM_UMAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/cm.h"

struct evloop;
struct cm_umad;

/* What an operator does about the kernel's CM (docs/connected-mode.md, "Host set-up").
 * The Debian package ships the modprobe.d file as an example (installing it is the
 * operator's choice: it keeps rdma_cm, ib_ipoib, SRP, iSER, NFS over RDMA off the box). */
#define CM_UMAD_FIX_CONF "/usr/share/doc/ibgw/examples/ibgw-connected-mode.conf"
#define CM_UMAD_FIX                                                                                          \
	"unload the kernel's IB CM and its users (modprobe -r rdma_ucm rdma_cm ib_ipoib "                    \
	"ib_srp ib_iser ib_cm; lsmod shows any other user of ib_cm) and keep it out: copy " CM_UMAD_FIX_CONF \
	" to /etc/modprobe.d/"

typedef void (*cm_umad_deliver_fn)(void *arg, const uint8_t *mad, size_t len,
				   const struct cm_addr *from);

struct cm_umad_config {
	const char *ca_name;        /* NULL: the first CA with an active port */
	int port;                   /* 0: its first active port */
	struct evloop *loop;        /* the control loop: watches the umad fd */
	cm_umad_deliver_fn deliver; /* each CM MAD received, on the control thread */
	void *arg;
	/* Where sysfs is ("/sys" when NULL): read to tell why a registration failed. */
	const char *sysfs;
};

struct cm_umad_stats {
	uint64_t tx, tx_errors;
	uint64_t rx, rx_send_status, rx_short, rx_not_qp1, rx_errors;
};

/* Open the port and register the CM agent. 0, or -errno with a reason in why:
 * -EBUSY when the kernel's ib_cm holds the CM class (why names CM_UMAD_FIX), -EACCES
 * without permission on the umad device, -ENODEV/-EIO when the port cannot be opened,
 * -ENOTSUP when the fd cannot be watched (not a kernel fd: under umad2sim). */
int cm_umad_open(const struct cm_umad_config *cfg, struct cm_umad **out, char *why, size_t why_len);
void cm_umad_close(struct cm_umad *u);
const struct cm_umad_stats *cm_umad_get_stats(const struct cm_umad *u);

extern const struct cm_transport_ops cm_umad_transport; /* ctx: struct cm_umad * */

/* The host's set-up, read from sysfs without side effects (for `ibgwd -n` too):
 * whether the kernel's ib_cm module is loaded ("<sysfs>/module/ib_cm" exists; a
 * built-in ib_cm without parameters may not show there), and whether the IB device is
 * present ("<sysfs>/class/infiniband/<device>"). sysfs NULL: "/sys". */
bool cm_umad_kernel_cm_loaded(const char *sysfs);
bool cm_umad_device_present(const char *sysfs, const char *device);

#endif
