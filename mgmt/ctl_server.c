/*
 * Control-socket server. Each connection reads what its client sends into a bounded
 * buffer; the complete requests in it are served in turns (below), each handler's reply
 * frames queued and written as soon as the turn is done with the client, the rest as
 * the socket drains. Nothing a client sends can block the control thread or grow
 * memory without bound: requests are capped at CTL_MAX_REQUEST, a connection with
 * unread output or a full input buffer is not read, and a protocol error ends the
 * connection after one error reply.
 *
 * Turns: reading a request only queues its connection on a run queue (privileged
 * clients on one, read-only and refused ones on another) and makes an eventfd
 * readable. The eventfd's handler is the only place requests are served: the
 * privileged queue first, then the read-only one, each client at most
 * CTL_REQUESTS_PER_TURN requests before it goes to the back of its queue, and the whole
 * turn stops once CTL_TURN_BUDGET_US has passed (the next turn goes on where it
 * stopped). The eventfd stays readable while anything is queued, so the loop comes
 * back at once, after its timers and the other descriptors' events have had their go.
 *
 * Streamed replies (ctl_reply_stream): the connection keeps the stream (function,
 * cursor, seq) instead of an END. It is on a run queue while its unsent output is below
 * CTL_STREAM_LOW_WATER; a turn that reaches it serves one piece instead of requests, and
 * the END once next says done. A connection above the mark is put back on its queue by
 * the write event that drains it (conn_kick). Its input is not served meanwhile: replies
 * go out in request order.
 */
#include "mgmt/ctl_server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lib/evloop.h"
#include "lib/log.h"

#define OUT_HIGH_WATER (4u * 1024 * 1024) /* stop reading requests above this */
#define MAX_LISTENERS  2
#define IN_CAP         (CTL_HDR_LEN + CTL_MAX_REQUEST) /* one request at its largest */
#define LOG_EVERY_MS   1000 /* refusals are logged at most this often: no log flood */

struct ctl_listener {
	int fd;
	bool read_only;
	unsigned max_clients, n_conns;
	gid_t group;         /* privileged: its members are served; (gid_t)-1: none */
	char group_name[64]; /* for the refusal message (resolved at listen, not per
			      * connection: NSS may block) */
	char path[108];
};

/* At most one log line per LOG_EVERY_MS; the refusals not logged are counted. */
struct log_limit {
	uint64_t last_ms;
	unsigned quiet;
	char note[48];
};

struct ctl_conn {
	struct ctl_server *srv;
	struct ctl_listener *l; /* the socket it came in on */
	int fd;
	bool read_only;
	bool denied;  /* privileged socket, peer not allowed: every request gets EPERM */
	uid_t uid;    /* the peer's, for the refusal message */
	bool closing; /* send what is queued, then close */
	bool eof;     /* the peer sent all it will: serve what is buffered, then close */
	bool gone;    /* the peer cannot read any more: replies are dropped */
	bool queued;  /* on a run queue */
	struct {      /* the streamed reply in progress; next NULL: none */
		ctl_stream_fn next;
		void *cursor;
		void (*free_cursor)(void *cursor);
		uint32_t seq;
		bool waiting; /* next said CTL_WAIT: asked again when retry fires */
	} stream;
	uint8_t *in;
	size_t in_len;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
	struct evtimer *idle;
	struct evtimer *retry; /* a waiting stream's next call */
	struct ctl_conn *next;
	struct ctl_conn *run_next; /* on its run queue */
};

/* Connections with requests waiting to be served, in the order they are served. */
struct run_queue {
	struct ctl_conn *head, **tail;
	unsigned len;
};

enum {
	RUNQ_PRIVILEGED,
	RUNQ_OTHERS,
	N_RUNQ
};

struct ctl_reply {
	struct ctl_conn *conn;
	uint32_t seq;
	int status;
	char error[512];
	int alloc_err;
	size_t mark;        /* unsent bytes when the call began: what it queued is past this */
	ctl_stream_fn next; /* set by ctl_reply_stream */
	void *cursor;
	void (*free_cursor)(void *cursor);
	/* ctl_reply_collect's: records go into this array instead of conn (NULL then). */
	struct json_object *collect;
	size_t collect_max;  /* records kept at most */
	size_t collect_mark; /* records when this call began (ctl_reply_full) */
	bool collect_cut;    /* a record beyond collect_max came */
};

