/*
 * gwctl's grammar: options, objects and commands, -batch lines (mgmt/ctl_cmd.h).
 *
 * The tables are the grammar: adding a command is a line in its object's list, and help,
 * the parser and the completion's word lists (packaging/bash-completion/gwctl, checked
 * against `gwctl help` by test/integration/gwctl_grammar.sh) follow from them.
 */
#include "mgmt/ctl_cmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/ctl_proto.h"

static int fail(char why[CTL_CMD_WHY_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(char why[CTL_CMD_WHY_LEN], const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, CTL_CMD_WHY_LEN, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* ---- the commands ---------------------------------------------------------------------- */

#define SHOW(obj, t, args, h)                                                                      \
	{                                                                                          \
		obj, "show", t, false, args, h                                                     \
	}

static const struct ctl_cmd c_link_show = SHOW(
    "link", CTL_SHOW_LINKS, "[tenant NAME]", "IPoIB links and Ethernet interfaces (-s: counters)");
static const struct ctl_cmd c_route_show =
    SHOW("route", CTL_SHOW_ROUTES, "[tenant NAME|all] [PREFIX]",
	 "the routing table (default: the default tenant's), like ip route");
static const struct ctl_cmd c_route_add = {
	"route",
	"add",
	CTL_ROUTE_ADD,
	true,
	"[blackhole] PREFIX [via ADDR ...] [dev NAME] [metric N] [nexthop via ADDR [dev NAME]]... "
	"[tenant NAME]",
	"add a static route (kept until deleted or restart; a reload leaves it)"
};
static const struct ctl_cmd c_route_del = {
	"route",
	"del",
	CTL_ROUTE_DEL,
	true,
	"PREFIX [metric N] [via ADDR ...] [dev NAME] [tenant NAME]",
	"delete a static route"
};
static const struct ctl_cmd c_neigh_show = SHOW("neigh", CTL_SHOW_NEIGHBOURS, "[dev NAME]",
						"neighbours of every interface, like ip neigh");
static const struct ctl_cmd c_neigh_add = {
	"neigh",
	"add",
	CTL_NEIGH_ADD,
	true,
	"ADDR lladdr LLADDR dev NAME",
	"add a PERMANENT neighbour (MAC, or 20-octet IPoIB address)"
};
static const struct ctl_cmd c_neigh_del = {
	"neigh", "del", CTL_NEIGH_DEL, true, "ADDR dev NAME [lladdr LLADDR]", "delete a neighbour"
};
static const struct ctl_cmd c_neigh_flush = {
	"neigh",
	"flush",
	CTL_NEIGH_FLUSH,
	true,
	"dev NAME [to PREFIX]",
	"delete the neighbours of an interface, but PERMANENT ones"
};
static const struct ctl_cmd c_path_show =
    SHOW("path", CTL_SHOW_PATHS, NULL, "the SA client's path cache");
static const struct ctl_cmd c_path_flush = {
	"path", "flush", CTL_PATH_FLUSH,
	true,   "[GID]", "drop the SA client's cached paths (every port), or those to GID"
};
static const struct ctl_cmd c_gid_route_show =
    SHOW("gid-route", CTL_SHOW_GID_ROUTES, NULL,
	 "routes to other IB subnets, per IB port, with each router's state");
static const struct ctl_cmd c_mcast_show = SHOW(
    "mcast", CTL_SHOW_MCAST, NULL,
    "multicast groups of the IPoIB links, and IP multicast per interface (groups, members, counters)");
static const struct ctl_cmd c_ra_show =
    SHOW("ra", CTL_SHOW_RA, NULL,
	 "router advertisements per interface: state, settings, prefixes, counters");
static const struct ctl_cmd c_dhcp_show = SHOW(
    "dhcp", CTL_SHOW_DHCP, NULL, "DHCP relay per interface: giaddr, servers, option 82, counters");
static const struct ctl_cmd c_config_show =
    SHOW("config", CTL_SHOW_CONFIG, NULL, "the running configuration");
static const struct ctl_cmd c_connection_show =
    SHOW("connection", CTL_SHOW_CONNECTIONS, NULL, "IPoIB connected-mode connections");
static const struct ctl_cmd c_stats_show =
    SHOW("stats", CTL_SHOW_STATS, NULL, "forwarding counters: packets, drops by reason, slow path");
static const struct ctl_cmd c_ha_show = SHOW(
    "ha", CTL_SHOW_HA, NULL, "failover: roles, peer, heartbeat paths, last transitions and why");
static const struct ctl_cmd c_ha_switchover = {
	"ha", "switchover", CTL_HA_SWITCHOVER,
	true, "[GROUP]",    "hand failover groups (default: all) to the peer, or take them from it"
};
static const struct ctl_cmd c_version_show =
    SHOW("version", CTL_SHOW_VERSION, NULL, "daemon and client versions, uptime");
static const struct ctl_cmd c_reload = {
	"reload",
	NULL,
	CTL_RELOAD,
	true,
	NULL,
	"reload the configuration file: says what changed; exit 1 if not applied as written"
};
static const struct ctl_cmd c_log_level = { "log",
					    "level",
					    CTL_LOG_LEVEL,
					    true,
					    "error|warning|notice|info|debug",
					    "set the daemon's log level" };

static const struct ctl_cmd c_capture = {
	"capture",
	NULL,
	CTL_CAPTURE,
	true,
	"DEV [count N] [duration SECONDS] [snaplen N] [direction in|out|both] [filter] "
	"[EXPRESSION] -w FILE|-",
	"the packets DEV sends and receives, as pcap (tshark -r FILE)"
};

#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NO_NAMES   ((const char *const[]){ NULL })
#define CMDS(...)  ((const struct ctl_cmd *const[]){ __VA_ARGS__, NULL })

/* The order is the grammar's: a prefix picks the first name it begins. */
static const struct ctl_object objects[] = {
	{ "link", NAMES("links", "interface", "interfaces"), "IPoIB links and Ethernet interfaces",
	  CMDS(&c_link_show) },
	{ "route", NAMES("routes"), "the IP routing table",
	  CMDS(&c_route_show, &c_route_add, &c_route_del) },
	{ "neigh", NAMES("neighbour", "neighbours", "neighbor", "neighbors"),
	  "neighbours (ARP, ND, IPoIB hardware addresses)",
	  CMDS(&c_neigh_show, &c_neigh_add, &c_neigh_del, &c_neigh_flush) },
	{ "path", NAMES("paths"), "the SA client's path records",
	  CMDS(&c_path_show, &c_path_flush) },
	{ "gid-route", NAMES("gid-routes"), "routes to other IB subnets", CMDS(&c_gid_route_show) },
	{ "mcast", NAMES("multicast"), "IPoIB multicast groups and IP multicast forwarding",
	  CMDS(&c_mcast_show) },
	{ "ra", NAMES("router-advertisements"), "router advertisements", CMDS(&c_ra_show) },
	{ "dhcp", NAMES("dhcp-relay"), "DHCP relay", CMDS(&c_dhcp_show) },
	{ "config", NAMES("configuration"), "the running configuration", CMDS(&c_config_show) },
	{ "connection", NAMES("connections"), "IPoIB connected-mode connections",
	  CMDS(&c_connection_show) },
	{ "stats", NAMES("statistics"), "forwarding counters", CMDS(&c_stats_show) },
	{ "ha", NAMES("failover"), "failover pair", CMDS(&c_ha_show, &c_ha_switchover) },
	{ "version", NO_NAMES, "versions and uptime", CMDS(&c_version_show) },
	{ "reload", NO_NAMES, "reload the configuration file", CMDS(&c_reload) },
	{ "log", NAMES("logging"), "the daemon's log", CMDS(&c_log_level) },
	{ "capture", NO_NAMES, "a packet capture of an interface", CMDS(&c_capture) },
};
#define N_OBJECTS (sizeof(objects) / sizeof(objects[0]))

const struct ctl_object *ctl_objects(unsigned *n)
{
	*n = N_OBJECTS;
	return objects;
}

/* ---- words ----------------------------------------------------------------------------- */

static bool is_prefix(const char *word, const char *of)
{
	size_t n = strlen(word);

	return n && !strncmp(word, of, n);
}

/* The object word names: an exact name or alias first, else the first the word begins. */
static const struct ctl_object *find_object(const char *word)
{
	for (unsigned i = 0; i < N_OBJECTS; i++) {
		if (!strcmp(word, objects[i].name))
			return &objects[i];
		for (unsigned a = 0; objects[i].aliases[a]; a++)
			if (!strcmp(word, objects[i].aliases[a]))
				return &objects[i];
	}
	for (unsigned i = 0; i < N_OBJECTS; i++) {
		if (is_prefix(word, objects[i].name))
			return &objects[i];
		for (unsigned a = 0; objects[i].aliases[a]; a++)
			if (is_prefix(word, objects[i].aliases[a]))
				return &objects[i];
	}
	return NULL;
}

/* A verb's spellings, in the order a prefix is tried. */
static const char *const verb_words[][3] = {
	{ "show", "list", "ls" }, { "add", NULL, NULL },        { "del", "delete", NULL },
	{ "flush", NULL, NULL },  { "switchover", NULL, NULL }, { "level", NULL, NULL },
};
#define N_VERBS (sizeof(verb_words) / sizeof(verb_words[0]))

static bool verb_matches(const char *word, const char *verb, bool exact)
{
	for (unsigned v = 0; v < N_VERBS; v++) {
		if (strcmp(verb_words[v][0], verb))
			continue;
		for (unsigned s = 0; s < 3 && verb_words[v][s]; s++)
			if (exact ? !strcmp(word, verb_words[v][s])
				  : is_prefix(word, verb_words[v][s]))
				return true;
	}
	return false;
}

static const struct ctl_cmd *find_verb(const struct ctl_object *o, const char *word)
{
	for (int exact = 1; exact >= 0; exact--)
		for (unsigned i = 0; o->cmds[i]; i++)
			if (o->cmds[i]->verb && verb_matches(word, o->cmds[i]->verb, exact))
				return o->cmds[i];
	return NULL;
}

/* "show, add, del or help": what object o's commands are called. */
static void verb_list(const struct ctl_object *o, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; o->cmds[i]; i++)
		if (o->cmds[i]->verb && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s, ", o->cmds[i]->verb);
	if (n >= 2 && n < len)
		n -= 2; /* the last verb before "or help" takes no comma */
	if (n < len)
		snprintf(buf + n, len - n, " or help");
}

static void object_list(char *buf, size_t len, bool show_only)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < N_OBJECTS; i++) {
		if (show_only &&
		    strcmp(objects[i].cmds[0]->verb ? objects[i].cmds[0]->verb : "", "show"))
			continue;
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "",
				      objects[i].name);
	}
}

