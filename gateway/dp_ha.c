/*
 * The failover pair in the running gateway (docs/failover.md): ha/ha_fsm.h decides,
 * this file gives it a transport, a clock and hands.
 *
 * Transport: heartbeats are UDP datagrams (port HA_UDP_PORT) between the two boxes'
 * own addresses on every heartbeat path (failover.paths: links and interfaces, each
 * with the peer's address on it, failover.peer_addresses), sent and received through
 * the data plane (the node's kernel owns none of these addresses) by a thread of their
 * own, the heartbeat thread, through the engine's heartbeat channel
 * (engine/heartbeat.h): nothing the control thread is busy with delays them. State
 * sync, bulky and not urgent, goes through the control thread's slow path
 * (fwd_sp_send_udp / fwd_sp_udp_bind, port HA_SYNC_PORT). Both are sent with TTL 255
 * and accepted only with TTL 255 from the peer's address on the path they came in on
 * (GTSM, RFC 5082: nothing routed them), then authenticated (HMAC-SHA256 with the
 * shared key, anti-replay).
 *
 * Hands: a group that becomes MASTER here gets its service addresses on their links
 * (engine addresses: local delivery, ARP/ND answers, connected routes; on IPoIB the
 * link's own list and, for IPv6, the solicited-node group) and claims them with
 * gratuitous ARP / unsolicited NA on each (on IPoIB with our QPN and GID), three times
 * (at once, after ANNOUNCE_2_MS and ANNOUNCE_3_MS: one lost announcement does not leave
 * a host on the old box); it also re-announces every neighbour the proxying interfaces
 * answer for. A group that leaves MASTER gives its addresses up at once.
 *
 * A path's local state follows its link: an IPoIB link up (joined) or an Ethernet
 * carrier; the FSM puts a group in FAULT while a link carrying one of its addresses is
 * down (track_paths), so the peer takes over.
 *
 * State sync: a full dump of paths, neighbours and learned routes to the peer every
 * SYNC_EVERY_MS and for each new boot of it, paced (SYNC_BURST datagrams every
 * SYNC_PACE_MS); what arrives fills only what this box does not know, and only inside
 * the prefixes the config puts on a link (the rest is refused and counted). Also here:
 * gwctl show ha / ha switchover and the pair's metrics.
 *
 * Authentication: the key is required (auth none is the config's explicit opt-out) and
 * a box whose pair cannot start does not start. Datagrams from the peer's address that
 * fail authentication are counted, logged at most every AUTH_LOG_MS and shown in show
 * ha: with different keys neither box hears the other, and each takes every group.
 *
 * What the hands do is decided in gateway/ha_hands.c (pure, unit-tested: paths, groups,
 * which addresses are claimed, announced, given up, which sync records are taken); this
 * file gives it the engine and the links.
 *
 * Threads. The heartbeat thread (ha_thread) owns the clock of the FSM: it receives the
 * heartbeats, ticks the FSM (sends, deadlines, stalls) and judges the tiebreaker's
 * deadline. The control thread does the rest: the hands (addresses claimed, given up,
 * announced), link states, the tiebreaker's echo, state sync, gwctl and metrics. The
 * FSM and what both threads touch are under h->lock (held for microseconds: no hands,
 * no allocation but show's); what the FSM decides on the heartbeat thread that needs
 * the control thread (hands, a probe, a heartbeat to a peer not resolved yet) is left
 * in h->due under the lock and the control thread woken through due_fd; the control
 * thread wakes the heartbeat thread through kick_fd after changing the FSM, so that it
 * re-arms its timer.
 *
 * The peer's neighbour entries. A heartbeat goes to the peer's address on a path through
 * this box's neighbour entry for it, which ages and probes like any other. Left to
 * itself, an entry probed while the peer was down (killed, restarting) fails, and a
 * FAILED entry sends nothing until its retrans interval ends: heartbeats to a peer that
 * is back stopped for up to a second, long enough for both boxes to take each other for
 * dead (docs/failover.md, "Heartbeat neighbours"). So: the peer saying it hears us on a
 * path confirms the entry there (as a TCP ACK confirms one in Linux), a heartbeat from
 * the peer on a path whose entry failed resolves it again at once, and a peer heard from
 * a new boot (whose link addresses may be new: an HCA gives its QP a new number) has its
 * entries resolved again.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <json-c/json.h>
#include <urcu-qsbr.h>

#include "table/route.h"
#include "engine/heartbeat.h"
#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_json.h"
#include "gateway/dp_portfail.h"
#include "gateway/dp_ra.h"
#include "gateway/ha_hands.h"
#include "ha/ha_fsm.h"
#include "ha/ha_sync.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "lib/rt_sched.h"
#include "mgmt/ctl_server.h"
#include "mgmt/metrics_http.h"

#define HA_UDP_PORT   7789
#define HA_SYNC_PORT  7790
#define SYNC_CHECK_MS 100 /* how often the control thread looks for a new boot of the peer */
#define ANNOUNCE_2_MS 100
#define ANNOUNCE_3_MS 1000
#define TB_ECHO_ID    0x6962 /* "ib" */
#define SYNC_EVERY_MS 2000
#define SYNC_BURST    16 /* datagrams of a dump per turn ... */
#define SYNC_PACE_MS  2  /* ... and the turns' spacing: 8,000/s, for the receiver's sake */
#define SYNC_MAX_RECS 65536
#define TB_TIMEOUT_MS 500
#define AUTH_LOG_MS   10000 /* at most one log line this often about failed authentication */
#define STALL_LOG_MS  10000 /* and about stalls of the heartbeat thread */

struct ha_path {
	char link[GW_NAME_MAX];
	struct ip_addr peer;
	bool up; /* as last told to the FSM */
	/* Its interface (0: none now) and our address on it: what the heartbeat thread
	 * sends from and matches on (lock; written by the control thread: path_refresh). */
	uint32_t ifindex;
	struct ip_addr src;
	bool unresolved; /* the last heartbeat on it found no usable neighbour entry (lock) */
};

/* What the heartbeat thread leaves for the control thread (under h->lock). */
#define DUE_MASTER 0x1 /* the group became MASTER: claim and announce */
#define DUE_BACKUP 0x2 /* it left MASTER: give its addresses up */
struct ha_due {
	uint8_t group[HA_MAX_GROUPS]; /* DUE_* */
	bool probe;                   /* probe the tiebreaker */
	/* The latest heartbeat to a peer not resolved on the path yet: the control thread
	 * sends it through the slow path, which resolves (and parks it meanwhile). */
	bool resolve[HA_MAX_PATHS];
	size_t len[HA_MAX_PATHS];
	uint8_t msg[HA_MAX_PATHS][HA_HB_MAX_LEN];
	/* The peer was heard on the path while its neighbour entry there was not usable:
	 * a FAILED one is dropped, so that the next heartbeat resolves it afresh. */
	bool renew[HA_MAX_PATHS];
};

struct dp_ha {
	struct gw_dp *dp;
	pthread_mutex_t lock; /* the FSM and the fields marked (lock) */
	struct ha_fsm *fsm;   /* (lock) */
	struct ha_key key;
	/* The heartbeat thread: its loop, its timer, the control thread's kick. */
	struct evloop *hb_loop;
	struct evtimer *timer;
	int kick_fd, due_fd; /* eventfds: control -> heartbeat thread, and back */
	pthread_t thr;
	bool thr_started;
	_Atomic bool stop;
	struct ha_due due;                                 /* (lock) */
	struct evtimer *announce_timer, *sync_check_timer; /* control thread */
	uint64_t timer_due;   /* when the timer should fire (a later tick is a stall) */
	uint32_t interval_ms; /* heartbeat interval */
	uint32_t dead_ms;     /* dead interval */
	uint32_t rt_priority; /* the heartbeat thread's SCHED_FIFO priority (0: none) */
	unsigned long stalls; /* ticks that came later than an interval */
	unsigned long stalls_logged;
	uint64_t stall_log_at, stall_max_ms; /* the last log line; the longest since */
	struct ha_origin self;
	struct ha_group_cfg groups[HA_MAX_GROUPS];
	unsigned n_groups;
	struct ha_path paths[HA_MAX_PATHS];
	unsigned n_paths;
	struct gw_hands_addr addrs[GW_HANDS_MAX_ADDRS];
	unsigned n_addrs;
	/* Announcement rounds still due per group (at ANNOUNCE_2_MS, ANNOUNCE_3_MS). */
	uint64_t announce_at[HA_MAX_GROUPS][2];
	bool has_tiebreaker;
	struct ip_addr tiebreaker;
	uint16_t tb_seq;
	uint64_t tb_deadline; /* a probe awaits its reply until then; 0: none */
	uint64_t rx_bad_ttl, rx_unknown_path, tx_failed; /* (lock) */
	uint64_t tx_resolving;  /* heartbeats handed to the slow path to resolve (lock) */
	uint64_t neigh_renewed; /* peer's neighbour entries dropped to resolve again (control) */
	/* State sync (docs/failover.md): a full dump to the peer every SYNC_EVERY_MS and
	 * as soon as a new boot of the peer is heard (which also renews its neighbour
	 * entries: on_sync_check). */
	uint64_t sync_next_ms, sync_peer_boot;
	uint32_t sync_batch;
	unsigned sync_path;          /* the path the current dump goes on */
	struct ha_sync_queue sync_q; /* its datagrams not sent yet */
	struct evtimer *sync_timer;  /* the next burst of them */
	struct ha_sync_rec *recs;
	size_t n_recs, cap_recs;
	uint64_t sync_tx_msgs, sync_tx_recs, sync_rx_msgs, sync_rx_bad;
	uint64_t sync_applied[4]; /* by enum ha_sync_type: entries created here */
	uint64_t sync_refused[4]; /* by type: records outside the scopes, not the peer's */
	/* Where the peer's neighbours and host routes may be (gw_hands_scopes), from the
	 * config as running (dp_ha_start, dp_ha_config). */
	struct gw_hands_scope *scopes;
	unsigned n_scopes;
	/* Datagrams from the peer's address on a path that fail authentication (bad MAC):
	 * the keys differ, or someone else speaks for the peer. Not heard, the peer counts
	 * as dead, so each box takes every group: visible in show ha, logged. */
	uint64_t auth_failed, auth_failed_logged;
	uint64_t auth_failed_at, auth_log_at; /* ms: the last failure, the last log line */
	char key_file[GW_PATH_MAX];           /* for those messages */
};