struct ctl_server {
	struct evloop *loop;
	const struct ctl_command *cmds;
	size_t n_cmds;
	void *ctx;
	struct ctl_listener listeners[MAX_LISTENERS];
	int n_listeners;
	struct ctl_conn *conns;
	struct run_queue runq[N_RUNQ];
	int wake_fd; /* eventfd: readable while a run queue is not empty */
	bool woken;
	uid_t self; /* the daemon's effective uid: always allowed */
	struct log_limit denied_log, busy_log;
	struct ctl_server_stats stats;
};

/* True when a line may be logged now; otherwise the event is counted in quiet. */
static bool log_limit_pass(struct log_limit *l)
{
	uint64_t now = evloop_now_ms();

	if (l->last_ms && now - l->last_ms < LOG_EVERY_MS) {
		l->quiet++;
		return false;
	}
	l->last_ms = now;
	return true;
}

/* " (N more since the last report)" for a line that log_limit_pass let through. */
static const char *quiet_note(struct log_limit *l)
{
	if (!l->quiet)
		return "";
	snprintf(l->note, sizeof(l->note), " (%u more since the last report)", l->quiet);
	return l->note;
}

/* ---- run queues ---- */

static void wake_set(struct ctl_server *srv, bool on)
{
	uint64_t v = 1;

	if (on == srv->woken)
		return;
	if (on)
		(void)!write(srv->wake_fd, &v, sizeof(v));
	else
		(void)!read(srv->wake_fd, &v, sizeof(v));
	srv->woken = on;
}

static struct run_queue *runq_of(struct ctl_conn *c)
{
	return &c->srv->runq[c->read_only || c->denied ? RUNQ_OTHERS : RUNQ_PRIVILEGED];
}

static void runq_push(struct ctl_conn *c)
{
	struct run_queue *q = runq_of(c);

	c->run_next = NULL;
	*q->tail = c;
	q->tail = &c->run_next;
	q->len++;
	c->queued = true;
	wake_set(c->srv, true);
}

static struct ctl_conn *runq_pop(struct run_queue *q)
{
	struct ctl_conn *c = q->head;

	if (!c)
		return NULL;
	q->head = c->run_next;
	if (!q->head)
		q->tail = &q->head;
	q->len--;
	c->queued = false;
	return c;
}

static void runq_remove(struct ctl_conn *c)
{
	struct run_queue *q = runq_of(c);

	for (struct ctl_conn **pp = &q->head; *pp; pp = &(*pp)->run_next) {
		if (*pp == c) {
			*pp = c->run_next;
			if (q->tail == &c->run_next)
				q->tail = pp;
			q->len--;
			break;
		}
	}
	c->queued = false;
}

static size_t unsent(const struct ctl_conn *c)
{
	return c->out_len - c->out_off;
}

static void note_out_peak(struct ctl_conn *c)
{
	if (unsent(c) > c->srv->stats.out_peak)
		c->srv->stats.out_peak = unsent(c);
}

/* The stream is over (its END queued) or abandoned: free the handler's cursor. */
static void stream_clear(struct ctl_conn *c)
{
	if (c->stream.next && c->stream.free_cursor)
		c->stream.free_cursor(c->stream.cursor);
	memset(&c->stream, 0, sizeof(c->stream));
	evtimer_stop(c->retry);
}

