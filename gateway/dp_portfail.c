/*
 * IPoIB links on two HCA ports: move a link to its backup port when its port goes
 * down (see gateway/dp_portfail.h). What to move and when is decided by
 * gateway/portmove.c (pure, unit-tested); this file gives it the events, the clock, the
 * reload path and the announcements.
 */
#include "gateway/dp_portfail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/portmove.h"
#include "lib/evloop.h"
#include "lib/log.h"

#define PF_WATCH_MS 5 /* how often a moved link is checked for up */

_Static_assert(GW_PORTMOVE_MAX_PORTS == DP_MAX_PORTS, "a down port for each IB port");

/* A link moving or moved and being announced (its timeline: gateway/portmove.h). */
struct pf_moved {
	char name[GW_NAME_MAX];
	struct gw_portmove_watch w;
};

/* Owner: the control thread. */
struct dp_portfail {
	struct gw_dp *dp;
	const struct gw_config *cfg; /* the daemon's, as loaded */
	struct gw_config eff;        /* cfg with the moved links' ports swapped */
	struct gw_ipoib_link_config *links;
	bool have_eff, moving;
	struct gw_portmove_down down; /* seen down (by event), not seen up since */
	struct pf_moved moved[DP_MAX_LINKS];
	unsigned n_moved;
	struct evtimer *move_t, *watch_t;
	struct { /* moves so far, by link name */
		char name[GW_NAME_MAX];
		unsigned long n;
	} moves[DP_MAX_LINKS];
	unsigned n_moves;
};

static uint64_t now_ms(void)
{
	return evloop_now_ns() / 1000000;
}

static const struct gw_config *running(const struct dp_portfail *pf)
{
	return pf->have_eff ? &pf->eff : pf->cfg;
}

static struct pf_moved *moved_of(struct dp_portfail *pf, const char *name)
{
	for (unsigned i = 0; i < pf->n_moved; i++)
		if (!strcmp(pf->moved[i].name, name))
			return &pf->moved[i];
	return NULL;
}

static unsigned long *moves_of(struct dp_portfail *pf, const char *name, bool add)
{
	for (unsigned i = 0; i < pf->n_moves; i++)
		if (!strcmp(pf->moves[i].name, name))
			return &pf->moves[i].n;
	if (!add || pf->n_moves == DP_MAX_LINKS)
		return NULL;
	snprintf(pf->moves[pf->n_moves].name, sizeof(pf->moves[0].name), "%s", name);
	return &pf->moves[pf->n_moves++].n;
}

/* The link's own addresses with its new hardware address, and the addresses learned on
 * the other interfaces (announced where they are proxied, the moved link included). */
static void announce(struct gw_dp *dp, struct dp_link *k)
{
	for (unsigned i = 0; i < k->n_addrs; i++)
		(void)fwd_sp_announce_own(dp->e, k->ifindex, k->addrs[i].addr.family,
					  k->addrs[i].addr.bytes);
	dp_announce_neighbours(dp, k->ifindex);
}

static void on_watch(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct dp_portfail *pf = arg;
	uint64_t now = now_ms();
	unsigned left = 0;
	(void)loop;
	(void)t;

	for (unsigned i = 0; i < pf->n_moved; i++) {
		struct pf_moved *m = &pf->moved[i];
		struct dp_link *k = dp_link_by_name(pf->dp, m->name);
		unsigned what;

		if (!k || k->kind != DP_IPOIB || m->w.announced >= 3)
			continue;
		what = gw_portmove_step(&m->w, k->ifindex && k->link && !k->reason[0], now);
		if (what & GW_PORTMOVE_UP)
			log_notice("%s: up on IB port %s/%u %llu ms after the move", k->name,
				   k->device, k->port_num,
				   (unsigned long long)(now - m->w.since_ms));
		if (what & GW_PORTMOVE_GAVE_UP) {
			log_warning("%s: not up on IB port %s/%u %u s after the move: %s", k->name,
				    k->device, k->port_num, GW_PORTMOVE_GIVE_UP_MS / 1000,
				    k->reason);
			continue;
		}
		if (what & GW_PORTMOVE_TELL_HA)
			dp_ha_link_changed(pf->dp, k); /* no longer held up (dp_portfail_moving) */
		if (what & GW_PORTMOVE_ANNOUNCE)
			announce(pf->dp, k);
		if (m->w.announced < 3)
			left++;
	}
	if (!left) {
		pf->n_moved = 0;
		evtimer_stop(pf->watch_t);
	}
}

/* Build the effective config with the moving links on their other port, and apply it
 * through the reload path. */
