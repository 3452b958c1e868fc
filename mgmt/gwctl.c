/*
 * gwctl: the operator's command line for ibgwd, in iproute2's manner.
 *
 *   gwctl [-j] [-p] [-s] [-d] [-S SOCKET] [-t SECONDS] OBJECT COMMAND [ARGS]
 *
 * Words may be shortened to any unique prefix ("gwctl sh li"). The daemon answers in
 * JSON records (the protocol's contract); -j prints them as one top-level JSON array,
 * otherwise each command's text printer renders them like ip(8) would.
 *
 * Exit status: 0 success, 1 the daemon refused or failed (or is not running), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "mgmt/ctl_args.h"
#include "mgmt/ctl_capture.h"
#include "mgmt/ctl_client.h"

#define DEFAULT_SOCKET "/run/ibgw/ibgwd.sock"
#define EXIT_DAEMON    1
#define EXIT_USAGE     2

struct output {
	bool json, pretty, stats, details;
	struct json_object *array; /* -j: records collected, printed at the end */
};

typedef void (*print_fn)(struct json_object *rec, struct output *out);
/* The request's JSON arguments from the words after the command, or NULL with why
 * (a usage error). */
typedef struct json_object *(*args_fn)(int argc, char **argv, const struct output *out,
				       char why[CTL_ARGS_WHY_LEN]);

struct command {
	const char *words[3]; /* NULL-terminated */
	uint16_t type;
	const char *arg_usage; /* NULL: takes no arguments */
	args_fn make_args;
	print_fn print;
	const char *help;
};

/* --- helpers for text output --- */

static const char *str(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : "";
}

static int64_t num(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

static bool has(struct json_object *o, const char *key)
{
	return json_object_object_get_ex(o, key, NULL);
}

/* " key value" when the record has key (a string or a number). */
static void opt(struct json_object *o, const char *key, const char *word)
{
	struct json_object *v;

	if (json_object_object_get_ex(o, key, &v))
		printf(" %s %s", word, json_object_get_string(v));
}

/* Flags (an array of strings) as words. */
static void flags(struct json_object *o, const char *key)
{
	struct json_object *a;

	if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(a); i++)
		printf(" %s", json_object_get_string(json_object_array_get_idx(a, i)));
}

static void upper(char *dst, const char *src, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len && src[i]; i++)
		dst[i] = (char)(src[i] >= 'a' && src[i] <= 'z' ? src[i] - 32 : src[i]);
	dst[i] = '\0';
}

/* --- printers --- */

static void print_version(struct json_object *o, struct output *out)
{
	int64_t up = num(o, "uptime_s");
	(void)out;

	printf("ibgwd %s (control protocol %lld)\n", str(o, "version"),
	       (long long)num(o, "protocol"));
	printf("name %s pid %lld up %lldd%02lldh%02lldm%02llds\n", str(o, "name"),
	       (long long)num(o, "pid"), (long long)(up / 86400), (long long)(up / 3600 % 24),
	       (long long)(up / 60 % 60), (long long)(up % 60));
	printf("config %s reloads %lld failed %lld\n", str(o, "config"),
	       (long long)num(o, "reloads"), (long long)num(o, "reload_failures"));
	printf("gwctl %s\n", IBGW_VERSION);
}

static void print_link(struct json_object *o, struct output *out)
{
	struct json_object *addrs;
	char state[16];
	(void)out;

	upper(state, str(o, "state"), sizeof(state));
	printf("%s: %s state %s mtu %lld", str(o, "name"), str(o, "kind"), state,
	       (long long)num(o, "mtu"));
	if (strcmp(str(o, "kind"), "ipoib") == 0)
		printf(" mode %s pkey %s dev %s port %lld", str(o, "mode"), str(o, "pkey"),
		       str(o, "device"), (long long)num(o, "port"));
	else
		printf(" dev %s", str(o, "device"));
	if (num(o, "vlan"))
		printf(" vlan %lld", (long long)num(o, "vlan"));
	printf(" backend %s\n", str(o, "backend"));
	if (json_object_object_get_ex(o, "addresses", &addrs)) {
		for (size_t i = 0; i < json_object_array_length(addrs); i++) {
			const char *a = json_object_get_string(json_object_array_get_idx(addrs, i));

			printf("    %s %s\n", strchr(a, ':') ? "inet6" : "inet", a);
		}
	}
	if (has(o, "address")) {
		printf("    link/%s %s", strcmp(str(o, "kind"), "ipoib") ? "ether" : "infiniband",
		       str(o, "address"));
		opt(o, "qpn", "qpn");
		opt(o, "qkey", "qkey");
		opt(o, "lid", "lid");
		opt(o, "sm_lid", "sm_lid");
		opt(o, "io", "io");
		printf("\n");
	}
	if (has(o, "configured_mode"))
		printf("    mode %s configured, %s running (not available in this build)\n",
		       str(o, "configured_mode"), str(o, "mode"));
	if (str(o, "reason")[0])
		printf("    %s: %s\n", str(o, "state"), str(o, "reason"));
	if (json_object_object_get_ex(o, "stats", &addrs)) {
		struct json_object *drops;

		printf("    RX: packets %lld bytes %lld\n", (long long)num(addrs, "rx_packets"),
		       (long long)num(addrs, "rx_bytes"));
		printf("    TX: packets %lld bytes %lld\n", (long long)num(addrs, "tx_packets"),
		       (long long)num(addrs, "tx_bytes"));
		if (json_object_object_get_ex(addrs, "drops", &drops)) {
			bool any = false;

			json_object_object_foreach(drops, k, v)
			{
				if (!json_object_get_int64(v))
					continue;
				printf("%s %s %lld", any ? "" : "    drops:", k,
				       (long long)json_object_get_int64(v));
				any = true;
			}
			printf(any ? "\n" : "    drops: none\n");
		}
	}
}

