/*
 * The metrics endpoint over a real TCP socket on 127.0.0.1: the server's loop runs in a
 * thread (as the control loop does in ibgwd), requests are raw bytes written by the test,
 * answers read until the server closes. Checks the answers an operator or an attacker
 * gets (200 with the exposition Content-Type, HEAD, 404, 405 with Allow, 400, 431, 500
 * when rendering fails), the refusals of metrics_http_new (bad address, port in use),
 * the label escaping, and the status page: off by default (404), on: its built-in files
 * with their headers (CSP, nosniff, no framing) and the JSON the callback writes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/evloop.h"
#include "mgmt/metrics_http.h"

#define RESP_MAX 65536

struct fixture {
	struct evloop *loop;
	struct metrics_http *m;
	pthread_t thread;
	int stop_pipe[2];
	uint16_t port;
	char listen[32];
	atomic_int fail_render; /* set by the test thread, read by the loop's */
};

static int render(void *ctx, FILE *out)
{
	struct fixture *f = ctx;

	if (atomic_load(&f->fail_render))
		return -EIO;
	metrics_single(out, "test_up", "gauge", "Always 1.", 1);
	return 0;
}

/* The status page's JSON: a fixed object whose text is HTML, as a gateway name may be. */
static int render_status(void *ctx, FILE *out)
{
	struct fixture *f = ctx;

	if (atomic_load(&f->fail_render))
		return -EIO;
	fputs("{\"name\":\"<b>gw</b>\"}", out);
	return 0;
}

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

/* A port nobody listens on now (the kernel's pick for port 0). */
static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* The server, with the status page on (status) or off, before its loop's thread starts
 * (metrics_http_set_status belongs to the loop's thread). */
static int setup_with(void **state, bool status)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->port = free_port();
	snprintf(f->listen, sizeof(f->listen), "127.0.0.1:%u", f->port);
	assert_int_equal(evloop_new(&f->loop), 0);
	assert_int_equal(metrics_http_new(f->loop, f->listen, render, f, &f->m), 0);
	assert_string_equal(metrics_http_listen(f->m), f->listen);
	if (status) { /* on, off and on again: the last call counts */
		metrics_http_set_status(f->m, render_status);
		metrics_http_set_status(f->m, NULL);
		metrics_http_set_status(f->m, render_status);
	}
	assert_int_equal(pipe(f->stop_pipe), 0);
	assert_int_equal(evloop_add_fd(f->loop, f->stop_pipe[0], EPOLLIN, on_stop, f), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_thread, f), 0);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, false);
}

static int setup_status(void **state)
{
	return setup_with(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write(f->stop_pipe[1], "x", 1), 1);
	pthread_join(f->thread, NULL);
	metrics_http_free(f->m);
	evloop_del_fd(f->loop, f->stop_pipe[0]);
	close(f->stop_pipe[0]);
	close(f->stop_pipe[1]);
	evloop_free(f->loop);
	free(f);
	return 0;
}

/* Send req (len bytes), read the answer until the server closes (5 s at most). */
static void exchange(const struct fixture *f, const char *req, size_t len, char *resp)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(f->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	size_t got = 0;

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);

		if (n <= 0)
			break; /* the server may close on an oversized request: read its answer */
		off += (size_t)n;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		assert_int_equal(poll(&p, 1, 5000), 1);
		n = recv(fd, resp + got, RESP_MAX - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	resp[got] = '\0';
	close(fd);
}

static char *ask(const struct fixture *f, const char *req)
{
	char *resp = malloc(RESP_MAX);

	exchange(f, req, strlen(req), resp);
	return resp;
}

