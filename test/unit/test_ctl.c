/*
 * Control protocol, end to end over real unix sockets: the server runs its event loop
 * in a thread, requests come from ctl_client or from raw writes of malformed frames.
 * Every malformed request must get an error reply (or a closed connection when it is
 * not our protocol at all), and the server must keep answering afterwards.
 *
 * Also: each socket's own mode and client limit, requests served in turns (a client
 * pipelining thousands of requests holds the others back by one turn's budget at most,
 * shown by the order the handlers ran in, not by timing), the privileged socket's peer
 * check (clients run as other users in forked children when the tests run as root),
 * and the write requests' argument codecs
 * (mgmt/ctl_args.h): gwctl's words, the JSON on the wire, and `show` lines pasted back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lib/evloop.h"
#include "mgmt/ctl_args.h"
#include "mgmt/ctl_client.h"
#include "mgmt/ctl_server.h"

struct fixture {
	struct evloop *loop;
	struct ctl_server *srv;
	pthread_t thread;
	int stop_pipe[2];
	char path[64], ro_path[64];
	int handled;
	/* the turns test: handled when each marker request ran (loop thread writes,
	 * the test reads after the replies: atomics, for TSan), and the gate */
	int mark_at[2];
	sem_t gate_entered, gate_release;
	/* the streamed "show routes": pieces served, cursors freed (loop thread writes) */
	int pieces, freed;
};

/* Test handlers: "show version" returns 3 records, "reload" fails on request. */
static int h_records(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct fixture *f = ctx;
	(void)args;

	__atomic_add_fetch(&f->handled, 1, __ATOMIC_RELEASE); /* read by the stream tests */
	for (int i = 0; i < 3; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "index", json_object_new_int(i));
		ctl_reply_record(r, o);
	}
	return CTL_OK;
}

static int h_fail(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct json_object *why;
	(void)ctx;

	if (args && json_object_object_get_ex(args, "why", &why))
		return ctl_reply_error(r, CTL_EFAILED, "failed: %s", json_object_get_string(why));
	return CTL_OK;
}

/* "show stats" {"who": i}: note how many "show version" ran before it. */
static int h_mark(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct fixture *f = ctx;
	struct json_object *who;
	(void)r;

	if (args && json_object_object_get_ex(args, "who", &who))
		__atomic_store_n(&f->mark_at[json_object_get_int(who) & 1], f->handled,
				 __ATOMIC_RELEASE);
	return CTL_OK;
}

/* "show config": hold the loop until the test has written what it needs. */
static int h_gate(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct fixture *f = ctx;
	(void)args;
	(void)r;

	sem_post(&f->gate_entered);
	sem_wait(&f->gate_release);
	return CTL_OK;
}

/* "show routes" {"n": N}: N records {"index": i}, streamed (STREAM_N by default). */
#define STREAM_N 200000

struct count_cursor {
	struct fixture *f;
	int next, n;
};

static int stream_next(void *ctx, void *cursor, struct ctl_reply *r)
{
	struct count_cursor *cur = cursor;
	(void)ctx;

	__atomic_add_fetch(&cur->f->pieces, 1, __ATOMIC_RELEASE);
	while (cur->next < cur->n && !ctl_reply_full(r)) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "index", json_object_new_int(cur->next++));
		if (ctl_reply_record(r, o) < 0)
			return CTL_EFAILED;
	}
	return cur->next < cur->n ? CTL_MORE : CTL_OK;
}

static void stream_free(void *cursor)
{
	struct count_cursor *cur = cursor;

	__atomic_add_fetch(&cur->f->freed, 1, __ATOMIC_RELEASE);
	free(cur);
}

static int h_stream(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct count_cursor *cur = calloc(1, sizeof(*cur));
	struct json_object *n;

	if (!cur)
		return ctl_reply_error(r, CTL_EFAILED, "out of memory");
	cur->f = ctx;
	cur->n = STREAM_N;
	if (args && json_object_object_get_ex(args, "n", &n))
		cur->n = json_object_get_int(n);
	ctl_reply_stream(r, stream_next, cur, stream_free);
	return CTL_OK;
}

static const struct ctl_command cmds[] = {
	{ CTL_SHOW_ROUTES, true, h_stream }, { CTL_SHOW_VERSION, true, h_records },
	{ CTL_RELOAD, false, h_fail },       { CTL_SHOW_STATS, true, h_mark },
	{ CTL_SHOW_CONFIG, true, h_gate },
};
#define N_CMDS (sizeof(cmds) / sizeof(cmds[0]))

static void on_stop(struct evloop *loop, int fd, uint32_t ev, void *arg)
{
	(void)fd;
	(void)ev;
	(void)arg;
	evloop_stop(loop);
}

static void *loop_thread(void *arg)
{
	struct fixture *f = arg;

	evloop_run(f->loop);
	return NULL;
}

static int listen_on(struct ctl_server *srv, const char *path, mode_t mode, gid_t gid,
		     bool read_only, unsigned max_clients)
{
	struct ctl_listen_cfg cfg = { .path = path,
				      .mode = mode,
				      .gid = gid,
				      .read_only = read_only,
				      .max_clients = max_clients };

	return ctl_server_listen(srv, &cfg);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->path, sizeof(f->path), "/tmp/ibgw-test-ctl-%d.sock", getpid());
	snprintf(f->ro_path, sizeof(f->ro_path), "/tmp/ibgw-test-ctl-ro-%d.sock", getpid());
	assert_int_equal(evloop_new(&f->loop), 0);
	assert_int_equal(ctl_server_new(f->loop, cmds, N_CMDS, f, &f->srv), 0);
	assert_int_equal(listen_on(f->srv, f->path, 0600, (gid_t)-1, false, 0), 0);
	assert_int_equal(listen_on(f->srv, f->ro_path, 0666, (gid_t)-1, true, 0), 0);
	assert_int_equal(pipe(f->stop_pipe), 0);
	assert_int_equal(evloop_add_fd(f->loop, f->stop_pipe[0], EPOLLIN, on_stop, f), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_thread, f), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write(f->stop_pipe[1], "x", 1), 1);
	pthread_join(f->thread, NULL);
	ctl_server_free(f->srv);
	evloop_del_fd(f->loop, f->stop_pipe[0]);
	close(f->stop_pipe[0]);
	close(f->stop_pipe[1]);
	evloop_free(f->loop);
	/* ctl_server_free removes its socket files */
	assert_int_equal(access(f->path, F_OK), -1);
	free(f);
	return 0;
}

static void count_record(struct json_object *rec, void *arg)
{
	struct json_object *idx;

	assert_true(json_object_object_get_ex(rec, "index", &idx));
	assert_int_equal(json_object_get_int(idx), *(int *)arg);
	(*(int *)arg)++;
}

static void request_returns_records_then_status(void **state)
{
	struct fixture *f = *state;
	struct ctl_client c;
	const char *err;
	int n = 0;

	assert_int_equal(ctl_client_connect(&c, f->path, 2000), 0);
	assert_int_equal(ctl_client_request(&c, CTL_SHOW_VERSION, NULL, count_record, &n, &err),
			 CTL_OK);
	assert_int_equal(n, 3);
	/* a second request on the same connection works too */
	n = 0;
	assert_int_equal(ctl_client_request(&c, CTL_SHOW_VERSION, NULL, count_record, &n, &err),
			 CTL_OK);
	assert_int_equal(n, 3);
	ctl_client_close(&c);
}

static void handler_error_reaches_client(void **state)
{
	struct fixture *f = *state;
	struct ctl_client c;
	struct json_object *args = json_object_new_object();
	const char *err;

	json_object_object_add(args, "why", json_object_new_string("disk on fire"));
	assert_int_equal(ctl_client_connect(&c, f->path, 2000), 0);
	assert_int_equal(ctl_client_request(&c, CTL_RELOAD, args, NULL, NULL, &err), CTL_EFAILED);
	assert_string_equal(err, "failed: disk on fire");
	json_object_put(args);
	ctl_client_close(&c);
}