static uint64_t now_ms(void)
{
	return evloop_now_ms();
}

static struct dp_link *path_link(struct dp_ha *h, unsigned p)
{
	return dp_link_by_name(h->dp, h->paths[p].link);
}

/* Our own address on k of the family (the configured ones: never a service address). */
static const struct ip_addr *own_addr(const struct dp_link *k, int family)
{
	for (unsigned i = 0; i < k->n_addrs; i++)
		if (k->addrs[i].addr.family == family)
			return &k->addrs[i].addr;
	return NULL;
}

static bool link_up(const struct gw_dp *dp, const struct dp_link *k)
{
	const struct fwd_if *f = k ? fwd_snap_if(fwd_engine_current(dp->e), k->ifindex) : NULL;

	return f && f->up;
}

/* ---- the FSM's hands ------------------------------------------------------------------ */

static void kick(int fd)
{
	if (write(fd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0) {
		/* EAGAIN only when the counter is saturated: the reader wakes anyway */
	}
}

/* The interface and our address of path p (lock): 0, or -ENETDOWN. */
static int path_ends(struct dp_ha *h, unsigned p, uint32_t *ifindex, const struct ip_addr **src)
{
	if (!h->paths[p].ifindex)
		return -ENETDOWN;
	*ifindex = h->paths[p].ifindex;
	*src = &h->paths[p].src;
	return 0;
}

/* A heartbeat (the FSM's send, under the lock, on either thread): through the
 * heartbeat channel; to a peer not resolved there yet, through the control thread. */
static void ha_send(void *arg, unsigned p, const uint8_t *msg, size_t len)
{
	struct dp_ha *h = arg;
	const struct ip_addr *src;
	uint32_t ifindex;
	int ret = path_ends(h, p, &ifindex, &src);

	if (ret == 0)
		ret = fwd_hb_send_udp(h->dp->e, ifindex, src, &h->paths[p].peer, HA_UDP_PORT,
				      HA_UDP_PORT, msg, len);
	if (ret == 0 || ret == -EAGAIN)
		h->paths[p].unresolved = ret == -EAGAIN;
	if (ret == -EAGAIN && len <= sizeof(h->due.msg[p])) {
		memcpy(h->due.msg[p], msg, len);
		h->due.len[p] = len;
		h->due.resolve[p] = true;
		h->tx_resolving++;
		kick(h->due_fd);
		return;
	}
	if (ret < 0)
		h->tx_failed++; /* a path down: the FSM knows from its link state */
}

/* The hands' ops (gateway/ha_hands.h) on this box's engine and links. */
static int hands_add(void *ctx, const struct gw_hands_addr *a)
{
	struct dp_ha *h = ctx;
	struct dp_link *k = dp_link_by_name(h->dp, a->dev);
	char buf[IP_PREFIX_STRLEN];
	int ret;

	if (!k || !k->ifindex)
		return -ENODEV;
	ret = fwd_engine_if_add_addr(h->dp->e, k->ifindex, &a->addr);
	if (ret < 0 && ret != -EEXIST) {
		log_errno(LOG_ERR, -ret, "failover: %s: service address %s not added", k->name,
			  ip_prefix_format(&a->addr, buf, sizeof(buf)));
		return ret;
	}
	if (k->link)
		(void)ipoib_link_add_addr(k->link, a->addr.addr.family, a->addr.addr.bytes);
	return 0;
}

static void hands_del(void *ctx, const struct gw_hands_addr *a)
{
	struct dp_ha *h = ctx;
	struct dp_link *k = dp_link_by_name(h->dp, a->dev);

	if (k && k->link)
		(void)ipoib_link_del_addr(k->link, a->addr.addr.family, a->addr.addr.bytes);
	if (k && k->ifindex)
		(void)fwd_engine_if_del_addr(h->dp->e, k->ifindex, &a->addr);
}

static void hands_announce(void *ctx, const struct gw_hands_addr *a)
{
	struct dp_ha *h = ctx;
	struct dp_link *k = dp_link_by_name(h->dp, a->dev);

	if (k && k->ifindex)
		(void)fwd_sp_announce_own(h->dp->e, k->ifindex, a->addr.addr.family,
					  a->addr.addr.bytes);
}

static const struct gw_hands_ops hands_ops = {
	.add = hands_add,
	.del = hands_del,
	.announce = hands_announce,
};

/* Claim group g's addresses on their links, and what the proxying interfaces answer
 * for (hosts on the other side must now ask this box). */
static void announce_group(struct dp_ha *h, unsigned g)
{
	gw_hands_announce(h->addrs, h->n_addrs, g, &hands_ops, h);
	dp_announce_neighbours(h->dp, 0);
}

/* Put group g's addresses that are not yet held on their links (those whose link is
 * not up yet follow when it comes up: dp_ha_link_changed). Returns how many. */
static unsigned claim_group(struct dp_ha *h, unsigned g)
{
	return gw_hands_claim(h->addrs, h->n_addrs, g, &hands_ops, h);
}

/* The announcement rounds still due: the timer for the earliest. Control thread. */
static void arm_announce(struct dp_ha *h)
{
	uint64_t now = now_ms(), next = UINT64_MAX;

	for (unsigned g = 0; g < h->n_groups; g++)
		for (unsigned r = 0; r < 2; r++)
			if (h->announce_at[g][r] && h->announce_at[g][r] < next)
				next = h->announce_at[g][r];
	if (next == UINT64_MAX)
		evtimer_stop(h->announce_timer);
	else
		evtimer_start(h->announce_timer, next > now ? next - now : 0, 0);
}

/* Claimed: announce at once and twice more. */
static void announce_soon(struct dp_ha *h, unsigned g)
{
	uint64_t now = now_ms();

	announce_group(h, g);
	h->announce_at[g][0] = now + ANNOUNCE_2_MS;
	h->announce_at[g][1] = now + ANNOUNCE_3_MS;
	arm_announce(h);
}

static void on_announce_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct dp_ha *h = arg;
	uint64_t now = now_ms();
	(void)loop;
	(void)t;

	for (unsigned g = 0; g < h->n_groups; g++) {
		bool due = false;
		enum ha_state s;

		for (unsigned r = 0; r < 2; r++)
			if (h->announce_at[g][r] && h->announce_at[g][r] <= now) {
				h->announce_at[g][r] = 0;
				due = true;
			}
		if (!due)
			continue;
		pthread_mutex_lock(&h->lock);
		s = ha_fsm_group_state(h->fsm, g);
		pthread_mutex_unlock(&h->lock);
		if (s == HA_STATE_MASTER)
			announce_group(h, g);
	}
	arm_announce(h);
}

/* The FSM's transitions (under the lock, either thread): the hands are the control
 * thread's (the engine's addresses have one writer), so they are left due for it. */
static void ha_become_master(void *arg, unsigned g, const char *reason)
{
	struct dp_ha *h = arg;

	h->due.group[g] |= DUE_MASTER;
	kick(h->due_fd);
	log_event(LOG_NOTICE, IBGW_MSGID_FAILOVER, "failover: group %s: MASTER (%s)",
		  h->groups[g].name, reason);
}

static void ha_become_backup(void *arg, unsigned g, enum ha_state now, const char *reason)
{
	struct dp_ha *h = arg;

	h->due.group[g] |= DUE_BACKUP;
	kick(h->due_fd);
	log_event(LOG_NOTICE, IBGW_MSGID_FAILOVER, "failover: group %s: %s (%s)", h->groups[g].name,
		  ha_state_name(now), reason);
}

/* Still MASTER, the peer let go of the group it held too: claimed (nothing new) and
 * announced again, three times, as at a takeover. */
static void ha_reclaim(void *arg, unsigned g, const char *reason)
{
	struct dp_ha *h = arg;

	h->due.group[g] |= DUE_MASTER;
	kick(h->due_fd);
	log_event(LOG_NOTICE, IBGW_MSGID_FAILOVER,
		  "failover: group %s: MASTER, announced again (%s: it held the group too)",
		  h->groups[g].name, reason);
}

/* The tiebreaker: one echo request per probe (the FSM repeats them while the peer
 * stays dead), sent by the control thread; a reply within TB_TIMEOUT_MS means
 * reachable. */
static void ha_probe_tiebreaker(void *arg)
{
	struct dp_ha *h = arg;

	h->due.probe = true;
	kick(h->due_fd);
}

static void probe_tiebreaker(struct dp_ha *h)
{
	uint16_t seq;
	int ret;

	pthread_mutex_lock(&h->lock);
	seq = ++h->tb_seq;
	pthread_mutex_unlock(&h->lock);
	ret = fwd_sp_send_echo(h->dp->e, NULL, &h->tiebreaker, TB_ECHO_ID, seq);
	pthread_mutex_lock(&h->lock);
	if (ret < 0) {
		/* No route to it: this box cannot reach it, which is the answer. */
		h->tb_deadline = 0;
		ha_fsm_tiebreaker_result(h->fsm, false, now_ms());
	} else {
		h->tb_deadline = now_ms() + TB_TIMEOUT_MS;
	}
	pthread_mutex_unlock(&h->lock);
	kick(h->kick_fd);
}

