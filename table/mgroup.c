/*
 * mgroup: multicast group membership and querier state of one interface (see mgroup.h).
 *
 * Threads: the control thread of the table's owner.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "table/mgroup.h"

struct querier {
	uint64_t next_general; /* 0: not started */
	unsigned startup_left;
	uint64_t other_until; /* another querier heard: ours suppressed until then */
};

struct mg_table {
	struct mg_params p;
	struct mg_group *g[MG_MAX_GROUPS];
	unsigned n;
	struct querier q[2]; /* IPv4, IPv6 */
	struct mg_stats st;
};

static void apply_defaults(struct mg_params *p)
{
	if (!p->robustness)
		p->robustness = 2;
	if (!p->query_interval_ms)
		p->query_interval_ms = 125000;
	if (!p->query_resp_ms)
		p->query_resp_ms = 10000;
	if (!p->last_member_ms)
		p->last_member_ms = 1000;
}

struct mg_table *mg_new(const struct mg_params *p)
{
	struct mg_table *t = calloc(1, sizeof(*t));

	if (t)
		mg_set_params(t, p);
	return t;
}

void mg_free(struct mg_table *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->n; i++)
		free(t->g[i]);
	free(t);
}

void mg_set_params(struct mg_table *t, const struct mg_params *p)
{
	t->p = p ? *p : (struct mg_params){ 0 };
	apply_defaults(&t->p);
}

void mg_params_get(const struct mg_table *t, struct mg_params *out)
{
	*out = t->p;
}

uint64_t mg_membership_ms(const struct mg_table *t)
{
	return (uint64_t)t->p.robustness * t->p.query_interval_ms + t->p.query_resp_ms;
}

static unsigned alen(const struct ip_addr *a)
{
	return a->family == AF_INET ? 4 : 16;
}

static int find_index(const struct mg_table *t, const struct ip_addr *g)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->g[i]->addr.family == g->family &&
		    !memcmp(t->g[i]->addr.bytes, g->bytes, alen(g)))
			return (int)i;
	return -1;
}

struct mg_group *mg_find(struct mg_table *t, const struct ip_addr *g)
{
	int i = find_index(t, g);

	return i < 0 ? NULL : t->g[i];
}

unsigned mg_count(const struct mg_table *t)
{
	return t->n;
}

struct mg_group *mg_report(struct mg_table *t, const struct ip_addr *g, uint64_t now_ms,
			   bool *created)
{
	struct mg_group *m = mg_find(t, g);

	*created = false;
	t->st.reports++;
	if (!m) {
		if (t->n >= MG_MAX_GROUPS) {
			t->st.refused_full++;
			return NULL;
		}
		m = calloc(1, sizeof(*m));
		if (!m) {
			t->st.refused_full++;
			return NULL;
		}
		m->addr.family = g->family;
		memcpy(m->addr.bytes, g->bytes, alen(g));
		m->since_ms = now_ms;
		t->g[t->n++] = m;
		*created = true;
	}
	m->expires_ms = now_ms + mg_membership_ms(t);
	m->specific_queries = 0;
	return m;
}

struct mg_group *mg_leave(struct mg_table *t, const struct ip_addr *g, uint64_t now_ms,
			  bool querier)
{
	struct mg_group *m = mg_find(t, g);
	uint64_t lmqt;

	t->st.leaves++;
	if (!m || !querier)
		return m;
	lmqt = now_ms + (uint64_t)t->p.robustness * t->p.last_member_ms;
	if (m->expires_ms > lmqt)
		m->expires_ms = lmqt;
	m->specific_queries = t->p.robustness;
	m->next_specific_ms = now_ms;
	return m;
}

static void remove_at(struct mg_table *t, unsigned i,
		      void (*gone)(void *ctx, struct mg_table *t, struct mg_group *g), void *ctx)
{
	struct mg_group *m = t->g[i];

	t->g[i] = t->g[--t->n];
	if (gone)
		gone(ctx, t, m);
	free(m);
}

