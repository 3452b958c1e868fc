/*
 * ha/ha_wire and ha/ha_sync: the heartbeat and sync codecs round trip; every refusal
 * has its own code (truncated, magic, version, type, length, MAC, malformed); every
 * single-bit flip of a heartbeat is refused; the anti-replay window; HMAC-SHA256 as
 * RFC 4231 defines it; key files; sync batches split over datagrams.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ha/ha_sync.h"
#include "ha/ha_wire.h"
#include "lib/ib_bytes.h"

static const uint8_t secret[] = "correct horse battery staple";
static const struct ha_origin origin = { .node_id = 0x1111, .boot_id = 0xb007, .name = "gw1" };

static struct ha_key key_of(const char *s)
{
	struct ha_key k;
	assert_int_equal(ha_key_set(&k, (const uint8_t *)s, strlen(s)), 0);
	return k;
}

static void sample_hb(struct ha_heartbeat *hb)
{
	memset(hb, 0, sizeof(*hb));
	hb->echo_boot = 0xfeed;
	hb->echo_seq = 0x77;
	hb->hears = 0x5;
	hb->interval_ms = 20;
	hb->dead_ms = 100;
	hb->path_id = 2;
	hb->n_groups = 2;
	hb->groups[0] =
	    (struct ha_hb_group){ ha_group_id("v4"), 150, HA_STATE_MASTER, HA_GF_PREEMPT };
	hb->groups[1] = (struct ha_hb_group){ ha_group_id("v6"), 100, HA_STATE_BACKUP,
					      HA_GF_WANT | HA_GF_MANUAL };
}

static size_t encode_sample(uint8_t *buf, const struct ha_key *k)
{
	struct ha_heartbeat hb;
	sample_hb(&hb);
	return ha_hb_encode(buf, HA_HB_MAX_LEN, &origin, 42, &hb, k);
}

static void heartbeat_round_trip(void **state)
{
	struct ha_key k = key_of((const char *)secret);
	uint8_t buf[HA_HB_MAX_LEN];
	struct ha_heartbeat in, out;
	char why[128];
	(void)state;

	sample_hb(&in);
	size_t n = encode_sample(buf, &k);
	assert_int_equal(n, HA_HB_MIN_LEN + 2 * HA_HB_GROUP_LEN);
	/* the layout of docs/failover.md, octet by octet where it matters */
	assert_memory_equal(buf, "IBHA", 4);
	assert_int_equal(buf[4], 1);
	assert_int_equal(buf[5], HA_MSG_HEARTBEAT);
	assert_int_equal(ib_get_be16(buf + 6), n);
	assert_int_equal(ib_get_be64(buf + 24), 42);
	assert_string_equal((const char *)buf + 32, "gw1");
	assert_int_equal(ib_get_be64(buf + 64), 0xfeed);
	assert_int_equal(ib_get_be64(buf + 72), 0x77);
	assert_int_equal(buf[96], 2);
	assert_int_equal(buf[98], 2);
	assert_int_equal(ib_get_be32(buf + 100), ha_group_id("v4"));

	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_OK);
	assert_int_equal(out.hdr.node_id, 0x1111);
	assert_int_equal(out.hdr.boot_id, 0xb007);
	assert_int_equal(out.hdr.seq, 42);
	assert_string_equal(out.hdr.name, "gw1");
	assert_int_equal(out.echo_boot, in.echo_boot);
	assert_int_equal(out.echo_seq, in.echo_seq);
	assert_int_equal(out.hears, in.hears);
	assert_int_equal(out.interval_ms, 20);
	assert_int_equal(out.dead_ms, 100);
	assert_int_equal(out.path_id, 2);
	assert_int_equal(out.n_groups, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(out.groups[i].id, in.groups[i].id);
		assert_int_equal(out.groups[i].priority, in.groups[i].priority);
		assert_int_equal(out.groups[i].state, in.groups[i].state);
		assert_int_equal(out.groups[i].flags, in.groups[i].flags);
	}
	/* encode refuses what it cannot represent */
	in.path_id = HA_MAX_PATHS;
	assert_int_equal(ha_hb_encode(buf, sizeof(buf), &origin, 1, &in, &k), 0);
	in.path_id = 0;
	assert_int_equal(ha_hb_encode(buf, 50, &origin, 1, &in, &k), 0);
	assert_int_equal(ha_hb_encode(buf, sizeof(buf), &origin, 0, &in, &k), 0);
}

