/*
 * libFuzzer harness for the control server's request loop (mgmt/ctl_server.c): one
 * client's byte stream, in the input's chunks, through a real server on real unix
 * sockets (in a private temporary directory) and its event loop, which this thread runs
 * between the client's writes: reading into the bounded buffer, framing, the turns and
 * their budget, dispatch, the replies' queue and the output high-water mark, the
 * closing after a protocol error or the client's end. fuzz_ctl_proto.c covers the
 * header and body decoders alone; this covers what the server does with them.
 *
 * The handlers answer from stubs (records counted, statuses chosen by the arguments;
 * route and neighbour adds through the real ctl_args decoders) and log what they
 * returned; `show neighbours` is a streamed one (ctl_reply_stream), its records in
 * pieces on later turns. Input: octet 0 (bit 0 the read-only socket, bit 1 the client goes away
 * after writing without reading a reply, bit 2 a second client connects meanwhile and
 * is refused: one client per socket; bit 3 the last chunk arrives with the client's
 * end, bit 4 no chunk is served before the next arrives); then chunks, each a length
 * octet and that many octets (length 0: the rest of the input), each written and then
 * served until the server is quiet; then the client shuts its side down.
 *
 * Checks, against a model of the stream (the same frames whatever the chunking):
 * - every complete request gets exactly one END frame, in order, with its seq: the
 *   handler's status after as many RECORD frames as it added, or the server's refusal
 *   (unknown type, write request on the read-only socket, a body that is not one JSON
 *   object); an incomplete request at the end gets nothing;
 * - a protocol error (bad magic, version, length over the limit, a reply type) gets
 *   one END (EBADREQ / EVERSION) and the connection closes, nothing served after it;
 * - every reply frame is well formed (magic, version, RECORD or END, a JSON object;
 *   END has "status", and "error" when not 0);
 * - the server closes the connection after the client's end once all is answered;
 *   a client that went away has its requests served all the same;
 * - a client over the limit is told CTL_EBUSY and closed;
 * - every streamed reply's cursor is freed (its END sent, or its client gone), and the
 *   output the server holds for the client stays below the high-water mark plus what
 *   one reply or piece adds (the largest reply here, 300000 octets, and a piece's).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <json-c/json.h>

#include "mgmt/ctl_args.h"
#include "mgmt/ctl_proto.h"
#include "mgmt/ctl_server.h"
#include "lib/evloop.h"
#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(int line, const char *what)
{
	fprintf(stderr, "fuzz_ctl_server.c:%d: invariant broken: %s\n", line, what);
	abort();
}
#define check(c) ((c) ? (void)0 : fail(__LINE__, #c))

/* ---- the handlers: stubs that log what they answered ------------------------------- */

#define MAX_LOG 4096
static struct {
	int status;
	unsigned records;
} hlog[MAX_LOG];
static unsigned n_hlog;

static int logged(int status, unsigned records)
{
	check(n_hlog < MAX_LOG);
	hlog[n_hlog].status = status;
	hlog[n_hlog].records = records;
	n_hlog++;
	return status;
}

static int64_t int_arg(struct json_object *args, const char *key, int64_t dflt)
{
	struct json_object *v;

	if (!args || !json_object_object_get_ex(args, key, &v) ||
	    !json_object_is_type(v, json_type_int))
		return dflt;
	return json_object_get_int64(v);
}

/* show version: {"n": k} records (0..3, default 1). */
static int h_records(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	int64_t n = int_arg(args, "n", 1);
	unsigned done = 0;
	(void)ctx;

	if (n < 0 || n > 3)
		n = 3;
	for (int64_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "i", json_object_new_int((int)i));
		if (ctl_reply_record(r, o) == 0)
			done++;
	}
	return logged(CTL_OK, done);
}

/* show links: the arguments back as a record. */
static int h_echo(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)ctx;
	if (!args)
		return logged(CTL_OK, 0);
	return logged(CTL_OK, ctl_reply_record(r, json_object_get(args)) == 0);
}

/* show stats: one record with a string of {"size": n} octets (at most 300000): replies
 * larger than the socket takes at once, and past the output high-water mark. */
