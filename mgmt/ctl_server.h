/*
 * The daemon's control-socket server: unix stream sockets, framed requests (see
 * ctl_proto.h), a table of command handlers supplied by the daemon.
 *
 * Runs on the control thread's event loop; every call is from that thread. Each
 * listening socket is either privileged (all commands) or read-only (only commands
 * marked read-only, the "show" family), with its own mode, group and client limit
 * (one more is told CTL_EBUSY and closed): idle read-only clients cannot lock the
 * privileged socket's users out. Requests are served in turns: each turn serves every
 * client with requests waiting, privileged ones first, at most CTL_REQUESTS_PER_TURN
 * requests each and CTL_TURN_BUDGET_US in all (what is left stays in the client's
 * buffer for the next turn), so a client pipelining thousands of requests delays the
 * others, and the timers of the same loop (failover heartbeats), by one turn at most.
 * Output is capped per connection (a client that does not read its replies stops
 * being read), idle connections are closed after a timeout.
 *
 * The privileged socket also checks who connected (SO_PEERCRED, SO_PEERGROUPS), so
 * that a too-open socket mode does not hand out write access: root, the daemon's own
 * user and members of the socket's group are served; anyone else gets CTL_EPERM for
 * every request (counted in stats.denied, logged at most once a second).
 */
#ifndef IBGW_MGMT_CTL_SERVER_H
#define IBGW_MGMT_CTL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mgmt/ctl_proto.h"

struct evloop;
struct json_object;
struct ctl_server;
struct ctl_reply;

#define CTL_MAX_CLIENTS     64 /* per socket, unless its ctl_listen_cfg says otherwise */
#define CTL_IDLE_TIMEOUT_MS 30000
/* Per turn of the loop: requests served per client, and the time all of them may take
 * (the first request of a turn is always served, so every turn makes progress). One
 * `show stats` takes some 30 us: a turn stays near 2 ms, far below the failover
 * pair's dead interval. */
#define CTL_REQUESTS_PER_TURN 16
#define CTL_TURN_BUDGET_US    2000

/* A handler adds records to the reply and returns CTL_OK or a ctl_status (after
 * ctl_reply_error has said why). args is NULL when the request had no body. */
typedef int (*ctl_handler_fn)(void *ctx, struct json_object *args, struct ctl_reply *reply);

struct ctl_command {
	uint16_t type;  /* enum ctl_msg_type */
	bool read_only; /* allowed on the read-only socket */
	ctl_handler_fn fn;
};

int ctl_server_new(struct evloop *loop, const struct ctl_command *cmds, size_t n_cmds, void *ctx,
		   struct ctl_server **out);
struct ctl_listen_cfg {
	const char *path;
	mode_t mode;          /* applied with chmod */
	gid_t gid;            /* applied with chown; (gid_t)-1: the daemon's group */
	bool read_only;       /* only commands marked read_only */
	unsigned max_clients; /* connections at once; 0: CTL_MAX_CLIENTS */
};
/*
 * Listen on cfg->path (a stale socket file is replaced; a live one is an error:
 * another daemon owns it). On a privileged socket the members of the file's group
 * (gid, or the daemon's group when -1) are served besides root and the daemon's user.
 * At most one socket of each kind. Returns 0 or -errno, having logged why.
 */
int ctl_server_listen(struct ctl_server *srv, const struct ctl_listen_cfg *cfg);
/* Close every socket and connection and unlink the socket files. */
void ctl_server_free(struct ctl_server *srv);

