/*
 * ibp_pingpong: UD and RC traffic between two simulated ports, through the ibp_ops API
 * only: the verbs backend, on the rack under libibverbs2sim.so (LD_PRELOADed after
 * libumad2sim). Run inside a rack node (`sim/rack exec ibhost1 -- ibp_pingpong ...`)
 * with the fabric up. The transport's counters (retransmissions and so on) are the
 * HCA's, which verbs does not show: the report has none.
 *
 *   ibp_pingpong [OPTIONS] info
 *       one line: `port NODE lid L sm_lid S guid 0x.. mtu B state N pkeys P,..`
 *   ibp_pingpong [OPTIONS] ud-recv
 *       `ready qpn 0xN lid L`, then per datagram `ud slid=L src_qp=0xN len=N grh=0|1
 *       seq=N ok=0|1` (ok: the payload is the pattern for seq); exits after --count
 *       datagrams (status 0) or --timeout seconds (status 3 if none came)
 *   ibp_pingpong [OPTIONS] ud-send DLID DQPN
 *       --count datagrams of --size octets (default 256), as fast as buffers allow
 *   ibp_pingpong [OPTIONS] rc PEER
 *       RC with node PEER: writes DIR/NODE.rc (`qpn psn lid`), waits for DIR/PEER.rc,
 *       connects, sends --count messages of mixed sizes up to --max (65520) octets while
 *       receiving PEER's, checks every message (sequence number, length, content),
 *       then writes DIR/NODE.done and keeps answering until DIR/PEER.done exists.
 *       Prints `rc done sent N rcvd N bytes N secs S mbps X bad 0`, or `rc error STATUS
 *       after MS ms` when a send completes with an error (status 2).
 *
 * Options: --node NAME (default $IBGW_NODE, else $SIM_HOST), --dir DIR (rc exchange files, default .), --count N,
 * --size N, --max N, --timeout SEC (default 60), --attach MGID/MLID (ud-recv),
 * --dgid GID (ud-send: GRH; multicast: `ud-send 0xc000 0xffffff --dgid MGID`),
 * --qkey Q (default 0x0b1b), --rc-timeout CODE (default 14: 67 ms), --retry N (7),
 * --rnr-retry N (7), --stop-after N (rc: stop polling after receiving N
 * messages and wait to be killed, to play a crashed peer), --quiet (ud-recv: no
 * per-datagram lines), --churn (ud-recv: a second thread creates and destroys QPs, AHs
 * and multicast attachments, queries and reads events meanwhile, as the daemon's
 * control thread would: for TSan).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "port/ib_port.h"
#include "lib/ib_gid.h"
#include "lib/log.h"

#define N_BUFS   512
#define BUF_SIZE (65536 + 64)
#define RQ_DEPTH 128
#define SQ_DEPTH 64
#define WC_BATCH 32
#define MSG_MAX  65520

static const struct ibp_ops *ops;
struct opts {
	const char *node, *dir;
	unsigned count, size, max, timeout, stop_after;
	const char *attach, *dgid;
	uint32_t qkey;
	uint8_t rc_timeout, retry, rnr_retry;
	int quiet, churn;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "ibp_pingpong: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* Pattern byte j of message seq from sender salt. */
static uint8_t pat(uint32_t salt, uint32_t seq, uint32_t j)
{
	return (uint8_t)(salt * 131u + seq * 31u + j * 7u + (j >> 8));
}

static void fill(uint8_t *p, uint32_t len, uint32_t salt, uint32_t seq)
{
	for (uint32_t j = 0; j < len; j++)
		p[j] = pat(salt, seq, j);
	if (len >= 4)
		memcpy(p, &seq, 4);
}

static int check(const uint8_t *p, uint32_t len, uint32_t salt, uint32_t seq)
{
	uint32_t got;

	if (len >= 4) {
		memcpy(&got, p, 4);
		if (got != seq)
			return 0;
	}
	for (uint32_t j = len >= 4 ? 4 : 0; j < len; j++)
		if (p[j] != pat(salt, seq, j))
			return 0;
	return 1;
}

/* Mixed sizes: the largest, the smallest, MTU edges, and a spread in between. */
static uint32_t msg_size(uint32_t seq, uint32_t max)
{
	static const uint32_t edge[] = { 65520, 0, 1, 2047, 2048, 2049, 4096, 40 };

	if (seq % 10 < 8 && seq < 80)
		return edge[seq % 8] > max ? max : edge[seq % 8];
	return (seq * 2654435761u) % (max + 1);
}