/* Like `ip route`: a line pastes back into an add. */
static void print_route(struct json_object *o, struct output *out)
{
	struct json_object *nhs;
	const char *type = str(o, "type");
	(void)out;

	if (strcmp(type, "unicast"))
		printf("%s ", type);
	printf("%s", str(o, "dst"));
	opt(o, "gateway", "via");
	opt(o, "dev", "dev");
	opt(o, "protocol", "proto");
	opt(o, "scope", "scope");
	opt(o, "prefsrc", "src");
	if (num(o, "metric"))
		printf(" metric %lld", (long long)num(o, "metric"));
	flags(o, "flags");
	printf("\n");
	if (json_object_object_get_ex(o, "nexthops", &nhs)) {
		for (size_t i = 0; i < json_object_array_length(nhs); i++) {
			struct json_object *nh = json_object_array_get_idx(nhs, i);

			printf("\tnexthop");
			opt(nh, "gateway", "via");
			opt(nh, "dev", "dev");
			opt(nh, "weight", "weight");
			flags(nh, "flags");
			printf("\n");
		}
	}
}

/* Like `ip neigh`; IPoIB entries add their path and mode. */
static void print_neigh(struct json_object *o, struct output *out)
{
	struct json_object *path;
	(void)out;

	printf("%s dev %s", str(o, "dst"), str(o, "dev"));
	opt(o, "lladdr", "lladdr");
	flags(o, "state");
	if (json_object_object_get_ex(o, "path", &path)) {
		printf(" path");
		opt(path, "dlid", "dlid");
		opt(path, "sl", "sl");
		opt(path, "mtu", "mtu");
		if (json_object_get_boolean(json_object_object_get(path, "grh")))
			printf(" grh");
		opt(o, "mode", "mode");
	}
	printf("\n");
}

static void print_path(struct json_object *o, struct output *out)
{
	char state[16];
	(void)out;

	upper(state, str(o, "state"), sizeof(state));
	printf("%s", str(o, "dgid"));
	opt(o, "dlid", "dlid");
	opt(o, "sl", "sl");
	opt(o, "mtu", "mtu");
	opt(o, "rate", "rate");
	opt(o, "hop_limit", "hop_limit");
	opt(o, "pkey", "pkey");
	printf(" %s", state);
	if (json_object_get_boolean(json_object_object_get(o, "local")))
		printf(" local");
	if (num(o, "expires_ms"))
		printf(" expires %llds", (long long)(num(o, "expires_ms") / 1000));
	opt(o, "error", "error");
	printf(" dev %s/%lld\n", str(o, "device"), (long long)num(o, "port"));
}

/* show gid-routes: "PREFIX via LID STATE [via LID STATE]... dev DEVICE/PORT", like a
 * multipath ip route. */
static void print_gid_route(struct json_object *o, struct output *out)
{
	struct json_object *rs = json_object_object_get(o, "routers");
	size_t n =
	    rs && json_object_is_type(rs, json_type_array) ? json_object_array_length(rs) : 0;

	(void)out;
	printf("%s", str(o, "prefix"));
	for (size_t i = 0; i < n; i++) {
		struct json_object *x = json_object_array_get_idx(rs, i);

		printf(" via %s %s", str(x, "lid"), str(x, "state"));
	}
	printf(" dev %s/%lld\n", str(o, "device"), (long long)num(o, "port"));
}