static void unknown_type_is_refused(void **state)
{
	struct fixture *f = *state;
	struct ctl_client c;
	const char *err;

	assert_int_equal(ctl_client_connect(&c, f->path, 2000), 0);
	assert_int_equal(ctl_client_request(&c, 777, NULL, NULL, NULL, &err), CTL_EUNKNOWN);
	assert_string_equal(err, "unknown request type 777");
	ctl_client_close(&c);
}

static void read_only_socket_allows_only_show(void **state)
{
	struct fixture *f = *state;
	struct ctl_client c;
	const char *err;
	int n = 0;

	assert_int_equal(ctl_client_connect(&c, f->ro_path, 2000), 0);
	assert_int_equal(ctl_client_request(&c, CTL_SHOW_VERSION, NULL, count_record, &n, &err),
			 CTL_OK);
	assert_int_equal(ctl_client_request(&c, CTL_RELOAD, NULL, NULL, NULL, &err), CTL_EPERM);
	assert_string_equal(err, "this socket is read-only: only show requests are accepted");
	ctl_client_close(&c);
}

/* Send raw bytes; return the END frame's status and error text (or -1 if the
 * connection closed without one). */
static int raw_exchange(const char *path, const void *buf, size_t len, char *error, size_t elen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint8_t hdr[CTL_HDR_LEN];
	struct ctl_hdr h;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	int status = -1;

	strcpy(sun.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 3000) == 1 && recv(fd, hdr, sizeof(hdr), MSG_WAITALL) == sizeof(hdr) &&
	    ctl_hdr_decode(hdr, 4096, &h) == 0 && h.type == CTL_MSG_END) {
		char body[4096] = "";
		struct json_object *o, *v;

		assert_int_equal(recv(fd, body, h.len, MSG_WAITALL), (ssize_t)h.len);
		o = json_tokener_parse(body);
		assert_non_null(o);
		assert_true(json_object_object_get_ex(o, "status", &v));
		status = json_object_get_int(v);
		if (json_object_object_get_ex(o, "error", &v))
			snprintf(error, elen, "%s", json_object_get_string(v));
		json_object_put(o);
	}
	close(fd);
	return status;
}

static size_t frame(uint8_t *buf, uint32_t magic, uint16_t version, uint16_t type, uint32_t len,
		    const char *body)
{
	struct ctl_hdr h = { magic, version, type, len, 42 };

	ctl_hdr_encode(&h, buf);
	memcpy(buf + CTL_HDR_LEN, body, strlen(body));
	return CTL_HDR_LEN + strlen(body);
}

static void malformed_requests_get_precise_errors(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[256];
	char err[256];
	size_t n;
	static const struct {
		const char *body;
		const char *error;
	} bodies[] = {
		{ "[1,2]", "request body is not a JSON object" },
		{ "{\"a\":", "request body is truncated JSON" },
		{ "{} {}", "request body is not valid JSON: unexpected character at offset 3" },
		{ "hello", "request body is not valid JSON: unexpected character at offset 0" },
		{ "{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}",
		  "request body is nested deeper than 16 levels" },
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION,
			  (uint32_t)strlen(bodies[i].body), bodies[i].body);
		err[0] = '\0';
		assert_int_equal(raw_exchange(f->path, buf, n, err, sizeof(err)), CTL_EBADREQ);
		assert_string_equal(err, bodies[i].error);
	}
	n = frame(buf, 0x47455420, CTL_VERSION, 1, 0, ""); /* "GET " */
	assert_int_equal(raw_exchange(f->path, buf, n, err, sizeof(err)), CTL_EBADREQ);
	assert_string_equal(err, "not an ibgw control request (bad magic)");
	n = frame(buf, CTL_MAGIC, 9, 1, 0, "");
	assert_int_equal(raw_exchange(f->path, buf, n, err, sizeof(err)), CTL_EVERSION);
	assert_string_equal(err, "protocol version 9 not supported (this daemon speaks 1)");
	n = frame(buf, CTL_MAGIC, CTL_VERSION, 1, CTL_MAX_REQUEST + 1, "");
	assert_int_equal(raw_exchange(f->path, buf, n, err, sizeof(err)), CTL_EBADREQ);
	assert_string_equal(err, "request of 65537 bytes exceeds the limit of 65536");
	n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_MSG_END, 0, "");
	assert_int_equal(raw_exchange(f->path, buf, n, err, sizeof(err)), CTL_EBADREQ);
	assert_string_equal(err, "reply frame sent as a request");

	/* NUL inside the body */
	n = frame(buf, CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 3, "{}x");
	buf[CTL_HDR_LEN + 2] = '\0';
	assert_int_equal(raw_exchange(f->path, buf, n, err, sizeof(err)), CTL_EBADREQ);
	assert_string_equal(err, "request body contains a NUL byte");

	/* After all that, the server still answers. */
	struct ctl_client c;
	const char *e;
	int cnt = 0;
	assert_int_equal(ctl_client_connect(&c, f->path, 2000), 0);
	assert_int_equal(ctl_client_request(&c, CTL_SHOW_VERSION, NULL, count_record, &cnt, &e),
			 CTL_OK);
	ctl_client_close(&c);
	assert_int_equal(cnt, 3);
}

static void client_limit_refuses_extra_connections(void **state)
{
	struct fixture *f = *state;
	struct ctl_client c[CTL_MAX_CLIENTS + 4];
	struct ctl_client extra;
	const char *err;
	int n = 0;

	for (int i = 0; i < CTL_MAX_CLIENTS; i++)
		assert_int_equal(ctl_client_connect(&c[i], f->path, 2000), 0);
	/* One more connects at the socket level, is told why and closed by the server. */
	assert_int_equal(ctl_client_connect(&extra, f->path, 2000), 0);
	assert_int_equal(ctl_client_request(&extra, CTL_SHOW_VERSION, NULL, NULL, NULL, &err),
			 CTL_EBUSY);
	assert_string_equal(err, "too many control clients (64): try again later");
	ctl_client_close(&extra);
	/* the first clients are still served */
	assert_int_equal(ctl_client_request(&c[0], CTL_SHOW_VERSION, NULL, count_record, &n, &err),
			 CTL_OK);
	for (int i = 0; i < CTL_MAX_CLIENTS; i++)
		ctl_client_close(&c[i]);
}

static void second_server_on_live_socket_is_refused(void **state)
{
	struct fixture *f = *state;
	struct evloop *loop;
	struct ctl_server *srv;

	assert_int_equal(evloop_new(&loop), 0);
	assert_int_equal(ctl_server_new(loop, cmds, N_CMDS, f, &srv), 0);
	assert_int_equal(listen_on(srv, f->path, 0600, (gid_t)-1, false, 0), -EADDRINUSE);
	ctl_server_free(srv);
	evloop_free(loop);
	assert_int_equal(access(f->path, F_OK), 0); /* the live socket was not removed */
}

/* ---- each socket its own mode and limit; requests in turns ----------------------------- */

/* A fixture with the given sockets' settings, its loop running. */
static void start(struct fixture *f, mode_t mode, unsigned max, mode_t ro_mode, unsigned ro_max)
{
	snprintf(f->path, sizeof(f->path), "/tmp/ibgw-test-ctl-%d.sock", getpid());
	snprintf(f->ro_path, sizeof(f->ro_path), "/tmp/ibgw-test-ctl-ro-%d.sock", getpid());
	assert_int_equal(sem_init(&f->gate_entered, 0, 0), 0);
	assert_int_equal(sem_init(&f->gate_release, 0, 0), 0);
	assert_int_equal(evloop_new(&f->loop), 0);
	assert_int_equal(ctl_server_new(f->loop, cmds, N_CMDS, f, &f->srv), 0);
	assert_int_equal(listen_on(f->srv, f->path, mode, (gid_t)-1, false, max), 0);
	assert_int_equal(listen_on(f->srv, f->ro_path, ro_mode, (gid_t)-1, true, ro_max), 0);
	assert_int_equal(pipe(f->stop_pipe), 0);
	assert_int_equal(evloop_add_fd(f->loop, f->stop_pipe[0], EPOLLIN, on_stop, f), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_thread, f), 0);
}

