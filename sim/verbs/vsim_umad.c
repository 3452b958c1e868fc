/*
 * libibverbs2sim, part three: the libibumad entry points whose CA name the shim must
 * translate (docs/verbs-sim.md, "libibumad").
 *
 * On a host with an HCA, libibverbs and libibumad name a device alike ("mlx5_0"), so a
 * port's config names one device for both: the verbs backend opens it with
 * ibv_open_device, the SA client with umad_open_port. Under libumad2sim the umad device
 * is always "ibsim0", while the shim names its verbs device after the node ("gw1").
 * These wrappers make libibumad answer to the node's name too: a CA name equal to
 * $SIM_HOST (the node umad2sim attaches to, whose NodeDescription the shim's device is
 * named after on the rack) means umad2sim's CA; the CA and port descriptions returned
 * carry the node's name, and any port of it is umad2sim's one port. Every other call, and every other name, goes to the real
 * libibumad (dlsym RTLD_NEXT: the next object after the shim in the lookup order).
 * umad_recv also hands the answers to the shim's own SMPs back to it (sim_node.h).
 *
 * Threads: any; no state but the resolved pointers (resolved once, atomically enough:
 * every thread resolves to the same value).
 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "sim/verbs/sim_node.h"
#include "sim/verbs/vsim_gsi.h"
#include "sim/verbs/vsim_pvt.h"

/* The real function NAME of libibumad, or NULL (logged once per call site). */
#define REAL(name)                                                                                 \
	({                                                                                         \
		static __typeof__(name) *real_;                                                    \
		if (!real_) {                                                                      \
			real_ = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                       \
			if (!real_)                                                                \
				log_error("libibverbs2sim: no libibumad %s after the shim",        \
					  #name);                                                  \
		}                                                                                  \
		real_;                                                                             \
	})

/* The node's name, when this process runs on a rack node under umad2sim. */
static const char *node_name(void)
{
	const char *n = getenv("SIM_HOST");

	return n && *n ? n : NULL;
}

/* The CA name to hand libibumad: NULL (umad2sim's one CA) for the node's name. */
static const char *umad_ca(const char *name)
{
	const char *node = node_name();

	return name && node && !strcmp(name, node) ? NULL : name;
}

/* The port to hand libibumad: umad2sim's one port (0: the CA's first) for any port of
 * the node's name. umad2sim serves a process only its node's first port, and ibsim
 * sends every MAD of the node through it (docs/simulated-rack.md, "Two-port HCAs"): the
 * SA client of a link on port 2 talks through port 1. */
static int umad_portnum(const char *name, int portnum)
{
	return name && !umad_ca(name) ? 0 : portnum;
}

static void rename_ca(char *ca_name, const char *asked)
{
	const char *node = node_name();

	if (node && (!asked || !strcmp(asked, node)))
		snprintf(ca_name, UMAD_CA_NAME_LEN, "%s", node);
}

/* The node's CA shows its every port, as an HCA's does: umad2sim lists only its one
 * port; the others are copies of it (umad_get_port and umad_open_port of them reach
 * umad2sim's port, above). Allocated as libibumad allocates them: umad_release_ca
 * frees them. */
static void add_ports(umad_ca_t *ca)
{
	unsigned n = vsim_node_ports();
	umad_port_t *base = ca->numports >= 1 ? ca->ports[1] : NULL;

	if (!base || n <= (unsigned)ca->numports || n >= UMAD_CA_MAX_PORTS)
		return;
	for (unsigned p = (unsigned)ca->numports + 1; p <= n; p++) {
		umad_port_t *c = malloc(sizeof(*c));

		if (!c)
			return;
		*c = *base;
		c->portnum = (int)p;
		c->pkeys = NULL;
		if (base->pkeys && base->pkeys_size) {
			c->pkeys = malloc(base->pkeys_size * sizeof(*c->pkeys));
			if (!c->pkeys) {
				free(c);
				return;
			}
			memcpy(c->pkeys, base->pkeys, base->pkeys_size * sizeof(*c->pkeys));
		} else {
			c->pkeys_size = 0;
		}
		ca->ports[p] = c;
		ca->numports = (int)p;
	}
}

int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max)
{
	__typeof__(umad_get_cas_names) *real = REAL(umad_get_cas_names);
	int n;

	if (!real)
		return -ENOSYS;
	n = real(cas, max);
	/* umad2sim shows one CA: the node's */
	if (n == 1)
		rename_ca(cas[0], NULL);
	return n;
}

