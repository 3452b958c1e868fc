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
#include "mgmt/ctl_cmd.h"

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
	printf(" backend %s", str(o, "backend"));
	if (strcmp(str(o, "tenant"), "default"))
		opt(o, "tenant", "tenant"); /* ip link: "master VRF" */
	printf("\n");
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
		opt(o, "queues", "queues");
		opt(o, "io", "io");
		printf("\n");
	}
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
	if (strcmp(str(o, "tenant"), "default"))
		opt(o, "tenant", "tenant"); /* as ip route show table all names tables */
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

static bool boolean(struct json_object *o, const char *key);

/* Three kinds of records: an IPoIB link's MGID memberships, then per multicast
 * interface its state and counters, each followed by its IP groups with members. */
static void print_mcast(struct json_object *o, struct output *out)
{
	(void)out;
	if (has(o, "interface")) {
		printf("ip multicast dev %s %s querier%s%s groups %lld rate_limit %lldpps\n",
		       str(o, "interface"), str(o, "side"), boolean(o, "querier4") ? " igmp" : "",
		       boolean(o, "querier6") ? " mld" : "", (long long)num(o, "groups"),
		       (long long)num(o, "rate_limit_pps"));
		printf(
		    "    reports %lld leaves %lld queries_sent %lld queries_heard %lld bad %lld\n",
		    (long long)num(o, "reports"), (long long)num(o, "leaves"),
		    (long long)num(o, "queries_sent"), (long long)num(o, "queries_heard"),
		    (long long)num(o, "bad"));
		printf(
		    "    rx %lld forwarded %lld no_members %lld ttl_expired %lld link_scope %lld "
		    "not_served %lld rate_limited %lld send_failed %lld\n",
		    (long long)num(o, "rx_data"), (long long)num(o, "forwarded"),
		    (long long)num(o, "no_members"), (long long)num(o, "ttl_expired"),
		    (long long)num(o, "link_scope"), (long long)num(o, "not_served"),
		    (long long)num(o, "rate_limited"), (long long)num(o, "send_failed"));
		return;
	}
	if (has(o, "group")) {
		printf("    group %s dev %s members %s", str(o, "group"), str(o, "dev"),
		       str(o, "side"));
		opt(o, "mgid", "mgid");
		printf(" expires %lldms packets %lld bytes %lld rate_limited %lld\n",
		       (long long)num(o, "expires_ms"), (long long)num(o, "packets"),
		       (long long)num(o, "bytes"), (long long)num(o, "rate_limited"));
		return;
	}
	printf("%s dev %s", str(o, "mgid"), str(o, "dev"));
	opt(o, "mlid", "mlid");
	opt(o, "qkey", "qkey");
	printf(" %s %s\n", str(o, "join"), str(o, "state"));
}

static bool boolean(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* ip-like: "eth0 advertising from fe80::... lifetime 1800s ..." then the prefixes and
 * the counters on their own lines. */
static void print_ra(struct json_object *o, struct output *out)
{
	struct json_object *px = json_object_object_get(o, "prefixes");
	size_t n = px ? json_object_array_length(px) : 0;

	(void)out;
	printf("%s %s", str(o, "dev"), str(o, "state"));
	opt(o, "source", "from");
	printf(" lifetime %llds interval %lld-%lldms hop_limit %lld mtu %lld",
	       (long long)num(o, "router_lifetime_s"), (long long)num(o, "min_interval_ms"),
	       (long long)num(o, "max_interval_ms"), (long long)num(o, "hop_limit"),
	       (long long)num(o, "mtu"));
	opt(o, "next_ms", "next_ms");
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		struct json_object *x = json_object_array_get_idx(px, i);

		printf("    prefix %s%s%s valid %llds preferred %llds\n", str(x, "prefix"),
		       boolean(x, "on_link") ? " on-link" : "",
		       boolean(x, "autonomous") ? " autonomous" : "",
		       (long long)num(x, "valid_lifetime_s"),
		       (long long)num(x, "preferred_lifetime_s"));
	}
	printf(
	    "    ra sent %lld (final %lld) rs received %lld answered unicast %lld multicast %lld "
	    "ignored %lld send failed %lld\n",
	    (long long)num(o, "ra_sent"), (long long)num(o, "ra_sent_final"),
	    (long long)num(o, "rs_received"), (long long)num(o, "rs_answered_unicast"),
	    (long long)num(o, "rs_answered_multicast"), (long long)num(o, "rs_ignored"),
	    (long long)num(o, "send_failed"));
}