static void print_mcast(struct json_object *o, struct output *out)
{
	(void)out;
	printf("%s dev %s", str(o, "mgid"), str(o, "dev"));
	opt(o, "mlid", "mlid");
	opt(o, "qkey", "qkey");
	printf(" %s %s\n", str(o, "join"), str(o, "state"));
}

static void print_conn(struct json_object *o, struct output *out)
{
	printf("%s dev %s", str(o, "peer"), str(o, "dev"));
	opt(o, "state", "state");
	opt(o, "role", "role");
	opt(o, "local_qpn", "qpn");
	opt(o, "remote_qpn", "remote_qpn");
	opt(o, "mtu", "mtu");
	opt(o, "dlid", "dlid");
	opt(o, "idle_ms", "idle_ms");
	if (has(o, "up"))
		printf(" %s",
		       json_object_get_boolean(json_object_object_get(o, "up")) ? "UP" : "DOWN");
	(void)out;
	printf("\n    tx %lld packets %lld bytes rx %lld packets %lld bytes\n",
	       (long long)num(o, "tx_packets"), (long long)num(o, "tx_bytes"),
	       (long long)num(o, "rx_packets"), (long long)num(o, "rx_bytes"));
}

static bool boolean(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* Milliseconds as "1.234s" or "56ms". */
static void print_ms(const char *word, int64_t ms)
{
	if (ms >= 1000)
		printf(" %s %lld.%03llds", word, (long long)(ms / 1000), (long long)(ms % 1000));
	else
		printf(" %s %lldms", word, (long long)ms);
}

/* show ha: the box and its peer, each group (state, why, addresses), each heartbeat
 * path, then the last transitions, oldest first. */
static void print_ha(struct json_object *o, struct output *out)
{
	const char *kind = str(o, "kind");
	char st[16];
	struct json_object *a;

	(void)out;
	if (!strcmp(kind, "node")) {
		printf("node %s peer %s %s", str(o, "name"),
		       str(o, "peer")[0] ? str(o, "peer") : "-",
		       boolean(o, "peer_alive") ? "alive" : "dead");
		if (strcmp(str(o, "tiebreaker"), "none"))
			printf(" tiebreaker %s", str(o, "tiebreaker"));
		printf(" rx %lld tx %lld transitions %lld\n", (long long)num(o, "rx"),
		       (long long)num(o, "tx"), (long long)num(o, "transitions"));
		printf("    sync: sent %lld messages (%lld records), received %lld (%lld refused); "
		       "learned %lld neighbours, %lld paths, %lld routes\n",
		       (long long)num(o, "sync_tx_messages"), (long long)num(o, "sync_tx_records"),
		       (long long)num(o, "sync_rx_messages"), (long long)num(o, "sync_rx_refused"),
		       (long long)num(o, "sync_neighbours_learned"),
		       (long long)num(o, "sync_paths_learned"),
		       (long long)num(o, "sync_routes_learned"));
		if (num(o, "sync_neighbours_refused") || num(o, "sync_routes_refused"))
			printf("    sync refused: %lld neighbours, %lld routes (outside the "
			       "prefixes configured on their link)\n",
			       (long long)num(o, "sync_neighbours_refused"),
			       (long long)num(o, "sync_routes_refused"));
		if (num(o, "auth_failures"))
			printf("    authentication failures: %lld%s\n",
			       (long long)num(o, "auth_failures"),
			       boolean(o, "auth_failing") ? " (now)" : "");
		if (has(o, "warning"))
			printf("    WARNING: %s\n", str(o, "warning"));
		if (json_object_object_get_ex(o, "rx_ignored", &a) &&
		    json_object_object_length(a)) {
			printf("    ignored:");
			json_object_object_foreach(a, k, v)
			    printf(" %s %s", k, json_object_get_string(v));
			printf("\n");
		}
	} else if (!strcmp(kind, "group")) {
		upper(st, str(o, "state"), sizeof(st));
		printf("group %s %s priority %lld", str(o, "group"), st,
		       (long long)num(o, "priority"));
		print_ms("since", num(o, "since_ms"));
		printf(": %s\n", str(o, "reason"));
		if (has(o, "peer_state")) {
			upper(st, str(o, "peer_state"), sizeof(st));
			printf("    peer %s priority %lld\n", st,
			       (long long)num(o, "peer_priority"));
		}
		if (json_object_object_get_ex(o, "addresses", &a))
			for (size_t i = 0; i < json_object_array_length(a); i++) {
				struct json_object *x = json_object_array_get_idx(a, i);

				printf("    %s dev %s%s\n", str(x, "address"), str(x, "dev"),
				       boolean(x, "held") ? " held" : "");
			}
	} else if (!strcmp(kind, "path")) {
		printf("path %s peer %s %s %s%s", str(o, "path"), str(o, "peer_address"),
		       boolean(o, "local_up") ? "UP" : "DOWN",
		       boolean(o, "alive") ? "alive" : "dead",
		       boolean(o, "peer_hears") ? " heard" : "");
		if (has(o, "last_rx_ms"))
			print_ms("last", num(o, "last_rx_ms"));
		printf(" rx %lld tx %lld\n", (long long)num(o, "rx"), (long long)num(o, "tx"));
	} else if (!strcmp(kind, "transition")) {
		char from[16], to[16];

		upper(from, str(o, "from"), sizeof(from));
		upper(to, str(o, "to"), sizeof(to));
		printf("transition %s %s -> %s", str(o, "group"), from, to);
		print_ms("ago", num(o, "ago_ms"));
		printf(": %s\n", str(o, "reason"));
	}
}

static struct json_object *args_switchover(int argc, char **argv, const struct output *out,
					   char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *a = json_object_new_object();
	(void)out;

	if (argc > 1) {
		snprintf(why, CTL_ARGS_WHY_LEN, "expected at most one group name");
		json_object_put(a);
		return NULL;
	}
	if (argc == 1)
		json_object_object_add(a, "group", json_object_new_string(argv[0]));
	return a;
}

/* -d: every field of a record, "key value" per line (nested objects and arrays of
 * objects indented below their key; arrays of scalars on one line). */
static void print_details(struct json_object *o, int indent)
{
	json_object_object_foreach(o, k, v)
	{
		if (json_object_is_type(v, json_type_object)) {
			printf("%*s%s:\n", indent, "", k);
			print_details(v, indent + 4);
		} else if (json_object_is_type(v, json_type_array)) {
			size_t n = json_object_array_length(v);

			printf("%*s%s:", indent, "", k);
			for (size_t i = 0; i < n; i++) {
				struct json_object *e = json_object_array_get_idx(v, i);

				if (json_object_is_type(e, json_type_object)) {
					printf("\n");
					print_details(e, indent + 4);
				} else {
					printf(" %s", json_object_get_string(e));
				}
			}
			printf("\n");
		} else {
			printf("%*s%s %s\n", indent, "", k, json_object_get_string(v));
		}
	}
}

/* Counters: "key value" per line, nested objects indented. */
static void print_counters(struct json_object *o, int indent)
{
	json_object_object_foreach(o, k, v)
	{
		if (json_object_is_type(v, json_type_object)) {
			printf("%*s%s:\n", indent, "", k);
			print_counters(v, indent + 4);
		} else if (indent == 0 || json_object_get_int64(v)) {
			printf("%*s%s %s\n", indent, "", k, json_object_get_string(v));
		}
	}
}

static void print_stats(struct json_object *o, struct output *out)
{
	(void)out;
	print_counters(o, 0);
}

/* The config as YAML, from its JSON form: objects as "key: value", arrays as "- ". */
static void yaml_value(struct json_object *v, int indent, bool in_list);

static void yaml_scalar(struct json_object *v)
{
	if (json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		/* Quote what YAML would otherwise read as another type or as syntax. */
		bool plain = s[0] && !strpbrk(s, ":#{}[],&*!|>'\"%@`") && s[0] != '-' &&
			     s[0] != ' ' && strcmp(s, "true") && strcmp(s, "false") &&
			     strcmp(s, "null") && strspn(s, "0123456789.x") != strlen(s);

		printf(plain ? "%s" : "\"%s\"", s);
	} else {
		printf("%s", json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
								   JSON_C_TO_STRING_NOSLASHESCAPE));
	}
}

