/*
 * Fuzz the daemon's request decoding: frame header then body, as the control server
 * applies them to bytes from a client. Any input must be accepted or refused cleanly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "mgmt/ctl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	json_object_put(args);
	return 0;
}