static void on_echo_reply(void *ctx, const struct ip_addr *from, uint16_t id, uint16_t seq)
{
	struct dp_ha *h = ctx;
	(void)id;

	pthread_mutex_lock(&h->lock);
	if (h->tb_deadline && seq == h->tb_seq && ip_addr_equal(from, &h->tiebreaker)) {
		h->tb_deadline = 0;
		ha_fsm_tiebreaker_result(h->fsm, true, now_ms());
	}
	pthread_mutex_unlock(&h->lock);
	kick(h->kick_fd);
}

/* The peer's neighbour entry on path p (NULL: none), and its table. Control thread, or
 * the heartbeat thread while RCU-online. */
static struct neigh_entry *peer_neigh(struct dp_ha *h, unsigned p, struct neigh_table **t)
{
	const struct fwd_if *f =
	    h->paths[p].ifindex ? fwd_snap_if(fwd_engine_current(h->dp->e), h->paths[p].ifindex)
				: NULL;

	*t = f ? f->neigh : NULL;
	return *t ? neigh_lookup(*t, h->paths[p].peer.family, h->paths[p].peer.bytes) : NULL;
}

/* Drop the peer's entry on path p to have it resolved afresh: any (but one being
 * resolved or configured) when the peer restarted, else only a FAILED one. Control
 * thread (the tables' writer; path ends are its own: stable unlocked). */
static void renew_peer_neigh(struct dp_ha *h, unsigned p, bool restarted)
{
	struct neigh_table *t;
	struct neigh_entry *e = peer_neigh(h, p, &t);
	enum neigh_state st = e ? neigh_entry_state(e) : NEIGH_NONE;
	char buf[IP_ADDR_STRLEN];

	if (st == NEIGH_NONE || st == NEIGH_PERMANENT || st == NEIGH_INCOMPLETE ||
	    (!restarted && st != NEIGH_FAILED))
		return;
	neigh_delete(t, e);
	h->neigh_renewed++;
	log_info("failover: neighbour %s on %s (%s) resolved again: %s",
		 ip_addr_format(&h->paths[p].peer, buf, sizeof(buf)), h->paths[p].link,
		 neigh_state_name(st),
		 restarted ? "the peer restarted" : "the peer is heard there");
}

/* After a heartbeat from the peer on path p was taken (heartbeat thread, lock): the
 * paths it says it hears us on have working entries; a failed entry on p is left to the
 * control thread to resolve again (a restarted peer's entries: on_sync_check). */
static void peer_neigh_heard(struct dp_ha *h, unsigned p, uint64_t now)
{
	struct ha_path_status ps;
	struct neigh_table *t;

	if (ha_fsm_path_status(h->fsm, p, now, &ps) == 0 && ps.last_rx_ms == now) {
		/* Fresh (made after we started, by a peer that hears us): its view is new. */
		for (unsigned q = 0; q < h->n_paths; q++) {
			struct neigh_entry *e;

			if (ha_fsm_path_status(h->fsm, q, now, &ps) == 0 && ps.peer_hears &&
			    (e = peer_neigh(h, q, &t)))
				neigh_entry_confirmed(e, now);
		}
	}
	if (h->paths[p].unresolved && !h->due.renew[p]) {
		h->due.renew[p] = true;
		kick(h->due_fd);
	}
}

/* Control thread: what the heartbeat thread left due. The hands follow each group's
 * state as it is now (a MASTER -> BACKUP -> MASTER that happened meanwhile claims and
 * announces again: the peer may have claimed in between). */
static void on_due(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct dp_ha *h = arg;
	uint8_t group[HA_MAX_GROUPS];
	bool renew[HA_MAX_PATHS];
	enum ha_state state[HA_MAX_GROUPS];
	bool probe;
	uint64_t v;
	(void)loop;
	(void)events;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing more since the last read */
	}
	pthread_mutex_lock(&h->lock);
	memcpy(group, h->due.group, sizeof(group));
	memset(h->due.group, 0, sizeof(h->due.group));
	for (unsigned g = 0; g < h->n_groups; g++)
		state[g] = ha_fsm_group_state(h->fsm, g);
	probe = h->due.probe;
	h->due.probe = false;
	memcpy(renew, h->due.renew, sizeof(renew));
	memset(h->due.renew, 0, sizeof(h->due.renew));
	/* Without the lock, as the sends below: first, so that a heartbeat waiting to be
	 * resolved starts afresh. */
	pthread_mutex_unlock(&h->lock);
	for (unsigned p = 0; p < h->n_paths; p++)
		if (renew[p])
			renew_peer_neigh(h, p, false);
	pthread_mutex_lock(&h->lock);
	for (unsigned p = 0; p < h->n_paths; p++) {
		bool resolve = h->due.resolve[p];
		uint8_t msg[HA_HB_MAX_LEN];
		size_t len = h->due.len[p];
		const struct ip_addr *src;
		uint32_t ifindex;
		int ret;

		if (!resolve)
			continue;
		h->due.resolve[p] = false;
		memcpy(msg, h->due.msg[p], len);
		/* Sent without the lock: the slow path may call back into the links. Path
		 * ends are the control thread's to change: still valid unlocked. */
		pthread_mutex_unlock(&h->lock);
		ret = path_ends(h, p, &ifindex, &src);
		if (ret == 0)
			ret = fwd_sp_send_udp(h->dp->e, ifindex, src, &h->paths[p].peer,
					      HA_UDP_PORT, HA_UDP_PORT, msg, len);
		pthread_mutex_lock(&h->lock);
		if (ret < 0)
			h->tx_failed++;
	}
	pthread_mutex_unlock(&h->lock);
	for (unsigned g = 0; g < h->n_groups; g++) {
		if (!group[g])
			continue;
		if (state[g] == HA_STATE_MASTER) {
			claim_group(h, g);
			announce_soon(h, g);
		} else if (gw_hands_give_up(h->addrs, h->n_addrs, g, &hands_ops, h)) {
			h->announce_at[g][0] = h->announce_at[g][1] = 0;
			log_notice("failover: group %s: service addresses given up",
				   h->groups[g].name);
		} else {
			h->announce_at[g][0] = h->announce_at[g][1] = 0;
		}
	}
	for (unsigned g = 0; g < h->n_groups; g++)
		if (group[g]) {
			/* Router advertisements follow the addresses: on where they are held
			 * now, retracted (router lifetime 0) where they were given up. */
			dp_ra_recheck(h->dp);
			break;
		}
	if (probe)
		probe_tiebreaker(h);
}

static const struct ha_fsm_ops fsm_ops = {
	.send = ha_send,
	.become_master = ha_become_master,
	.become_backup = ha_become_backup,
	.reclaim = ha_reclaim,
	.probe_tiebreaker = ha_probe_tiebreaker,
};

/* ---- state sync ----------------------------------------------------------------------- */

static struct ha_sync_rec *rec_add(struct dp_ha *h, uint8_t type)
{
	if (h->n_recs == h->cap_recs) {
		size_t cap = h->cap_recs ? h->cap_recs * 2 : 256;
		struct ha_sync_rec *r;

		if (cap > SYNC_MAX_RECS || !(r = realloc(h->recs, cap * sizeof(*r))))
			return NULL;
		h->recs = r;
		h->cap_recs = cap;
	}
	memset(&h->recs[h->n_recs], 0, sizeof(h->recs[0]));
	h->recs[h->n_recs].type = type;
	return &h->recs[h->n_recs++];
}

struct collect {
	struct dp_ha *h;
	const struct dp_link *k;
};

static int collect_neigh(void *arg, const struct neigh_info *ni)
{
	struct collect *c = arg;
	struct ha_sync_rec *r;
	uint8_t st;

	switch (ni->state) {
	case NEIGH_REACHABLE:
		st = HA_NEIGH_REACHABLE;
		break;
	case NEIGH_STALE:
	case NEIGH_DELAY:
	case NEIGH_PROBE:
		st = HA_NEIGH_STALE;
		break;
	default:
		return 0; /* unresolved, failed, or configured on this box */
	}
	if (!ni->has_link || (ni->link.len != 6 && ni->link.len != IPOIB_HWADDR_LEN) ||
	    !(r = rec_add(c->h, HA_SYNC_NEIGH)))
		return 0;
	r->u.neigh.addr.family = (uint8_t)ni->family;
	memcpy(r->u.neigh.addr.bytes, ni->addr, ni->family == AF_INET ? 4 : 16);
	snprintf(r->u.neigh.link, sizeof(r->u.neigh.link), "%s", c->k->name);
	memcpy(r->u.neigh.lladdr, ni->link.addr, ni->link.len);
	r->u.neigh.lladdr_len = ni->link.len;
	r->u.neigh.state = st;
	return 0;
}

static int collect_path(void *arg, const struct sa_path_info *pi)
{
	struct collect *c = arg;
	struct ha_sync_rec *r;

	if (pi->state != SA_PATH_VALID || pi->path.local || !pi->path.dlid ||
	    !(r = rec_add(c->h, HA_SYNC_PATH)))
		return 0;
	memcpy(r->u.path.dgid, pi->path.dgid.raw, 16);
	r->u.path.dlid = pi->path.dlid;
	r->u.path.sl = pi->path.sl;
	r->u.path.mtu = pi->path.mtu;
	r->u.path.rate = pi->path.rate;
	return 0;
}

