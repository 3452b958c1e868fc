/*
 * libibumad transport for the SA client (see sa_umad.h for the threads).
 */
#include "sm-client/sa_umad.h"

#include <errno.h>
#include <infiniband/umad.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/ib_bytes.h"
#include "lib/ib_mad.h"
#include "lib/log.h"
#include "sm-client/sa_mad.h"

#define RECV_BUF (64 * 1024) /* room for a kernel-reassembled RMPP answer */
#define SEND_BUF 1024

#define SMI_CLASS_DR       0x81
#define SMP_ATTR_PORT_INFO 0x0015
#define SMP_DATA_OFF       64

struct slot {
	uint8_t *mad; /* malloc'd by the MAD thread, freed by the control thread */
	size_t len;
};

struct sa_umad {
	struct sa_umad_config cfg;
	char ca_name[UMAD_CA_NAME_LEN];
	int portnum;
	int portid, agent, smi_agent;
	uint32_t smp_tid;
	struct sa_port_info base; /* GUID, P_Keys (umad_get_port), control thread */
	uint64_t port_polls, port_answers;
	int efd;
	struct sa_client *client; /* control thread */
	pthread_t thread;
	bool thread_started;
	atomic_bool stop;
	/* SPSC ring: head written by the MAD thread, tail by the control thread. */
	struct slot *ring;
	unsigned mask;
	atomic_uint head, tail;
	/* Counters: received/dropped/recv_errors by the MAD thread, the rest by control. */
	atomic_uint_fast64_t received, dropped, recv_errors;
	uint64_t sent, send_errors;
	uint8_t *send_buf; /* control thread */
};

static int umad_send_op(void *ctx, const uint8_t *mad, size_t len, const struct sa_dest *d)
{
	struct sa_umad *u = ctx;
	void *umad = u->send_buf;
	int rc;

	if (len > IB_MAD_LEN || umad_size() + len > SEND_BUF)
		return -EMSGSIZE;
	memset(umad, 0, umad_size() + len);
	memcpy(umad_get_mad(umad), mad, len);
	umad_set_addr(umad, d->lid, 1, d->sl, (int)d->qkey);
	umad_set_pkey(umad, d->pkey_index);
	rc = umad_send(u->portid, u->agent, umad, (int)len, 0, 0);
	u->sent++;
	if (rc < 0) {
		u->send_errors++;
		return rc < 0 ? rc : -EIO;
	}
	return 0;
}

const struct sa_transport_ops sa_umad_ops = { .send = umad_send_op };

static void *mad_thread(void *arg)
{
	struct sa_umad *u = arg;
	uint8_t *buf = malloc(umad_size() + RECV_BUF);

	if (!buf)
		return NULL;
	while (!atomic_load_explicit(&u->stop, memory_order_relaxed)) {
		struct pollfd pfd = { .fd = umad_get_fd(u->portid), .events = POLLIN };
		int len = RECV_BUF, rc;
		unsigned h, t;
		uint64_t one = 1;
		uint8_t *copy;

		rc = poll(&pfd, 1, 100);
		if (rc <= 0 || !(pfd.revents & POLLIN))
			continue;
		rc = umad_recv(u->portid, buf, &len, 0);
		if (rc < 0 || len <= 0) {
			if (rc != -EWOULDBLOCK && rc != -EAGAIN && rc != -ETIMEDOUT)
				atomic_fetch_add(&u->recv_errors, 1);
			continue;
		}
		if (umad_status(buf)) { /* a send that the kernel reports back */
			atomic_fetch_add(&u->recv_errors, 1);
			continue;
		}
		if (len > RECV_BUF)
			len = RECV_BUF;
		h = atomic_load_explicit(&u->head, memory_order_relaxed);
		t = atomic_load_explicit(&u->tail, memory_order_acquire);
		if (h - t > u->mask) {
			atomic_fetch_add(&u->dropped, 1);
			continue;
		}
		copy = malloc((size_t)len);
		if (!copy) {
			atomic_fetch_add(&u->dropped, 1);
			continue;
		}
		memcpy(copy, umad_get_mad(buf), (size_t)len);
		u->ring[h & u->mask] = (struct slot){ copy, (size_t)len };
		atomic_store_explicit(&u->head, h + 1, memory_order_release);
		atomic_fetch_add(&u->received, 1);
		if (write(u->efd, &one, sizeof(one)) < 0) {
			/* the counter saturates only after 2^64-1 writes; nothing to do */
		}
	}
	free(buf);
	return NULL;
}

