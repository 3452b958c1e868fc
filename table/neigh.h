/*
 * neigh: a link's neighbour table (IPv4 and IPv6 -> link address), with the Linux
 * kernel's states and timers, for both sides of the gateway: the link address is a MAC
 * on Ethernet and, on IPoIB, the 20-octet hardware address plus what sending needs (the
 * address handle of the path, the remote UD QPN, the path's DLID/SL/MTU, and a slot for
 * the connected-mode connection).
 *
 * States (net/core/neighbour.c's NUD_*):
 *   INCOMPLETE  created by a packet that needs it; multicast solicitations (ARP request
 *               to the broadcast group, NS to the solicited-node group) every retrans_ms,
 *               mcast_probes of them; then FAILED. Packets wait in a bounded queue.
 *   REACHABLE   confirmed (a solicited reply, or a confirmation hint from the data path)
 *               less than reachable_time ago. reachable_time is drawn uniformly from
 *               [base/2, 3*base/2] and drawn again every 300 s, as Linux does.
 *   STALE       not confirmed lately, or learned unsolicited; still used for sending.
 *               A use moves it to DELAY.
 *   DELAY       used while STALE: wait delay_probe_ms for a confirmation from upper
 *               layers before probing.
 *   PROBE       unicast solicitations every retrans_ms, ucast_probes of them; then
 *               FAILED.
 *   FAILED      resolution failed; queued packets are dropped (counted); removed by
 *               the next garbage collection.
 *   PERMANENT   configured; never changes, never collected.
 *
 * Defaults (Linux's, arp_tbl/nd_tbl): base_reachable 30 s, retrans 1 s, delay_first_probe
 * 5 s, ucast_probes 3, mcast_probes 3, gc_staletime 60 s, gc_interval 30 s, gc_thresh1/2/3
 * 128/512/1024, and an unresolved queue of 3 packets (Linux's historical unres_qlen,
 * the number docs/dataplane.md settles on; overflow drops the oldest and counts it).
 *
 * Garbage collection: every gc_interval, when more than gc_thresh1 entries exist, FAILED
 * entries and STALE ones unused for gc_staletime are removed. Creating an entry when
 * gc_thresh2 are in use (and no forced run in the last 5 s) or gc_thresh3 forces a run.
 *
 * Limits under attack (RFC 6583: a scan of a large on-link prefix makes one INCOMPLETE
 * entry per address): at most max_unresolved entries (default gc_thresh3 / 4) are
 * INCOMPLETE at once; a new resolution beyond that evicts the oldest INCOMPLETE entry
 * (its parked packets dropped; counted "unres_evictions"), so resolutions in flight can
 * never take the whole table and a new one always gets its turn. When the table is still
 * at gc_thresh3 after the forced run, a newcomer evicts, in this order, the oldest
 * INCOMPLETE entry, then the STALE entry unused longest ("stale_evictions"); REACHABLE,
 * DELAY, PROBE and PERMANENT entries and any entry used within the reachable time are
 * never evicted by a newcomer: then the newcomer is refused (-ENOBUFS, "table_full").
 * Whoever learns from the wire asks neigh_on_link first and passes NEIGH_F_OFF_LINK
 * instead of NEIGH_F_CREATE for senders outside the link's prefixes: they create no
 * entry, counted "learn_refused" where one would have been made.
 *
 * Threads: the control thread is the only writer (every function below not marked
 * "data path"). Workers look entries up without locks (RCU: entries, link addresses and
 * the flat lookup index are published with release stores; a removed entry, a replaced
 * link address and a replaced index are freed through cfg.defer, which must wait for a grace period -- liburcu QSBR's call_rcu
 * in the gateway; NULL frees at once, for single-threaded users such as the IB host role
 * and the unit tests). Workers leave "used" and "confirmed" hints in atomics; the
 * control thread acts on them in neigh_tick().
 */
#ifndef IBGW_TABLE_NEIGH_H
#define IBGW_TABLE_NEIGH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct neigh_table;
struct ip_prefix;