static void yaml_object(struct json_object *o, int indent, bool first_inline)
{
	bool first = true;

	json_object_object_foreach(o, key, val)
	{
		if (!(first && first_inline))
			printf("%*s", indent, "");
		first = false;
		printf("%s:", key);
		if (json_object_is_type(val, json_type_object) && json_object_object_length(val)) {
			printf("\n");
			yaml_object(val, indent + 2, false);
		} else if (json_object_is_type(val, json_type_array) &&
			   json_object_array_length(val)) {
			printf("\n");
			yaml_value(val, indent + 2, false);
		} else {
			printf(" ");
			yaml_value(val, indent, false);
		}
	}
}

static void yaml_value(struct json_object *v, int indent, bool in_list)
{
	(void)in_list;
	if (json_object_is_type(v, json_type_object)) {
		if (json_object_object_length(v) == 0)
			printf("{}\n");
		else
			yaml_object(v, indent, true);
	} else if (json_object_is_type(v, json_type_array)) {
		size_t n = json_object_array_length(v);

		if (n == 0)
			printf("[]\n");
		for (size_t i = 0; i < n; i++) {
			printf("%*s- ", indent, "");
			yaml_value(json_object_array_get_idx(v, i), indent + 2, true);
		}
	} else {
		yaml_scalar(v);
		printf("\n");
	}
}