static void on_move(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct dp_portfail *pf = arg;
	const struct gw_config *cur = running(pf);
	struct gw_ipoib_link_config *links;
	unsigned moved = 0;
	(void)loop;
	(void)t;

	if (!cur || !cur->n_ipoib_links)
		return;
	links = calloc(cur->n_ipoib_links, sizeof(*links));
	if (!links) {
		log_error("port failover: out of memory");
		return;
	}
	memcpy(links, cur->ipoib_links, cur->n_ipoib_links * sizeof(*links));
	for (unsigned i = 0; i < cur->n_ipoib_links; i++) {
		struct gw_ipoib_link_config *c = &links[i];
		struct pf_moved *m = moved_of(pf, c->name);
		unsigned long *n;

		if (!m || m->w.applied)
			continue;
		log_notice("%s: IB port %s/%u down: moving the link to port %u", c->name, c->device,
			   c->port, c->backup_port);
		gw_portmove_swap(c);
		m->w.applied = true;
		n = moves_of(pf, c->name, true);
		if (n)
			(*n)++;
		moved++;
	}
	if (!moved) {
		free(links);
		return;
	}
	pf->eff = *cur;
	pf->eff.ipoib_links = links;
	free(pf->links); /* the previous effective array: no longer referenced */
	pf->links = links;
	pf->have_eff = true;
	pf->moving = true;
	uint64_t t0 = now_ms();
	gw_dp_reconfigure(pf->dp, &pf->eff, NULL);
	log_info("port failover: %u link%s rebuilt in %llu ms", moved, moved == 1 ? "" : "s",
		 (unsigned long long)(now_ms() - t0));
	pf->moving = false;
}

void dp_portfail_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	struct dp_portfail *pf = dp->portfail;

	if (!pf) {
		pf = calloc(1, sizeof(*pf));
		if (pf) {
			pf->dp = dp;
			pf->move_t = evtimer_new(dp->loop, on_move, pf);
			pf->watch_t = evtimer_new(dp->loop, on_watch, pf);
		}
		if (!pf || !pf->move_t || !pf->watch_t) {
			log_error("port failover: out of memory: links stay on their port");
			dp->portfail = pf;
			dp_portfail_stop(dp);
			return;
		}
		dp->portfail = pf;
	}
	if (pf->moving)
		return; /* our own reconfigure */
	/* A reload: the file's ports again (the links rebuilt where the file says). */
	pf->cfg = cfg;
	pf->have_eff = false;
}

void dp_portfail_port_event(struct gw_dp *dp, struct dp_port *p, const struct ibp_event *ev)
{
	struct dp_portfail *pf = dp->portfail;
	const struct gw_config *cur = pf ? running(pf) : NULL;
	bool any = false;

	if (!cur)
		return;
	if (ev->type == IBP_EVENT_PORT_ACTIVE) {
		gw_portmove_mark(&pf->down, p->backend, p->device, p->num, false);
		return;
	}
	if (ev->type != IBP_EVENT_PORT_DOWN)
		return;
	gw_portmove_mark(&pf->down, p->backend, p->device, p->num, true);
	/* The links to move, known now: failover holds their paths up meanwhile. */
	for (unsigned i = 0; i < cur->n_ipoib_links; i++) {
		const struct gw_ipoib_link_config *c = &cur->ipoib_links[i];
		struct dp_link *k = dp_link_by_name(dp, c->name);
		struct pf_moved *m;

		switch (gw_portmove_on_down(c, k && k->kind == DP_IPOIB ? k->port_num : 0,
					    p->backend, p->device, p->num, &pf->down)) {
		case GW_PORTMOVE_NOT_HERE:
		case GW_PORTMOVE_NO_BACKUP:
			continue;
		case GW_PORTMOVE_BACKUP_DOWN:
			log_warning("%s: IB port %s/%u down, and its backup port %u too: staying",
				    c->name, c->device, c->port, c->backup_port);
			continue;
		case GW_PORTMOVE_MOVE:
			break;
		}
		m = moved_of(pf, c->name);
		if (!m && pf->n_moved < DP_MAX_LINKS)
			m = &pf->moved[pf->n_moved++];
		if (!m)
			continue;
		memset(m, 0, sizeof(*m));
		snprintf(m->name, sizeof(m->name), "%s", c->name);
		m->w.since_ms = now_ms();
		any = true;
	}
	if (!any)
		return;
	/* Not from inside the port's event handler: the move opens and closes ports. */
	evtimer_start(pf->move_t, 0, 0);
	if (!evtimer_pending(pf->watch_t))
		evtimer_start(pf->watch_t, PF_WATCH_MS, PF_WATCH_MS);
}

bool dp_portfail_moving(const struct gw_dp *dp, const struct dp_link *k)
{
	const struct pf_moved *m = dp->portfail ? moved_of(dp->portfail, k->name) : NULL;

	return m && gw_portmove_held(&m->w);
}

unsigned long dp_portfail_moves(const struct gw_dp *dp, const struct dp_link *k)
{
	const unsigned long *n = dp->portfail ? moves_of(dp->portfail, k->name, false) : NULL;

	return n ? *n : 0;
}

void dp_portfail_stop(struct gw_dp *dp)
{
	struct dp_portfail *pf = dp->portfail;

	if (!pf)
		return;
	if (pf->move_t)
		evtimer_free(pf->move_t);
	if (pf->watch_t)
		evtimer_free(pf->watch_t);
	free(pf->links);
	free(pf);
	dp->portfail = NULL;
}