enum neigh_state {
	NEIGH_NONE = 0,
	NEIGH_INCOMPLETE,
	NEIGH_REACHABLE,
	NEIGH_STALE,
	NEIGH_DELAY,
	NEIGH_PROBE,
	NEIGH_FAILED,
	NEIGH_PERMANENT,
	NEIGH_STATE_COUNT
};
const char *neigh_state_name(enum neigh_state s);

#define NEIGH_LLADDR_MAX 20

/*
 * A link address as the data path sends with it. Immutable once published: a change
 * (new address, path rebuilt, connection up or down) publishes a new copy.
 */
struct neigh_link {
	uint8_t len;                    /* 6 (MAC) or 20 (IPoIB hardware address) */
	uint8_t addr[NEIGH_LLADDR_MAX]; /* IPoIB: flags, QPN, GID as on the wire */
	bool usable;                    /* can be sent to now (IPoIB: ah set) */
	/* IPoIB */
	void *ah;     /* struct ibp_ah * of the path */
	uint32_t qpn; /* remote UD QPN (from addr) */
	uint16_t dlid;
	uint8_t sl, ib_mtu; /* path SL and MTU code */
	bool grh;           /* off-subnet */
	uint32_t mtu;       /* IP MTU to this neighbour: UD MTU, or CM's */
	void *conn;         /* connected mode: the RC connection; NULL: UD */
};

/* Plain snapshot of one entry, for `gwctl show neighbours` and tests. */
struct neigh_info {
	int family;       /* AF_INET / AF_INET6 */
	uint8_t addr[16]; /* IPv4 in the first 4 octets (network order) */
	enum neigh_state state;
	struct neigh_link link; /* len 0 when not known */
	bool has_link;
	uint64_t age_ms;       /* since the last state or address change */
	uint64_t confirmed_ms; /* since the last confirmation (UINT64_MAX: never) */
	uint64_t used_ms;      /* since the last use (UINT64_MAX: never) */
	unsigned queued;       /* packets waiting for resolution */
	unsigned probes;
	uint64_t queue_drops; /* packets of this entry dropped: overflow or failure */
};

struct neigh_params {
	uint32_t base_reachable_ms;                  /* 30000 */
	uint32_t retrans_ms;                         /* 1000 */
	uint32_t delay_probe_ms;                     /* 5000 */
	uint32_t gc_stale_ms;                        /* 60000 */
	uint32_t gc_interval_ms;                     /* 30000 */
	unsigned ucast_probes;                       /* 3 */
	unsigned mcast_probes;                       /* 3 */
	unsigned unres_qlen;                         /* 3 */
	unsigned gc_thresh1, gc_thresh2, gc_thresh3; /* 128, 512, 1024 */
	unsigned max_unresolved;                     /* INCOMPLETE at most; gc_thresh3 / 4 */
};
/* Fill zero fields with the defaults above (max_unresolved after gc_thresh3). */
void neigh_params_defaults(struct neigh_params *p);

struct neigh_entry; /* opaque; valid to a worker inside its RCU read-side section */

/* What the table asks of the link that owns it (control thread). */
struct neigh_ops {
	/* Send a solicitation for the entry's address: to the multicast/broadcast group
	 * when ll is NULL, else unicast to ll (PROBE). */
	void (*solicit)(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll);
	/* A queued packet may go now, to ll. The callee owns pkt afterwards. */
	void (*xmit)(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll,
		     void *pkt);
	/* A queued packet is dropped (overflow, failure, entry removed). */
	void (*drop)(void *ctx, void *pkt);
	/* Optional: the entry leaves the table (GC, delete, flush; not neigh_table_free)
	 * with its last published link (NULL if none). Called before the entry is
	 * unlinked; must not add or delete entries. Connected mode tears the peer's
	 * connection down from here (cm_neigh_expired). */
	void (*release)(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll);
};

typedef void (*neigh_defer_fn)(void *ctx, void (*fn)(void *arg), void *arg);

struct neigh_config {
	struct neigh_params params;
	const struct neigh_ops *ops;
	void *ops_ctx;
	neigh_defer_fn defer; /* NULL: free at once (no concurrent readers) */
	void *defer_ctx;
	uint64_t (*now_ms)(void *ctx); /* NULL: evloop_now_ms */
	void *now_ctx;
	uint32_t seed; /* hash seed and reachable-time jitter; 0: from the clock */
};