static void stop(struct fixture *f)
{
	void *state = f;

	teardown(&state); /* frees f */
}

static void sockets_have_their_own_mode_and_limit(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ctl_client ro[4], priv[3];
	struct stat st;
	const char *err;
	int n = 0;
	(void)state;

	start(f, 0640, 2, 0604, 3);
	assert_int_equal(stat(f->path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(stat(f->ro_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0604);

	/* The read-only socket at its limit (each client served once, so accepted)... */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ctl_client_connect(&ro[i], f->ro_path, 2000), 0);
		assert_int_equal(
		    ctl_client_request(&ro[i], CTL_SHOW_VERSION, NULL, NULL, NULL, &err), CTL_OK);
	}
	assert_int_equal(ctl_client_connect(&ro[3], f->ro_path, 2000), 0);
	assert_int_equal(ctl_client_request(&ro[3], CTL_SHOW_VERSION, NULL, NULL, NULL, &err),
			 CTL_EBUSY);
	assert_string_equal(err, "too many read-only control clients (3): try again later");
	ctl_client_close(&ro[3]);
	/* ...does not keep a privileged client out: its limit is its own. */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ctl_client_connect(&priv[i], f->path, 2000), 0);
		assert_int_equal(
		    ctl_client_request(&priv[i], CTL_SHOW_VERSION, NULL, count_record, &n, &err),
		    CTL_OK);
		n = 0;
	}
	assert_int_equal(ctl_client_connect(&priv[2], f->path, 2000), 0);
	assert_int_equal(ctl_client_request(&priv[2], CTL_SHOW_VERSION, NULL, NULL, NULL, &err),
			 CTL_EBUSY);
	assert_string_equal(err, "too many control clients (2): try again later");
	ctl_client_close(&priv[2]);
	/* One read-only client leaves: another takes its place. */
	ctl_client_close(&ro[0]);
	for (int tries = 0;; tries++) {
		int rc;

		assert_int_equal(ctl_client_connect(&ro[0], f->ro_path, 2000), 0);
		rc = ctl_client_request(&ro[0], CTL_SHOW_VERSION, NULL, NULL, NULL, &err);
		if (rc == CTL_OK)
			break;
		/* the server may not have seen the close yet */
		assert_int_equal(rc, CTL_EBUSY);
		assert_true(tries < 100);
		ctl_client_close(&ro[0]);
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	for (int i = 0; i < 3; i++)
		ctl_client_close(&ro[i]);
	for (int i = 0; i < 2; i++)
		ctl_client_close(&priv[i]);
	stop(f);
}

/* Read one frame (body NUL-terminated into body[cap]); 0 or -1. */
static int read_frame(int fd, struct ctl_hdr *h, char *body, size_t cap)
{
	uint8_t hdr[CTL_HDR_LEN];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 5000) != 1 || recv(fd, hdr, sizeof(hdr), MSG_WAITALL) != sizeof(hdr) ||
	    ctl_hdr_decode(hdr, CTL_MAX_REPLY, h) < 0 || h->len >= cap ||
	    (h->len && recv(fd, body, h->len, MSG_WAITALL) != (ssize_t)h->len))
		return -1;
	body[h->len] = '\0';
	return 0;
}

/* Read frames up to the END of request seq; its status, or -1. */
static int read_end(int fd, uint32_t seq)
{
	struct ctl_hdr h;
	char body[4096];

	while (read_frame(fd, &h, body, sizeof(body)) == 0) {
		if (h.seq == seq && h.type == CTL_MSG_END)
			return strstr(body, "\"status\":0") ? 0 : 1;
	}
	return -1;
}

static void send_request(int fd, uint16_t type, uint32_t seq, const char *body)
{
	uint8_t buf[256];
	struct ctl_hdr h = { CTL_MAGIC, CTL_VERSION, type, (uint32_t)strlen(body), seq };

	ctl_hdr_encode(&h, buf);
	memcpy(buf + CTL_HDR_LEN, body, strlen(body));
	assert_int_equal(send(fd, buf, CTL_HDR_LEN + strlen(body), MSG_NOSIGNAL),
			 (ssize_t)(CTL_HDR_LEN + strlen(body)));
}

#define FLOOD 4000

/*
 * A read-only client pipelines 4,000 requests in one write while another read-only
 * client and a privileged one send one each. With the loop held (a handler waiting on
 * a semaphore) until all of it is in the sockets, the next turn sees all three at once:
 * the privileged request runs before any of the flood, the read-only one after at most
 * CTL_REQUESTS_PER_TURN of it (all 4,000 would run first without turns). Order, not time.
 */
static void flood_is_served_in_turns(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ctl_client gate, flood, ro, priv;
	uint8_t *buf = malloc((size_t)FLOOD * CTL_HDR_LEN);
	const char *err;
	(void)state;

	start(f, 0600, 0, 0666, 0);
	f->mark_at[0] = f->mark_at[1] = -1;
	assert_int_equal(ctl_client_connect(&gate, f->ro_path, 5000), 0);
	assert_int_equal(ctl_client_connect(&flood, f->ro_path, 5000), 0);
	assert_int_equal(ctl_client_connect(&ro, f->ro_path, 5000), 0);
	assert_int_equal(ctl_client_connect(&priv, f->path, 5000), 0);
	/* One exchange each (refused: no handler runs), so that all are accepted and
	 * watched before the gate closes. */
	assert_int_equal(ctl_client_request(&flood, CTL_RELOAD, NULL, NULL, NULL, &err), CTL_EPERM);
	assert_int_equal(ctl_client_request(&ro, CTL_RELOAD, NULL, NULL, NULL, &err), CTL_EPERM);
	assert_int_equal(ctl_client_request(&priv, 777, NULL, NULL, NULL, &err), CTL_EUNKNOWN);

	send_request(gate.fd, CTL_SHOW_CONFIG, 1, "");
	assert_int_equal(sem_wait(&f->gate_entered), 0);
	for (uint32_t i = 0; i < FLOOD; i++) {
		struct ctl_hdr h = { CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 0, 1000 + i };

		ctl_hdr_encode(&h, buf + (size_t)i * CTL_HDR_LEN);
	}
	assert_int_equal(send(flood.fd, buf, (size_t)FLOOD * CTL_HDR_LEN, MSG_NOSIGNAL),
			 (ssize_t)FLOOD * CTL_HDR_LEN);
	send_request(ro.fd, CTL_SHOW_STATS, 2, "{\"who\":0}");
	send_request(priv.fd, CTL_SHOW_STATS, 3, "{\"who\":1}");
	assert_int_equal(sem_post(&f->gate_release), 0);

	assert_int_equal(read_end(gate.fd, 1), 0);
	assert_int_equal(read_end(priv.fd, 3), 0);
	assert_int_equal(read_end(ro.fd, 2), 0);
	int priv_at = __atomic_load_n(&f->mark_at[1], __ATOMIC_ACQUIRE);
	int ro_at = __atomic_load_n(&f->mark_at[0], __ATOMIC_ACQUIRE);
	print_message("flood requests served before: the privileged one %d, the read-only one %d "
		      "(budget %d)\n",
		      priv_at, ro_at, CTL_REQUESTS_PER_TURN);
	assert_int_equal(priv_at, 0);
	assert_in_range(ro_at, 0, CTL_REQUESTS_PER_TURN);
	/* and the flood is answered in full, in order */
	for (uint32_t i = 0; i < FLOOD; i++)
		assert_int_equal(read_end(flood.fd, 1000 + i), 0);
	ctl_client_close(&gate);
	ctl_client_close(&flood);
	ctl_client_close(&ro);
	ctl_client_close(&priv);
	free(buf);
	stop(f);
}

