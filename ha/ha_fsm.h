/*
 * The failover pair's decision core: one state machine per service-address group,
 * driven by heartbeats, a clock and local link state, all handed in by the caller. No
 * sockets, no threads, no clock reads: the daemon's control thread feeds it, and the
 * unit tests run two of them back to back on a simulated clock.
 *
 * Inputs: ha_fsm_heartbeat() for every datagram received on a heartbeat path,
 * ha_fsm_tick() at ha_fsm_next_deadline() at the latest (calling it more often is
 * harmless), ha_fsm_path_state() when a path's local link goes up or down,
 * ha_fsm_switchover() for `gwctl ha switchover`, ha_fsm_tiebreaker_result() with the
 * answer to a probe it asked for. Outputs: the callbacks of struct ha_fsm_ops, called
 * from inside those functions.
 *
 * Liveness (BFD-like, per path). Every heartbeat carries the receiver's boot id as the
 * sender last heard it (echo). A heartbeat that echoes our current boot id is fresh: it
 * proves the peer hears us (on some path) and was made after we started. A path is
 * alive while fresh heartbeats arrive on it within the dead interval; the peer is alive
 * while any path is. One broken path never causes a failover.
 *
 * Election, per group, when the peer is alive: the higher priority wins; equal
 * priorities: the lower node id wins (ha_node_id: a hash of the gateway's name, so a
 * given pair always resolves the same way); equal node ids (a misconfiguration): the
 * lower boot id. A BACKUP becomes MASTER only when the peer announces that it is not
 * MASTER of the group, so mastership moves in one order: the old master steps down,
 * then the new one steps up. Two MASTERs meet only after a split brain heals (or a
 * start-up race); then the election's loser steps down on the first fresh heartbeat.
 *
 * Preemption: a BACKUP whose priority is strictly higher than the MASTER's, with
 * preempt on, waits preempt_delay_ms, then asks for the group (WANT flag); the master
 * steps down announcing YIELD, and the asker takes it. Manual switchover works the same
 * way from either side. After a node hands a group over, it does not preempt it back
 * until it becomes MASTER again for another reason.
 *
 * Peer dead on every path: without a tiebreaker, every group this node can serve goes
 * MASTER (VRRP's rule). With one, the FSM asks the caller to probe it (probe_tiebreaker
 * callback) and, until an answer: MASTERs stay MASTER, BACKUPs stay BACKUP. Reachable:
 * every group goes (or stays) MASTER. Unreachable: this node is the isolated one, every
 * MASTER group steps down to BACKUP. The probe is repeated every tiebreaker_retry_ms
 * while the peer stays dead. docs/failover.md has the timers and bounds.
 */
#ifndef IBGW_HA_HA_FSM_H
#define IBGW_HA_HA_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/ha_wire.h"

#define HA_REASON_LEN      96 /* reason strings, NUL included */
#define HA_TRANSITIONS_MAX 32 /* transitions kept for gwctl show ha */

#define HA_DEFAULT_INTERVAL_MS 10
#define HA_DEFAULT_DEAD_MS     40
#define HA_DEFAULT_TB_RETRY_MS 1000

struct ha_group_cfg {
	char name[HA_NAME_LEN];
	uint8_t priority;     /* 1..254 */
	uint64_t track_paths; /* bit p: the group cannot be served while path p is down */
};

struct ha_fsm_cfg {
	struct ha_origin self;        /* node id, boot id (ha_boot_id_new), name */
	bool preempt;                 /* failover.preempt */
	uint32_t preempt_delay_ms;    /* failover.preempt_delay_ms */
	uint32_t interval_ms;         /* heartbeat_interval_ms; 0: 10 */
	uint32_t dead_ms;             /* dead_interval_ms; 0: 40; at least 3 intervals */
	unsigned n_paths;             /* 1..HA_MAX_PATHS heartbeat paths, numbered 0..n-1 */
	bool has_tiebreaker;          /* failover.tiebreaker_address is set */
	uint32_t tiebreaker_retry_ms; /* probe again this often while the peer is dead; 0: 1000 */
	const struct ha_group_cfg *groups; /* 1..HA_MAX_GROUPS, distinct names */
	unsigned n_groups;
	const struct ha_key *key; /* copied */
};

struct ha_fsm_ops {
	/* Send msg on heartbeat path `path` (to the peer's address on it). */
	void (*send)(void *arg, unsigned path, const uint8_t *msg, size_t len);
	/* Group g is now MASTER here: claim its addresses (gratuitous ARP / unsolicited NA
	 * on every link, re-announce proxied addresses). */
	void (*become_master)(void *arg, unsigned g, const char *reason);
	/* Group g went to BACKUP or FAULT (from any state), or back to INIT when a fault
	 * clears while the peer is not heard: make sure its addresses are not held here
	 * (idempotent on the caller's side: INIT -> BACKUP calls it too). */
	void (*become_backup)(void *arg, unsigned g, enum ha_state now, const char *reason);
	/* Group g stayed MASTER here while the peer held it too (a split brain that healed,
	 * a start-up race), and the peer has let it go: announce its addresses again, the
	 * hosts may have learned the peer's hardware address meanwhile. Optional. */
	void (*reclaim)(void *arg, unsigned g, const char *reason);
	/* Probe the tiebreaker address; answer with ha_fsm_tiebreaker_result(), later or
	 * from inside this callback (e.g. "no route": unreachable at once). The other
	 * callbacks must not call into the FSM. */
	void (*probe_tiebreaker)(void *arg);
};

