/*
 * Unit tests for port failover's decisions (gateway/portmove.c), the functions
 * gateway/dp_portfail.c runs on an IB port's events: which IPoIB links move to their
 * backup_port on a port-down event and which stay, that a port-up event moves nothing
 * back, that a moved link moves back when the port it is on goes down and the first is
 * up, both ports down, and a moved link's timeline (up, three announcements, failover
 * told after the grace, given up). Configs come from YAML; time is an argument.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gateway/config.h"
#include "gateway/portmove.h"
#include "test/unit/config_load.h"

/* ib0 and ib2 have a backup port, ib1 has none; ib3 is on another HCA. */
#define RACK                                                                                       \
	"ipoib_links:\n"                                                                           \
	"  - {name: ib0, backend: verbs, device: gw1, port: 1, backup_port: 2}\n"                  \
	"  - {name: ib1, backend: verbs, device: gw1, port: 1}\n"                                  \
	"  - {name: ib2, backend: verbs, device: gw1, port: 2, backup_port: 1}\n"                  \
	"  - {name: ib3, backend: verbs, device: gw2, port: 1, backup_port: 2}\n"

/* What dp_portfail_port_event and on_move do with the verdicts: the links as they run
 * (config with moved links swapped, each running on its config's port). */
struct box {
	struct gw_config *cfg;
	struct gw_ipoib_link_config links[8];
	struct gw_portmove_down down;
};

static void box_start(struct box *b, const char *yaml)
{
	memset(b, 0, sizeof(*b));
	b->cfg = load(yaml);
	assert_true(b->cfg->n_ipoib_links <= 8);
	memcpy(b->links, b->cfg->ipoib_links, b->cfg->n_ipoib_links * sizeof(b->links[0]));
}

static void box_done(struct box *b)
{
	gw_config_free(b->cfg);
}

static uint8_t port_of(const struct box *b, const char *name)
{
	for (unsigned i = 0; i < b->cfg->n_ipoib_links; i++)
		if (!strcmp(b->links[i].name, name))
			return b->links[i].port;
	fail_msg("no link %s", name);
	return 0;
}

/* A port event on gw1 (verbs); returns the verdicts "ib0:move ib1:no-backup ..." for the
 * links on that port, and moves those that move. */
static const char *event(struct box *b, uint8_t num, bool down)
{
	static const char *const word[] = { "not-here", "no-backup", "backup-down", "move" };
	static char out[256];
	size_t len = 0;

	out[0] = 0;
	gw_portmove_mark(&b->down, "verbs", "gw1", num, down);
	if (!down)
		return out;
	for (unsigned i = 0; i < b->cfg->n_ipoib_links; i++) {
		struct gw_ipoib_link_config *c = &b->links[i];
		enum gw_portmove_verdict v =
		    gw_portmove_on_down(c, c->port, "verbs", "gw1", num, &b->down);

		if (v == GW_PORTMOVE_NOT_HERE)
			continue;
		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s:%s", len ? " " : "",
					c->name, word[v]);
		if (v == GW_PORTMOVE_MOVE)
			gw_portmove_swap(c);
	}
	return out;
}

static void down_with_backup_moves(void **state)
{
	struct box b;
	(void)state;

	box_start(&b, RACK);
	assert_string_equal(event(&b, 1, true), "ib0:move ib1:no-backup");
	assert_int_equal(port_of(&b, "ib0"), 2);
	assert_int_equal(b.links[0].backup_port, 1);
	assert_int_equal(port_of(&b, "ib1"), 1); /* stays, down with its port */
	assert_int_equal(port_of(&b, "ib2"), 2); /* was not on it */
	assert_int_equal(port_of(&b, "ib3"), 1); /* port 1 of another HCA */
	box_done(&b);
}

/* Port up: marked, nothing moves back; the moved link goes back when the port it is on
 * now goes down and the first one is up. */
static void up_moves_nothing_back(void **state)
{
	struct box b;
	(void)state;

	box_start(&b, RACK);
	assert_string_equal(event(&b, 1, true), "ib0:move ib1:no-backup");
	assert_string_equal(event(&b, 1, false), "");
	assert_false(gw_portmove_is_down(&b.down, "verbs", "gw1", 1));
	assert_int_equal(port_of(&b, "ib0"), 2);
	assert_string_equal(event(&b, 2, true), "ib0:move ib2:move");
	assert_int_equal(port_of(&b, "ib0"), 1);
	assert_int_equal(b.links[0].backup_port, 2);
	assert_int_equal(port_of(&b, "ib2"), 1);
	box_done(&b);
}

/* Both ports down: a link stays where it is, whichever went first. */
static void both_ports_down(void **state)
{
	struct box b;
	(void)state;

	box_start(&b, RACK);
	assert_string_equal(event(&b, 2, true), "ib2:move");
	assert_string_equal(event(&b, 1, true), "ib0:backup-down ib1:no-backup ib2:backup-down");
	assert_int_equal(port_of(&b, "ib0"), 1);
	assert_int_equal(port_of(&b, "ib2"), 1);
	/* Port 2 back, then port 1 down again (a second event): now they move. */
	assert_string_equal(event(&b, 2, false), "");
	assert_string_equal(event(&b, 1, true), "ib0:move ib1:no-backup ib2:move");
	assert_int_equal(port_of(&b, "ib0"), 2);
	assert_int_equal(port_of(&b, "ib2"), 2);
	box_done(&b);
}