/* A client that sends its requests and hangs up: what it sent is still carried out. */
static void requests_of_a_closed_client_are_served(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ctl_client c;
	uint8_t *buf = malloc((size_t)100 * CTL_HDR_LEN);
	(void)state;

	start(f, 0600, 0, 0666, 0);
	assert_int_equal(ctl_client_connect(&c, f->ro_path, 5000), 0);
	for (uint32_t i = 0; i < 100; i++) {
		struct ctl_hdr h = { CTL_MAGIC, CTL_VERSION, CTL_SHOW_VERSION, 0, i };

		ctl_hdr_encode(&h, buf + (size_t)i * CTL_HDR_LEN);
	}
	assert_int_equal(send(c.fd, buf, (size_t)100 * CTL_HDR_LEN, MSG_NOSIGNAL),
			 (ssize_t)100 * CTL_HDR_LEN);
	ctl_client_close(&c);
	/* the last one marks the end: the server serves in order */
	assert_int_equal(ctl_client_connect(&c, f->ro_path, 5000), 0);
	for (int tries = 0; tries < 500; tries++) {
		const char *err;
		struct json_object *who = json_object_new_object();

		json_object_object_add(who, "who", json_object_new_int(0));
		f->mark_at[0] = -1;
		assert_int_equal(ctl_client_request(&c, CTL_SHOW_STATS, who, NULL, NULL, &err),
				 CTL_OK);
		json_object_put(who);
		if (__atomic_load_n(&f->mark_at[0], __ATOMIC_ACQUIRE) == 100)
			break;
		nanosleep(&(struct timespec){ 0, 2 * 1000 * 1000 }, NULL);
	}
	assert_int_equal(__atomic_load_n(&f->mark_at[0], __ATOMIC_ACQUIRE), 100);
	ctl_client_close(&c);
	free(buf);
	stop(f);
}

/* ---- streamed replies ------------------------------------------------------------------ */

/* Stop the loop, read the server's counters (no race: the loop is done), free it all. */
static void stop_with_stats(struct fixture *f, struct ctl_server_stats *st)
{
	assert_int_equal(write(f->stop_pipe[1], "x", 1), 1);
	pthread_join(f->thread, NULL);
	ctl_server_get_stats(f->srv, st);
	ctl_server_free(f->srv);
	evloop_del_fd(f->loop, f->stop_pipe[0]);
	close(f->stop_pipe[0]);
	close(f->stop_pipe[1]);
	evloop_free(f->loop);
	free(f);
}

static void wait_for(int *v, int want)
{
	/* up to 10 s: a TSan build on a loaded two-CPU machine took more than 2 */
	for (int tries = 0; tries < 5000 && __atomic_load_n(v, __ATOMIC_ACQUIRE) != want; tries++)
		nanosleep(&(struct timespec){ 0, 2 * 1000 * 1000 }, NULL);
	assert_int_equal(__atomic_load_n(v, __ATOMIC_ACQUIRE), want);
}

/*
 * 200,000 records (some 6 MB) to a client that does not read at first: the server
 * stops producing once the unsent output reaches the low-water mark, so it never holds
 * more than that plus one piece; meanwhile another client is answered (the stream is
 * still under way: its cursor not freed). Then the client reads everything: every
 * record in order, the END last, the cursor freed once.
 */
static void streamed_reply_is_bounded_and_interleaved(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ctl_client a, b;
	struct ctl_server_stats st;
	struct ctl_hdr h;
	char body[4096];
	const char *err;
	int n = 0, pieces = 0;
	(void)state;

	start(f, 0600, 0, 0666, 0);
	assert_int_equal(ctl_client_connect(&a, f->ro_path, 5000), 0);
	assert_int_equal(ctl_client_connect(&b, f->ro_path, 5000), 0);
	send_request(a.fd, CTL_SHOW_ROUTES, 7, "");
	/* the stream fills A's socket and the low-water mark, then waits for A: no new piece
	 * for 200 ms (a thread kept off a loaded CPU can look idle for 20) */
	for (int tries = 0, still = 0; tries < 1000 && still < 10; tries++) {
		int now;

		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
		now = __atomic_load_n(&f->pieces, __ATOMIC_ACQUIRE);
		still = now > 0 && now == pieces ? still + 1 : 0;
		pieces = now;
	}
	assert_true(pieces > 0);
	assert_int_equal(ctl_client_request(&b, CTL_SHOW_VERSION, NULL, count_record, &n, &err),
			 CTL_OK);
	assert_int_equal(n, 3);
	assert_int_equal(__atomic_load_n(&f->freed, __ATOMIC_ACQUIRE), 0); /* still streaming */
	assert_int_equal(__atomic_load_n(&f->pieces, __ATOMIC_ACQUIRE), pieces); /* A waits */

	for (int i = 0; i < STREAM_N; i++) {
		struct json_object *rec, *idx;

		assert_int_equal(read_frame(a.fd, &h, body, sizeof(body)), 0);
		assert_int_equal(h.type, CTL_MSG_RECORD);
		assert_int_equal(h.seq, 7);
		rec = json_tokener_parse(body);
		assert_true(json_object_object_get_ex(rec, "index", &idx));
		assert_int_equal(json_object_get_int(idx), i);
		json_object_put(rec);
	}
	assert_int_equal(read_frame(a.fd, &h, body, sizeof(body)), 0);
	assert_int_equal(h.type, CTL_MSG_END);
	assert_non_null(strstr(body, "\"status\":0"));
	/* the same connection serves the next request (pipelining after a stream works) */
	n = 0;
	assert_int_equal(ctl_client_request(&a, CTL_SHOW_VERSION, NULL, count_record, &n, &err),
			 CTL_OK);
	assert_int_equal(n, 3);
	wait_for(&f->freed, 1);
	pieces = __atomic_load_n(&f->pieces, __ATOMIC_ACQUIRE);
	ctl_client_close(&a);
	ctl_client_close(&b);
	stop_with_stats(f, &st);
	print_message("%d records in %d pieces; the most output held for a client: %llu bytes "
		      "(low water %u, piece %u)\n",
		      STREAM_N, pieces, (unsigned long long)st.out_peak, CTL_STREAM_LOW_WATER,
		      CTL_STREAM_PIECE);
	assert_true(pieces > 10);
	assert_int_equal(st.streams, 1);
	assert_int_equal(st.pieces, (uint64_t)pieces);
	assert_int_equal(st.streams_dropped, 0);
	/* below the low-water mark before each piece, a piece ends past CTL_STREAM_PIECE by
	 * one record at most */
	assert_true(st.out_peak >= CTL_STREAM_PIECE);
	assert_true(st.out_peak < CTL_STREAM_LOW_WATER + CTL_STREAM_PIECE + 64);
}

/* A client that hangs up in the middle of a stream: the walk stops, its cursor is freed,
 * the request it pipelined behind the stream is still carried out (as any request of a
 * client gone), and the server goes on serving. Also a small stream read with
 * ctl_client. */
static void client_gone_mid_stream_frees_the_cursor(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ctl_client a, b;
	struct ctl_server_stats st;
	struct ctl_hdr h;
	char body[4096];
	const char *err;
	int n = 0;
	(void)state;

	start(f, 0600, 0, 0666, 0);
	assert_int_equal(ctl_client_connect(&a, f->ro_path, 5000), 0);
	send_request(a.fd, CTL_SHOW_ROUTES, 1, "");
	send_request(a.fd, CTL_SHOW_VERSION, 2, "");
	for (int i = 0; i < 1000; i++)
		assert_int_equal(read_frame(a.fd, &h, body, sizeof(body)), 0);
	assert_int_equal(__atomic_load_n(&f->handled, __ATOMIC_ACQUIRE), 0); /* behind it */
	ctl_client_close(&a);
	wait_for(&f->freed, 1);
	wait_for(&f->handled, 1);

	assert_int_equal(ctl_client_connect(&b, f->path, 5000), 0);
	struct json_object *args = json_object_new_object();
	json_object_object_add(args, "n", json_object_new_int(5000));
	assert_int_equal(ctl_client_request(&b, CTL_SHOW_ROUTES, args, count_record, &n, &err),
			 CTL_OK);
	json_object_put(args);
	assert_int_equal(n, 5000);
	wait_for(&f->freed, 2);
	ctl_client_close(&b);
	stop_with_stats(f, &st);
	assert_int_equal(st.streams, 2);
	assert_int_equal(st.streams_dropped, 1);
}

