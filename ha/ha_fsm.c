/*
 * Failover state machine: peer liveness per path, the per-group election, preemption,
 * switchover and split brain. The rules are stated in ha_fsm.h and docs/failover.md;
 * the comments here say why each step is where it is.
 */
#include "ha/ha_fsm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

#define NEVER UINT64_MAX

enum {
	WIN_HB,
	WIN_SYNC,
	WIN_COUNT
};

struct ha_path {
	bool local_up;
	uint64_t rx_any_ms;   /* last accepted message of the peer's current boot */
	uint64_t rx_fresh_ms; /* last one that echoed our boot id */
	bool peer_hears;      /* bit of the peer's hears bitmap, from its last fresh one */
	bool mismatch_logged;
	uint64_t rx, tx;
};

/* The peer's announcement for one of our groups, from its last fresh heartbeat. */
struct ha_peer_group {
	bool known;
	uint8_t state, priority, flags;
};

struct ha_group {
	struct ha_group_cfg cfg;
	uint32_t id;
	enum ha_state state;
	uint64_t since_ms;
	char reason[HA_REASON_LEN];
	struct ha_peer_group peer;
	bool yielding, yield_manual; /* stepped down, waiting for the peer to take it */
	uint64_t yield_ms;
	bool wanting, want_manual; /* asking the master for the group */
	uint64_t want_ms;
	bool handed_over;       /* gave it away: do not preempt it back */
	bool peer_claimed;      /* MASTER here, and the peer was heard MASTER of it too */
	uint64_t claim_seq;     /* that claim came in a heartbeat that was not fresh, of this
				 * seq (0: a fresh one): let go only when a newer fresh view
				 * says so, or the peer goes silent */
	uint64_t announce_seq;  /* first heartbeat seq that carried the current state */
	uint64_t preempt_since; /* the preempt condition has held since; NEVER: not */
	bool unknown_logged;
};

struct ha_peer {
	bool known;    /* some boot of it was heard */
	bool verified; /* the current boot sent a fresh heartbeat */
	bool alive;    /* a path carried a fresh heartbeat within the dead interval */
	uint64_t boot_id, node_id;
	char name[HA_NAME_LEN];
	uint32_t interval_ms, dead_ms;
	uint64_t last_any_ms;
	uint64_t view_seq;  /* seq of the heartbeat the group views were taken from */
	uint64_t acked_seq; /* highest of our heartbeat seqs the peer says it accepted */
	uint64_t retired[HA_RETIRED_BOOTS];
	unsigned n_retired;
	struct ha_replay_window win[WIN_COUNT];
};

struct ha_fsm {
	struct ha_origin self;
	bool preempt;
	uint32_t preempt_delay_ms, interval_ms, dead_ms, tb_retry_ms;
	unsigned n_paths, n_groups;
	bool has_tb;
	struct ha_key key;
	const struct ha_fsm_ops *ops;
	void *arg;

	uint64_t start_ms;
	uint64_t last_now; /* time of the last input */
	uint64_t hb_seq, sync_seq;
	uint64_t next_send_ms;
	uint64_t echo_sent_ms;      /* last heartbeat sent early because our echo changed */
	uint64_t stall_grace_until; /* after our stall: an unechoed heartbeat shows life */
	bool send_pending;          /* what we announce changed: send before returning */
	bool in_probe;              /* inside the probe_tiebreaker callback */

	struct ha_peer peer;
	enum ha_tiebreak tb;
	uint64_t tb_next_ms;

	struct ha_path paths[HA_MAX_PATHS];
	struct ha_group groups[HA_MAX_GROUPS];

	struct ha_transition log[HA_TRANSITIONS_MAX];
	unsigned log_next, log_count;
	struct ha_status st;
};

static const char *const tb_names[] = {
	[HA_TB_NONE] = "none",
	[HA_TB_PENDING] = "probing",
	[HA_TB_REACHABLE] = "reachable",
	[HA_TB_UNREACHABLE] = "unreachable",
};

const char *ha_tiebreak_name(enum ha_tiebreak t)
{
	return (unsigned)t <= HA_TB_UNREACHABLE ? tb_names[t] : "?";
}

static bool recent(uint64_t t, uint64_t now, uint32_t span)
{
	return t != NEVER && now >= t && now - t < span;
}

/* t moved ms later, not past now (NEVER stays). */
static void shift_heard(uint64_t *t, uint64_t ms, uint64_t now)
{
	if (*t != NEVER)
		*t = *t + ms < now ? *t + ms : now;
}

void ha_fsm_stalled(struct ha_fsm *f, uint64_t ms, uint64_t now)
{
	for (unsigned p = 0; p < f->n_paths; p++) {
		shift_heard(&f->paths[p].rx_fresh_ms, ms, now);
		shift_heard(&f->paths[p].rx_any_ms, ms, now);
	}
	shift_heard(&f->peer.last_any_ms, ms, now);
	f->stall_grace_until = now + f->dead_ms;
}

/* ---- transitions ---- */