static void print_dhcp(struct json_object *o, struct output *out)
{
	struct json_object *sv = json_object_object_get(o, "servers");
	size_t n = sv ? json_object_array_length(sv) : 0;

	(void)out;
	printf("%s %s", str(o, "dev"), str(o, "state"));
	opt(o, "giaddr", "giaddr");
	printf(" servers");
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? "," : " ",
		       json_object_get_string(json_object_array_get_idx(sv, i)));
	if (boolean(o, "option82"))
		printf(" option82");
	opt(o, "remote_id", "remote_id");
	printf(" max_hops %lld\n", (long long)num(o, "max_hops"));
	printf("    requests %lld relayed %lld to servers %lld option82 added %lld no room %lld "
	       "hops exceeded %lld bad %lld\n",
	       (long long)num(o, "requests"), (long long)num(o, "relayed"),
	       (long long)num(o, "to_servers"), (long long)num(o, "option82_added"),
	       (long long)num(o, "option82_no_room"), (long long)num(o, "hops_exceeded"),
	       (long long)num(o, "bad"));
	printf("    replies %lld broadcast %lld unicast %lld ib no client hw %lld send failed %lld "
	       "not serving %lld\n",
	       (long long)num(o, "replies"), (long long)num(o, "replies_broadcast"),
	       (long long)num(o, "replies_unicast"), (long long)num(o, "ib_no_client_hw"),
	       (long long)num(o, "send_failed"), (long long)num(o, "not_serving"));
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

	/* [tenant NAME] (ip link show vrf NAME) */
	if (argc != 0 && (argc != 2 || (strcmp(argv[0], "tenant") && strcmp(argv[0], "vrf")))) {
		snprintf(why, CTL_ARGS_WHY_LEN, "expected tenant NAME or nothing, not '%s'",
			 argv[0]);
		return NULL;
	}
	a = json_object_new_object();
	if (out->stats)
		json_object_object_add(a, "stats", json_object_new_boolean(true));
	if (argc == 2)
		json_object_object_add(a, "tenant", json_object_new_string(argv[1]));
	return a;
}

static struct json_object *args_routes(int argc, char **argv, const struct output *out,
				       char why[CTL_ARGS_WHY_LEN])
{
	const char *prefix = NULL, *tenant = NULL;
	struct json_object *a;
	(void)out;

	/* [tenant NAME | vrf NAME | tenant all] [PREFIX], in either order (ip route show
	 * vrf NAME). */
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "tenant") || !strcmp(argv[i], "vrf")) {
			if (tenant || i + 1 == argc) {
				snprintf(why, CTL_ARGS_WHY_LEN,
					 tenant ? "tenant is given twice" : "%s needs a name",
					 argv[i]);
				return NULL;
			}
			tenant = argv[++i];
		} else if (!prefix) {
			prefix = argv[i];
		} else {
			snprintf(why, CTL_ARGS_WHY_LEN, "unexpected argument '%s'", argv[i]);
			return NULL;
		}
	}
	a = json_object_new_object();
	if (prefix)
		json_object_object_add(a, "prefix", json_object_new_string(prefix));
	if (tenant)
		json_object_object_add(a, "tenant", json_object_new_string(tenant));
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

/* --- what a write command says it did --- */

/* The request's arguments back in gwctl's words ("10.1.0.0/16 via 10.0.0.1 dev eth0"). */
static void route_words(struct json_object *args, char *buf, size_t len)
{
	struct ctl_route r;
	char why[CTL_ARGS_WHY_LEN];

	if (ctl_route_from_json(args, false, &r, why) < 0)
		snprintf(buf, len, "%s", str(args, "dst"));
	else
		ctl_route_format(&r, buf, len);
}

static void done_route_add(struct json_object *args, unsigned records)
{
	char text[CTL_ROUTE_STRLEN];

	(void)records;
	route_words(args, text, sizeof(text));
	printf("route added: %s\n", text);
}

static void done_route_del(struct json_object *args, unsigned records)
{
	char text[CTL_ROUTE_STRLEN];

	(void)records;
	route_words(args, text, sizeof(text));
	printf("route deleted: %s\n", text);
}