static void print_config(struct json_object *o, struct output *out)
{
	(void)out;
	yaml_object(o, 0, false);
}

/* "N things flushed" records of neigh flush and path flush. */
static void print_flushed(struct json_object *o, struct output *out)
{
	(void)out;
	if (has(o, "port"))
		printf("%s/%lld: %lld paths flushed\n", str(o, "device"), (long long)num(o, "port"),
		       (long long)num(o, "flushed"));
	else
		printf("%s: %lld neighbours flushed\n", str(o, "dev"),
		       (long long)num(o, "flushed"));
}

/* --- argument builders --- */

static struct json_object *args_links(int argc, char **argv, const struct output *out,
				      char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *a;

	if (argc != 0) {
		snprintf(why, CTL_ARGS_WHY_LEN, "unexpected argument '%s'", argv[0]);
		return NULL;
	}
	a = json_object_new_object();
	if (out->stats)
		json_object_object_add(a, "stats", json_object_new_boolean(true));
	return a;
}

static struct json_object *args_routes(int argc, char **argv, const struct output *out,
				       char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *a;
	(void)out;

	if (argc > 1) {
		snprintf(why, CTL_ARGS_WHY_LEN, "unexpected argument '%s'", argv[1]);
		return NULL;
	}
	a = json_object_new_object();
	if (argc == 1)
		json_object_object_add(a, "prefix", json_object_new_string(argv[0]));
	return a;
}

static struct json_object *args_neigh(int argc, char **argv, const struct output *out,
				      char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *a;
	(void)out;

	if (argc != 0 && (argc != 2 || strncmp("dev", argv[0], strlen(argv[0])))) {
		snprintf(why, CTL_ARGS_WHY_LEN, "expected dev NAME or nothing");
		return NULL;
	}
	a = json_object_new_object();
	if (argc == 2)
		json_object_object_add(a, "dev", json_object_new_string(argv[1]));
	return a;
}

static struct json_object *args_log_level(int argc, char **argv, const struct output *out,
					  char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *a;
	(void)out;

	if (argc != 1) {
		snprintf(why, CTL_ARGS_WHY_LEN, "expected one level");
		return NULL;
	}
	a = json_object_new_object();
	json_object_object_add(a, "level", json_object_new_string(argv[0]));
	return a;
}

/* The write commands: words -> the C form (checked as the daemon will) -> JSON. */
static struct json_object *route_args(int argc, char **argv, bool add, char *why)
{
	struct ctl_route r;

	return ctl_route_parse_argv(argc, argv, add, &r, why) < 0 ? NULL : ctl_route_to_json(&r);
}

static struct json_object *args_route_add(int argc, char **argv, const struct output *out,
					  char why[CTL_ARGS_WHY_LEN])
{
	(void)out;
	return route_args(argc, argv, true, why);
}

static struct json_object *args_route_del(int argc, char **argv, const struct output *out,
					  char why[CTL_ARGS_WHY_LEN])
{
	(void)out;
	return route_args(argc, argv, false, why);
}

static struct json_object *neigh_args(int argc, char **argv, bool add, char *why)
{
	struct ctl_neigh n;

	return ctl_neigh_parse_argv(argc, argv, add, &n, why) < 0 ? NULL : ctl_neigh_to_json(&n);
}

static struct json_object *args_neigh_add(int argc, char **argv, const struct output *out,
					  char why[CTL_ARGS_WHY_LEN])
{
	(void)out;
	return neigh_args(argc, argv, true, why);
}

static struct json_object *args_neigh_del(int argc, char **argv, const struct output *out,
					  char why[CTL_ARGS_WHY_LEN])
{
	(void)out;
	return neigh_args(argc, argv, false, why);
}

static struct json_object *args_neigh_flush(int argc, char **argv, const struct output *out,
					    char why[CTL_ARGS_WHY_LEN])
{
	struct ctl_neigh_flush f;
	(void)out;

	return ctl_neigh_flush_parse_argv(argc, argv, &f, why) < 0 ? NULL
								   : ctl_neigh_flush_to_json(&f);
}