static void record_transition(struct ha_fsm *f, unsigned g, enum ha_state from, enum ha_state to,
			      uint64_t now, const char *reason)
{
	struct ha_transition *t = &f->log[f->log_next];

	t->at_ms = now;
	t->group = g;
	t->from = from;
	t->to = to;
	snprintf(t->reason, sizeof(t->reason), "%s", reason);
	f->log_next = (f->log_next + 1) % HA_TRANSITIONS_MAX;
	if (f->log_count < HA_TRANSITIONS_MAX)
		f->log_count++;
	f->st.transitions++;
}

/* The one place a group changes state: log, record, announce, tell the caller. */
static void set_state(struct ha_fsm *f, struct ha_group *g, enum ha_state to, uint64_t now,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void set_state(struct ha_fsm *f, struct ha_group *g, enum ha_state to, uint64_t now,
		      const char *fmt, ...)
{
	enum ha_state from = g->state;
	unsigned gi = (unsigned)(g - f->groups);
	va_list ap;

	if (from == to)
		return;
	va_start(ap, fmt);
	vsnprintf(g->reason, sizeof(g->reason), fmt, ap);
	va_end(ap);
	g->state = to;
	g->since_ms = now;
	g->announce_seq = f->hb_seq + 1;
	g->preempt_since = NEVER;
	g->peer_claimed = false;
	g->claim_seq = 0;
	if (to == HA_STATE_MASTER) {
		/* Mastership gained for any reason ends a handover's restraint. */
		g->handed_over = false;
		g->wanting = false;
		g->yielding = false;
	}
	record_transition(f, gi, from, to, now, g->reason);
	log_msg(to == HA_STATE_FAULT ? LOG_WARNING : LOG_NOTICE, "ha: group %s: %s -> %s: %s",
		g->cfg.name, ha_state_name(from), ha_state_name(to), g->reason);
	f->send_pending = true;
	if (to == HA_STATE_MASTER) {
		if (f->ops->become_master)
			f->ops->become_master(f->arg, gi, g->reason);
	} else if (f->ops->become_backup) {
		f->ops->become_backup(f->arg, gi, to, g->reason);
	}
}

/* ---- election ---- */

/* > 0 if we outrank the peer for group g: priority, then the lower node id, then the
 * lower boot id (only a misconfigured pair has equal node ids). */
static int rank_cmp(const struct ha_fsm *f, const struct ha_group *g)
{
	if (g->cfg.priority != g->peer.priority)
		return g->cfg.priority > g->peer.priority ? 1 : -1;
	if (f->self.node_id != f->peer.node_id)
		return f->self.node_id < f->peer.node_id ? 1 : -1;
	if (f->self.boot_id != f->peer.boot_id)
		return f->self.boot_id < f->peer.boot_id ? 1 : -1;
	return 0;
}

static const char *rank_why(const struct ha_fsm *f, const struct ha_group *g)
{
	if (g->cfg.priority != g->peer.priority)
		return "priority";
	return f->self.node_id != f->peer.node_id ? "equal priority, node id"
						  : "equal priority and node id, boot id";
}

/* ---- group evaluation ---- */

/* Can this node serve g at all? Names the reason in why when not. */
static bool group_fault(const struct ha_fsm *f, const struct ha_group *g, char *why, size_t len)
{
	bool any_up = false;

	for (unsigned p = 0; p < f->n_paths; p++) {
		if (f->paths[p].local_up) {
			any_up = true;
		} else if (g->cfg.track_paths >> p & 1) {
			snprintf(why, len, "tracked path %u is down", p);
			return true;
		}
	}
	if (!any_up)
		snprintf(why, len, "no heartbeat path is up");
	return !any_up;
}

/* The peer is dead on every path (or was never heard). */
static void eval_peer_dead(struct ha_fsm *f, struct ha_group *g, uint64_t now)
{
	const char *what = f->peer.known ? "peer dead on all paths" : "no peer heard";

	/* Nobody to hand over to or ask: a switchover under way ends here. */
	g->yielding = g->wanting = false;
	g->handed_over = false;
	if (g->state == HA_STATE_INIT && now - g->since_ms < f->dead_ms)
		return; /* still giving the peer its dead interval to show up */
	if (!f->has_tb) {
		set_state(f, g, HA_STATE_MASTER, now, "%s", what);
		return;
	}
	switch (f->tb) {
	case HA_TB_REACHABLE:
		set_state(f, g, HA_STATE_MASTER, now, "%s, tiebreaker reachable", what);
		break;
	case HA_TB_UNREACHABLE:
		/* We may be the isolated one: stepping down risks no service, staying up
		 * risks two masters. The first is recoverable, the second corrupts. */
		set_state(f, g, HA_STATE_BACKUP, now, "%s and tiebreaker unreachable", what);
		break;
	case HA_TB_NONE:
	case HA_TB_PENDING:
		break; /* keep what we are until the probe answers */
	}
}

/* BACKUP, peer MASTER: preempt after the delay if we outrank it on priority. */
static void eval_preempt(struct ha_fsm *f, struct ha_group *g, uint64_t now)
{
	bool cond = f->preempt && !g->handed_over && g->cfg.priority > g->peer.priority;

	if (!cond) {
		g->preempt_since = NEVER;
		if (g->wanting && !g->want_manual) {
			g->wanting = false;
			f->send_pending = true;
		}
		return;
	}
	if (g->wanting)
		return;
	if (g->preempt_since == NEVER)
		g->preempt_since = now;
	if (now - g->preempt_since >= f->preempt_delay_ms) {
		g->wanting = true;
		g->want_manual = false;
		g->want_ms = now;
		f->send_pending = true;
		log_info("ha: group %s: asking peer %s (priority %u) for it, priority %u",
			 g->cfg.name, f->peer.name, g->peer.priority, g->cfg.priority);
	}
}

/* MASTER here: if the peer held the group too and has let it go (stepped down, or died),
 * the hosts may still send to it: announce the addresses again. */
static void reclaim_if_let_go(struct ha_fsm *f, struct ha_group *g, uint64_t now, const char *why)
{
	if (!g->peer_claimed || g->state != HA_STATE_MASTER)
		return;
	/* A claim from a heartbeat that was not fresh stands while the peer still sends
	 * and no later fresh view has it let go (a peer that does not hear us keeps
	 * claiming: announcing again at each of its heartbeats would flood the links). */
	if (g->claim_seq && f->peer.view_seq <= g->claim_seq &&
	    recent(f->peer.last_any_ms, now, f->dead_ms))
		return;
	g->peer_claimed = false;
	g->claim_seq = 0;
	if (f->ops->reclaim) /* which logs it (the daemon: with the failover MESSAGE_ID) */
		f->ops->reclaim(f->arg, (unsigned)(g - f->groups), why);
}

static void eval_master(struct ha_fsm *f, struct ha_group *g, uint64_t now)
{
	const struct ha_peer_group *pg = &g->peer;

	if (pg->state == HA_STATE_MASTER) {
		if (rank_cmp(f, g) < 0)
			set_state(f, g, HA_STATE_BACKUP, now,
				  "both MASTER, peer %s wins on %s (%u vs %u)", f->peer.name,
				  rank_why(f, g), pg->priority, g->cfg.priority);
		else {
			g->peer_claimed = true; /* it steps down: see below */
			g->claim_seq = 0;
		}
		return;
	}
	reclaim_if_let_go(f, g, now, "peer stepped down");
	if (pg->state == HA_STATE_BACKUP && (pg->flags & HA_GF_WANT)) {
		/* Step down first, then the peer steps up: never two masters. */
		g->yielding = true;
		g->yield_manual = pg->flags & HA_GF_MANUAL;
		g->yield_ms = now;
		g->handed_over = true;
		if (g->yield_manual)
			set_state(f, g, HA_STATE_BACKUP, now, "manual switchover to peer %s",
				  f->peer.name);
		else
			set_state(f, g, HA_STATE_BACKUP, now, "preempted by higher priority %u",
				  pg->priority);
	}
}

static void eval_backup(struct ha_fsm *f, struct ha_group *g, uint64_t now)
{
	const struct ha_peer_group *pg = &g->peer;
	bool unconfirmed = false;

	if (g->yielding) {
		if (pg->state == HA_STATE_MASTER) {
			g->yielding = false; /* the peer confirmed: handover complete */
			f->send_pending = true;
			return;
		}
		if (now - g->yield_ms < f->dead_ms)
			return;
		g->yielding = false;
		unconfirmed = true;
		f->send_pending = true;
		log_warning("ha: group %s: peer %s did not take over within %u ms", g->cfg.name,
			    f->peer.name, f->dead_ms);
	}
	if (g->wanting && now - g->want_ms >= f->dead_ms) {
		g->wanting = false;
		f->send_pending = true;
		g->preempt_since = NEVER; /* a preempting node asks again after its delay */
		log_warning("ha: group %s: peer %s did not hand over within %u ms", g->cfg.name,
			    f->peer.name, f->dead_ms);
	}
	if (pg->state == HA_STATE_MASTER) {
		eval_preempt(f, g, now);
		return;
	}
	g->preempt_since = NEVER;
	/* The election below needs the peer's reaction to our current state: its view
	 * may predate it (we just left FAULT or INIT, and the peer took the group over in
	 * the meantime). Wait for a heartbeat that acknowledges our announcement. */
	bool current = f->peer.acked_seq >= g->announce_seq;
	if (pg->state == HA_STATE_FAULT)
		set_state(f, g, HA_STATE_MASTER, now, "peer %s is in FAULT", f->peer.name);
	else if (pg->flags & HA_GF_YIELD)
		set_state(f, g, HA_STATE_MASTER, now, "%s: peer %s handed over",
			  pg->flags & HA_GF_MANUAL ? "manual switchover" : "preemption",
			  f->peer.name);
	else if (current && rank_cmp(f, g) > 0)
		set_state(f, g, HA_STATE_MASTER, now, "%selected over peer %s on %s (%u vs %u)",
			  unconfirmed ? "switchover not confirmed; " : "", f->peer.name,
			  rank_why(f, g), g->cfg.priority, pg->priority);
}

static void eval_group(struct ha_fsm *f, struct ha_group *g, uint64_t now)
{
	char why[HA_REASON_LEN];

	if (group_fault(f, g, why, sizeof(why))) {
		g->yielding = g->wanting = false;
		set_state(f, g, HA_STATE_FAULT, now, "%s", why);
		return;
	}
	/* Out of a fault, listen for the peer a dead interval (INIT) before taking over:
	 * a path that comes up late at start (an IPoIB link joining) must not make this
	 * box master before it could hear a live peer. */
	if (g->state == HA_STATE_FAULT)
		set_state(f, g, f->peer.alive ? HA_STATE_BACKUP : HA_STATE_INIT, now,
			  "fault cleared");
	if (!f->peer.alive) {
		eval_peer_dead(f, g, now);
		reclaim_if_let_go(f, g, now, "peer dead");
		return;
	}
	if (g->state == HA_STATE_INIT)
		set_state(f, g, HA_STATE_BACKUP, now, "peer %s heard", f->peer.name);
	if (!g->peer.known) {
		/* The peer's config lacks this group: nobody else can serve it. */
		if (!g->unknown_logged)
			log_warning("ha: group %s is not in peer %s's configuration", g->cfg.name,
				    f->peer.name);
		g->unknown_logged = true;
		set_state(f, g, HA_STATE_MASTER, now, "peer %s does not serve this group",
			  f->peer.name);
		return;
	}
	g->unknown_logged = false;
	if (g->state == HA_STATE_MASTER)
		eval_master(f, g, now);
	else
		eval_backup(f, g, now);
}

static void eval_all(struct ha_fsm *f, uint64_t now)
{
	for (unsigned i = 0; i < f->n_groups; i++)
		eval_group(f, &f->groups[i], now);
}

/* ---- liveness and the tiebreaker ---- */

static void update_liveness(struct ha_fsm *f, uint64_t now)
{
	bool alive = false;

	for (unsigned p = 0; p < f->n_paths; p++)
		if (f->paths[p].local_up && recent(f->paths[p].rx_fresh_ms, now, f->dead_ms))
			alive = true;
	if (alive == f->peer.alive)
		return;
	f->peer.alive = alive;
	f->tb = HA_TB_NONE;
	f->tb_next_ms = now; /* a new split brain gets a new probe at once */
	if (alive)
		log_notice("ha: peer %s (node id %016" PRIx64 ") is alive", f->peer.name,
			   f->peer.node_id);
	else
		log_warning("ha: peer %s is dead on all paths", f->peer.name);
}

static void update_tiebreak(struct ha_fsm *f, uint64_t now)
{
	if (!f->has_tb || f->peer.alive || now - f->start_ms < f->dead_ms ||
	    f->tb == HA_TB_PENDING || now < f->tb_next_ms)
		return;
	f->tb = HA_TB_PENDING;
	if (f->ops->probe_tiebreaker) {
		f->in_probe = true; /* an answer given at once is evaluated by our caller */
		f->ops->probe_tiebreaker(f->arg);
		f->in_probe = false;
	}
}

/* ---- sending ---- */

static uint64_t echo_boot(const struct ha_fsm *f, uint64_t now)
{
	return f->peer.known && recent(f->peer.last_any_ms, now, f->dead_ms) ? f->peer.boot_id : 0;
}

static void fill_heartbeat(const struct ha_fsm *f, uint64_t now, struct ha_heartbeat *hb)
{
	memset(hb, 0, sizeof(*hb));
	hb->echo_boot = echo_boot(f, now);
	hb->echo_seq = hb->echo_boot ? f->peer.win[WIN_HB].highest : 0;
	for (unsigned p = 0; p < f->n_paths; p++)
		if (recent(f->paths[p].rx_any_ms, now, f->dead_ms))
			hb->hears |= 1ull << p;
	hb->interval_ms = f->interval_ms;
	hb->dead_ms = f->dead_ms;
	hb->n_groups = (uint8_t)f->n_groups;
	for (unsigned i = 0; i < f->n_groups; i++) {
		const struct ha_group *g = &f->groups[i];
		struct ha_hb_group *w = &hb->groups[i];
		w->id = g->id;
		w->priority = g->cfg.priority;
		w->state = (uint8_t)g->state;
		w->flags = f->preempt ? HA_GF_PREEMPT : 0;
		if (g->wanting)
			w->flags |= HA_GF_WANT | (g->want_manual ? HA_GF_MANUAL : 0);
		else if (g->yielding)
			w->flags |= HA_GF_YIELD | (g->yield_manual ? HA_GF_MANUAL : 0);
	}
}

/* One copy per path that is up, each with its own sequence number. */
static void send_heartbeats(struct ha_fsm *f, uint64_t now)
{
	struct ha_heartbeat hb;
	uint8_t buf[HA_HB_MAX_LEN];

	fill_heartbeat(f, now, &hb);
	for (unsigned p = 0; p < f->n_paths; p++) {
		if (!f->paths[p].local_up)
			continue;
		hb.path_id = (uint8_t)p;
		size_t len = ha_hb_encode(buf, sizeof(buf), &f->self, ++f->hb_seq, &hb, &f->key);
		if (f->ops->send)
			f->ops->send(f->arg, p, buf, len);
		f->paths[p].tx++;
		f->st.tx++;
	}
	f->next_send_ms = now + f->interval_ms;
	f->send_pending = false;
}

/* End of every input: announce at once what changed, else keep the interval. */
static void finish(struct ha_fsm *f, uint64_t now)
{
	if (f->send_pending || now >= f->next_send_ms)
		send_heartbeats(f, now);
}

/* ---- receiving ---- */

static bool boot_retired(const struct ha_peer *pe, uint64_t boot)
{
	for (unsigned i = 0; i < pe->n_retired; i++)
		if (pe->retired[i] == boot)
			return true;
	return false;
}

/* A boot id we have not seen: take it as the peer's, unless the one we have is a live,
 * verified session (then it is a replay of a run we never saw, or a third box). */
static enum ha_wire_err adopt_boot(struct ha_fsm *f, const struct ha_wire_hdr *h, uint64_t now)
{
	struct ha_peer *pe = &f->peer;

	if (boot_retired(pe, h->boot_id))
		return HA_WIRE_STALE;
	if (pe->known && pe->verified && pe->alive)
		return HA_WIRE_BOOT_CONFLICT;
	/* Only a boot that proved itself fresh is retired: an unverified one may be
	 * a replay, and retiring the real peer's boot on its account would lock it out. */
	if (pe->known && pe->verified) {
		pe->retired[pe->n_retired % HA_RETIRED_BOOTS] = pe->boot_id;
		if (pe->n_retired < HA_RETIRED_BOOTS)
			pe->n_retired++;
	}
	if (pe->known && pe->boot_id != h->boot_id)
		log_notice("ha: peer %s restarted (boot id %016" PRIx64 ")", h->name, h->boot_id);
	pe->known = true;
	pe->verified = false;
	pe->boot_id = h->boot_id;
	pe->view_seq = pe->acked_seq = 0;
	memset(pe->win, 0, sizeof(pe->win));
	for (unsigned p = 0; p < f->n_paths; p++) {
		f->paths[p].rx_any_ms = f->paths[p].rx_fresh_ms = NEVER;
		f->paths[p].peer_hears = false;
	}
	for (unsigned i = 0; i < f->n_groups; i++)
		f->groups[i].peer.known = false;
	update_liveness(f, now);
	return HA_WIRE_OK;
}

/* Anti-replay and boot tracking for a message of window w; commits if accepted. */
static enum ha_wire_err accept_seq(struct ha_fsm *f, const struct ha_wire_hdr *h, int w,
				   uint64_t now)
{
	if (h->node_id == f->self.node_id && h->boot_id == f->self.boot_id)
		return HA_WIRE_SELF;
	if (!f->peer.known || h->boot_id != f->peer.boot_id) {
		if (w != WIN_HB)
			return HA_WIRE_STALE; /* state is taken only from a boot we verified */
		enum ha_wire_err e = adopt_boot(f, h, now);
		if (e != HA_WIRE_OK)
			return e;
	}
	enum ha_wire_err e = ha_replay_check(&f->peer.win[w], h->seq);
	if (e != HA_WIRE_OK)
		return e;
	ha_replay_commit(&f->peer.win[w], h->seq);
	return HA_WIRE_OK;
}

/* Take the peer's announcements. When one changed, answer at once: our heartbeat's
 * echo_seq tells the peer we saw it, which its election may be waiting for. */
static void take_peer_groups(struct ha_fsm *f, const struct ha_heartbeat *hb)
{
	for (unsigned i = 0; i < f->n_groups; i++) {
		struct ha_group *g = &f->groups[i];
		struct ha_peer_group was = g->peer;
		g->peer.known = false;
		for (unsigned j = 0; j < hb->n_groups; j++) {
			if (hb->groups[j].id != g->id)
				continue;
			g->peer.known = true;
			g->peer.state = hb->groups[j].state;
			g->peer.priority = hb->groups[j].priority;
			g->peer.flags = hb->groups[j].flags;
			break;
		}
		if (was.known != g->peer.known || was.state != g->peer.state ||
		    was.flags != g->peer.flags)
			f->send_pending = true;
	}
}

/* The groups we hold that a heartbeat that was not fresh says the peer holds too. */
static void note_peer_claims(struct ha_fsm *f, const struct ha_heartbeat *hb)
{
	for (unsigned j = 0; j < hb->n_groups; j++) {
		if (hb->groups[j].state != HA_STATE_MASTER)
			continue;
		for (unsigned i = 0; i < f->n_groups; i++) {
			struct ha_group *g = &f->groups[i];

			if (g->id == hb->groups[j].id && g->state == HA_STATE_MASTER) {
				g->peer_claimed = true;
				g->claim_seq = hb->hdr.seq;
			}
		}
	}
}

/* Count a refused datagram; log the first of each kind and then at powers of two, so
 * a flood is visible without flooding the log. */
static void count_error(struct ha_fsm *f, unsigned path, enum ha_wire_err e, const char *why)
{
	uint64_t n = ++f->st.rx_err[e];

	if ((n & (n - 1)) == 0)
		log_warning("ha: heartbeat on path %u ignored: %s%s%s (%" PRIu64 " so far)", path,
			    ha_wire_err_name(e), why[0] ? ": " : "", why, n);
}

enum ha_wire_err ha_fsm_heartbeat(struct ha_fsm *f, unsigned path, const uint8_t *buf, size_t len,
				  uint64_t now)
{
	struct ha_heartbeat hb;
	char why[128] = "";
	uint64_t echo_before = echo_boot(f, now);

	f->last_now = now;
	if (path >= f->n_paths) {
		snprintf(why, sizeof(why), "no such path (%u configured)", f->n_paths);
		count_error(f, path, HA_WIRE_MALFORMED, why);
		return HA_WIRE_MALFORMED;
	}
	enum ha_wire_err e = ha_hb_decode(buf, len, &f->key, &hb, why, sizeof(why));
	if (e == HA_WIRE_OK)
		e = accept_seq(f, &hb.hdr, WIN_HB, now);
	if (e != HA_WIRE_OK) {
		count_error(f, path, e, why);
		return e;
	}

	struct ha_peer *pe = &f->peer;
	struct ha_path *pa = &f->paths[path];
	f->st.rx_ok++;
	pa->rx++;
	pe->node_id = hb.hdr.node_id;
	memcpy(pe->name, hb.hdr.name, HA_NAME_LEN);
	pe->interval_ms = hb.interval_ms;
	pe->dead_ms = hb.dead_ms;
	pe->last_any_ms = now;
	pa->rx_any_ms = now;
	if (hb.path_id != path) {
		f->st.path_id_mismatch++;
		if (!pa->mismatch_logged)
			log_warning("ha: heartbeat from %s on path %u says path %u: the two "
				    "configs list failover.paths in different orders",
				    pe->name, path, hb.path_id);
		pa->mismatch_logged = true;
	}
	if (hb.echo_boot == f->self.boot_id) {
		/* Fresh: made after we started, by a peer that hears us. */
		pe->verified = true;
		pa->rx_fresh_ms = now;
		/* Copies on different paths overtake each other: only a newer one may
		 * replace the peer's announced state. */
		if (hb.hdr.seq > pe->view_seq) {
			pe->view_seq = hb.hdr.seq;
			for (unsigned p = 0; p < f->n_paths; p++)
				f->paths[p].peer_hears = hb.hears >> p & 1;
			take_peer_groups(f, &hb);
		}
		if (hb.echo_seq > pe->acked_seq)
			pe->acked_seq = hb.echo_seq;
	} else {
		/* Not fresh: the peer has not heard us for its dead interval and may have
		 * taken our groups over, its hosts told so. Its view is not taken for an
		 * election, but a group it claims that we hold is marked: when the peer lets
		 * it go, we announce its addresses again (reclaim_if_let_go). */
		note_peer_claims(f, &hb);
		/* After a stall of ours the peer took us for dead, and it echoes us again
		 * only once one of our heartbeats reached it: a round trip, which on a loaded
		 * box may not fit in what is left of the dead interval. Until the grace ends,
		 * a heartbeat of its verified boot shows it alive (its view still waits for a
		 * fresh one). */
		if (pe->verified && now < f->stall_grace_until)
			pa->rx_fresh_ms = now;
	}
	update_liveness(f, now);
	eval_all(f, now);
	/* The peer learns that we hear it from our echo: tell it now rather than in an
	 * interval (completes the handshake in one round trip), at most once an interval. */
	if (echo_boot(f, now) != echo_before &&
	    (f->echo_sent_ms == NEVER || now - f->echo_sent_ms >= f->interval_ms)) {
		f->echo_sent_ms = now;
		f->send_pending = true;
	}
	finish(f, now);
	return HA_WIRE_OK;
}

/* ---- other inputs ---- */

void ha_fsm_tick(struct ha_fsm *f, uint64_t now)
{
	f->last_now = now;
	update_liveness(f, now);
	update_tiebreak(f, now);
	eval_all(f, now);
	finish(f, now);
}

void ha_fsm_path_state(struct ha_fsm *f, unsigned path, bool up, uint64_t now)
{
	if (path >= f->n_paths || f->paths[path].local_up == up)
		return;
	f->paths[path].local_up = up;
	log_notice("ha: heartbeat path %u is %s", path, up ? "up" : "down");
	if (!up) /* nothing arrives on a down link: do not wait out its dead interval */
		f->paths[path].rx_fresh_ms = f->paths[path].rx_any_ms = NEVER;
	else /* let the peer hear us on it without waiting an interval */
		f->send_pending = true;
	ha_fsm_tick(f, now);
}

int ha_fsm_switchover(struct ha_fsm *f, unsigned gi, uint64_t now)
{
	const char *refuse = NULL;

	f->last_now = now;
	if (gi >= f->n_groups)
		return -ENOENT;
	struct ha_group *g = &f->groups[gi];
	if (g->yielding || g->wanting)
		return -EALREADY;
	if (!f->peer.alive)
		refuse = "the peer is not alive";
	else if (!g->peer.known)
		refuse = "the peer does not serve this group";
	else if (g->state == HA_STATE_MASTER && g->peer.state != HA_STATE_BACKUP)
		refuse = "the peer is not BACKUP";
	else if (g->state == HA_STATE_BACKUP && g->peer.state != HA_STATE_MASTER)
		refuse = "the peer is not MASTER";
	else if (g->state != HA_STATE_MASTER && g->state != HA_STATE_BACKUP)
		refuse = "this node is neither MASTER nor BACKUP";
	if (refuse) {
		log_warning("ha: group %s: switchover refused: %s", g->cfg.name, refuse);
		return -EAGAIN;
	}
	if (g->state == HA_STATE_MASTER) {
		g->yielding = true;
		g->yield_manual = true;
		g->yield_ms = now;
		g->handed_over = true;
		set_state(f, g, HA_STATE_BACKUP, now, "manual switchover to peer %s", f->peer.name);
	} else {
		g->wanting = true;
		g->want_manual = true;
		g->want_ms = now;
		f->send_pending = true;
		log_notice("ha: group %s: manual switchover: asking peer %s to hand over",
			   g->cfg.name, f->peer.name);
	}
	finish(f, now);
	return 0;
}

void ha_fsm_tiebreaker_result(struct ha_fsm *f, bool reachable, uint64_t now)
{
	if (!f->has_tb || f->tb != HA_TB_PENDING)
		return; /* late answer to a probe of a split brain that has ended */
	f->tb = reachable ? HA_TB_REACHABLE : HA_TB_UNREACHABLE;
	f->tb_next_ms = now + f->tb_retry_ms;
	log_notice("ha: tiebreaker %s", reachable ? "reachable" : "unreachable");
	if (!f->in_probe)
		ha_fsm_tick(f, now);
}

enum ha_wire_err ha_fsm_sync_accept(struct ha_fsm *f, const struct ha_wire_hdr *hdr)
{
	enum ha_wire_err e;

	if (hdr->node_id == f->self.node_id && hdr->boot_id == f->self.boot_id)
		e = HA_WIRE_SELF;
	else if (!f->peer.verified || hdr->boot_id != f->peer.boot_id)
		e = HA_WIRE_STALE;
	else
		e = accept_seq(f, hdr, WIN_SYNC, 0);
	if (e != HA_WIRE_OK)
		f->st.rx_err[e]++;
	return e;
}

uint64_t *ha_fsm_sync_seq(struct ha_fsm *f)
{
	return &f->sync_seq;
}

uint64_t ha_fsm_next_deadline(const struct ha_fsm *f)
{
	uint64_t t = f->next_send_ms;

	/* Only instants after the last input: what was due by then has been handled. */
#define EARLIER(x)                                                                                 \
	do {                                                                                       \
		uint64_t x_ = (x);                                                                 \
		if (x_ > f->last_now && x_ < t)                                                    \
			t = x_;                                                                    \
	} while (0)
	for (unsigned p = 0; p < f->n_paths; p++)
		if (f->paths[p].rx_fresh_ms != NEVER)
			EARLIER(f->paths[p].rx_fresh_ms + f->dead_ms);
	EARLIER(f->start_ms + f->dead_ms); /* the end of INIT */
	for (unsigned i = 0; i < f->n_groups; i++)
		if (f->groups[i].state == HA_STATE_INIT)
			EARLIER(f->groups[i].since_ms + f->dead_ms); /* INIT again after a fault */
	if (f->has_tb && !f->peer.alive && f->tb != HA_TB_PENDING)
		EARLIER(f->tb_next_ms > f->start_ms + f->dead_ms ? f->tb_next_ms
								 : f->start_ms + f->dead_ms);
	for (unsigned i = 0; i < f->n_groups; i++) {
		const struct ha_group *g = &f->groups[i];
		if (g->preempt_since != NEVER)
			EARLIER(g->preempt_since + f->preempt_delay_ms);
		if (g->yielding)
			EARLIER(g->yield_ms + f->dead_ms);
		if (g->wanting)
			EARLIER(g->want_ms + f->dead_ms);
	}
#undef EARLIER
	return t;
}

/* ---- construction ---- */

static bool name_ok(const char *name)
{
	size_t n = strnlen(name, HA_NAME_LEN);

	if (n == 0 || n == HA_NAME_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] < 0x21 || name[i] > 0x7e)
			return false;
	return true;
}

