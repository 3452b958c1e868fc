/*
 * cm_umad, the CM's MAD transport over libibumad, against a stand-in for libibumad at the
 * unit test's edge: this file defines the umad_* functions cm_umad calls, so the test
 * binary uses them instead of the library's (an executable's own definitions win over a
 * shared library's). The stand-ins keep what cm_umad gave them (the registration, each
 * umad written) and serve queued umad buffers through a real eventfd the event loop
 * watches, as the kernel's umad fd would. umad_set_addr/umad_set_grh/umad_set_pkey and
 * the accessors do what libibumad 44 does (rdma-core libibumad/umad.c: network order
 * for LID, QPN, Q_Key and flow label, the flow label given in host order to
 * umad_set_grh; P_Key index in host order).
 *
 * Covered: the CM agent's registration (class 0x07, version 2, Send only, no RMPP); the
 * address of a send (DLID, QP1, Q_Key, SL, P_Key index; GRH with DGID, flow label,
 * traffic class, hop limit, SGID index 0; none without); the sender's address handed to
 * deliver (SLID, SL, P_Key index, the GRH's fields); MADs not delivered (a send's
 * status report, short, not from QP1); the start-time refusal when the registration
 * fails (EINVAL with ib_cm loaded: -EBUSY naming the fix; without ib_cm in sysfs: -EBUSY
 * naming another holder; another errno passed on), with the port closed and nothing
 * left registered; the sysfs checks `ibgwd -n` uses.
 */
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cm/cm_umad.h"
#include "lib/evloop.h"
#include "lib/ib_mad.h"

/* ---- the libibumad stand-in ------------------------------------------------------------ */

#define UMAD_LEN (sizeof(struct ib_user_mad) + IB_MAD_LEN)
#define MAXQ     8

static struct {
	int efd;      /* the "umad fd": readable while rx is not empty */
	int open_ret; /* umad_open_port's answer when not >= 0 (-EIO ...) */
	int open_errno;
	int reg_errno; /* umad_register fails with this errno when non-zero */
	char open_ca[64];
	int open_port;
	int reg_class, reg_version, reg_rmpp;
	long reg_mask[16 / sizeof(long)];
	int n_reg, n_unreg, n_close;
	uint8_t sent[MAXQ][UMAD_LEN];
	int sent_len[MAXQ], sent_agent[MAXQ], sent_timeout[MAXQ], sent_retries[MAXQ];
	unsigned n_sent;
	uint8_t rx[MAXQ][UMAD_LEN];
	int rx_len[MAXQ];
	unsigned rx_head, rx_tail;
} fk;

int umad_init(void)
{
	return 0;
}

int umad_open_port(const char *ca_name, int portnum)
{
	snprintf(fk.open_ca, sizeof(fk.open_ca), "%s", ca_name ? ca_name : "");
	fk.open_port = portnum;
	if (fk.open_ret < 0) {
		errno = fk.open_errno;
		return fk.open_ret;
	}
	return fk.efd;
}

int umad_close_port(int portid)
{
	assert_int_equal(portid, fk.efd);
	fk.n_close++;
	return 0;
}

int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
		  long method_mask[16 / sizeof(long)])
{
	assert_int_equal(portid, fk.efd);
	fk.reg_class = mgmt_class;
	fk.reg_version = mgmt_version;
	fk.reg_rmpp = rmpp_version;
	memcpy(fk.reg_mask, method_mask, sizeof(fk.reg_mask));
	if (fk.reg_errno) {
		errno = fk.reg_errno;
		return -EPERM; /* what libibumad returns whatever the ioctl's errno */
	}
	fk.n_reg++;
	return 3;
}

int umad_unregister(int portid, int agentid)
{
	assert_int_equal(portid, fk.efd);
	assert_int_equal(agentid, 3);
	fk.n_unreg++;
	return 0;
}

int umad_get_fd(int portid)
{
	return portid;
}

size_t umad_size(void)
{
	return sizeof(struct ib_user_mad);
}

