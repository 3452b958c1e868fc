/*
 * mgroup: the IP multicast groups that have members on one interface (an IPoIB link or
 * an Ethernet interface), as a multicast router keeps them from IGMP (RFC 2236, 3376)
 * and MLD (RFC 2710, 3810), prefix mg_; and the interface's querier state. Time is
 * given (ms), nothing is sent here: the caller sends what the functions say is due.
 *
 * Membership (per group; the router forwards whole groups, no source filtering):
 *   a report (v1/v2 report, v3 record with effect JOIN) creates or refreshes the group:
 *     it expires after the Group Membership Interval, robustness * query interval +
 *     query response interval (RFC 3376 8.4; 260 s at the defaults);
 *   a leave (v2 leave, MLDv1 done, a record with effect LEAVE) lowers the group's
 *     expiry to the Last Member Query Time, robustness * last member interval (8.8: 2 s)
 *     when it was later, and asks the caller for that many group-specific queries
 *     (every last member interval) -- as querier only; a report meanwhile restores it;
 *   mg_expire removes the groups whose time has come, one callback each.
 * Querier (RFC 3376 6.6.2, RFC 3810 7.6.2): the interface queries (startup: robustness
 *   general queries a quarter query interval apart, then one every query interval)
 *   unless a query from a lower address was heard less than the Other Querier Present
 *   Interval ago (robustness * query interval + query response interval / 2).
 *
 * Per group it also holds the forwarding counters and a token bucket (mg_rate_ok).
 * At most MG_MAX_GROUPS groups per table: a report for one more is refused (counted).
 *
 * Threads: one table belongs to the control thread (the slow path that receives the
 * reports and forwards); nothing here locks.
 */
#ifndef IBGW_TABLE_MGROUP_H
#define IBGW_TABLE_MGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/addr.h"

#define MG_MAX_GROUPS 256

struct mg_params {
	uint8_t robustness;         /* 0: 2 */
	uint32_t query_interval_ms; /* 0: 125000 */
	uint32_t query_resp_ms;     /* 0: 10000 */
	uint32_t last_member_ms;    /* 0: 1000 */
};

struct mg_group {
	struct ip_addr addr;
	uint64_t expires_ms;
	uint64_t since_ms;
	uint8_t specific_queries; /* group-specific queries still to send (a leave) */
	uint64_t next_specific_ms;
	/* forwarding, into this interface */
	uint64_t packets, bytes, rate_limited;
	uint64_t rl_tat_ns; /* token bucket (GCRA theoretical arrival time) */
	void *user;         /* the caller's (e.g. whether it joined the group's MGID) */
};

struct mg_stats {
	uint64_t reports, leaves, queries_heard, expired, refused_full;
};

struct mg_table;

/* NULL when out of memory. */
struct mg_table *mg_new(const struct mg_params *p);
void mg_free(struct mg_table *t);
void mg_set_params(struct mg_table *t, const struct mg_params *p);
/* The effective values (defaults applied). */
void mg_params_get(const struct mg_table *t, struct mg_params *out);
uint64_t mg_membership_ms(const struct mg_table *t);

/* A member reported the group. Returns the group, NULL when the table is full. *created
 * says whether it is new (the caller starts forwarding / joins). */
struct mg_group *mg_report(struct mg_table *t, const struct ip_addr *g, uint64_t now_ms,
			   bool *created);
/* A member left. querier: this interface queries (then the group is kept for the last
 * member query time and specific queries are due; otherwise nothing changes, as RFC
 * 3376 6.4 has non-queriers ignore leaves). Returns the group or NULL if unknown. */
struct mg_group *mg_leave(struct mg_table *t, const struct ip_addr *g, uint64_t now_ms,
			  bool querier);
struct mg_group *mg_find(struct mg_table *t, const struct ip_addr *g);
unsigned mg_count(const struct mg_table *t);
/* Remove the expired groups: gone(ctx, group) for each before it is freed. */
void mg_expire(struct mg_table *t, uint64_t now_ms,
	       void (*gone)(void *ctx, struct mg_table *t, struct mg_group *g), void *ctx);
/* Remove one group (no callback). Returns whether it was there. */
bool mg_remove(struct mg_table *t, const struct ip_addr *g);
/* Remove every group (the interface stops or multicast is turned off). */
void mg_flush(struct mg_table *t, void (*gone)(void *ctx, struct mg_table *t, struct mg_group *g),
	      void *ctx);
/* fn returns non-zero to stop. */
void mg_foreach(struct mg_table *t, int (*fn)(void *ctx, struct mg_group *g), void *ctx);

/* Querier. mg_query_heard: a query from src (same family as ours) was heard; ours the
 * interface's own address of that family (NULL: none, the other is lower). */
void mg_start(struct mg_table *t, uint64_t now_ms);
void mg_query_heard(struct mg_table *t, int family, const uint8_t *src, const uint8_t *ours,
		    uint64_t now_ms);
bool mg_is_querier(const struct mg_table *t, int family, uint64_t now_ms);
/* A general query is due for family now: returns true and schedules the next. */
bool mg_general_due(struct mg_table *t, int family, uint64_t now_ms);
/* A group-specific query is due for g now: returns true and schedules the next. */
bool mg_specific_due(struct mg_table *t, struct mg_group *g, uint64_t now_ms);
/* The earliest time anything here is due (queries, expiries); UINT64_MAX: none. */
uint64_t mg_next_due(const struct mg_table *t);

/* Token bucket of pps packets per second (burst: pps / 10 + 1 packets); 0: no limit.
 * Returns false (and counts it in g->rate_limited) when over. */
bool mg_rate_ok(struct mg_group *g, uint32_t pps, uint64_t now_ns);

void mg_stats(const struct mg_table *t, struct mg_stats *out);

#endif