static bool is_help(const char *word)
{
	return !strcmp(word, "help") || (strlen(word) >= 2 && is_prefix(word, "help")) ||
	       !strcmp(word, "-h") || !strcmp(word, "--help");
}

/* "show OBJECT [ARGS]": the verb first. */
static int parse_show_first(int argc, char **argv, struct ctl_parsed *out,
			    char why[CTL_CMD_WHY_LEN])
{
	char list[256];
	const struct ctl_object *o;

	object_list(list, sizeof(list), true);
	if (argc < 2)
		return fail(why, "show what? one of: %s", list);
	if (is_help(argv[1])) {
		out->help = true;
		return 0;
	}
	o = find_object(argv[1]);
	if (!o || !o->cmds[0]->verb || strcmp(o->cmds[0]->verb, "show"))
		return fail(why, "cannot show '%.64s'; one of: %s", argv[1], list);
	if (argc > 2 && is_help(argv[2])) {
		out->help = true;
		out->object = o;
		return 0;
	}
	out->object = o;
	out->cmd = o->cmds[0];
	out->argi = 2;
	return 0;
}

int ctl_cmd_parse(int argc, char **argv, struct ctl_parsed *out, char why[CTL_CMD_WHY_LEN])
{
	const struct ctl_object *o;
	char list[256];

	memset(out, 0, sizeof(*out));
	if (argc < 1)
		return fail(why, "no command given (gwctl help lists them)");
	if (is_help(argv[0])) {
		out->help = true;
		if (argc > 1) {
			out->object = find_object(argv[1]);
			if (!out->object) {
				object_list(list, sizeof(list), false);
				return fail(why, "no help on '%.64s'; objects: %s", argv[1], list);
			}
		}
		return 0;
	}
	/* "show" before the objects: "s" is show, as it always was. */
	if (is_prefix(argv[0], "show"))
		return parse_show_first(argc, argv, out, why);
	o = find_object(argv[0]);
	if (!o) {
		object_list(list, sizeof(list), false);
		return fail(why, "unknown object '%.64s'; one of: %s, show or help", argv[0], list);
	}
	out->object = o;
	if (argc > 1 && is_help(argv[1])) {
		out->help = true;
		return 0;
	}
	if (!o->cmds[0]->verb) { /* the object is the command: the rest are its words */
		out->cmd = o->cmds[0];
		out->argi = 1;
		return 0;
	}
	if (argc == 1) {
		if (strcmp(o->cmds[0]->verb, "show")) {
			verb_list(o, list, sizeof(list));
			return fail(why, "%s needs a command: %s", o->name, list);
		}
		out->cmd = o->cmds[0];
		out->argi = 1;
		return 0;
	}
	out->cmd = find_verb(o, argv[1]);
	if (!out->cmd) {
		verb_list(o, list, sizeof(list));
		return fail(why, "unknown command '%.64s' for %s; expected %s", argv[1], o->name,
			    list);
	}
	out->argi = 2;
	return 0;
}