/* A PortInfo answer to our directed-route SubnGet (sa_umad_poll_port). */
static void smp_answer(struct sa_umad *u, const uint8_t *mad)
{
	const uint8_t *pi = mad + SMP_DATA_OFF;
	struct sa_port_info out = u->base;

	if (!(mad[3] & 0x80) || ib_get_be16(mad + 16) != SMP_ATTR_PORT_INFO ||
	    (ib_get_be16(mad + 4) & 0x7fff) || ib_get_be32(mad + 12) != u->smp_tid)
		return; /* not ours, or an error status: the next poll asks again */
	u->port_answers++;
	out.gid_prefix = ib_get_be64(pi + 8);
	out.lid = ib_get_be16(pi + 16);
	out.sm_lid = ib_get_be16(pi + 18);
	out.state = pi[32] & 0xf;
	out.lmc = pi[34] & 0x7;
	out.sm_sl = pi[36] & 0xf;
	out.subnet_timeout = pi[51] & 0x1f;
	if (u->cfg.port_cb)
		u->cfg.port_cb(u->cfg.port_arg, &out);
}

int sa_umad_poll_port(struct sa_umad *u)
{
	uint8_t *umad = u->send_buf;
	uint8_t *mad;

	if (u->smi_agent < 0)
		return -ENOTSUP;
	memset(umad, 0, umad_size() + IB_MAD_LEN);
	mad = umad_get_mad(umad);
	mad[0] = IB_MAD_BASE_VERSION;
	mad[1] = SMI_CLASS_DR;
	mad[2] = 1;    /* class version */
	mad[3] = 0x01; /* SubnGet; hop pointer and hop count 0: the local port */
	ib_put_be32(mad + 12, ++u->smp_tid);
	ib_put_be16(mad + 16, SMP_ATTR_PORT_INFO);
	ib_put_be16(mad + 32, 0xffff); /* DrSLID: permissive */
	ib_put_be16(mad + 34, 0xffff); /* DrDLID: permissive */
	umad_set_addr(umad, 0xffff, 0, 0, 0);
	u->port_polls++;
	return umad_send(u->portid, u->smi_agent, umad, IB_MAD_LEN, 0, 0) < 0 ? -EIO : 0;
}

static void on_efd(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct sa_umad *u = arg;
	uint64_t v;
	unsigned h, t;

	(void)loop;
	(void)events;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_errno(LOG_WARNING, errno, "sa_umad: eventfd read");
	h = atomic_load_explicit(&u->head, memory_order_acquire);
	t = atomic_load_explicit(&u->tail, memory_order_relaxed);
	while (t != h) {
		struct slot s = u->ring[t & u->mask];

		if (s.len >= IB_MAD_LEN && s.mad[1] == SMI_CLASS_DR)
			smp_answer(u, s.mad);
		else if (u->client)
			sa_client_input(u->client, s.mad, s.len);
		free(s.mad);
		t++;
		atomic_store_explicit(&u->tail, t, memory_order_release);
	}
}

static int pick_port(struct sa_umad *u)
{
	char cas[8][UMAD_CA_NAME_LEN];
	int n = u->cfg.ca_name ? 1 : umad_get_cas_names(cas, 8);

	if (n <= 0)
		return -ENODEV;
	for (int i = 0; i < n; i++) {
		const char *name = u->cfg.ca_name ? u->cfg.ca_name : cas[i];
		umad_ca_t ca;

		if (umad_get_ca(name, &ca) < 0)
			continue;
		for (int p = 1; p <= ca.numports; p++) {
			umad_port_t *port = ca.ports[p];

			if (!port || (u->cfg.port && p != u->cfg.port))
				continue;
			if (u->cfg.port || port->state == 4 || !u->portnum) {
				size_t nl = strnlen(name, sizeof(u->ca_name) - 1);

				memcpy(u->ca_name, name, nl);
				u->ca_name[nl] = '\0';
				u->portnum = p;
				if (u->cfg.port || port->state == 4) {
					umad_release_ca(&ca);
					return 0;
				}
			}
		}
		umad_release_ca(&ca);
	}
	return u->portnum ? 0 : -ENODEV;
}