/* Every configuration rule in one place; logs the first broken one. */
static int check_cfg(const struct ha_fsm_cfg *c)
{
	uint32_t interval = c->interval_ms ? c->interval_ms : HA_DEFAULT_INTERVAL_MS;
	uint32_t dead = c->dead_ms ? c->dead_ms : HA_DEFAULT_DEAD_MS;
	const char *bad = NULL;

	if (!name_ok(c->self.name) || c->self.boot_id == 0)
		bad = "node name must be 1..31 printable characters, boot id non-zero";
	else if (c->n_paths == 0 || c->n_paths > HA_MAX_PATHS)
		bad = "need 1..64 heartbeat paths";
	else if (c->n_groups == 0 || c->n_groups > HA_MAX_GROUPS || !c->groups)
		bad = "need 1..64 groups";
	else if (dead < 3 * (uint64_t)interval)
		bad = "dead interval must be at least 3 heartbeat intervals";
	else if (!c->key)
		bad = "no key";
	for (unsigned i = 0; !bad && i < c->n_groups; i++) {
		const struct ha_group_cfg *g = &c->groups[i];
		if (!name_ok(g->name) || g->priority == 0 || g->priority == 255)
			bad = "group names must be 1..31 printable characters, priorities 1..254";
		else if (c->n_paths < 64 && g->track_paths >> c->n_paths)
			bad = "a group tracks a path that does not exist";
		for (unsigned j = 0; !bad && j < i; j++)
			if (ha_group_id(g->name) == ha_group_id(c->groups[j].name))
				bad = "two groups have the same name (or the same id: rename one)";
	}
	if (bad) {
		log_error("ha: bad failover configuration: %s", bad);
		return -EINVAL;
	}
	return 0;
}