/* ---- options --------------------------------------------------------------------------- */

enum opt_id {
	O_JSON,
	O_PRETTY,
	O_STATS,
	O_DETAILS,
	O_SOCKET,
	O_TIMEOUT,
	O_BATCH,
	O_FORCE,
	O_VERSION,
	O_HELP,
	O_STATISTICS,
};

/* Long names in the order a prefix is tried (ip's habit: -s is stats, -so socket). */
static const struct {
	const char *name;
	char letter; /* the one-letter form, matched exactly (case counts: -s, -S) */
	enum opt_id id;
	bool value;
} options[] = {
	{ "json", 'j', O_JSON, false },       { "pretty", 'p', O_PRETTY, false },
	{ "stats", 's', O_STATS, false },     { "statistics", 0, O_STATS, false },
	{ "details", 'd', O_DETAILS, false }, { "socket", 'S', O_SOCKET, true },
	{ "timeout", 't', O_TIMEOUT, true },  { "batch", 'b', O_BATCH, true },
	{ "force", 0, O_FORCE, false },       { "version", 'V', O_VERSION, false },
	{ "help", 'h', O_HELP, false },
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static int find_option(const char *arg)
{
	const char *name = arg + 1 + (arg[1] == '-');

	if (!name[0])
		return -1;
	if (!name[1])
		for (unsigned i = 0; i < N_OPTIONS; i++)
			if (options[i].letter == name[0])
				return (int)i;
	for (unsigned i = 0; i < N_OPTIONS; i++)
		if (!strcmp(name, options[i].name))
			return (int)i;
	if (!name[1])
		return -1; /* one letter that is no option's: not a prefix of a long one */
	for (unsigned i = 0; i < N_OPTIONS; i++)
		if (is_prefix(name, options[i].name))
			return (int)i;
	return -1;
}

static int set_timeout(const char *v, double *out, char why[CTL_CMD_WHY_LEN])
{
	char *end;
	double t = strtod(v, &end);

	if (end == v || *end || !(t > 0 && t <= 3600))
		return fail(why, "-timeout needs seconds between 0 and 3600 ('%.32s')", v);
	*out = t;
	return 0;
}

int ctl_opts_parse(int argc, char **argv, struct ctl_opts *out, char why[CTL_CMD_WHY_LEN])
{
	int i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		int k;
		const char *v = NULL;

		if (!strcmp(argv[i], "--"))
			return i + 1;
		k = find_option(argv[i]);
		if (k < 0)
			return fail(why, "unknown option '%.64s' (gwctl -help lists them)",
				    argv[i]);
		if (options[k].value) {
			if (i + 1 >= argc)
				return fail(why, "-%s needs a value", options[k].name);
			v = argv[++i];
		}
		switch (options[k].id) {
		case O_JSON:
			out->json = true;
			break;
		case O_PRETTY:
			out->pretty = true;
			break;
		case O_STATS:
		case O_STATISTICS:
			out->stats = true;
			break;
		case O_DETAILS:
			out->details = true;
			break;
		case O_SOCKET:
			if (!v[0])
				return fail(why, "-socket needs a path");
			out->socket = v;
			break;
		case O_TIMEOUT:
			if (set_timeout(v, &out->timeout_s, why) < 0)
				return -EINVAL;
			break;
		case O_BATCH:
			if (!v[0])
				return fail(why, "-batch needs a file name ('-': standard input)");
			out->batch = v;
			break;
		case O_FORCE:
			out->force = true;
			break;
		case O_VERSION:
			out->version = true;
			break;
		case O_HELP:
			out->help = true;
			break;
		}
	}
	return i;
}