/* ---- the privileged socket's peer check ------------------------------------------------ */

/* ctl_reply_collect (the status page's way to the handlers): plain records, a stream
 * driven to its end in pieces, a stream cut at the cap (cursor freed, flagged), an error. */
static void collect_runs_handlers_in_process(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct json_object *out = json_object_new_array(), *args;
	bool cut = true;
	(void)state;

	assert_int_equal(ctl_reply_collect(h_records, f, NULL, 100, out, &cut), CTL_OK);
	assert_false(cut);
	assert_int_equal(json_object_array_length(out), 3);
	json_object_put(out);

	out = json_object_new_array();
	args = json_object_new_object();
	json_object_object_add(args, "n", json_object_new_int(1000));
	assert_int_equal(ctl_reply_collect(h_stream, f, args, 5000, out, &cut), CTL_OK);
	assert_false(cut);
	assert_int_equal(json_object_array_length(out), 1000);
	for (size_t i = 0; i < 1000; i++) {
		struct json_object *idx;

		assert_true(
		    json_object_object_get_ex(json_object_array_get_idx(out, i), "index", &idx));
		assert_int_equal(json_object_get_int(idx), (int)i);
	}
	/* Pieces of CTL_COLLECT_PIECE records: the walk gives the loop back between them
	 * for a client, here it simply goes on. */
	assert_int_equal(f->pieces, (1000 + CTL_COLLECT_PIECE - 1) / CTL_COLLECT_PIECE);
	assert_int_equal(f->freed, 1);
	json_object_put(out);

	out = json_object_new_array();
	f->pieces = 0;
	assert_int_equal(ctl_reply_collect(h_stream, f, args, 300, out, &cut), CTL_OK);
	assert_true(cut);
	assert_int_equal(json_object_array_length(out), 300);
	assert_int_equal(f->pieces, 2); /* stopped in the piece that passed the cap */
	assert_int_equal(f->freed, 2);
	json_object_put(out);
	json_object_put(args);

	out = json_object_new_array();
	args = json_object_new_object();
	json_object_object_add(args, "why", json_object_new_string("no"));
	assert_int_equal(ctl_reply_collect(h_fail, f, args, 10, out, &cut), CTL_EFAILED);
	assert_int_equal(json_object_array_length(out), 0);
	json_object_put(out);
	json_object_put(args);
	free(f);
}

static void peer_rule(void **state)
{
	gid_t groups[] = { 100, 4242 };
	struct ctl_peer root = { .uid = 0, .gid = 0 };
	struct ctl_peer self = { .uid = 1000, .gid = 1000 };
	struct ctl_peer other = { .uid = 65534, .gid = 65534 };
	struct ctl_peer primary = { .uid = 65534, .gid = 4242 };
	struct ctl_peer supp = { .uid = 65534, .gid = 65534, .groups = groups, .n_groups = 2 };
	(void)state;

	assert_true(ctl_peer_allowed(&root, 1000, (gid_t)-1));
	assert_true(ctl_peer_allowed(&self, 1000, (gid_t)-1));
	assert_false(ctl_peer_allowed(&other, 1000, (gid_t)-1));
	assert_false(ctl_peer_allowed(&other, 1000, 4242));
	assert_true(ctl_peer_allowed(&primary, 1000, 4242));
	assert_true(ctl_peer_allowed(&supp, 1000, 4242));
	assert_false(ctl_peer_allowed(&supp, 1000, (gid_t)-1)); /* no group rule: groups count
								   for nothing */
	assert_false(ctl_peer_allowed(&supp, 1000, 4243));
}

#define PEER_GROUP 424242 /* a gid no test machine names */

/*
 * In a forked child: become uid 65534 with the given groups, then ask the privileged
 * socket (and the read-only one) and check the answers. Exit status 0 when every
 * answer was the expected one, else the number of the step that was not (cmocka's
 * asserts do not work across fork).
 */