/*
 * Streamed replies, for tables too large to build whole (a million routes): the
 * handler calls ctl_reply_stream with a function producing the next piece of records
 * and a cursor it owns (where the walk stopped: the last key emitted, say), and returns
 * CTL_OK (a handler that returns an error instead has its cursor freed at once). The
 * server calls next on later turns, one piece per turn for this client, and only while
 * the client's unsent output is below CTL_STREAM_LOW_WATER: the daemon holds at most that
 * plus one piece for it, and the other clients and the loop's timers get their turns
 * between pieces. next appends records (stopping once ctl_reply_full says so) and returns
 * CTL_MORE to be called again, CTL_WAIT when it has nothing yet (a live capture between
 * packets: it is called again CTL_STREAM_WAIT_MS later, the records it appended going
 * out meanwhile), or a final status (after ctl_reply_error for an error): then the END
 * frame goes last. free_cursor (may be NULL) runs once, when the reply ends
 * or when the client goes away in the middle of it. Requests the client pipelined behind
 * a streamed one wait until its END. Records already sent stay sent: a piece that fails
 * ends the reply with an error END after them.
 */
#define CTL_MORE             (-1)
#define CTL_WAIT             (-2)
#define CTL_STREAM_WAIT_MS   20 /* a stream that said CTL_WAIT is asked again after this */
#define CTL_STREAM_LOW_WATER (256u * 1024) /* next piece only below this unsent */
#define CTL_STREAM_PIECE     (64u * 1024)  /* ctl_reply_full after this much */
typedef int (*ctl_stream_fn)(void *ctx, void *cursor, struct ctl_reply *reply);
void ctl_reply_stream(struct ctl_reply *reply, ctl_stream_fn next, void *cursor,
		      void (*free_cursor)(void *cursor));
/* True once this call of a handler or of a stream's next has queued CTL_STREAM_PIECE
 * bytes: time to stop and return CTL_MORE. */
bool ctl_reply_full(const struct ctl_reply *reply);

/*
 * Run a handler in the daemon for a reader that is not a control client (the status page
 * of metrics_http): its records go into out (a JSON array), a streamed reply driven to
 * its end at once, one piece after another, with no turn of the loop between them. At
 * most max_records are kept: the walk stops at the first piece past them and *truncated
 * is set. A stream that says CTL_WAIT (a capture) ends there. The cursor is freed.
 * Returns the handler's (or the last piece's) status: CTL_OK, or an error whose records
 * already collected stay in out. Control thread, as the handlers.
 */
#define CTL_COLLECT_PIECE 256 /* records per piece: ctl_reply_full then */
int ctl_reply_collect(ctl_handler_fn fn, void *ctx, struct json_object *args, size_t max_records,
		      struct json_object *out, bool *truncated);

/* Append one record (takes ownership of rec). Returns 0 or -ENOMEM / -EMSGSIZE. */
int ctl_reply_record(struct ctl_reply *reply, struct json_object *rec);
/* Set the END frame's error text; returns status for "return ctl_reply_error(...)". */
int ctl_reply_error(struct ctl_reply *reply, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Who is at the other end of a connection (SO_PEERCRED, SO_PEERGROUPS). */
struct ctl_peer {
	uid_t uid;
	gid_t gid;
	const gid_t *groups; /* supplementary groups */
	size_t n_groups;
};
/* The privileged socket's rule: uid 0, the daemon's effective uid self, or a member
 * (primary or supplementary) of group ((gid_t)-1: no group rule). */
bool ctl_peer_allowed(const struct ctl_peer *p, uid_t self, gid_t group);

/* Counters, for gwctl show stats later and for tests. denied: requests refused for
 * the socket (read-only) or the peer (privileged socket); deferred: turns a client
 * ended with requests still waiting (its budget or the turn's time ran out); streams:
 * streamed replies begun, pieces: their pieces served, streams_dropped: those whose
 * client went away before the END; out_peak: the most unsent output bytes any
 * connection has held (after a reply or a piece was queued). */
struct ctl_server_stats {
	uint64_t accepted, rejected_busy, requests, bad_requests, denied, deferred;
	uint64_t streams, pieces, streams_dropped, out_peak;
};
void ctl_server_get_stats(const struct ctl_server *srv, struct ctl_server_stats *out);

#endif
