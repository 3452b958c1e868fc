/*
 * libFuzzer harness for ha/ha_sync's decoder. As in fuzz_ha_wire, an odd first octet
 * has the input sealed with the harness's key first, so the record parser is reached.
 * A message that decodes must yield exactly n_records records, each of which encodes
 * again (the encoder and decoder share one rule set) to a message that decodes to the
 * same records.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_sync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

struct again {
	const struct ha_key *key;
	const struct ha_sync_rec *recs;
	unsigned n, seen;
};

static int verify(void *arg, const uint8_t *msg, size_t len)
{
	struct again *a = arg;
	struct ha_sync_msg m;
	struct ha_sync_rec r;

	check(ha_sync_decode(msg, len, a->key, &m, NULL, 0) == HA_WIRE_OK);
	while (ha_sync_next(&m, &r)) {
		check(a->seen < a->n);
		check(r.type == a->recs[a->seen].type && r.del == a->recs[a->seen].del);
		check(memcmp(&r.u, &a->recs[a->seen].u, sizeof(r.u)) == 0);
		a->seen++;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ha_key key;
	static bool keyed;
	static uint8_t buf[HA_SYNC_MAX_LEN];
	static struct ha_sync_rec recs[4096];
	struct ha_sync_msg m;
	char why[160];

	if (!keyed)
		check(ha_key_set(&key, (const uint8_t *)"fuzzing key 0123", 16) == 0);
	keyed = true;
	if (size == 0 || size > sizeof(buf))
		return 0;
	memcpy(buf, data, size);
	if ((data[0] & 1) && size >= HA_SYNC_MIN_LEN)
		ha_wire_seal(buf, size, &key);
	if (ha_sync_decode(buf, size, &key, &m, why, sizeof(why)) != HA_WIRE_OK)
		return 0;
	unsigned n = 0;
	memset(recs, 0, sizeof(recs));
	while (n < 4096 && ha_sync_next(&m, &recs[n]))
		n++;
	check(n == m.n_records);

	struct ha_origin o = { .node_id = 1, .boot_id = 2, .name = "fuzz" };
	struct again a = { .key = &key, .recs = recs, .n = n };
	uint64_t seq = 0;
	check(ha_sync_encode(&o, &seq, &key, m.batch, m.full, recs, n, 1400, verify, &a) > 0);
	check(a.seen == n);
	return 0;
}