static struct json_object *args_path_flush(int argc, char **argv, const struct output *out,
					   char why[CTL_ARGS_WHY_LEN])
{
	struct ctl_path_flush p;
	(void)out;

	return ctl_path_flush_parse_argv(argc, argv, &p, why) < 0 ? NULL
								  : ctl_path_flush_to_json(&p);
}

static const struct command commands[] = {
	{ { "show", "version" },
	  CTL_SHOW_VERSION,
	  NULL,
	  NULL,
	  print_version,
	  "daemon and client versions, uptime" },
	{ { "show", "config" },
	  CTL_SHOW_CONFIG,
	  NULL,
	  NULL,
	  print_config,
	  "the running configuration" },
	{ { "show", "links" },
	  CTL_SHOW_LINKS,
	  "",
	  args_links,
	  print_link,
	  "IPoIB links and Ethernet interfaces (-s: counters)" },
	{ { "show", "routes" },
	  CTL_SHOW_ROUTES,
	  "[PREFIX]",
	  args_routes,
	  print_route,
	  "the routing table, like ip route" },
	{ { "show", "neighbours" },
	  CTL_SHOW_NEIGHBOURS,
	  "[dev NAME]",
	  args_neigh,
	  print_neigh,
	  "neighbours of every interface, like ip neigh" },
	{ { "show", "paths" },
	  CTL_SHOW_PATHS,
	  NULL,
	  NULL,
	  print_path,
	  "the SA client's path cache" },
	{ { "show", "gid-routes" },
	  CTL_SHOW_GID_ROUTES,
	  NULL,
	  NULL,
	  print_gid_route,
	  "routes to other IB subnets, per IB port, with each router's state" },
	{ { "show", "mcast" },
	  CTL_SHOW_MCAST,
	  NULL,
	  NULL,
	  print_mcast,
	  "multicast groups of the IPoIB links" },
	{ { "show", "connections" },
	  CTL_SHOW_CONNECTIONS,
	  NULL,
	  NULL,
	  print_conn,
	  "IPoIB connected-mode connections" },
	{ { "show", "stats" },
	  CTL_SHOW_STATS,
	  NULL,
	  NULL,
	  print_stats,
	  "forwarding counters: packets, drops by reason, slow path" },
	{ { "show", "ha" },
	  CTL_SHOW_HA,
	  NULL,
	  NULL,
	  print_ha,
	  "failover: roles, peer, heartbeat paths, last transitions and why" },
	{ { "ha", "switchover" },
	  CTL_HA_SWITCHOVER,
	  "[GROUP]",
	  args_switchover,
	  NULL,
	  "hand failover groups (default: all) to the peer, or take them from it" },
	{ { "reload" },
	  CTL_RELOAD,
	  NULL,
	  NULL,
	  NULL,
	  "reload the configuration file (kept unchanged on error)" },
	{ { "log", "level" },
	  CTL_LOG_LEVEL,
	  "error|warning|notice|info|debug",
	  args_log_level,
	  NULL,
	  "set the daemon's log level" },
	{ { "route", "add" },
	  CTL_ROUTE_ADD,
	  "[blackhole] PREFIX [via ADDR ...] [dev NAME] [metric N] [nexthop via ADDR [dev NAME]]...",
	  args_route_add,
	  NULL,
	  "add a static route (kept until deleted or restart; a reload leaves it)" },
	{ { "route", "del" },
	  CTL_ROUTE_DEL,
	  "PREFIX [metric N] [via ADDR ...] [dev NAME]",
	  args_route_del,
	  NULL,
	  "delete a static route" },
	{ { "neigh", "add" },
	  CTL_NEIGH_ADD,
	  "ADDR lladdr LLADDR dev NAME",
	  args_neigh_add,
	  NULL,
	  "add a PERMANENT neighbour (MAC, or 20-octet IPoIB address)" },
	{ { "neigh", "del" },
	  CTL_NEIGH_DEL,
	  "ADDR dev NAME [lladdr LLADDR]",
	  args_neigh_del,
	  NULL,
	  "delete a neighbour" },
	{ { "neigh", "flush" },
	  CTL_NEIGH_FLUSH,
	  "dev NAME [to PREFIX]",
	  args_neigh_flush,
	  print_flushed,
	  "delete the neighbours of an interface, but PERMANENT ones" },
	{ { "path", "flush" },
	  CTL_PATH_FLUSH,
	  "[GID]",
	  args_path_flush,
	  print_flushed,
	  "drop the SA client's cached paths (every port), or those to GID" },
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: gwctl [-j] [-p] [-s] [-d] [-S SOCKET] [-t SECONDS] OBJECT COMMAND [ARGS]\n"
	    "  -j          JSON output (one array)\n"
	    "  -p          pretty-print JSON\n"
	    "  -s          statistics (show links)\n"
	    "  -d          details: every field of each record under its line\n"
	    "  -S SOCKET   control socket (default $IBGW_SOCKET, $IBGW_CTL_SOCKET or " DEFAULT_SOCKET
	    ")\n"
	    "  -t SECONDS  reply timeout (default 10)\n"
	    "  -V          print gwctl's version\n"
	    "commands (any unique prefix of each word):\n"
	    "  capture DEV [count N] [duration SECONDS] [snaplen N] [direction in|out|both]\n"
	    "          [filter] [EXPRESSION] -w FILE|-\n"
	    "  %-36s packets DEV sends and receives, as pcap (privileged)\n",
	    "");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		char line[160] = "";

		for (int w = 0; commands[i].words[w]; w++)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s",
				 w ? " " : "", commands[i].words[w]);
		if (commands[i].arg_usage && commands[i].arg_usage[0])
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s",
				 commands[i].arg_usage);
		if (strlen(line) > 36) /* a long synopsis: the help on its own line */
			fprintf(f, "  %s\n  %-36s %s\n", line, "", commands[i].help);
		else
			fprintf(f, "  %-36s %s\n", line, commands[i].help);
	}
}