int ha_fsm_new(const struct ha_fsm_cfg *c, const struct ha_fsm_ops *ops, void *arg, uint64_t now,
	       struct ha_fsm **out)
{
	int err = check_cfg(c);
	if (err)
		return err;
	struct ha_fsm *f = calloc(1, sizeof(*f));
	if (!f) {
		log_error("ha: out of memory");
		return -ENOMEM;
	}
	f->self = c->self;
	f->preempt = c->preempt;
	f->preempt_delay_ms = c->preempt_delay_ms;
	f->interval_ms = c->interval_ms ? c->interval_ms : HA_DEFAULT_INTERVAL_MS;
	f->dead_ms = c->dead_ms ? c->dead_ms : HA_DEFAULT_DEAD_MS;
	f->tb_retry_ms = c->tiebreaker_retry_ms ? c->tiebreaker_retry_ms : HA_DEFAULT_TB_RETRY_MS;
	f->has_tb = c->has_tiebreaker;
	f->n_paths = c->n_paths;
	f->n_groups = c->n_groups;
	f->key = *c->key;
	f->ops = ops;
	f->arg = arg;
	f->start_ms = now;
	f->last_now = now;
	f->echo_sent_ms = NEVER;
	for (unsigned p = 0; p < f->n_paths; p++) {
		f->paths[p].local_up = true;
		f->paths[p].rx_any_ms = f->paths[p].rx_fresh_ms = NEVER;
	}
	for (unsigned i = 0; i < f->n_groups; i++) {
		struct ha_group *g = &f->groups[i];
		g->cfg = c->groups[i];
		g->id = ha_group_id(g->cfg.name);
		g->state = HA_STATE_INIT;
		g->since_ms = now;
		g->preempt_since = NEVER;
		snprintf(g->reason, sizeof(g->reason), "started");
	}
	*out = f;
	send_heartbeats(f, now);
	return 0;
}

