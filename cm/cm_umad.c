/*
 * CM MAD transport over libibumad (see cm_umad.h). Control thread.
 */
#include "cm/cm_umad.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include "cm/cm_mad.h"
#include "lib/evloop.h"
#include "lib/ib_hdr.h"
#include "lib/ib_mad.h"

/* Room for the umad header (umad_size(), which depends on the ABI the port was opened
 * with) and one MAD, plus slack: a fixed buffer, as sa_umad keeps. */
#define UMAD_BUF (256 + IB_MAD_LEN)

struct cm_umad {
	struct cm_umad_config cfg;
	int portid, agent;
	bool watched;
	struct cm_umad_stats st;
	uint8_t buf[UMAD_BUF]; /* send and receive: one at a time, on the control thread */
};

__attribute__((format(printf, 3, 4))) static void set_why(char *why, size_t len, const char *fmt,
							  ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

static bool sys_exists(const char *sysfs, const char *rel, const char *name)
{
	char path[512];
	struct stat sb;
	int n =
	    snprintf(path, sizeof(path), "%s/%s%s", sysfs ? sysfs : "/sys", rel, name ? name : "");

	return n > 0 && (size_t)n < sizeof(path) && stat(path, &sb) == 0;
}

bool cm_umad_kernel_cm_loaded(const char *sysfs)
{
	return sys_exists(sysfs, "module/ib_cm", NULL);
}

bool cm_umad_device_present(const char *sysfs, const char *device)
{
	return device && *device && !strchr(device, '/') &&
	       sys_exists(sysfs, "class/infiniband/", device);
}

const struct cm_umad_stats *cm_umad_get_stats(const struct cm_umad *u)
{
	return &u->st;
}

/* ---- sending ------------------------------------------------------------------------ */

static int umad_cm_send(void *ctx, const struct cm_addr *to, const uint8_t *mad, size_t len)
{
	struct cm_umad *u = ctx;
	void *umad = u->buf;

	if (len != IB_MAD_LEN || umad_size() + len > sizeof(u->buf))
		return -EMSGSIZE;
	memset(umad, 0, umad_size() + len);
	memcpy(umad_get_mad(umad), mad, len);
	umad_set_addr(umad, to->lid, IB_QP1, to->sl, (int)IB_QP1_QKEY);
	if (to->has_grh) {
		ib_mad_addr_t grh = {
			.hop_limit = to->hop_limit ? to->hop_limit : 0xff,
			.traffic_class = to->traffic_class,
			.flow_label = to->flow_label & 0xfffff, /* host order: umad_set_grh swaps */
			.gid_index = 0,
		};

		memcpy(grh.gid, to->gid.raw, sizeof(grh.gid));
		umad_set_grh(umad, &grh);
	} else {
		umad_set_grh(umad, NULL);
	}
	umad_set_pkey(umad, to->pkey_index);
	if (umad_send(u->portid, u->agent, umad, (int)len, 0, 0) < 0) {
		u->st.tx_errors++;
		return -EIO;
	}
	u->st.tx++;
	return 0;
}

const struct cm_transport_ops cm_umad_transport = { .send = umad_cm_send };

/* ---- receiving ---------------------------------------------------------------------- */

/* One umad buffer as read: deliver it, or count why not. */
static void input(struct cm_umad *u, void *umad, int len)
{
	const ib_mad_addr_t *a = umad_get_mad_addr(umad);
	struct cm_addr from;

	if (umad_status(umad)) {
		/* a send of ours the kernel reports back (none without a timeout) */
		u->st.rx_send_status++;
		return;
	}
	if (len < IB_MAD_LEN) {
		u->st.rx_short++;
		return;
	}
	if (be32toh(a->qpn) != IB_QP1) {
		u->st.rx_not_qp1++; /* GMPs of the CM class come from QP1 */
		return;
	}
	u->st.rx++;
	memset(&from, 0, sizeof(from));
	from.lid = be16toh(a->lid);
	from.sl = a->sl;
	from.pkey_index = a->pkey_index; /* host order (umad_get_pkey) */
	if (a->grh_present) {
		from.has_grh = true;
		memcpy(from.gid.raw, a->gid, sizeof(from.gid.raw));
		from.flow_label = be32toh(a->flow_label) & 0xfffff;
		from.traffic_class = a->traffic_class;
		from.hop_limit = 0xff; /* what answers through routers use */
	}
	u->cfg.deliver(u->cfg.arg, umad_get_mad(umad), IB_MAD_LEN, &from);
}

static void on_readable(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct cm_umad *u = arg;

	(void)loop;
	(void)fd;
	(void)events;
	/* A bounded batch: what is left wakes the loop again (level-triggered). */
	for (int i = 0; i < 64; i++) {
		int len = IB_MAD_LEN;
		int r;

		if (umad_size() + (size_t)len > sizeof(u->buf))
			return;
		r = umad_recv(u->portid, u->buf, &len, 0);
		if (r < 0) {
			if (r != -EAGAIN && r != -EWOULDBLOCK && r != -ETIMEDOUT)
				u->st.rx_errors++;
			return;
		}
		if (r != u->agent) {
			u->st.rx_errors++;
			continue;
		}
		input(u, u->buf, len);
	}
}

/* ---- open, close -------------------------------------------------------------------- */

int cm_umad_open(const struct cm_umad_config *cfg, struct cm_umad **out, char *why, size_t why_len)
{
	long method_mask[16 / sizeof(long)] = { 0 };
	const char *ca = cfg->ca_name ? cfg->ca_name : "(first CA)";
	struct cm_umad *u;
	int rc, err;

	if (!cfg->loop || !cfg->deliver) {
		set_why(why, why_len, "%s/%d: no event loop or deliver callback", ca, cfg->port);
		return -EINVAL;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->cfg = *cfg;
	u->portid = u->agent = -1;
	if (umad_init() < 0) {
		set_why(why, why_len, "%s/%d: %s", ca, cfg->port,
			"libibumad cannot read the umad ABI version (is ib_umad loaded?)");
		rc = -ENODEV;
		goto fail;
	}
	errno = 0;
	u->portid = umad_open_port(cfg->ca_name, cfg->port);
	if (u->portid < 0) {
		err = errno;
		rc = err == EACCES || err == EPERM ? -EACCES : u->portid;
		set_why(why, why_len, "%s/%d: %s", ca, cfg->port,
			rc == -EACCES ? "cannot open the port's umad device (permission? see "
					"the udev rule of the package)"
				      : "no such IB port for umad");
		goto fail;
	}
	/* The CM's messages all use Send; ClassPortInfo Get is answered by whoever holds
	 * Get (nobody: the kernel then answers "unsupported"). */
	method_mask[IB_MAD_METHOD_SEND / (8 * sizeof(long))] |=
	    1L << (IB_MAD_METHOD_SEND % (8 * sizeof(long)));
	errno = 0;
	u->agent = umad_register(u->portid, IB_MGMT_CLASS_CM, CM_CLASS_VERSION, 0, method_mask);
	if (u->agent < 0) {
		err = errno;
		if (err == EINVAL && cm_umad_kernel_cm_loaded(cfg->sysfs)) {
			set_why(
			    why, why_len,
			    "%s/%d: the kernel's ib_cm module holds the CM class (0x07) on this "
			    "port, so connected mode cannot run in user space: %s",
			    ca, cfg->port, CM_UMAD_FIX);
			rc = -EBUSY;
		} else if (err == EINVAL) {
			set_why(why, why_len,
				"%s/%d: the kernel refused a CM class (0x07) agent: another agent "
				"holds it (a built-in ib_cm, or another process): %s",
				ca, cfg->port, CM_UMAD_FIX);
			rc = -EBUSY;
		} else {
			set_why(why, why_len, "%s/%d: cannot register a CM class agent: %s", ca,
				cfg->port, strerror(err ? err : EPERM));
			rc = err ? -err : -EPERM;
		}
		u->agent = -1;
		goto fail;
	}
	rc = evloop_add_fd(cfg->loop, umad_get_fd(u->portid), EPOLLIN, on_readable, u);
	if (rc < 0) {
		set_why(why, why_len, "%s/%d: %s", ca, cfg->port,
			"the umad fd cannot be watched (not a kernel fd: umad2sim?)");
		rc = -ENOTSUP;
		goto fail;
	}
	u->watched = true;
	*out = u;
	return 0;
fail:
	cm_umad_close(u);
	return rc;
}

void cm_umad_close(struct cm_umad *u)
{
	if (!u)
		return;
	if (u->watched)
		evloop_del_fd(u->cfg.loop, umad_get_fd(u->portid));
	if (u->agent >= 0)
		umad_unregister(u->portid, u->agent);
	if (u->portid >= 0)
		umad_close_port(u->portid);
	free(u);
}
