/*
 * ha/ha_fsm: two state machines wired back to back through a simulated clock (1 ms
 * steps) and simulated paths that can lose, cut (per direction) and delay heartbeats.
 * Each node is ticked only when its ha_fsm_next_deadline() has come, as the daemon
 * will do, so a deadline it forgets to report shows up as a failure here.
 *
 * After every simulated millisecond the harness checks the pair: how many nodes are
 * MASTER of each group (two is counted as dual-master time) and how long no live node
 * was MASTER (the gap). The tests assert on those, on the computed bounds, and on the
 * reasons the transitions give.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>

#include "ha/ha_fsm.h"
#include "lib/log.h"

#define NPATH_MAX 4
#define NGROUP    2
#define QLEN      4096
#define LATENCY   1 /* ms, one way, every path */

struct sim;

struct node {
	struct sim *sim;
	int idx;
	struct ha_fsm *fsm;
	bool down;              /* killed: sends and receives nothing */
	bool tb_reachable;      /* what its tiebreaker probe answers */
	bool probe_pending;     /* answered by the harness one ms later */
	bool tb_answer_at_once; /* answered from inside the probe callback */
	unsigned probes;
	uint64_t last_rx_ms; /* when the last heartbeat was handed to it */
	unsigned to_master[NGROUP], to_backup[NGROUP], reclaims[NGROUP];
	char reason[NGROUP][HA_REASON_LEN];
	struct ha_group_cfg groups[NGROUP];
	struct ha_key key;
};

struct pkt {
	uint64_t at;
	int to;
	unsigned path;
	size_t len;
	uint8_t buf[HA_HB_MAX_LEN];
};

struct sim {
	uint64_t now;
	unsigned n_paths, n_groups;
	struct node n[2];
	struct pkt q[QLEN];
	unsigned head, tail;
	bool cut[2][NPATH_MAX]; /* cut[from][path] */
	uint32_t loss_ppm;      /* per copy, every path */
	uint64_t extra_ms;      /* added to LATENCY, every copy */
	uint64_t rng;
	/* invariants, per group */
	uint64_t dual_ms[NGROUP];
	uint64_t gap_ms[NGROUP], max_gap_ms[NGROUP];
	/* the last heartbeat each node sent, for replay tests */
	struct pkt last[2];
};

static struct sim S; /* large: not on the stack */

