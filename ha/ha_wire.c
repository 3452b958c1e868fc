/*
 * Failover messages: header, HMAC, heartbeat codec, anti-replay window.
 *
 * The MAC is libsodium's HMAC-SHA256 (RFC 2104 / FIPS 198-1): a standard construction,
 * a constant-time comparison (sodium_memcmp), no process-wide configuration to load,
 * and keys of any length.
 */
#include "ha/ha_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/ib_bytes.h"

static const char *const err_names[HA_WIRE_ERR_COUNT] = {
	[HA_WIRE_OK] = "ok",
	[HA_WIRE_TRUNCATED] = "truncated",
	[HA_WIRE_BAD_MAGIC] = "bad magic",
	[HA_WIRE_BAD_VERSION] = "unsupported version",
	[HA_WIRE_BAD_TYPE] = "unexpected type",
	[HA_WIRE_BAD_LENGTH] = "bad length",
	[HA_WIRE_BAD_MAC] = "bad MAC",
	[HA_WIRE_MALFORMED] = "malformed",
	[HA_WIRE_REPLAY] = "replayed",
	[HA_WIRE_STALE] = "stale",
	[HA_WIRE_SELF] = "own message",
	[HA_WIRE_BOOT_CONFLICT] = "boot id conflict",
};

static const char *const state_names[HA_STATE_COUNT] = {
	[HA_STATE_INIT] = "INIT",
	[HA_STATE_BACKUP] = "BACKUP",
	[HA_STATE_MASTER] = "MASTER",
	[HA_STATE_FAULT] = "FAULT",
};

const char *ha_wire_err_name(enum ha_wire_err e)
{
	return (unsigned)e < HA_WIRE_ERR_COUNT ? err_names[e] : "unknown error";
}

const char *ha_state_name(enum ha_state s)
{
	return (unsigned)s < HA_STATE_COUNT ? state_names[s] : "?";
}

/* Fill why (when given) and return err: one place so every failure says why. */
__attribute__((format(printf, 4, 5))) static enum ha_wire_err
fail(enum ha_wire_err err, char *why, size_t why_len, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* ---- key ---- */

int ha_key_set(struct ha_key *key, const uint8_t *secret, size_t len)
{
	if (len > HA_KEY_MAX_LEN || (len && !secret))
		return -EINVAL;
	/* Idempotent and thread-safe; needed before randombytes, harmless for HMAC. */
	if (sodium_init() < 0)
		return -EINVAL;
	crypto_auth_hmacsha256_init(&key->base, len ? secret : (const uint8_t *)"", len);
	key->empty = len == 0;
	return 0;
}

void ha_key_clear(struct ha_key *key)
{
	sodium_memzero(key, sizeof(*key));
}

/* Read at most cap octets of an already open file; -EFBIG if there is more. */
static int read_all(int fd, uint8_t *buf, size_t cap, size_t *out)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap) {
			uint8_t extra;
			if (read(fd, &extra, 1) > 0)
				return -EFBIG;
			break;
		}
	}
	*out = n;
	return 0;
}

int ha_key_load_file(struct ha_key *key, const char *path, char *why, size_t why_len)
{
	uint8_t buf[HA_KEY_MAX_LEN];
	struct stat st;
	size_t n = 0;
	int err;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		err = -errno;
		fail(0, why, why_len, "%s: cannot open: %s", path, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		fail(0, why, why_len, "%s: cannot stat: %s", path, strerror(-err));
	} else if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		fail(0, why, why_len, "%s: not a regular file", path);
	} else if (st.st_mode & 077) {
		/* A secret others on the box can read (or replace) authenticates nothing. */
		err = -EPERM;
		fail(0, why, why_len,
		     "%s: mode %04o gives group or others access; make it 0600 (chmod 600 %s)",
		     path, (unsigned)(st.st_mode & 07777), path);
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		/* Whoever owns it can change it, and with it the pair's mastership. */
		err = -EPERM;
		fail(0, why, why_len,
		     "%s: owned by uid %u, neither root nor this process's user (uid %u); "
		     "chown it",
		     path, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if ((err = read_all(fd, buf, sizeof(buf), &n)) < 0) {
		fail(0, why, why_len, "%s: %s", path,
		     err == -EFBIG ? "key longer than 1024 octets" : strerror(-err));
	} else {
		/* "echo secret > file" adds a newline the other box's file may lack. */
		while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			     buf[n - 1] == '\t'))
			n--;
		if (n < HA_KEY_MIN_LEN) {
			err = -EINVAL;
			fail(0, why, why_len,
			     "%s: key of %zu octets is too short (at least %d; 32 random octets "
			     "or 64 hex digits are usual)",
			     path, n, HA_KEY_MIN_LEN);
		} else {
			err = ha_key_set(key, buf, n);
		}
	}
	sodium_memzero(buf, sizeof(buf));
	close(fd);
	return err;
}