static void conn_close(struct ctl_conn *c)
{
	struct ctl_server *srv = c->srv;

	if (c->stream.next) {
		srv->stats.streams_dropped++;
		stream_clear(c);
	}
	if (c->queued)
		runq_remove(c);
	for (struct ctl_conn **pp = &srv->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->l->n_conns--;
	evloop_del_fd(srv->loop, c->fd);
	close(c->fd);
	evtimer_free(c->idle);
	evtimer_free(c->retry);
	free(c->in);
	free(c->out);
	free(c);
}

static int out_reserve(struct ctl_conn *c, size_t more)
{
	size_t need = c->out_len + more;

	if (need <= c->out_cap)
		return 0;
	if (c->out_off > 0) { /* compact first */
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		need = c->out_len + more;
		if (need <= c->out_cap)
			return 0;
	}
	size_t cap = c->out_cap ? c->out_cap : 4096;
	while (cap < need)
		cap *= 2;
	uint8_t *p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

static int queue_frame(struct ctl_conn *c, uint16_t type, uint32_t seq, const char *body,
		       size_t len)
{
	struct ctl_hdr h = { CTL_MAGIC, CTL_VERSION, type, (uint32_t)len, seq };

	if (len > CTL_MAX_REPLY)
		return -EMSGSIZE;
	if (out_reserve(c, CTL_HDR_LEN + len) < 0)
		return -ENOMEM;
	ctl_hdr_encode(&h, c->out + c->out_len);
	memcpy(c->out + c->out_len + CTL_HDR_LEN, body, len);
	c->out_len += CTL_HDR_LEN + len;
	return 0;
}

static void queue_end(struct ctl_conn *c, uint32_t seq, int status, const char *error)
{
	struct json_object *o = json_object_new_object();
	const char *s;

	json_object_object_add(o, "status", json_object_new_int(status));
	if (status != CTL_OK)
		json_object_object_add(o, "error", json_object_new_string(error));
	s = json_object_to_json_string_ext(o,
					   JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (queue_frame(c, CTL_MSG_END, seq, s, strlen(s)) < 0)
		c->closing = true; /* cannot even say why: drop the client */
	json_object_put(o);
}

int ctl_reply_record(struct ctl_reply *reply, struct json_object *rec)
{
	if (reply->collect) {
		if (json_object_array_length(reply->collect) >= reply->collect_max) {
			reply->collect_cut = true;
			json_object_put(rec);
			return 0;
		}
		if (json_object_array_add(reply->collect, rec) < 0) {
			json_object_put(rec);
			reply->alloc_err = -ENOMEM;
			return -ENOMEM;
		}
		return 0;
	}
	const char *s = json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN |
								JSON_C_TO_STRING_NOSLASHESCAPE);
	int err = queue_frame(reply->conn, CTL_MSG_RECORD, reply->seq, s, strlen(s));

	json_object_put(rec);
	if (err)
		reply->alloc_err = err;
	return err;
}

void ctl_reply_stream(struct ctl_reply *reply, ctl_stream_fn next, void *cursor,
		      void (*free_cursor)(void *cursor))
{
	if (reply->next && reply->free_cursor) /* called twice: the first one is dropped */
		reply->free_cursor(reply->cursor);
	reply->next = next;
	reply->cursor = cursor;
	reply->free_cursor = free_cursor;
}

bool ctl_reply_full(const struct ctl_reply *reply)
{
	if (reply->collect) /* a piece of about CTL_STREAM_PIECE bytes, or past the cap */
		return reply->collect_cut || json_object_array_length(reply->collect) >=
						 reply->collect_mark + CTL_COLLECT_PIECE;
	return unsent(reply->conn) >= reply->mark + CTL_STREAM_PIECE;
}

int ctl_reply_error(struct ctl_reply *reply, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reply->error, sizeof(reply->error), fmt, ap);
	va_end(ap);
	reply->status = status;
	return status;
}

/* Read only while there is room for it and the client reads its replies; watch for
 * its hang-up only while reading (the hang-up stays signalled: watching it while not
 * reading would spin). */
static void conn_update_events(struct ctl_conn *c)
{
	uint32_t ev = 0;

	if (c->out_len > c->out_off)
		ev |= EPOLLOUT;
	if (!c->closing && !c->eof && c->in_len < IN_CAP &&
	    c->out_len - c->out_off < OUT_HIGH_WATER)
		ev |= EPOLLIN | EPOLLRDHUP;
	evloop_mod_fd(c->srv->loop, c->fd, ev);
}

/* Protocol error: one END frame saying why, then close once it is written. */
static void conn_fail(struct ctl_conn *c, uint32_t seq, int status, const char *why)
{
	c->srv->stats.bad_requests++;
	log_info("control: rejected request: %s", why);
	queue_end(c, seq, status, why);
	c->closing = true;
}

/* "(use the read-only socket or join group G)", or "" when neither exists. */
static void denied_hint(const struct ctl_server *srv, gid_t group, const char *group_name,
			char *buf, size_t len)
{
	bool ro = false;

	for (int i = 0; i < srv->n_listeners; i++)
		ro |= srv->listeners[i].read_only;
	if (ro && group != (gid_t)-1)
		snprintf(buf, len, " (use the read-only socket or join group %s)", group_name);
	else if (ro)
		snprintf(buf, len, " (use the read-only socket)");
	else if (group != (gid_t)-1)
		snprintf(buf, len, " (join group %s)", group_name);
	else
		buf[0] = '\0';
}

static const struct ctl_listener *listener_of(const struct ctl_server *srv, bool read_only)
{
	for (int i = 0; i < srv->n_listeners; i++)
		if (srv->listeners[i].read_only == read_only)
			return &srv->listeners[i];
	return NULL;
}

/* A request from a peer the privileged socket does not serve: EPERM, whatever it is. */
static void refuse_peer(struct ctl_conn *c, uint32_t seq)
{
	struct ctl_server *srv = c->srv;
	const struct ctl_listener *l = listener_of(srv, false);
	char hint[128], msg[192];

	srv->stats.denied++;
	denied_hint(srv, l ? l->group : (gid_t)-1, l ? l->group_name : "", hint, sizeof(hint));
	snprintf(msg, sizeof(msg), "uid %u is not allowed on the privileged socket%s",
		 (unsigned)c->uid, hint);
	if (log_limit_pass(&srv->denied_log)) {
		log_warning("control: %s%s", msg, quiet_note(&srv->denied_log));
		srv->denied_log.quiet = 0;
	}
	queue_end(c, seq, CTL_EPERM, msg);
}

static void dispatch(struct ctl_conn *c, const struct ctl_hdr *h, const uint8_t *body)
{
	struct ctl_server *srv = c->srv;
	/* mark: out_reserve may compact, so keep it relative */
	struct ctl_reply reply = { .conn = c, .seq = h->seq, .status = CTL_OK, .mark = unsent(c) };
	const struct ctl_command *cmd = NULL;
	struct json_object *args = NULL;
	char why[CTL_WHY_LEN];

	srv->stats.requests++;
	if (c->denied) {
		refuse_peer(c, h->seq);
		return;
	}
	for (size_t i = 0; i < srv->n_cmds; i++)
		if (srv->cmds[i].type == h->type)
			cmd = &srv->cmds[i];
	if (!cmd) {
		char msg[64];

		snprintf(msg, sizeof(msg), "unknown request type %u", h->type);
		srv->stats.bad_requests++;
		queue_end(c, h->seq, CTL_EUNKNOWN, msg);
		return;
	}
	if (c->read_only && !cmd->read_only) {
		srv->stats.denied++;
		queue_end(c, h->seq, CTL_EPERM,
			  "this socket is read-only: only show requests are accepted");
		return;
	}
	if (ctl_body_parse(body, h->len, &args, why) < 0) {
		char msg[CTL_WHY_LEN + 16];

		snprintf(msg, sizeof(msg), "request %s", why);
		srv->stats.bad_requests++;
		queue_end(c, h->seq, CTL_EBADREQ, msg);
		return;
	}
	int status = cmd->fn(srv->ctx, args, &reply);
	json_object_put(args);
	if (reply.alloc_err) {
		c->out_len = c->out_off + reply.mark; /* drop the partial answer */
		if (reply.next && reply.free_cursor)
			reply.free_cursor(reply.cursor);
		queue_end(c, h->seq, CTL_EFAILED,
			  reply.alloc_err == -EMSGSIZE ? "reply record too large"
						       : "out of memory building the reply");
		return;
	}
	if (reply.next && status == CTL_OK) {
		srv->stats.streams++;
		c->stream.next = reply.next;
		c->stream.cursor = reply.cursor;
		c->stream.free_cursor = reply.free_cursor;
		c->stream.seq = h->seq;
		note_out_peak(c);
		return; /* the pieces and the END follow on later turns */
	}
	if (reply.next && reply.free_cursor)
		reply.free_cursor(reply.cursor);
	queue_end(c, h->seq, status, reply.error[0] ? reply.error : "failed");
	note_out_peak(c);
}

int ctl_reply_collect(ctl_handler_fn fn, void *ctx, struct json_object *args, size_t max_records,
		      struct json_object *out, bool *truncated)
{
	struct ctl_reply reply = { .status = CTL_OK, .collect = out, .collect_max = max_records };
	int status = fn(ctx, args, &reply);

	/* A streamed reply is driven to its end here, piece after piece, without giving the
	 * loop a turn between them: the cap bounds the work (and a CTL_WAIT stream, a
	 * capture, has no end: it stops at once). */
	while (reply.next && status == CTL_OK && !reply.alloc_err && !reply.collect_cut) {
		reply.collect_mark = json_object_array_length(out);
		status = reply.next(ctx, reply.cursor, &reply);
		if (status != CTL_MORE)
			break;
		status = CTL_OK;
	}
	if (reply.next && reply.free_cursor)
		reply.free_cursor(reply.cursor);
	*truncated = reply.collect_cut;
	if (reply.alloc_err)
		return CTL_EFAILED;
	return status == CTL_WAIT ? CTL_OK : status;
}

/*
 * One piece of the connection's streamed reply; the END and the cursor's release when
 * next says it is done. A piece that cannot be queued ends the reply with an error END
 * after the records already queued (they are whole frames: the client sees a complete
 * prefix of the table, then why it stopped).
 */
static void stream_piece(struct ctl_conn *c)
{
	struct ctl_server *srv = c->srv;
	struct ctl_reply reply = {
		.conn = c, .seq = c->stream.seq, .status = CTL_OK, .mark = unsent(c)
	};
	int status;

	srv->stats.pieces++;
	evtimer_start(c->idle, CTL_IDLE_TIMEOUT_MS, 0); /* a client reading is not idle */
	status = c->stream.next(srv->ctx, c->stream.cursor, &reply);
	if (reply.next && reply.free_cursor) /* not meant for a piece: ignored */
		reply.free_cursor(reply.cursor);
	if (reply.alloc_err) {
		c->out_len = c->out_off + reply.mark;
		queue_end(c, reply.seq, CTL_EFAILED,
			  reply.alloc_err == -EMSGSIZE ? "reply record too large"
						       : "out of memory building the reply");
		stream_clear(c);
	} else if (status == CTL_WAIT) {
		c->stream.waiting = true;
		evtimer_start(c->retry, CTL_STREAM_WAIT_MS, 0);
	} else if (status != CTL_MORE) {
		queue_end(c, reply.seq, status, reply.error[0] ? reply.error : "failed");
		stream_clear(c);
	}
	note_out_peak(c);
}

/*
 * Serve the complete frames in the input buffer, at most budget of them and none
 * after deadline (ns) unless *first (no request served yet this turn). Returns true
 * when it stopped for the budget or the time with a request still waiting.
 */
static bool process_input(struct ctl_conn *c, unsigned budget, uint64_t deadline, bool *first)
{
	size_t off = 0;
	bool more = false;

	while (!c->closing && !c->stream.next && c->in_len - off >= CTL_HDR_LEN &&
	       c->out_len - c->out_off < OUT_HIGH_WATER) {
		struct ctl_hdr h;
		int err;

		if (!budget || (!*first && evloop_now_ns() >= deadline)) {
			more = true;
			break;
		}
		err = ctl_hdr_decode(c->in + off, CTL_MAX_REQUEST, &h);

		if (err == -EPROTO) {
			conn_fail(c, 0, CTL_EBADREQ, "not an ibgw control request (bad magic)");
			break;
		}
		if (err == -EPROTONOSUPPORT) {
			char msg[96];

			snprintf(msg, sizeof(msg),
				 "protocol version %u not supported (this daemon speaks %u)",
				 h.version, CTL_VERSION);
			conn_fail(c, h.seq, CTL_EVERSION, msg);
			break;
		}
		if (err == -EMSGSIZE) {
			char msg[96];

			snprintf(msg, sizeof(msg), "request of %u bytes exceeds the limit of %u",
				 h.len, CTL_MAX_REQUEST);
			conn_fail(c, h.seq, CTL_EBADREQ, msg);
			break;
		}
		if (h.type >= CTL_MSG_RECORD) {
			conn_fail(c, h.seq, CTL_EBADREQ, "reply frame sent as a request");
			break;
		}
		if (c->in_len - off < CTL_HDR_LEN + h.len)
			break; /* body not complete yet */
		dispatch(c, &h, c->in + off + CTL_HDR_LEN);
		off += CTL_HDR_LEN + h.len;
		budget--;
		*first = false;
	}
	if (off > 0) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	return more;
}

/* May the next piece of its stream be served now? */
static bool stream_ready(const struct ctl_conn *c)
{
	return c->stream.next && !c->stream.waiting && !c->closing && !c->gone &&
	       unsent(c) < CTL_STREAM_LOW_WATER;
}

/* Queue the connection for the next turn if it has a request or a piece to serve. */
static void conn_kick(struct ctl_conn *c)
{
	if (c->queued || c->closing)
		return;
	if (c->stream.next ? stream_ready(c)
			   : c->in_len >= CTL_HDR_LEN && unsent(c) < OUT_HIGH_WATER)
		runq_push(c);
}

/* Write what the socket takes now. Returns -1 when the peer is gone for good. */
static int conn_flush(struct ctl_conn *c)
{
	while (c->out_len > c->out_off) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			c->out_off += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			break;
		} else {
			c->out_off = c->out_len = 0;
			return -1;
		}
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	return 0;
}

