/*
 * Unit tests of the fabric port protocol (lib/ib_simfab.c): every message type
 * round-trips through encode/decode; malformed messages are refused with the reason a
 * peer would read; the client helpers against a scripted fabric on a real
 * SOCK_SEQPACKET socket (answers, ERROR texts, traffic that overtakes an answer,
 * timeouts, the fabric going away); the shared rings, and the KICKs a corked client
 * holds back.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/ib_bytes.h"
#include "lib/ib_simfab.h"

static struct simfab_port_info port_a(void)
{
	struct simfab_port_info p = { .port_num = 1,
				      .lmc = 1,
				      .mtu = 4,
				      .flags = 0,
				      .lid = 6,
				      .sm_lid = 1,
				      .port_guid = 0x0002c90300a10007ull,
				      .gid_prefix = 0xfe80000000000000ull,
				      .n_pkeys = 3 };

	strcpy(p.name, "ibhost1");
	p.pkeys[0] = 0xffff;
	p.pkeys[1] = 0x8001;
	p.pkeys[2] = 0;
	return p;
}

static void roundtrip(const struct simfab_msg *m, size_t want_len)
{
	uint8_t buf[SIMFAB_MSG_MAX], again[SIMFAB_MSG_MAX];
	struct simfab_msg d;
	const char *why = NULL;
	int n = simfab_encode(m, buf, sizeof(buf)), n2;

	assert_int_equal(n, (int)want_len);
	if (simfab_decode(buf, (size_t)n, &d, &why) != 0)
		fail_msg("%s: %s", simfab_type_name(m->type), why);
	assert_int_equal(d.type, m->type);
	assert_int_equal(d.seq, m->seq);
	n2 = simfab_encode(&d, again, sizeof(again));
	assert_int_equal(n2, n);
	assert_memory_equal(again, buf, (size_t)n);
	assert_int_equal(simfab_encode(m, buf, want_len - 1), -ENOSPC);
}

static void test_roundtrip(void **state)
{
	struct simfab_msg m = { .type = SIMFAB_HELLO, .seq = 7 };
	uint8_t pkt[IB_PACKET_MIN_LEN + 4] = { 0x00, 0x02 };

	(void)state;
	m.u.port = port_a();
	roundtrip(&m, 8 + 108 + 6);
	m.type = SIMFAB_PORT_UPDATE;
	roundtrip(&m, 8 + 108 + 6);
	m = (struct simfab_msg){ .type = SIMFAB_QP_CREATE, .seq = 8 };
	m.u.qp_create.type = SIMFAB_QP_RC;
	m.u.qp_create.pkey_index = 1;
	m.u.qp_create.qkey = 0x0b1b;
	roundtrip(&m, 16);
	m = (struct simfab_msg){ .type = SIMFAB_QP_MODIFY, .seq = 9 };
	m.u.qp_modify.qpn = 0xabcdef;
	m.u.qp_modify.qkey = 0x80010000u;
	roundtrip(&m, 16);
	m = (struct simfab_msg){ .type = SIMFAB_QP_DESTROY, .seq = 10 };
	m.u.qp_destroy.qpn = 0x48;
	roundtrip(&m, 12);
	m = (struct simfab_msg){ .type = SIMFAB_MCAST_ATTACH, .seq = 11 };
	m.u.mcast.qpn = 0x48;
	m.u.mcast.mlid = 0xc000;
	assert_int_equal(ib_gid_parse("ff12:401b:ffff::ffff:ffff", &m.u.mcast.mgid), 0);
	roundtrip(&m, 32);
	m.type = SIMFAB_MCAST_DETACH;
	roundtrip(&m, 32);
	m = (struct simfab_msg){ .type = SIMFAB_PACKET };
	m.u.packet.qpn = 0xffffff;
	m.u.packet.data = pkt;
	m.u.packet.len = sizeof(pkt);
	roundtrip(&m, 16 + sizeof(pkt));
	m = (struct simfab_msg){ .type = SIMFAB_PORT_STATE };
	m.u.port_state.state = SIMFAB_PORT_DOWN;
	roundtrip(&m, 12);
	m = (struct simfab_msg){ .type = SIMFAB_OK, .seq = 3 };
	m.u.ok.value = 0x49;
	roundtrip(&m, 12);
	m = (struct simfab_msg){ .type = SIMFAB_ERROR, .seq = 4 };
	m.u.error.err = EPERM;
	m.u.error.text = "no";
	m.u.error.len = 2;
	roundtrip(&m, 14);
}

/* Encode a valid message, patch octet off to val, and expect a refusal naming why. */
static void refused(const struct simfab_msg *m, int off, uint8_t val, int cut, const char *why_part)
{
	uint8_t buf[SIMFAB_MSG_MAX];
	struct simfab_msg d;
	const char *why = NULL;
	int n = simfab_encode(m, buf, sizeof(buf));

	assert_true(n > 0);
	if (off >= 0)
		buf[off] = val;
	n += cut;
	if (cut)
		ib_put_be16(buf + 2, (uint16_t)n);
	if (simfab_decode(buf, (size_t)n, &d, &why) == 0)
		fail_msg("accepted %s with octet %d = 0x%02x, cut %d", simfab_type_name(m->type),
			 off, val, cut);
	assert_non_null(why);
	if (!strstr(why, why_part))
		fail_msg("reason '%s' does not mention '%s'", why, why_part);
}