/* Change octets of a sealed message and seal it again: an authentic but bad message. */
static enum ha_wire_err resealed(uint8_t *buf, size_t n, const struct ha_key *k, size_t off,
				 uint8_t val, char *why, size_t why_len)
{
	struct ha_heartbeat out;
	buf[off] = val;
	ha_wire_seal(buf, n, k);
	return ha_hb_decode(buf, n, k, &out, why, why_len);
}

static void heartbeat_refusals(void **state)
{
	struct ha_key k = key_of((const char *)secret), other = key_of("another secret key!!");
	uint8_t buf[HA_HB_MAX_LEN + 8], orig[HA_HB_MAX_LEN + 8];
	struct ha_heartbeat out;
	char why[160];
	(void)state;

	size_t n = encode_sample(orig, &k);
#define FRESH() memcpy(buf, orig, sizeof(buf))
	FRESH();
	assert_int_equal(ha_hb_decode(buf, 50, &k, &out, why, sizeof(why)), HA_WIRE_TRUNCATED);
	assert_string_equal(why, "50 octets, less than a header and MAC (96)");
	assert_int_equal(ha_hb_decode(buf, n - 1, &k, &out, why, sizeof(why)), HA_WIRE_TRUNCATED);
	assert_int_equal(ha_hb_decode(buf, n + 1, &k, &out, why, sizeof(why)), HA_WIRE_BAD_LENGTH);
	buf[0] = 'X';
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_BAD_MAGIC);
	FRESH();
	buf[4] = 2;
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_BAD_VERSION);
	assert_string_equal(why, "version 2, this node speaks 1");
	FRESH();
	buf[5] = HA_MSG_SYNC;
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_BAD_TYPE);
	FRESH();
	ib_put_be16(buf + 6, 20);
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_BAD_LENGTH);
	FRESH();
	assert_int_equal(ha_hb_decode(buf, n, &other, &out, why, sizeof(why)), HA_WIRE_BAD_MAC);
	/* a key that is a prefix of the right one is a different key */
	struct ha_key prefix = key_of("correct horse battery stapl");
	assert_int_equal(ha_hb_decode(buf, n, &prefix, &out, why, sizeof(why)), HA_WIRE_BAD_MAC);

	/* authentic but impossible values: malformed, each with its message */
	memset(buf + 16, 0, 8);
	ha_wire_seal(buf, n, &k);
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_string_equal(why, "boot id 0");
	FRESH();
	memset(buf + 32, 'a', 32); /* name without its NUL */
	ha_wire_seal(buf, n, &k);
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_MALFORMED);
	FRESH();
	assert_int_equal(resealed(buf, n, &k, 96, 64, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_string_equal(why, "path id 64, at most 63");
	FRESH();
	assert_int_equal(resealed(buf, n, &k, 98, 3, why, sizeof(why)), HA_WIRE_BAD_LENGTH);
	FRESH();
	assert_int_equal(resealed(buf, n, &k, 104, 0, why, sizeof(why)), HA_WIRE_MALFORMED);
	FRESH();
	assert_int_equal(resealed(buf, n, &k, 105, 4, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_non_null(strstr(why, "unknown state 4"));
	FRESH();
	assert_int_equal(resealed(buf, n, &k, 106, HA_GF_WANT | HA_GF_YIELD, why, sizeof(why)),
			 HA_WIRE_MALFORMED);
	FRESH();
	memcpy(buf + 108, buf + 100, 4); /* second group with the first's id */
	ha_wire_seal(buf, n, &k);
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_non_null(strstr(why, "twice"));
	/* unknown flag bits and reserved octets are a later version's: ignored */
	FRESH();
	assert_int_equal(resealed(buf, n, &k, 106, 0x80 | HA_GF_PREEMPT, why, sizeof(why)),
			 HA_WIRE_OK);
	assert_int_equal(resealed(buf, n, &k, 107, 0xff, why, sizeof(why)), HA_WIRE_OK);
#undef FRESH
}

/* Every single-bit change anywhere in the message is refused. */
static void heartbeat_bit_flips(void **state)
{
	struct ha_key k = key_of((const char *)secret);
	uint8_t buf[HA_HB_MAX_LEN];
	struct ha_heartbeat out;
	(void)state;

	size_t n = encode_sample(buf, &k);
	for (size_t bit = 0; bit < n * 8; bit++) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(ha_hb_decode(buf, n, &k, &out, NULL, 0), HA_WIRE_OK);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	assert_int_equal(ha_hb_decode(buf, n, &k, &out, NULL, 0), HA_WIRE_OK);
}

/* RFC 4231 test case 2 (a key shorter than the block) and 6 (longer than the block):
 * the keyed init path ha_key_set uses computes standard HMAC-SHA256. */
static void hmac_is_rfc4231(void **state)
{
	static const uint8_t tc2[32] = { 0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
					 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
					 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83,
					 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43 };
	static const uint8_t tc6[32] = { 0x60, 0xe4, 0x31, 0x59, 0x1e, 0xe0, 0xb6, 0x7f,
					 0x0d, 0x8a, 0x26, 0xaa, 0xcb, 0xf5, 0xb7, 0x7f,
					 0x8e, 0x0b, 0xc6, 0x21, 0x37, 0x28, 0xc5, 0x14,
					 0x05, 0x46, 0x04, 0x0f, 0x0e, 0xe3, 0x7f, 0x54 };
	const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
	uint8_t k6[131], mac[32];
	struct ha_key k = key_of("Jefe");
	(void)state;

	crypto_auth_hmacsha256_state st = k.base;
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)"what do ya want for nothing?", 28);
	crypto_auth_hmacsha256_final(&st, mac);
	assert_memory_equal(mac, tc2, 32);

	memset(k6, 0xaa, sizeof(k6));
	assert_int_equal(ha_key_set(&k, k6, sizeof(k6)), 0);
	st = k.base;
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)d6, strlen(d6));
	crypto_auth_hmacsha256_final(&st, mac);
	assert_memory_equal(mac, tc6, 32);
	assert_int_equal(ha_key_set(&k, k6, HA_KEY_MAX_LEN + 1), -EINVAL);
}

