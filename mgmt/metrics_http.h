/*
 * The Prometheus endpoint: an HTTP server (libmicrohttpd) that answers GET /metrics with
 * the text exposition format (version 0.0.4) a render callback writes, plus the
 * exposition helpers the callbacks share.
 *
 * The server runs on the control thread's event loop, not in a thread of its own:
 * libmicrohttpd in external-event mode, its epoll fd watched by the loop and its next
 * deadline kept in a loop timer. So the render callback reads the data plane's
 * control-thread state without locks, as gwctl's handlers do.
 *
 * Answers (the status page's paths: metrics_http_set_status): GET or HEAD /metrics 200 (text/plain; version=0.0.4; charset=utf-8), another
 * path 404, another method 405 (Allow: GET, HEAD), a malformed request 400 and a request
 * header above METRICS_HTTP_MAX_REQUEST 431 (both libmicrohttpd's). Limits:
 * METRICS_HTTP_MAX_CONNS connections at once (more wait in the listen backlog),
 * METRICS_HTTP_IDLE_S without a byte closes a connection (keep-alive ones too).
 *
 * Threads: control thread only.
 */
#ifndef IBGW_MGMT_METRICS_HTTP_H
#define IBGW_MGMT_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct evloop;
struct metrics_http;

#define METRICS_HTTP_MAX_CONNS   32
#define METRICS_HTTP_IDLE_S      10
#define METRICS_HTTP_MAX_REQUEST 8192 /* bytes of request line and headers */

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Write the exposition text to out. Returns 0, or -errno (the scrape gets a 500). */
typedef int (*metrics_render_fn)(void *ctx, FILE *out);

/* Listen on listen ("127.0.0.1:9464", "[::1]:9464"; lib/addr.h ip_sockaddr_parse) and
 * serve from loop. Returns 0, or -errno having logged why (-EINVAL: not an address). */
int metrics_http_new(struct evloop *loop, const char *listen, metrics_render_fn render, void *ctx,
		     struct metrics_http **out);
/* Close the socket and every connection. NULL is a no-op. */
void metrics_http_free(struct metrics_http *m);
/*
 * The status page (metrics.status_page), read-only, off until set: GET /status (HTML),
 * /status.css and /status.js (built into the program; served with a Content-Security-
 * Policy that allows only them and /status.json), and /status.json, whatever status
 * writes (a JSON object; application/json, no-store). NULL: off again (those paths 404).
 */
void metrics_http_set_status(struct metrics_http *m, metrics_render_fn status);
/* The address it listens on, as given to metrics_http_new. */
const char *metrics_http_listen(const struct metrics_http *m);

/* ---- exposition helpers (for render callbacks) ------------------------------------- */

/* "# HELP name help" and "# TYPE name type" (type: "counter", "gauge"): once per family,
 * before its samples. */
void metrics_family(FILE *out, const char *name, const char *type, const char *help);
/* A family of one sample without labels (HELP, TYPE, the sample). */
void metrics_single(FILE *out, const char *name, const char *type, const char *help, uint64_t v);
/* Escape a label value (backslash, double quote, newline) into buf; returns buf. A value
 * that does not fit is cut short. */
char *metrics_label_escape(const char *value, char *buf, size_t len);

#endif