static void test_malformed(void **state)
{
	struct simfab_msg h = { .type = SIMFAB_HELLO }, q = { .type = SIMFAB_QP_CREATE },
			  mc = { .type = SIMFAB_MCAST_ATTACH }, e = { .type = SIMFAB_ERROR },
			  ps = { .type = SIMFAB_PORT_STATE }, qm = { .type = SIMFAB_QP_MODIFY };
	uint8_t small[4] = { 1, 1, 0, 4 };
	const char *why = NULL;
	struct simfab_msg d;

	(void)state;
	assert_int_equal(simfab_decode(small, 4, &d, &why), -EMSGSIZE);
	assert_non_null(strstr(why, "header"));
	h.u.port = port_a();
	refused(&h, 0, 2, 0, "version");
	refused(&h, 1, 99, 0, "unknown message type");
	refused(&h, 2, 0x7f, 0, "length field");
	refused(&h, -1, 0, -2, "n_pkeys");
	refused(&h, 8 + 10, 'x', 0, "NUL padded");
	refused(&h, 8 + 64, 0, 0, "port number");
	refused(&h, 8 + 65, 8, 0, "LMC");
	refused(&h, 8 + 66, 6, 0, "MTU");
	refused(&h, 8 + 67, 2, 0, "flag");
	refused(&h, 8 + 85, 7, 0, "aligned"); /* LID 7 with LMC 1 */
	refused(&h, 8 + 84, 0xc0, 0, "unicast");
	refused(&h, 8 + 95, 1, 0, "reserved");
	refused(&h, 8 + 89, 0, 0, "not 108 + 2 * n_pkeys");
	q.u.qp_create.type = SIMFAB_QP_UD;
	refused(&q, 8, 4, 0, "QP type");
	refused(&q, 9, 1, 0, "reserved");
	refused(&q, 10, 1, 0, "P_Key index");
	refused(&q, -1, 0, 1, "8 octets");
	qm.u.qp_modify.qpn = 0x48;
	qm.u.qp_modify.set_pkey = true;
	qm.u.qp_modify.pkey_index = 1;
	refused(&qm, 8 + 9, 200, 0, "P_Key index");
	refused(&qm, 8 + 10, 1, 0, "reserved"); /* found by fuzz_simfab */
	refused(&qm, 8 + 11, 1, 0, "reserved");
	mc.u.mcast.qpn = 5;
	mc.u.mcast.mlid = 0xc001;
	assert_int_equal(ib_gid_parse("ff12::1", &mc.u.mcast.mgid), 0);
	refused(&mc, 8, 1, 0, "24 bits");
	refused(&mc, 12, 0xbf, 0, "multicast LID");
	refused(&mc, 16, 0xfe, 0, "MGID");
	refused(&mc, 14, 1, 0, "reserved");
	e.u.error.err = 5;
	e.u.error.text = "bad";
	e.u.error.len = 3;
	refused(&e, 8 + 4, 0x07, 0, "printable");
	refused(&e, 8 + 3, 0, 0, "errno");
	refused(&e, -1, 0, -3, "no message");
	ps.u.port_state.state = SIMFAB_PORT_ACTIVE;
	refused(&ps, 8, 2, 0, "DOWN (1) or ACTIVE (4)");
	/* What the encoder refuses. */
	h.u.port.n_pkeys = 0;
	assert_int_equal(simfab_encode(&h, small, 4), -EINVAL);
	h.u.port = port_a();
	h.u.port.name[0] = 0;
	assert_int_equal(simfab_encode(&h, small, 4), -EINVAL);
	assert_int_equal(simfab_port_info_check(&h.u.port, &why), -EINVAL);
	assert_string_equal(why, "node name is empty");
	q.u.qp_create.type = 9;
	assert_int_equal(simfab_encode(&q, small, 4), -EINVAL);
}