void *umad_get_mad(void *umad)
{
	return ((struct ib_user_mad *)umad)->data;
}

int umad_status(void *umad)
{
	return (int)((struct ib_user_mad *)umad)->status;
}

ib_mad_addr_t *umad_get_mad_addr(void *umad)
{
	return &((struct ib_user_mad *)umad)->addr;
}

int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)
{
	struct ib_user_mad *m = umad;

	m->addr.qpn = htobe32((uint32_t)dqp);
	m->addr.lid = htobe16((uint16_t)dlid);
	m->addr.qkey = htobe32((uint32_t)qkey);
	m->addr.sl = (uint8_t)sl;
	return 0;
}

int umad_set_grh(void *umad, void *mad_addr)
{
	struct ib_user_mad *m = umad;
	const ib_mad_addr_t *a = mad_addr;

	if (!a) {
		m->addr.grh_present = 0;
		return 0;
	}
	m->addr.grh_present = 1;
	memcpy(m->addr.gid, a->gid, 16);
	m->addr.flow_label = htobe32(a->flow_label);
	m->addr.hop_limit = a->hop_limit;
	m->addr.traffic_class = a->traffic_class;
	return 0;
}

int umad_set_pkey(void *umad, int pkey_index)
{
	((struct ib_user_mad *)umad)->addr.pkey_index = (uint16_t)pkey_index;
	return 0;
}

int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms, int retries)
{
	assert_int_equal(portid, fk.efd);
	assert_true(fk.n_sent < MAXQ);
	memcpy(fk.sent[fk.n_sent], umad, sizeof(struct ib_user_mad) + (size_t)length);
	fk.sent_len[fk.n_sent] = length;
	fk.sent_agent[fk.n_sent] = agentid;
	fk.sent_timeout[fk.n_sent] = timeout_ms;
	fk.sent_retries[fk.n_sent] = retries;
	fk.n_sent++;
	return 0;
}

int umad_recv(int portid, void *umad, int *length, int timeout_ms)
{
	uint64_t one;
	unsigned i;
	int n;

	assert_int_equal(portid, fk.efd);
	assert_int_equal(timeout_ms, 0); /* never blocks the control thread */
	if (read(fk.efd, &one, sizeof(one)) != sizeof(one))
		return -EAGAIN;
	i = fk.rx_head++ % MAXQ;
	n = fk.rx_len[i] < *length ? fk.rx_len[i] : *length;
	memcpy(umad, fk.rx[i], sizeof(struct ib_user_mad) + (size_t)n);
	*length = n;
	return (int)((struct ib_user_mad *)umad)->agent_id;
}

/* Queue a received MAD (len octets of it) from addr, with status. */
static void queue_rx(const ib_mad_addr_t *addr, uint32_t status, int len, uint8_t tag)
{
	unsigned i = fk.rx_tail++ % MAXQ;
	struct ib_user_mad *m = (struct ib_user_mad *)fk.rx[i];
	uint64_t one = 1;

	memset(m, 0, UMAD_LEN);
	m->agent_id = 3;
	m->status = status;
	m->addr = *addr;
	memset(m->data, tag, IB_MAD_LEN);
	fk.rx_len[i] = len;
	assert_int_equal(write(fk.efd, &one, sizeof(one)), sizeof(one));
}

/* ---- the test's side ------------------------------------------------------------------- */

static struct evloop *loop;
static struct cm_umad *u;
static struct {
	unsigned n;
	struct cm_addr from[MAXQ];
	uint8_t first[MAXQ];
	size_t len[MAXQ];
} got;
static char sysfs[64];

static void deliver(void *arg, const uint8_t *mad, size_t len, const struct cm_addr *from)
{
	(void)arg;
	assert_true(got.n < MAXQ);
	got.from[got.n] = *from;
	got.first[got.n] = mad[0];
	got.len[got.n] = len;
	got.n++;
}

static void stop(struct evloop *l, struct evtimer *t, void *arg)
{
	(void)t;
	(void)arg;
	evloop_stop(l);
}