/* ---- -batch lines ---------------------------------------------------------------------- */

int ctl_batch_split(char *line, char **argv, int max, char why[CTL_CMD_WHY_LEN])
{
	char *r = line;
	int n = 0;

	for (;;) {
		char *w;

		while (*r == ' ' || *r == '\t' || *r == '\n' || *r == '\r')
			r++;
		if (!*r || *r == '#')
			return n;
		if (n == max)
			return fail(why, "more than %d words on a line", max);
		w = r; /* the word is written over its own text, less the quotes */
		argv[n++] = w;
		while (*r && *r != ' ' && *r != '\t' && *r != '\n' && *r != '\r') {
			if (*r == '"' || *r == '\'') {
				char q = *r++;

				while (*r && *r != q)
					*w++ = *r++;
				if (*r != q)
					return fail(why, "unterminated %c quote", q);
				r++;
			} else {
				*w++ = *r++;
			}
		}
		if (*r)
			r++;
		*w = '\0';
	}
}

/* ---- help ------------------------------------------------------------------------------ */

static void cmd_help(FILE *f, const struct ctl_cmd *c)
{
	char line[200];
	bool show = c->verb && !strcmp(c->verb, "show");

	snprintf(line, sizeof(line), "%s%s%s%s%s", c->object, c->verb ? " " : "",
		 show      ? "{ show | list }"
		 : c->verb ? c->verb
			   : "",
		 c->arg_usage && c->arg_usage[0] ? " " : "", c->arg_usage ? c->arg_usage : "");
	if (strlen(line) > 36) /* a long synopsis: the help on its own line */
		fprintf(f, "  %s\n  %-36s %s\n", line, "", c->help);
	else
		fprintf(f, "  %-36s %s\n", line, c->help);
}

