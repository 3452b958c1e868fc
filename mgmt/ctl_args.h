/*
 * Arguments of the control protocol's write requests (route add/del, neigh
 * add/del/flush, path flush) in their three forms: the C structs below, the JSON object
 * on the wire (ctl_proto.h names the keys) and gwctl's text, which is the text form of
 * `gwctl show routes` / `show neighbours` so that a shown line pastes back into an add.
 *
 * The JSON decoders run in the daemon on requests from the privileged socket: they are
 * strict (unknown keys, wrong JSON types, out-of-range numbers, host bits, malformed
 * addresses are refused) and say precisely why, so the daemon changes nothing on bad
 * input. What needs the running data plane (does the interface exist, is a link address
 * the right length for its link) is the daemon's to check (gateway/dp_ctl.c).
 *
 * Everything here is pure (no I/O, no globals) and is fuzzed
 * (test/fuzz/fuzz_ctl_proto.c, test/fuzz/fuzz_ctl_args.c).
 */
#ifndef IBGW_MGMT_CTL_ARGS_H
#define IBGW_MGMT_CTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/addr.h"
#include "lib/ib_gid.h"

struct json_object;

#define CTL_NAME_MAX     32 /* interface names, with the NUL (the config's GW_NAME_MAX) */
#define CTL_ROUTE_MAX_NH 16 /* next hops of one route (the RIB's RT_ECMP_MAX) */
#define CTL_LLADDR_MAX   20 /* an IPoIB hardware address; a MAC has 6 */
#define CTL_ARGS_WHY_LEN 192
#define CTL_ROUTE_STRLEN 1200 /* ctl_route_format's worst case */

struct ctl_nexthop {
	bool has_gw;
	struct ip_addr gw;
	char dev[CTL_NAME_MAX]; /* "": resolved through the connected routes */
};

/* A static route as the operator names it. */
struct ctl_route {
	struct ip_prefix dst; /* host bits clear */
	bool blackhole;       /* drop: no next hop */
	uint32_t metric;
	char tenant[CTL_NAME_MAX]; /* "": the default tenant */
	unsigned n_nh;             /* 0 only for a blackhole (add) or a del naming no next hop */
	struct ctl_nexthop nh[CTL_ROUTE_MAX_NH];
};

struct ctl_neigh {
	struct ip_addr dst;
	char dev[CTL_NAME_MAX];
	uint8_t lladdr_len; /* 6, 20, or 0 when not given (del only) */
	uint8_t lladdr[CTL_LLADDR_MAX];
};

struct ctl_neigh_flush {
	char dev[CTL_NAME_MAX];
	bool has_to; /* only entries inside "to" */
	struct ip_prefix to;
};

struct ctl_path_flush {
	bool has_gid; /* only paths to this DGID; otherwise every path */
	union ib_gid gid;
};

/* A packet capture (gwctl capture): 0 in count, duration_ms: no such limit. */
#define CTL_CAPTURE_FILTER_MAX 1024 /* a filter expression's octets, with the NUL */
#define CTL_CAPTURE_DIR_IN     1u
#define CTL_CAPTURE_DIR_OUT    2u
struct ctl_capture {
	char dev[CTL_NAME_MAX];
	char filter[CTL_CAPTURE_FILTER_MAX]; /* libpcap syntax; "": every packet */
	uint64_t count;                      /* stop after this many packets */
	uint32_t duration_ms;                /* stop after this long */
	uint32_t snaplen;                    /* octets kept per packet; 0: all */
	unsigned dirs;                       /* CTL_CAPTURE_DIR_*; 0 read as both */
};

/*
 * A link-layer address as `show neighbours` prints it: octets as two hex digits
 * separated by colons, 6 (a MAC) or 20 (an IPoIB hardware address). Returns the number
 * of octets, or -EINVAL (syntax) / -EMSGSIZE (a length other than 6 or 20) with why.
 */