/*
 * After an event or a turn: close the connection when nothing is left to do for it,
 * else watch what it now needs. Returns true when it was closed.
 */
static bool conn_settle(struct ctl_conn *c)
{
	bool drained = c->out_len == c->out_off;

	if (c->gone && c->stream.next) { /* nobody reads the rest: stop walking */
		c->srv->stats.streams_dropped++;
		stream_clear(c);
		conn_kick(c); /* the requests behind it are still served */
	}
	if ((c->closing && drained) ||
	    ((c->eof || c->gone) && !c->queued && !c->stream.next && drained)) {
		conn_close(c);
		return true;
	}
	if (c->gone) { /* still has queued requests (a write request may matter) */
		evloop_mod_fd(c->srv->loop, c->fd, 0);
		return false;
	}
	conn_update_events(c);
	return false;
}

/* One turn: see the file's opening comment. */
static void serve_turn(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct ctl_server *srv = arg;
	uint64_t deadline = evloop_now_ns() + (uint64_t)CTL_TURN_BUDGET_US * 1000;
	bool first = true;
	(void)loop;
	(void)fd;
	(void)events;

	for (int i = 0; i < N_RUNQ; i++) {
		struct run_queue *q = &srv->runq[i];

		/* each client queued when the turn reached this queue, once */
		for (unsigned n = q->len; n > 0 && q->head; n--) {
			struct ctl_conn *c;
			bool was_stream;

			if (!first && evloop_now_ns() >= deadline)
				goto out;
			c = runq_pop(q);
			was_stream = c->stream.next;
			if (c->stream.next) {
				if (stream_ready(c))
					stream_piece(c);
				first = false;
			} else if (process_input(c, CTL_REQUESTS_PER_TURN, deadline, &first)) {
				srv->stats.deferred++;
				runq_push(c);
			}
			if (conn_flush(c) < 0)
				c->gone = true;
			/* a stream begun or going on, or requests behind one that ended (not
			 * a request still incomplete: that waits for its bytes) */
			if (!c->queued && (c->stream.next ? stream_ready(c)
							  : was_stream && c->in_len >= CTL_HDR_LEN))
				conn_kick(c);
			conn_settle(c);
		}
	}
out:
	if (!srv->runq[RUNQ_PRIVILEGED].head && !srv->runq[RUNQ_OTHERS].head)
		wake_set(srv, false);
}

