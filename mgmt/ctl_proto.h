/*
 * The control protocol between gwctl (or any client) and ibgwd, over a unix stream
 * socket. Versioned and length-checked, in the manner of bgpd's imsg:
 *
 *   frame  = header (16 octets, network order) + body (len octets)
 *   header = magic "IBGW" | version u16 | type u16 | len u32 | seq u32
 *
 * A request is one frame whose type names the command and whose body is empty or one
 * JSON object of arguments. The reply is zero or more CTL_MSG_RECORD frames (each one
 * JSON object: a route, a link, ...) then exactly one CTL_MSG_END frame whose body is
 * {"status": 0} or {"status": N, "error": "why"}; every reply frame echoes the
 * request's seq. JSON keys are snake_case and are the contract for other clients too.
 */
#ifndef IBGW_MGMT_CTL_PROTO_H
#define IBGW_MGMT_CTL_PROTO_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

#define CTL_MAGIC          0x49424757u /* "IBGW" */
#define CTL_VERSION        1
#define CTL_HDR_LEN        16
#define CTL_MAX_REQUEST    (64u * 1024)        /* request bodies; larger is refused */
#define CTL_MAX_REPLY      (16u * 1024 * 1024) /* one reply frame (one record) */
#define CTL_MAX_JSON_DEPTH 16

/* Frame types. Requests < 0x8000, replies >= 0x8000. Numbers never change. */
enum ctl_msg_type {
	CTL_SHOW_VERSION = 1,
	CTL_SHOW_CONFIG = 2,
	CTL_SHOW_LINKS = 3, /* {"stats": true} optional */
	CTL_RELOAD = 4,
	CTL_LOG_LEVEL = 5,
	CTL_SHOW_ROUTES = 6,     /* {"prefix": "10.1.0.0/16", "tenant": "blue"} optional */
	CTL_SHOW_NEIGHBOURS = 7, /* {"dev": "eth0"} optional */
	CTL_SHOW_PATHS = 8,
	CTL_SHOW_MCAST = 9,
	CTL_SHOW_CONNECTIONS = 10,
	CTL_SHOW_STATS = 11,
	/* Operator changes (privileged socket only; arguments in mgmt/ctl_args.h). */
	CTL_ROUTE_ADD = 12,   /* {"dst", "type", "gateway", "dev", "metric", "nexthops"} */
	CTL_ROUTE_DEL = 13,   /* the same keys; "dst" and "metric" name the route */
	CTL_NEIGH_ADD = 14,   /* {"dst", "lladdr", "dev"}: a PERMANENT neighbour */
	CTL_NEIGH_DEL = 15,   /* {"dst", "dev", "lladdr" optional} */
	CTL_NEIGH_FLUSH = 16, /* {"dev", "to" optional}: every entry but PERMANENT ones */
	CTL_PATH_FLUSH = 17,  /* {"gid"} optional: the SA clients' path caches */
	/* Reserved: failover (issue 8). */
	CTL_SHOW_HA = 18,
	CTL_HA_SWITCHOVER = 19,
	CTL_SHOW_GID_ROUTES = 20,
	CTL_CAPTURE = 21,   /* {"dev", "filter", "count", "duration_ms", "snaplen", "direction"} */
	CTL_SHOW_RA = 22,   /* router advertisements, per interface */
	CTL_SHOW_DHCP = 23, /* DHCP relay, per interface */

	CTL_MSG_RECORD = 0x8001,
	CTL_MSG_END = 0x8002,
};

/* Status codes in an END frame. */
enum ctl_status {
	CTL_OK = 0,
	CTL_EBADREQ = 1,  /* malformed request */
	CTL_EUNKNOWN = 2, /* unknown request type */
	CTL_EPERM = 3,    /* not allowed on this socket */
	CTL_EFAILED = 4,  /* the command ran and failed (e.g. reload with config errors) */
	CTL_EVERSION = 5, /* protocol version not spoken */
	CTL_EBUSY = 6,    /* too many clients or requests */
};

struct ctl_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t len;
	uint32_t seq;
};

void ctl_hdr_encode(const struct ctl_hdr *h, uint8_t out[CTL_HDR_LEN]);
/*
 * Decode and check a header: magic, version, and len against max_len. Returns 0,
 * -EPROTO (bad magic: not our protocol, close the connection), -EPROTONOSUPPORT
 * (version), or -EMSGSIZE (len > max_len). h is filled whenever the magic matched.
 */
int ctl_hdr_decode(const uint8_t in[CTL_HDR_LEN], size_t max_len, struct ctl_hdr *h);

/*
 * Parse a frame body as one JSON object (empty body = no arguments, *out = NULL).
 * Returns 0, or -EINVAL with the reason written to why (NUL bytes, not JSON and where,
 * truncated, not an object, nesting deeper than CTL_MAX_JSON_DEPTH).
 */
#define CTL_WHY_LEN 128
int ctl_body_parse(const uint8_t *body, size_t len, struct json_object **out,
		   char why[CTL_WHY_LEN]);

/* Names of request types ("show links"), for logs; NULL if unknown. */
const char *ctl_msg_name(uint16_t type);

#endif