static int h_big(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	int64_t n = int_arg(args, "size", 1000);
	struct json_object *o = json_object_new_object();
	char *s;
	(void)ctx;

	if (n < 0 || n > 300000)
		n = 300000;
	s = malloc((size_t)n + 1);
	check(s != NULL);
	memset(s, 'x', (size_t)n);
	s[n] = '\0';
	json_object_object_add(o, "blob", json_object_new_string(s));
	free(s);
	return logged(CTL_OK, ctl_reply_record(r, o) == 0);
}

/* show routes: one record, then {"fail": true} makes it fail after all. */
static int h_record_then_fail(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct json_object *v, *o = json_object_new_object();
	unsigned done;
	(void)ctx;

	json_object_object_add(o, "dst", json_object_new_string("10.0.0.0/8"));
	done = ctl_reply_record(r, o) == 0;
	if (args && json_object_object_get_ex(args, "fail", &v) && json_object_get_boolean(v))
		return logged(ctl_reply_error(r, CTL_EFAILED, "failed as asked"), done);
	return logged(CTL_OK, done);
}

/* show neighbours, streamed: {"n": k} records (0..5000, default 10) of {"size": m}
 * octets each (0..1000, default 10), in pieces; {"fail": true} ends it with an error
 * after them, {"refuse": true} refuses it at once (the cursor freed unused). Its log
 * entry is taken at dispatch and filled in as the pieces go. */
struct stream_cursor {
	unsigned log, next, n, size;
	bool fail;
};
static unsigned live_cursors;

static void stream_cursor_free(void *cursor)
{
	check(live_cursors > 0);
	live_cursors--;
	free(cursor);
}

static int stream_next(void *ctx, void *cursor, struct ctl_reply *r)
{
	struct stream_cursor *c = cursor;
	char pad[1001];
	(void)ctx;

	memset(pad, 'n', c->size);
	pad[c->size] = '\0';
	while (c->next < c->n && !ctl_reply_full(r)) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "i", json_object_new_int((int)c->next++));
		json_object_object_add(o, "pad", json_object_new_string(pad));
		check(ctl_reply_record(r, o) == 0);
		hlog[c->log].records++;
	}
	if (c->next < c->n)
		return CTL_MORE;
	hlog[c->log].status =
	    c->fail ? ctl_reply_error(r, CTL_EFAILED, "stream failed as asked") : CTL_OK;
	return hlog[c->log].status;
}

static int h_stream(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct stream_cursor *c = calloc(1, sizeof(*c));
	int64_t n = int_arg(args, "n", 10), size = int_arg(args, "size", 10);
	struct json_object *v;
	(void)ctx;

	check(c != NULL);
	live_cursors++;
	c->n = n < 0 || n > 5000 ? 5000 : (unsigned)n;
	c->size = size < 0 || size > 1000 ? 1000 : (unsigned)size;
	c->fail = args && json_object_object_get_ex(args, "fail", &v) && json_object_get_boolean(v);
	c->log = n_hlog;
	ctl_reply_stream(r, stream_next, c, stream_cursor_free);
	if (args && json_object_object_get_ex(args, "refuse", &v) && json_object_get_boolean(v))
		return logged(ctl_reply_error(r, CTL_EFAILED, "refused as asked"), 0);
	return logged(CTL_OK, 0); /* the status is set again when the stream ends */
}

/* reload: {"why": text} fails with it. */
static int h_fail(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct json_object *why;
	(void)ctx;

	if (args && json_object_object_get_ex(args, "why", &why))
		return logged(
		    ctl_reply_error(r, CTL_EFAILED, "failed: %s", json_object_get_string(why)), 0);
	return logged(CTL_OK, 0);
}

/* route add / neigh add: the daemon's decoders, the decoded arguments as a record. */
static int h_route_add(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct ctl_route rt;
	char why[CTL_ARGS_WHY_LEN] = "";
	(void)ctx;

	if (ctl_route_from_json(args, true, &rt, why) < 0)
		return logged(ctl_reply_error(r, CTL_EBADREQ, "%s", why), 0);
	return logged(CTL_OK, ctl_reply_record(r, ctl_route_to_json(&rt)) == 0);
}

static int h_neigh_add(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct ctl_neigh n;
	char why[CTL_ARGS_WHY_LEN] = "";
	(void)ctx;

	if (ctl_neigh_from_json(args, true, &n, why) < 0)
		return logged(ctl_reply_error(r, CTL_EBADREQ, "%s", why), 0);
	return logged(CTL_OK, ctl_reply_record(r, ctl_neigh_to_json(&n)) == 0);
}