void mg_expire(struct mg_table *t, uint64_t now_ms,
	       void (*gone)(void *ctx, struct mg_table *t, struct mg_group *g), void *ctx)
{
	for (unsigned i = 0; i < t->n;) {
		if (t->g[i]->expires_ms <= now_ms) {
			t->st.expired++;
			remove_at(t, i, gone, ctx);
		} else {
			i++;
		}
	}
}

bool mg_remove(struct mg_table *t, const struct ip_addr *g)
{
	int i = find_index(t, g);

	if (i < 0)
		return false;
	remove_at(t, (unsigned)i, NULL, NULL);
	return true;
}

void mg_flush(struct mg_table *t, void (*gone)(void *ctx, struct mg_table *t, struct mg_group *g),
	      void *ctx)
{
	while (t->n)
		remove_at(t, t->n - 1, gone, ctx);
}

void mg_foreach(struct mg_table *t, int (*fn)(void *ctx, struct mg_group *g), void *ctx)
{
	for (unsigned i = 0; i < t->n; i++)
		if (fn(ctx, t->g[i]))
			return;
}

static struct querier *qof(struct mg_table *t, int family)
{
	return &t->q[family == AF_INET ? 0 : 1];
}

void mg_start(struct mg_table *t, uint64_t now_ms)
{
	for (int i = 0; i < 2; i++) {
		t->q[i].next_general = now_ms ? now_ms : 1;
		t->q[i].startup_left = t->p.robustness;
		t->q[i].other_until = 0;
	}
}

void mg_query_heard(struct mg_table *t, int family, const uint8_t *src, const uint8_t *ours,
		    uint64_t now_ms)
{
	struct querier *q = qof(t, family);

	t->st.queries_heard++;
	/* RFC 3376 6.6.2: the lowest address queries. */
	if (ours && memcmp(src, ours, family == AF_INET ? 4 : 16) >= 0)
		return;
	q->other_until =
	    now_ms + (uint64_t)t->p.robustness * t->p.query_interval_ms + t->p.query_resp_ms / 2;
}

bool mg_is_querier(const struct mg_table *t, int family, uint64_t now_ms)
{
	const struct querier *q = &t->q[family == AF_INET ? 0 : 1];

	return q->next_general && q->other_until <= now_ms;
}

bool mg_general_due(struct mg_table *t, int family, uint64_t now_ms)
{
	struct querier *q = qof(t, family);
	uint64_t iv = t->p.query_interval_ms;

	if (!q->next_general || q->next_general > now_ms)
		return false;
	if (q->startup_left) {
		q->startup_left--;
		iv /= 4;
	}
	q->next_general = now_ms + iv;
	return q->other_until <= now_ms;
}

bool mg_specific_due(struct mg_table *t, struct mg_group *g, uint64_t now_ms)
{
	if (!g->specific_queries || g->next_specific_ms > now_ms)
		return false;
	g->specific_queries--;
	g->next_specific_ms = now_ms + t->p.last_member_ms;
	return true;
}

uint64_t mg_next_due(const struct mg_table *t)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < 2; i++)
		if (t->q[i].next_general && t->q[i].next_general < next)
			next = t->q[i].next_general;
	for (unsigned i = 0; i < t->n; i++) {
		if (t->g[i]->expires_ms < next)
			next = t->g[i]->expires_ms;
		if (t->g[i]->specific_queries && t->g[i]->next_specific_ms < next)
			next = t->g[i]->next_specific_ms;
	}
	return next;
}

bool mg_rate_ok(struct mg_group *g, uint32_t pps, uint64_t now_ns)
{
	uint64_t t_ns, burst_ns;

	if (!pps)
		return true;
	t_ns = 1000000000ull / pps;
	burst_ns = t_ns * (pps / 10 + 1);
	if (g->rl_tat_ns < now_ns)
		g->rl_tat_ns = now_ns;
	if (g->rl_tat_ns + t_ns > now_ns + burst_ns) {
		g->rate_limited++;
		return false;
	}
	g->rl_tat_ns += t_ns;
	return true;
}

void mg_stats(const struct mg_table *t, struct mg_stats *out)
{
	*out = t->st;
}