static void test_get(void **state)
{
	char *r = ask(*state, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");

	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(
	    strstr(r, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(
	    strstr(r, "\r\n\r\n# HELP test_up Always 1.\n# TYPE test_up gauge\ntest_up 1\n"));
	/* The server's own families follow the callback's. */
	assert_non_null(strstr(r, "\n# TYPE ibgw_metrics_http_requests_total counter\n"));
	assert_non_null(strstr(r, "\nibgw_metrics_http_connections 1\n"));
	free(r);
}

static void test_counts_requests(void **state)
{
	char *r = ask(*state, "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n");

	free(r);
	r = ask(*state, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "\nibgw_metrics_http_requests_total{code=\"404\"} 1\n"));
	assert_non_null(strstr(r, "\nibgw_metrics_http_connections_total 2\n"));
	free(r);
}

static void test_head(void **state)
{
	char *r = ask(*state, "HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
	char *body = strstr(r, "\r\n\r\n");

	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(body);
	assert_string_equal(body, "\r\n\r\n");
	free(r);
}

static void test_not_found(void **state)
{
	char *r = ask(*state, "GET /metrics/x HTTP/1.1\r\nConnection: close\r\n\r\n");

	assert_non_null(strstr(r, "HTTP/1.1 404 Not Found\r\n"));
	free(r);
}

static void test_method(void **state)
{
	char *r = ask(*state, "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");

	assert_non_null(strstr(r, "HTTP/1.1 405 Method Not Allowed\r\n"));
	assert_non_null(strstr(r, "\r\nAllow: GET, HEAD\r\n"));
	free(r);
}

static void test_get_with_body(void **state)
{
	char *r = ask(*state, "GET /metrics HTTP/1.1\r\nConnection: close\r\nContent-Length: 5\r\n"
			      "\r\nhello");

	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	free(r);
}

static void test_malformed(void **state)
{
	char *r = ask(*state, "GET /metrics HTTP/1.1\r\nnot a header\r\n\r\n");

	assert_non_null(strstr(r, "HTTP/1.1 400 Bad Request\r\n"));
	free(r);
}

static void test_headers_too_large(void **state)
{
	size_t n = 3 * METRICS_HTTP_MAX_REQUEST;
	char *req = malloc(n + 64), *resp = malloc(RESP_MAX);
	int len = snprintf(req, n + 64, "GET /metrics HTTP/1.1\r\nX-Big: ");

	memset(req + len, 'a', n);
	memcpy(req + len + n, "\r\n\r\n", 4);
	exchange(*state, req, (size_t)len + n + 4, resp);
	assert_non_null(strstr(resp, "HTTP/1.1 431 "));
	free(req);
	free(resp);
}

static void test_render_failure(void **state)
{
	struct fixture *f = *state;
	char *r;

	atomic_store(&f->fail_render, 1);
	r = ask(f, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 500 Internal Server Error\r\n"));
	free(r);
}

static void test_garbage_then_serves(void **state)
{
	static const char junk[] = "\x00\x01\x02\xff\r\n\r\n\x16\x03\x01 TLS?\r\n\r\n";
	char *r = malloc(RESP_MAX);

	exchange(*state, junk, sizeof(junk) - 1, r);
	assert_null(strstr(r, "200 OK"));
	free(r);
	r = ask(*state, "GET /metrics HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(r, " 200 OK\r\n"));
	free(r);
}

/* 200 connections at once (the limit, the backlog, more), idle, then all closed: the
 * endpoint must accept again (libmicrohttpd puts its listening socket back only on a
 * later pass; see run_mhd). */
static void test_limit_then_serves(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(f->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fds[200];
	char *r;

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		assert_true(fds[i] >= 0);
		assert_true(connect(fds[i], (struct sockaddr *)&a, sizeof(a)) == 0 ||
			    errno == EINPROGRESS);
	}
	usleep(500 * 1000); /* the server accepts up to its limit */
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		close(fds[i]);
	r = ask(f, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	free(r);
}

/* metrics_http_new's refusals, on a loop of their own that never runs. */
static void test_refusals(void **state)
{
	struct fixture *f = *state;
	struct evloop *loop;
	struct metrics_http *m = NULL;

	assert_int_equal(evloop_new(&loop), 0);
	assert_int_equal(metrics_http_new(loop, f->listen, render, f, &m), -EADDRINUSE);
	assert_int_equal(metrics_http_new(loop, "127.0.0.1", render, f, &m), -EINVAL);
	assert_int_equal(metrics_http_new(loop, "localhost:9464", render, f, &m), -EINVAL);
	assert_int_equal(metrics_http_new(loop, "127.0.0.1:0", render, f, &m), -EINVAL);
	assert_null(m);
	evloop_free(loop);
}

/* Off (the default): the status paths are unknown, /metrics is there. */
static void test_status_off(void **state)
{
	static const char *const paths[] = { "/status", "/status.json", "/status.js",
					     "/status.css" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char req[128];
		char *r;

		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nConnection: close\r\n\r\n",
			 paths[i]);
		r = ask(*state, req);
		assert_non_null(strstr(r, "HTTP/1.1 404 Not Found\r\n"));
		free(r);
	}
}

static void test_status_page(void **state)
{
	char *r = ask(*state, "GET /status HTTP/1.1\r\nConnection: close\r\n\r\n");

	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(r, "\r\nContent-Type: text/html; charset=utf-8\r\n"));
	assert_non_null(strstr(r, "\r\nContent-Security-Policy: default-src 'none'; "
				  "script-src 'self'; style-src 'self'; connect-src 'self'"));
	assert_non_null(strstr(r, "\r\nX-Content-Type-Options: nosniff\r\n"));
	assert_non_null(strstr(r, "\r\nX-Frame-Options: DENY\r\n"));
	/* The whole built-in file, its own script and style, nothing from elsewhere. */
	assert_non_null(strstr(r, "<!DOCTYPE html>"));
	assert_non_null(strstr(r, "<script src=\"/status.js\" defer></script>"));
	assert_non_null(strstr(r, "</html>\n"));
	assert_null(strstr(r, "http://"));
	assert_null(strstr(r, "https://"));
	free(r);
	r = ask(*state, "GET /status.js HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "\r\nContent-Type: text/javascript; charset=utf-8\r\n"));
	assert_non_null(strstr(r, "fetch(\"/status.json\""));
	assert_null(strstr(r, "innerHTML"));
	free(r);
	r = ask(*state, "GET /status.css HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "\r\nContent-Type: text/css; charset=utf-8\r\n"));
	free(r);
}

static void test_status_json(void **state)
{
	char *r = ask(*state, "GET /status.json HTTP/1.1\r\nConnection: close\r\n\r\n");

	assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(r, "\r\nContent-Type: application/json; charset=utf-8\r\n"));
	assert_non_null(strstr(r, "\r\nCache-Control: no-store\r\n"));
	assert_non_null(strstr(r, "\r\n\r\n{\"name\":\"<b>gw</b>\"}"));
	free(r);
	/* /metrics is still the metrics, and another path still 404. */
	r = ask(*state, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "\ntest_up 1\n"));
	free(r);
	r = ask(*state, "GET /status/x HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 404 Not Found\r\n"));
	free(r);
	r = ask(*state, "POST /status.json HTTP/1.1\r\nContent-Length: 1\r\n\r\nx");
	assert_non_null(strstr(r, "HTTP/1.1 405 Method Not Allowed\r\n"));
	free(r);
}

static void test_status_json_failure(void **state)
{
	struct fixture *f = *state;
	char *r;

	atomic_store(&f->fail_render, 1);
	r = ask(f, "GET /status.json HTTP/1.1\r\nConnection: close\r\n\r\n");
	assert_non_null(strstr(r, "HTTP/1.1 500 Internal Server Error\r\n"));
	free(r);
}

static void test_label_escape(void **state)
{
	char b[32];
	(void)state;

	assert_string_equal(metrics_label_escape("ib0", b, sizeof(b)), "ib0");
	assert_string_equal(metrics_label_escape("a\"b\\c\nd", b, sizeof(b)), "a\\\"b\\\\c\\nd");
	/* Cut short whole: never half an escape. */
	assert_string_equal(metrics_label_escape("ab\"", b, 4), "ab");
	assert_string_equal(metrics_label_escape("abcdef", b, 4), "abc");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_method, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_with_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_headers_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_render_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_then_serves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_then_serves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_page, setup_status, teardown),
		cmocka_unit_test_setup_teardown(test_status_json, setup_status, teardown),
		cmocka_unit_test_setup_teardown(test_status_json_failure, setup_status, teardown),
		cmocka_unit_test(test_label_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