static const struct ctl_command cmds[] = {
	{ CTL_SHOW_VERSION, true, h_records }, { CTL_SHOW_LINKS, true, h_echo },
	{ CTL_SHOW_STATS, true, h_big },       { CTL_SHOW_ROUTES, true, h_record_then_fail },
	{ CTL_RELOAD, false, h_fail },         { CTL_ROUTE_ADD, false, h_route_add },
	{ CTL_NEIGH_ADD, false, h_neigh_add }, { CTL_SHOW_NEIGHBOURS, true, h_stream },
};
#define N_CMDS (sizeof(cmds) / sizeof(cmds[0]))

static const struct ctl_command *cmd_of(uint16_t type)
{
	for (size_t i = 0; i < N_CMDS; i++)
		if (cmds[i].type == type)
			return &cmds[i];
	return NULL;
}

/* ---- the server, its loop, and the clients ----------------------------------------- */

static struct evloop *loop;
static struct ctl_server *srv;
static char dir[64], paths[2][96];
static int sentinel = -1;

struct client {
	int fd;
	bool reading, eof;
	uint8_t *buf;
	size_t len, cap;
};
static struct client cl[2];

static void cleanup(void)
{
	ctl_server_free(srv); /* unlinks the socket files */
	evloop_free(loop);
	rmdir(dir);
}

/* What the client received so far (nonblocking). */
static void client_read(struct client *c)
{
	while (c->fd >= 0 && c->reading && !c->eof) {
		ssize_t n;

		if (c->cap - c->len < 65536) {
			c->cap = c->cap ? c->cap * 2 : 131072;
			c->buf = realloc(c->buf, c->cap);
			check(c->buf != NULL);
		}
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (n > 0)
			c->len += (size_t)n;
		else if (n == 0)
			c->eof = true;
		else if (errno == EAGAIN || errno == EINTR)
			break;
		else
			c->eof = true; /* reset: the server closed with our bytes unread */
	}
}

/* ---- pumping: the loop runs until the server is quiet, or a goal is met ------------ */

enum goal {
	QUIET,   /* nothing changed for a few turns of the loop */
	EOF0,    /* client 0 saw the end of the stream */
	EOF1,    /* client 1 too */
	HANDLED, /* the handlers answered want_handled requests, and then quiet */
};
static enum goal goal;
static unsigned want_handled, idle, rounds;
static uint64_t last_sig[9];

static void sentinel_cb(struct evloop *l, int fd, uint32_t events, void *arg)
{
	struct ctl_server_stats st;
	uint64_t sig[9];
	int outq = 0;
	bool done = false;
	(void)fd, (void)events, (void)arg;

	client_read(&cl[0]);
	client_read(&cl[1]);
	ctl_server_get_stats(srv, &st);
	if (cl[0].fd >= 0)
		check(ioctl(cl[0].fd, SIOCOUTQ, &outq) == 0);
	sig[0] = st.accepted + st.rejected_busy;
	sig[1] = st.requests;
	sig[2] = st.deferred;
	sig[3] = cl[0].len + cl[0].eof;
	sig[4] = cl[1].len + cl[1].eof;
	sig[5] = (uint64_t)outq;
	sig[6] = n_hlog;
	sig[7] = st.bad_requests + st.denied;
	sig[8] = st.pieces;
	if (rounds && !memcmp(sig, last_sig, sizeof(sig)))
		idle++;
	else
		idle = 0;
	memcpy(last_sig, sig, sizeof(sig));
	rounds++;
	switch (goal) {
	case QUIET:
		done = idle >= 3;
		break;
	case EOF0:
		done = cl[0].eof;
		break;
	case EOF1:
		done = cl[1].eof;
		break;
	case HANDLED:
		done = n_hlog >= want_handled && idle >= 3;
		break;
	}
	/* The server owes something and makes no progress for this long: stuck. */
	if (!done && idle > 5000)
		fail(__LINE__, goal == HANDLED ? "requests of a client gone never served"
					       : "the server never closed the connection");
	if (done)
		evloop_stop(l);
}

static void pump(enum goal g)
{
	goal = g;
	idle = rounds = 0;
	check(evloop_run(loop) == 0);
}