int umad_get_ca(const char *ca_name, umad_ca_t *ca)
{
	__typeof__(umad_get_ca) *real = REAL(umad_get_ca);
	int ret;

	if (!real)
		return -ENOSYS;
	ret = real(umad_ca(ca_name), ca);
	if (ret == 0 && ca_name && !umad_ca(ca_name))
		add_ports(ca);
	if (ret == 0)
		rename_ca(ca->ca_name, ca_name);
	return ret;
}

int umad_get_port(const char *ca_name, int portnum, umad_port_t *port)
{
	__typeof__(umad_get_port) *real = REAL(umad_get_port);
	int ret;

	if (!real)
		return -ENOSYS;
	ret = real(umad_ca(ca_name), umad_portnum(ca_name, portnum), port);
	if (ret == 0)
		rename_ca(port->ca_name, ca_name);
	return ret;
}

int umad_open_port(const char *ca_name, int portnum)
{
	__typeof__(umad_open_port) *real = REAL(umad_open_port);
	int portid;

	if (!real)
		return -ENOSYS;
	portid = real(umad_ca(ca_name), umad_portnum(ca_name, portnum));
	if (portid >= 0 && ca_name && !umad_ca(ca_name))
		vsim_gsi_port_opened(portid, portnum); /* the port a CM agent would carry */
	return portid;
}

int umad_close_port(int portid)
{
	__typeof__(umad_close_port) *real = REAL(umad_close_port);

	vsim_gsi_port_closed(portid);
	return real ? real(portid) : -ENOSYS;
}

/* The CM class's agents are the shim's (vsim_gsi.c); other classes are umad2sim's. */
int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
		  long method_mask[16 / sizeof(long)])
{
	__typeof__(umad_register) *real = REAL(umad_register);
	int id = vsim_gsi_register(portid, mgmt_class);

	if (id != -ENOENT)
		return id;
	return real ? real(portid, mgmt_class, mgmt_version, rmpp_version, method_mask) : -ENOSYS;
}

int umad_unregister(int portid, int agentid)
{
	__typeof__(umad_unregister) *real = REAL(umad_unregister);

	if (vsim_gsi_unregister(portid, agentid))
		return 0;
	return real ? real(portid, agentid) : -ENOSYS;
}

int umad_get_fd(int portid)
{
	__typeof__(umad_get_fd) *real = REAL(umad_get_fd);
	int fd = vsim_gsi_fd(portid);

	if (fd >= 0)
		return fd;
	return real ? real(portid) : -ENOSYS;
}

int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms, int retries)
{
	__typeof__(umad_send) *real = REAL(umad_send);

	if (vsim_gsi_fd(portid) >= 0)
		return vsim_gsi_send(portid, umad, length);
	return real ? real(portid, agentid, umad, length, timeout_ms, retries) : -ENOSYS;
}

/* Every MAD read passes here: answers to the shim's own SMPs go to the SMP waiting for
 * them (sim_node.h), whichever agent's fd umad2sim gave them to; the caller sees
 * nothing read (-EAGAIN, as a non-blocking read with nothing queued). */
int umad_recv(int fd, void *umad, int *length, int timeout_ms)
{
	__typeof__(umad_recv) *real = REAL(umad_recv);
	int ret;

	if (!real)
		return -ENOSYS;
	if (vsim_gsi_fd(fd) >= 0)
		return vsim_gsi_recv(fd, umad, length); /* the CM agent's (no waiting) */
	ret = real(fd, umad, length, timeout_ms);
	if (ret >= 0 && length && simnode_smp_divert(umad, *length)) {
		errno = EAGAIN;
		return -EAGAIN;
	}
	return ret;
}