/* Learned routes: host routes to proxied neighbours (their link travels with the
 * neighbour record of the same address). */
static int collect_route(void *arg, const struct rt_route *rt)
{
	struct collect *c = arg;
	struct ha_sync_rec *r;

	if (rt->source != RT_SRC_LEARNED || !(rt->flags & RT_F_SELECTED) ||
	    !(r = rec_add(c->h, HA_SYNC_ROUTE)))
		return 0;
	r->u.route.prefix = rt->prefix;
	r->u.route.metric = rt->metric;
	for (unsigned i = 0; i < rt->nnh && i < HA_SYNC_MAX_NEXTHOPS; i++)
		if (rt->nh[i].type == RT_NH_GATEWAY)
			r->u.route.nexthops[r->u.route.n_nexthops++] = rt->nh[i].gw;
	return 0;
}

static int sync_send_one(void *arg, const uint8_t *msg, size_t len)
{
	struct dp_ha *h = arg;
	const struct ip_addr *src;
	uint32_t ifindex;
	int ret = path_ends(h, h->sync_path, &ifindex, &src);

	return ret < 0 ? ret
		       : fwd_sp_send_udp(h->dp->e, ifindex, src, &h->paths[h->sync_path].peer,
					 HA_SYNC_PORT, HA_SYNC_PORT, msg, len);
}

/* A burst of the dump; the rest SYNC_PACE_MS later (also when the pool ran dry). */
static void sync_drain(struct dp_ha *h)
{
	unsigned sent = 0, failed = 0;

	if (ha_sync_queue_drain(&h->sync_q, SYNC_BURST, sync_send_one, h, &sent, &failed))
		evtimer_start(h->sync_timer, SYNC_PACE_MS, 0);
	h->sync_tx_msgs += sent;
	pthread_mutex_lock(&h->lock);
	h->tx_failed += failed;
	pthread_mutex_unlock(&h->lock);
}

static void on_sync_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	sync_drain(arg);
}

/* A full dump of what this box learned, on the first path the peer hears us on. */
static void sync_send(struct dp_ha *h)
{
	const struct fwd_snap *s = fwd_engine_current(h->dp->e);
	struct collect c = { h, NULL };
	struct ha_path_status ps;
	struct dp_link *k;
	size_t max_len;
	int ret;

	h->sync_path = h->n_paths;
	pthread_mutex_lock(&h->lock);
	for (unsigned p = 0; p < h->n_paths && h->sync_path == h->n_paths; p++)
		if (ha_fsm_path_status(h->fsm, p, now_ms(), &ps) == 0 && ps.local_up &&
		    ps.rx_alive && ps.peer_hears)
			h->sync_path = p;
	pthread_mutex_unlock(&h->lock);
	if (h->sync_path == h->n_paths || !(k = path_link(h, h->sync_path)))
		return;
	max_len = (fwd_snap_if(s, k->ifindex) ? fwd_snap_if(s, k->ifindex)->mtu : 1280) -
		  (h->paths[h->sync_path].peer.family == AF_INET ? 28 : 48);
	if (max_len < HA_SYNC_MIN_DATAGRAM)
		return;
	/* Paths first: the peer seeds them before its neighbours ask for them. */
	h->n_recs = 0;
	for (unsigned i = 0; i < h->dp->n_ports; i++)
		if (h->dp->ports[i].sa)
			sa_path_foreach(h->dp->ports[i].sa, collect_path, &c);
	for (unsigned i = 0; i < h->dp->n_links; i++) {
		const struct fwd_if *f;

		c.k = &h->dp->links[i];
		f = c.k->kind != DP_NONE ? fwd_snap_if(s, c.k->ifindex) : NULL;
		if (f && f->neigh)
			neigh_foreach(f->neigh, collect_neigh, &c);
	}
	for (unsigned t = 0; t < GW_TENANTS_MAX; t++) /* every tenant's learned routes */
		if (dp_tenant_at(h->dp, t))
			(void)rt_walk(dp_tenant_at(h->dp, t)->rt, 0, collect_route, &c);
	ha_sync_queue_clear(&h->sync_q); /* what is left of the last dump: this one says it */
	/* The FSM's sequence numbers are shared with the heartbeats (anti-replay). */
	pthread_mutex_lock(&h->lock);
	ret = ha_sync_encode(&h->self, ha_fsm_sync_seq(h->fsm), &h->key, ++h->sync_batch, true,
			     h->recs, h->n_recs, max_len, ha_sync_queue_push, &h->sync_q);
	pthread_mutex_unlock(&h->lock);
	if (ret < 0) {
		ha_sync_queue_clear(&h->sync_q);
		log_errno(LOG_WARNING, -ret, "failover: state sync not sent");
		return;
	}
	h->sync_tx_recs += h->n_recs;
	sync_drain(h);
}

/* One of this box's own or service addresses. */
static bool is_ours(const struct dp_ha *h, const struct ip_addr *a)
{
	for (unsigned i = 0; i < h->dp->n_links; i++)
		for (unsigned j = 0; j < h->dp->links[i].n_addrs; j++)
			if (ip_addr_equal(&h->dp->links[i].addrs[j].addr, a))
				return true;
	return gw_hands_is_service(h->addrs, h->n_addrs, a);
}

static uint8_t hop_limit_to(const struct gw_dp *dp, const uint8_t dgid[16])
{
	/* Off this subnet (another GID prefix): through an IB router, with a GRH. */
	for (unsigned i = 0; i < dp->n_ports; i++) {
		uint8_t prefix[8];

		for (int b = 0; b < 8; b++)
			prefix[b] = (uint8_t)(dp->ports[i].pi.gid_prefix >> (56 - 8 * b));
		if (!memcmp(prefix, dgid, 8))
			return 0;
	}
	return 64;
}

/* sync_apply's questions to gateway/ha_hands.c's choices. */
struct known_ask {
	const struct fwd_if *f;
	const struct ha_sync_neigh *n;
};

static bool known(void *ctx)
{
	const struct known_ask *a = ctx;

	return neigh_lookup(a->f->neigh, a->n->addr.family, a->n->addr.bytes) != NULL;
}

static enum gw_hands_link link_kind(const struct dp_link *k)
{
	if (k->kind == DP_IPOIB && k->link)
		return GW_HANDS_LINK_IPOIB;
	return k->kind == DP_ETH ? GW_HANDS_LINK_ETH : GW_HANDS_LINK_OTHER;
}

struct where_ask {
	struct gw_dp *dp;
	const struct fwd_snap *s;
	const struct ip_prefix *prefix;
};

/* The interface whose neighbour table knows the address (0: none), and its link. */
static uint32_t where(void *ctx, const char **link)
{
	const struct where_ask *a = ctx;

	for (uint32_t x = 1; x < FWD_IF_MAX; x++) {
		const struct fwd_if *f = fwd_snap_if(a->s, x);
		const struct dp_link *k;

		if (f && f->neigh &&
		    neigh_lookup(f->neigh, a->prefix->addr.family, a->prefix->addr.bytes)) {
			k = dp_link_by_ifindex(a->dp, x);
			*link = k ? k->name : NULL;
			return x;
		}
	}
	return 0;
}

/* A record the peer may not give: counted, and logged at the first and then at powers
 * of two, so that a peer (or a holder of the key) filling this box is visible. */
static void sync_refuse(struct dp_ha *h, uint8_t type, const struct ip_prefix *what,
			const char *link)
{
	uint64_t n = ++h->sync_refused[type];
	char buf[IP_PREFIX_STRLEN];

	if ((n & (n - 1)) == 0)
		log_warning("failover: state sync: %s %s%s%s refused: outside the prefixes "
			    "configured there (%" PRIu64 " so far)",
			    type == HA_SYNC_NEIGH ? "neighbour" : "route",
			    ip_prefix_format(what, buf, sizeof(buf)), link ? " on " : "",
			    link ? link : "", n);
}

/* What the peer learned, where this box does not know better: neighbours created STALE
 * (confirmed on first use, as after an ARP), paths seeded into the SA client's cache,
 * learned routes added when absent. Nothing the box learned itself is overwritten, and
 * nothing outside the prefixes the config puts on a link is taken (gw_hands_scopes): the
 * peer may give only what it could itself have learned there. */
