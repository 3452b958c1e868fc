/*
 * The Prometheus endpoint on libmicrohttpd, driven by the control loop (metrics_http.h).
 *
 * Why libmicrohttpd and not a parser of our own: it is the HTTP/1.1 implementation
 * Debian keeps patched, and it already enforces what a network-facing parser needs
 * (header size through the per-connection memory pool, connection limit, idle timeout,
 * 400 on malformed requests). It runs with no thread of its own (MHD_USE_EPOLL without
 * MHD_USE_INTERNAL_POLLING_THREAD): its epoll fd is one more fd of our loop, MHD_run
 * does the work when it is readable or when MHD's own deadline (MHD_get_timeout, kept
 * in a loop timer) comes, and the render callback runs on the control thread.
 *
 * The status page (metrics_http_set_status) is three files built into the program
 * (mgmt/www/, .incbin) and a JSON the daemon's callback writes, also on the control
 * thread; the files carry a CSP that allows only themselves.
 */
#include "mgmt/metrics_http.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "lib/addr.h"
#include "lib/evloop.h"
#include "lib/log.h"

#define METRICS_PATH    "/metrics"
#define STATUS_PATH     "/status"
#define STATUS_JSON     "/status.json"
#define LISTEN_BACKLOG  64
#define LISTEN_TEXT_MAX 64

/*
 * The status page's files (mgmt/www/), built into the program so that nothing is read from
 * the disk at run time and the page works the same from the build tree and the package.
 * The Makefile makes this object depend on them.
 */
#define INCBIN(sym, file)                                                                          \
	__asm__(".section .rodata\n.balign 16\n.globl " #sym "\n.hidden " #sym "\n" #sym           \
		":\n.incbin \"" file "\"\n.globl " #sym "_end\n.hidden " #sym "_end\n" #sym        \
		"_end:\n.byte 0\n.previous\n")
INCBIN(metrics_www_html, "mgmt/www/status.html");
INCBIN(metrics_www_css, "mgmt/www/status.css");
INCBIN(metrics_www_js, "mgmt/www/status.js");
extern const char metrics_www_html[], metrics_www_html_end[];
extern const char metrics_www_css[], metrics_www_css_end[];
extern const char metrics_www_js[], metrics_www_js_end[];

struct www_file {
	const char *path, *type;
	const char *start, *end;
};
static const struct www_file www_files[] = {
	{ STATUS_PATH, "text/html; charset=utf-8", metrics_www_html, metrics_www_html_end },
	{ "/status.css", "text/css; charset=utf-8", metrics_www_css, metrics_www_css_end },
	{ "/status.js", "text/javascript; charset=utf-8", metrics_www_js, metrics_www_js_end },
};

/* The page loads nothing but its own files and its JSON: no inline script, no other
 * origin, no framing (a page of the gateway's tables inside someone else's). */
#define STATUS_CSP                                                                                 \
	"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "            \
	"img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

/* The status codes this module answers with itself (the others are libmicrohttpd's). */
static const unsigned http_codes[] = { 200, 404, 405, 500 };
#define N_CODES (sizeof(http_codes) / sizeof(http_codes[0]))

struct metrics_http {
	struct evloop *loop;
	struct MHD_Daemon *mhd;
	int epoll_fd;          /* MHD's, watched by the loop; -1 when not added */
	struct evtimer *timer; /* MHD's next deadline (idle connections, pending work) */
	metrics_render_fn render;
	metrics_render_fn status; /* the status page's JSON; NULL: no status page */
	void *ctx;
	char listen[LISTEN_TEXT_MAX];
	/* The server's own counters, exposed after the callback's families. */
	uint64_t requests[N_CODES];
	uint64_t connections_total;
	unsigned connections_open;
};

/* ---- exposition helpers ------------------------------------------------------------- */

void metrics_family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_single(FILE *out, const char *name, const char *type, const char *help, uint64_t v)
{
	metrics_family(out, name, type, help);
	fprintf(out, "%s %llu\n", name, (unsigned long long)v);
}

char *metrics_label_escape(const char *value, char *buf, size_t len)
{
	size_t o = 0;

	for (const char *p = value; *p; p++) {
		const char *rep = *p == '\\'   ? "\\\\"
				  : *p == '"'  ? "\\\""
				  : *p == '\n' ? "\\n"
					       : NULL;
		size_t n = rep ? 2 : 1;

		if (o + n >= len)
			break;
		if (rep)
			memcpy(buf + o, rep, 2);
		else
			buf[o] = *p;
		o += n;
	}
	if (len)
		buf[o] = '\0';
	return buf;
}