/* Let the loop see the fd: run it for 30 ms. */
static void spin(void)
{
	struct evtimer *t = evtimer_new(loop, stop, NULL);

	assert_non_null(t);
	evtimer_start(t, 30, 0);
	evloop_run(loop);
	evtimer_free(t);
}

static void mkdirs(const char *rel)
{
	char p[128];

	snprintf(p, sizeof(p), "%s/%s", sysfs, rel);
	for (char *s = p + strlen(sysfs) + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			(void)mkdir(p, 0700);
			*s = '/';
		}
	assert_int_equal(mkdir(p, 0700), 0);
}

static int setup(void **state)
{
	(void)state;
	memset(&fk, 0, sizeof(fk));
	memset(&got, 0, sizeof(got));
	fk.efd = eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE | EFD_CLOEXEC);
	assert_true(fk.efd >= 0);
	assert_int_equal(evloop_new(&loop), 0);
	snprintf(sysfs, sizeof(sysfs), "/tmp/test_cm_umad.XXXXXX");
	assert_non_null(mkdtemp(sysfs));
	u = NULL;
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	cm_umad_close(u);
	evloop_free(loop);
	close(fk.efd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sysfs);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int open_ok(void)
{
	struct cm_umad_config c = {
		.ca_name = "mlx5_0", .port = 2, .loop = loop, .deliver = deliver, .sysfs = sysfs
	};
	char why[400] = "";

	return cm_umad_open(&c, &u, why, sizeof(why));
}

static void test_registers_cm_agent(void **state)
{
	(void)state;
	assert_int_equal(open_ok(), 0);
	assert_string_equal(fk.open_ca, "mlx5_0");
	assert_int_equal(fk.open_port, 2);
	assert_int_equal(fk.reg_class, 0x07);
	assert_int_equal(fk.reg_version, 2);
	assert_int_equal(fk.reg_rmpp, 0);
	/* Send (method 0x03) only: bit 3 of the 128-bit mask, nothing else */
	assert_int_equal(fk.reg_mask[0], 1L << 3);
	for (size_t i = 1; i < sizeof(fk.reg_mask) / sizeof(long); i++)
		assert_int_equal(fk.reg_mask[i], 0);
	cm_umad_close(u);
	u = NULL;
	assert_int_equal(fk.n_unreg, 1);
	assert_int_equal(fk.n_close, 1);
}

static void test_send_lid_routed(void **state)
{
	struct cm_addr to = { .lid = 0x1234, .sl = 5, .pkey_index = 3 };
	uint8_t mad[IB_MAD_LEN];
	const struct ib_user_mad *m;

	(void)state;
	assert_int_equal(open_ok(), 0);
	for (unsigned i = 0; i < sizeof(mad); i++)
		mad[i] = (uint8_t)i;
	assert_int_equal(cm_umad_transport.send(u, &to, mad, sizeof(mad)), 0);
	assert_int_equal(fk.n_sent, 1);
	m = (const struct ib_user_mad *)fk.sent[0];
	assert_int_equal(fk.sent_agent[0], 3);
	assert_int_equal(fk.sent_len[0], IB_MAD_LEN);
	assert_int_equal(fk.sent_timeout[0], 0); /* the cm retransmits itself */
	assert_int_equal(fk.sent_retries[0], 0);
	assert_memory_equal(m->data, mad, sizeof(mad));
	assert_int_equal(be16toh(m->addr.lid), 0x1234);
	assert_int_equal(be32toh(m->addr.qpn), 1);
	assert_int_equal(be32toh(m->addr.qkey), 0x80010000u);
	assert_int_equal(m->addr.sl, 5);
	assert_int_equal(m->addr.pkey_index, 3);
	assert_int_equal(m->addr.grh_present, 0);
	assert_int_equal(cm_umad_get_stats(u)->tx, 1);
	/* only whole MADs */
	assert_int_equal(cm_umad_transport.send(u, &to, mad, 200), -EMSGSIZE);
	assert_int_equal(fk.n_sent, 1);
}

