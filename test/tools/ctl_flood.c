/*
 * ctl_flood: load and abuse for ibgwd's control socket, faster than a shell can
 * (test/integration/ctl_flood.sh). Prints one line of counters per run; the suite
 * judges them. Every wait is bounded.
 *
 *   ctl_flood SOCKET clients N        open N connections at once, send "show version"
 *                                     on each: "ok A busy B other C"
 *   ctl_flood SOCKET burst C R        C clients each pipeline R "show version" requests:
 *                                     "requests N ok M failed F"
 *   ctl_flood SOCKET garbage ROUNDS   malformed and oversized frames, bad arguments, each
 *                                     on its own connection: "answered A closed B hung H"
 *   ctl_flood SOCKET noread N SECS    send up to N requests and never read the replies,
 *                                     holding the connection SECS: "sent N"
 *   ctl_flood SOCKET idle N SECS      open N connections, one "show version" on each
 *                                     (so the daemon has counted them), print "ok A busy
 *                                     B" and hold the accepted ones idle for SECS
 *   ctl_flood SOCKET pipeline N SECS  one client: N "show stats" in one write, then
 *                                     their N replies, round after round for SECS:
 *                                     "rounds R requests Q ok M"
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "mgmt/ctl_proto.h"

#define WAIT_MS 5000 /* the longest any single wait may take */

static int connect_to(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static size_t frame(uint8_t *buf, uint32_t magic, uint16_t version, uint16_t type, uint32_t len,
		    uint32_t seq, const char *body, size_t body_len)
{
	struct ctl_hdr h = { magic, version, type, len, seq };

	ctl_hdr_encode(&h, buf);
	memcpy(buf + CTL_HDR_LEN, body, body_len);
	return CTL_HDR_LEN + body_len;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			return; /* the daemon closed: what it said is read next */
		p += n;
		len -= (size_t)n;
	}
}

static int read_timed(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, WAIT_MS) != 1)
			return -ETIMEDOUT;
		n = read(fd, p, len);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read frames until an END: its status, -ECONNRESET (closed), -ETIMEDOUT (hung). */
static int read_end(int fd)
{
	for (;;) {
		uint8_t hdr[CTL_HDR_LEN], body[4096];
		struct ctl_hdr h;
		int err = read_timed(fd, hdr, sizeof(hdr));
		struct json_object *o, *st;
		int status = -EPROTO;

		if (err < 0)
			return err;
		if (ctl_hdr_decode(hdr, sizeof(body) - 1, &h) < 0)
			return -EPROTO;
		err = read_timed(fd, body, h.len);
		if (err < 0)
			return err;
		if (h.type != CTL_MSG_END)
			continue;
		body[h.len] = '\0';
		o = json_tokener_parse((char *)body);
		if (o && json_object_object_get_ex(o, "status", &st))
			status = json_object_get_int(st);
		json_object_put(o);
		return status;
	}
}

static int run_clients(const char *path, int n)
{
	int *fds = calloc((size_t)n, sizeof(int));
	int ok = 0, busy = 0, other = 0;
	uint8_t req[CTL_HDR_LEN];

	frame(req, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 0, 1, "", 0);
	for (int i = 0; i < n; i++)
		fds[i] = connect_to(path);
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			send_all(fds[i], req, sizeof(req));
	for (int i = 0; i < n; i++) {
		int st = fds[i] >= 0 ? read_end(fds[i]) : -1;

		if (st == CTL_OK)
			ok++;
		else if (st == CTL_EBUSY)
			busy++;
		else
			other++;
	}
	/* Only now: a slot freed earlier would let a connection still waiting in the
	 * listen backlog in. */
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	printf("ok %d busy %d other %d\n", ok, busy, other);
	free(fds);
	return 0;
}

struct burst {
	const char *path;
	int requests, ok, failed;
};

#define BATCH 64 /* frames in the send buffer, written round and round */

/* Decode the complete frames at the front of in: END frames counted. Returns the
 * octets used, or -1 on a frame that is not our protocol. */
static long count_ends(const uint8_t *in, size_t len, struct burst *b, int *done)
{
	size_t off = 0;

	while (len - off >= CTL_HDR_LEN) {
		struct ctl_hdr h;

		if (ctl_hdr_decode(in + off, 65536, &h) < 0)
			return -1;
		if (len - off < CTL_HDR_LEN + h.len)
			break;
		if (h.type == CTL_MSG_END) {
			(*done)++;
			if (memmem(in + off + CTL_HDR_LEN, h.len, "\"status\":0", 10))
				b->ok++;
		}
		off += CTL_HDR_LEN + h.len;
	}
	return (long)off;
}

