/*
 * IPoIB links on two HCA ports: move a link to its backup port when its port goes
 * down (see gateway/dp_portfail.h).
 */
#include "gateway/dp_portfail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwd/neigh.h"
#include "fwd/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "lib/evloop.h"
#include "lib/log.h"

#define PF_MAX_LINKS  DP_MAX_LINKS
#define PF_WATCH_MS   5    /* how often a moved link is checked for up */
#define PF_ANNOUNCE_2 200  /* ms after up: the second announcement */
#define PF_ANNOUNCE_3 1200 /* the third: past a Linux neighbour's locktime (1 s) */
#define PF_GIVE_UP_MS 30000

struct pf_moved {
	char name[GW_NAME_MAX];
	uint64_t since_ms, up_ms;
	unsigned announced; /* 0..3 */
};

static struct {
	struct gw_dp *dp;
	const struct gw_config *cfg; /* the daemon's, as loaded */
	struct gw_config eff;        /* cfg with the moved links' ports swapped */
	struct gw_ipoib_link_config *links;
	bool have_eff, moving;
	/* Ports seen down (by event) and not seen up since: backend/device/num. */
	struct {
		char backend[16], device[GW_NAME_MAX];
		uint8_t num;
	} down[DP_MAX_PORTS];
	unsigned n_down;
	struct pf_moved moved[PF_MAX_LINKS];
	unsigned n_moved;
	struct evtimer *move_t, *watch_t;
	struct {
		char backend[16], device[GW_NAME_MAX];
		uint8_t num;
	} pending; /* the port whose links move at move_t */
	unsigned long moves;
} pf;

static uint64_t now_ms(void)
{
	return evloop_now_ns() / 1000000;
}

static const struct gw_config *running(void)
{
	return pf.have_eff ? &pf.eff : pf.cfg;
}

static bool port_is_down(const char *backend, const char *device, uint8_t num)
{
	for (unsigned i = 0; i < pf.n_down; i++)
		if (pf.down[i].num == num && !strcmp(pf.down[i].backend, backend) &&
		    !strcmp(pf.down[i].device, device))
			return true;
	return false;
}

static void mark_port(const struct dp_port *p, bool down)
{
	for (unsigned i = 0; i < pf.n_down; i++)
		if (pf.down[i].num == p->num && !strcmp(pf.down[i].backend, p->backend) &&
		    !strcmp(pf.down[i].device, p->device)) {
			if (!down)
				pf.down[i] = pf.down[--pf.n_down];
			return;
		}
	if (down && pf.n_down < DP_MAX_PORTS) {
		snprintf(pf.down[pf.n_down].backend, sizeof(pf.down[0].backend), "%s", p->backend);
		snprintf(pf.down[pf.n_down].device, sizeof(pf.down[0].device), "%s", p->device);
		pf.down[pf.n_down].num = p->num;
		pf.n_down++;
	}
}

struct pf_walk {
	struct gw_dp *dp;
	uint32_t ifindex;
};

static int announce_neigh(void *arg, const struct neigh_info *ni)
{
	struct pf_walk *w = arg;

	if (ni->state == NEIGH_REACHABLE || ni->state == NEIGH_STALE || ni->state == NEIGH_DELAY ||
	    ni->state == NEIGH_PROBE || ni->state == NEIGH_PERMANENT)
		fwd_sp_announce(w->dp->e, w->ifindex, ni->family, ni->addr);
	return 0;
}

/* The link's own addresses with its new hardware address, and the addresses learned on
 * the other interfaces (announced where they are proxied, the moved link included). */
static void announce(struct gw_dp *dp, struct dp_link *k)
{
	const struct fwd_snap *s = fwd_engine_current(dp->e);

	for (unsigned i = 0; i < k->n_addrs; i++)
		(void)fwd_sp_announce_own(dp->e, k->ifindex, k->addrs[i].addr.family,
					  k->addrs[i].addr.bytes);
	for (uint32_t x = 1; x < FWD_IF_MAX; x++) {
		const struct fwd_if *f = fwd_snap_if(s, x);
		struct pf_walk w = { dp, x };

		if (f && f->neigh && x != k->ifindex)
			neigh_foreach(f->neigh, announce_neigh, &w);
	}
}