static void peer_child(const char *path, const char *ro_path, gid_t gid, const gid_t *groups,
		       size_t n, bool allowed)
{
	struct ctl_client c;
	const char *err;
	int st;

	if (setgroups(n, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(65534, 65534, 65534) < 0)
		_exit(10);
	if (ctl_client_connect(&c, path, 5000) < 0)
		_exit(11);
	st = ctl_client_request(&c, CTL_SHOW_VERSION, NULL, NULL, NULL, &err);
	if (allowed) {
		_exit(st == CTL_OK ? 0 : 12);
	}
	if (st != CTL_EPERM || strcmp(err, "uid 65534 is not allowed on the privileged socket "
					   "(use the read-only socket or join group 424242)")) {
		fprintf(stderr, "peer child: status %d: %s\n", st, err);
		_exit(13);
	}
	/* Every request, whatever it is, and the connection stays usable for the answer. */
	if (ctl_client_request(&c, CTL_RELOAD, NULL, NULL, NULL, &err) != CTL_EPERM)
		_exit(14);
	ctl_client_close(&c);
	if (ctl_client_connect(&c, ro_path, 5000) < 0 ||
	    ctl_client_request(&c, CTL_SHOW_VERSION, NULL, NULL, NULL, &err) != CTL_OK)
		_exit(15);
	ctl_client_close(&c);
	_exit(0);
}

/* Wait for pid at most 10 s; its exit status, or -1 (killed after the wait). */
static int wait_child(pid_t pid)
{
	for (int i = 0; i < 1000; i++) {
		int wst;

		if (waitpid(pid, &wst, WNOHANG) == pid)
			return WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/*
 * End to end: clients running as another user on a privileged socket anyone may open
 * (0666). The children are forked before the server's thread starts (fork and threads
 * do not mix); their requests wait in the socket until it runs.
 */
static void privileged_socket_checks_the_peer(void **state)
{
	struct fixture f = { 0 };
	struct ctl_server_stats st;
	gid_t supp[] = { 100, PEER_GROUP };
	pid_t kids[3];
	(void)state;

	if (geteuid() != 0) {
		print_message("the peer check runs clients as uid 65534: needs root\n");
		skip();
	}
	snprintf(f.path, sizeof(f.path), "/tmp/ibgw-test-peer-%d.sock", getpid());
	snprintf(f.ro_path, sizeof(f.ro_path), "/tmp/ibgw-test-peer-ro-%d.sock", getpid());
	assert_int_equal(evloop_new(&f.loop), 0);
	assert_int_equal(ctl_server_new(f.loop, cmds, N_CMDS, &f, &f.srv), 0);
	assert_int_equal(listen_on(f.srv, f.path, 0666, PEER_GROUP, false, 0), 0);
	assert_int_equal(listen_on(f.srv, f.ro_path, 0666, PEER_GROUP, true, 0), 0);
	for (int i = 0; i < 3; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0 && i == 0)
			peer_child(f.path, f.ro_path, 65534, NULL, 0, false);
		if (kids[i] == 0 && i == 1)
			peer_child(f.path, f.ro_path, 65534, supp, 2, true);
		if (kids[i] == 0 && i == 2)
			peer_child(f.path, f.ro_path, PEER_GROUP, NULL, 0, true);
	}
	assert_int_equal(pipe(f.stop_pipe), 0);
	assert_int_equal(evloop_add_fd(f.loop, f.stop_pipe[0], EPOLLIN, on_stop, &f), 0);
	assert_int_equal(pthread_create(&f.thread, NULL, loop_thread, &f), 0);
	int codes[3];
	for (int i = 0; i < 3; i++)
		codes[i] = wait_child(kids[i]);
	assert_int_equal(write(f.stop_pipe[1], "x", 1), 1);
	pthread_join(f.thread, NULL);
	ctl_server_get_stats(f.srv, &st); /* the loop has stopped: no race */
	ctl_server_free(f.srv);
	evloop_del_fd(f.loop, f.stop_pipe[0]);
	close(f.stop_pipe[0]);
	close(f.stop_pipe[1]);
	evloop_free(f.loop);
	assert_int_equal(codes[0], 0); /* refused, on every request, with the hint */
	assert_int_equal(codes[1], 0); /* a supplementary member of the socket's group */
	assert_int_equal(codes[2], 0); /* a primary member */
	assert_int_equal(st.denied, 2);
	assert_int_equal(st.accepted, 4);
	assert_int_equal(f.handled, 3); /* the refused requests never reached a handler */
}

/* ---- request arguments: gwctl's words, JSON, pasted show lines ------------------------- */

/* Split a line into words (at most 64) in place. */
static int split(char *line, char **argv)
{
	int n = 0;

	for (char *w = strtok(line, " \t"); w && n < 64; w = strtok(NULL, " \t"))
		argv[n++] = w;
	return n;
}

static int route_words(const char *text, bool add, struct ctl_route *r, char *why)
{
	char buf[2048], *argv[64];

	snprintf(buf, sizeof(buf), "%s", text);
	return ctl_route_parse_argv(split(buf, argv), argv, add, r, why);
}

static void route_text(const char *in, const char *canonical)
{
	struct ctl_route r, back;
	char why[CTL_ARGS_WHY_LEN] = "", out[CTL_ROUTE_STRLEN], why2[CTL_ARGS_WHY_LEN];
	struct json_object *j;

	if (route_words(in, true, &r, why) < 0)
		fail_msg("'%s' refused: %s", in, why);
	assert_string_equal(ctl_route_format(&r, out, sizeof(out)), canonical);
	/* The JSON on the wire decodes to the same route, and so does the text form. */
	j = ctl_route_to_json(&r);
	assert_int_equal(ctl_route_from_json(j, true, &back, why2), 0);
	json_object_put(j);
	assert_string_equal(ctl_route_format(&back, out, sizeof(out)), canonical);
	assert_int_equal(route_words(canonical, true, &back, why2), 0);
	assert_string_equal(ctl_route_format(&back, out, sizeof(out)), canonical);
}

static void route_refused(const char *in, bool add, const char *why_expected)
{
	struct ctl_route r;
	char why[CTL_ARGS_WHY_LEN] = "";

	if (route_words(in, add, &r, why) == 0)
		fail_msg("'%s' accepted", in);
	assert_string_equal(why, why_expected);
}

static void route_words_parse(void **state)
{
	(void)state;
	route_text("10.1.0.0/16 via 10.0.0.1", "10.1.0.0/16 via 10.0.0.1");
	route_text("10.1.0.0/16 tenant blue via 10.0.0.1 dev eth2",
		   "10.1.0.0/16 via 10.0.0.1 dev eth2 tenant blue");
	route_text("10.1.0.0/16 via 10.0.0.1 tenant default", "10.1.0.0/16 via 10.0.0.1");
	route_text("10.1.0.0/16 v 10.0.0.1 d eth0 m 10",
		   "10.1.0.0/16 via 10.0.0.1 dev eth0 metric 10");
	route_text("10.1.0.0/16 via 10.0.0.1 10.0.0.2 dev ib0",
		   "10.1.0.0/16 via 10.0.0.1 10.0.0.2 dev ib0");
	route_text("10.1.0.0/16 via 10.0.0.1 via 10.0.0.2", "10.1.0.0/16 via 10.0.0.1 10.0.0.2");
	route_text("10.1.0.0/16 dev eth0", "10.1.0.0/16 dev eth0");
	route_text("blackhole 10.66.0.0/16 metric 7", "blackhole 10.66.0.0/16 metric 7");
	route_text("fd00:1::/64 via fd00::1 metric 4294967295",
		   "fd00:1::/64 via fd00::1 metric 4294967295");
	route_text("default via 10.0.0.1", "0.0.0.0/0 via 10.0.0.1");
	route_text("default via fe80::1 dev ib0", "::/0 via fe80::1 dev ib0");
	route_text("10.1.0.0/16 nexthop via 10.0.0.1 dev ib0 nexthop via 10.0.0.2 dev eth0",
		   "10.1.0.0/16 nexthop via 10.0.0.1 dev ib0 nexthop via 10.0.0.2 dev eth0");
	route_text("10.1.0.0/16 nexthop via 10.0.0.1 dev ib0 nexthop via 10.0.0.2 dev ib0",
		   "10.1.0.0/16 via 10.0.0.1 10.0.0.2 dev ib0");
}

/* What `gwctl show routes` prints, joined into one line (an ECMP route's nexthop lines
 * follow its first), goes back into `gwctl route add`. */
static void show_route_lines_paste_back(void **state)
{
	(void)state;
	route_text("10.10.0.128/25 dev eth0 proto static scope link", "10.10.0.128/25 dev eth0");
	route_text("10.100.0.0/16 proto static\tnexthop via 10.10.0.250 dev ib0 weight 1\t"
		   "nexthop via 10.10.0.251 dev ib0 weight 1",
		   "10.100.0.0/16 via 10.10.0.250 10.10.0.251 dev ib0");
	route_text("10.9.0.0/16 via 192.168.50.9 proto static unresolved inactive",
		   "10.9.0.0/16 via 192.168.50.9");
	route_text("10.2.0.0/16 proto static inactive nexthop via 192.168.50.3 weight 1 "
		   "unresolved nexthop via 192.168.50.4 weight 1 unresolved",
		   "10.2.0.0/16 via 192.168.50.3 192.168.50.4");
	route_text("10.1.0.0/16 via 10.10.0.9 dev ib0 proto static metric 10",
		   "10.1.0.0/16 via 10.10.0.9 dev ib0 metric 10");
	route_text("blackhole 10.66.0.0/16 proto static", "blackhole 10.66.0.0/16");
	/* The daemon's own routes are refused with the reason. */
	route_refused("10.10.0.0/24 dev ib0 proto kernel scope link src 10.10.0.1", true,
		      "proto kernel: only static routes can be added or deleted (kernel and "
		      "learned routes are the gateway's own)");
	route_refused("local 10.10.0.1 dev ib0 proto kernel scope host src 10.10.0.1", true,
		      "local routes come from the interfaces' addresses; they cannot be added "
		      "or deleted");
}

static void route_words_refused(void **state)
{
	char many[1024] = "10.1.0.0/16 via";
	(void)state;

	route_refused("10.1.0.1/16 via 10.0.0.1", true,
		      "'10.1.0.1/16' has host bits set (the prefix is 10.1.0.0/16)");
	route_refused("10.1.0.0/33 via 10.0.0.1", true,
		      "'10.1.0.0/33' is not a prefix (10.1.0.0/16, fd00::/64)");
	route_refused("10.1.0.0/16", true,
		      "a route needs a gateway (via), a dev or type blackhole");
	route_refused("", true, "the route's PREFIX is missing");
	route_refused("10.1.0.0/16 via", true, "via needs a value");
	route_refused("10.1.0.0/16 via eth0", true, "gateway 'eth0' is not an IP address");
	route_refused("10.1.0.0/16 via fd00::1", true,
		      "gateway fd00::1 is IPv6 but 10.1.0.0/16 is IPv4");
	route_refused("10.1.0.0/16 via 10.0.0.1 10.0.0.1", true,
		      "next hop via 10.0.0.1 is given twice");
	route_refused("10.1.0.0/16 via 224.0.0.1", true,
		      "gateway 224.0.0.1 is not a unicast address");
	route_refused("10.1.0.0/16 via 10.0.0.1 metric 4294967296", true,
		      "metric '4294967296' is not a number 0..4294967295");
	route_refused("10.1.0.0/16 via 10.0.0.1 metric -1", true,
		      "metric '-1' is not a number 0..4294967295");
	route_refused("10.1.0.0/16 via 10.0.0.1 metric 1 metric 2", true, "metric is given twice");
	route_refused("10.1.0.0/16 via 10.0.0.1 tenant a tenant b", true, "tenant is given twice");
	route_refused("10.1.0.0/16 via 10.0.0.1 tenant", true, "tenant needs a value");
	route_refused("10.1.0.0/16 via 10.0.0.1 s 1", true,
		      "ambiguous word 's'; expected via, dev, metric, nexthop, weight, proto, "
		      "scope, unresolved, inactive or tenant");
	route_refused("10.1.0.0/16 via 10.0.0.1 color red", true,
		      "unknown word 'color'; expected via, dev, metric, nexthop, weight, proto, "
		      "scope, unresolved, inactive or tenant");
	route_refused("10.1.0.0/16 nexthop via 10.0.0.1 weight 3", true,
		      "weight 3: next hops share traffic equally here (weight 1)");
	route_refused("10.1.0.0/16 via 10.0.0.1 nexthop via 10.0.0.2", true,
		      "use either via or nexthop groups, not both");
	route_refused("10.1.0.0/16 nexthop dev ib0", true, "nexthop 1 needs via ADDR");
	route_refused("blackhole 10.1.0.0/16 via 10.0.0.1", true,
		      "a blackhole route takes no gateway and no dev");
	route_refused(
	    "default dev eth0", true,
	    "default needs a gateway to tell IPv4 from IPv6 (or write 0.0.0.0/0 or ::/0)");
	route_refused("10.1.0.0/16 dev averyveryverylonginterfacename0123", true,
		      "dev 'averyveryverylonginterfacename0123' is longer than 31 characters");
	for (int i = 1; i <= CTL_ROUTE_MAX_NH + 1; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), " 10.0.0.%d", i);
	route_refused(many, true, "a route has at most 16 next hops (17 given)");
	/* A del names the route; next hops are optional. */
	struct ctl_route r;
	char why[CTL_ARGS_WHY_LEN];
	assert_int_equal(route_words("10.1.0.0/16 metric 5", false, &r, why), 0);
	assert_int_equal(r.metric, 5);
	assert_int_equal(r.n_nh, 0);
}

static void route_json_refused(const char *json, bool add, const char *why_expected)
{
	struct json_object *o = json_tokener_parse(json);
	struct ctl_route r;
	char why[CTL_ARGS_WHY_LEN] = "";

	assert_non_null(o);
	if (ctl_route_from_json(o, add, &r, why) == 0)
		fail_msg("%s accepted", json);
	json_object_put(o);
	assert_string_equal(why, why_expected);
}

static void route_json_strict(void **state)
{
	struct ctl_route r;
	char why[CTL_ARGS_WHY_LEN];
	(void)state;

	assert_int_equal(ctl_route_from_json(NULL, true, &r, why), -EINVAL);
	assert_string_equal(why, "route add needs \"dst\"");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"gateway\":\"10.0.0.1\",\"via\":\"x\"}", true,
			   "route add takes only \"dst\", \"type\", \"gateway\", \"dev\", "
			   "\"metric\", \"nexthops\" and \"tenant\"; unknown key \"via\"");
	route_json_refused("{\"dst\":16,\"gateway\":\"10.0.0.1\"}", true,
			   "\"dst\" must be a string");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"gateway\":\"10.0.0.1\",\"metric\":\"5\"}",
			   true, "\"metric\" must be an integer 0..4294967295");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"gateway\":\"10.0.0.1\",\"metric\":1.5}",
			   true, "\"metric\" must be an integer 0..4294967295");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"gateway\":\"10.0.0.1\",\"metric\":-1}", true,
			   "\"metric\" must be an integer 0..4294967295");
	route_json_refused(
	    "{\"dst\":\"10.1.0.0/16\",\"gateway\":\"10.0.0.1\",\"metric\":4294967296}", true,
	    "\"metric\" must be an integer 0..4294967295");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"type\":\"local\"}", true,
			   "\"type\" must be \"unicast\" or \"blackhole\", not \"local\"");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"nexthops\":{}}", true,
			   "\"nexthops\" must be a non-empty array of objects");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"nexthops\":[]}", true,
			   "\"nexthops\" must be a non-empty array of objects");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"nexthops\":[{\"dev\":\"eth0\"}]}", true,
			   "a next hop in \"nexthops\" needs \"gateway\"");
	route_json_refused(
	    "{\"dst\":\"10.1.0.0/16\",\"nexthops\":[{\"gateway\":\"10.0.0.1\",\"weight\":1}]}",
	    true, "a next hop takes only \"gateway\" and \"dev\"; unknown key \"weight\"");
	route_json_refused(
	    "{\"dst\":\"10.1.0.0/16\",\"dev\":\"eth0\",\"nexthops\":[{\"gateway\":\"10.0.0.1\"}]}",
	    true, "give either \"gateway\"/\"dev\" or \"nexthops\", not both");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"dev\":\"\"}", true,
			   "dev needs an interface name");
	route_json_refused("{\"dst\":\"10.1.0.0/16\",\"dev\":\"a b\"}", true,
			   "dev name contains a blank or control character");
	char big[2048] = "{\"dst\":\"10.1.0.0/16\",\"nexthops\":[";
	for (int i = 1; i <= 17; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big),
			 "%s{\"gateway\":\"10.0.0.%d\"}", i > 1 ? "," : "", i);
	strcat(big, "]}");
	route_json_refused(big, true, "a route has at most 16 next hops (17 given)");
}