static void replay_window(void **state)
{
	struct ha_replay_window w = { 0 };
	(void)state;

	assert_int_equal(ha_replay_check(&w, 1), HA_WIRE_OK);
	ha_replay_commit(&w, 1);
	assert_int_equal(ha_replay_check(&w, 1), HA_WIRE_REPLAY);
	ha_replay_commit(&w, 5); /* 2..4 still acceptable: reordered across paths */
	assert_int_equal(ha_replay_check(&w, 3), HA_WIRE_OK);
	ha_replay_commit(&w, 3);
	assert_int_equal(ha_replay_check(&w, 3), HA_WIRE_REPLAY);
	assert_int_equal(ha_replay_check(&w, 4), HA_WIRE_OK);
	ha_replay_commit(&w, 100);
	assert_int_equal(ha_replay_check(&w, 36), HA_WIRE_STALE); /* 64 behind */
	assert_int_equal(ha_replay_check(&w, 37), HA_WIRE_OK);
	assert_int_equal(ha_replay_check(&w, 100), HA_WIRE_REPLAY);
	ha_replay_commit(&w, 1000); /* a jump past the window forgets it all */
	assert_int_equal(ha_replay_check(&w, 999), HA_WIRE_OK);
	assert_int_equal(ha_replay_check(&w, 1000), HA_WIRE_REPLAY);
}

