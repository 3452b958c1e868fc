/*
 * Port failover's decisions: down ports, which links move, the swap, a moved link's
 * timeline (see gateway/portmove.h). Pure: called by the control thread from
 * gateway/dp_portfail.c, and by the unit tests.
 */
#include "gateway/portmove.h"

#include <stdio.h>
#include <string.h>

static bool same_port(const struct gw_portmove_port *a, const char *backend, const char *device,
		      uint8_t num)
{
	return a->num == num && !strcmp(a->backend, backend) && !strcmp(a->device, device);
}

bool gw_portmove_is_down(const struct gw_portmove_down *d, const char *backend, const char *device,
			 uint8_t num)
{
	for (unsigned i = 0; i < d->n; i++)
		if (same_port(&d->port[i], backend, device, num))
			return true;
	return false;
}

void gw_portmove_mark(struct gw_portmove_down *d, const char *backend, const char *device,
		      uint8_t num, bool down)
{
	for (unsigned i = 0; i < d->n; i++)
		if (same_port(&d->port[i], backend, device, num)) {
			if (!down)
				d->port[i] = d->port[--d->n];
			return;
		}
	if (down && d->n < GW_PORTMOVE_MAX_PORTS) {
		struct gw_portmove_port *p = &d->port[d->n++];

		snprintf(p->backend, sizeof(p->backend), "%s", backend);
		snprintf(p->device, sizeof(p->device), "%s", device);
		p->num = num;
	}
}

enum gw_portmove_verdict gw_portmove_on_down(const struct gw_ipoib_link_config *c,
					     uint8_t running_port, const char *backend,
					     const char *device, uint8_t num,
					     const struct gw_portmove_down *d)
{
	const char *cb = gw_ipoib_backend_name(c->backend);

	if (!running_port || running_port != num || strcmp(cb, backend) ||
	    strcmp(c->device, device))
		return GW_PORTMOVE_NOT_HERE;
	if (!c->backup_port)
		return GW_PORTMOVE_NO_BACKUP;
	if (gw_portmove_is_down(d, cb, c->device, c->backup_port))
		return GW_PORTMOVE_BACKUP_DOWN;
	return GW_PORTMOVE_MOVE;
}

void gw_portmove_swap(struct gw_ipoib_link_config *c)
{
	uint8_t to = c->backup_port;

	c->backup_port = c->port;
	c->port = to;
}

unsigned gw_portmove_step(struct gw_portmove_watch *w, bool link_up, uint64_t now)
{
	unsigned out = 0;

	if (w->announced >= 3)
		return 0;
	if (!w->up_ms) {
		if (w->applied && link_up) {
			w->up_ms = now;
			out |= GW_PORTMOVE_UP;
		} else if (now - w->since_ms > GW_PORTMOVE_GIVE_UP_MS) {
			w->announced = 3;
			return GW_PORTMOVE_GAVE_UP;
		} else if (now - w->since_ms > GW_PORTMOVE_HA_GRACE && !w->ha_told) {
			/* Held up for failover so far (gw_portmove_held): no more. */
			w->ha_told = true;
			out |= GW_PORTMOVE_TELL_HA;
		}
	}
	if (w->up_ms) {
		uint64_t due = w->announced == 0   ? w->up_ms
			       : w->announced == 1 ? w->up_ms + GW_PORTMOVE_ANNOUNCE_2
						   : w->up_ms + GW_PORTMOVE_ANNOUNCE_3;

		if (now >= due) {
			w->announced++;
			out |= GW_PORTMOVE_ANNOUNCE;
		}
	}
	return out;
}

bool gw_portmove_held(const struct gw_portmove_watch *w)
{
	return !w->up_ms && !w->ha_told && w->announced < 3;
}