/* ---- the client against a scripted fabric ------------------------------------------ */

struct fake {
	int lfd;
	char path[108];
	pthread_t thread;
	unsigned hellos;
};

static void fake_send(int fd, struct simfab_msg *m)
{
	uint8_t buf[SIMFAB_MSG_MAX];
	int n = simfab_encode(m, buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(send(fd, buf, (size_t)n, MSG_NOSIGNAL), n);
}

/* Answers HELLO with OK; QP_CREATE with a PACKET first (traffic overtaking the
 * answer) and then OK 0x48; QP_MODIFY with ERROR EPERM; echoes PACKETs back;
 * QP_DESTROY: no answer (the client times out), then closes. */
static void *fake_run(void *arg)
{
	struct fake *fk = arg;
	uint8_t buf[SIMFAB_MSG_MAX];
	int fd = accept(fk->lfd, NULL, NULL);

	for (;;) {
		struct simfab_msg m, r = { 0 };
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0 || simfab_decode(buf, (size_t)n, &m, NULL) < 0)
			break;
		r.seq = m.seq;
		switch (m.type) {
		case SIMFAB_HELLO:
			fk->hellos++;
			r.type = SIMFAB_OK;
			fake_send(fd, &r);
			break;
		case SIMFAB_QP_CREATE: {
			static const uint8_t early[IB_PACKET_MIN_LEN] = { 0xee };
			struct simfab_msg p = { .type = SIMFAB_PACKET };

			p.u.packet.qpn = 0x47;
			p.u.packet.data = early;
			p.u.packet.len = sizeof(early);
			fake_send(fd, &p);
			r.type = SIMFAB_PORT_STATE;
			r.u.port_state.state = SIMFAB_PORT_DOWN;
			r.seq = 0;
			fake_send(fd, &r);
			r = (struct simfab_msg){ .type = SIMFAB_OK, .seq = m.seq };
			r.u.ok.value = 0x48;
			fake_send(fd, &r);
			break;
		}
		case SIMFAB_QP_MODIFY:
			r.type = SIMFAB_ERROR;
			r.u.error.err = EPERM;
			r.u.error.text = "QP_MODIFY: controlled";
			r.u.error.len = strlen(r.u.error.text);
			fake_send(fd, &r);
			break;
		case SIMFAB_PACKET:
			m.u.packet.qpn = 0x48;
			fake_send(fd, &m);
			break;
		case SIMFAB_QP_DESTROY:
			usleep(300000);
			close(fd);
			return NULL;
		}
	}
	close(fd);
	return NULL;
}