static void on_watch(struct evloop *loop, struct evtimer *t, void *arg)
{
	uint64_t now = now_ms();
	unsigned left = 0;
	(void)loop;
	(void)t;
	(void)arg;

	for (unsigned i = 0; i < pf.n_moved; i++) {
		struct pf_moved *m = &pf.moved[i];
		struct dp_link *k = pf.dp ? dp_link_by_name(pf.dp, m->name) : NULL;

		if (!k || k->kind != DP_IPOIB || m->announced >= 3)
			continue;
		if (!m->up_ms) {
			if (k->ifindex && k->link && !k->reason[0]) {
				m->up_ms = now;
				log_notice("%s: up on IB port %s/%u %llu ms after the move",
					   k->name, k->device, k->port_num,
					   (unsigned long long)(now - m->since_ms));
			} else if (now - m->since_ms > PF_GIVE_UP_MS) {
				log_warning("%s: not up on IB port %s/%u %u s after the move: %s",
					    k->name, k->device, k->port_num, PF_GIVE_UP_MS / 1000,
					    k->reason);
				m->announced = 3;
				continue;
			}
		}
		if (m->up_ms) {
			uint64_t due = m->announced == 0   ? m->up_ms
				       : m->announced == 1 ? m->up_ms + PF_ANNOUNCE_2
							   : m->up_ms + PF_ANNOUNCE_3;

			if (now >= due) {
				announce(pf.dp, k);
				m->announced++;
			}
		}
		if (m->announced < 3)
			left++;
	}
	if (!left) {
		pf.n_moved = 0;
		evtimer_stop(pf.watch_t);
	}
}

/* Build the effective config with the links of the failed port on their other port,
 * and apply it through the reload path. */
static void on_move(struct evloop *loop, struct evtimer *t, void *arg)
{
	const struct gw_config *cur = running();
	struct gw_ipoib_link_config *links;
	unsigned moved = 0;
	(void)loop;
	(void)t;
	(void)arg;

	if (!pf.dp || !cur || !cur->n_ipoib_links)
		return;
	links = calloc(cur->n_ipoib_links, sizeof(*links));
	if (!links) {
		log_error("port failover: out of memory");
		return;
	}
	memcpy(links, cur->ipoib_links, cur->n_ipoib_links * sizeof(*links));
	for (unsigned i = 0; i < cur->n_ipoib_links; i++) {
		struct gw_ipoib_link_config *c = &links[i];
		const char *backend = gw_ipoib_backend_name(c->backend);
		struct dp_link *k = dp_link_by_name(pf.dp, c->name);
		uint8_t to;

		if (!c->backup_port || !k || k->kind != DP_IPOIB || k->port_num != pf.pending.num ||
		    strcmp(backend, pf.pending.backend) || strcmp(c->device, pf.pending.device))
			continue;
		to = c->backup_port;
		if (port_is_down(backend, c->device, to)) {
			log_warning("%s: IB port %s/%u down, and its backup port %u too: staying",
				    c->name, c->device, c->port, to);
			continue;
		}
		log_notice("%s: IB port %s/%u down: moving the link to port %u", c->name, c->device,
			   c->port, to);
		c->backup_port = c->port;
		c->port = to;
		if (pf.n_moved < PF_MAX_LINKS) {
			struct pf_moved *m = &pf.moved[pf.n_moved++];

			memset(m, 0, sizeof(*m));
			snprintf(m->name, sizeof(m->name), "%s", c->name);
			m->since_ms = now_ms();
		}
		moved++;
	}
	if (!moved) {
		free(links);
		return;
	}
	pf.eff = *cur;
	pf.eff.ipoib_links = links;
	free(pf.links); /* the previous effective array: no longer referenced */
	pf.links = links;
	pf.have_eff = true;
	pf.moving = true;
	gw_dp_reconfigure(pf.dp, &pf.eff);
	pf.moving = false;
	pf.moves += moved;
	if (!evtimer_pending(pf.watch_t))
		evtimer_start(pf.watch_t, 0, PF_WATCH_MS);
}

void dp_portfail_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	if (pf.moving)
		return; /* our own reconfigure */
	if (pf.dp != dp) {
		if (pf.move_t)
			evtimer_free(pf.move_t);
		if (pf.watch_t)
			evtimer_free(pf.watch_t);
		memset(&pf, 0, sizeof(pf));
		pf.dp = dp;
		pf.move_t = evtimer_new(dp->loop, on_move, NULL);
		pf.watch_t = evtimer_new(dp->loop, on_watch, NULL);
	}
	/* A reload: the file's ports again (the links rebuilt where the file says). */
	pf.cfg = cfg;
	pf.have_eff = false;
}

void dp_portfail_port_event(struct gw_dp *dp, struct dp_port *p, const struct ibp_event *ev)
{
	if (dp != pf.dp || !pf.move_t)
		return;
	if (ev->type == IBP_EVENT_PORT_ACTIVE) {
		mark_port(p, false);
		return;
	}
	if (ev->type != IBP_EVENT_PORT_DOWN)
		return;
	mark_port(p, true);
	/* Not from inside the port's event handler: the move may open and close ports. */
	snprintf(pf.pending.backend, sizeof(pf.pending.backend), "%s", p->backend);
	snprintf(pf.pending.device, sizeof(pf.pending.device), "%s", p->device);
	pf.pending.num = p->num;
	evtimer_start(pf.move_t, 0, 0);
}

void dp_portfail_stop(struct gw_dp *dp)
{
	if (dp != pf.dp)
		return;
	if (pf.move_t)
		evtimer_free(pf.move_t);
	if (pf.watch_t)
		evtimer_free(pf.watch_t);
	free(pf.links);
	memset(&pf, 0, sizeof(pf));
}

unsigned long dp_portfail_moves(void)
{
	return pf.moves;
}