static void conn_event(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct ctl_conn *c = arg;
	(void)loop;

	if (events & EPOLLIN && !c->eof && c->in_len < IN_CAP) {
		ssize_t n = read(fd, c->in + c->in_len, IN_CAP - c->in_len);

		if (n > 0) {
			c->in_len += (size_t)n;
			evtimer_start(c->idle, CTL_IDLE_TIMEOUT_MS, 0);
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->eof = true; /* peer half-closed: answer what it sent first */
		}
	}
	if (events & EPOLLOUT && conn_flush(c) < 0)
		c->gone = true;
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* Gone: what it sent and we hold is still served (a write request is
		 * carried out as before), but nobody is left to read the replies. */
		c->eof = c->gone = true;
		c->out_off = c->out_len = 0;
	}
	conn_kick(c); /* new requests, or room again below the high-water mark */
	conn_settle(c);
}

/* A waiting stream's time to be asked again. */
static void conn_retry(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct ctl_conn *c = arg;
	(void)loop;
	(void)t;

	c->stream.waiting = false;
	conn_kick(c);
}

static void conn_idle(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	conn_close(arg);
}

bool ctl_peer_allowed(const struct ctl_peer *p, uid_t self, gid_t group)
{
	if (p->uid == 0 || p->uid == self)
		return true;
	if (group == (gid_t)-1)
		return false;
	if (p->gid == group)
		return true;
	for (size_t i = 0; i < p->n_groups; i++)
		if (p->groups[i] == group)
			return true;
	return false;
}

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13; older C libraries lack the name */
#endif

