/*
 * dp_json: the one-line json-c builders the gateway's show and status replies use
 * (dp_show.c, dp_ha.c, dp_capture.c, dp_ra.c, dp_dhcp.c), on the control thread.
 */
#ifndef IBGW_GATEWAY_DP_JSON_H
#define IBGW_GATEWAY_DP_JSON_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

static inline void add_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

static inline void add_int(struct json_object *o, const char *k, int64_t v)
{
	json_object_object_add(o, k, json_object_new_int64(v));
}

static inline void add_bool(struct json_object *o, const char *k, bool v)
{
	json_object_object_add(o, k, json_object_new_boolean(v));
}

/* v as "0x" and at least width hex digits. */
static inline void add_hex(struct json_object *o, const char *k, unsigned v, int width)
{
	char b[16];

	snprintf(b, sizeof(b), "0x%0*x", width, v);
	add_str(o, k, b);
}

#endif