static void setup(void)
{
	uint64_t one = 1;

	log_init("fuzz_ctl_server", LOG_TARGET_STDERR, LOG_ERR);
	snprintf(dir, sizeof(dir), "/tmp/ibgw-fuzz-ctl.XXXXXX");
	check(mkdtemp(dir) != NULL);
	check(evloop_new(&loop) == 0);
	check(ctl_server_new(loop, cmds, N_CMDS, NULL, &srv) == 0);
	for (int ro = 0; ro < 2; ro++) {
		struct ctl_listen_cfg c = { .path = paths[ro],
					    .mode = ro ? 0666 : 0600,
					    .gid = (gid_t)-1,
					    .read_only = ro,
					    .max_clients = 1 };

		snprintf(paths[ro], sizeof(paths[ro]), "%s/%s", dir, ro ? "ro.sock" : "ctl.sock");
		check(ctl_server_listen(srv, &c) == 0);
	}
	/* Always readable: the loop never sleeps, and the sentinel sees every turn. */
	sentinel = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	check(sentinel >= 0 && write(sentinel, &one, sizeof(one)) == sizeof(one));
	check(evloop_add_fd(loop, sentinel, EPOLLIN, sentinel_cb, NULL) == 0);
	atexit(cleanup);
}

static int client_connect(int ro)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	check(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", paths[ro]);
	check(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	return fd;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* ---- the model: what the server owes for the whole stream ------------------------- */

struct expect {
	uint32_t seq;
	int status; /* -1: the handler's (the next entry of hlog) */
	bool fatal; /* a protocol error: the connection closes after it */
};

static unsigned model(const uint8_t *s, size_t n, bool ro, struct expect *e, unsigned max)
{
	size_t off = 0;
	unsigned k = 0;

	while (n - off >= CTL_HDR_LEN && k < max) {
		struct ctl_hdr h;
		int err = ctl_hdr_decode(s + off, CTL_MAX_REQUEST, &h);
		const struct ctl_command *c;
		struct json_object *args = NULL;
		char why[CTL_WHY_LEN];

		if (err == -EPROTO) {
			e[k++] = (struct expect){ 0, CTL_EBADREQ, true };
			break;
		}
		if (err == -EPROTONOSUPPORT) {
			e[k++] = (struct expect){ h.seq, CTL_EVERSION, true };
			break;
		}
		if (err == -EMSGSIZE || h.type >= CTL_MSG_RECORD) {
			e[k++] = (struct expect){ h.seq, CTL_EBADREQ, true };
			break;
		}
		if (n - off < CTL_HDR_LEN + (size_t)h.len)
			break; /* incomplete: dropped at the close */
		c = cmd_of(h.type);
		if (!c)
			e[k++] = (struct expect){ h.seq, CTL_EUNKNOWN, false };
		else if (ro && !c->read_only)
			e[k++] = (struct expect){ h.seq, CTL_EPERM, false };
		else if (ctl_body_parse(s + off + CTL_HDR_LEN, h.len, &args, why) < 0)
			e[k++] = (struct expect){ h.seq, CTL_EBADREQ, false };
		else
			e[k++] = (struct expect){ h.seq, -1, false };
		json_object_put(args);
		off += CTL_HDR_LEN + h.len;
	}
	return k;
}

/* One reply frame at p (n octets available): its header, and its body checked. Returns
 * the frame's length, or 0 when incomplete. */
static size_t reply_frame(const uint8_t *p, size_t n, struct ctl_hdr *h, int *status)
{
	struct json_object *o, *v;
	char why[CTL_WHY_LEN];

	if (n < CTL_HDR_LEN)
		return 0;
	check(ctl_hdr_decode(p, CTL_MAX_REPLY, h) == 0);
	check(h->type == CTL_MSG_RECORD || h->type == CTL_MSG_END);
	if (n - CTL_HDR_LEN < h->len)
		return 0;
	check(h->len > 0);
	/* ctl_body_parse is the strict reader; a record may nest deeper than a request
	 * may (an echoed argument cannot: it passed the same limit) */
	check(ctl_body_parse(p + CTL_HDR_LEN, h->len, &o, why) == 0 && o);
	if (h->type == CTL_MSG_END) {
		check(json_object_object_get_ex(o, "status", &v) &&
		      json_object_is_type(v, json_type_int));
		*status = json_object_get_int(v);
		if (*status != CTL_OK)
			check(json_object_object_get_ex(o, "error", &v) &&
			      json_object_is_type(v, json_type_string));
	}
	json_object_put(o);
	return CTL_HDR_LEN + h->len;
}

/* The replies against the model: e[0..k), the handlers' log from h0 on. */
static void check_replies(const struct client *c, const struct expect *e, unsigned k, unsigned h0)
{
	size_t off = 0;
	unsigned hi = h0;

	for (unsigned i = 0; i < k; i++) {
		unsigned records = 0;
		struct ctl_hdr h;
		int status = -1;
		size_t m;

		for (;;) {
			m = reply_frame(c->buf + off, c->len - off, &h, &status);
			check(m > 0); /* every request is answered */
			off += m;
			check(h.seq == e[i].seq);
			if (h.type == CTL_MSG_END)
				break;
			records++;
		}
		if (e[i].status >= 0) {
			check(status == e[i].status && records == 0);
		} else {
			check(hi < n_hlog);
			check(status == hlog[hi].status && records == hlog[hi].records);
			hi++;
		}
	}
	check(off == c->len); /* nothing else */
	check(hi == n_hlog);  /* no handler ran for what was not answered */
}

#define MAX_EXPECT 4096
static uint8_t stream[1 << 16];
static struct expect exp_[MAX_EXPECT];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	uint8_t flags;
	size_t n_stream = 0;
	unsigned k, h0, handled = 0;
	bool ro, gone, stuck = false;
	struct ctl_server_stats st0, st;

	if (!ready) {
		setup();
		cl[0].fd = cl[1].fd = -1;
		ready = true;
	}
	if (size < 1 || size > sizeof(stream))
		return 0;
	flags = data[0];
	ro = flags & 1;
	gone = flags & 2;
	data++, size--;
	n_hlog = 0;
	h0 = 0;
	ctl_server_get_stats(srv, &st0);

	cl[0].fd = client_connect(ro);
	cl[0].reading = !gone;
	pump(QUIET);
	if (flags & 4) {
		/* One client per socket: the next is told so and closed. */
		struct ctl_hdr h;
		int status = -1;

		cl[1].fd = client_connect(ro);
		cl[1].reading = true;
		pump(EOF1);
		check(reply_frame(cl[1].buf, cl[1].len, &h, &status) == cl[1].len);
		check(h.type == CTL_MSG_END && status == CTL_EBUSY);
		client_close(&cl[1]);
	}
	ctl_server_get_stats(srv, &st);
	check(st.accepted == st0.accepted + 1);
	check(st.rejected_busy == st0.rejected_busy + !!(flags & 4));

	while (size > 0) {
		size_t n = data[0];
		size_t put = 0;

		data++, size--;
		if (n == 0 || n > size)
			n = size;
		while (put < n && !stuck) {
			ssize_t w =
			    send(cl[0].fd, data + put, n - put, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w > 0) {
				memcpy(stream + n_stream, data + put, (size_t)w);
				n_stream += (size_t)w;
				put += (size_t)w;
			} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				/* The server reads, or has stopped reading: a client that does
				 * not read its replies is not read either (and one that does
				 * and is not read will wait for its EOF below in vain). */
				int q0 = 0, q1 = 0;

				check(ioctl(cl[0].fd, SIOCOUTQ, &q0) == 0);
				pump(QUIET);
				check(ioctl(cl[0].fd, SIOCOUTQ, &q1) == 0);
				stuck = q1 >= q0;
			} else {
				stuck = true; /* closed after a protocol error */
			}
		}
		data += n, size -= n;
		/* bit 3: the last chunk comes with the client's end; bit 4: no chunk is served
		 * before the next is written (the server reads them as they come) */
		if (!(flags & 16) && (size > 0 || !(flags & 8)))
			pump(QUIET);
	}

	k = model(stream, n_stream, ro, exp_, MAX_EXPECT);
	for (unsigned i = 0; i < k; i++)
		handled += exp_[i].status < 0;
	if (gone) {
		/* Gone without reading: what it sent is served all the same. */
		client_close(&cl[0]);
		want_handled = handled;
		pump(HANDLED);
		check(n_hlog == handled);
	} else {
		shutdown(cl[0].fd, SHUT_WR);
		pump(EOF0);
		check_replies(&cl[0], exp_, k, h0);
		client_close(&cl[0]);
	}
	check(live_cursors == 0);
	ctl_server_get_stats(srv, &st);
	check(st.out_peak <= (4u << 20) + 300000 + 64 + CTL_STREAM_PIECE + 1100);
	return 0;
}