/* One client: write the requests as the socket takes them (never blocking: the daemon
 * stops reading a client that does not read), read the replies meanwhile. */
static void *burst_client(void *arg)
{
	struct burst *b = arg;
	int fd = connect_to(b->path), done = 0;
	uint8_t req[CTL_HDR_LEN * BATCH], in[65536 + CTL_HDR_LEN];
	size_t in_len = 0, sent = 0, total = (size_t)b->requests * CTL_HDR_LEN;

	if (fd < 0) {
		b->failed = b->requests;
		return NULL;
	}
	for (int i = 0; i < BATCH; i++)
		frame(req + i * CTL_HDR_LEN, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 0,
		      (uint32_t)i + 1, "", 0);
	while (done < b->requests) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN | (sent < total ? POLLOUT : 0) };

		if (poll(&pfd, 1, WAIT_MS) != 1)
			break; /* hung: the rest count as failed */
		if (pfd.revents & POLLOUT) {
			size_t at = sent % sizeof(req), k = sizeof(req) - at;
			ssize_t n;

			if (k > total - sent)
				k = total - sent;
			n = send(fd, req + at, k, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0)
				sent += (size_t)n;
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(fd, in + in_len, sizeof(in) - in_len);
			long used;

			if (n <= 0)
				break;
			in_len += (size_t)n;
			used = count_ends(in, in_len, b, &done);
			if (used < 0)
				break;
			memmove(in, in + used, in_len - (size_t)used);
			in_len -= (size_t)used;
		}
	}
	b->failed = b->requests - b->ok;
	close(fd);
	return NULL;
}

static int run_burst(const char *path, int clients, int requests)
{
	pthread_t t[64];
	struct burst b[64];
	int ok = 0, failed = 0;

	if (clients > 64)
		clients = 64;
	for (int i = 0; i < clients; i++) {
		b[i] = (struct burst){ .path = path, .requests = requests };
		pthread_create(&t[i], NULL, burst_client, &b[i]);
	}
	for (int i = 0; i < clients; i++) {
		pthread_join(t[i], NULL);
		ok += b[i].ok;
		failed += b[i].failed;
	}
	printf("requests %d ok %d failed %d\n", clients * requests, ok, failed);
	return 0;
}

/* What a hostile or broken client sends. Each case: one connection. */
static int garbage_case(const char *path, int which, uint8_t *buf, size_t cap)
{
	static const char *bad_args[] = {
		"{\"dst\":\"10.1.0.1/16\",\"gateway\":\"10.0.0.1\"}",
		"{\"dst\":\"10.1.0.0/16\",\"metric\":-5,\"dev\":\"x\"}",
		"{\"dst\":[1],\"gateway\":{}}",
		"{\"dst\":\"10.1.0.0/16\",\"nexthops\":[1,2,3]}",
	};
	size_t n = 0;
	bool expect_close = false;
	int fd = connect_to(path), st;

	if (fd < 0)
		return -1;
	switch (which) {
	case 0: /* not our protocol */
		n = frame(buf, 0x47455420, CTL_VERSION, 1, 0, 1, "", 0);
		break;
	case 1: /* another version */
		n = frame(buf, CTL_MAGIC, 99, 1, 0, 1, "", 0);
		break;
	case 2: /* a length over the limit */
		n = frame(buf, CTL_MAGIC, CTL_VERSION, 1, 0xffffffffu, 1, "", 0);
		break;
	case 3: /* a reply type */
		n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_MSG_RECORD, 0, 1, "", 0);
		break;
	case 4: /* not JSON */
		n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 5, 1, "hello", 5);
		break;
	case 5: /* deep JSON at the size limit */
		memset(buf + CTL_HDR_LEN, '[', CTL_MAX_REQUEST);
		n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, CTL_MAX_REQUEST, 1, "",
			  0) +
		    CTL_MAX_REQUEST;
		break;
	case 6: /* a megabyte of noise */
		for (size_t i = 0; i < cap; i++)
			buf[i] = (uint8_t)(i * 2654435761u >> 13);
		n = cap;
		break;
	case 7: /* a header promising a body that never comes: the daemon must not wait
		 * forever on a closed connection */
		n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 1000, 1, "{\"a\"", 4);
		expect_close = true;
		break;
	case 8: /* unknown request type */
		n = frame(buf, CTL_MAGIC, CTL_VERSION, 777, 0, 1, "", 0);
		break;
	default: { /* bad write-request arguments: refused, nothing changes */
		const char *a = bad_args[(which - 9) % 4];

		n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_ROUTE_ADD, (uint32_t)strlen(a), 1, a,
			  strlen(a));
	}
	}
	send_all(fd, buf, n);
	if (expect_close) {
		shutdown(fd, SHUT_WR);
		st = read_end(fd);
		close(fd);
		return st == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	}
	st = read_end(fd);
	close(fd);
	return st;
}