static void neigh_words(const char *what, struct json_object *args)
{
	printf("neighbour %s: %s dev %s", what, str(args, "dst"), str(args, "dev"));
	opt(args, "lladdr", "lladdr");
	printf("%s\n", strcmp(what, "added") ? "" : " PERMANENT");
}

static void done_neigh_add(struct json_object *args, unsigned records)
{
	(void)records;
	neigh_words("added", args);
}

static void done_neigh_del(struct json_object *args, unsigned records)
{
	(void)records;
	neigh_words("deleted", args);
}

static void done_log_level(struct json_object *args, unsigned records)
{
	(void)records;
	printf("log level set to %s\n", str(args, "level"));
}

/* Daemons that predate the per-group records still say nothing: say it here. */
static void done_switchover(struct json_object *args, unsigned records)
{
	if (records)
		return;
	if (has(args, "group"))
		printf("group %s: switchover started (gwctl show ha follows it)\n",
		       str(args, "group"));
	else
		printf("switchover started (gwctl show ha follows it)\n");
}

static void print_switchover(struct json_object *o, struct output *out)
{
	char from[16];

	(void)out;
	upper(from, str(o, "state"), sizeof(from));
	printf("group %s: switchover started from %s (gwctl show ha follows it)\n", str(o, "group"),
	       from);
}

/* reload: "reloaded FILE in N ms", then what changed, one line each. Errors come in the
 * END frame (stderr, exit 1). */
static void print_reload(struct json_object *o, struct output *out)
{
	struct json_object *a;
	size_t n = 0;

	(void)out;
	if (json_object_object_get_ex(o, "changes", &a) && json_object_is_type(a, json_type_array))
		n = json_object_array_length(a);
	printf("reloaded %s in %lld ms: %s\n", str(o, "config"), (long long)num(o, "duration_ms"),
	       n ? "changed" : "nothing changed");
	for (size_t i = 0; i < n; i++)
		printf("    %s\n", json_object_get_string(json_object_array_get_idx(a, i)));
}

static void done_reload(struct json_object *args, unsigned records)
{
	(void)args;
	if (!records) /* a daemon that predates the outcome record */
		printf("reloaded\n");
}

/* --- requests: the grammar (mgmt/ctl_cmd.c) names them, these build and print --- */

typedef void (*done_fn)(struct json_object *args, unsigned records);

struct handler {
	uint16_t type;
	args_fn make_args; /* NULL: takes no words */
	print_fn print;    /* each record */
	done_fn done;      /* text output, on success: what a write did */
};

static const struct handler handlers[] = {
	{ CTL_SHOW_VERSION, NULL, print_version, NULL },
	{ CTL_SHOW_CONFIG, NULL, print_config, NULL },
	{ CTL_SHOW_LINKS, args_links, print_link, NULL },
	{ CTL_SHOW_ROUTES, args_routes, print_route, NULL },
	{ CTL_SHOW_NEIGHBOURS, args_neigh, print_neigh, NULL },
	{ CTL_SHOW_PATHS, NULL, print_path, NULL },
	{ CTL_SHOW_GID_ROUTES, NULL, print_gid_route, NULL },
	{ CTL_SHOW_MCAST, NULL, print_mcast, NULL },
	{ CTL_SHOW_RA, NULL, print_ra, NULL },
	{ CTL_SHOW_DHCP, NULL, print_dhcp, NULL },
	{ CTL_SHOW_CONNECTIONS, NULL, print_conn, NULL },
	{ CTL_SHOW_STATS, NULL, print_stats, NULL },
	{ CTL_SHOW_HA, NULL, print_ha, NULL },
	{ CTL_HA_SWITCHOVER, args_switchover, print_switchover, done_switchover },
	{ CTL_RELOAD, NULL, print_reload, done_reload },
	{ CTL_LOG_LEVEL, args_log_level, NULL, done_log_level },
	{ CTL_ROUTE_ADD, args_route_add, NULL, done_route_add },
	{ CTL_ROUTE_DEL, args_route_del, NULL, done_route_del },
	{ CTL_NEIGH_ADD, args_neigh_add, NULL, done_neigh_add },
	{ CTL_NEIGH_DEL, args_neigh_del, NULL, done_neigh_del },
	{ CTL_NEIGH_FLUSH, args_neigh_flush, print_flushed, NULL },
	{ CTL_PATH_FLUSH, args_path_flush, print_flushed, NULL },
};