static void write_own_metrics(const struct metrics_http *m, FILE *out)
{
	metrics_family(
	    out, "ibgw_metrics_http_requests_total", "counter",
	    "Requests the metrics endpoint answered, by HTTP status (400 and 431 are not counted).");
	for (size_t i = 0; i < N_CODES; i++)
		fprintf(out, "ibgw_metrics_http_requests_total{code=\"%u\"} %llu\n", http_codes[i],
			(unsigned long long)m->requests[i]);
	metrics_single(out, "ibgw_metrics_http_connections_total", "counter",
		       "Connections the metrics endpoint accepted.", m->connections_total);
	metrics_single(out, "ibgw_metrics_http_connections", "gauge",
		       "Connections to the metrics endpoint open now.", m->connections_open);
}

/* ---- requests --------------------------------------------------------------------------- */

static void count(struct metrics_http *m, unsigned code)
{
	for (size_t i = 0; i < N_CODES; i++)
		if (http_codes[i] == code)
			m->requests[i]++;
}

/* The metrics page (or, json, the status page's JSON) into a malloc'd buffer (*buf,
 * *len). Returns 0 or -errno. */
static int render_page(struct metrics_http *m, bool json, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);
	int err;

	if (!f)
		return -errno;
	err = json ? m->status(m->ctx, f) : m->render(m->ctx, f);
	if (!err && !json)
		write_own_metrics(m, f);
	if (ferror(f) && !err)
		err = -ENOMEM;
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(*buf);
		*buf = NULL;
	}
	return err;
}

static enum MHD_Result reply(struct metrics_http *m, struct MHD_Connection *c, unsigned code,
			     struct MHD_Response *resp, const char *type)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, code, resp);
	MHD_destroy_response(resp);
	count(m, code);
	return ret;
}

static enum MHD_Result reply_text(struct metrics_http *m, struct MHD_Connection *c, unsigned code,
				  const char *text)
{
	return reply(
	    m, c, code,
	    MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT),
	    "text/plain; charset=utf-8");
}

static enum MHD_Result reply_metrics(struct metrics_http *m, struct MHD_Connection *c, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	int err = render_page(m, json, &buf, &len);
	struct MHD_Response *resp;

	if (err < 0) {
		log_errno(LOG_WARNING, -err, "metrics: rendering %s failed",
			  json ? STATUS_JSON : METRICS_PATH);
		return reply_text(m, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "rendering failed\n");
	}
	resp = MHD_create_response_from_buffer_with_free_callback(len, buf, free);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	if (json)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return reply(m, c, MHD_HTTP_OK, resp,
		     json ? "application/json; charset=utf-8" : METRICS_CONTENT_TYPE);
}

/* One of the status page's built-in files. */
static enum MHD_Result reply_www(struct metrics_http *m, struct MHD_Connection *c,
				 const struct www_file *w)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
	    (size_t)(w->end - w->start), (void *)w->start, MHD_RESPMEM_PERSISTENT);

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Security-Policy", STATUS_CSP);
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	return reply(m, c, MHD_HTTP_OK, resp, w->type);
}

/* The answer to a complete GET or HEAD of url. */
static enum MHD_Result route(struct metrics_http *m, struct MHD_Connection *c, const char *url)
{
	if (!strcmp(url, METRICS_PATH))
		return reply_metrics(m, c, false);
	if (m->status) {
		if (!strcmp(url, STATUS_JSON))
			return reply_metrics(m, c, true);
		for (size_t i = 0; i < sizeof(www_files) / sizeof(www_files[0]); i++)
			if (!strcmp(url, www_files[i].path))
				return reply_www(m, c, &www_files[i]);
		return reply_text(m, c, MHD_HTTP_NOT_FOUND,
				  "not found: try " METRICS_PATH " or " STATUS_PATH "\n");
	}
	return reply_text(m, c, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
}

/*
 * libmicrohttpd calls once when the headers are in, again per piece of body, and once
 * more when the request is complete. A wrong method is answered at once (its body is
 * never read; the connection closes after). GET and HEAD are answered on the last call,
 * so that the connection stays open for the next scrape (keep-alive); a body sent with
 * them is read and ignored (libmicrohttpd refuses an answer in the middle of a body).
 */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **req_cls)
{
	struct metrics_http *m = cls;
	(void)version;
	(void)upload_data;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(m, c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!*req_cls) {
		*req_cls = m; /* headers seen; answer when the request is complete */
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	return route(m, c, url);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
			  enum MHD_ConnectionNotificationCode code)
{
	struct metrics_http *m = cls;
	(void)c;
	(void)socket_ctx;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		m->connections_total++;
		m->connections_open++;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && m->connections_open) {
		m->connections_open--;
	}
}

/* libmicrohttpd's messages are per connection (limits reached, peers that vanish):
 * debug level, so a flood of bad clients cannot flood the log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[256];
	size_t n;
	(void)cls;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("metrics: %s", buf);
}

/* ---- the loop's side ------------------------------------------------------------------- */