static void lladdr_parse_and_format(void **state)
{
	uint8_t a[CTL_LLADDR_MAX];
	char why[CTL_ARGS_WHY_LEN], buf[3 * CTL_LLADDR_MAX];
	const char *ib = "80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:00:0b";
	(void)state;

	assert_int_equal(ctl_lladdr_parse("02:1B:00:00:00:08", a, why), 6);
	assert_string_equal(ctl_lladdr_format(a, 6, buf, sizeof(buf)), "02:1b:00:00:00:08");
	assert_int_equal(ctl_lladdr_parse(ib, a, why), 20);
	assert_string_equal(ctl_lladdr_format(a, 20, buf, sizeof(buf)), ib);
	assert_int_equal(ctl_lladdr_parse("02:1b:00:00:00", a, why), -EMSGSIZE);
	assert_string_equal(why, "lladdr has 5 octets: a MAC has 6, an IPoIB hardware address 20");
	assert_int_equal(ctl_lladdr_parse("80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:"
					  "00:0b:ff",
					  a, why),
			 -EMSGSIZE);
	static const char *bad[] = { "",
				     "2:1b:00:00:00:08",
				     "02-1b-00-00-00-08",
				     "02:1b:00:00:00:08:",
				     "0g:1b:00:00:00:08",
				     "021b00000008",
				     ":02:1b:00:00:00:08" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ctl_lladdr_parse(bad[i], a, why), -EINVAL);
		assert_non_null(strstr(why, "is not octets as two hex digits joined by colons"));
	}
}

static int neigh_words(const char *text, bool add, struct ctl_neigh *n, char *why)
{
	char buf[1024], *argv[64];

	snprintf(buf, sizeof(buf), "%s", text);
	return ctl_neigh_parse_argv(split(buf, argv), argv, add, n, why);
}