static const struct handler *handler_of(uint16_t type)
{
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (handlers[i].type == type)
			return &handlers[i];
	return NULL;
}

struct text_ctx {
	struct output *out;
	print_fn print;
	unsigned records;
};

static void on_text_record(struct json_object *rec, void *arg)
{
	struct text_ctx *t = arg;

	t->records++;
	if (t->out->json) {
		json_object_array_add(t->out->array, json_object_get(rec));
		return;
	}
	if (t->print)
		t->print(rec, t->out);
	if (t->out->details) /* -d: every field the daemon gave, under the record's line */
		print_details(rec, 4);
}

/* The connection to the daemon: opened at the first request, kept for the next ones of a
 * -batch, closed after a transport failure (the next request opens it again). */
struct session {
	const char *socket_path;
	int timeout_ms;
	bool open;
	struct ctl_client client;
};

/* Connect to the daemon, or say why not (once, here). 0 or -1. */
static int connect_daemon(struct ctl_client *c, const char *socket_path, int timeout_ms)
{
	int err = ctl_client_connect(c, socket_path, timeout_ms);

	if (err < 0) {
		fprintf(stderr, "gwctl: cannot reach ibgwd at %s: %s%s\n", socket_path,
			strerror(-err),
			err == -ENOENT || err == -ECONNREFUSED ? " (is ibgwd running?)" : "");
		return -1;
	}
	return 0;
}

static int session_request(struct session *s, uint16_t type, struct json_object *args,
			   struct text_ctx *t, const char **error)
{
	int status;

	if (!s->open) {
		if (connect_daemon(&s->client, s->socket_path, s->timeout_ms) < 0)
			return -1;
		s->open = true;
	}
	status = ctl_client_request(&s->client, type, args, on_text_record, t, error);
	if (status < 0) {
		ctl_client_close(&s->client);
		s->open = false;
	}
	return status;
}

/*
 * gwctl capture: the pcap stream to FILE or standard output (never a terminal), on a
 * connection of its own with no reply timeout: the capture ends at its count or
 * duration, or with Ctrl-C.
 */
