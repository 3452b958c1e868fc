/*
 * The failover pair's messages between the two gateways: the common header, the
 * heartbeat, the HMAC that authenticates both, and the anti-replay window.
 * docs/failover.md draws the layouts; the offsets below are the contract.
 *
 * Every message (network byte order):
 *    0 magic "IBHA"(4)  4 version(1)  5 type(1)  6 length(2, whole message, MAC included)
 *    8 node_id(8)  16 boot_id(8)  24 seq(8)  32 name(32, NUL padded)
 *   64 body ...  length-32 HMAC-SHA256(32) over octets [0, length-32)
 * Heartbeat body (type 1):
 *   64 echo_boot(8)  72 echo_seq(8)  80 hears(8)  88 interval_ms(4)  92 dead_ms(4)
 *   96 path_id(1)  97 flags(1)  98 n_groups(1)  99 reserved(1)
 *  100 n_groups x { group_id(4) priority(1) state(1) flags(1) reserved(1) }
 *
 * node_id is stable across restarts (the election's tiebreak); boot_id is random per
 * start; seq counts the sender's messages of one type within one boot. Every copy of a
 * heartbeat (one per path) has its own seq, so a copy is never taken for a replay of
 * another. echo_boot is the receiver's boot id as the sender last heard it: a message
 * that echoes our current boot id was made after we started, which is what defeats
 * replays recorded before (see ha_fsm.h). echo_seq is the highest heartbeat seq the
 * sender has accepted from that boot: it tells the receiver which of its own
 * announcements the sender had seen when it wrote the message (like a TCP ack).
 *
 * Decoding checks, in this order, and stops at the first failure with its own code:
 * size, magic, version, type, the length field, the MAC, then each field's value.
 * Nothing of the content is believed before the MAC is checked; the version is checked
 * before it because another version may authenticate differently.
 */
#ifndef IBGW_HA_HA_WIRE_H
#define IBGW_HA_HA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#define HA_WIRE_MAGIC    0x49424841u /* "IBHA" */
#define HA_WIRE_VERSION  1
#define HA_WIRE_HDR_LEN  64
#define HA_WIRE_MAC_LEN  32 /* HMAC-SHA256, not truncated */
#define HA_NAME_LEN      32 /* node name on the wire, NUL padded; at most 31 characters */
#define HA_MAX_GROUPS    64 /* as failover.groups in the config */
#define HA_MAX_PATHS     64 /* as failover.paths: the hears bitmap is 64 bits */
#define HA_HB_BODY_LEN   36 /* fixed part of the heartbeat body */
#define HA_HB_GROUP_LEN  8
#define HA_HB_MIN_LEN    (HA_WIRE_HDR_LEN + HA_HB_BODY_LEN + HA_WIRE_MAC_LEN)
#define HA_HB_MAX_LEN    (HA_HB_MIN_LEN + HA_MAX_GROUPS * HA_HB_GROUP_LEN)
#define HA_REPLAY_WINDOW 64 /* sequence numbers remembered behind the highest seen */
#define HA_RETIRED_BOOTS 4  /* earlier boot ids of the peer refused as stale */
#define HA_KEY_MIN_LEN   16 /* shorter key files are refused: guessable */
#define HA_KEY_MAX_LEN   1024

enum ha_msg_type {
	HA_MSG_HEARTBEAT = 1,
	HA_MSG_SYNC = 2,
};

/* A group's state, as the FSM keeps it and the heartbeat carries it. */
enum ha_state {
	HA_STATE_INIT = 0,   /* started, waiting one dead interval to hear the peer */
	HA_STATE_BACKUP = 1, /* the peer (or nobody) holds the group */
	HA_STATE_MASTER = 2, /* this node holds the group's addresses */
	HA_STATE_FAULT = 3,  /* cannot serve: no local path up, or a tracked path down */
};
#define HA_STATE_COUNT 4

/* Per-group flags in a heartbeat. */
#define HA_GF_PREEMPT 0x01 /* the sender preempts a lower-priority master */
#define HA_GF_WANT    0x02 /* the sender (BACKUP) asks the master to hand the group over */
#define HA_GF_YIELD   0x04 /* the sender (BACKUP) has just handed the group over: take it */
#define HA_GF_MANUAL  0x08 /* WANT or YIELD comes from a manual switchover, not preemption */
#define HA_GF_KNOWN   (HA_GF_PREEMPT | HA_GF_WANT | HA_GF_YIELD | HA_GF_MANUAL)

enum ha_wire_err {
	HA_WIRE_OK = 0,
	HA_WIRE_TRUNCATED,     /* shorter than a header, or than its length field says */
	HA_WIRE_BAD_MAGIC,     /* not "IBHA": not ours at all */
	HA_WIRE_BAD_VERSION,   /* another protocol version */
	HA_WIRE_BAD_TYPE,      /* not the message type expected here */
	HA_WIRE_BAD_LENGTH,    /* length field out of range, or octets after the message */
	HA_WIRE_BAD_MAC,       /* HMAC does not match: wrong key, or altered on the way */
	HA_WIRE_MALFORMED,     /* authentic, but a field holds an impossible value */
	HA_WIRE_REPLAY,        /* sequence number already seen from this boot */
	HA_WIRE_STALE,         /* older than the replay window, or from a retired boot */
	HA_WIRE_SELF,          /* our own message came back */
	HA_WIRE_BOOT_CONFLICT, /* a new boot id while the peer's current boot is alive */
	HA_WIRE_ERR_COUNT
};