static void test_client(void **state)
{
	struct fake fk = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct simfab_port_info pi = port_a();
	struct simfab_client *c;
	struct simfab_event ev;
	uint8_t pkt[IB_PACKET_MIN_LEN + 8];
	uint32_t qpn = 0;

	(void)state;
	snprintf(fk.path, sizeof(fk.path), "/tmp/ibgw-simfab-test.%d", (int)getpid());
	strcpy(sa.sun_path, fk.path);
	unlink(fk.path);
	fk.lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_true(fk.lfd >= 0);
	assert_int_equal(bind(fk.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fk.lfd, 1), 0);
	assert_int_equal(pthread_create(&fk.thread, NULL, fake_run, &fk), 0);

	assert_int_equal(simfab_client_connect("/nonexistent/fabric.sock", &c), -ENOENT);
	assert_int_equal(simfab_client_connect(fk.path, &c), 0);
	assert_true(simfab_client_fd(c) >= 0);
	assert_int_equal(simfab_client_hello(c, &pi), 0);
	assert_int_equal(simfab_client_qp_create(c, SIMFAB_QP_UD, 0x0b1b, &qpn), 0);
	assert_int_equal(qpn, 0x48);
	/* The PACKET and PORT_STATE that came before the answer are kept, in order. */
	assert_int_equal(simfab_client_recv(c, &ev, 0), 0);
	assert_int_equal(ev.type, SIMFAB_PACKET);
	assert_int_equal(ev.qpn, 0x47);
	assert_int_equal(ev.data[0], 0xee);
	assert_int_equal(simfab_client_recv(c, &ev, 0), 0);
	assert_int_equal(ev.type, SIMFAB_PORT_STATE);
	assert_int_equal(ev.port_state, SIMFAB_PORT_DOWN);
	assert_int_equal(simfab_client_recv(c, &ev, 0), -EAGAIN);
	/* ERROR answers become -errno with their text. */
	assert_int_equal(simfab_client_qp_modify(c, qpn, 0x80000000u), -EPERM);
	assert_string_equal(simfab_client_errmsg(c), "QP_MODIFY: controlled");
	/* Packets go out and come back. */
	memset(pkt, 0xab, sizeof(pkt));
	assert_int_equal(simfab_client_send(c, qpn, pkt, 3), -EINVAL); /* shorter than a packet */
	assert_int_equal(simfab_client_send(c, qpn, pkt, sizeof(pkt)), 0);
	assert_int_equal(simfab_client_recv(c, &ev, 2000), 0);
	assert_int_equal(ev.type, SIMFAB_PACKET);
	assert_int_equal(ev.len, sizeof(pkt));
	assert_memory_equal(ev.data, pkt, sizeof(pkt));
	/* A burst: polling takes it in batches; a request answered meanwhile keeps what
	 * came before its answer behind what the last batch still holds, all in order. */
	for (unsigned i = 0; i < 20; i++) {
		pkt[0] = (uint8_t)i;
		assert_int_equal(simfab_client_send(c, qpn, pkt, sizeof(pkt)), 0);
	}
	usleep(200000); /* all 20 echoed */
	assert_int_equal(simfab_client_recv(c, &ev, 0), 0);
	assert_int_equal(ev.data[0], 0);
	assert_int_equal(simfab_client_qp_create(c, SIMFAB_QP_UD, 0x0b1b, &qpn), 0);
	for (unsigned i = 1; i < 20; i++) {
		assert_int_equal(simfab_client_recv(c, &ev, 0), 0);
		assert_int_equal(ev.type, SIMFAB_PACKET);
		assert_int_equal(ev.len, sizeof(pkt));
		assert_int_equal(ev.data[0], i);
	}
	assert_int_equal(simfab_client_recv(c, &ev, 0), 0);
	assert_int_equal(ev.qpn, 0x47);
	assert_int_equal(simfab_client_recv(c, &ev, 0), 0);
	assert_int_equal(ev.type, SIMFAB_PORT_STATE);
	assert_int_equal(simfab_client_recv(c, &ev, 0), -EAGAIN);
	/* No answer: a timeout; then the fabric goes away. */
	simfab_client_set_timeout(c, 100);
	assert_int_equal(simfab_client_qp_destroy(c, qpn), -ETIMEDOUT);
	assert_int_equal(simfab_client_recv(c, &ev, 2000), -ECONNRESET);
	assert_int_equal(simfab_client_recv(c, &ev, 0), -ECONNRESET); /* polled, too */
	simfab_client_close(c);
	pthread_join(fk.thread, NULL);
	assert_int_equal(fk.hellos, 1);
	close(fk.lfd);
	unlink(fk.path);
}

static void test_build_ud(void **state)
{
	struct simfab_port_info pi = port_a();
	union ib_gid mgid;
	struct simfab_ud_dest d = { .dlid = 0xc000,
				    .sl = 2,
				    .dgid = &mgid,
				    .hop_limit = 1,
				    .dqpn = 0xffffff,
				    .qkey = 0x0b1b,
				    .pkey = 0x8001 };
	uint8_t buf[512];
	struct ib_packet p;
	char text[IB_GID_STRLEN];
	int n;

	(void)state;
	assert_int_equal(ib_gid_parse("ff12:401b:8001::ffff:ffff", &mgid), 0);
	n = simfab_build_ud(&pi, 0x48, 0x123456, &d, (const uint8_t *)"abc", 3, buf, sizeof(buf));
	assert_int_equal(n, 8 + 40 + 12 + 8 + 4 + 4 + 2); /* 3 payload + 1 pad */
	assert_int_equal(ib_packet_parse(buf, (size_t)n, &p), IB_PKT_OK);
	assert_int_equal(p.lrh.slid, 6);
	assert_int_equal(p.lrh.sl, 2);
	assert_true(p.has_grh);
	ib_gid_format(&p.grh.sgid, text, sizeof(text));
	assert_string_equal(text, "fe80::2:c903:a1:7");
	assert_true(ib_gid_equal(&p.grh.dgid, &mgid));
	assert_int_equal(p.bth.pkey, 0x8001);
	assert_int_equal(p.bth.psn, 0x123456);
	assert_int_equal(p.deth.src_qp, 0x48);
	assert_int_equal(p.payload_len, 3);
	assert_int_equal(simfab_mtu_bytes(4), 2048);
	assert_int_equal(simfab_mtu_bytes(6), 0);
}