int ctl_lladdr_parse(const char *text, uint8_t out[CTL_LLADDR_MAX], char why[CTL_ARGS_WHY_LEN]);
/* The same form back; buf needs 3 * CTL_LLADDR_MAX octets. */
char *ctl_lladdr_format(const uint8_t *addr, size_t len, char *buf, size_t buflen);

/*
 * JSON -> C. args may be NULL (no body). for_add: an add needs a next hop (or type
 * blackhole) and a link address; a del needs only the key. Returns 0 or -EINVAL with
 * the reason in why; *out is then unspecified.
 */
int ctl_route_from_json(struct json_object *args, bool for_add, struct ctl_route *out,
			char why[CTL_ARGS_WHY_LEN]);
int ctl_neigh_from_json(struct json_object *args, bool for_add, struct ctl_neigh *out,
			char why[CTL_ARGS_WHY_LEN]);
int ctl_neigh_flush_from_json(struct json_object *args, struct ctl_neigh_flush *out,
			      char why[CTL_ARGS_WHY_LEN]);
int ctl_path_flush_from_json(struct json_object *args, struct ctl_path_flush *out,
			     char why[CTL_ARGS_WHY_LEN]);
int ctl_capture_from_json(struct json_object *args, struct ctl_capture *out,
			  char why[CTL_ARGS_WHY_LEN]);

/* C -> JSON (a new object; NULL when out of memory). */
struct json_object *ctl_route_to_json(const struct ctl_route *r);
struct json_object *ctl_neigh_to_json(const struct ctl_neigh *n);
struct json_object *ctl_neigh_flush_to_json(const struct ctl_neigh_flush *f);
struct json_object *ctl_path_flush_to_json(const struct ctl_path_flush *p);
struct json_object *ctl_capture_to_json(const struct ctl_capture *c);

/*
 * gwctl's words -> C, each keyword by unique prefix. Routes:
 *   [unicast|blackhole] PREFIX|default [via ADDR [ADDR ...]] [dev NAME] [metric N]
 *       [nexthop via ADDR [dev NAME] [weight 1]] ... [proto static] [scope link|global]
 *       [unresolved] [inactive]
 * (the flags, proto and scope of a shown route are accepted and carry no meaning;
 * "default" takes the family of its gateways). Neighbours:
 *   ADDR [dev NAME] [lladdr LLADDR] [STATE] [path dlid N sl N mtu N [grh] mode M]
 * (the state and path of a shown neighbour are accepted and ignored: an added
 * neighbour is PERMANENT). Flush: dev NAME [to PREFIX]. Paths: [GID].
 * Returns 0 or -EINVAL with why. Whether an add has what it needs is checked too.
 */
int ctl_route_parse_argv(int argc, char **argv, bool for_add, struct ctl_route *out,
			 char why[CTL_ARGS_WHY_LEN]);
int ctl_neigh_parse_argv(int argc, char **argv, bool for_add, struct ctl_neigh *out,
			 char why[CTL_ARGS_WHY_LEN]);
int ctl_neigh_flush_parse_argv(int argc, char **argv, struct ctl_neigh_flush *out,
			       char why[CTL_ARGS_WHY_LEN]);
int ctl_path_flush_parse_argv(int argc, char **argv, struct ctl_path_flush *out,
			      char why[CTL_ARGS_WHY_LEN]);
/*
 * Capture: DEV [count N] [duration SECONDS] [snaplen N] [direction in|out|both]
 * [-w FILE|-] [filter] EXPRESSION... : the words after "filter" (or after the last
 * option, tcpdump's way) are the filter, joined by blanks. *file gets -w's FILE (NULL
 * when absent; gwctl refuses that rather than write binary to a terminal).
 */
int ctl_capture_parse_argv(int argc, char **argv, struct ctl_capture *out, const char **file,
			   char why[CTL_ARGS_WHY_LEN]);

/* The text form ("10.1.0.0/16 via 10.0.0.1 dev eth0 metric 10"), for logs; it parses
 * back with ctl_route_parse_argv. buf: CTL_ROUTE_STRLEN. */
char *ctl_route_format(const struct ctl_route *r, char *buf, size_t len);

#endif
