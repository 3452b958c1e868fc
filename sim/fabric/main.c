/*
 * ibgw-fabric: the simulated IB fabric's program. It listens on a unix SOCK_SEQPACKET
 * socket where each connection is one HCA port speaking lib/ib_simfab.h, feeds the
 * packets they send to the switching core (fabric.c), delivers what the core hands
 * back, and answers text commands on a second (stream) socket: link, loss, delay,
 * capture, stats. It also is its own control client: `ibgw-fabric ctl SOCKET CMD...`.
 *
 *   ibgw-fabric --socket PATH [--control PATH] [--seed N] [--verbose]
 *   ibgw-fabric ctl CONTROL-PATH COMMAND...
 *
 * One thread, one epoll loop. Receives are batched with recvmmsg; a delivery is one
 * non-blocking sendmsg (header and packet as two iovecs, no copy); a port whose socket
 * is full loses the packet (counted rx_overflow), as an HCA without receive buffers
 * drops UD packets. A port that sent RING (lib/ib_simfab.h) exchanges PACKETs through
 * two shared-memory rings instead: its ring is drained whenever its socket is readable
 * (the port sends KICK when the fabric said it may sleep), before the requests read
 * with it, so a packet never overtakes a QP_DESTROY sent after it; deliveries go into
 * the port's other ring (full: rx_overflow), with a KICK only when the port sleeps,
 * sent when the handler that delivered ends or after KICK_BATCH deliveries (one per
 * port and batch, not one per packet).
 * Captures go through a large stdio buffer, flushed when stopped.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "lib/ib_pcap.h"
#include "lib/ib_simfab.h"
#include "lib/log.h"
#include "sim/fabric/fabric.h"

#define RX_BATCH     32
#define MAX_CONNS    FABRIC_PORTS_MAX
#define SOCK_BUF     (4 << 20)
#define ERF_FLAG_RXE 0x10 /* ERF header flags: "receive error": our mark for drops */
/* Ring deliveries between two sends of the KICKs they owe: a receiver starts on a long
 * batch before it ends, and is not left a full ring (its 1024 slots) to find. */
#define KICK_BATCH 64

struct conn {
	int fd;
	int port; /* fabric port, -1 before HELLO */
	struct fab *fab;
	/* After RING: the shared memory, the port's ring to us and ours to it. */
	uint8_t *rmap;
	size_t rmap_len;
	struct simfab_ring in, out;
	bool kick_owed; /* a delivery found the port asleep: flush_kicks sends the KICK */
};

struct ctl_conn {
	int fd;
	size_t len;
	char buf[FABRIC_CMD_MAX];
	struct fab *fab;
};

struct fab {
	struct evloop *loop;
	struct fabric *f;
	int lfd, cfd, sigfd;
	const char *sock_path, *ctl_path;
	struct conn conns[MAX_CONNS];
	int port_conn[FABRIC_PORTS_MAX]; /* fabric port -> index in conns */
	struct evtimer *delay_timer, *capture_timer;
	FILE *cap;
	char cap_path[FABRIC_CMD_MAX];
	uint64_t cap_packets;
	/* recvmmsg batch */
	struct mmsghdr mm[RX_BATCH];
	struct iovec iov[RX_BATCH];
	uint8_t *rx; /* RX_BATCH * SIMFAB_MSG_MAX */
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cmsg[RX_BATCH]; /* RING's file descriptor */
	int rx_fd[RX_BATCH];
	/* A packet taken from a ring: copied first, so that the port cannot change it
	 * between the checks and the delivery. */
	uint8_t ring_pkt[IB_PACKET_MAX_LEN];
	/* Connections owed a KICK (kick_owed set), in the order they became owed. */
	int owed[MAX_CONNS];
	unsigned n_owed;
	unsigned unflushed; /* ring deliveries since the last flush_kicks */
};

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- core callbacks -------------------------------------------------------------- */

static void send_msg(struct conn *c, const struct simfab_msg *m);
static void flush_kicks(struct fab *x);