static void test_send_grh(void **state)
{
	struct cm_addr to = { .lid = 0x0007,
			      .sl = 1,
			      .pkey_index = 1,
			      .has_grh = true,
			      .flow_label = 0x12345,
			      .traffic_class = 0xa0 };
	uint8_t mad[IB_MAD_LEN] = { 0 };
	const struct ib_user_mad *m;

	(void)state;
	for (int i = 0; i < 16; i++)
		to.gid.raw[i] = (uint8_t)(0xf0 + i);
	assert_int_equal(open_ok(), 0);
	assert_int_equal(cm_umad_transport.send(u, &to, mad, sizeof(mad)), 0);
	m = (const struct ib_user_mad *)fk.sent[0];
	assert_int_equal(m->addr.grh_present, 1);
	assert_memory_equal(m->addr.gid, to.gid.raw, 16);
	assert_int_equal(be32toh(m->addr.flow_label), 0x12345);
	assert_int_equal(m->addr.traffic_class, 0xa0);
	assert_int_equal(m->addr.hop_limit, 0xff); /* 0 given: across routers */
	assert_int_equal(m->addr.gid_index, 0);
	assert_int_equal(be16toh(m->addr.lid), 0x0007); /* the router's LID */
	assert_int_equal(m->addr.pkey_index, 1);
	to.hop_limit = 4;
	assert_int_equal(cm_umad_transport.send(u, &to, mad, sizeof(mad)), 0);
	m = (const struct ib_user_mad *)fk.sent[1];
	assert_int_equal(m->addr.hop_limit, 4);
}

static void test_receive_addresses(void **state)
{
	ib_mad_addr_t a = { .qpn = htobe32(1), .lid = htobe16(0x0042), .sl = 3, .pkey_index = 2 };

	(void)state;
	assert_int_equal(open_ok(), 0);
	queue_rx(&a, 0, IB_MAD_LEN, 0x11);
	a.grh_present = 1;
	a.lid = htobe16(0x0009);
	a.pkey_index = 0;
	a.flow_label = htobe32(0xabcde);
	a.traffic_class = 0x22;
	a.hop_limit = 60;
	for (int i = 0; i < 16; i++)
		a.gid[i] = (uint8_t)(0x10 + i);
	queue_rx(&a, 0, IB_MAD_LEN, 0x22);
	spin();
	assert_int_equal(got.n, 2);
	assert_int_equal(got.first[0], 0x11);
	assert_int_equal(got.len[0], IB_MAD_LEN);
	assert_int_equal(got.from[0].lid, 0x0042);
	assert_int_equal(got.from[0].sl, 3);
	assert_int_equal(got.from[0].pkey_index, 2);
	assert_false(got.from[0].has_grh);
	assert_int_equal(got.first[1], 0x22);
	assert_int_equal(got.from[1].lid, 0x0009);
	assert_int_equal(got.from[1].pkey_index, 0);
	assert_true(got.from[1].has_grh);
	assert_memory_equal(got.from[1].gid.raw, a.gid, 16);
	assert_int_equal(got.from[1].flow_label, 0xabcde);
	assert_int_equal(got.from[1].traffic_class, 0x22);
	assert_int_equal(got.from[1].hop_limit, 0xff); /* for the answer, not the one seen */
	assert_int_equal(cm_umad_get_stats(u)->rx, 2);
}

static void test_receive_refused(void **state)
{
	ib_mad_addr_t a = { .qpn = htobe32(1), .lid = htobe16(5) };
	const struct cm_umad_stats *st;

	(void)state;
	assert_int_equal(open_ok(), 0);
	queue_rx(&a, 110, IB_MAD_LEN, 1); /* a send of ours reported back */
	queue_rx(&a, 0, 100, 2);          /* short */
	a.qpn = htobe32(0x47);
	queue_rx(&a, 0, IB_MAD_LEN, 3); /* not from QP1 */
	a.qpn = htobe32(1);
	queue_rx(&a, 0, IB_MAD_LEN, 4);
	spin();
	assert_int_equal(got.n, 1);
	assert_int_equal(got.first[0], 4);
	st = cm_umad_get_stats(u);
	assert_int_equal(st->rx_send_status, 1);
	assert_int_equal(st->rx_short, 1);
	assert_int_equal(st->rx_not_qp1, 1);
	assert_int_equal(st->rx, 1);
}

