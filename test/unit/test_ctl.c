/*
 * Control protocol, end to end over real unix sockets: the server runs its event loop
 * in a thread, requests come from ctl_client or from raw writes of malformed frames.
 * Every malformed request must get an error reply (or a closed connection when it is
 * not our protocol at all), and the server must keep answering afterwards.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lib/evloop.h"
#include "mgmt/ctl_client.h"
#include "mgmt/ctl_server.h"

struct fixture {
	struct evloop *loop;
	struct ctl_server *srv;
	pthread_t thread;
	int stop_pipe[2];
	char path[64], ro_path[64];
	int handled;
};

/* Test handlers: "show version" returns 3 records, "reload" fails on request. */
static int h_records(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct fixture *f = ctx;
	(void)args;

	f->handled++;
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

static const struct ctl_command cmds[] = {
	{ CTL_SHOW_VERSION, true, h_records },
	{ CTL_RELOAD, false, h_fail },
};

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

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->path, sizeof(f->path), "/tmp/ibgw-test-ctl-%d.sock", getpid());
	snprintf(f->ro_path, sizeof(f->ro_path), "/tmp/ibgw-test-ctl-ro-%d.sock", getpid());
	assert_int_equal(evloop_new(&f->loop), 0);
	assert_int_equal(ctl_server_new(f->loop, cmds, 2, f, &f->srv), 0);
	assert_int_equal(ctl_server_listen(f->srv, f->path, 0600, (gid_t)-1, false), 0);
	assert_int_equal(ctl_server_listen(f->srv, f->ro_path, 0666, (gid_t)-1, true), 0);
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
	/* One more connects at the socket level but is closed by the server. */
	assert_int_equal(ctl_client_connect(&extra, f->path, 2000), 0);
	assert_true(ctl_client_request(&extra, CTL_SHOW_VERSION, NULL, NULL, NULL, &err) < 0);
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
	assert_int_equal(ctl_server_new(loop, cmds, 2, f, &srv), 0);
	assert_int_equal(ctl_server_listen(srv, f->path, 0600, (gid_t)-1, false), -EADDRINUSE);
	ctl_server_free(srv);
	evloop_free(loop);
	assert_int_equal(access(f->path, F_OK), 0); /* the live socket was not removed */
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
	};

	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