static void sync_apply(struct dp_ha *h, struct ha_sync_msg *m)
{
	struct ha_sync_rec r;
	const struct fwd_snap *s = fwd_engine_current(h->dp->e);

	while (ha_sync_next(m, &r)) {
		if (r.del)
			continue; /* full dumps only: entries age here as they would anyway */
		if (r.type == HA_SYNC_NEIGH) {
			struct dp_link *k = dp_link_by_name(h->dp, r.u.neigh.link);
			const struct fwd_if *f = k ? fwd_snap_if(s, k->ifindex) : NULL;
			const struct ha_sync_neigh *n = &r.u.neigh;
			struct known_ask ask = { f, n };
			enum gw_hands_link kind = f && f->neigh ? link_kind(k) : GW_HANDS_LINK_NONE;
			bool ours = kind != GW_HANDS_LINK_NONE && is_ours(h, &n->addr);
			enum gw_hands_neigh what =
			    gw_hands_sync_neigh(n, kind, ours, h->scopes, h->n_scopes, known, &ask);

			if (what == GW_HANDS_NEIGH_REFUSED) {
				struct ip_prefix p = { .addr = n->addr,
						       .len =
							   n->addr.family == AF_INET ? 32 : 128 };

				sync_refuse(h, HA_SYNC_NEIGH, &p, n->link);
			} else if (what == GW_HANDS_NEIGH_IPOIB) {
				if (ipoib_link_neigh_learn(k->link, n->addr.family, n->addr.bytes,
							   n->lladdr) == 1)
					h->sync_applied[HA_SYNC_NEIGH]++;
			} else if (what == GW_HANDS_NEIGH_ETH) {
				struct neigh_link ll = { .len = 6, .usable = true };

				memcpy(ll.addr, n->lladdr, 6);
				if (neigh_update(f->neigh, n->addr.family, n->addr.bytes, &ll,
						 NEIGH_F_CREATE))
					h->sync_applied[HA_SYNC_NEIGH]++;
			}
		} else if (r.type == HA_SYNC_PATH) {
			struct sa_path p = { .dlid = r.u.path.dlid,
					     .sl = r.u.path.sl,
					     .mtu = r.u.path.mtu,
					     .rate = r.u.path.rate };

			memcpy(p.dgid.raw, r.u.path.dgid, 16);
			p.hop_limit = hop_limit_to(h->dp, r.u.path.dgid);
			for (unsigned i = 0; i < h->dp->n_ports; i++)
				if (h->dp->ports[i].sa && sa_path_seed(h->dp->ports[i].sa, &p) == 1)
					h->sync_applied[HA_SYNC_PATH]++;
		} else if (r.type == HA_SYNC_ROUTE) {
			struct where_ask ask = { h->dp, s, &r.u.route.prefix };
			struct rt_route rt;
			enum gw_hands_route what = gw_hands_sync_route(
			    &r.u.route, h->scopes, h->n_scopes, where, &ask, &rt);

			if (what == GW_HANDS_ROUTE_REFUSED)
				sync_refuse(h, HA_SYNC_ROUTE, &r.u.route.prefix, NULL);
			/* Into the table of the tenant whose interface holds the neighbour. */
			else if (what == GW_HANDS_ROUTE_TAKE &&
				 rt_add(fwd_snap_if(s, rt.nh[0].ifindex)->rt, &rt) == 0)
				h->sync_applied[HA_SYNC_ROUTE]++;
		}
	}
}

/* A datagram from the peer's address on path p failed authentication (under the lock). */
static void auth_failed(struct dp_ha *h, unsigned p)
{
	uint64_t now = now_ms();
	char buf[IP_ADDR_STRLEN];

	h->auth_failed++;
	h->auth_failed_at = now;
	if (h->auth_log_at && now - h->auth_log_at < AUTH_LOG_MS)
		return;
	log_error("failover: %" PRIu64 " datagrams from the peer's address %s on %s failed "
		  "authentication%s: its key differs from %s? Unheard, the peer counts as "
		  "dead and both boxes may be MASTER (gwctl show ha)",
		  h->auth_failed - h->auth_failed_logged,
		  ip_addr_format(&h->paths[p].peer, buf, sizeof(buf)), h->paths[p].link,
		  h->auth_log_at ? " since the last report" : "",
		  h->key_file[0] ? h->key_file : "this box's (none: auth none)");
	h->auth_log_at = now;
	h->auth_failed_logged = h->auth_failed;
}

static void sync_in(struct dp_ha *h, unsigned p, const uint8_t *buf, size_t len)
{
	struct ha_sync_msg m;
	char why[160];
	enum ha_wire_err err = ha_sync_decode(buf, len, &h->key, &m, why, sizeof(why));

	pthread_mutex_lock(&h->lock);
	if (err == HA_WIRE_BAD_MAC)
		auth_failed(h, p);
	if (err == HA_WIRE_OK)
		err = ha_fsm_sync_accept(h->fsm, &m.hdr);
	pthread_mutex_unlock(&h->lock);
	if (err != HA_WIRE_OK) {
		h->sync_rx_bad++;
		return;
	}
	h->sync_rx_msgs++;
	sync_apply(h, &m);
}

/* ---- the heartbeat thread: clock and input -------------------------------------------- */

/* Now later than the timer's due time by over a heartbeat interval: this process could
 * not listen meanwhile (stopped, swapped out, or this thread starved), and the peer's
 * heartbeats of that time may still be on their way in. Judged before anything heard
 * re-arms the timer (which moves timer_due), else a stall ended by a heartbeat would go
 * unseen. (lock) */
static void note_stall(struct dp_ha *h, uint64_t now)
{
	uint64_t late = now - h->timer_due;
	unsigned long n; /* stalls in this log line */

	if (!h->timer_due || now <= h->timer_due + h->interval_ms)
		return;
	h->stalls++;
	ha_fsm_stalled(h->fsm, late, now);
	h->timer_due = now; /* counted once */
	if (late > h->stall_max_ms)
		h->stall_max_ms = late;
	/* Logged: a stall near the dead interval is what makes the peer take a live box
	 * for dead, and the operator needs to see it. One as long as the dead interval at
	 * once, shorter ones at most every STALL_LOG_MS (with the worst since). */
	if (late < h->dead_ms && h->stall_log_at && now - h->stall_log_at < STALL_LOG_MS)
		return;
	n = h->stalls - h->stalls_logged;
	log_warning("failover: the heartbeat thread ran %" PRIu64 " ms late%s (%lu time%s%s; the "
		    "peer takes this box for dead after %u ms unheard): this box was stopped or "
		    "kept off the CPU",
		    h->stall_max_ms, n > 1 ? " at worst" : "", n, n > 1 ? "s" : "",
		    h->stall_log_at ? " since the last report" : "", h->dead_ms);
	h->stall_log_at = now;
	h->stalls_logged = h->stalls;
	h->stall_max_ms = 0;
}

/* The timer for the FSM's next deadline or the tiebreaker's (heartbeat thread, lock).
 * A stall is judged first, as this moves timer_due: whichever event ends one (timer,
 * heartbeat, a kick from the control thread), it is seen. */
static void arm(struct dp_ha *h)
{
	uint64_t now = now_ms(), next;

	note_stall(h, now);
	next = ha_fsm_next_deadline(h->fsm);
	if (h->tb_deadline && h->tb_deadline < next)
		next = h->tb_deadline;
	h->timer_due = next > now ? next : now;
	evtimer_start(h->timer, next > now ? next - now : 0, 0);
}

/* The heartbeat path a datagram came in on: only with TTL 255 (nothing routed it), from
 * the peer's address on that path's interface. -1 otherwise, counted. (lock) */
static int path_of(struct dp_ha *h, uint32_t ifindex, const struct ip_addr *src, uint8_t ttl)
{
	if (ttl != 255) {
		h->rx_bad_ttl++; /* routed from elsewhere: never the peer on a path */
		return -1;
	}
	for (unsigned p = 0; p < h->n_paths; p++)
		if (h->paths[p].ifindex && h->paths[p].ifindex == ifindex &&
		    ip_addr_equal(src, &h->paths[p].peer))
			return (int)p;
	h->rx_unknown_path++;
	return -1;
}

/* A heartbeat handed over by a worker (heartbeat thread, lock). */
static void on_hb_udp(void *ctx, uint32_t ifindex, const struct ip_addr *src,
		      const struct ip_addr *dst, uint16_t sport, uint8_t ttl,
		      const uint8_t *payload, size_t len)
{
	struct dp_ha *h = ctx;
	int p = path_of(h, ifindex, src, ttl);
	(void)dst;
	(void)sport;

	if (p < 0)
		return;
	uint64_t now = now_ms();
	note_stall(h, now);
	enum ha_wire_err err = ha_fsm_heartbeat(h->fsm, (unsigned)p, payload, len, now);

	if (err == HA_WIRE_OK)
		peer_neigh_heard(h, (unsigned)p, now);
	else if (err == HA_WIRE_BAD_MAC)
		auth_failed(h, (unsigned)p);
}

/* Heartbeats in: the workers handed some over. */
static void on_hb_fd(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct dp_ha *h = arg;
	uint64_t v;
	(void)loop;
	(void)events;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: another read took it; poll anyway */
	}
	rcu_thread_online();
	pthread_mutex_lock(&h->lock);
	if (fwd_hb_poll(h->dp->e, on_hb_udp, h))
		arm(h);
	pthread_mutex_unlock(&h->lock);
	rcu_thread_offline();
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct dp_ha *h = arg;
	uint64_t now;
	(void)loop;
	(void)t;

	rcu_thread_online();
	pthread_mutex_lock(&h->lock);
	note_stall(h, now_ms());
	/* The peer's heartbeats that wait in the rings count before its deadline is
	 * judged: after this thread was held up they are queued behind this timer, and
	 * judging first would take a live master for dead. */
	(void)fwd_hb_poll(h->dp->e, on_hb_udp, h);
	now = now_ms();
	if (h->tb_deadline && h->tb_deadline <= now) {
		h->tb_deadline = 0;
		ha_fsm_tiebreaker_result(h->fsm, false, now);
	}
	ha_fsm_tick(h->fsm, now);
	arm(h);
	pthread_mutex_unlock(&h->lock);
	rcu_thread_offline();
}

/* The control thread changed the FSM (its deadlines may be earlier now), or stop. */
static void on_kick(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct dp_ha *h = arg;
	uint64_t v;
	(void)events;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing more since the last read */
	}
	if (atomic_load(&h->stop)) {
		evloop_stop(loop);
		return;
	}
	pthread_mutex_lock(&h->lock);
	arm(h);
	pthread_mutex_unlock(&h->lock);
}

static void *ha_thread(void *arg)
{
	struct dp_ha *h = arg;

	(void)pthread_setname_np(pthread_self(), "ibgw-ha");
	rcu_register_thread();
	rcu_thread_offline(); /* online only while it reads the engine (on_hb_fd, on_timer) */
	(void)evloop_run(h->hb_loop);
	rcu_thread_online();
	rcu_unregister_thread();
	return NULL;
}

