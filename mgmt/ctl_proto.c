/*
 * Control protocol framing: header codec and strict JSON body parsing. Both ends use
 * this file; the daemon's side is fuzzed (test/fuzz/fuzz_ctl_proto.c).
 */
#include "mgmt/ctl_proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void ctl_hdr_encode(const struct ctl_hdr *h, uint8_t out[CTL_HDR_LEN])
{
	put32(out, h->magic);
	put16(out + 4, h->version);
	put16(out + 6, h->type);
	put32(out + 8, h->len);
	put32(out + 12, h->seq);
}

int ctl_hdr_decode(const uint8_t in[CTL_HDR_LEN], size_t max_len, struct ctl_hdr *h)
{
	h->magic = get32(in);
	if (h->magic != CTL_MAGIC)
		return -EPROTO;
	h->version = get16(in + 4);
	h->type = get16(in + 6);
	h->len = get32(in + 8);
	h->seq = get32(in + 12);
	if (h->version != CTL_VERSION)
		return -EPROTONOSUPPORT;
	if (h->len > max_len)
		return -EMSGSIZE;
	return 0;
}

int ctl_body_parse(const uint8_t *body, size_t len, struct json_object **out, char why[CTL_WHY_LEN])
{
	struct json_tokener *tok;
	struct json_object *obj;
	int err = -EINVAL;

	*out = NULL;
	if (len == 0)
		return 0;
	if (memchr(body, '\0', len)) {
		snprintf(why, CTL_WHY_LEN, "body contains a NUL byte");
		return -EINVAL;
	}
	tok = json_tokener_new_ex(CTL_MAX_JSON_DEPTH);
	if (!tok) {
		snprintf(why, CTL_WHY_LEN, "out of memory");
		return -ENOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, (const char *)body, (int)len);
	if (!obj) {
		enum json_tokener_error e = json_tokener_get_error(tok);

		if (e == json_tokener_continue)
			snprintf(why, CTL_WHY_LEN, "body is truncated JSON");
		else if (e == json_tokener_error_depth)
			snprintf(why, CTL_WHY_LEN, "body is nested deeper than %d levels",
				 CTL_MAX_JSON_DEPTH);
		else
			snprintf(why, CTL_WHY_LEN, "body is not valid JSON: %s at offset %zu",
				 json_tokener_error_desc(e), json_tokener_get_parse_end(tok));
	} else if (json_tokener_get_parse_end(tok) != len) {
		snprintf(why, CTL_WHY_LEN, "body has data after the JSON object at offset %zu",
			 json_tokener_get_parse_end(tok));
		json_object_put(obj);
	} else if (!json_object_is_type(obj, json_type_object)) {
		snprintf(why, CTL_WHY_LEN, "body is not a JSON object");
		json_object_put(obj);
	} else {
		*out = obj;
		err = 0;
	}
	json_tokener_free(tok);
	return err;
}

const char *ctl_msg_name(uint16_t type)
{
	switch (type) {
	case CTL_SHOW_VERSION:
		return "show version";
	case CTL_SHOW_CONFIG:
		return "show config";
	case CTL_SHOW_LINKS:
		return "show links";
	case CTL_RELOAD:
		return "reload";
	case CTL_LOG_LEVEL:
		return "log level";
	case CTL_SHOW_ROUTES:
		return "show routes";
	case CTL_SHOW_NEIGHBOURS:
		return "show neighbours";
	case CTL_SHOW_PATHS:
		return "show paths";
	case CTL_SHOW_MCAST:
		return "show mcast";
	case CTL_SHOW_RA:
		return "show ra";
	case CTL_SHOW_DHCP:
		return "show dhcp";
	case CTL_SHOW_CONNECTIONS:
		return "show connections";
	case CTL_SHOW_STATS:
		return "show stats";
	case CTL_ROUTE_ADD:
		return "route add";
	case CTL_ROUTE_DEL:
		return "route del";
	case CTL_NEIGH_ADD:
		return "neigh add";
	case CTL_NEIGH_DEL:
		return "neigh del";
	case CTL_NEIGH_FLUSH:
		return "neigh flush";
	case CTL_PATH_FLUSH:
		return "path flush";
	case CTL_SHOW_HA:
		return "show ha";
	case CTL_HA_SWITCHOVER:
		return "ha switchover";
	case CTL_SHOW_GID_ROUTES:
		return "show gid-routes";
	case CTL_CAPTURE:
		return "capture";
	default:
		return NULL;
	}
}