static void ids(void **state)
{
	(void)state;
	/* FNV-1a reference values */
	assert_int_equal(ha_group_id(""), 0x811c9dc5u);
	assert_int_equal(ha_group_id("a"), 0xe40c292cu);
	assert_true(ha_node_id("a") == 0xaf63dc4c8601ec8cull);
	assert_true(ha_boot_id_new() != 0);
	assert_true(ha_boot_id_new() != ha_boot_id_new());
	assert_string_equal(ha_wire_err_name(HA_WIRE_BAD_MAC), "bad MAC");
	assert_string_equal(ha_state_name(HA_STATE_MASTER), "MASTER");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void key_file(void **state)
{
	char dir[] = "/tmp/test_ha_key.XXXXXX", path[64], why[256];
	struct ha_key from_file, direct = key_of("0123456789abcdef-secret");
	uint8_t a[HA_HB_MAX_LEN], b[HA_HB_MAX_LEN];
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	write_file(path, "0123456789abcdef-secret\n", 0600);
	assert_int_equal(ha_key_load_file(&from_file, path, why, sizeof(why)), 0);
	/* the trailing newline is not part of the key */
	size_t n = encode_sample(a, &from_file);
	assert_int_equal(encode_sample(b, &direct), n);
	assert_memory_equal(a, b, n);

	write_file(path, "0123456789abcdef-secret\n", 0644);
	assert_int_equal(ha_key_load_file(&from_file, path, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "gives group or others access"));
	write_file(path, "0123456789abcdef-secret\n", 0640);
	assert_int_equal(ha_key_load_file(&from_file, path, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "mode 0640"));
	write_file(path, "short\n", 0600);
	assert_int_equal(ha_key_load_file(&from_file, path, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "too short"));
	unlink(path);
	assert_int_equal(ha_key_load_file(&from_file, path, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "cannot open"));
	rmdir(dir);
}

/* ---- sync ---- */

struct sink {
	uint8_t msgs[16][2048];
	size_t lens[16];
	unsigned n;
};

static int collect(void *arg, const uint8_t *msg, size_t len)
{
	struct sink *s = arg;
	assert_true(s->n < 16 && len <= sizeof(s->msgs[0]));
	memcpy(s->msgs[s->n], msg, len);
	s->lens[s->n++] = len;
	return 0;
}

static void make_records(struct ha_sync_rec *r, unsigned n)
{
	memset(r, 0, n * sizeof(*r));
	for (unsigned i = 0; i < n; i++) {
		switch (i % 3) {
		case 0:
			r[i].type = HA_SYNC_NEIGH;
			assert_int_equal(
			    ip_addr_parse(i % 2 ? "10.0.0.7" : "fd00::7", &r[i].u.neigh.addr), 0);
			r[i].u.neigh.addr.bytes[3] = (uint8_t)i;
			snprintf(r[i].u.neigh.link, HA_NAME_LEN, "ib%u", i);
			r[i].u.neigh.lladdr_len = 20;
			memset(r[i].u.neigh.lladdr, (int)i, 20);
			r[i].u.neigh.state = HA_NEIGH_REACHABLE;
			break;
		case 1:
			r[i].type = HA_SYNC_PATH;
			r[i].del = true;
			r[i].u.path.dgid[0] = 0xfe;
			r[i].u.path.dgid[15] = (uint8_t)i;
			r[i].u.path.dlid = (uint16_t)(i + 1);
			r[i].u.path.sl = 3;
			r[i].u.path.mtu = 4;
			r[i].u.path.rate = 16;
			break;
		case 2:
			r[i].type = HA_SYNC_ROUTE;
			assert_int_equal(
			    ip_prefix_parse("10.1.0.0/16", false, &r[i].u.route.prefix), 0);
			r[i].u.route.metric = i;
			r[i].u.route.n_nexthops = (uint8_t)(i % HA_SYNC_MAX_NEXTHOPS);
			for (unsigned h = 0; h < r[i].u.route.n_nexthops; h++) {
				ip_addr_parse("10.0.0.1", &r[i].u.route.nexthops[h]);
				r[i].u.route.nexthops[h].bytes[3] = (uint8_t)h;
			}
			break;
		}
	}
}

static void sync_round_trip(void **state)
{
	static struct ha_sync_rec in[40];
	static struct sink s;
	struct ha_key k = key_of((const char *)secret);
	struct ha_sync_msg m;
	struct ha_sync_rec r;
	uint64_t seq = 0;
	char why[160];
	(void)state;

	make_records(in, 40);
	memset(&s, 0, sizeof(s));
	int parts = ha_sync_encode(&origin, &seq, &k, 7, true, in, 40, 1400, collect, &s);
	assert_true(parts > 1);
	assert_int_equal((unsigned)parts, s.n);
	assert_int_equal(seq, (uint64_t)parts);
	unsigned got = 0;
	for (unsigned i = 0; i < s.n; i++) {
		assert_true(s.lens[i] <= 1400);
		assert_int_equal(ha_sync_decode(s.msgs[i], s.lens[i], &k, &m, why, sizeof(why)),
				 HA_WIRE_OK);
		assert_int_equal(m.batch, 7);
		assert_int_equal(m.part, i);
		assert_true(m.full);
		assert_int_equal(m.last, i == s.n - 1);
		assert_int_equal(m.hdr.seq, i + 1);
		while (ha_sync_next(&m, &r)) {
			assert_int_equal(r.type, in[got].type);
			assert_int_equal(r.del, in[got].del);
			assert_memory_equal(&r.u, &in[got].u, sizeof(r.u));
			got++;
		}
	}
	assert_int_equal(got, 40);

	/* nothing to send is still one (empty, LAST) message */
	memset(&s, 0, sizeof(s));
	assert_int_equal(ha_sync_encode(&origin, &seq, &k, 8, false, NULL, 0, 1400, collect, &s),
			 1);
	assert_int_equal(ha_sync_decode(s.msgs[0], s.lens[0], &k, &m, why, sizeof(why)),
			 HA_WIRE_OK);
	assert_true(m.last);
	assert_false(ha_sync_next(&m, &r));

	/* a record that cannot be encoded stops the batch before anything is sent */
	in[4].u.path.sl = 16;
	memset(&s, 0, sizeof(s));
	assert_int_equal(ha_sync_encode(&origin, &seq, &k, 9, false, in, 40, 1400, collect, &s),
			 -EINVAL);
	assert_int_equal(s.n, 0);
	assert_int_equal(ha_sync_encode(&origin, &seq, &k, 9, false, in, 3, 100, collect, &s),
			 -EINVAL);
}

/* A transmit side like the gateway's: a pool of buffers that come back only between
 * turns (when the workers have sent them). */
struct tx_pool {
	unsigned free, cap;
	struct ha_key k;
	uint64_t next_seq; /* the receiver: every message, in order, decodes */
	unsigned recs, bad;
};

static int pool_send(void *ctx, const uint8_t *msg, size_t len)
{
	struct tx_pool *p = ctx;
	struct ha_sync_msg m;
	struct ha_sync_rec r;
	char why[160];

	if (!p->free)
		return -ENOBUFS;
	p->free--;
	if (ha_sync_decode(msg, len, &p->k, &m, why, sizeof(why)) != HA_WIRE_OK ||
	    m.hdr.seq != ++p->next_seq)
		p->bad++;
	while (ha_sync_next(&m, &r))
		p->recs++;
	return 0;
}

static int path_down_send(void *ctx, const uint8_t *msg, size_t len)
{
	(void)ctx, (void)msg, (void)len;
	return -ENETDOWN;
}

/* A dump of 3000 records is over 256 datagrams: sent through a pool of 256 at 32 a
 * turn, it all arrives, in order, with nothing lost; a new dump replaces what is left;
 * a send that fails for good drops the message instead of blocking the queue. */
static void sync_queue_paced(void **state)
{
	static struct ha_sync_rec in[3000];
	struct ha_sync_queue q = { 0 };
	struct tx_pool p = { .free = 256, .cap = 256, .k = key_of((const char *)secret) };
	uint64_t seq = 0;
	unsigned sent = 0, failed = 0, turns = 0, left;
	int parts;
	(void)state;

	make_records(in, 40);
	for (unsigned i = 40; i < 3000; i++)
		in[i] = in[i % 40];
	parts = ha_sync_encode(&origin, &seq, &p.k, 1, true, in, 3000, 400, ha_sync_queue_push, &q);
	assert_true(parts > 256);
	assert_int_equal(q.n, (unsigned)parts);
	do {
		left = ha_sync_queue_drain(&q, 32, pool_send, &p, &sent, &failed);
		turns++;
		if (turns % 4 == 0)
			p.free = p.cap; /* the workers gave the buffers back */
	} while (left && turns < 1000);
	assert_int_equal(left, 0);
	assert_int_equal(sent, (unsigned)parts);
	assert_int_equal(failed, 0);
	assert_int_equal(p.bad, 0);
	assert_int_equal(p.recs, 3000);
	assert_true(turns >= (unsigned)parts / 32);

	/* A new dump while one is half sent: the rest of the old one goes. */
	p.free = 10;
	assert_true(ha_sync_encode(&origin, &seq, &p.k, 2, true, in, 300, 400, ha_sync_queue_push,
				   &q) > 10);
	assert_true(ha_sync_queue_drain(&q, 32, pool_send, &p, &sent, &failed) > 0);
	ha_sync_queue_clear(&q);
	assert_int_equal(q.n - q.head, 0);
	/* Failing for good: dropped, counted, the queue empties. */
	parts = ha_sync_encode(&origin, &seq, &p.k, 3, true, in, 20, 400, ha_sync_queue_push, &q);
	assert_true(parts > 1);
	assert_int_equal(ha_sync_queue_drain(&q, 32, path_down_send, NULL, &sent, &failed), 0);
	assert_int_equal(failed, (unsigned)parts);
	ha_sync_queue_free(&q);
}

static void sync_refusals(void **state)
{
	static struct sink s;
	struct ha_sync_rec in[3];
	struct ha_key k = key_of((const char *)secret);
	struct ha_sync_msg m;
	uint64_t seq = 0;
	uint8_t buf[2048];
	char why[160];
	(void)state;

	make_records(in, 3); /* neighbour (fd00::), path, route (10.1.0.0/16, 2 hops) */
	memset(&s, 0, sizeof(s));
	assert_int_equal(ha_sync_encode(&origin, &seq, &k, 1, false, in, 3, 1400, collect, &s), 1);
	size_t n = s.lens[0];
	size_t rec0 = HA_WIRE_HDR_LEN + HA_SYNC_BODY_LEN;
	size_t rec1 = rec0 + HA_SYNC_REC_HDR_LEN + HA_SYNC_NEIGH_LEN;
	size_t rec2 = rec1 + HA_SYNC_REC_HDR_LEN + HA_SYNC_PATH_LEN;
#define EDIT(off, val)                                                                             \
	do {                                                                                       \
		memcpy(buf, s.msgs[0], n);                                                         \
		buf[off] = (val);                                                                  \
		ha_wire_seal(buf, n, &k);                                                          \
	} while (0)
	memcpy(buf, s.msgs[0], n);
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_OK);
	assert_int_equal(ha_sync_decode(buf, n - 3, &k, &m, why, sizeof(why)), HA_WIRE_TRUNCATED);
	buf[rec1 + 5] ^= 1;
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_BAD_MAC);
	EDIT(rec0, 9); /* unknown record type */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_string_equal(why, "record type 9 unknown");
	EDIT(HA_WIRE_HDR_LEN + 9, 4); /* one record more than there is */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_BAD_LENGTH);
	EDIT(HA_WIRE_HDR_LEN + 9, 2); /* one record less: octets left over */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_BAD_LENGTH);
	EDIT(rec1 + 3, 0xff); /* a body longer than the message */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_BAD_LENGTH);
	EDIT(rec1 + HA_SYNC_REC_HDR_LEN + 16, 0xc0); /* multicast DLID 0xc0.. */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_non_null(strstr(why, "not a unicast LID"));
	EDIT(rec2 + HA_SYNC_REC_HDR_LEN + 1, 8); /* 10.1.0.0/8: host bits set */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_MALFORMED);
	assert_string_equal(why, "route: prefix has host bits");
	EDIT(rec2 + HA_SYNC_REC_HDR_LEN + 8 + 5, 1); /* octets past an IPv4 prefix */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_MALFORMED);
	EDIT(rec0 + HA_SYNC_REC_HDR_LEN + 1, 0); /* neighbour state 0 */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_MALFORMED);
	EDIT(rec0 + HA_SYNC_REC_HDR_LEN + 2, 21); /* link-layer address of 21 octets */
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_MALFORMED);
	EDIT(5, HA_MSG_HEARTBEAT);
	assert_int_equal(ha_sync_decode(buf, n, &k, &m, why, sizeof(why)), HA_WIRE_BAD_TYPE);
#undef EDIT
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(heartbeat_round_trip),
		cmocka_unit_test(heartbeat_refusals),
		cmocka_unit_test(heartbeat_bit_flips),
		cmocka_unit_test(hmac_is_rfc4231),
		cmocka_unit_test(replay_window),
		cmocka_unit_test(ids),
		cmocka_unit_test(key_file),
		cmocka_unit_test(sync_round_trip),
		cmocka_unit_test(sync_refusals),
		cmocka_unit_test(sync_queue_paced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