static uint32_t salt_of(const char *node)
{
	uint32_t h = 2166136261u;

	for (; *node; node++)
		h = (h ^ (uint8_t)*node) * 16777619u;
	return h;
}

/* Sleep on the cq fd for at most ms (arm, poll once more in the caller). */
static void wait_cq(struct ibp_port *port, int epfd, int ms)
{
	struct epoll_event ev;

	ops->arm(port, 0);
	epoll_wait(epfd, &ev, 1, ms);
}

static int cq_epoll(struct ibp_port *port)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int epfd = epoll_create1(0);

	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, ops->cq_fd(port, 0), &ev) < 0)
		die("epoll", errno);
	return epfd;
}

static struct ibp_port *open_port(const struct opts *o)
{
	struct ibp_port_config cfg = { .backend = "verbs",
				       .device = o->node,
				       .port = 1,
				       .buf_size = BUF_SIZE,
				       .n_bufs = N_BUFS };
	struct ibp_port *port;
	int ret = ops->open(&cfg, &port);

	if (ret < 0)
		die("open", ret);
	return port;
}

static void post_recvs(struct ibp_qp *qp, struct ibp_srq *srq, struct ibp_port *port, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibp_buf *b = ops->buf_get(port);
		int ret;

		if (!b)
			die("buf_get", ENOMEM);
		ret = srq ? ops->post_srq_recv(srq, &b, 1) : ops->post_recv(qp, 0, &b, 1);
		if (ret != 1)
			die("post_recv", ret);
	}
}

static void repost(struct ibp_qp *qp, struct ibp_srq *srq, struct ibp_buf *b)
{
	int ret = srq ? ops->post_srq_recv(srq, &b, 1) : ops->post_recv(qp, 0, &b, 1);

	if (ret != 1)
		die("repost", ret);
}

static int cmd_info(const struct opts *o)
{
	struct ibp_port *port = open_port(o);
	struct ibp_port_attr a;
	union ib_gid gid;
	char g[IB_GID_STRLEN];
	int ret = ops->query(port, &a);

	if (ret < 0)
		die("query", ret);
	ib_gid_set(&gid, a.gid_prefix, a.port_guid);
	ib_gid_format(&gid, g, sizeof(g));
	printf("port %s lid %u lmc %u sm_lid %u guid 0x%016" PRIx64 " gid %s mtu %u state %d "
	       "subnet_timeout %u pkeys",
	       o->node, a.lid, a.lmc, a.sm_lid, a.port_guid, g, ib_mtu_bytes((int)a.active_mtu),
	       (int)a.state, a.subnet_timeout);
	for (unsigned i = 0; i < a.n_pkeys; i++)
		printf("%s0x%04x", i ? "," : " ", a.pkeys[i]);
	printf("\n");
	ops->close(port);
	return 0;
}

static struct ibp_qp *ud_qp(struct ibp_port *port, const struct opts *o)
{
	struct ibp_qp_init init = {
		.type = IBP_QPT_UD, .qkey = o->qkey, .send_depth = SQ_DEPTH, .recv_depth = RQ_DEPTH
	};
	struct ibp_qp *qp;
	int ret = ops->create_qp(port, &init, &qp);

	if (ret < 0 || (ret = ops->qp_ready(qp, NULL)) < 0)
		die("UD QP", ret);
	return qp;
}

/* --churn: the control thread's work while the main thread is the port's worker. */
struct churn {
	struct ibp_port *port;
	const struct opts *o;
	atomic_bool stop;
	unsigned rounds;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	union ib_gid mgid;
	struct ibp_ah_attr aa = { .dlid = 1 };