/* After every MHD_run: MHD says when it must run again even without fd activity (a
 * connection's idle timeout, or 0 when it has work it could not finish). */
static void rearm(struct metrics_http *m)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_get_timeout(m->mhd, &ms) == MHD_YES)
		evtimer_start(m->timer, (uint64_t)ms, 0);
	else
		evtimer_stop(m->timer);
}

/*
 * One pass of libmicrohttpd's work. At the connection limit it takes its listening socket
 * off its epoll set, and puts it back only at the start of a later MHD_run (0.9.75). In
 * external mode nothing would call that run once the last connections closed (no fd of
 * its set ready, no deadline), and the endpoint would stop accepting for good: so when a
 * pass closed connections, run once more.
 */
static void run_mhd(struct metrics_http *m)
{
	unsigned open_before = m->connections_open;

	MHD_run(m->mhd);
	if (m->connections_open < open_before)
		MHD_run(m->mhd);
	rearm(m);
}

static void on_ready(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	(void)loop;
	(void)fd;
	(void)events;
	run_mhd(arg);
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	run_mhd(arg);
}

/* A listening TCP socket of our own, so that a failure says which call failed and why
 * (libmicrohttpd only reports that it did not start). Returns the fd or -errno. */
static int open_listener(const char *listen_text)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, err;

	if (ip_sockaddr_parse(listen_text, &ss, &len) < 0) {
		log_error("metrics: '%s' is not an ADDRESS:PORT", listen_text);
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		log_errno(LOG_ERR, err, "metrics: socket for %s", listen_text);
		return -err;
	}
	/* A restarted daemon rebinds while the old connections sit in TIME_WAIT; IPv6 only
	 * on an IPv6 address, as the operator wrote it. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		err = errno;
		log_errno(LOG_ERR, err, "metrics: cannot listen on %s", listen_text);
		close(fd);
		return -err;
	}
	return fd;
}

static struct MHD_Daemon *start_mhd(struct metrics_http *m, int fd)
{
	return MHD_start_daemon(
	    MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (m->listen[0] == '[' ? MHD_USE_IPv6 : 0), 0, NULL,
	    NULL, on_request, m, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)METRICS_HTTP_MAX_CONNS, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)METRICS_HTTP_IDLE_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)METRICS_HTTP_MAX_REQUEST, MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, m, MHD_OPTION_END);
}

static int attach(struct metrics_http *m)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	int err;

	if (!info || info->epoll_fd < 0)
		return -EIO;
	m->timer = evtimer_new(m->loop, on_timer, m);
	if (!m->timer)
		return -ENOMEM;
	err = evloop_add_fd(m->loop, info->epoll_fd, EPOLLIN, on_ready, m);
	if (err < 0)
		return err;
	m->epoll_fd = info->epoll_fd;
	rearm(m);
	return 0;
}

int metrics_http_new(struct evloop *loop, const char *listen_text, metrics_render_fn render,
		     void *ctx, struct metrics_http **out)
{
	struct metrics_http *m;
	int fd, err;

	if (strlen(listen_text) >= LISTEN_TEXT_MAX) {
		log_error("metrics: listen address '%s' is too long", listen_text);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->epoll_fd = -1;
	m->render = render;
	m->ctx = ctx;
	snprintf(m->listen, sizeof(m->listen), "%s", listen_text);
	fd = open_listener(listen_text);
	if (fd < 0) {
		free(m);
		return fd;
	}
	m->mhd = start_mhd(m, fd);
	if (!m->mhd) {
		/* Its messages went to the debug log; the socket was not taken over. */
		log_error("metrics: the HTTP server did not start on %s", listen_text);
		close(fd);
		free(m);
		return -EIO;
	}
	err = attach(m);
	if (err < 0) {
		log_errno(LOG_ERR, -err, "metrics: cannot watch the HTTP server");
		metrics_http_free(m);
		return err;
	}
	log_info("metrics on http://%s%s", listen_text, METRICS_PATH);
	*out = m;
	return 0;
}

void metrics_http_free(struct metrics_http *m)
{
	if (!m)
		return;
	/* Off the loop before libmicrohttpd closes its epoll fd (the number may be reused). */
	if (m->epoll_fd >= 0)
		evloop_del_fd(m->loop, m->epoll_fd);
	evtimer_free(m->timer);
	MHD_stop_daemon(m->mhd); /* closes the listening socket and every connection */
	free(m);
}

void metrics_http_set_status(struct metrics_http *m, metrics_render_fn status)
{
	if (status && !m->status)
		log_info("status page on http://%s%s (read-only, no authentication)", m->listen,
			 STATUS_PATH);
	else if (!status && m->status)
		log_info("status page off");
	m->status = status;
}

const char *metrics_http_listen(const struct metrics_http *m)
{
	return m->listen;
}