/* ---- control thread: state sync in, links -------------------------------------------- */

/* A dump when due, and at once for a peer heard from a new boot (it starts empty). */
static void on_sync_check(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct dp_ha *h = arg;
	uint64_t now = now_ms();
	struct ha_status st;
	(void)loop;
	(void)t;

	pthread_mutex_lock(&h->lock);
	ha_fsm_status(h->fsm, &st);
	pthread_mutex_unlock(&h->lock);
	if (!st.peer_alive)
		return;
	if (st.peer_boot_id != h->sync_peer_boot || now >= h->sync_next_ms) {
		/* A new boot may have new link addresses (an HCA gives its QP a new
		 * number): its entries are resolved afresh. */
		if (h->sync_peer_boot && st.peer_boot_id != h->sync_peer_boot)
			for (unsigned p = 0; p < h->n_paths; p++)
				renew_peer_neigh(h, p, true);
		h->sync_peer_boot = st.peer_boot_id;
		h->sync_next_ms = now + SYNC_EVERY_MS;
		sync_send(h);
	}
}

/* State sync from the peer (control thread): as a heartbeat, TTL 255 from the peer's
 * address on a path. */
static void on_sync_udp(void *ctx, uint32_t ifindex, const struct ip_addr *src,
			const struct ip_addr *dst, uint16_t sport, uint8_t ttl,
			const uint8_t *payload, size_t len)
{
	struct dp_ha *h = ctx;
	int p;
	(void)dst;
	(void)sport;

	pthread_mutex_lock(&h->lock);
	p = path_of(h, ifindex, src, ttl);
	pthread_mutex_unlock(&h->lock);
	if (p >= 0)
		sync_in(h, (unsigned)p, payload, len);
}

/* Path p's interface and our address on it, as the heartbeat thread sends and matches
 * them (control thread, lock). */
static void path_refresh(struct dp_ha *h, unsigned p)
{
	struct dp_link *k = path_link(h, p);
	const struct ip_addr *src = k ? own_addr(k, h->paths[p].peer.family) : NULL;

	h->paths[p].ifindex = src ? k->ifindex : 0;
	if (src)
		h->paths[p].src = *src;
}

void dp_ha_link_changed(struct gw_dp *dp, const struct dp_link *k)
{
	struct dp_ha *h = dp->ha;
	bool master[HA_MAX_GROUPS];

	if (!h)
		return;
	/* Taken out (a reload): its interface and every address on it are gone. */
	if (!k->ifindex)
		gw_hands_link_gone(h->addrs, h->n_addrs, k->name);
	pthread_mutex_lock(&h->lock);
	for (unsigned g = 0; g < h->n_groups; g++)
		master[g] = ha_fsm_group_state(h->fsm, g) == HA_STATE_MASTER;
	for (unsigned p = 0; p < h->n_paths; p++) {
		bool up;

		if (strcmp(h->paths[p].link, k->name))
			continue;
		path_refresh(h, p);
		up = link_up(dp, k) || dp_portfail_moving(dp, k); /* to its backup port */
		if (up != h->paths[p].up) {
			h->paths[p].up = up;
			log_notice("failover: path %s %s", k->name, up ? "up" : "down");
			ha_fsm_path_state(h->fsm, p, up, now_ms());
		}
	}
	pthread_mutex_unlock(&h->lock);
	kick(h->kick_fd);
	/* Up (again, or rebuilt): a MASTER group's addresses on it go there now. */
	if (link_up(dp, k))
		for (unsigned g = 0; g < h->n_groups; g++)
			if (master[g] && claim_group(h, g))
				announce_soon(h, g);
}

/* ---- start / stop ------------------------------------------------------------------ */

/* The prefixes the peer's state sync may fill (gw_hands_scopes), from cfg. */
static int set_scopes(struct dp_ha *h, const struct gw_config *cfg)
{
	unsigned n = gw_hands_scopes(cfg, NULL, 0);
	struct gw_hands_scope *sc = n ? calloc(n, sizeof(*sc)) : NULL;

	if (n && !sc) {
		log_error("failover: out of memory");
		return -ENOMEM;
	}
	(void)gw_hands_scopes(cfg, sc, n);
	free(h->scopes);
	h->scopes = sc;
	h->n_scopes = n;
	return 0;
}

void dp_ha_config(struct gw_dp *dp, const struct gw_config *cfg, struct gw_reload_outcome *out)
{
	const struct gw_failover_config *fo = &cfg->failover;
	struct dp_ha *h = dp->ha;

	if (!h)
		return;
	if (fo->heartbeat_interval_ms != h->interval_ms || fo->dead_interval_ms != h->dead_ms ||
	    fo->rt_priority != h->rt_priority) {
		log_warning(
		    "reload: failover timers and rt_priority take effect at the next start");
		gw_reload_note(out, false,
			       "failover timers, rt_priority: take effect at the next start");
	}
	if (set_scopes(h, cfg) < 0)
		log_warning("failover: state sync keeps the links' prefixes of the last start");
	/* A reload may have renumbered a path's link. */
	pthread_mutex_lock(&h->lock);
	for (unsigned p = 0; p < h->n_paths; p++)
		path_refresh(h, p);
	pthread_mutex_unlock(&h->lock);
}

static int configure(struct dp_ha *h, const struct gw_config *cfg)
{
	const struct gw_failover_config *fo = &cfg->failover;
	char names[HA_MAX_PATHS][GW_NAME_MAX];
	char why[GW_PATH_MAX + 160];
	int ret;

	/* Paths: as configured, else every link and interface in the file's order. */
	h->n_paths = gw_hands_paths(cfg, names, HA_MAX_PATHS);
	for (unsigned p = 0; p < h->n_paths; p++)
		snprintf(h->paths[p].link, GW_NAME_MAX, "%s", names[p]);
	if (!h->n_paths || fo->n_peer_addresses != h->n_paths) {
		log_error("failover: %u heartbeat paths but %u peer_addresses: give the peer's "
			  "address on each path, in order",
			  h->n_paths, fo->n_peer_addresses);
		return -EINVAL;
	}
	for (unsigned p = 0; p < h->n_paths; p++) {
		struct dp_link *k = path_link(h, p);

		h->paths[p].peer = fo->peer_addresses[p];
		if (!k || !own_addr(k, h->paths[p].peer.family)) {
			log_error("failover: path %s has no %s address of its own to send from",
				  h->paths[p].link,
				  h->paths[p].peer.family == AF_INET ? "IPv4" : "IPv6");
			return -EINVAL;
		}
	}
	h->n_groups = gw_hands_groups(cfg, (const char(*)[GW_NAME_MAX])names, h->n_paths, h->groups,
				      h->addrs, &h->n_addrs);
	if (fo->auth == GW_FAILOVER_AUTH_HMAC) {
		snprintf(h->key_file, sizeof(h->key_file), "%s", fo->key_file);
		ret = ha_key_load_file(&h->key, fo->key_file, why, sizeof(why));
		if (ret < 0) {
			log_error("failover: key_file: %s", why);
			return ret;
		}
	} else {
		/* The loader lets this through only when the file says auth: none. */
		log_warning("failover: auth none: heartbeats and state sync are not "
			    "authenticated; any host on a path can take the service addresses "
			    "over or fill this box's tables");
		(void)ha_key_set(&h->key, NULL, 0);
	}
	ret = set_scopes(h, cfg);
	if (ret < 0)
		return ret;
	h->has_tiebreaker = fo->has_tiebreaker;
	h->tiebreaker = fo->tiebreaker;
	h->self.node_id = ha_node_id(cfg->name);
	h->self.boot_id = ha_boot_id_new();
	snprintf(h->self.name, sizeof(h->self.name), "%s", cfg->name);
	return 0;
}

static void ha_free(struct gw_dp *dp, struct dp_ha *h)
{
	if (h->thr_started) {
		atomic_store(&h->stop, true);
		kick(h->kick_fd);
		pthread_join(h->thr, NULL);
	}
	(void)fwd_hb_bind(dp->e, 0);
	(void)fwd_sp_udp_bind(dp->e, 0, NULL, NULL);
	(void)fwd_sp_echo_bind(dp->e, 0, NULL, NULL);
	if (h->due_fd >= 0) {
		evloop_del_fd(dp->loop, h->due_fd);
		close(h->due_fd);
	}
	if (h->hb_loop && h->kick_fd >= 0)
		evloop_del_fd(h->hb_loop, h->kick_fd);
	if (h->hb_loop)
		evloop_del_fd(h->hb_loop, fwd_hb_fd(dp->e));
	if (h->kick_fd >= 0)
		close(h->kick_fd);
	evtimer_free(h->timer);
	evtimer_free(h->sync_timer);
	evtimer_free(h->announce_timer);
	evtimer_free(h->sync_check_timer);
	if (h->hb_loop)
		evloop_free(h->hb_loop);
	ha_fsm_free(h->fsm);
	ha_sync_queue_free(&h->sync_q);
	ha_key_clear(&h->key);
	pthread_mutex_destroy(&h->lock);
	free(h->recs);
	free(h->scopes);
	free(h);
}