struct neigh_stats {
	unsigned entries;
	uint64_t allocs, destroys, lookups_miss;
	uint64_t res_failed;     /* INCOMPLETE or PROBE -> FAILED */
	uint64_t unres_discards; /* queued packets dropped (overflow or failure) */
	uint64_t queued;         /* packets ever queued */
	uint64_t mcast_solicits, ucast_solicits;
	uint64_t periodic_gc_runs, forced_gc_runs, table_full;
	uint64_t lladdr_changes;
	unsigned unresolved;      /* INCOMPLETE entries now */
	uint64_t unres_evictions; /* INCOMPLETE entries evicted for a newer one */
	uint64_t stale_evictions; /* STALE entries evicted for a newcomer (table full) */
	uint64_t learn_refused;   /* senders outside the link's prefixes not learned */
};

int neigh_table_new(const struct neigh_config *cfg, struct neigh_table **out);
/* Drops queued packets (ops->drop) and frees everything (no readers may remain). */
void neigh_table_free(struct neigh_table *t);

/* ---- data path (any thread, lock free) --------------------------------------- */
/* The entry for (family, addr) or NULL. addr: 4 or 16 octets, network order. */
struct neigh_entry *neigh_lookup(const struct neigh_table *t, int family, const uint8_t *addr);
/*
 * The forwarder's lookup: the link address to send to (family, addr) with, or NULL when
 * there is no entry, no usable link address, or a state that does not send (as below).
 * Leaves the use hint (now: ms of the table's clock), as neigh_entry_used would. Reads
 * one slot of the table's flat index (key, state, link, hint on one cache line) and the
 * link address, not the entry.
 * slot_hint (NULL: none) is the caller's cache of where the key sits in the index,
 * kept beside the address (a FIB next hop's neigh_hint), 0 when unknown: a hinted slot
 * that still holds this key is used without the hash and the probe; any other value
 * (a slot died, the index was rebuilt, the hint is another table's) costs the usual
 * lookup, which then rewrites the hint (relaxed atomics: workers share it).
 */
const struct neigh_link *neigh_lookup_link(const struct neigh_table *t, int family,
					   const uint8_t *addr, uint64_t now_ms,
					   uint32_t *slot_hint);
/* neigh_lookup_link for a sender that needs only a MAC (an Ethernet egress): true and
 * the MAC in mac where neigh_lookup_link would return a link, read from the index slot
 * (a copy published with the link), not from the link address: one line, not two. */
bool neigh_lookup_mac(const struct neigh_table *t, int family, const uint8_t *addr, uint64_t now_ms,
		      uint32_t *slot_hint, uint8_t mac[6]);
enum neigh_state neigh_entry_state(const struct neigh_entry *e);
/* Cache warming for a burst (fwd_fast_burst), one step over every packet before
 * the next: the index slot where (family, addr) starts its probe (or the hinted one, as
 * neigh_lookup_link's slot_hint), then the link address in that slot. Each starts the
 * load of what the next step reads; no result is used (a key that probed further or a
 * stale hint only leaves its line cold). */
struct neigh_slot;
const struct neigh_slot *neigh_warm_slot(const struct neigh_table *t, int family,
					 const uint8_t *addr, const uint32_t *slot_hint);
void neigh_warm_link(const struct neigh_slot *s);
/* The published link address (NULL when none): send when ->usable and the state is
 * REACHABLE, STALE, DELAY, PROBE or PERMANENT. */
const struct neigh_link *neigh_entry_link(const struct neigh_entry *e);
/* Hints: the entry was used to send / its reachability was confirmed (e.g. a TCP ACK
 * that made progress). now in ms of the table's clock. */
void neigh_entry_used(struct neigh_entry *e, uint64_t now_ms);
void neigh_entry_confirmed(struct neigh_entry *e, uint64_t now_ms);
int neigh_entry_family(const struct neigh_entry *e);
const uint8_t *neigh_entry_addr(const struct neigh_entry *e);