/* The shared rings, one process playing both ends: order, wrap-around, full, the
 * wake-up rule (a KICK only for a consumer that found the ring empty, once), and the
 * peer's impossible indexes and lengths refused. */
static void test_ring(void **state)
{
	const uint32_t n = SIMFAB_RING_SLOTS_MIN;
	size_t bytes = simfab_ring_bytes(n);
	uint8_t *mem = calloc(1, bytes), pkt[IB_PACKET_MAX_LEN];
	struct simfab_ring prod, cons;
	const uint8_t *d;
	uint32_t qpn, bad;
	size_t len;

	(void)state;
	assert_int_equal(simfab_ring_bytes(24), 0);   /* not a power of two */
	assert_int_equal(simfab_ring_bytes(8), 0);    /* too few */
	assert_int_equal(simfab_ring_bytes(2048), 0); /* too many */
	assert_non_null(mem);
	simfab_ring_view(mem, n, 1, &prod);
	simfab_ring_view(mem, n, 1, &cons);
	/* The consumer finds it empty: the next push kicks, the one after does not. */
	memset(pkt, 0x5a, sizeof(pkt));
	assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 0);
	assert_int_equal(simfab_ring_push(&prod, 0x48, pkt, IB_PACKET_MIN_LEN), 1);
	assert_int_equal(simfab_ring_push(&prod, 0x49, pkt, IB_PACKET_MIN_LEN), 0);
	assert_int_equal(simfab_ring_push(&prod, 0x49, pkt, 3), -EINVAL);
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 1);
		assert_int_equal(qpn, 0x48 + i);
		assert_int_equal(len, IB_PACKET_MIN_LEN);
		simfab_ring_pop(&cons);
	}
	/* Around the ring three times, filling it each time; the longest packet fits. */
	for (uint32_t round = 0; round < 3; round++) {
		for (uint32_t i = 0; i < n; i++) {
			pkt[0] = (uint8_t)i;
			assert_true(simfab_ring_push(&prod, i, pkt, IB_PACKET_MAX_LEN) >= 0);
		}
		assert_int_equal(simfab_ring_push(&prod, 1, pkt, IB_PACKET_MAX_LEN), -EAGAIN);
		for (uint32_t i = 0; i < n; i++) {
			assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 1);
			assert_int_equal(qpn, i);
			assert_int_equal(len, IB_PACKET_MAX_LEN);
			assert_int_equal(d[0], (uint8_t)i);
			simfab_ring_pop(&cons);
		}
		assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 0);
	}
	/* Built in place: nothing is published until the commit, and a bad length is not. */
	{
		int err;
		uint8_t *w = simfab_ring_slot(&prod, &err);

		assert_non_null(w);
		memset(w, 0x77, IB_PACKET_MIN_LEN);
		assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 0);
		assert_int_equal(simfab_ring_commit(&prod, 9, IB_PACKET_MAX_LEN + 1), -EINVAL);
		assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 0);
		assert_int_equal(simfab_ring_commit(&prod, 9, IB_PACKET_MIN_LEN), 1); /* it slept */
		assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), 1);
		assert_int_equal(qpn, 9);
		assert_int_equal(d[0], 0x77);
		simfab_ring_pop(&cons);
	}
	/* The other end's word out of range: refused, not followed. */
	bad = cons.pos + n + 1;
	memcpy(cons.ctl, &bad, 4); /* head */
	assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), -EPROTO);
	bad = prod.pos + 5; /* a tail ahead of the head */
	memcpy(prod.ctl + 64, &bad, 4);
	assert_int_equal(simfab_ring_push(&prod, 1, pkt, IB_PACKET_MIN_LEN), -EPROTO);
	/* A slot whose length is beyond the longest packet. */
	simfab_ring_view(mem, n, 0, &prod);
	simfab_ring_view(mem, n, 0, &cons);
	assert_int_equal(simfab_ring_push(&prod, 7, pkt, IB_PACKET_MIN_LEN), 0);
	bad = IB_PACKET_MAX_LEN + 1;
	memcpy(cons.slots, &bad, 4);
	assert_int_equal(simfab_ring_peek(&cons, &qpn, &d, &len), -EPROTO);
	free(mem);
}