struct ha_fsm;

/* Validate cfg and start every group in INIT (all paths assumed up until told
 * otherwise); sends the first heartbeats at once. Returns 0, -EINVAL (the reason is
 * logged once) or -ENOMEM. */
int ha_fsm_new(const struct ha_fsm_cfg *cfg, const struct ha_fsm_ops *ops, void *arg,
	       uint64_t now_ms, struct ha_fsm **out);
void ha_fsm_free(struct ha_fsm *fsm);

/* A datagram received on heartbeat path `path`. Returns HA_WIRE_OK if it was accepted,
 * else why it was ignored (also counted; see ha_fsm_status). */
enum ha_wire_err ha_fsm_heartbeat(struct ha_fsm *fsm, unsigned path, const uint8_t *buf, size_t len,
				  uint64_t now_ms);
/* Timers: send heartbeats when due, expire paths, preempt delays, switchovers. */
void ha_fsm_tick(struct ha_fsm *fsm, uint64_t now_ms);
/* The time by which ha_fsm_tick must be called next. */
uint64_t ha_fsm_next_deadline(const struct ha_fsm *fsm);
/* This box could not listen for ms up to now (its thread stopped or busy; the caller
 * sees it as a tick that came that late): the peer's silence over that time says
 * nothing, so what was last heard counts as that much younger. Call before the tick. A
 * peer that died meanwhile is then found dead a dead interval after the stall, not at
 * once: a later failover instead of a false one. For a dead interval after the call,
 * the peer's heartbeats that do not echo us yet (it took us for dead) still show it
 * alive: the round trip that makes them fresh again may take that long. */
void ha_fsm_stalled(struct ha_fsm *fsm, uint64_t ms, uint64_t now_ms);
/* The local link of heartbeat path `path` went up or down. */
void ha_fsm_path_state(struct ha_fsm *fsm, unsigned path, bool up, uint64_t now_ms);
/* Hand group g to the peer (on the master) or ask the peer for it (on the backup).
 * Returns 0 (started), -ENOENT (no such group), -EALREADY (one is under way), or
 * -EAGAIN (the peer is not alive, or not in a state to take over: the message is
 * logged). */
int ha_fsm_switchover(struct ha_fsm *fsm, unsigned g, uint64_t now_ms);
/* The answer to the last probe_tiebreaker call. */
void ha_fsm_tiebreaker_result(struct ha_fsm *fsm, bool reachable, uint64_t now_ms);

/* Check a decoded sync message's header against the peer: it must come from the peer's
 * current, verified boot and be new in the sync sequence space. Commits it if OK. */
enum ha_wire_err ha_fsm_sync_accept(struct ha_fsm *fsm, const struct ha_wire_hdr *hdr);
/* Next sequence number for a sync message this node sends (for ha_sync_encode). */
uint64_t *ha_fsm_sync_seq(struct ha_fsm *fsm);

/* ---- introspection, for gwctl show ha ---- */

enum ha_tiebreak {
	HA_TB_NONE,        /* not configured, or the peer is alive */
	HA_TB_PENDING,     /* probe asked, no answer yet */
	HA_TB_REACHABLE,   /* last answer: reachable */
	HA_TB_UNREACHABLE, /* last answer: unreachable */
};
const char *ha_tiebreak_name(enum ha_tiebreak t);

struct ha_group_status {
	char name[HA_NAME_LEN];
	enum ha_state state;
	uint8_t priority;
	uint64_t since_ms;          /* time of the last transition */
	char reason[HA_REASON_LEN]; /* why it is in this state */
	bool peer_known;            /* the peer's heartbeats carry this group */
	enum ha_state peer_state;
	uint8_t peer_priority, peer_flags;
	bool yielding, wanting, handed_over;
};

struct ha_path_status {
	bool local_up;
	bool rx_alive;       /* fresh heartbeats arrive on it within the dead interval */
	bool peer_hears;     /* the peer hears us on it (its hears bitmap) */
	uint64_t last_rx_ms; /* last fresh heartbeat on it; 0: never */
	uint64_t rx, tx;
};

struct ha_status {
	bool peer_alive;
	bool peer_known; /* heard at least once */
	char peer_name[HA_NAME_LEN];
	uint64_t peer_node_id, peer_boot_id;
	uint32_t peer_interval_ms, peer_dead_ms;
	enum ha_tiebreak tiebreak;
	uint64_t rx_ok, tx;
	uint64_t rx_err[HA_WIRE_ERR_COUNT]; /* ignored datagrams by reason */
	uint64_t path_id_mismatch;          /* accepted, but sent on another path id */
	uint64_t transitions;               /* ever, not only those kept */
};

struct ha_transition {
	uint64_t at_ms;
	unsigned group;
	enum ha_state from, to;
	char reason[HA_REASON_LEN];
};

void ha_fsm_status(const struct ha_fsm *fsm, struct ha_status *out);
enum ha_state ha_fsm_group_state(const struct ha_fsm *fsm, unsigned g);
int ha_fsm_group_status(const struct ha_fsm *fsm, unsigned g, struct ha_group_status *out);
int ha_fsm_path_status(const struct ha_fsm *fsm, unsigned path, uint64_t now_ms,
		       struct ha_path_status *out);
/* The last transitions, oldest first, at most max; returns how many were written. */
unsigned ha_fsm_transitions(const struct ha_fsm *fsm, struct ha_transition *out, unsigned max);

#endif