int dp_ha_start(struct gw_dp *dp, const struct gw_config *cfg)
{
	const struct gw_failover_config *fo = &cfg->failover;
	struct dp_ha *h;
	int ret;

	if (!fo->enabled)
		return 0;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->dp = dp;
	h->kick_fd = h->due_fd = -1;
	/* The heartbeat thread runs at a real-time priority and waits for this lock: the
	 * control thread holding it is lifted to that priority meanwhile. */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&h->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	ret = configure(h, cfg);
	if (ret < 0)
		goto fail;
	ret = evloop_new(&h->hb_loop);
	if (ret < 0)
		goto fail;
	h->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	h->due_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	h->timer = evtimer_new(h->hb_loop, on_timer, h);
	h->sync_timer = evtimer_new(dp->loop, on_sync_timer, h);
	h->announce_timer = evtimer_new(dp->loop, on_announce_timer, h);
	h->sync_check_timer = evtimer_new(dp->loop, on_sync_check, h);
	if (h->kick_fd < 0 || h->due_fd < 0 || !h->timer || !h->sync_timer || !h->announce_timer ||
	    !h->sync_check_timer) {
		ret = -ENOMEM;
		goto fail;
	}
	if ((ret = evloop_add_fd(h->hb_loop, h->kick_fd, EPOLLIN, on_kick, h)) < 0 ||
	    (ret = evloop_add_fd(h->hb_loop, fwd_hb_fd(dp->e), EPOLLIN, on_hb_fd, h)) < 0 ||
	    (ret = evloop_add_fd(dp->loop, h->due_fd, EPOLLIN, on_due, h)) < 0)
		goto fail;
	h->interval_ms = fo->heartbeat_interval_ms;
	h->dead_ms = fo->dead_interval_ms;
	h->rt_priority = fo->rt_priority;
	struct ha_fsm_cfg fc = {
		.self = h->self,
		.preempt = fo->preempt,
		.preempt_delay_ms = fo->preempt_delay_ms,
		.interval_ms = fo->heartbeat_interval_ms,
		.dead_ms = fo->dead_interval_ms,
		.n_paths = h->n_paths,
		.has_tiebreaker = fo->has_tiebreaker,
		.groups = h->groups,
		.n_groups = h->n_groups,
		.key = &h->key,
	};
	ret = fwd_sp_udp_bind(dp->e, HA_SYNC_PORT, on_sync_udp, h);
	if (ret == 0)
		ret = fwd_hb_bind(dp->e, HA_UDP_PORT);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "failover: UDP ports %u, %u", HA_UDP_PORT, HA_SYNC_PORT);
		goto fail;
	}
	if (h->has_tiebreaker && (ret = fwd_sp_echo_bind(dp->e, TB_ECHO_ID, on_echo_reply, h)) < 0)
		goto fail;
	for (unsigned p = 0; p < h->n_paths; p++)
		path_refresh(h, p);
	dp->ha = h;
	/* No other thread yet: the FSM's first heartbeats go out from here. */
	ret = ha_fsm_new(&fc, &fsm_ops, h, now_ms(), &h->fsm);
	if (ret < 0) {
		dp->ha = NULL;
		goto fail;
	}
	for (unsigned p = 0; p < h->n_paths; p++) {
		struct dp_link *k = path_link(h, p);

		h->paths[p].up = true; /* as the FSM assumes at start */
		dp_ha_link_changed(dp, k);
	}
	arm(h);
	evtimer_start(h->sync_check_timer, SYNC_CHECK_MS, SYNC_CHECK_MS);
	pthread_attr_t ta;
	ret = rt_thread_attr(&ta, h->rt_priority);
	if (ret == 0) {
		ret = -pthread_create(&h->thr, &ta, ha_thread, h);
		pthread_attr_destroy(&ta);
	}
	if (ret < 0) {
		log_errno(
		    LOG_ERR, -ret,
		    "failover: heartbeat thread at SCHED_FIFO priority %u (failover.rt_priority; "
		    "it needs RLIMIT_RTPRIO of that much, LimitRTPRIO= under systemd, and no "
		    "RestrictRealtime=; 0 runs it at normal priority)",
		    h->rt_priority);
		dp->ha = NULL;
		goto fail;
	}
	h->thr_started = true;
	log_notice("failover: %s, %u groups, %u paths, heartbeats every %u ms, dead after %u ms, "
		   "heartbeat thread at %s priority %u",
		   cfg->name, h->n_groups, h->n_paths, fo->heartbeat_interval_ms,
		   fo->dead_interval_ms, h->rt_priority ? "SCHED_FIFO" : "normal", h->rt_priority);
	return 0;
fail:
	log_error("failover: not started; ibgwd does not start without it (a box of a pair "
		  "running alone would hold none of the service addresses)");
	ha_free(dp, h);
	return ret;
}

void dp_ha_stop(struct gw_dp *dp)
{
	struct dp_ha *h = dp->ha;

	if (!h)
		return;
	/* Hand every group over now: the peer takes it on this heartbeat instead of
	 * waiting out the dead interval. */
	pthread_mutex_lock(&h->lock);
	for (unsigned g = 0; g < h->n_groups; g++)
		if (ha_fsm_group_state(h->fsm, g) == HA_STATE_MASTER)
			(void)ha_fsm_switchover(h->fsm, g, now_ms());
	ha_fsm_tick(h->fsm, now_ms());
	pthread_mutex_unlock(&h->lock);
	dp->ha = NULL;
	ha_free(dp, h);
}

/* ---- gwctl: show ha, ha switchover ---------------------------------------------------- */

static const char *state_word(enum ha_state s)
{
	static const char *const w[HA_STATE_COUNT] = { "init", "backup", "master", "fault" };

	return (unsigned)s < HA_STATE_COUNT ? w[s] : "unknown";
}

static struct json_object *node_json(const struct dp_ha *h, uint64_t now)
{
	struct json_object *o = json_object_new_object(), *errs = json_object_new_object();
	struct ha_status st;
	/* Failing now: within the last second or dead interval, whichever is longer. */
	uint64_t recent = h->dead_ms > 1000 ? h->dead_ms : 1000;
	bool failing = h->auth_failed && now - h->auth_failed_at <= recent;

	ha_fsm_status(h->fsm, &st);
	add_str(o, "kind", "node");
	add_str(o, "name", h->self.name);
	add_str(o, "peer", st.peer_known ? st.peer_name : "");
	add_bool(o, "peer_alive", st.peer_alive);
	add_str(o, "tiebreaker", ha_tiebreak_name(st.tiebreak));
	add_int(o, "rx", (int64_t)st.rx_ok);
	add_int(o, "tx", (int64_t)st.tx);
	for (int e = 1; e < HA_WIRE_ERR_COUNT; e++)
		if (st.rx_err[e])
			add_int(errs, ha_wire_err_name((enum ha_wire_err)e), (int64_t)st.rx_err[e]);
	if (h->rx_bad_ttl)
		add_int(errs, "ttl_not_255", (int64_t)h->rx_bad_ttl);
	if (h->rx_unknown_path)
		add_int(errs, "not_from_the_peer", (int64_t)h->rx_unknown_path);
	json_object_object_add(o, "rx_ignored", errs);
	add_int(o, "tx_failed", (int64_t)h->tx_failed);
	add_int(o, "tx_resolving", (int64_t)h->tx_resolving); /* through the slow path */
	add_int(o, "peer_neighbours_renewed", (int64_t)h->neigh_renewed);
	/* The engine's heartbeat channel: sends that found its messages or ring full (the
	 * workers not returning them in time), datagrams handed over but not valid. */
	struct fwd_hb_stats hb;
	fwd_hb_stats(h->dp->e, &hb);
	add_int(o, "tx_no_buffer", (int64_t)hb.no_msg);
	add_int(o, "rx_channel_refused", (int64_t)hb.refused);
	add_int(o, "auth_failures", (int64_t)h->auth_failed);
	add_bool(o, "auth_failing", failing);
	if (failing)
		add_str(o, "warning",
			st.peer_alive
			    ? "some datagrams from the peer's address fail "
			      "authentication (altered, or not from the peer)"
			    : "the peer's datagrams fail authentication: its key differs; "
			      "unheard, it counts as dead and both boxes may be MASTER");
	add_int(o, "sync_tx_messages", (int64_t)h->sync_tx_msgs);
	add_int(o, "sync_tx_records", (int64_t)h->sync_tx_recs);
	add_int(o, "sync_rx_messages", (int64_t)h->sync_rx_msgs);
	add_int(o, "sync_rx_refused", (int64_t)h->sync_rx_bad);
	add_int(o, "sync_neighbours_learned", (int64_t)h->sync_applied[HA_SYNC_NEIGH]);
	add_int(o, "sync_paths_learned", (int64_t)h->sync_applied[HA_SYNC_PATH]);
	add_int(o, "sync_routes_learned", (int64_t)h->sync_applied[HA_SYNC_ROUTE]);
	add_int(o, "sync_neighbours_refused", (int64_t)h->sync_refused[HA_SYNC_NEIGH]);
	add_int(o, "sync_routes_refused", (int64_t)h->sync_refused[HA_SYNC_ROUTE]);
	add_int(o, "transitions", (int64_t)st.transitions);
	return o;
}

static struct json_object *group_json(const struct dp_ha *h, unsigned g, uint64_t now)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	struct ha_group_status gs;
	char buf[IP_PREFIX_STRLEN];

	ha_fsm_group_status(h->fsm, g, &gs);
	add_str(o, "kind", "group");
	add_str(o, "group", gs.name);
	add_str(o, "state", state_word(gs.state));
	add_int(o, "priority", gs.priority);
	add_int(o, "since_ms", (int64_t)(now - gs.since_ms));
	add_str(o, "reason", gs.reason);
	if (gs.peer_known) {
		add_str(o, "peer_state", state_word(gs.peer_state));
		add_int(o, "peer_priority", gs.peer_priority);
	}
	for (unsigned i = 0; i < h->n_addrs; i++) {
		struct json_object *x;

		if (h->addrs[i].group != g)
			continue;
		x = json_object_new_object();
		add_str(x, "address", ip_prefix_format(&h->addrs[i].addr, buf, sizeof(buf)));
		add_str(x, "dev", h->addrs[i].dev);
		add_bool(x, "held", h->addrs[i].held);
		json_object_array_add(a, x);
	}
	json_object_object_add(o, "addresses", a);
	return o;
}

