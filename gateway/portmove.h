/*
 * The decisions of port failover (gateway/dp_portfail.c), as pure functions: which IB
 * ports are down, which IPoIB links move on a port-down event, how a link's config is
 * swapped to its other port, and the timeline of a moved link (up, announced three
 * times, failover told, given up). Time comes in as an argument and nothing here sends,
 * opens or logs, so test/unit/test_gw_portmove.c runs them without ports or root.
 *
 * The rules (docs: gateway/dp_portfail.h): a port-down event moves every link running on
 * that port that has a backup_port, unless the backup port is down too (then it stays);
 * a port-up event only marks the port up: no link moves back by itself (each move is a
 * gap, and a port that just flapped is not trusted at once). A moved link has its port
 * and backup_port swapped, so it moves back when the port it is on now goes down and
 * the first one is up.
 *
 * Owner: the callers' (the control thread); no state of its own.
 */
#ifndef IBGW_GATEWAY_PORTMOVE_H
#define IBGW_GATEWAY_PORTMOVE_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/config.h"

#define GW_PORTMOVE_MAX_PORTS 8 /* the data plane's IB ports (DP_MAX_PORTS) */

#define GW_PORTMOVE_ANNOUNCE_2 200  /* ms after up: the second announcement */
#define GW_PORTMOVE_ANNOUNCE_3 1200 /* the third: past a Linux neighbour's locktime (1 s) */
#define GW_PORTMOVE_HA_GRACE   2000 /* a move not up by then is a path down for failover */
#define GW_PORTMOVE_GIVE_UP_MS 30000

/* An IB port: backend by name (gw_ipoib_backend_name), device, number. */
struct gw_portmove_port {
	char backend[16], device[GW_NAME_MAX];
	uint8_t num;
};

/* The ports seen down (by event) and not seen up since. */
struct gw_portmove_down {
	struct gw_portmove_port port[GW_PORTMOVE_MAX_PORTS];
	unsigned n;
};

/* Mark the port down or up (a full set forgets a further down port). */
void gw_portmove_mark(struct gw_portmove_down *d, const char *backend, const char *device,
		      uint8_t num, bool down);
bool gw_portmove_is_down(const struct gw_portmove_down *d, const char *backend, const char *device,
			 uint8_t num);

enum gw_portmove_verdict {
	GW_PORTMOVE_NOT_HERE,    /* not running as an IPoIB link on the port that went down */
	GW_PORTMOVE_NO_BACKUP,   /* on it, without a backup_port: stays (and is down) */
	GW_PORTMOVE_BACKUP_DOWN, /* on it, and its backup port is down too: stays */
	GW_PORTMOVE_MOVE,        /* to its backup port */
};

/* Port (backend, device, num) went down, and is already marked so in d: what becomes of
 * the configured link c, which runs as an IPoIB link on port running_port (0: it does not
 * run as one). */
enum gw_portmove_verdict gw_portmove_on_down(const struct gw_ipoib_link_config *c,
					     uint8_t running_port, const char *backend,
					     const char *device, uint8_t num,
					     const struct gw_portmove_down *d);

/* A link's config for its other port: port and backup_port swapped. */
void gw_portmove_swap(struct gw_ipoib_link_config *c);

/* A link moving (up_ms 0) or moved and being announced. */
struct gw_portmove_watch {
	uint64_t since_ms, up_ms; /* the port-down event; up on the other port (0: not yet) */
	unsigned announced;       /* 0..3; 3: done (or given up) */
	bool applied;             /* rebuilt on the other port */
	bool ha_told;             /* not up within the grace: failover told its path is down */
};

/* What a watch step found (bits). */
#define GW_PORTMOVE_UP       0x1u /* up on the other port now (now - since_ms after) */
#define GW_PORTMOVE_ANNOUNCE 0x2u /* announce its addresses (and the proxied ones) now */
#define GW_PORTMOVE_TELL_HA  0x4u /* not up within GW_PORTMOVE_HA_GRACE: tell failover */
#define GW_PORTMOVE_GAVE_UP  0x8u /* not up within GW_PORTMOVE_GIVE_UP_MS: no more watching */

/* One step of the watch at time now (ms): link_up says whether the link runs with its
 * interface and no reason to be down. Up once applied; then announced at once, after
 * GW_PORTMOVE_ANNOUNCE_2 and after GW_PORTMOVE_ANNOUNCE_3. Returns GW_PORTMOVE_* bits. */
unsigned gw_portmove_step(struct gw_portmove_watch *w, bool link_up, uint64_t now);
/* Whether failover holds the link's path up: moving, not up yet, within the grace. */
bool gw_portmove_held(const struct gw_portmove_watch *w);

#endif