static int cb_deliver(void *arg, int port, uint32_t qpn, const uint8_t *pkt, size_t len)
{
	struct fab *x = arg;
	uint8_t hdr[SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)pkt, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	int ci = x->port_conn[port];

	if (ci >= 0 && x->conns[ci].rmap) {
		struct conn *c = &x->conns[ci];
		int rc = simfab_ring_push(&c->out, qpn, pkt, len);

		/* The KICK waits for the end of the handler or KICK_BATCH deliveries
		 * (flush_kicks): a batch costs the port one wake-up, not one per packet. */
		if (rc == 1 && !c->kick_owed) {
			c->kick_owed = true;
			x->owed[x->n_owed++] = ci;
		}
		if (++x->unflushed >= KICK_BATCH)
			flush_kicks(x);
		return rc == -EAGAIN ? -ENOBUFS : rc < 0 ? rc : 0;
	}
	if (ci < 0 || simfab_packet_header(hdr, qpn, len) < 0)
		return -EINVAL;
	if (sendmsg(x->conns[ci].fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

static void send_msg(struct conn *c, const struct simfab_msg *m)
{
	uint8_t buf[SIMFAB_HDR_LEN + 4 + SIMFAB_ERRMSG_MAX];
	int n = simfab_encode(m, buf, sizeof(buf));

	if (n > 0 && send(c->fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
	    m->type != SIMFAB_KICK) /* a full socket will be read anyway */
		log_errno(LOG_WARNING, errno, "fabric: answer to port connection %d lost", c->fd);
}

/* The KICKs the deliveries owe (cb_deliver): every handler that can deliver ends with
 * this, and cb_deliver calls it every KICK_BATCH deliveries. */
static void flush_kicks(struct fab *x)
{
	struct simfab_msg k = { .type = SIMFAB_KICK };

	x->unflushed = 0;
	for (unsigned i = 0; i < x->n_owed; i++) {
		struct conn *c = &x->conns[x->owed[i]];

		if (c->kick_owed && c->fd >= 0)
			send_msg(c, &k);
		c->kick_owed = false;
	}
	x->n_owed = 0;
}

static void cb_port_state(void *arg, int port, bool up)
{
	struct fab *x = arg;
	struct simfab_msg m = { .type = SIMFAB_PORT_STATE };
	int ci = x->port_conn[port];

	if (ci < 0)
		return;
	m.u.port_state.state = up ? SIMFAB_PORT_ACTIVE : SIMFAB_PORT_DOWN;
	send_msg(&x->conns[ci], &m);
	log_info("fabric: %s port %u link %s", fabric_port_info(x->f, port)->name,
		 fabric_port_info(x->f, port)->port_num, up ? "up" : "down");
}

static void cb_capture(void *arg, const uint8_t *pkt, size_t len, bool dropped, uint64_t now_ns)
{
	struct fab *x = arg;
	uint8_t rec[IB_PCAP_REC_HDR_LEN + IB_ERF_HDR_LEN + IB_PACKET_MAX_LEN];
	int n;

	(void)now_ns;
	if (!x->cap)
		return;
	n = ib_erf_record(rec, sizeof(rec), pkt, len, wall_ns());
	if (n < 0)
		return;
	if (dropped)
		rec[IB_PCAP_REC_HDR_LEN + 9] |= ERF_FLAG_RXE;
	if (fwrite(rec, 1, (size_t)n, x->cap) == (size_t)n)
		x->cap_packets++;
}

/* ---- capture --------------------------------------------------------------------- */

static int capture_stop(struct fab *x, char *reply, size_t rlen)
{
	int rc = 0;

	if (!x->cap)
		return snprintf(reply, rlen, "error: no capture running\n"), -ENOENT;
	evtimer_stop(x->capture_timer);
	if (fclose(x->cap) != 0)
		rc = -errno;
	x->cap = NULL;
	log_info("fabric: capture %s stopped, %llu packets", x->cap_path,
		 (unsigned long long)x->cap_packets);
	if (rc < 0)
		snprintf(reply, rlen, "error: closing %s: %s\n", x->cap_path, strerror(-rc));
	else
		snprintf(reply, rlen, "ok capture %s stopped: %llu packets\n", x->cap_path,
			 (unsigned long long)x->cap_packets);
	return rc;
}

static void capture_timeout(struct evloop *loop, struct evtimer *t, void *arg)
{
	char reply[FABRIC_CMD_MAX + 100];

	(void)loop;
	(void)t;
	capture_stop(arg, reply, sizeof(reply));
}

static int capture_start(struct fab *x, const char *path, uint32_t seconds, char *reply,
			 size_t rlen)
{
	FILE *f;
	int rc;

	if (x->cap)
		return snprintf(reply, rlen, "error: a capture to %s is running\n", x->cap_path),
		       -EBUSY;
	f = fopen(path, "we");
	if (!f) {
		rc = -errno;
		snprintf(reply, rlen, "error: %s: %s\n", path, strerror(errno));
		return rc;
	}
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	rc = ib_pcap_write_header(f);
	if (rc < 0) {
		fclose(f);
		snprintf(reply, rlen, "error: %s: %s\n", path, strerror(-rc));
		return rc;
	}
	x->cap = f;
	x->cap_packets = 0;
	snprintf(x->cap_path, sizeof(x->cap_path), "%s", path);
	if (seconds)
		evtimer_start(x->capture_timer, (uint64_t)seconds * 1000, 0);
	log_info("fabric: capturing to %s%s", path, seconds ? " (timed)" : "");
	snprintf(reply, rlen, "ok capturing to %s\n", path);
	return 0;
}

/* ---- port connections ------------------------------------------------------------ */

static void arm_delay_timer(struct fab *x)
{
	uint64_t due = fabric_next_deadline(x->f), now = evloop_now_ns();

	if (!due)
		return;
	evtimer_start(x->delay_timer, due > now ? (due - now + 999999) / 1000000 : 0, 0);
}

static void delay_fire(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct fab *x = arg;

	(void)loop;
	(void)t;
	fabric_poll(x->f, evloop_now_ns());
	flush_kicks(x);
	arm_delay_timer(x);
}

static void conn_close(struct fab *x, struct conn *c)
{
	if (c->port >= 0) {
		const struct simfab_port_info *i = fabric_port_info(x->f, c->port);

		log_info("fabric: %s port %u (LID %u) detached", i->name, i->port_num, i->lid);
		fabric_port_remove(x->f, c->port);
		x->port_conn[c->port] = -1;
	}
	if (c->rmap)
		munmap(c->rmap, c->rmap_len);
	c->rmap = NULL;
	c->kick_owed = false;
	evloop_del_fd(x->loop, c->fd);
	close(c->fd);
	c->fd = -1;
	c->port = -1;
}

/* RING: map the port's memory (fd: the descriptor it carried, ours to close). */
static int ring_attach(struct conn *c, int fd, uint32_t slots, const char **why)
{
	size_t bytes = simfab_ring_bytes(slots);
	struct stat st;
	void *mem;

	if (fd < 0)
		return *why = "RING carries no file descriptor", -EINVAL;
	if (c->rmap)
		return *why = "this port has its rings", -EALREADY;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < bytes)
		return *why = "the memory is not a file of simfab_ring_bytes(slots) octets",
		       -EINVAL;
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED)
		return *why = "cannot map the memory", -errno;
	c->rmap = mem;
	c->rmap_len = bytes;
	simfab_ring_view(mem, slots, 0, &c->in);
	simfab_ring_view(mem, slots, 1, &c->out);
	return 0;
}

/* Everything the port put in its ring, in order. Returns false when the port broke the
 * ring's rules (the connection is closed). */
static bool conn_drain(struct fab *x, struct conn *c)
{
	struct fabric_verdict v;
	const uint8_t *pkt;
	bool held = false;
	uint32_t qpn;
	size_t len;
	int rc;

	while (c->rmap && c->port >= 0 && (rc = simfab_ring_peek(&c->in, &qpn, &pkt, &len)) != 0) {
		if (rc < 0) {
			const struct simfab_port_info *i = fabric_port_info(x->f, c->port);

			log_error("fabric: %s port %u: its ring holds an impossible index or "
				  "length: connection closed",
				  i->name, i->port_num);
			conn_close(x, c);
			return false;
		}
		memcpy(x->ring_pkt, pkt, len);
		simfab_ring_pop(&c->in);
		fabric_packet(x->f, c->port, qpn, x->ring_pkt, len, evloop_now_ns(), &v);
		held |= v.held;
	}
	if (held)
		arm_delay_timer(x);
	return true;
}

static void reply_err(struct conn *c, uint32_t seq, int err, const char *what, const char *why)
{
	struct simfab_msg m = { .type = SIMFAB_ERROR, .seq = seq };
	char text[SIMFAB_ERRMSG_MAX + 1];
	int n = snprintf(text, sizeof(text), "%s: %s", what, why ? why : strerror(err));

	m.u.error.err = (uint32_t)(err > 0 ? err : EPROTO);
	m.u.error.text = text;
	m.u.error.len = n < (int)sizeof(text) ? (size_t)n : sizeof(text) - 1;
	send_msg(c, &m);
}

static void reply_ok(struct conn *c, uint32_t seq, uint32_t value)
{
	struct simfab_msg m = { .type = SIMFAB_OK, .seq = seq };

	m.u.ok.value = value;
	send_msg(c, &m);
}

static void handle_msg(struct fab *x, struct conn *c, const uint8_t *buf, size_t len, int *fd)
{
	struct simfab_msg m;
	const char *why = NULL;
	struct fabric_verdict v;
	uint32_t qpn = 0;
	int rc;

	rc = simfab_decode(buf, len, &m, &why);
	if (rc < 0) {
		reply_err(c,
			  len >= 8 ? ((uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 |
				      (uint32_t)buf[6] << 8 | buf[7])
				   : 0,
			  -rc, "malformed message", why);
		return;
	}
	if (m.type == SIMFAB_PACKET && c->port >= 0) {
		fabric_packet(x->f, c->port, m.u.packet.qpn, m.u.packet.data, m.u.packet.len,
			      evloop_now_ns(), &v);
		if (v.held)
			arm_delay_timer(x);
		return;
	}
	if (m.type == SIMFAB_HELLO) {
		if (c->port >= 0) {
			reply_err(c, m.seq, EISCONN, "HELLO", "this connection has a port");
			return;
		}
		rc = fabric_port_add(x->f, &m.u.port, &c->port, &why);
		if (rc < 0) {
			c->port = -1;
			{
				reply_err(c, m.seq, -rc, "HELLO", why);
				return;
			}
		}
		x->port_conn[c->port] = (int)(c - x->conns);
		log_info("fabric: %s port %u attached: LID %u LMC %u GUID 0x%016llx MTU %u, %u "
			 "P_Keys",
			 m.u.port.name, m.u.port.port_num, m.u.port.lid, m.u.port.lmc,
			 (unsigned long long)m.u.port.port_guid, simfab_mtu_bytes(m.u.port.mtu),
			 m.u.port.n_pkeys);
		reply_ok(c, m.seq, 0);
		if (!fabric_port_up(x->f, c->port))
			cb_port_state(x, c->port, false);
		return;
	}
	if (c->port < 0) {
		reply_err(c, m.seq, EPROTO, simfab_type_name(m.type), "HELLO must come first");
		return;
	}
	switch (m.type) {
	case SIMFAB_PORT_UPDATE:
		rc = fabric_port_update(x->f, c->port, &m.u.port, &why);
		break;
	case SIMFAB_QP_CREATE:
		rc = fabric_qp_create_pkey(x->f, c->port, m.u.qp_create.type,
					   m.u.qp_create.pkey_index, m.u.qp_create.qkey, &qpn);
		why = rc == -EPERM    ? "a controlled Q_Key needs a privileged port"
		      : rc == -EINVAL ? "P_Key index beyond the port's table"
				      : NULL;
		break;
	case SIMFAB_QP_MODIFY:
		rc = fabric_qp_modify_pkey(x->f, c->port, m.u.qp_modify.qpn,
					   m.u.qp_modify.set_pkey ? m.u.qp_modify.pkey_index : -1,
					   m.u.qp_modify.qkey);
		why = rc == -EPERM    ? "a controlled Q_Key needs a privileged port"
		      : rc == -EINVAL ? "P_Key index beyond the port's table"
				      : NULL;
		break;
	case SIMFAB_QP_DESTROY:
		rc = fabric_qp_destroy(x->f, c->port, m.u.qp_destroy.qpn);
		break;
	case SIMFAB_MCAST_ATTACH:
		rc = fabric_mcast_attach(x->f, c->port, m.u.mcast.qpn, &m.u.mcast.mgid,
					 m.u.mcast.mlid);
		why = rc == -EINVAL ? "only UD QPs attach to multicast groups" : NULL;
		break;
	case SIMFAB_MCAST_DETACH:
		rc = fabric_mcast_detach(x->f, c->port, m.u.mcast.qpn, &m.u.mcast.mgid,
					 m.u.mcast.mlid);
		break;
	case SIMFAB_RING:
		rc = ring_attach(c, *fd, m.u.ring.slots, &why);
		if (rc == 0) {
			const struct simfab_port_info *i = fabric_port_info(x->f, c->port);

			log_info("fabric: %s port %u: packets through shared rings of %u slots",
				 i->name, i->port_num, m.u.ring.slots);
			reply_ok(c, m.seq, 0);
			conn_drain(x, c); /* empty: says we sleep, so the first packet kicks */
			return;
		}
		break;
	case SIMFAB_KICK:
		return; /* conn_read drained the ring */
	default:
		rc = -EPROTO;
		why = "not a message a port sends";
		break;
	}
	if (rc < 0) {
		reply_err(c, m.seq, -rc, simfab_type_name(m.type), why);
		return;
	}
	reply_ok(c, m.seq, qpn);
}

static void conn_read_msgs(struct fab *x, struct conn *c)
{
	int n;

	for (int i = 0; i < RX_BATCH; i++) {
		x->mm[i].msg_hdr.msg_control = x->cmsg[i].buf;
		x->mm[i].msg_hdr.msg_controllen = sizeof(x->cmsg[i].buf);
		x->rx_fd[i] = -1;
	}
	n = recvmmsg(c->fd, x->mm, RX_BATCH, MSG_DONTWAIT | MSG_CMSG_CLOEXEC, NULL);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(x, c);
		return;
	}
	if (n == 0) {
		conn_close(x, c);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct msghdr *mh = &x->mm[i].msg_hdr;

		for (struct cmsghdr *ch = CMSG_FIRSTHDR(mh); ch; ch = CMSG_NXTHDR(mh, ch))
			if (ch->cmsg_level == SOL_SOCKET && ch->cmsg_type == SCM_RIGHTS)
				for (size_t k = 0; k < (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				     k++) {
					int rfd;

					memcpy(&rfd, CMSG_DATA(ch) + k * sizeof(int), sizeof(int));
					if (x->rx_fd[i] < 0)
						x->rx_fd[i] = rfd;
					else
						close(rfd);
				}
	}
	/* Packets the port put in its ring before what it sent on the socket. */
	if (!conn_drain(x, c))
		goto out;
	for (int i = 0; i < n; i++) {
		if (x->mm[i].msg_len == 0) {
			conn_close(x, c);
			goto out;
		} /* orderly shutdown */
		if (x->mm[i].msg_hdr.msg_flags & MSG_TRUNC) {
			reply_err(c, 0, EMSGSIZE, "message", "longer than the longest PACKET");
			continue;
		}
		handle_msg(x, c, x->rx + (size_t)i * SIMFAB_MSG_MAX, x->mm[i].msg_len,
			   &x->rx_fd[i]);
		if (c->fd < 0)
			goto out;
	}
out:
	for (int i = 0; i < n; i++)
		if (x->rx_fd[i] >= 0)
			close(x->rx_fd[i]);
}

static void conn_read(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct conn *c = arg;

	(void)loop;
	(void)fd;
	(void)events;
	conn_read_msgs(c->fab, c);
	flush_kicks(c->fab);
}

static void accept_port(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct fab *x = arg;
	int cfd, sz = SOCK_BUF;
	struct conn *c = NULL;

	(void)events;
	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	for (int i = 0; i < MAX_CONNS; i++)
		if (x->conns[i].fd < 0) {
			c = &x->conns[i];
			break;
		}
	if (!c) {
		log_warning("fabric: refusing a port connection: %d ports attached", MAX_CONNS);
		close(cfd);
		return;
	}
	/* Room for bursts: a port that cannot take more loses packets, as hardware does. */
	setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	c->fd = cfd;
	c->port = -1;
	if (evloop_add_fd(loop, cfd, EPOLLIN, conn_read, c) < 0) {
		close(cfd);
		c->fd = -1;
	}
}

/* ---- control socket -------------------------------------------------------------- */

static void ctl_reply(struct ctl_conn *cc, const char *text)
{
	size_t len = strlen(text), off = 0;

	while (off < len) {
		ssize_t n = send(cc->fd, text + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
}

static void ctl_run(struct fab *x, struct ctl_conn *cc)
{
	char reply[2 * FABRIC_CMD_MAX];
	struct fabric_cmd cmd;
	const char *why = NULL;
	char *json;
	int rc = 0;

	if (fabric_cmd_parse(cc->buf, cc->len, &cmd, &why) < 0) {
		snprintf(reply, sizeof(reply), "error: %s\n", why);
		{
			ctl_reply(cc, reply);
			return;
		}
	}
	snprintf(reply, sizeof(reply), "ok\n");
	switch (cmd.kind) {
	case FABRIC_CMD_STATS:
		json = fabric_stats_json(x->f);
		if (!json) {
			ctl_reply(cc, "error: out of memory\n");
			return;
		}
		ctl_reply(cc, json);
		ctl_reply(cc, "\n");
		free(json);
		return;
	case FABRIC_CMD_LINK:
		rc = fabric_set_port_link(x->f, cmd.name, cmd.value, cmd.up);
		if (rc == 0 && cmd.value)
			log_info("fabric: node %s port %u link %s", cmd.name, cmd.value,
				 cmd.up ? "up" : "down");
		else if (rc == 0)
			log_info("fabric: node %s link %s", cmd.name, cmd.up ? "up" : "down");
		break;
	case FABRIC_CMD_LOSS:
		rc = fabric_set_loss(x->f, cmd.name, cmd.value);
		if (rc == 0)
			log_info("fabric: loss %u.%04u%% on %s", cmd.value / 10000,
				 cmd.value % 10000, cmd.name ? cmd.name : "every port");
		break;
	case FABRIC_CMD_DELAY:
		rc = fabric_set_delay(x->f, cmd.name, cmd.value);
		if (rc == 0)
			log_info("fabric: delay %u ms on %s", cmd.value,
				 cmd.name ? cmd.name : "every port");
		break;
	case FABRIC_CMD_CAPTURE_START:
		capture_start(x, cmd.file, cmd.value, reply, sizeof(reply));
		break;
	case FABRIC_CMD_CAPTURE_STOP:
		capture_stop(x, reply, sizeof(reply));
		break;
	case FABRIC_CMD_ROUTER_PORT:
		rc = fabric_router_port(x->f, cmd.name, cmd.port, (uint16_t)cmd.lid, cmd.guid,
					cmd.prefix, cmd.mtu, &why);
		if (rc < 0 && why) {
			snprintf(reply, sizeof(reply), "error: %s\n", why);
			ctl_reply(cc, reply);
			return;
		}
		if (rc == 0)
			log_info("fabric: router %s port %u lid %u prefix 0x%016" PRIx64, cmd.name,
				 cmd.port, cmd.lid, cmd.prefix);
		break;
	case FABRIC_CMD_ROUTE:
		rc = fabric_router_route(x->f, cmd.name, &cmd.gid, cmd.plen, cmd.port,
					 (uint16_t)cmd.lid);
		break;
	case FABRIC_CMD_MCAST:
		rc = fabric_router_mcast(x->f, cmd.name, &cmd.gid, cmd.port, (uint16_t)cmd.lid);
		break;
	case FABRIC_CMD_MCAST_PROXY:
		rc = fabric_router_proxy(x->f, cmd.name, &cmd.gid, cmd.plen);
		break;
	}
	if (rc < 0 && cmd.kind >= FABRIC_CMD_ROUTER_PORT)
		snprintf(reply, sizeof(reply), "error: %s\n",
			 rc == -ENOENT   ? "no such router (give it a port first: router NODE ...)"
			 : rc == -ENOSPC ? "router table full"
					 : strerror(-rc));
	else if (rc < 0)
		snprintf(reply, sizeof(reply), "error: %s\n",
			 rc == -ENOSPC ? "too many node names" : strerror(-rc));
	ctl_reply(cc, reply);
}

static void ctl_read(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct ctl_conn *cc = arg;
	ssize_t n;
	char *nl;

	(void)events;
	n = recv(fd, cc->buf + cc->len, sizeof(cc->buf) - 1 - cc->len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		cc->len += (size_t)n;
		nl = memchr(cc->buf, '\n', cc->len);
		if (!nl && cc->len < sizeof(cc->buf) - 1)
			return;
		if (!nl) {
			ctl_reply(cc, "error: command longer than 511 octets\n");
			goto done;
		}
		cc->len = (size_t)(nl - cc->buf);
	}
	if (cc->len || n > 0)
		ctl_run(cc->fab, cc);
done:
	evloop_del_fd(loop, fd);
	close(fd);
	free(cc);
}

static void accept_ctl(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct fab *x = arg;
	struct timeval tv = { .tv_sec = 2 };
	struct ctl_conn *cc;
	int cfd;

	(void)events;
	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		close(cfd);
		return;
	}
	/* Replies are written blocking (a stats reply can be long), but never for long. */
	setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	cc->fd = cfd;
	cc->fab = x;
	if (evloop_add_fd(loop, cfd, EPOLLIN, ctl_read, cc) < 0) {
		close(cfd);
		free(cc);
	}
}

static void on_signal(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	if (read(fd, &si, sizeof(si)) == sizeof(si))
		log_info("fabric: signal %u, stopping", si.ssi_signo);
	evloop_stop(loop);
}

/* ---- setup ----------------------------------------------------------------------- */

/*
 * A listening socket at path with the given mode. The port socket is 0666, as the
 * kernel makes /dev/infiniband/uverbsN: any process may attach a port, ibgwd too once
 * it runs as an unprivileged user (gateway.user). The control socket (links, loss) is
 * the switch's management: its mode is what the umask leaves.
 */
static int listen_unix(const char *path, int type, mode_t mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || (mode && chmod(path, mode) < 0) ||
	    listen(fd, 64) < 0) {
		err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

static int ctl_client(const char *path, int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[FABRIC_CMD_MAX + 2], buf[65536];
	size_t len = 0;
	bool first = true, error = false;
	ssize_t n;
	int fd;

	for (int i = 0; i < argc; i++) {
		int w = snprintf(line + len, sizeof(line) - len, "%s%s", i ? " " : "", argv[i]);

		if (w < 0 || (size_t)w >= sizeof(line) - len - 1) {
			fprintf(stderr, "ibgw-fabric ctl: command too long\n");
			return 2;
		}
		len += (size_t)w;
	}
	line[len++] = '\n';
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "ibgw-fabric ctl: socket path too long\n");
		return 2;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "ibgw-fabric ctl: %s: %s\n", path, strerror(errno));
		return 2;
	}
	if (write(fd, line, len) != (ssize_t)len) {
		fprintf(stderr, "ibgw-fabric ctl: write: %s\n", strerror(errno));
		return 2;
	}
	shutdown(fd, SHUT_WR);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (first && n >= 6 && !memcmp(buf, "error:", 6))
			error = true;
		first = false;
		fwrite(buf, 1, (size_t)n, error ? stderr : stdout);
	}
	close(fd);
	if (first) {
		fprintf(stderr, "ibgw-fabric ctl: no answer from %s\n", path);
		return 2;
	}
	return error ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: ibgw-fabric --socket PATH [--control PATH] [--seed N] "
			"[--verbose]\n"
			"       ibgw-fabric ctl CONTROL-PATH COMMAND...\n"
			"commands: link NODE down|up | loss PERCENT [NODE] | delay MS [NODE] |\n"
			"          capture start /FILE [SECONDS] | capture stop | stats\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "control", required_argument, NULL, 'c' },
		{ "seed", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct fabric_ops ops = { cb_deliver, cb_port_state, cb_capture };
	struct fabric_config cfg = { 0 };
	struct fab *x;
	char ctl_default[256];
	sigset_t mask;
	int o, rc = 1, level = LOG_INFO;

	if (argc >= 2 && !strcmp(argv[1], "ctl")) {
		if (argc < 4)
			usage();
		return ctl_client(argv[2], argc - 3, argv + 3);
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return 1;
	while ((o = getopt_long(argc, argv, "s:c:S:vh", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			x->sock_path = optarg;
			break;
		case 'c':
			x->ctl_path = optarg;
			break;
		case 'S':
			cfg.seed = strtoull(optarg, NULL, 0);
			break;
		case 'v':
			level = LOG_DEBUG;
			break;
		default:
			usage();
		}
	}
	if (!x->sock_path || optind != argc)
		usage();
	if (!x->ctl_path) {
		snprintf(ctl_default, sizeof(ctl_default), "%s.ctl", x->sock_path);
		x->ctl_path = ctl_default;
	}
	log_init("ibgw-fabric", LOG_TARGET_AUTO, level);
	x->lfd = x->cfd = x->sigfd = -1;
	for (int i = 0; i < MAX_CONNS; i++) {
		x->conns[i].fd = -1;
		x->conns[i].port = -1;
		x->conns[i].fab = x;
	}
	for (int i = 0; i < FABRIC_PORTS_MAX; i++)
		x->port_conn[i] = -1;
	x->rx = malloc((size_t)RX_BATCH * SIMFAB_MSG_MAX);
	if (!x->rx)
		goto out;
	for (int i = 0; i < RX_BATCH; i++) {
		x->iov[i] = (struct iovec){ x->rx + (size_t)i * SIMFAB_MSG_MAX, SIMFAB_MSG_MAX };
		x->mm[i].msg_hdr = (struct msghdr){ .msg_iov = &x->iov[i], .msg_iovlen = 1 };
	}
	if (fabric_new(&cfg, &ops, x, &x->f) < 0 || evloop_new(&x->loop) < 0)
		goto out;
	x->delay_timer = evtimer_new(x->loop, delay_fire, x);
	x->capture_timer = evtimer_new(x->loop, capture_timeout, x);
	if (!x->delay_timer || !x->capture_timer)
		goto out;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	x->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	x->lfd = listen_unix(x->sock_path, SOCK_SEQPACKET, 0666);
	if (x->lfd < 0) {
		log_errno(LOG_ERR, -x->lfd, "fabric: listen on %s", x->sock_path);
		goto out;
	}
	x->cfd = listen_unix(x->ctl_path, SOCK_STREAM, 0);
	if (x->cfd < 0) {
		log_errno(LOG_ERR, -x->cfd, "fabric: listen on %s", x->ctl_path);
		goto out;
	}
	if (x->sigfd < 0 || evloop_add_fd(x->loop, x->sigfd, EPOLLIN, on_signal, x) < 0 ||
	    evloop_add_fd(x->loop, x->lfd, EPOLLIN, accept_port, x) < 0 ||
	    evloop_add_fd(x->loop, x->cfd, EPOLLIN, accept_ctl, x) < 0)
		goto out;
	log_info("fabric: ports on %s, control on %s", x->sock_path, x->ctl_path);
	rc = evloop_run(x->loop) < 0 ? 1 : 0;
out:
	if (x->cap) {
		char reply[FABRIC_CMD_MAX + 100];

		capture_stop(x, reply, sizeof(reply));
	}
	for (int i = 0; i < MAX_CONNS; i++)
		if (x->conns[i].fd >= 0)
			conn_close(x, &x->conns[i]);
	if (x->lfd >= 0) {
		close(x->lfd);
		unlink(x->sock_path);
	}
	if (x->cfd >= 0) {
		close(x->cfd);
		unlink(x->ctl_path);
	}
	if (x->sigfd >= 0)
		close(x->sigfd);
	evtimer_free(x->delay_timer);
	evtimer_free(x->capture_timer);
	evloop_free(x->loop);
	fabric_free(x->f);
	free(x->rx);
	free(x);
	return rc;
}