static int capture(int argc, char **argv, const char *socket_path)
{
	struct ctl_capture a;
	struct ctl_client client;
	char why[CTL_ARGS_WHY_LEN] = "";
	const char *file;
	int fd, ret;

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
	if (connect_daemon(&client, socket_path, -1) < 0) {
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

static void usage_hint(const struct ctl_cmd *c)
{
	fprintf(stderr, "usage: gwctl %s%s%s%s%s\n", c->object, c->verb ? " " : "",
		c->verb ? c->verb : "", c->arg_usage && c->arg_usage[0] ? " " : "",
		c->arg_usage ? c->arg_usage : "");
}

/* One command's words (after the options): 0 done, EXIT_DAEMON, EXIT_USAGE. */
static int run_command(int argc, char **argv, struct output *out, struct session *s)
{
	struct ctl_parsed p;
	const struct handler *h;
	struct json_object *args = NULL;
	char why[CTL_CMD_WHY_LEN > CTL_ARGS_WHY_LEN ? CTL_CMD_WHY_LEN : CTL_ARGS_WHY_LEN] = "";
	const char *error = "";
	int status;

	if (ctl_cmd_parse(argc, argv, &p, why) < 0) {
		fprintf(stderr, "gwctl: %s\n", why);
		return EXIT_USAGE;
	}
	if (p.help) {
		ctl_cmd_help(stdout, p.object);
		return 0;
	}
	if (p.cmd->type == CTL_CAPTURE)
		return capture(argc - p.argi, argv + p.argi, s->socket_path);
	h = handler_of(p.cmd->type);
	if (!h) { /* the grammar names a request this gwctl cannot build: a bug */
		fprintf(stderr, "gwctl: %s: not built into this gwctl\n", p.cmd->object);
		return EXIT_USAGE;
	}
	if (h->make_args) {
		args = h->make_args(argc - p.argi, argv + p.argi, out, why);
		if (!args) {
			fprintf(stderr, "gwctl: %s%s%s: %s\n", p.cmd->object,
				p.cmd->verb ? " " : "", p.cmd->verb ? p.cmd->verb : "",
				why[0] ? why : "bad arguments");
			usage_hint(p.cmd);
			return EXIT_USAGE;
		}
	} else if (p.argi < argc) {
		fprintf(stderr, "gwctl: unexpected argument '%s'\n", argv[p.argi]);
		usage_hint(p.cmd);
		return EXIT_USAGE;
	}

	struct text_ctx t = { out, h->print, 0 };

	if (out->json)
		out->array = json_object_new_array();
	status = session_request(s, p.cmd->type, args, &t, &error);
	if (out->json) {
		int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
			    (out->pretty ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED
					 : JSON_C_TO_STRING_PLAIN);

		/* A failed request's records too (a reload's outcome comes before why it
		 * failed); nothing when it failed before any. */
		if (status == CTL_OK || t.records)
			printf("%s\n", json_object_to_json_string_ext(out->array, flags));
		json_object_put(out->array);
		out->array = NULL;
	} else if (status == CTL_OK && h->done) {
		h->done(args, t.records);
	}
	json_object_put(args);
	fflush(stdout); /* what was done before why the rest was not, in a shared 2>&1 */
	if (status == -1 && !error[0])
		return EXIT_DAEMON; /* could not connect: said already */
	if (status != CTL_OK) {
		fprintf(stderr, "gwctl: %s\n", error[0] ? error : "request failed");
		return EXIT_DAEMON;
	}
	fflush(stdout);
	return 0;
}

/*
 * -batch FILE: one command a line, as ip -batch reads them. Blank lines and comments are
 * skipped; the first command that fails stops the batch ("FILE:LINE" said on stderr)
 * unless -force, which goes on. Returns the first failure's exit status, else 0.
 */
static int run_batch(const char *path, bool force, struct output *out, struct session *s)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	char *line = NULL, *words[CTL_BATCH_MAX_ARGS], why[CTL_CMD_WHY_LEN];
	size_t cap = 0;
	unsigned lineno = 0;
	int first = 0;

	if (!f) {
		fprintf(stderr, "gwctl: -batch %s: %s\n", path, strerror(errno));
		return EXIT_USAGE;
	}
	while (getline(&line, &cap, f) >= 0) {
		int n, ret;

		lineno++;
		n = ctl_batch_split(line, words, CTL_BATCH_MAX_ARGS, why);
		if (n == 0)
			continue;
		if (n < 0) {
			fprintf(stderr, "gwctl: %s\n", why);
			ret = EXIT_USAGE;
		} else {
			ret = run_command(n, words, out, s);
		}
		if (ret == 0)
			continue;
		fprintf(stderr, "gwctl: -batch %s:%u: command failed%s\n",
			strcmp(path, "-") ? path : "(stdin)", lineno, force ? "" : ", stopping");
		if (!first)
			first = ret;
		if (!force)
			break;
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return first;
}

int main(int argc, char **argv)
{
	struct ctl_opts o;
	struct output out = { 0 };
	struct session s = { 0 };
	char why[CTL_CMD_WHY_LEN];
	int first, ret;

	first = ctl_opts_parse(argc - 1, argv + 1, &o, why);
	if (first < 0) {
		fprintf(stderr, "gwctl: %s\n", why);
		return EXIT_USAGE;
	}
	if (o.help) {
		ctl_cmd_help(stdout, NULL);
		return 0;
	}
	if (o.version) {
		printf("gwctl %s\n", IBGW_VERSION);
		return 0;
	}
	out.json = o.json;
	out.pretty = o.pretty;
	out.stats = o.stats;
	out.details = o.details;
	s.socket_path = o.socket;
	if (!s.socket_path)
		s.socket_path = getenv("IBGW_SOCKET");
	if (!s.socket_path || !s.socket_path[0])
		s.socket_path = getenv("IBGW_CTL_SOCKET"); /* what sim/rack sets on a gateway */
	if (!s.socket_path || !s.socket_path[0])
		s.socket_path = DEFAULT_SOCKET;
	s.timeout_ms = (int)((o.timeout_s ? o.timeout_s : 10) * 1000);
	argc -= 1 + first;
	argv += 1 + first;
	if (o.batch) {
		if (argc) {
			fprintf(stderr, "gwctl: -batch takes no command ('%s')\n", argv[0]);
			return EXIT_USAGE;
		}
		ret = run_batch(o.batch, o.force, &out, &s);
	} else if (argc == 0) {
		ctl_cmd_help(stderr, NULL);
		ret = EXIT_USAGE;
	} else {
		ret = run_command(argc, argv, &out, &s);
	}
	if (s.open)
		ctl_client_close(&s.client);
	return ret;
}