	ib_gid_parse("ff12:401b:ffff::1:2", &mgid);
	while (!atomic_load(&c->stop)) {
		struct ibp_qp_init init = {
			.type = IBP_QPT_UD, .qkey = c->o->qkey, .send_depth = 4, .recv_depth = 4
		};
		struct ibp_port_attr a;
		struct ibp_event ev;
		struct ibp_qp *qp;
		struct ibp_ah *ah;

		if (ops->create_qp(c->port, &init, &qp) == 0) {
			struct ibp_buf *b = ops->buf_get(c->port);

			ops->qp_ready(qp, NULL);
			if (b && ops->post_recv(qp, 0, &b, 1) != 1)
				ops->buf_put(c->port, b);
			ops->attach_mcast(qp, &mgid, 0xc010);
			ops->detach_mcast(qp, &mgid, 0xc010);
			ops->destroy_qp(qp); /* the posted buffer returns to the pool */
		}
		if (ops->create_ah(c->port, &aa, &ah) == 0)
			ops->destroy_ah(ah);
		ops->query(c->port, &a);
		while (ops->next_event(c->port, &ev) == 0)
			;
		c->rounds++;
	}
	return NULL;
}

static int cmd_ud_recv(const struct opts *o)
{
	struct ibp_port *port = open_port(o);
	struct ibp_qp *qp = ud_qp(port, o);
	struct ibp_port_attr a;
	struct ibp_wc wc[WC_BATCH];
	unsigned got = 0, bad = 0;
	uint64_t bytes = 0;
	double t0 = 0, t1 = 0, end;
	int epfd = cq_epoll(port);

	if (o->attach) {
		char mgid_s[64];
		const char *slash = strchr(o->attach, '/');
		union ib_gid mgid;
		int ret;

		if (!slash || (size_t)(slash - o->attach) >= sizeof(mgid_s))
			die("--attach MGID/MLID", EINVAL);
		memcpy(mgid_s, o->attach, (size_t)(slash - o->attach));
		mgid_s[slash - o->attach] = 0;
		if (ib_gid_parse(mgid_s, &mgid) < 0)
			die("--attach MGID", EINVAL);
		ret = ops->attach_mcast(qp, &mgid, (uint16_t)strtoul(slash + 1, NULL, 0));
		if (ret < 0)
			die("attach_mcast", ret);
	}
	post_recvs(qp, NULL, port, RQ_DEPTH);
	ops->query(port, &a);
	printf("ready qpn 0x%x lid %u\n", ops->qp_num(qp), a.lid);
	fflush(stdout);
	struct churn ch = { .port = port, .o = o };
	pthread_t th;

	if (o->churn && pthread_create(&th, NULL, churn_main, &ch) != 0)
		die("pthread_create", errno);
	end = now_s() + o->timeout;
	while (now_s() < end && (!o->count || got < o->count)) {
		int n = ops->poll(port, 0, wc, WC_BATCH);

		if (n < 0)
			die("poll", n);
		if (n == 0) {
			wait_cq(port, epfd, 20);
			continue;
		}
		for (int i = 0; i < n; i++) {
			uint32_t len = wc[i].byte_len - IBP_GRH_AREA, seq = 0;
			const uint8_t *p = wc[i].buf->data + IBP_GRH_AREA;
			int ok;

			if (wc[i].kind != IBP_WC_RECV || wc[i].status != IBP_WC_OK) {
				bad++;
				repost(qp, NULL, wc[i].buf);
				continue;
			}
			if (len >= 4)
				memcpy(&seq, p, 4);
			ok = check(p, len, 0, seq);
			bad += !ok;
			if (!got)
				t0 = now_s();
			t1 = now_s();
			got++;
			bytes += len;
			if (!o->quiet)
				printf("ud slid=%u src_qp=0x%x len=%u grh=%d seq=%u ok=%d\n",
				       wc[i].slid, wc[i].src_qp, len, wc[i].has_grh, seq, ok);
			repost(qp, NULL, wc[i].buf);
		}
	}
	if (o->churn) {
		atomic_store(&ch.stop, true);
		pthread_join(th, NULL);
		printf("churn rounds %u\n", ch.rounds);
	}
	printf("ud-recv got %u bad %u bytes %" PRIu64 " secs %.3f mbps %.1f\n", got, bad, bytes,
	       t1 - t0, t1 > t0 ? (double)bytes / (t1 - t0) / 1e6 : 0.0);
	ops->destroy_qp(qp);
	ops->close(port);
	return got ? 0 : 3;
}