/*
 * May the peer of a privileged connection use it? Credentials that cannot be read
 * refuse (fail closed). *uid gets the peer's uid for the message.
 */
static bool peer_check(const struct ctl_server *srv, const struct ctl_listener *l, int fd,
		       uid_t *uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[256];
	struct ctl_peer p = { 0 };

	*uid = (uid_t)-1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_errno(LOG_WARNING, errno, "control: SO_PEERCRED");
		return false;
	}
	*uid = p.uid = cred.uid;
	p.gid = cred.gid;
	if (ctl_peer_allowed(&p, srv->self, l->group))
		return true;
	if (l->group == (gid_t)-1)
		return false;
	/* Supplementary groups: a peer in more than 256 is judged on the first 256. */
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0 && errno != ERANGE)
		return false;
	p.groups = groups;
	p.n_groups = len / sizeof(gid_t);
	if (p.n_groups > sizeof(groups) / sizeof(groups[0]))
		p.n_groups = sizeof(groups) / sizeof(groups[0]);
	return ctl_peer_allowed(&p, srv->self, l->group);
}

/* One connection too many: say so (best effort, never blocking) and close. */
static void refuse_busy(struct ctl_server *srv, const struct ctl_listener *l, int fd)
{
	const char *kind = l->read_only ? "read-only " : "";
	char body[160];
	uint8_t frame[CTL_HDR_LEN + sizeof(body)];
	int n = snprintf(body, sizeof(body),
			 "{\"status\":%d,\"error\":\"too many %scontrol clients (%u): try again "
			 "later\"}",
			 CTL_EBUSY, kind, l->max_clients);
	struct ctl_hdr h = { CTL_MAGIC, CTL_VERSION, CTL_MSG_END, (uint32_t)n, 0 };

	srv->stats.rejected_busy++;
	if (log_limit_pass(&srv->busy_log)) {
		log_warning("control: %u clients connected to %s, refusing more%s", l->max_clients,
			    l->path, quiet_note(&srv->busy_log));
		srv->busy_log.quiet = 0;
	}
	ctl_hdr_encode(&h, frame);
	memcpy(frame + CTL_HDR_LEN, body, (size_t)n);
	(void)send(fd, frame, CTL_HDR_LEN + (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

static void listener_event(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct ctl_server *srv = arg;
	struct ctl_listener *l = NULL;
	struct ctl_conn *c;
	int cfd;
	(void)events;

	for (int i = 0; i < srv->n_listeners; i++)
		if (srv->listeners[i].fd == fd)
			l = &srv->listeners[i];
	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0 || !l) {
		if (cfd >= 0)
			close(cfd);
		return;
	}
	if (l->n_conns >= l->max_clients) {
		refuse_busy(srv, l, cfd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->in = malloc(IN_CAP);
	if (c) {
		c->idle = evtimer_new(loop, conn_idle, c);
		c->retry = evtimer_new(loop, conn_retry, c);
	}
	if (!c || !c->in || !c->idle || !c->retry ||
	    evloop_add_fd(loop, cfd, EPOLLIN | EPOLLRDHUP, conn_event, c) < 0) {
		if (c) {
			evtimer_free(c->idle);
			evtimer_free(c->retry);
			free(c->in);
		}
		free(c);
		close(cfd);
		return;
	}
	c->srv = srv;
	c->l = l;
	c->fd = cfd;
	c->read_only = l->read_only;
	c->denied = !l->read_only && !peer_check(srv, l, cfd, &c->uid);
	c->next = srv->conns;
	srv->conns = c;
	l->n_conns++;
	srv->stats.accepted++;
	evtimer_start(c->idle, CTL_IDLE_TIMEOUT_MS, 0);
}

int ctl_server_new(struct evloop *loop, const struct ctl_command *cmds, size_t n_cmds, void *ctx,
		   struct ctl_server **out)
{
	struct ctl_server *srv = calloc(1, sizeof(*srv));
	int err;

	if (!srv)
		return -ENOMEM;
	srv->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (srv->wake_fd < 0) {
		err = -errno;
		log_errno(LOG_ERR, -err, "control: eventfd");
		free(srv);
		return err;
	}
	err = evloop_add_fd(loop, srv->wake_fd, EPOLLIN, serve_turn, srv);
	if (err < 0) {
		log_errno(LOG_ERR, -err, "control: watching the eventfd");
		close(srv->wake_fd);
		free(srv);
		return err;
	}
	for (int i = 0; i < N_RUNQ; i++)
		srv->runq[i].tail = &srv->runq[i].head;
	srv->loop = loop;
	srv->cmds = cmds;
	srv->n_cmds = n_cmds;
	srv->ctx = ctx;
	srv->self = geteuid();
	*out = srv;
	return 0;
}

/* A socket file nobody answers on is left over from a crash: safe to replace. */
static bool socket_in_use(const struct sockaddr_un *sun)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd < 0)
		return false;
	live = connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0;
	close(fd);
	return live;
}

/*
 * The group the peer check serves: the socket file's, so that whoever its mode lets in
 * through the group is served (gid, or the daemon's group the file got when gid is -1).
 */
static gid_t socket_group(const char *path, gid_t gid)
{
	struct stat st;

	if (gid != (gid_t)-1)
		return gid;
	return stat(path, &st) == 0 ? st.st_gid : (gid_t)-1;
}

/* The group's name for messages, or its number when it has none. */
static void group_name(gid_t gid, char *buf, size_t len)
{
	struct group gr, *res = NULL;
	char tmp[1024];

	if (gid != (gid_t)-1 && getgrgid_r(gid, &gr, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s", res->gr_name);
	else
		snprintf(buf, len, "%u", (unsigned)gid);
}

int ctl_server_listen(struct ctl_server *srv, const struct ctl_listen_cfg *cfg)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = cfg->path;
	gid_t gid = cfg->gid;
	struct ctl_listener *l;
	int fd, err;

	if (srv->n_listeners == MAX_LISTENERS || listener_of(srv, cfg->read_only))
		return -ENOSPC;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_error("control socket path too long (max %zu): %s", sizeof(sun.sun_path) - 1,
			  path);
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);
	if (socket_in_use(&sun)) {
		log_error("control socket %s is in use: is another ibgwd running?", path);
		return -EADDRINUSE;
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		log_errno(LOG_ERR, err, "control socket");
		return -err;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || chmod(path, cfg->mode) < 0 ||
	    (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) < 0) || listen(fd, 16) < 0) {
		err = errno;
		log_errno(LOG_ERR, err, "control socket %s", path);
		close(fd);
		unlink(path);
		return -err;
	}
	err = evloop_add_fd(srv->loop, fd, EPOLLIN, listener_event, srv);
	if (err < 0) {
		close(fd);
		unlink(path);
		return err;
	}
	l = &srv->listeners[srv->n_listeners++];
	l->fd = fd;
	l->read_only = cfg->read_only;
	l->max_clients = cfg->max_clients ? cfg->max_clients : CTL_MAX_CLIENTS;
	l->n_conns = 0;
	l->group = socket_group(path, gid);
	group_name(l->group, l->group_name, sizeof(l->group_name));
	snprintf(l->path, sizeof(l->path), "%s", path);
	return 0;
}

void ctl_server_free(struct ctl_server *srv)
{
	if (!srv)
		return;
	while (srv->conns)
		conn_close(srv->conns);
	for (int i = 0; i < srv->n_listeners; i++) {
		evloop_del_fd(srv->loop, srv->listeners[i].fd);
		close(srv->listeners[i].fd);
		unlink(srv->listeners[i].path);
	}
	evloop_del_fd(srv->loop, srv->wake_fd);
	close(srv->wake_fd);
	free(srv);
}

void ctl_server_get_stats(const struct ctl_server *srv, struct ctl_server_stats *out)
{
	*out = srv->stats;
}