/* ---- control thread ------------------------------------------------------------ */
/* A packet for (family, addr) found no usable entry: create the entry (INCOMPLETE,
 * first solicitation) if needed and queue pkt (NULL: just resolve). Returns 0 (queued,
 * or handed to ops->xmit at once when the entry turned out usable), -ENOBUFS (table
 * full; pkt dropped through ops->drop), -EHOSTUNREACH (entry FAILED within the last
 * retrans interval; pkt dropped). Overflow of the queue drops its oldest packet. */
int neigh_resolve(struct neigh_table *t, int family, const uint8_t *addr, void *pkt);

enum {
	NEIGH_F_CREATE = 1,    /* create the entry when absent */
	NEIGH_F_SOLICITED = 2, /* a reply to our solicitation: REACHABLE */
	NEIGH_F_OVERRIDE = 4,  /* a different address replaces the known one */
	NEIGH_F_ADMIN = 8,     /* configured: PERMANENT (or delete with neigh_delete) */
	NEIGH_F_OFF_LINK = 16, /* a sender outside the link's prefixes (neigh_on_link said
				* no): an entry it would create is not, and counts
				* learn_refused; a known one is updated as usual */
};
/* What the wire said about (family, addr): its link address ll (NULL: none given).
 * Follows Linux's neigh_update rules: an unsolicited address creates a STALE entry
 * (with NEIGH_F_CREATE); a solicited one makes it REACHABLE; a different address
 * without OVERRIDE leaves the address and only demotes REACHABLE to STALE; PERMANENT
 * entries change only with NEIGH_F_ADMIN. Queued packets go out once the published
 * link is usable. Returns the entry, or NULL (absent without CREATE, or table full). */
struct neigh_entry *neigh_update(struct neigh_table *t, int family, const uint8_t *addr,
				 const struct neigh_link *ll, unsigned flags);
/* Publish a new link address for e without a state change (the path's AH was built or
 * rebuilt, a connection went up or down). Flushes the queue when usable. */
void neigh_set_link(struct neigh_table *t, struct neigh_entry *e, const struct neigh_link *ll);
void neigh_delete(struct neigh_table *t, struct neigh_entry *e);
/* Run due timers; call at least once a second (STALE entries in use move to DELAY
 * here). Returns ms until the next deadline (at most 1000). */
uint64_t neigh_tick(struct neigh_table *t);
/* Delete every entry (link down): queued packets dropped. */
void neigh_flush(struct neigh_table *t);

/* Learning guard: whether a sender seen on the link may create an entry: inside one
 * of the n prefixes (the link's addresses with their lengths, prefixes that live on
 * the link), or IPv6 link-local (fe80::/10). Pure; p may be NULL when n is 0. */
bool neigh_on_link(const struct ip_prefix *p, unsigned n, int family, const uint8_t *addr);

/* Control-thread iteration; fn returns non-zero to stop. */
void neigh_foreach(const struct neigh_table *t, int (*fn)(void *arg, const struct neigh_info *ni),
		   void *arg);
/* The same in pieces, for a reply streamed across calls: the buckets from *bucket on,
 * each bucket whole; before each bucket after the first, stop(arg) may end the piece.
 * Returns true when the walk ended early (stop, or fn non-zero: its bucket counts as
 * walked), with *bucket where the next piece starts; false at the table's end. The
 * buckets never move (the table is sized once, at gc_thresh3), so an entry present for
 * the whole walk is seen exactly once; one added or deleted between pieces may or may
 * not be. */
bool neigh_walk_from(const struct neigh_table *t, unsigned *bucket, bool (*stop)(void *arg),
		     int (*fn)(void *arg, const struct neigh_info *ni), void *arg);
/* For control code that walks entries to act on them (rebuild AHs): fn may call
 * neigh_set_link on the entry, nothing that adds or deletes. */
void neigh_foreach_entry(struct neigh_table *t,
			 void (*fn)(void *arg, struct neigh_table *t, struct neigh_entry *e),
			 void *arg);
void neigh_info_of(const struct neigh_table *t, const struct neigh_entry *e,
		   struct neigh_info *out);
void neigh_table_stats(const struct neigh_table *t, struct neigh_stats *out);
const struct neigh_params *neigh_table_params(const struct neigh_table *t);
uint32_t neigh_reachable_time(const struct neigh_table *t);

#endif