/* Only a link running as an IPoIB link on that very port (backend, device, number). */
static void which_links_are_here(void **state)
{
	struct gw_config *cfg = load(RACK);
	const struct gw_ipoib_link_config *ib0 = &cfg->ipoib_links[0];
	struct gw_portmove_down d = { .n = 0 };
	(void)state;

	gw_portmove_mark(&d, "verbs", "gw1", 1, true);
	assert_int_equal(gw_portmove_on_down(ib0, 1, "verbs", "gw1", 1, &d), GW_PORTMOVE_MOVE);
	/* Not running (never came up, or removed): nothing to move. */
	assert_int_equal(gw_portmove_on_down(ib0, 0, "verbs", "gw1", 1, &d), GW_PORTMOVE_NOT_HERE);
	/* Running on port 2 already (moved): port 1's event is not its own. */
	assert_int_equal(gw_portmove_on_down(ib0, 2, "verbs", "gw1", 1, &d), GW_PORTMOVE_NOT_HERE);
	assert_int_equal(gw_portmove_on_down(ib0, 1, "verbs", "gw2", 1, &d), GW_PORTMOVE_NOT_HERE);
	gw_config_free(cfg);
}

static void down_set(void **state)
{
	struct gw_portmove_down d = { .n = 0 };
	(void)state;

	gw_portmove_mark(&d, "verbs", "gw1", 1, true);
	gw_portmove_mark(&d, "verbs", "gw1", 1, true); /* twice: once */
	assert_int_equal(d.n, 1);
	gw_portmove_mark(&d, "verbs", "gw1", 2, false); /* up, never seen down: nothing */
	assert_int_equal(d.n, 1);
	assert_true(gw_portmove_is_down(&d, "verbs", "gw1", 1));
	assert_false(gw_portmove_is_down(&d, "verbs", "gw2", 1));
	for (uint8_t p = 2; p <= 10; p++)
		gw_portmove_mark(&d, "verbs", "gw1", p, true);
	assert_int_equal(d.n, GW_PORTMOVE_MAX_PORTS); /* full: the ninth and tenth forgotten */
	assert_false(gw_portmove_is_down(&d, "verbs", "gw1", 9));
	gw_portmove_mark(&d, "verbs", "gw1", 1, false);
	assert_int_equal(d.n, GW_PORTMOVE_MAX_PORTS - 1);
	assert_false(gw_portmove_is_down(&d, "verbs", "gw1", 1));
	assert_true(gw_portmove_is_down(&d, "verbs", "gw1", 8));
}

/* Up once rebuilt on the other port; announced at once, 200 ms and 1200 ms later. */
static void moved_link_timeline(void **state)
{
	struct gw_portmove_watch w = { .since_ms = 1000 };
	(void)state;

	assert_true(gw_portmove_held(&w));
	assert_int_equal(gw_portmove_step(&w, true, 1005), 0); /* not rebuilt yet */
	w.applied = true;
	assert_int_equal(gw_portmove_step(&w, false, 1010), 0); /* rebuilt, not up yet */
	assert_true(gw_portmove_held(&w));
	assert_int_equal(gw_portmove_step(&w, true, 1100), GW_PORTMOVE_UP | GW_PORTMOVE_ANNOUNCE);
	assert_int_equal(w.up_ms, 1100);
	assert_false(gw_portmove_held(&w));
	assert_int_equal(gw_portmove_step(&w, true, 1299), 0);
	assert_int_equal(gw_portmove_step(&w, true, 1300), GW_PORTMOVE_ANNOUNCE);
	assert_int_equal(gw_portmove_step(&w, true, 2299), 0);
	/* Down again meanwhile: announced all the same (the watch counts from up). */
	assert_int_equal(gw_portmove_step(&w, false, 2300), GW_PORTMOVE_ANNOUNCE);
	assert_int_equal(w.announced, 3);
	assert_int_equal(gw_portmove_step(&w, true, 9000), 0);
}

/* Not up within 2 s: failover is told once (the path no longer held up); up later is
 * announced as usual; not up within 30 s: given up. */
static void slow_and_failed_moves(void **state)
{
	struct gw_portmove_watch w = { .since_ms = 1000, .applied = true };
	(void)state;

	assert_int_equal(gw_portmove_step(&w, false, 3000), 0);
	assert_true(gw_portmove_held(&w));
	assert_int_equal(gw_portmove_step(&w, false, 3001), GW_PORTMOVE_TELL_HA);
	assert_false(gw_portmove_held(&w));
	assert_int_equal(gw_portmove_step(&w, false, 3002), 0);
	assert_int_equal(gw_portmove_step(&w, true, 5000), GW_PORTMOVE_UP | GW_PORTMOVE_ANNOUNCE);

	w = (struct gw_portmove_watch){ .since_ms = 1000, .applied = true };
	assert_int_equal(gw_portmove_step(&w, false, 31000), GW_PORTMOVE_TELL_HA);
	assert_int_equal(gw_portmove_step(&w, false, 31001), GW_PORTMOVE_GAVE_UP);
	assert_int_equal(w.announced, 3);
	assert_false(gw_portmove_held(&w));
	assert_int_equal(gw_portmove_step(&w, true, 31002), 0); /* no longer watched */

	/* Never rebuilt (the reload did not take): given up all the same. */
	w = (struct gw_portmove_watch){ .since_ms = 0 };
	assert_int_equal(gw_portmove_step(&w, true, 30001), GW_PORTMOVE_GAVE_UP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(down_with_backup_moves),
		cmocka_unit_test(up_moves_nothing_back),
		cmocka_unit_test(both_ports_down),
		cmocka_unit_test(which_links_are_here),
		cmocka_unit_test(down_set),
		cmocka_unit_test(moved_link_timeline),
		cmocka_unit_test(slow_and_failed_moves),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
