/*
 * Fuzz the daemon's request decoding: frame header then body, as the control server
 * applies them to bytes from a client, then the write requests' arguments as the
 * daemon decodes them (mgmt/ctl_args.h) for the frame's type. Any input must be
 * accepted or refused with a reason; accepted arguments must encode back to JSON that
 * decodes to the same arguments.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "mgmt/ctl_args.h"
#include "mgmt/ctl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decoded arguments re-encoded must decode to the same (the daemon logs and gwctl
 * sends the encoded form). */
static void route_args(struct json_object *args, bool add)
{
	struct ctl_route r, back;
	char why[CTL_ARGS_WHY_LEN] = "", a[CTL_ROUTE_STRLEN], b[CTL_ROUTE_STRLEN];
	struct json_object *j;

	if (ctl_route_from_json(args, add, &r, why) < 0) {
		if (!why[0])
			abort();
		return;
	}
	j = ctl_route_to_json(&r);
	if (ctl_route_from_json(j, add, &back, why) < 0 ||
	    strcmp(ctl_route_format(&r, a, sizeof(a)), ctl_route_format(&back, b, sizeof(b))))
		abort();
	json_object_put(j);
}

static void neigh_args(struct json_object *args, bool add)
{
	struct ctl_neigh n, back;
	char why[CTL_ARGS_WHY_LEN] = "";
	struct json_object *j;

	if (ctl_neigh_from_json(args, add, &n, why) < 0) {
		if (!why[0])
			abort();
		return;
	}
	j = ctl_neigh_to_json(&n);
	if (ctl_neigh_from_json(j, add, &back, why) < 0 || memcmp(&n, &back, sizeof(n)))
		abort();
	json_object_put(j);
}

static void flush_args(uint16_t type, struct json_object *args)
{
	struct ctl_neigh_flush f;
	struct ctl_path_flush p;
	char why[CTL_ARGS_WHY_LEN] = "";
	int ret = type == CTL_NEIGH_FLUSH ? ctl_neigh_flush_from_json(args, &f, why)
					  : ctl_path_flush_from_json(args, &p, why);

	if (ret < 0 && !why[0])
		abort();
}

static void write_args(uint16_t type, struct json_object *args)
{
	switch (type) {
	case CTL_ROUTE_ADD:
	case CTL_ROUTE_DEL:
		route_args(args, type == CTL_ROUTE_ADD);
		break;
	case CTL_NEIGH_ADD:
	case CTL_NEIGH_DEL:
		neigh_args(args, type == CTL_NEIGH_ADD);
		break;
	case CTL_NEIGH_FLUSH:
	case CTL_PATH_FLUSH:
		flush_args(type, args);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_hdr h;
	struct json_object *args;
	char why[CTL_WHY_LEN] = "";

	if (size < CTL_HDR_LEN)
		return 0;
	if (ctl_hdr_decode(data, CTL_MAX_REQUEST, &h) < 0)
		return 0;
	size_t body = size - CTL_HDR_LEN;
	if (h.len < body)
		body = h.len;
	if (ctl_body_parse(data + CTL_HDR_LEN, body, &args, why) < 0) {
		if (!why[0])
			abort(); /* every refusal must say why */
		return 0;
	}
	if (args && !json_object_is_type(args, json_type_object))
		abort();
	write_args(h.type, args);
	json_object_put(args);
	return 0;
}