#define GARBAGE_CASES 13

static int run_garbage(const char *path, int rounds)
{
	size_t cap = 1u << 20;
	uint8_t *buf = malloc(cap + CTL_HDR_LEN);
	int answered = 0, closed = 0, hung = 0;

	for (int r = 0; r < rounds; r++) {
		for (int c = 0; c < GARBAGE_CASES; c++) {
			int st = garbage_case(path, c, buf, cap);

			if (st == -ETIMEDOUT)
				hung++;
			else if (st > 0 && st != CTL_OK)
				answered++;
			else
				closed++;
		}
	}
	printf("answered %d closed %d hung %d\n", answered, closed, hung);
	free(buf);
	return 0;
}

static int run_noread(const char *path, int n, int secs)
{
	int fd = connect_to(path), sent = 0;
	uint8_t req[CTL_HDR_LEN];
	struct timespec end;

	if (fd < 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	frame(req, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 0, 1, "", 0);
	for (; sent < n; sent++) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };

		/* The daemon stops reading once its replies pile up: our writes then block,
		 * which is the point. Give up after a short wait. */
		if (poll(&pfd, 1, 200) != 1 ||
		    send(fd, req, sizeof(req), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(req))
			break;
	}
	printf("sent %d\n", sent);
	fflush(stdout);
	for (;;) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec >= end.tv_sec)
			break;
		sleep(1);
	}
	close(fd);
	return 0;
}

static int run_idle(const char *path, int n, int secs)
{
	int *fds = calloc((size_t)n, sizeof(int));
	int ok = 0, busy = 0;
	uint8_t req[CTL_HDR_LEN];

	frame(req, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 0, 1, "", 0);
	/* One at a time: each is accepted (or refused) before the next connects. */
	for (int i = 0; i < n; i++) {
		int st;

		fds[i] = connect_to(path);
		if (fds[i] < 0)
			continue;
		send_all(fds[i], req, sizeof(req));
		st = read_end(fds[i]);
		if (st == CTL_OK) {
			ok++;
		} else {
			busy += st == CTL_EBUSY;
			close(fds[i]);
			fds[i] = -1;
		}
	}
	printf("ok %d busy %d\n", ok, busy);
	fflush(stdout);
	sleep((unsigned)secs);
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	return 0;
}

static int run_pipeline(const char *path, int n, int secs)
{
	int fd = connect_to(path), rounds = 0, ok = 0;
	uint8_t *req;
	struct timespec t0, now;

	if (fd < 0 || n < 1 || n > 4000) /* 4,000 fit the daemon's input buffer at once */
		return 1;
	req = malloc((size_t)n * CTL_HDR_LEN);
	for (int i = 0; i < n; i++)
		frame(req + (size_t)i * CTL_HDR_LEN, CTL_MAGIC, CTL_VERSION, CTL_SHOW_STATS, 0,
		      (uint32_t)i + 1, "", 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		send_all(fd, req, (size_t)n * CTL_HDR_LEN);
		for (int i = 0; i < n; i++) {
			int st = read_end(fd);

			if (st < 0)
				goto out;
			ok += st == CTL_OK;
		}
		rounds++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - t0.tv_sec < secs);
out:
	printf("rounds %d requests %d ok %d\n", rounds, rounds * n, ok);
	free(req);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[2], "clients"))
		return run_clients(argv[1], atoi(argv[3]));
	if (argc >= 5 && !strcmp(argv[2], "burst"))
		return run_burst(argv[1], atoi(argv[3]), atoi(argv[4]));
	if (argc >= 4 && !strcmp(argv[2], "garbage"))
		return run_garbage(argv[1], atoi(argv[3]));
	if (argc >= 5 && !strcmp(argv[2], "noread"))
		return run_noread(argv[1], atoi(argv[3]), atoi(argv[4]));
	if (argc >= 5 && !strcmp(argv[2], "idle"))
		return run_idle(argv[1], atoi(argv[3]), atoi(argv[4]));
	if (argc >= 5 && !strcmp(argv[2], "pipeline"))
		return run_pipeline(argv[1], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: ctl_flood SOCKET clients N | burst C R | garbage ROUNDS | "
			"noread N SECS | idle N SECS | pipeline N SECS\n");
	return 2;
}