void ha_fsm_free(struct ha_fsm *f)
{
	if (!f)
		return;
	ha_key_clear(&f->key);
	free(f);
}

/* ---- introspection ---- */

void ha_fsm_status(const struct ha_fsm *f, struct ha_status *out)
{
	*out = f->st;
	out->peer_alive = f->peer.alive;
	out->peer_known = f->peer.known;
	memcpy(out->peer_name, f->peer.name, HA_NAME_LEN);
	out->peer_node_id = f->peer.node_id;
	out->peer_boot_id = f->peer.boot_id;
	out->peer_interval_ms = f->peer.interval_ms;
	out->peer_dead_ms = f->peer.dead_ms;
	out->tiebreak = f->tb;
}

enum ha_state ha_fsm_group_state(const struct ha_fsm *f, unsigned g)
{
	return g < f->n_groups ? f->groups[g].state : HA_STATE_FAULT;
}

int ha_fsm_group_status(const struct ha_fsm *f, unsigned gi, struct ha_group_status *out)
{
	if (gi >= f->n_groups)
		return -ENOENT;
	const struct ha_group *g = &f->groups[gi];
	memset(out, 0, sizeof(*out));
	memcpy(out->name, g->cfg.name, HA_NAME_LEN);
	out->state = g->state;
	out->priority = g->cfg.priority;
	out->since_ms = g->since_ms;
	memcpy(out->reason, g->reason, HA_REASON_LEN);
	out->peer_known = g->peer.known;
	out->peer_state = g->peer.state;
	out->peer_priority = g->peer.priority;
	out->peer_flags = g->peer.flags;
	out->yielding = g->yielding;
	out->wanting = g->wanting;
	out->handed_over = g->handed_over;
	return 0;
}

int ha_fsm_path_status(const struct ha_fsm *f, unsigned p, uint64_t now, struct ha_path_status *out)
{
	if (p >= f->n_paths)
		return -ENOENT;
	const struct ha_path *pa = &f->paths[p];
	out->local_up = pa->local_up;
	out->rx_alive = pa->local_up && recent(pa->rx_fresh_ms, now, f->dead_ms);
	out->peer_hears = pa->peer_hears && f->peer.alive;
	out->last_rx_ms = pa->rx_fresh_ms == NEVER ? 0 : pa->rx_fresh_ms;
	out->rx = pa->rx;
	out->tx = pa->tx;
	return 0;
}

unsigned ha_fsm_transitions(const struct ha_fsm *f, struct ha_transition *out, unsigned max)
{
	unsigned n = f->log_count < max ? f->log_count : max;
	unsigned first = (f->log_next + HA_TRANSITIONS_MAX - n) % HA_TRANSITIONS_MAX;

	for (unsigned i = 0; i < n; i++)
		out[i] = f->log[(first + i) % HA_TRANSITIONS_MAX];
	return n;
}