static void neigh_words_and_show_lines(void **state)
{
	struct ctl_neigh n, back;
	struct json_object *j;
	char why[CTL_ARGS_WHY_LEN] = "", buf[3 * CTL_LLADDR_MAX];
	(void)state;

	/* `gwctl show neighbours` lines, as printed, are valid adds. */
	assert_int_equal(
	    neigh_words("10.20.0.11 dev eth0 lladdr 02:1b:00:00:00:08 REACHABLE", true, &n, why),
	    0);
	assert_string_equal(n.dev, "eth0");
	assert_int_equal(n.lladdr_len, 6);
	assert_int_equal(
	    neigh_words("10.10.0.13 dev ib0 lladdr "
			"00:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:00:0b REACHABLE "
			"path dlid 0x7 sl 0 mtu 2048 grh mode ud",
			true, &n, why),
	    0);
	assert_int_equal(n.lladdr_len, 20);
	assert_string_equal(ctl_lladdr_format(n.lladdr, 20, buf, sizeof(buf)),
			    "00:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:00:0b");
	/* and the wire form decodes to the same */
	j = ctl_neigh_to_json(&n);
	assert_int_equal(ctl_neigh_from_json(j, true, &back, why), 0);
	json_object_put(j);
	assert_memory_equal(&n, &back, sizeof(n));
	assert_int_equal(neigh_words("fd00:50::11 l 02:1b:00:00:00:08 d eth0", true, &n, why), 0);
	assert_int_equal(neigh_words("10.20.0.11 dev eth0", false, &n, why), 0);

	assert_int_equal(neigh_words("10.20.0.11 dev eth0", true, &n, why), -EINVAL);
	assert_string_equal(why, "a neighbour add needs lladdr LLADDR");
	assert_int_equal(neigh_words("10.20.0.11 lladdr 02:1b:00:00:00:08", true, &n, why),
			 -EINVAL);
	assert_string_equal(why, "a neighbour needs dev NAME");
	assert_int_equal(neigh_words("224.0.0.5 dev eth0 lladdr 02:1b:00:00:00:08", true, &n, why),
			 -EINVAL);
	assert_string_equal(why, "224.0.0.5 is not a unicast address");
	assert_int_equal(neigh_words("10.20.0.11 dev eth0 dev eth1", false, &n, why), -EINVAL);
	assert_string_equal(why, "dev is given twice");
	assert_int_equal(neigh_words("10.20.0.11 dev eth0 nud permanent", false, &n, why), -EINVAL);
	assert_string_equal(why, "unknown word 'nud'; expected dev, lladdr, path or a state");
	assert_int_equal(neigh_words("10.20.0.300 dev eth0", false, &n, why), -EINVAL);
	assert_string_equal(why, "neighbour '10.20.0.300' is not an IP address");
}

static void neigh_json_strict(void **state)
{
	static const struct {
		const char *json, *why;
	} cases[] = {
		{ "{\"dst\":\"10.0.0.1\",\"dev\":\"eth0\"}", "neigh add needs \"lladdr\"" },
		{ "{\"dst\":\"10.0.0.1\",\"dev\":\"eth0\",\"lladdr\":\"02:00:00:00:00:01\","
		  "\"state\":\"REACHABLE\"}",
		  "neigh add takes only \"dst\", \"lladdr\" and \"dev\"; unknown key \"state\"" },
		{ "{\"dst\":\"10.0.0.1\",\"dev\":\"eth0\",\"lladdr\":[2,0,0,0,0,1]}",
		  "\"lladdr\" must be a string" },
		{ "{\"dst\":\"10.0.0.1\",\"dev\":\"eth0\",\"lladdr\":\"02:00:00:00:01\"}",
		  "lladdr has 5 octets: a MAC has 6, an IPoIB hardware address 20" },
		{ "{\"dst\":\"0.0.0.0\",\"dev\":\"eth0\",\"lladdr\":\"02:00:00:00:00:01\"}",
		  "0.0.0.0 is not a unicast address" },
		{ "{\"lladdr\":\"02:00:00:00:00:01\",\"dev\":\"eth0\"}",
		  "neigh add needs \"dst\"" },
	};
	struct ctl_neigh n;
	char why[CTL_ARGS_WHY_LEN];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json_object *o = json_tokener_parse(cases[i].json);

		assert_non_null(o);
		assert_int_equal(ctl_neigh_from_json(o, true, &n, why), -EINVAL);
		assert_string_equal(why, cases[i].why);
		json_object_put(o);
	}
}

static void flush_args(void **state)
{
	struct ctl_neigh_flush f, fb;
	struct ctl_path_flush p, pb;
	struct json_object *j;
	char why[CTL_ARGS_WHY_LEN], buf[256], *argv[8];
	(void)state;

	snprintf(buf, sizeof(buf), "dev eth0 to 10.20.0.0/24");
	assert_int_equal(ctl_neigh_flush_parse_argv(split(buf, argv), argv, &f, why), 0);
	assert_true(f.has_to);
	j = ctl_neigh_flush_to_json(&f);
	assert_int_equal(ctl_neigh_flush_from_json(j, &fb, why), 0);
	json_object_put(j);
	assert_memory_equal(&f, &fb, sizeof(f));
	snprintf(buf, sizeof(buf), "to 10.20.0.0/24");
	assert_int_equal(ctl_neigh_flush_parse_argv(split(buf, argv), argv, &f, why), -EINVAL);
	assert_string_equal(why, "neigh flush needs dev NAME");
	snprintf(buf, sizeof(buf), "dev eth0 to 10.20.0.1/24");
	assert_int_equal(ctl_neigh_flush_parse_argv(split(buf, argv), argv, &f, why), -EINVAL);
	assert_string_equal(why, "'10.20.0.1/24' has host bits set (the prefix is 10.20.0.0/24)");

	assert_int_equal(ctl_path_flush_parse_argv(0, argv, &p, why), 0);
	assert_false(p.has_gid);
	snprintf(buf, sizeof(buf), "fe80::2:c903:a1:b");
	assert_int_equal(ctl_path_flush_parse_argv(split(buf, argv), argv, &p, why), 0);
	assert_true(p.has_gid);
	j = ctl_path_flush_to_json(&p);
	assert_int_equal(ctl_path_flush_from_json(j, &pb, why), 0);
	json_object_put(j);
	assert_memory_equal(&p, &pb, sizeof(p));
	snprintf(buf, sizeof(buf), "fe80::zz");
	assert_int_equal(ctl_path_flush_parse_argv(split(buf, argv), argv, &p, why), -EINVAL);
	assert_non_null(strstr(why, "'fe80::zz' is not a GID"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(request_returns_records_then_status, setup,
						teardown),
		cmocka_unit_test_setup_teardown(handler_error_reaches_client, setup, teardown),
		cmocka_unit_test_setup_teardown(unknown_type_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(read_only_socket_allows_only_show, setup, teardown),
		cmocka_unit_test_setup_teardown(malformed_requests_get_precise_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(client_limit_refuses_extra_connections, setup,
						teardown),
		cmocka_unit_test_setup_teardown(second_server_on_live_socket_is_refused, setup,
						teardown),
		cmocka_unit_test(sockets_have_their_own_mode_and_limit),
		cmocka_unit_test(flood_is_served_in_turns),
		cmocka_unit_test(requests_of_a_closed_client_are_served),
		cmocka_unit_test(streamed_reply_is_bounded_and_interleaved),
		cmocka_unit_test(client_gone_mid_stream_frees_the_cursor),
		cmocka_unit_test(collect_runs_handlers_in_process),
		cmocka_unit_test(peer_rule),
		cmocka_unit_test(privileged_socket_checks_the_peer),
		cmocka_unit_test(route_words_parse),
		cmocka_unit_test(show_route_lines_paste_back),
		cmocka_unit_test(route_words_refused),
		cmocka_unit_test(route_json_strict),
		cmocka_unit_test(lladdr_parse_and_format),
		cmocka_unit_test(neigh_words_and_show_lines),
		cmocka_unit_test(neigh_json_strict),
		cmocka_unit_test(flush_args),
	};

	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