/* "bad MAC" etc.: short names for logs and counters. */
const char *ha_wire_err_name(enum ha_wire_err e);
const char *ha_state_name(enum ha_state s);

/* The shared secret. The HMAC's inner and outer states are computed once at set-up
 * and copied per message. An empty key (no key_file) still yields a MAC, which then
 * only detects corruption: it authenticates nothing. */
struct ha_key {
	crypto_auth_hmacsha256_state base;
	bool empty;
};

/* Set up from raw key octets (any length up to HA_KEY_MAX_LEN). Returns 0 or -EINVAL. */
int ha_key_set(struct ha_key *key, const uint8_t *secret, size_t len);
/* Read a key file: its whole contents less trailing white space are the secret.
 * Refuses (with a message in why) what cannot be opened or read, is not a regular file,
 * gives its group or others any access (mode & 077: -EPERM), is owned by neither root
 * nor this process's effective user (-EPERM), or holds a key longer than
 * HA_KEY_MAX_LEN or shorter than HA_KEY_MIN_LEN octets. Returns 0 or -errno. */
int ha_key_load_file(struct ha_key *key, const char *path, char *why, size_t why_len);
void ha_key_clear(struct ha_key *key);

/* The header fields a sender puts in each message. */
struct ha_origin {
	uint64_t node_id;
	uint64_t boot_id;       /* never 0 */
	char name[HA_NAME_LEN]; /* NUL-terminated */
};

struct ha_wire_hdr {
	uint8_t version;
	uint8_t type;
	uint16_t length;
	uint64_t node_id, boot_id, seq;
	char name[HA_NAME_LEN]; /* NUL-terminated, printable ASCII */
};

struct ha_hb_group {
	uint32_t id; /* ha_group_id(name) */
	uint8_t priority;
	uint8_t state; /* enum ha_state */
	uint8_t flags; /* HA_GF_* */
};

struct ha_heartbeat {
	struct ha_wire_hdr hdr;
	uint64_t echo_boot; /* the receiver's boot id as the sender heard it; 0: none */
	uint64_t echo_seq;  /* highest heartbeat seq accepted from echo_boot; 0: none */
	uint64_t hears;     /* bit p: the sender hears the receiver on path p */
	uint32_t interval_ms, dead_ms;
	uint8_t path_id; /* the path this copy was sent on */
	uint8_t flags;   /* reserved, 0 */
	uint8_t n_groups;
	struct ha_hb_group groups[HA_MAX_GROUPS];
};

/* A group's id on the wire: FNV-1a (32 bits) of its name; both boxes name groups alike. */
uint32_t ha_group_id(const char *name);
/* A node id from the gateway's name (FNV-1a, 64 bits): stable across restarts. */
uint64_t ha_node_id(const char *name);
/* A random non-zero boot id (libsodium's randombytes). */
uint64_t ha_boot_id_new(void);

/* Common header: write it (the length is filled in by ha_wire_seal), read it. */
void ha_wire_put_hdr(uint8_t *buf, const struct ha_origin *o, enum ha_msg_type type, uint64_t seq);
/* Finish a message of len octets (MAC included): write the length and the MAC. */
void ha_wire_seal(uint8_t *buf, size_t len, const struct ha_key *key);
/* Check the framing (size, magic, version, type, length between min_len and max_len,
 * nothing after it) and the MAC, and read the header. why (if not NULL) gets a precise
 * message on failure. */
enum ha_wire_err ha_wire_open(const uint8_t *buf, size_t len, const struct ha_key *key,
			      enum ha_msg_type type, size_t min_len, size_t max_len,
			      struct ha_wire_hdr *hdr, char *why, size_t why_len);

/* Encode a heartbeat (hb->hdr is ignored: o and seq make it). Returns the length, or 0
 * if cap is too small or a field is out of range (n_groups, path_id). */
size_t ha_hb_encode(uint8_t *buf, size_t cap, const struct ha_origin *o, uint64_t seq,
		    const struct ha_heartbeat *hb, const struct ha_key *key);
enum ha_wire_err ha_hb_decode(const uint8_t *buf, size_t len, const struct ha_key *key,
			      struct ha_heartbeat *out, char *why, size_t why_len);

/*
 * Anti-replay per peer and message type (RFC 4303 section 3.4.3's sliding window): a
 * sequence number is accepted once, and only if it is newer than the highest seen less
 * the window. The peer's boot id is tracked alongside: when it changes, the old one is
 * retired and refused from then on, so a recording of an earlier run cannot be played.
 */
struct ha_replay_window {
	uint64_t highest; /* 0: nothing seen */
	uint64_t seen;    /* bit i: highest - i was seen */
};

/* Returns HA_WIRE_OK, HA_WIRE_REPLAY or HA_WIRE_STALE; does not change the window. */
enum ha_wire_err ha_replay_check(const struct ha_replay_window *w, uint64_t seq);
/* Record seq as seen (after ha_replay_check said OK and the message was accepted). */
void ha_replay_commit(struct ha_replay_window *w, uint64_t seq);

#endif