static int cmd_ud_send(const struct opts *o, uint16_t dlid, uint32_t dqpn)
{
	struct ibp_port *port = open_port(o);
	struct ibp_qp *qp = ud_qp(port, o);
	struct ibp_ah_attr aa = { .dlid = dlid, .hop_limit = 1 };
	struct ibp_ah *ah;
	struct ibp_wc wc[WC_BATCH];
	unsigned sent = 0, done = 0;
	double t0 = now_s(), t1;
	int epfd = cq_epoll(port), ret;

	if (o->dgid) {
		if (ib_gid_parse(o->dgid, &aa.dgid) < 0)
			die("--dgid", EINVAL);
		aa.is_global = true;
	}
	ret = ops->create_ah(port, &aa, &ah);
	if (ret < 0)
		die("create_ah", ret);
	while (done < o->count) {
		struct ibp_send s[WC_BATCH];
		unsigned k = 0;

		while (sent + k < o->count && k < WC_BATCH) {
			struct ibp_buf *b = ops->buf_get(port);

			if (!b)
				break;
			b->len = o->size;
			fill(b->data, b->len, 0, sent + k);
			s[k] = (struct ibp_send){ .qp = qp,
						  .ah = ah,
						  .remote_qpn = dqpn,
						  .remote_qkey = o->qkey,
						  .buf = b,
						  .wr_id = sent + k };
			k++;
		}
		if (k) {
			ret = ops->post_send(0, s, k);
			if (ret < 0)
				ret = 0;
			for (unsigned i = (unsigned)ret; i < k; i++)
				ops->buf_put(port, s[i].buf);
			sent += (unsigned)ret;
		}
		int n = ops->poll(port, 0, wc, WC_BATCH);

		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBP_WC_OK)
				fprintf(stderr, "ud send status %d\n", wc[i].status);
			ops->buf_put(port, wc[i].buf);
			done++;
		}
		if (n == 0 && !k)
			wait_cq(port, epfd, 5);
	}
	t1 = now_s();
	printf("sent %u qpn 0x%x secs %.3f mbps %.1f\n", sent, ops->qp_num(qp), t1 - t0,
	       (double)sent * o->size / (t1 - t0) / 1e6);
	ops->destroy_ah(ah);
	ops->destroy_qp(qp);
	ops->close(port);
	return 0;
}

static void write_file(const char *dir, const char *node, const char *ext, const char *text)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, node, ext);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) < 0)
		die(path, errno);
}

static int read_file(const char *dir, const char *node, const char *ext, char *buf, size_t len)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, node, ext);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return 0;
}

static const char *status_name(enum ibp_wc_status s)
{
	static const char *const names[] = { "OK",           "FLUSHED",      "RETRY_EXCEEDED",
					     "RNR_EXCEEDED", "REMOTE_ERROR", "LOCAL_ERROR" };

	return (unsigned)s < 6 ? names[s] : "?";
}