void ctl_cmd_help(FILE *f, const struct ctl_object *object)
{
	if (object) {
		char line[64];

		fprintf(f, "usage: gwctl [OPTIONS] %s%s", object->name,
			object->cmds[0]->verb ? " [COMMAND [ARGS]]" : "");
		for (unsigned a = 0; object->aliases[a]; a++)
			fprintf(f, "%s%s", a ? ", " : "\n(also written ", object->aliases[a]);
		fprintf(f, "%s%s:\n", object->aliases[0] ? ")\n" : "\n", object->help);
		for (unsigned i = 0; object->cmds[i]; i++)
			cmd_help(f, object->cmds[i]);
		snprintf(line, sizeof(line), "%s help", object->name);
		fprintf(f, "  %-36s %s\n", line, "this text");
		return;
	}
	fprintf(f, "usage: gwctl [OPTIONS] OBJECT [COMMAND [ARGS]]\n"
		   "       gwctl [OPTIONS] show OBJECT [ARGS]\n"
		   "       gwctl [OPTIONS] -batch FILE\n"
		   "       gwctl OBJECT help | help [OBJECT]\n");
	ctl_opts_help(f);
	fprintf(f, "commands (any word may be shortened; an object alone shows it):\n");
	for (unsigned i = 0; i < N_OBJECTS; i++)
		for (unsigned c = 0; objects[i].cmds[c]; c++)
			cmd_help(f, objects[i].cmds[c]);
	fprintf(f, "exit status: 0 done, 1 the daemon refused or failed (or cannot be reached),\n"
		   "2 usage error (nothing was sent)\n");
}

void ctl_opts_help(FILE *f)
{
	fprintf(f, "options (one or two dashes; long names may be shortened):\n"
		   "  -j, -json            JSON output (one array per command)\n"
		   "  -p, -pretty          pretty-print JSON\n"
		   "  -s, -stats           statistics (show links)\n"
		   "  -d, -details         every field of each record under its line\n"
		   "  -S, -socket SOCKET   control socket (default $IBGW_SOCKET, $IBGW_CTL_SOCKET\n"
		   "                       or /run/ibgw/ibgwd.sock)\n"
		   "  -t, -timeout SECONDS reply timeout (default 10)\n"
		   "  -b, -batch FILE      commands from FILE ('-': standard input), one a line;\n"
		   "                       stops at the first that fails unless -force\n"
		   "  -force               -batch: go on after a failed command\n"
		   "  -V, -version         print gwctl's version\n"
		   "  -h, -help            this text\n");
}