/*
 * gwctl capture: the pcap stream to FILE or standard output (never a terminal); no
 * reply timeout, the capture ends at its count or duration, or with Ctrl-C.
 */
static int capture(int argc, char **argv, const char *socket_path)
{
	struct ctl_capture a;
	struct ctl_client client;
	char why[CTL_ARGS_WHY_LEN] = "";
	const char *file;
	int fd, err, ret;

	if (ctl_capture_parse_argv(argc, argv, &a, &file, why) < 0 || !file) {
		fprintf(stderr,
			"gwctl: capture: %s\nusage: gwctl capture DEV [count N] [duration SECONDS] "
			"[snaplen N] [direction in|out|both] [filter] [EXPRESSION] -w FILE|-\n",
			why[0] ? why : "needs -w FILE (or -w - for standard output)");
		return EXIT_USAGE;
	}
	if (!strcmp(file, "-")) {
		fd = STDOUT_FILENO;
		if (isatty(fd)) {
			fprintf(stderr, "gwctl: capture: standard output is a terminal; pipe it "
					"(| tshark -r -) or give -w FILE\n");
			return EXIT_USAGE;
		}
	} else {
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "gwctl: capture: %s: %s\n", file, strerror(errno));
			return EXIT_USAGE;
		}
	}
	err = ctl_client_connect(&client, socket_path, -1);
	if (err < 0) {
		fprintf(stderr, "gwctl: cannot reach ibgwd at %s: %s\n", socket_path,
			strerror(-err));
		ret = EXIT_DAEMON;
	} else {
		ret = ctl_capture_run(&client, &a, fd, stderr) < 0 ? EXIT_DAEMON : 0;
		ctl_client_close(&client);
	}
	if (fd != STDOUT_FILENO && close(fd) < 0 && !ret) {
		fprintf(stderr, "gwctl: capture: %s: %s\n", file, strerror(errno));
		ret = EXIT_DAEMON;
	}
	return ret;
}

/*
 * Match argv against the command words, each word by unique prefix among the commands
 * still possible. Returns the command and sets *used to the words consumed, or NULL
 * after printing why.
 */
static const struct command *match_command(int argc, char **argv, int *used)
{
	bool alive[N_COMMANDS];
	int depth = 0;

	for (size_t i = 0; i < N_COMMANDS; i++)
		alive[i] = true;
	for (;;) {
		const char *word = depth < argc ? argv[depth] : NULL;
		const char *full = NULL;
		int candidates = 0;
		char options[256] = "";

		/* Commands that end here win when no word (or an argument) follows. */
		for (size_t i = 0; i < N_COMMANDS; i++) {
			if (alive[i] && !commands[i].words[depth]) {
				*used = depth;
				return &commands[i];
			}
		}
		for (size_t i = 0; i < N_COMMANDS; i++) {
			const char *w;

			if (!alive[i])
				continue;
			w = commands[i].words[depth];
			if (!strstr(options, w))
				snprintf(options + strlen(options),
					 sizeof(options) - strlen(options), "%s%s",
					 options[0] ? ", " : "", w);
			if (!word || strncmp(w, word, strlen(word)) != 0) {
				alive[i] = false;
				continue;
			}
			if (strcmp(w, word) == 0 || !full)
				full = w;
			else if (strcmp(full, w) != 0 && strcmp(full, word) != 0)
				candidates = -1; /* two different words share the prefix */
			if (candidates >= 0)
				candidates++;
		}
		if (!word) {
			fprintf(stderr, "gwctl: incomplete command; expected one of: %s\n",
				options);
			return NULL;
		}
		if (candidates == 0) {
			fprintf(stderr, "gwctl: unknown word '%s'; expected one of: %s\n", word,
				options);
			return NULL;
		}
		if (candidates < 0) {
			fprintf(stderr, "gwctl: '%s' is ambiguous; expected one of: %s\n", word,
				options);
			return NULL;
		}
		/* Keep only commands whose word is the one matched (exact beats prefix). */
		for (size_t i = 0; i < N_COMMANDS; i++)
			if (alive[i] && strcmp(commands[i].words[depth], full) != 0)
				alive[i] = false;
		depth++;
	}
}