static int cmd_rc(const struct opts *o, const char *peer)
{
	struct ibp_port *port = open_port(o);
	struct ibp_port_attr a;
	struct ibp_srq *srq;
	struct ibp_qp *qp;
	struct ibp_qp_init init = { .type = IBP_QPT_RC, .send_depth = SQ_DEPTH };
	struct ibp_qp_connect c = { 0 };
	struct ibp_wc wc[WC_BATCH];
	char text[128];
	unsigned rq, rpsn, rlid;
	uint32_t my_psn, my_salt = salt_of(o->node), peer_salt = salt_of(peer);
	unsigned sent = 0, acked = 0, rcvd = 0, bad = 0;
	uint64_t bytes = 0;
	double t0, t1, end, t_ack;
	int epfd = cq_epoll(port), ret, status = 0;

	ret = ops->query(port, &a);
	if (ret < 0)
		die("query", ret);
	ret = ops->create_srq(port, 0, RQ_DEPTH, &srq);
	if (ret < 0)
		die("create_srq", ret);
	init.srq = srq;
	ret = ops->create_qp(port, &init, &qp);
	if (ret < 0)
		die("create_qp RC", ret);
	post_recvs(NULL, srq, port, RQ_DEPTH);
	srand((unsigned)getpid());
	my_psn = (uint32_t)rand() & 0xffffff;
	if (getenv("IBP_PSN"))
		my_psn = (uint32_t)strtoul(getenv("IBP_PSN"), NULL, 0) & 0xffffff;
	snprintf(text, sizeof(text), "%u %u %u\n", ops->qp_num(qp), my_psn, a.lid);
	write_file(o->dir, o->node, "rc", text);
	end = now_s() + o->timeout;
	while (read_file(o->dir, peer, "rc", text, sizeof(text)) < 0 ||
	       sscanf(text, "%u %u %u", &rq, &rpsn, &rlid) != 3) {
		if (now_s() > end)
			die("waiting for the peer's .rc file", ETIMEDOUT);
		usleep(10000);
	}
	c.remote_qpn = rq;
	c.remote_psn = rpsn;
	c.local_psn = my_psn;
	c.path.dlid = (uint16_t)rlid;
	c.path_mtu = a.active_mtu;
	c.timeout = o->rc_timeout;
	c.retry_count = o->retry;
	c.rnr_retry = o->rnr_retry;
	c.min_rnr_timer = 12;
	ret = ops->qp_ready(qp, &c);
	if (ret < 0)
		die("qp_ready RC", ret);
	printf("connected qpn %u psn 0x%06x to lid %u qpn %u psn 0x%06x mtu %u\n", ops->qp_num(qp),
	       my_psn, rlid, rq, rpsn, ib_mtu_bytes((int)a.active_mtu));
	fflush(stdout);
	t0 = t_ack = now_s();
	while ((acked < o->count || rcvd < o->count) && !status) {
		struct ibp_send s[8];
		unsigned k = 0;
		int n;

		if (now_s() > end) {
			fprintf(stderr, "rc: timed out: sent %u acked %u rcvd %u\n", sent, acked,
				rcvd);
			status = 4;
			break;
		}
		while (sent + k < o->count && sent + k - acked < SQ_DEPTH && k < 8) {
			struct ibp_buf *b = ops->buf_get(port);

			if (!b)
				break;
			b->len = msg_size(sent + k, o->max);
			fill(b->data, b->len, my_salt, sent + k);
			s[k] = (struct ibp_send){ .qp = qp, .buf = b, .wr_id = sent + k };
			k++;
		}
		if (k) {
			ret = ops->post_send(0, s, k);
			if (ret < 0)
				ret = 0;
			for (unsigned i = (unsigned)ret; i < k; i++)
				ops->buf_put(port, s[i].buf);
			sent += (unsigned)ret;
		}
		n = ops->poll(port, 0, wc, WC_BATCH);
		if (n < 0)
			die("poll", n);
		for (int i = 0; i < n; i++) {
			struct ibp_wc *w = &wc[i];

			if (w->kind == IBP_WC_SEND) {
				if (w->status != IBP_WC_OK && !status) {
					printf("rc error %s after %.0f ms, %.0f ms after the last "
					       "ACKed send (sent %u acked %u)\n",
					       status_name(w->status), (now_s() - t0) * 1e3,
					       (now_s() - t_ack) * 1e3, sent, acked);
					status = 2;
				}
				if (w->status == IBP_WC_OK) {
					if (w->wr_id != acked)
						bad++; /* completions out of order */
					acked++;
					t_ack = now_s();
				}
				ops->buf_put(port, w->buf);
				continue;
			}
			if (w->status != IBP_WC_OK) {
				if (w->status != IBP_WC_FLUSHED)
					bad++;
				ops->buf_put(port, w->buf);
				continue;
			}
			if (w->qp != qp || w->byte_len != msg_size(rcvd, o->max) ||
			    !check(w->buf->data, w->byte_len, peer_salt, rcvd))
				bad++;
			bytes += w->byte_len;
			rcvd++;
			repost(NULL, srq, w->buf);
			if (o->stop_after && rcvd >= o->stop_after) {
				/* Play dead: no more polling, no ACKs; the test kills us. */
				printf("rc stopping after %u messages (no goodbye)\n", rcvd);
				fflush(stdout);
				for (;;)
					pause();
			}
		}
		if (n == 0 && !k)
			wait_cq(port, epfd, 10);
	}
	t1 = now_s();
	if (!status) {
		/* Stay until the peer is done too: it may still need our ACKs. */
		write_file(o->dir, o->node, "done", "done\n");
		while (read_file(o->dir, peer, "done", text, sizeof(text)) < 0 && now_s() < end) {
			int n = ops->poll(port, 0, wc, WC_BATCH);

			for (int i = 0; i < n; i++) {
				if (wc[i].kind == IBP_WC_RECV && wc[i].status == IBP_WC_OK) {
					bad++; /* nothing more may arrive */
					repost(NULL, srq, wc[i].buf);
				} else {
					ops->buf_put(port, wc[i].buf);
				}
			}
			if (n == 0)
				wait_cq(port, epfd, 10);
		}
		/* A little longer: a last duplicate must not be delivered twice. */
		for (double stop = now_s() + 0.3; now_s() < stop;) {
			int n = ops->poll(port, 0, wc, WC_BATCH);

			for (int i = 0; i < n; i++) {
				if (wc[i].kind == IBP_WC_RECV && wc[i].status == IBP_WC_OK) {
					bad++;
					repost(NULL, srq, wc[i].buf);
				} else {
					ops->buf_put(port, wc[i].buf);
				}
			}
			if (n == 0)
				wait_cq(port, epfd, 10);
		}
	}
	if (!status)
		printf("rc done sent %u rcvd %u bytes %" PRIu64 " secs %.3f mbps %.1f bad %u\n",
		       acked, rcvd, bytes, t1 - t0, (double)bytes / (t1 - t0) / 1e6, bad);
	ops->destroy_qp(qp);
	ops->destroy_srq(srq);
	ops->close(port);
	if (!status && bad)
		status = 5;
	return status;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "node", 1, NULL, 'n' },       { "dir", 1, NULL, 'd' },
		{ "count", 1, NULL, 'c' },      { "size", 1, NULL, 'z' },
		{ "max", 1, NULL, 'm' },        { "timeout", 1, NULL, 't' },
		{ "attach", 1, NULL, 'a' },     { "dgid", 1, NULL, 'g' },
		{ "qkey", 1, NULL, 'q' },       { "rc-timeout", 1, NULL, 'T' },
		{ "retry", 1, NULL, 'r' },      { "rnr-retry", 1, NULL, 'R' },
		{ "stop-after", 1, NULL, 'S' }, { "quiet", 0, NULL, 'Q' },
		{ "churn", 0, NULL, 'C' },      { NULL, 0, NULL, 0 },
	};
	struct opts o = { .dir = ".",
			  .count = 0,
			  .size = 256,
			  .max = MSG_MAX,
			  .timeout = 60,
			  .qkey = 0x0b1b,
			  .rc_timeout = 14,
			  .retry = 7,
			  .rnr_retry = 7 };
	int c;

	log_init("ibp_pingpong", LOG_TARGET_STDERR, LOG_WARNING);
	o.node = getenv("IBGW_NODE") ? getenv("IBGW_NODE") : getenv("SIM_HOST");
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.node = optarg;
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'c':
			o.count = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'z':
			o.size = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'm':
			o.max = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 't':
			o.timeout = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'a':
			o.attach = optarg;
			break;
		case 'g':
			o.dgid = optarg;
			break;
		case 'q':
			o.qkey = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'T':
			o.rc_timeout = (uint8_t)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			o.retry = (uint8_t)strtoul(optarg, NULL, 0);
			break;
		case 'R':
			o.rnr_retry = (uint8_t)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			o.stop_after = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'Q':
			o.quiet = 1;
			break;
		case 'C':
			o.churn = 1;
			break;
		default:
			return 1;
		}
	}
	if (optind >= argc || !o.node || o.max > MSG_MAX) {
		fprintf(stderr, "usage: ibp_pingpong [OPTIONS] info|ud-recv|ud-send DLID DQPN|rc "
				"PEER (needs --node or a rack node's environment)\n");
		return 1;
	}
	ops = ibp_backend("verbs");
	if (!strcmp(argv[optind], "info"))
		return cmd_info(&o);
	if (!strcmp(argv[optind], "ud-recv"))
		return cmd_ud_recv(&o);
	if (!strcmp(argv[optind], "ud-send") && optind + 2 < argc) {
		if (!o.count)
			o.count = 1;
		return cmd_ud_send(&o, (uint16_t)strtoul(argv[optind + 1], NULL, 0),
				   (uint32_t)strtoul(argv[optind + 2], NULL, 0));
	}
	if (!strcmp(argv[optind], "rc") && optind + 1 < argc) {
		if (!o.count)
			o.count = 1000;
		return cmd_rc(&o, argv[optind + 1]);
	}
	fprintf(stderr, "ibp_pingpong: unknown command %s\n", argv[optind]);
	return 1;
}