/* A fabric that takes RING and counts KICKs; on each it drains the ring (so the next
 * push finds it asleep again). */
struct kick_fake {
	int lfd;
	atomic_uint kicks, drained;
};

static void *kick_fake_run(void *arg)
{
	struct kick_fake *kf = arg;
	uint8_t buf[SIMFAB_MSG_MAX], *mem = NULL;
	size_t mem_len = 0;
	struct simfab_ring in = { 0 };
	int fd = accept(kf->lfd, NULL, NULL);

	for (;;) {
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cm;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cm.b,
				     .msg_controllen = sizeof(cm.b) };
		struct simfab_msg m, r = { .type = SIMFAB_OK };
		ssize_t n = recvmsg(fd, &mh, 0);
		const uint8_t *d;
		uint32_t qpn;
		size_t len;

		if (n <= 0 || simfab_decode(buf, (size_t)n, &m, NULL) < 0)
			break;
		r.seq = m.seq;
		if (m.type == SIMFAB_RING) {
			struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
			int rfd;

			assert_non_null(ch);
			memcpy(&rfd, CMSG_DATA(ch), sizeof(rfd));
			mem_len = simfab_ring_bytes(m.u.ring.slots);
			mem = mmap(NULL, mem_len, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
			close(rfd);
			assert_true(mem != MAP_FAILED);
			simfab_ring_view(mem, m.u.ring.slots, 0, &in);
		}
		if (m.type == SIMFAB_KICK) {
			atomic_fetch_add(&kf->kicks, 1);
			while (simfab_ring_peek(&in, &qpn, &d, &len) == 1) {
				simfab_ring_pop(&in);
				atomic_fetch_add(&kf->drained, 1);
			}
			continue;
		}
		fake_send(fd, &r);
	}
	if (mem)
		munmap(mem, mem_len);
	close(fd);
	return NULL;
}

static void wait_kicks(struct kick_fake *kf, unsigned want)
{
	for (int i = 0; i < 200 && atomic_load(&kf->kicks) < want; i++)
		usleep(10000);
	usleep(50000); /* and no more than want */
	assert_int_equal(atomic_load(&kf->kicks), want);
}

/* A corked client rings the doorbell once, at the uncork; uncorked, the first push
 * into a sleeping ring kicks at once; an uncork that owes nothing sends nothing. */
static void test_cork(void **state)
{
	struct kick_fake kf = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct simfab_port_info pi = port_a();
	struct simfab_client *c;
	uint8_t pkt[IB_PACKET_MIN_LEN] = { 0 };
	pthread_t thread;

	(void)state;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/ibgw-simfab-cork.%d", (int)getpid());
	unlink(sa.sun_path);
	kf.lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_true(kf.lfd >= 0);
	assert_int_equal(bind(kf.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(kf.lfd, 1), 0);
	assert_int_equal(pthread_create(&thread, NULL, kick_fake_run, &kf), 0);
	assert_int_equal(simfab_client_connect(sa.sun_path, &c), 0);
	assert_int_equal(simfab_client_hello(c, &pi), 0);
	assert_int_equal(simfab_client_ring(c, SIMFAB_RING_SLOTS_MIN), 0);

	simfab_client_cork(c);
	for (int i = 0; i < 3; i++)
		assert_int_equal(simfab_client_send(c, 0x48, pkt, sizeof(pkt)), 0);
	wait_kicks(&kf, 0);
	simfab_client_uncork(c);
	wait_kicks(&kf, 1);
	assert_int_equal(atomic_load(&kf.drained), 3);
	simfab_client_uncork(c); /* owes nothing */
	wait_kicks(&kf, 1);
	assert_int_equal(simfab_client_send(c, 0x48, pkt, sizeof(pkt)), 0);
	wait_kicks(&kf, 2);
	assert_int_equal(atomic_load(&kf.drained), 4);

	simfab_client_close(c);
	pthread_join(thread, NULL);
	close(kf.lfd);
	unlink(sa.sun_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_client),    cmocka_unit_test(test_build_ud),
		cmocka_unit_test(test_ring),      cmocka_unit_test(test_cork),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