struct text_ctx {
	struct output *out;
	print_fn print;
};

static void on_text_record(struct json_object *rec, void *arg)
{
	struct text_ctx *t = arg;

	if (t->out->json) {
		json_object_array_add(t->out->array, json_object_get(rec));
		return;
	}
	if (t->print)
		t->print(rec, t->out);
	if (t->out->details) /* -d: every field the daemon gave, under the record's line */
		print_details(rec, 4);
}

int main(int argc, char **argv)
{
	struct output out = { 0 };
	const char *socket_path = getenv("IBGW_SOCKET");
	double timeout_s = 10;
	const struct command *cmd;
	struct json_object *args = NULL;
	struct ctl_client client;
	const char *error;
	int c, used, status, err;

	if (!socket_path || !socket_path[0])
		socket_path = getenv("IBGW_CTL_SOCKET"); /* what sim/rack sets on a gateway node */
	if (!socket_path || !socket_path[0])
		socket_path = DEFAULT_SOCKET;
	while ((c = getopt(argc, argv, "+jpsdS:t:Vh")) != -1) {
		switch (c) {
		case 'j':
			out.json = true;
			break;
		case 'd':
			out.details = true;
			break;
		case 'p':
			out.pretty = true;
			break;
		case 's':
			out.stats = true;
			break;
		case 'S':
			socket_path = optarg;
			break;
		case 't': {
			char *end;

			timeout_s = strtod(optarg, &end);
			if (*end || timeout_s <= 0 || timeout_s > 3600) {
				fprintf(stderr, "gwctl: -t needs seconds between 0 and 3600\n");
				return EXIT_USAGE;
			}
			break;
		}
		case 'V':
			printf("gwctl %s\n", IBGW_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[0], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[0], "capture") == 0)
		return capture(argc - 1, argv + 1, socket_path);
	cmd = match_command(argc, argv, &used);
	if (!cmd)
		return EXIT_USAGE;
	if (cmd->make_args) {
		char why[CTL_ARGS_WHY_LEN] = "";

		args = cmd->make_args(argc - used, argv + used, &out, why);
		if (!args) {
			const char *w1 = cmd->words[1] ? cmd->words[1] : "";

			fprintf(stderr, "gwctl: %s %s: %s\nusage: gwctl %s %s %s\n", cmd->words[0],
				w1, why[0] ? why : "bad arguments", cmd->words[0], w1,
				cmd->arg_usage);
			return EXIT_USAGE;
		}
	} else if (used < argc) {
		fprintf(stderr, "gwctl: unexpected argument '%s'\n", argv[used]);
		return EXIT_USAGE;
	}

	err = ctl_client_connect(&client, socket_path, (int)(timeout_s * 1000));
	if (err < 0) {
		fprintf(stderr, "gwctl: cannot reach ibgwd at %s: %s%s\n", socket_path,
			strerror(-err),
			err == -ENOENT || err == -ECONNREFUSED ? " (is ibgwd running?)" : "");
		json_object_put(args);
		return EXIT_DAEMON;
	}
	if (out.json)
		out.array = json_object_new_array();
	struct text_ctx tctx = { &out, cmd->print };
	status = ctl_client_request(&client, cmd->type, args, on_text_record, &tctx, &error);
	ctl_client_close(&client);
	json_object_put(args);
	if (out.json) {
		int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
			    (out.pretty ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED
					: JSON_C_TO_STRING_PLAIN);

		if (status == CTL_OK)
			printf("%s\n", json_object_to_json_string_ext(out.array, flags));
		json_object_put(out.array);
	}
	if (status != CTL_OK) {
		fprintf(stderr, "gwctl: %s\n", error[0] ? error : "request failed");
		return EXIT_DAEMON;
	}
	return 0;
}