/* ---- ids ---- */

uint32_t ha_group_id(const char *name)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

uint64_t ha_node_id(const char *name)
{
	uint64_t h = 14695981039346656037ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

uint64_t ha_boot_id_new(void)
{
	uint64_t id = 0;

	if (sodium_init() < 0)
		return 1; /* cannot happen on Linux (getrandom); never 0 */
	while (id == 0)
		randombytes_buf(&id, sizeof(id));
	return id;
}

/* ---- header and MAC ---- */

void ha_wire_put_hdr(uint8_t *buf, const struct ha_origin *o, enum ha_msg_type type, uint64_t seq)
{
	ib_put_be32(buf, HA_WIRE_MAGIC);
	buf[4] = HA_WIRE_VERSION;
	buf[5] = (uint8_t)type;
	ib_put_be16(buf + 6, 0);
	ib_put_be64(buf + 8, o->node_id);
	ib_put_be64(buf + 16, o->boot_id);
	ib_put_be64(buf + 24, seq);
	memset(buf + 32, 0, HA_NAME_LEN);
	memcpy(buf + 32, o->name, strnlen(o->name, HA_NAME_LEN - 1));
}

static void mac_compute(const struct ha_key *key, const uint8_t *buf, size_t len,
			uint8_t mac[HA_WIRE_MAC_LEN])
{
	crypto_auth_hmacsha256_state st = key->base;

	crypto_auth_hmacsha256_update(&st, buf, len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
}

void ha_wire_seal(uint8_t *buf, size_t len, const struct ha_key *key)
{
	ib_put_be16(buf + 6, (uint16_t)len);
	mac_compute(key, buf, len - HA_WIRE_MAC_LEN, buf + len - HA_WIRE_MAC_LEN);
}

/* The name must be NUL-terminated inside its field and printable: it goes to logs. */
static bool name_valid(const uint8_t *p)
{
	size_t n = strnlen((const char *)p, HA_NAME_LEN);

	if (n == HA_NAME_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x21 || p[i] > 0x7e)
			return false;
	for (size_t i = n; i < HA_NAME_LEN; i++)
		if (p[i])
			return false;
	return true;
}

enum ha_wire_err ha_wire_open(const uint8_t *buf, size_t len, const struct ha_key *key,
			      enum ha_msg_type type, size_t min_len, size_t max_len,
			      struct ha_wire_hdr *hdr, char *why, size_t why_len)
{
	uint8_t mac[HA_WIRE_MAC_LEN];

	if (len < HA_WIRE_HDR_LEN + HA_WIRE_MAC_LEN)
		return fail(HA_WIRE_TRUNCATED, why, why_len,
			    "%zu octets, less than a header and MAC (%d)", len,
			    HA_WIRE_HDR_LEN + HA_WIRE_MAC_LEN);
	if (ib_get_be32(buf) != HA_WIRE_MAGIC)
		return fail(HA_WIRE_BAD_MAGIC, why, why_len, "magic 0x%08x, expected 0x%08x",
			    ib_get_be32(buf), HA_WIRE_MAGIC);
	if (buf[4] != HA_WIRE_VERSION)
		return fail(HA_WIRE_BAD_VERSION, why, why_len, "version %u, this node speaks %u",
			    buf[4], HA_WIRE_VERSION);
	if (buf[5] != type)
		return fail(HA_WIRE_BAD_TYPE, why, why_len, "type %u, expected %u", buf[5],
			    (unsigned)type);
	size_t mlen = ib_get_be16(buf + 6);
	if (mlen < min_len || mlen > max_len)
		return fail(HA_WIRE_BAD_LENGTH, why, why_len,
			    "length field %zu outside %zu..%zu for type %u", mlen, min_len, max_len,
			    (unsigned)type);
	if (len < mlen)
		return fail(HA_WIRE_TRUNCATED, why, why_len, "%zu octets, length field says %zu",
			    len, mlen);
	if (len > mlen)
		return fail(HA_WIRE_BAD_LENGTH, why, why_len,
			    "%zu octets after the %zu the length field says", len - mlen, mlen);
	mac_compute(key, buf, mlen - HA_WIRE_MAC_LEN, mac);
	if (sodium_memcmp(mac, buf + mlen - HA_WIRE_MAC_LEN, HA_WIRE_MAC_LEN) != 0)
		return fail(HA_WIRE_BAD_MAC, why, why_len,
			    "HMAC-SHA256 mismatch (wrong key, or altered on the way)");

	hdr->version = buf[4];
	hdr->type = buf[5];
	hdr->length = (uint16_t)mlen;
	hdr->node_id = ib_get_be64(buf + 8);
	hdr->boot_id = ib_get_be64(buf + 16);
	hdr->seq = ib_get_be64(buf + 24);
	if (hdr->boot_id == 0)
		return fail(HA_WIRE_MALFORMED, why, why_len, "boot id 0");
	if (hdr->seq == 0)
		return fail(HA_WIRE_MALFORMED, why, why_len, "sequence number 0");
	if (!name_valid(buf + 32))
		return fail(HA_WIRE_MALFORMED, why, why_len,
			    "node name not printable or not NUL-terminated");
	memcpy(hdr->name, buf + 32, HA_NAME_LEN);
	return HA_WIRE_OK;
}

/* ---- heartbeat ---- */

size_t ha_hb_encode(uint8_t *buf, size_t cap, const struct ha_origin *o, uint64_t seq,
		    const struct ha_heartbeat *hb, const struct ha_key *key)
{
	size_t len = HA_HB_MIN_LEN + (size_t)hb->n_groups * HA_HB_GROUP_LEN;

	if (hb->n_groups > HA_MAX_GROUPS || hb->path_id >= HA_MAX_PATHS || cap < len ||
	    o->boot_id == 0 || seq == 0)
		return 0;
	ha_wire_put_hdr(buf, o, HA_MSG_HEARTBEAT, seq);
	uint8_t *p = buf + HA_WIRE_HDR_LEN;
	ib_put_be64(p, hb->echo_boot);
	ib_put_be64(p + 8, hb->echo_seq);
	ib_put_be64(p + 16, hb->hears);
	ib_put_be32(p + 24, hb->interval_ms);
	ib_put_be32(p + 28, hb->dead_ms);
	p[32] = hb->path_id;
	p[33] = 0;
	p[34] = hb->n_groups;
	p[35] = 0;
	p += HA_HB_BODY_LEN;
	for (unsigned i = 0; i < hb->n_groups; i++, p += HA_HB_GROUP_LEN) {
		const struct ha_hb_group *g = &hb->groups[i];
		ib_put_be32(p, g->id);
		p[4] = g->priority;
		p[5] = g->state;
		p[6] = g->flags & HA_GF_KNOWN;
		p[7] = 0;
	}
	ha_wire_seal(buf, len, key);
	return len;
}

/* One group entry: values a sender of this version can produce. */
static enum ha_wire_err hb_group_decode(const uint8_t *p, unsigned i, struct ha_hb_group *g,
					char *why, size_t why_len)
{
	g->id = ib_get_be32(p);
	g->priority = p[4];
	g->state = p[5];
	/* Unknown flag bits are a later version's: ignored, like reserved octets. */
	g->flags = p[6] & HA_GF_KNOWN;
	if (g->priority == 0 || g->priority == 255)
		return fail(HA_WIRE_MALFORMED, why, why_len,
			    "group %u (id 0x%08x): priority %u outside 1..254", i, g->id,
			    g->priority);
	if (g->state >= HA_STATE_COUNT)
		return fail(HA_WIRE_MALFORMED, why, why_len,
			    "group %u (id 0x%08x): unknown state %u", i, g->id, g->state);
	if ((g->flags & HA_GF_WANT) && (g->flags & HA_GF_YIELD))
		return fail(HA_WIRE_MALFORMED, why, why_len,
			    "group %u (id 0x%08x): both WANT and YIELD set", i, g->id);
	return HA_WIRE_OK;
}

enum ha_wire_err ha_hb_decode(const uint8_t *buf, size_t len, const struct ha_key *key,
			      struct ha_heartbeat *out, char *why, size_t why_len)
{
	enum ha_wire_err e = ha_wire_open(buf, len, key, HA_MSG_HEARTBEAT, HA_HB_MIN_LEN,
					  HA_HB_MAX_LEN, &out->hdr, why, why_len);
	if (e != HA_WIRE_OK)
		return e;

	const uint8_t *p = buf + HA_WIRE_HDR_LEN;
	out->echo_boot = ib_get_be64(p);
	out->echo_seq = ib_get_be64(p + 8);
	out->hears = ib_get_be64(p + 16);
	out->interval_ms = ib_get_be32(p + 24);
	out->dead_ms = ib_get_be32(p + 28);
	out->path_id = p[32];
	out->flags = p[33];
	out->n_groups = p[34];
	if ((size_t)out->hdr.length != HA_HB_MIN_LEN + (size_t)out->n_groups * HA_HB_GROUP_LEN)
		return fail(HA_WIRE_BAD_LENGTH, why, why_len,
			    "length %u does not hold %u groups (%zu expected)", out->hdr.length,
			    out->n_groups, HA_HB_MIN_LEN + (size_t)out->n_groups * HA_HB_GROUP_LEN);
	if (out->path_id >= HA_MAX_PATHS)
		return fail(HA_WIRE_MALFORMED, why, why_len, "path id %u, at most %d", out->path_id,
			    HA_MAX_PATHS - 1);
	if (out->interval_ms == 0 || out->dead_ms < out->interval_ms)
		return fail(HA_WIRE_MALFORMED, why, why_len,
			    "timers interval %u ms, dead %u ms: need 0 < interval <= dead",
			    out->interval_ms, out->dead_ms);
	p += HA_HB_BODY_LEN;
	for (unsigned i = 0; i < out->n_groups; i++, p += HA_HB_GROUP_LEN) {
		e = hb_group_decode(p, i, &out->groups[i], why, why_len);
		if (e != HA_WIRE_OK)
			return e;
		for (unsigned j = 0; j < i; j++)
			if (out->groups[j].id == out->groups[i].id)
				return fail(HA_WIRE_MALFORMED, why, why_len,
					    "group id 0x%08x twice (entries %u and %u)",
					    out->groups[i].id, j, i);
	}
	return HA_WIRE_OK;
}

/* ---- anti-replay ---- */

enum ha_wire_err ha_replay_check(const struct ha_replay_window *w, uint64_t seq)
{
	if (seq > w->highest)
		return HA_WIRE_OK;
	uint64_t behind = w->highest - seq;
	if (behind >= HA_REPLAY_WINDOW)
		return HA_WIRE_STALE;
	return (w->seen >> behind) & 1 ? HA_WIRE_REPLAY : HA_WIRE_OK;
}

void ha_replay_commit(struct ha_replay_window *w, uint64_t seq)
{
	if (seq > w->highest) {
		uint64_t shift = seq - w->highest;
		w->seen = shift >= HA_REPLAY_WINDOW ? 0 : w->seen << shift;
		w->seen |= 1;
		w->highest = seq;
	} else {
		w->seen |= 1ull << (w->highest - seq);
	}
}