/* splitmix64: a seeded, reproducible PRNG */
static uint64_t rnd(struct sim *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void on_send(void *arg, unsigned path, const uint8_t *msg, size_t len)
{
	struct node *nd = arg;
	struct sim *s = nd->sim;

	assert_true(path < s->n_paths);
	memcpy(s->last[nd->idx].buf, msg, len);
	s->last[nd->idx].len = len;
	s->last[nd->idx].path = path;
	if (nd->down || s->cut[nd->idx][path])
		return;
	if (s->loss_ppm && rnd(s) % 1000000 < s->loss_ppm)
		return;
	assert_true(s->tail - s->head < QLEN);
	struct pkt *p = &s->q[s->tail++ % QLEN];
	p->at = s->now + LATENCY + s->extra_ms;
	p->to = 1 - nd->idx;
	p->path = path;
	p->len = len;
	memcpy(p->buf, msg, len);
}

static void on_master(void *arg, unsigned g, const char *reason)
{
	struct node *nd = arg;
	nd->to_master[g]++;
	snprintf(nd->reason[g], HA_REASON_LEN, "%s", reason);
}

static void on_backup(void *arg, unsigned g, enum ha_state now, const char *reason)
{
	struct node *nd = arg;
	(void)now;
	nd->to_backup[g]++;
	snprintf(nd->reason[g], HA_REASON_LEN, "%s", reason);
}

static void on_reclaim(void *arg, unsigned g, const char *reason)
{
	struct node *nd = arg;
	nd->reclaims[g]++;
	snprintf(nd->reason[g], HA_REASON_LEN, "%s", reason);
}

static void on_probe(void *arg)
{
	struct node *nd = arg;
	nd->probes++;
	if (nd->tb_answer_at_once)
		ha_fsm_tiebreaker_result(nd->fsm, nd->tb_reachable, nd->sim->now);
	else
		nd->probe_pending = true;
}

static const struct ha_fsm_ops ops = {
	.send = on_send,
	.become_master = on_master,
	.become_backup = on_backup,
	.reclaim = on_reclaim,
	.probe_tiebreaker = on_probe,
};

struct opts {
	uint8_t prio[2][NGROUP];
	bool preempt[2];
	uint32_t preempt_delay_ms;
	bool tiebreaker;
	uint64_t track[2][NGROUP];
	const char *key[2];
	uint64_t node_id[2];
};

static void sim_init(unsigned n_paths, unsigned n_groups, uint64_t seed)
{
	memset(&S, 0, sizeof(S));
	S.n_paths = n_paths;
	S.n_groups = n_groups;
	S.rng = seed;
	S.now = 1000; /* not 0: time 0 is not special */
	for (int i = 0; i < 2; i++) {
		S.n[i].sim = &S;
		S.n[i].idx = i;
		S.n[i].down = true;
	}
}

/* Start (or restart, with a new boot id) node i now. */
static void node_start(int i, const struct opts *o)
{
	struct node *nd = &S.n[i];
	static const char *const names[2] = { "gw-a", "gw-b" };
	const char *key = o->key[i] ? o->key[i] : "a shared secret of some length";

	if (nd->fsm)
		ha_fsm_free(nd->fsm);
	for (unsigned g = 0; g < S.n_groups; g++) {
		snprintf(nd->groups[g].name, HA_NAME_LEN, "group%u", g);
		nd->groups[g].priority = o->prio[i][g];
		nd->groups[g].track_paths = o->track[i][g];
	}
	assert_int_equal(ha_key_set(&nd->key, (const uint8_t *)key, strlen(key)), 0);
	struct ha_fsm_cfg c = {
		.self = { .node_id = o->node_id[i] ? o->node_id[i] : ha_node_id(names[i]),
			  .boot_id = ha_boot_id_new() },
		.preempt = o->preempt[i],
		.preempt_delay_ms = o->preempt_delay_ms,
		.n_paths = S.n_paths,
		.has_tiebreaker = o->tiebreaker,
		.groups = nd->groups,
		.n_groups = S.n_groups,
		.key = &nd->key,
	};
	snprintf(c.self.name, HA_NAME_LEN, "%s", names[i]);
	nd->down = false;
	assert_int_equal(ha_fsm_new(&c, &ops, nd, S.now, &nd->fsm), 0);
}

static void node_kill(int i)
{
	S.n[i].down = true;
}

static enum ha_state st(int i, unsigned g)
{
	return ha_fsm_group_state(S.n[i].fsm, g);
}

static bool is_master(int i, unsigned g)
{
	return !S.n[i].down && S.n[i].fsm && st(i, g) == HA_STATE_MASTER;
}

static void check_pair(void)
{
	for (unsigned g = 0; g < S.n_groups; g++) {
		int m = is_master(0, g) + is_master(1, g);
		if (m == 2)
			S.dual_ms[g]++;
		if (m == 0) {
			S.gap_ms[g]++;
			if (S.gap_ms[g] > S.max_gap_ms[g])
				S.max_gap_ms[g] = S.gap_ms[g];
		} else {
			S.gap_ms[g] = 0;
		}
	}
}

/* One simulated millisecond: deliveries due, probe answers, due ticks, then checks. */
static void step(void)
{
	S.now++;
	while (S.head != S.tail && S.q[S.head % QLEN].at <= S.now) {
		struct pkt *p = &S.q[S.head++ % QLEN];
		struct node *to = &S.n[p->to];
		if (!to->down && to->fsm) {
			ha_fsm_heartbeat(to->fsm, p->path, p->buf, p->len, S.now);
			to->last_rx_ms = S.now;
		}
	}
	for (int i = 0; i < 2; i++) {
		struct node *nd = &S.n[i];
		if (nd->down || !nd->fsm)
			continue;
		if (nd->probe_pending) {
			nd->probe_pending = false;
			ha_fsm_tiebreaker_result(nd->fsm, nd->tb_reachable, S.now);
		}
		uint64_t d = ha_fsm_next_deadline(nd->fsm);
		assert_true(d > S.now - 1); /* never a deadline already handled */
		if (d <= S.now)
			ha_fsm_tick(nd->fsm, S.now);
	}
	check_pair();
}

static void run(uint64_t ms)
{
	for (uint64_t i = 0; i < ms; i++)
		step();
}

/* Run until cond holds (at most limit ms); returns the ms it took. */
#define RUN_UNTIL(cond, limit)                                                                     \
	({                                                                                         \
		uint64_t t0_ = S.now;                                                              \
		while (!(cond) && S.now - t0_ < (limit))                                           \
			step();                                                                    \
		assert_true(cond);                                                                 \
		S.now - t0_;                                                                       \
	})

static void cut_all(bool cut)
{
	for (unsigned p = 0; p < S.n_paths; p++)
		S.cut[0][p] = S.cut[1][p] = cut;
}

static void sim_end(void)
{
	for (int i = 0; i < 2; i++) {
		ha_fsm_free(S.n[i].fsm);
		S.n[i].fsm = NULL;
	}
}

static const struct opts defaults = {
	.prio = { { 150, 100 }, { 100, 150 } },
	.preempt = { true, true },
};

/* ---- tests ---- */

/* Both start together: each group goes to its higher-priority node (active/active),
 * with no moment of two masters; equal priorities go to the lower node id. */
static void election(void **state)
{
	(void)state;
	sim_init(2, 2, 1);
	node_start(0, &defaults);
	node_start(1, &defaults);
	run(300);
	assert_int_equal(st(0, 0), HA_STATE_MASTER);
	assert_int_equal(st(1, 0), HA_STATE_BACKUP);
	assert_int_equal(st(0, 1), HA_STATE_BACKUP);
	assert_int_equal(st(1, 1), HA_STATE_MASTER);
	assert_int_equal(S.dual_ms[0] + S.dual_ms[1], 0);
	/* handshake (2 one-way trips), then the ack of our BACKUP (2 more); nobody waited
	 * out the dead interval */
	printf("# election: no master for the first %llu ms\n",
	       (unsigned long long)S.max_gap_ms[0]);
	assert_true(S.max_gap_ms[0] <= 4 * LATENCY + 1);
	assert_non_null(
	    strstr(S.n[0].reason[0], "elected over peer gw-b on priority (150 vs 100)"));
	struct ha_status hs;
	ha_fsm_status(S.n[0].fsm, &hs);
	assert_true(hs.peer_alive);
	assert_string_equal(hs.peer_name, "gw-b");
	assert_int_equal(hs.rx_err[HA_WIRE_BAD_MAC], 0);
	sim_end();

	struct opts eq = { .prio = { { 100 }, { 100 } }, .node_id = { 7, 3 } };
	sim_init(1, 1, 2);
	node_start(0, &eq);
	node_start(1, &eq);
	run(300);
	assert_int_equal(st(1, 0), HA_STATE_MASTER); /* node id 3 < 7 */
	assert_int_equal(st(0, 0), HA_STATE_BACKUP);
	assert_non_null(strstr(S.n[1].reason[0], "equal priority, node id"));
	assert_int_equal(S.dual_ms[0], 0);
	sim_end();
}

/* A lone node waits one dead interval in INIT, then takes every group. */
static void alone(void **state)
{
	(void)state;
	sim_init(2, 2, 3);
	node_start(0, &defaults);
	uint64_t t = RUN_UNTIL(is_master(0, 0) && is_master(0, 1), 1000);
	assert_true(t >= HA_DEFAULT_DEAD_MS && t <= HA_DEFAULT_DEAD_MS + 1);
	assert_string_equal(S.n[0].reason[0], "no peer heard");
	sim_end();
}

/* Kill the master: the backup takes over within dead interval + one heartbeat interval
 * of the death (the last heartbeat left at most one interval before it, and is
 * declared stale dead_ms after it arrived), and not before dead - interval. */
static void master_death(void **state)
{
	const uint64_t bound = HA_DEFAULT_DEAD_MS + HA_DEFAULT_INTERVAL_MS;
	(void)state;

	for (uint64_t phase = 0; phase < 20; phase += 7) {
		sim_init(2, 2, 4 + phase);
		node_start(0, &defaults);
		node_start(1, &defaults);
		run(500 + phase);
		assert_true(is_master(0, 0));
		node_kill(0);
		uint64_t t = RUN_UNTIL(is_master(1, 0), 1000);
		assert_true(t <= bound);
		assert_true(t >= HA_DEFAULT_DEAD_MS - HA_DEFAULT_INTERVAL_MS);
		assert_string_equal(S.n[1].reason[0], "peer dead on all paths");
		assert_true(is_master(1, 1));             /* it kept its own group */
		assert_int_equal(S.n[1].to_backup[1], 1); /* only INIT -> BACKUP, never lost it */
		sim_end();
	}
}

/* The dead interval to the millisecond: the backup takes over exactly dead_ms after the
 * last heartbeat it received, not a tick or a heartbeat interval later. */
static void dead_interval_exact(void **state)
{
	(void)state;
	for (uint64_t phase = 0; phase < 40; phase += 13) {
		sim_init(2, 1, 20 + phase);
		node_start(0, &defaults);
		node_start(1, &defaults);
		run(500 + phase);
		assert_true(is_master(0, 0));
		node_kill(0);
		RUN_UNTIL(is_master(1, 0), 1000);
		assert_int_equal(S.now - S.n[1].last_rx_ms, HA_DEFAULT_DEAD_MS);
		sim_end();
	}
}

/* One path cut, both ways or one way: the peer stays alive on the other; no
 * transition at all. The path's status shows it dead. */
/* The backup's process stops for 300 ms (hears nothing, ticks never). Resumed and told
 * how long it could not listen (ha_fsm_stalled, as dp_ha does for a late tick), it waits
 * for the master's next heartbeat; not told, it takes the master for dead at once. */
static void stalled_backup(void **state)
{
	(void)state;
	for (int told = 0; told < 2; told++) {
		unsigned before;

		sim_init(2, 1, 11);
		node_start(0, &defaults);
		node_start(1, &defaults);
		run(500);
		assert_true(is_master(0, 0));
		assert_false(is_master(1, 0));
		before = S.n[1].to_master[0];
		S.n[1].down = true;
		run(300);
		S.n[1].down = false;
		if (told)
			ha_fsm_stalled(S.n[1].fsm, 300, S.now);
		ha_fsm_tick(S.n[1].fsm, S.now); /* the late tick */
		run(200);
		if (told) {
			assert_int_equal(S.n[1].to_master[0], before);
			assert_int_equal(S.dual_ms[0], 0);
		} else {
			assert_true(S.n[1].to_master[0] > before); /* the false takeover */
		}
		assert_true(is_master(0, 0));
		sim_end();
	}
}

/* The same stall on a slow network (25 ms each way): the master took the backup for dead,
 * and its heartbeats echo the backup again only after a round trip (50 ms) longer than the
 * dead interval (40 ms). The backup, told of its stall, still takes them as the master's
 * life meanwhile: no transition on either side. */
static void stalled_backup_slow_round_trip(void **state)
{
	(void)state;
	sim_init(2, 1, 12);
	S.extra_ms = 24;
	node_start(0, &defaults);
	node_start(1, &defaults);
	run(1000);
	assert_true(is_master(0, 0));
	assert_false(is_master(1, 0));
	unsigned before = S.n[1].to_master[0], before0 = S.n[0].to_backup[0];
	uint64_t dual = S.dual_ms[0]; /* the start, 25 ms away, had some */
	S.n[1].down = true;
	run(300);
	S.n[1].down = false;
	ha_fsm_stalled(S.n[1].fsm, 300, S.now);
	ha_fsm_tick(S.n[1].fsm, S.now);
	run(500);
	assert_int_equal(S.n[1].to_master[0], before);
	assert_int_equal(S.n[0].to_backup[0], before0);
	assert_int_equal(S.dual_ms[0], dual);
	assert_true(is_master(0, 0));
	sim_end();
}

static void one_path_cut(void **state)
{
	struct ha_path_status ps;
	struct ha_status hs;
	(void)state;

	sim_init(2, 2, 5);
	node_start(0, &defaults);
	node_start(1, &defaults);
	run(300);
	struct ha_status h0, h1;
	ha_fsm_status(S.n[0].fsm, &h0);
	ha_fsm_status(S.n[1].fsm, &h1);
	S.cut[0][0] = S.cut[1][0] = true;
	run(2000);
	assert_int_equal(ha_fsm_path_status(S.n[1].fsm, 0, S.now, &ps), 0);
	assert_false(ps.rx_alive);
	assert_int_equal(ha_fsm_path_status(S.n[1].fsm, 1, S.now, &ps), 0);
	assert_true(ps.rx_alive);
	assert_true(ps.peer_hears);
	S.cut[0][0] = S.cut[1][0] = false;
	S.cut[1][1] = true; /* one way only, on the other path */
	run(2000);
	ha_fsm_status(S.n[0].fsm, &hs);
	assert_true(hs.peer_alive);
	assert_int_equal(hs.transitions, h0.transitions);
	ha_fsm_status(S.n[1].fsm, &hs);
	assert_int_equal(hs.transitions, h1.transitions);
	assert_int_equal(S.dual_ms[0] + S.dual_ms[1], 0);
	assert_true(is_master(0, 0) && is_master(1, 1));
	sim_end();
}

/* Every path cut, no tiebreaker: both become MASTER (VRRP's rule). When the paths heal
 * exactly one master remains within one heartbeat interval plus three one-way trips
 * (the next heartbeat; the handshake's reply; the loser's step-down on the first fresh
 * heartbeat). */
static void split_brain_no_tiebreaker(void **state)
{
	(void)state;
	sim_init(2, 1, 6);
	struct opts o = { .prio = { { 150 }, { 100 } }, .preempt = { true, true } };
	node_start(0, &o);
	node_start(1, &o);
	run(300);
	cut_all(true);
	RUN_UNTIL(is_master(1, 0), HA_DEFAULT_DEAD_MS + HA_DEFAULT_INTERVAL_MS);
	run(500);
	assert_true(is_master(0, 0) && is_master(1, 0));
	for (uint64_t heal_phase = 0; heal_phase < 3; heal_phase++) {
		cut_all(false);
		uint64_t t = RUN_UNTIL(!(is_master(0, 0) && is_master(1, 0)),
				       HA_DEFAULT_INTERVAL_MS + 3 * LATENCY);
		assert_true(t <= HA_DEFAULT_INTERVAL_MS + 3 * LATENCY);
		assert_true(is_master(0, 0)); /* the election's winner */
		assert_non_null(strstr(S.n[1].reason[0], "both MASTER, peer gw-a wins"));
		unsigned reclaims = S.n[0].reclaims[0];
		run(300);
		assert_true(is_master(0, 0) && !is_master(1, 0));
		/* The winner announced its addresses again once the loser let go (the hosts
		 * may have the loser's address): once per heal, never on the loser. */
		assert_int_equal(S.n[0].reclaims[0], reclaims + 1);
		assert_int_equal(S.n[0].reclaims[0], heal_phase + 1);
		assert_int_equal(S.n[1].reclaims[0], 0);
		/* split again, heal at another phase of the heartbeat interval */
		cut_all(true);
		RUN_UNTIL(is_master(1, 0), HA_DEFAULT_DEAD_MS + HA_DEFAULT_INTERVAL_MS);
		run(333 + 7 * heal_phase);
	}
	sim_end();
}

/* One way cut: B stops hearing A and takes the group (its heartbeats, not fresh,
 * claim it), while A still hears B and stays MASTER. A does not announce at each of
 * B's claims; when the cut heals and B steps down, A announces its addresses again
 * once (B's takeover told the hosts B's address). */
static void one_way_split_reclaim(void **state)
{
	(void)state;
	sim_init(2, 1, 12);
	struct opts o = { .prio = { { 150 }, { 100 } }, .preempt = { true, true } };
	node_start(0, &o);
	node_start(1, &o);
	run(300);
	assert_true(is_master(0, 0) && !is_master(1, 0));
	S.cut[0][0] = S.cut[0][1] = true;
	RUN_UNTIL(is_master(1, 0), HA_DEFAULT_DEAD_MS + HA_DEFAULT_INTERVAL_MS);
	run(500);
	assert_true(is_master(0, 0) && is_master(1, 0));
	assert_int_equal(S.n[0].reclaims[0], 0);
	S.cut[0][0] = S.cut[0][1] = false;
	run(300);
	assert_true(is_master(0, 0) && !is_master(1, 0));
	assert_int_equal(S.n[0].reclaims[0], 1);
	assert_int_equal(S.n[1].reclaims[0], 0);
	sim_end();
}

/* Every path cut, with a tiebreaker: the node that reaches it is MASTER, the one that
 * does not steps down; when neither reaches it, nobody is MASTER (documented). */
static void split_brain_tiebreaker(void **state)
{
	struct ha_status hs;
	(void)state;
	struct opts o = { .prio = { { 150 }, { 100 } }, .tiebreaker = true };

	sim_init(2, 1, 7);
	node_start(0, &o);
	node_start(1, &o);
	run(300);
	assert_true(is_master(0, 0));
	assert_int_equal(S.n[0].probes + S.n[1].probes, 0); /* no probe while the peer lives */
	S.n[0].tb_reachable = false;                        /* the master is the isolated one */
	S.n[1].tb_reachable = true;
	cut_all(true);
	RUN_UNTIL(is_master(1, 0) && !is_master(0, 0), 500);
	assert_string_equal(S.n[1].reason[0], "peer dead on all paths, tiebreaker reachable");
	assert_string_equal(S.n[0].reason[0], "peer dead on all paths and tiebreaker unreachable");
	assert_true(S.dual_ms[0] <= 1); /* both detect in the same ms; answers come 1 ms later */
	unsigned p = S.n[0].probes;
	run(2500); /* probes repeat every tiebreaker_retry_ms while the split lasts */
	assert_true(S.n[0].probes >= p + 2);
	/* heal: preempt is off, so the node that took over keeps the group */
	cut_all(false);
	run(300);
	assert_true(is_master(1, 0) && !is_master(0, 0));
	ha_fsm_status(S.n[0].fsm, &hs);
	assert_int_equal(hs.tiebreak, HA_TB_NONE);

	/* neither reaches the tiebreaker: the master steps down, nobody serves (one of
	 * them answers its probes from inside the callback) */
	S.n[0].tb_reachable = S.n[1].tb_reachable = false;
	S.n[1].tb_answer_at_once = true;
	cut_all(true);
	run(HA_DEFAULT_DEAD_MS + HA_DEFAULT_INTERVAL_MS + 10);
	assert_false(is_master(0, 0) || is_master(1, 0));
	/* heal: both BACKUP, the election picks the higher priority at once */
	cut_all(false);
	uint64_t t = RUN_UNTIL(is_master(0, 0), HA_DEFAULT_INTERVAL_MS + 3 * LATENCY);
	assert_true(t <= HA_DEFAULT_INTERVAL_MS + 3 * LATENCY);
	assert_false(is_master(1, 0));
	sim_end();
}

/* A higher-priority node joining a running master: with preempt it takes the group
 * after preempt_delay_ms, through a handover (never two masters); without it, or at
 * equal priority, not. */
static void preemption(void **state)
{
	(void)state;
	for (int delay = 0; delay <= 1; delay++) {
		struct opts o = { .prio = { { 150 }, { 100 } },
				  .preempt = { true, true },
				  .preempt_delay_ms = delay ? 500 : 0 };
		sim_init(2, 1, 8);
		node_start(1, &o);
		run(300);
		assert_true(is_master(1, 0));
		memset(S.max_gap_ms, 0, sizeof(S.max_gap_ms));
		node_start(0, &o);
		uint64_t t = RUN_UNTIL(is_master(0, 0), 2000);
		/* INIT ends on the first fresh heartbeat (2 trips), then the delay, then
		 * WANT -> YIELD -> MASTER (2 trips) */
		assert_true(t >= o.preempt_delay_ms);
		assert_true(t <= o.preempt_delay_ms + 4 * LATENCY + 2);
		assert_int_equal(S.dual_ms[0], 0);
		assert_true(S.max_gap_ms[0] <= LATENCY);
		assert_string_equal(S.n[1].reason[0], "preempted by higher priority 150");
		assert_string_equal(S.n[0].reason[0], "preemption: peer gw-b handed over");
		sim_end();
	}

	/* Equal priority: no preemption, even by the node that would win an election
	 * (the lower node id); the running master keeps the group. */
	struct opts eq = { .prio = { { 100 }, { 100 } },
			   .preempt = { true, true },
			   .node_id = { 3, 7 } };
	sim_init(2, 1, 10);
	node_start(1, &eq);
	run(300);
	assert_true(is_master(1, 0));
	node_start(0, &eq);
	run(3000);
	assert_true(is_master(1, 0) && !is_master(0, 0));
	assert_int_equal(S.n[1].to_backup[0], 0);
	sim_end();

	struct opts off = { .prio = { { 150 }, { 100 } } };
	sim_init(2, 1, 9);
	node_start(1, &off);
	run(300);
	node_start(0, &off);
	run(3000);
	assert_true(is_master(1, 0) && !is_master(0, 0));
	assert_int_equal(S.n[1].to_backup[0], 0); /* INIT -> MASTER, never lost it */
	sim_end();
}

/* Manual switchover, started on the master or asked by the backup: at no simulated ms
 * two masters; no master for at most one one-way trip (one interval when the first
 * handover heartbeat is lost); the node that handed over does not preempt back. */
static void manual_switchover(void **state)
{
	(void)state;
	for (int side = 0; side < 3; side++) {
		sim_init(2, 1, 10);
		struct opts o = { .prio = { { 150 }, { 100 } }, .preempt = { true, true } };
		node_start(0, &o);
		node_start(1, &o);
		run(300);
		assert_true(is_master(0, 0));
		memset(S.max_gap_ms, 0, sizeof(S.max_gap_ms));
		if (side == 2) /* lose the step-down's first copies */
			cut_all(true);
		assert_int_equal(ha_fsm_switchover(S.n[side == 1].fsm, 0, S.now), 0);
		assert_int_equal(ha_fsm_switchover(S.n[side == 1].fsm, 0, S.now), -EALREADY);
		if (side == 2) {
			step();
			cut_all(false);
		}
		RUN_UNTIL(is_master(1, 0), 200);
		assert_int_equal(S.dual_ms[0], 0);
		assert_true(S.max_gap_ms[0] <=
			    (side == 2 ? HA_DEFAULT_INTERVAL_MS + LATENCY : LATENCY));
		assert_string_equal(S.n[1].reason[0], "manual switchover: peer gw-a handed over");
		assert_string_equal(S.n[0].reason[0], "manual switchover to peer gw-b");
		run(3000); /* preempt is on and gw-a outranks gw-b: it still stays BACKUP */
		assert_true(is_master(1, 0) && !is_master(0, 0));
		assert_int_equal(S.dual_ms[0], 0);
		/* and back again, from the other side */
		assert_int_equal(ha_fsm_switchover(S.n[1].fsm, 0, S.now), 0);
		RUN_UNTIL(is_master(0, 0), 200);
		assert_int_equal(S.dual_ms[0], 0);
		sim_end();
	}

	/* refusals */
	sim_init(1, 1, 11);
	struct opts o = { .prio = { { 150 }, { 100 } } };
	node_start(0, &o);
	run(300);
	assert_int_equal(ha_fsm_switchover(S.n[0].fsm, 5, S.now), -ENOENT);
	assert_int_equal(ha_fsm_switchover(S.n[0].fsm, 0, S.now), -EAGAIN); /* no peer */
	assert_true(is_master(0, 0));
	sim_end();
}

/* 1% independent loss on each of 2 paths, default timers (10 ms / 40 ms), 10 minutes.
 * A false failover needs every copy lost on every path for a dead interval: at least
 * dead/interval - 1 = 3 consecutive heartbeats (the 4th arrives as the 40 ms expire),
 * so per interval p = (0.01^2)^3 = 1e-12, and over 60000 intervals and 2 directions the
 * expected number of false failovers is 1.2e-7 (with one path: 0.12). Seeded, so the
 * run is the same every time; it must see zero. */
static void loss_no_false_failover(void **state)
{
	struct ha_status hs;
	(void)state;

	sim_init(2, 2, 12345);
	node_start(0, &defaults);
	node_start(1, &defaults);
	run(300);
	unsigned before = S.n[0].to_master[0] + S.n[0].to_backup[0] + S.n[1].to_master[0] +
			  S.n[1].to_backup[0] + S.n[0].to_master[1] + S.n[0].to_backup[1] +
			  S.n[1].to_master[1] + S.n[1].to_backup[1];
	S.loss_ppm = 10000;
	run(10 * 60 * 1000);
	unsigned after = S.n[0].to_master[0] + S.n[0].to_backup[0] + S.n[1].to_master[0] +
			 S.n[1].to_backup[0] + S.n[0].to_master[1] + S.n[0].to_backup[1] +
			 S.n[1].to_master[1] + S.n[1].to_backup[1];
	assert_int_equal(after, before);
	assert_int_equal(S.dual_ms[0] + S.dual_ms[1], 0);
	ha_fsm_status(S.n[0].fsm, &hs);
	assert_true(hs.peer_alive);
	/* about 1% of 2 x 100 x 600 heartbeats were lost: the PRNG really dropped some */
	assert_true(hs.rx_ok > 117000 && hs.rx_ok < 120000);
	sim_end();
}

/* Forged, replayed, altered and reflected heartbeats are ignored and counted, and
 * change nothing. */
static void auth_failures(void **state)
{
	struct ha_status hs;
	uint8_t buf[HA_HB_MAX_LEN];
	(void)state;

	sim_init(1, 1, 13);
	struct opts o = { .prio = { { 150 }, { 100 } } };
	node_start(0, &o);
	node_start(1, &o);
	run(300);
	assert_true(is_master(0, 0));
	struct pkt old = S.last[1];

	/* the peer restarts with another key: every heartbeat refused, it is dead to us */
	struct opts wrong = o;
	wrong.key[1] = "not the shared secret at all";
	node_start(1, &wrong);
	run(1000);
	ha_fsm_status(S.n[0].fsm, &hs);
	assert_true(hs.rx_err[HA_WIRE_BAD_MAC] >= 45);
	assert_false(hs.peer_alive);
	/* the old boot's last heartbeat again: seen */
	assert_int_equal(ha_fsm_heartbeat(S.n[0].fsm, 0, old.buf, old.len, S.now), HA_WIRE_REPLAY);

	/* back with the right key (a new boot): the old boot is retired for good */
	node_start(1, &o);
	run(300);
	ha_fsm_status(S.n[0].fsm, &hs);
	assert_true(hs.peer_alive);
	assert_true(is_master(0, 0) && !is_master(1, 0));
	S.dual_ms[0] = 0; /* two masters while the keys differed: a split brain, rightly */
	assert_int_equal(ha_fsm_heartbeat(S.n[0].fsm, 0, old.buf, old.len, S.now), HA_WIRE_STALE);

	/* the live boot's heartbeat replayed: inside the window a replay, later stale */
	struct pkt cur = S.last[1];
	run(50);
	assert_int_equal(ha_fsm_heartbeat(S.n[0].fsm, 0, cur.buf, cur.len, S.now), HA_WIRE_REPLAY);
	run(3000);
	assert_int_equal(ha_fsm_heartbeat(S.n[0].fsm, 0, cur.buf, cur.len, S.now), HA_WIRE_STALE);

	/* altered: every bit of a heartbeat not yet delivered */
	cur = S.last[1];
	for (size_t bit = 0; bit < cur.len * 8; bit++) {
		memcpy(buf, cur.buf, cur.len);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(ha_fsm_heartbeat(S.n[0].fsm, 0, buf, cur.len, S.now),
				     HA_WIRE_OK);
	}
	/* our own heartbeat reflected back */
	cur = S.last[0];
	assert_int_equal(ha_fsm_heartbeat(S.n[0].fsm, 0, cur.buf, cur.len, S.now), HA_WIRE_SELF);
	/* a path that does not exist */
	assert_int_equal(ha_fsm_heartbeat(S.n[0].fsm, 9, cur.buf, cur.len, S.now),
			 HA_WIRE_MALFORMED);

	ha_fsm_status(S.n[0].fsm, &hs);
	assert_int_equal(hs.rx_err[HA_WIRE_REPLAY], 2);
	assert_int_equal(hs.rx_err[HA_WIRE_STALE], 2);
	assert_int_equal(hs.rx_err[HA_WIRE_SELF], 1);
	run(300);
	/* none of it moved the master */
	assert_true(is_master(0, 0) && !is_master(1, 0));
	assert_int_equal(S.n[0].to_master[0], 1);
	assert_int_equal(S.n[0].to_backup[0], 1); /* INIT -> BACKUP at the start */
	assert_int_equal(S.dual_ms[0], 0);
	(void)0;
	sim_end();
}

/* Local faults: a tracked path down puts the group in FAULT and the peer takes it at
 * once (FAULT is announced on the paths still up); every path down: FAULT everywhere. */
static void local_fault(void **state)
{
	(void)state;
	struct opts o = { .prio = { { 150, 150 }, { 100, 100 } }, .track = { { 0x2, 0 } } };

	sim_init(2, 2, 14);
	node_start(0, &o);
	node_start(1, &o);
	run(300);
	assert_true(is_master(0, 0) && is_master(0, 1));
	ha_fsm_path_state(S.n[0].fsm, 1, false, S.now);
	S.cut[0][1] = S.cut[1][1] = true;
	assert_int_equal(st(0, 0), HA_STATE_FAULT);
	assert_string_equal(S.n[0].reason[0], "tracked path 1 is down");
	uint64_t t = RUN_UNTIL(is_master(1, 0), 100);
	assert_true(t <= LATENCY);
	assert_string_equal(S.n[1].reason[0], "peer gw-a is in FAULT");
	assert_true(is_master(0, 1)); /* the other group does not track path 1 */
	/* the path comes back: BACKUP, and preempt is off: the peer keeps the group */
	S.cut[0][1] = S.cut[1][1] = false;
	ha_fsm_path_state(S.n[0].fsm, 1, true, S.now);
	assert_int_equal(st(0, 0), HA_STATE_BACKUP);
	run(300);
	assert_true(is_master(1, 0) && is_master(0, 1));

	/* every path down on gw-a */
	ha_fsm_path_state(S.n[0].fsm, 0, false, S.now);
	ha_fsm_path_state(S.n[0].fsm, 1, false, S.now);
	cut_all(true);
	assert_int_equal(st(0, 1), HA_STATE_FAULT);
	assert_string_equal(S.n[0].reason[1], "no heartbeat path is up");
	t = RUN_UNTIL(is_master(1, 1), 1000);
	assert_true(t <= HA_DEFAULT_DEAD_MS + HA_DEFAULT_INTERVAL_MS);
	run(500);
	assert_int_equal(st(0, 0), HA_STATE_FAULT); /* never MASTER without a path */
	assert_int_equal(S.dual_ms[0] + S.dual_ms[1], 0);
	sim_end();
}

/* gwctl show ha's sources: transitions oldest first with reasons; group and path
 * status. */
static void introspection(void **state)
{
	struct ha_transition tr[HA_TRANSITIONS_MAX];
	struct ha_group_status gs;
	(void)state;

	sim_init(1, 1, 15);
	struct opts o = { .prio = { { 150 }, { 100 } } };
	node_start(0, &o);
	node_start(1, &o);
	run(300);
	unsigned n = ha_fsm_transitions(S.n[0].fsm, tr, HA_TRANSITIONS_MAX);
	assert_int_equal(n, 2);
	assert_int_equal(tr[0].from, HA_STATE_INIT);
	assert_int_equal(tr[0].to, HA_STATE_BACKUP);
	assert_string_equal(tr[0].reason, "peer gw-b heard");
	assert_int_equal(tr[1].to, HA_STATE_MASTER);
	assert_true(tr[1].at_ms >= tr[0].at_ms);
	assert_int_equal(ha_fsm_group_status(S.n[1].fsm, 0, &gs), 0);
	assert_string_equal(gs.name, "group0");
	assert_int_equal(gs.state, HA_STATE_BACKUP);
	assert_true(gs.peer_known);
	assert_int_equal(gs.peer_state, HA_STATE_MASTER);
	assert_int_equal(gs.peer_priority, 150);
	assert_int_equal(ha_fsm_group_status(S.n[1].fsm, 1, &gs), -ENOENT);
	/* many switchovers: the log keeps the last HA_TRANSITIONS_MAX */
	for (int i = 0; i < 40; i++) {
		int m = is_master(0, 0) ? 0 : 1;
		assert_int_equal(ha_fsm_switchover(S.n[m].fsm, 0, S.now), 0);
		RUN_UNTIL(is_master(1 - m, 0), 100);
	}
	n = ha_fsm_transitions(S.n[0].fsm, tr, HA_TRANSITIONS_MAX);
	assert_int_equal(n, HA_TRANSITIONS_MAX);
	for (unsigned i = 1; i < n; i++)
		assert_true(tr[i].at_ms >= tr[i - 1].at_ms);
	assert_int_equal(S.dual_ms[0], 0);
	sim_end();
}

static void bad_config(void **state)
{
	struct ha_group_cfg g[2] = { { .name = "a", .priority = 100 },
				     { .name = "a", .priority = 100 } };
	struct ha_key k;
	struct ha_fsm *f = NULL;
	(void)state;

	static const struct ha_fsm_ops no_ops = { 0 };
	assert_int_equal(ha_key_set(&k, NULL, 0), 0);
	struct ha_fsm_cfg c = { .self = { .node_id = 1, .boot_id = 1, .name = "gw" },
				.n_paths = 1,
				.groups = g,
				.n_groups = 1,
				.key = &k };
	assert_int_equal(ha_fsm_new(&c, &no_ops, NULL, 0, &f), 0);
	ha_fsm_free(f);
	c.n_groups = 2; /* the same name twice */
	assert_int_equal(ha_fsm_new(&c, &no_ops, NULL, 0, &f), -EINVAL);
	c.n_groups = 1;
	c.dead_ms = 25; /* less than 3 x 10 */
	assert_int_equal(ha_fsm_new(&c, &no_ops, NULL, 0, &f), -EINVAL);
	c.dead_ms = 0;
	c.n_paths = 0;
	assert_int_equal(ha_fsm_new(&c, &no_ops, NULL, 0, &f), -EINVAL);
	c.n_paths = 1;
	g[0].track_paths = 2; /* path 1 of 1 */
	assert_int_equal(ha_fsm_new(&c, &no_ops, NULL, 0, &f), -EINVAL);
	g[0].track_paths = 0;
	g[0].priority = 0;
	assert_int_equal(ha_fsm_new(&c, &no_ops, NULL, 0, &f), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(election),
		cmocka_unit_test(alone),
		cmocka_unit_test(master_death),
		cmocka_unit_test(stalled_backup),
		cmocka_unit_test(stalled_backup_slow_round_trip),
		cmocka_unit_test(one_path_cut),
		cmocka_unit_test(split_brain_no_tiebreaker),
		cmocka_unit_test(one_way_split_reclaim),
		cmocka_unit_test(split_brain_tiebreaker),
		cmocka_unit_test(preemption),
		cmocka_unit_test(dead_interval_exact),
		cmocka_unit_test(manual_switchover),
		cmocka_unit_test(loss_no_false_failover),
		cmocka_unit_test(auth_failures),
		cmocka_unit_test(local_fault),
		cmocka_unit_test(introspection),
		cmocka_unit_test(bad_config),
	};
	/* the transitions are logged at notice: keep the test output to the results */
	log_init("test_ha_fsm", LOG_TARGET_STDERR, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