static int open_refused(int reg_errno, char *why, size_t len)
{
	struct cm_umad_config c = {
		.ca_name = "mlx5_0", .port = 1, .loop = loop, .deliver = deliver, .sysfs = sysfs
	};

	fk.reg_errno = reg_errno;
	return cm_umad_open(&c, &u, why, len);
}

static void test_refused_ib_cm_loaded(void **state)
{
	char why[400] = "";

	(void)state;
	mkdirs("module/ib_cm");
	assert_int_equal(open_refused(EINVAL, why, sizeof(why)), -EBUSY);
	assert_null(u);
	assert_non_null(strstr(why, "mlx5_0/1"));
	assert_non_null(strstr(why, "kernel's ib_cm module holds the CM class"));
	assert_non_null(strstr(why, "modprobe -r rdma_ucm rdma_cm ib_ipoib"));
	assert_non_null(strstr(why, CM_UMAD_FIX_CONF));
	assert_int_equal(fk.n_reg, 0);
	assert_int_equal(fk.n_unreg, 0);
	assert_int_equal(fk.n_close, 1); /* the port is not left open */
}

static void test_refused_other_holder(void **state)
{
	char why[400] = "";

	(void)state;
	assert_int_equal(open_refused(EINVAL, why, sizeof(why)), -EBUSY);
	assert_non_null(strstr(why, "another agent holds it"));
	assert_non_null(strstr(why, CM_UMAD_FIX_CONF));
	assert_int_equal(fk.n_close, 1);
}

static void test_refused_other_errno(void **state)
{
	char why[400] = "";

	(void)state;
	mkdirs("module/ib_cm"); /* loaded, but not what the kernel said */
	assert_int_equal(open_refused(ENOMEM, why, sizeof(why)), -ENOMEM);
	assert_null(strstr(why, "ib_cm"));
	assert_non_null(strstr(why, strerror(ENOMEM)));
	assert_int_equal(fk.n_close, 1);
}

static void test_open_port_denied(void **state)
{
	struct cm_umad_config c = { .port = 1, .loop = loop, .deliver = deliver, .sysfs = sysfs };
	char why[400] = "";

	(void)state;
	fk.open_ret = -EIO; /* libibumad's answer to any failed open(2) */
	fk.open_errno = EACCES;
	assert_int_equal(cm_umad_open(&c, &u, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "permission"));
	assert_string_equal(fk.open_ca, ""); /* NULL: the first CA */
	assert_int_equal(fk.n_close, 0);
}

static void test_sysfs_checks(void **state)
{
	(void)state;
	assert_false(cm_umad_kernel_cm_loaded(sysfs));
	assert_false(cm_umad_device_present(sysfs, "mlx5_0"));
	mkdirs("module/ib_cm");
	mkdirs("class/infiniband/mlx5_0");
	assert_true(cm_umad_kernel_cm_loaded(sysfs));
	assert_true(cm_umad_device_present(sysfs, "mlx5_0"));
	assert_false(cm_umad_device_present(sysfs, "mlx5_1"));
	assert_false(cm_umad_device_present(sysfs, "../../module/ib_cm"));
	assert_false(cm_umad_device_present(sysfs, ""));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_registers_cm_agent),
		T(test_send_lid_routed),
		T(test_send_grh),
		T(test_receive_addresses),
		T(test_receive_refused),
		T(test_refused_ib_cm_loaded),
		T(test_refused_other_holder),
		T(test_refused_other_errno),
		T(test_open_port_denied),
		T(test_sysfs_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