int sa_umad_open(const struct sa_umad_config *cfg, struct sa_umad **out)
{
	struct sa_umad *u = calloc(1, sizeof(*u));
	long method_mask[16 / sizeof(long)] = { 0 };
	unsigned rs;
	int rc;

	if (!u)
		return -ENOMEM;
	u->cfg = *cfg;
	u->portid = u->agent = u->smi_agent = u->efd = -1;
	rs = cfg->ring_size ? cfg->ring_size : 256;
	while (rs & (rs - 1))
		rs++;
	u->mask = rs - 1;
	u->ring = calloc(rs, sizeof(*u->ring));
	if (!u->ring) {
		rc = -ENOMEM;
		goto fail;
	}
	if (umad_init() < 0) {
		rc = -ENODEV;
		goto fail;
	}
	/* umad_size() changes during setup under umad2sim: keep a fixed, ample buffer. */
	u->send_buf = calloc(1, SEND_BUF);
	if (!u->send_buf) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = pick_port(u);
	if (rc)
		goto fail;
	u->portid = umad_open_port(u->ca_name, u->portnum);
	if (u->portid < 0) {
		rc = u->portid;
		goto fail;
	}
	/* Unsolicited methods we accept: Report (SA -> subscriber). */
	method_mask[IB_MAD_METHOD_REPORT / (8 * sizeof(long))] |=
	    1L << (IB_MAD_METHOD_REPORT % (8 * sizeof(long)));
	u->agent = umad_register(u->portid, IB_MGMT_CLASS_SA, SA_CLASS_VERSION, cfg->rmpp ? 1 : 0,
				 method_mask);
	if (u->agent < 0) {
		rc = u->agent;
		goto fail;
	}
	/* Directed-route SMPs to the local port (sa_umad_poll_port); optional. */
	u->smi_agent = umad_register(u->portid, SMI_CLASS_DR, 1, 0, NULL);
	if (u->smi_agent < 0)
		log_warning("sa_umad: no SMI agent (%d): port changes not polled", u->smi_agent);
	rc = sa_umad_port_info(u, &u->base);
	if (rc)
		goto fail;
	u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->efd < 0) {
		rc = -errno;
		goto fail;
	}
	*out = u;
	return 0;
fail:
	sa_umad_close(u);
	return rc < 0 ? rc : -EIO;
}

int sa_umad_port_info(struct sa_umad *u, struct sa_port_info *pi)
{
	umad_port_t port;

	if (umad_get_port(u->ca_name, u->portnum, &port) < 0)
		return -EIO;
	memset(pi, 0, sizeof(*pi));
	pi->lid = (uint16_t)port.base_lid;
	pi->sm_lid = (uint16_t)port.sm_lid;
	pi->sm_sl = (uint8_t)port.sm_sl;
	pi->lmc = (uint8_t)port.lmc;
	pi->state = (uint8_t)port.state;
	pi->subnet_timeout = 0xff; /* not in sysfs; the client assumes 18 */
	pi->gid_prefix = be64toh(port.gid_prefix);
	pi->port_guid = be64toh(port.port_guid);
	for (unsigned i = 0; i < port.pkeys_size && pi->npkeys < SA_MAX_PKEYS; i++)
		pi->pkeys[pi->npkeys++] = port.pkeys[i];
	umad_release_port(&port);
	return 0;
}

int sa_umad_start(struct sa_umad *u, struct sa_client *c)
{
	int rc;

	u->client = c;
	if (u->cfg.loop) {
		rc = evloop_add_fd(u->cfg.loop, u->efd, EPOLLIN, on_efd, u);
		if (rc)
			return rc;
	}
	rc = pthread_create(&u->thread, NULL, mad_thread, u);
	if (rc) {
		if (u->cfg.loop)
			evloop_del_fd(u->cfg.loop, u->efd);
		return -rc;
	}
	u->thread_started = true;
	return 0;
}

void sa_umad_close(struct sa_umad *u)
{
	if (!u)
		return;
	if (u->thread_started) {
		atomic_store(&u->stop, true);
		pthread_join(u->thread, NULL);
		if (u->cfg.loop)
			evloop_del_fd(u->cfg.loop, u->efd);
	}
	if (u->ring) {
		unsigned h = atomic_load(&u->head), t = atomic_load(&u->tail);

		for (; t != h; t++)
			free(u->ring[t & u->mask].mad);
	}
	if (u->smi_agent >= 0)
		umad_unregister(u->portid, u->smi_agent);
	if (u->agent >= 0)
		umad_unregister(u->portid, u->agent);
	if (u->portid >= 0)
		umad_close_port(u->portid);
	if (u->efd >= 0)
		close(u->efd);
	free(u->ring);
	free(u->send_buf);
	free(u);
}

void sa_umad_stats(const struct sa_umad *u, struct sa_umad_stats *out)
{
	out->received = atomic_load(&u->received);
	out->dropped_ring_full = atomic_load(&u->dropped);
	out->recv_errors = atomic_load(&u->recv_errors);
	out->sent = u->sent;
	out->send_errors = u->send_errors;
	out->port_polls = u->port_polls;
	out->port_answers = u->port_answers;
}
