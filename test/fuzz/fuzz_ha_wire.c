/*
 * libFuzzer harness for ha/ha_wire's heartbeat decoder and ha/ha_fsm's receive path.
 *
 * The fuzzer cannot forge an HMAC, so the input is sealed with the harness's key
 * before decoding when its first octet is odd (everything past the MAC check gets
 * exercised); even first octets go in as they are (framing and MAC checks). Whatever
 * decodes must encode back to the same octets (reserved octets and unknown flag bits
 * aside), and feeding it to a state machine must not break it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_fsm.h"
#include "ha/ha_wire.h"
#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static struct ha_key key;
static struct ha_fsm *fsm;

static void setup(void)
{
	static const struct ha_fsm_ops ops = { 0 };
	static const struct ha_group_cfg groups[2] = { { .name = "group0", .priority = 100 },
						       { .name = "group1", .priority = 200 } };
	struct ha_fsm_cfg c = { .self = { .node_id = 1, .boot_id = 0xb007, .name = "fuzz" },
				.n_paths = 2,
				.groups = groups,
				.n_groups = 2,
				.key = &key };

	log_init("fuzz_ha_wire", LOG_TARGET_STDERR, LOG_ERR);
	check(ha_key_set(&key, (const uint8_t *)"fuzzing key 0123", 16) == 0);
	check(ha_fsm_new(&c, &ops, NULL, 0, &fsm) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t now;
	uint8_t buf[HA_HB_MAX_LEN + 64], out[HA_HB_MAX_LEN];
	struct ha_heartbeat hb;
	char why[160];

	if (!fsm)
		setup();
	if (size == 0 || size > sizeof(buf))
		return 0;
	memcpy(buf, data, size);
	if ((data[0] & 1) && size >= HA_WIRE_HDR_LEN + HA_WIRE_MAC_LEN)
		ha_wire_seal(buf, size, &key);

	enum ha_wire_err e = ha_hb_decode(buf, size, &key, &hb, why, sizeof(why));
	check((unsigned)e < HA_WIRE_ERR_COUNT);
	if (e == HA_WIRE_OK) {
		struct ha_origin o = { .node_id = hb.hdr.node_id, .boot_id = hb.hdr.boot_id };
		memcpy(o.name, hb.hdr.name, HA_NAME_LEN);
		size_t n = ha_hb_encode(out, sizeof(out), &o, hb.hdr.seq, &hb, &key);
		check(n == size);
		/* equal but for reserved octets and unknown flags, which encode as zero */
		struct ha_heartbeat again;
		check(ha_hb_decode(out, n, &key, &again, NULL, 0) == HA_WIRE_OK);
		check(again.echo_boot == hb.echo_boot && again.hears == hb.hears &&
		      again.n_groups == hb.n_groups && again.path_id == hb.path_id);
		for (unsigned i = 0; i < hb.n_groups; i++)
			check(again.groups[i].id == hb.groups[i].id &&
			      again.groups[i].priority == hb.groups[i].priority &&
			      again.groups[i].state == hb.groups[i].state &&
			      again.groups[i].flags == hb.groups[i].flags);
	}
	now += 7;
	ha_fsm_heartbeat(fsm, data[0] % 3, buf, size, now);
	ha_fsm_tick(fsm, now);
	check(ha_fsm_next_deadline(fsm) > now);
	for (unsigned g = 0; g < 2; g++)
		check(ha_fsm_group_state(fsm, g) < HA_STATE_COUNT);
	return 0;
}