static struct json_object *path_json(const struct dp_ha *h, unsigned p, uint64_t now)
{
	struct json_object *o = json_object_new_object();
	struct ha_path_status ps;
	char buf[IP_ADDR_STRLEN];

	ha_fsm_path_status(h->fsm, p, now, &ps);
	add_str(o, "kind", "path");
	add_str(o, "path", h->paths[p].link);
	add_str(o, "peer_address", ip_addr_format(&h->paths[p].peer, buf, sizeof(buf)));
	add_bool(o, "local_up", ps.local_up);
	add_bool(o, "alive", ps.rx_alive);
	add_bool(o, "peer_hears", ps.peer_hears);
	if (ps.last_rx_ms)
		add_int(o, "last_rx_ms", (int64_t)(now - ps.last_rx_ms));
	add_int(o, "rx", (int64_t)ps.rx);
	add_int(o, "tx", (int64_t)ps.tx);
	return o;
}

int gw_dp_show_ha(struct gw_dp *dp, struct ctl_reply *r)
{
	struct dp_ha *h = dp->ha;
	struct ha_transition tr[HA_TRANSITIONS_MAX];
	uint64_t now = now_ms();
	unsigned n;

	struct json_object *node, *groups[HA_MAX_GROUPS], *paths[HA_MAX_PATHS];

	if (!h)
		return ctl_reply_error(r, CTL_EFAILED,
				       "failover is not running (no failover section, or it failed "
				       "to start: see the log)");
	/* One consistent picture under the lock; the reply is written after. */
	pthread_mutex_lock(&h->lock);
	node = node_json(h, now);
	for (unsigned g = 0; g < h->n_groups; g++)
		groups[g] = group_json(h, g, now);
	for (unsigned p = 0; p < h->n_paths; p++)
		paths[p] = path_json(h, p, now);
	n = ha_fsm_transitions(h->fsm, tr, HA_TRANSITIONS_MAX);
	pthread_mutex_unlock(&h->lock);
	if (ctl_reply_record(r, node) < 0)
		return CTL_EFAILED;
	for (unsigned g = 0; g < h->n_groups; g++)
		if (ctl_reply_record(r, groups[g]) < 0)
			return CTL_EFAILED;
	for (unsigned p = 0; p < h->n_paths; p++)
		if (ctl_reply_record(r, paths[p]) < 0)
			return CTL_EFAILED;
	for (unsigned i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();

		add_str(o, "kind", "transition");
		add_int(o, "ago_ms", (int64_t)(now - tr[i].at_ms));
		add_str(o, "group", tr[i].group < h->n_groups ? h->groups[tr[i].group].name : "?");
		add_str(o, "from", state_word(tr[i].from));
		add_str(o, "to", state_word(tr[i].to));
		add_str(o, "reason", tr[i].reason);
		if (ctl_reply_record(r, o) < 0)
			return CTL_EFAILED;
	}
	return CTL_OK;
}

int gw_dp_ha_switchover(struct gw_dp *dp, const char *group, struct ctl_reply *r)
{
	struct dp_ha *h = dp->ha;
	unsigned started = 0;

	if (!h)
		return ctl_reply_error(r, CTL_EFAILED, "failover is not running");
	for (unsigned g = 0; g < h->n_groups; g++) {
		int ret;

		if (group && strcmp(group, h->groups[g].name))
			continue;
		pthread_mutex_lock(&h->lock);
		ret = ha_fsm_switchover(h->fsm, g, now_ms());
		pthread_mutex_unlock(&h->lock);
		kick(h->kick_fd);
		if (ret == -EAGAIN)
			return ctl_reply_error(r, CTL_EFAILED,
					       "group %s: the peer is not alive or cannot take it "
					       "now (see gwctl show ha)",
					       h->groups[g].name);
		if (ret == -EALREADY)
			return ctl_reply_error(r, CTL_EFAILED,
					       "group %s: a switchover is already under way",
					       h->groups[g].name);
		if (ret < 0)
			return ctl_reply_error(r, CTL_EFAILED, "group %s: %s", h->groups[g].name,
					       strerror(-ret));
		log_notice("failover: group %s: switchover asked by gwctl", h->groups[g].name);
		started++;
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "group", json_object_new_string(h->groups[g].name));
		pthread_mutex_lock(&h->lock);
		json_object_object_add(
		    o, "state",
		    json_object_new_string(ha_state_name(ha_fsm_group_state(h->fsm, g))));
		pthread_mutex_unlock(&h->lock);
		if (ctl_reply_record(r, o) < 0)
			return CTL_EFAILED;
	}
	if (!started)
		return ctl_reply_error(r, CTL_EBADREQ, "no failover group '%s'", group);
	return CTL_OK;
}

bool dp_ha_serves(struct gw_dp *dp, const char *dev)
{
	struct dp_ha *h = dp->ha;
	bool carries = false;

	if (!h)
		return true;
	for (unsigned i = 0; i < h->n_addrs; i++) {
		if (strcmp(h->addrs[i].dev, dev))
			continue;
		if (h->addrs[i].held)
			return true;
		carries = true;
	}
	return !carries;
}

int dp_ha_service_addr(struct gw_dp *dp, const char *dev, int family, struct ip_addr *out)
{
	struct dp_ha *h = dp->ha;

	for (unsigned i = 0; h && i < h->n_addrs; i++)
		if (h->addrs[i].held && h->addrs[i].addr.addr.family == family &&
		    !strcmp(h->addrs[i].dev, dev)) {
			*out = h->addrs[i].addr.addr;
			return 0;
		}
	return -ENOENT;
}

/* ---- metrics (docs/operations.md "Metrics") -------------------------------------------- */

void dp_ha_metrics(struct gw_dp *dp, FILE *out)
{
	struct dp_ha *h = dp->ha;
	struct ha_status st;
	uint64_t now = now_ms();
	char lbl[128];

	if (!h)
		return;
	pthread_mutex_lock(&h->lock); /* the FSM and the counters; the output is in memory */
	ha_fsm_status(h->fsm, &st);
	metrics_single(out, "ibgw_failover_peer_alive", "gauge",
		       "1 while the peer's heartbeats arrive on some path.", st.peer_alive);
	metrics_single(out, "ibgw_failover_transitions_total", "counter",
		       "Group state transitions on this box.", st.transitions);
	metrics_single(out, "ibgw_failover_heartbeats_received_total", "counter",
		       "Failover messages accepted from the peer.", st.rx_ok);
	metrics_single(out, "ibgw_failover_heartbeats_sent_total", "counter",
		       "Failover messages sent to the peer.", st.tx);
	metrics_single(out, "ibgw_failover_stalls_total", "counter",
		       "Failover timer ticks later than a heartbeat interval (this process could "
		       "not listen; the peer's silence over that time was not held against it).",
		       h->stalls);
	metrics_family(out, "ibgw_failover_ignored_total", "counter",
		       "Failover datagrams ignored, by reason (bad MAC, replay, ...).");
	for (int e = 1; e < HA_WIRE_ERR_COUNT; e++)
		fprintf(out, "ibgw_failover_ignored_total{reason=\"%s\"} %llu\n",
			ha_wire_err_name((enum ha_wire_err)e), (unsigned long long)st.rx_err[e]);
	metrics_family(out, "ibgw_failover_group_state", "gauge",
		       "1 for the state each group is in here (init, backup, master, fault).");
	for (unsigned g = 0; g < h->n_groups; g++) {
		enum ha_state s = ha_fsm_group_state(h->fsm, g);

		metrics_label_escape(h->groups[g].name, lbl, sizeof(lbl));
		for (int x = 0; x < HA_STATE_COUNT; x++)
			fprintf(out, "ibgw_failover_group_state{group=\"%s\",state=\"%s\"} %d\n",
				lbl, state_word((enum ha_state)x), (int)s == x);
	}
	metrics_family(out, "ibgw_failover_path_alive", "gauge",
		       "1 while the peer's heartbeats arrive on this path.");
	for (unsigned p = 0; p < h->n_paths; p++) {
		struct ha_path_status ps;

		if (ha_fsm_path_status(h->fsm, p, now, &ps) < 0)
			continue;
		metrics_label_escape(h->paths[p].link, lbl, sizeof(lbl));
		fprintf(out, "ibgw_failover_path_alive{path=\"%s\"} %d\n", lbl, ps.rx_alive);
	}
	metrics_single(out, "ibgw_failover_sync_records_sent_total", "counter",
		       "State-sync records sent to the peer.", h->sync_tx_recs);
	metrics_single(out, "ibgw_failover_auth_failures_total", "counter",
		       "Datagrams from the peer's address on a path that failed authentication "
		       "(the keys differ: the peer then counts as dead).",
		       h->auth_failed);
	metrics_single(out, "ibgw_failover_sync_refused_total", "counter",
		       "State-sync neighbours and routes refused: outside the prefixes configured "
		       "on their link, or not a host route.",
		       h->sync_refused[HA_SYNC_NEIGH] + h->sync_refused[HA_SYNC_ROUTE]);
	metrics_single(out, "ibgw_failover_sync_learned_total", "counter",
		       "Neighbours, paths and routes created here from the peer's state sync.",
		       h->sync_applied[HA_SYNC_NEIGH] + h->sync_applied[HA_SYNC_PATH] +
			   h->sync_applied[HA_SYNC_ROUTE]);
	pthread_mutex_unlock(&h->lock);
}
