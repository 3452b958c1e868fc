/*
 * table/mgroup: membership created and refreshed by reports, expiring after the Group
 * Membership Interval (RFC 3376 8.4) and no sooner; a leave to the querier shortens it
 * to the Last Member Query Time with that many group-specific queries, a report
 * restoring it, a non-querier ignoring it; the querier's startup and periodic general
 * queries and its suppression by a lower address for the Other Querier Present Interval;
 * a full table; the per-group token bucket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "table/mgroup.h"

static struct ip_addr g4(uint8_t last)
{
	struct ip_addr a = { .family = AF_INET, .bytes = { 239, 1, 2, last } };

	return a;
}

static unsigned n_gone;
static void gone(void *ctx, struct mg_table *t, struct mg_group *g)
{
	(void)ctx;
	(void)t;
	(void)g;
	n_gone++;
}

static void test_membership(void **state)
{
	struct mg_table *t = mg_new(NULL);
	struct ip_addr a = g4(3), b = { .family = AF_INET6, .bytes = { 0xff, 0x0e, [15] = 3 } };
	struct mg_group *m;
	bool created;

	(void)state;
	assert_non_null(t);
	assert_int_equal(mg_membership_ms(t), 260000);
	m = mg_report(t, &a, 1000, &created);
	assert_non_null(m);
	assert_true(created);
	assert_non_null(mg_report(t, &b, 1000, &created));
	assert_true(created);
	assert_ptr_equal(mg_report(t, &a, 5000, &created), m);
	assert_false(created);
	assert_int_equal(mg_count(t), 2);
	/* b (reported at 1000) goes at 261000; a (refreshed at 5000) at 265000 */
	n_gone = 0;
	mg_expire(t, 260999, gone, NULL);
	assert_int_equal(n_gone, 0);
	assert_int_equal(mg_next_due(t), 261000);
	mg_expire(t, 261000, gone, NULL);
	assert_int_equal(n_gone, 1);
	assert_null(mg_find(t, &b));
	assert_ptr_equal(mg_find(t, &a), m);
	mg_expire(t, 265000, gone, NULL);
	assert_int_equal(mg_count(t), 0);
	mg_free(t);
}

static void test_leave(void **state)
{
	struct mg_table *t = mg_new(NULL);
	struct ip_addr a = g4(3);
	struct mg_group *m;
	bool created;

	(void)state;
	m = mg_report(t, &a, 0, &created);
	/* not the querier: a leave changes nothing */
	assert_ptr_equal(mg_leave(t, &a, 100, false), m);
	assert_int_equal(m->expires_ms, 260000);
	assert_false(mg_specific_due(t, m, 100));
	/* querier: 2 s left, two specific queries 1 s apart */
	mg_leave(t, &a, 100, true);
	assert_int_equal(m->expires_ms, 2100);
	assert_true(mg_specific_due(t, m, 100));
	assert_false(mg_specific_due(t, m, 1099));
	assert_true(mg_specific_due(t, m, 1100));
	assert_false(mg_specific_due(t, m, 5000));
	/* a report meanwhile keeps it */
	mg_report(t, &a, 1500, &created);
	assert_false(created);
	mg_expire(t, 2100, NULL, NULL);
	assert_int_equal(mg_count(t), 1);
	/* another leave, no report: gone after 2 s */
	mg_leave(t, &a, 3000, true);
	mg_expire(t, 4999, NULL, NULL);
	assert_int_equal(mg_count(t), 1);
	mg_expire(t, 5000, NULL, NULL);
	assert_int_equal(mg_count(t), 0);
	assert_null(mg_leave(t, &a, 6000, true));
	mg_report(t, &a, 7000, &created);
	assert_true(mg_remove(t, &a));
	assert_false(mg_remove(t, &a));
	assert_int_equal(mg_count(t), 0);
	mg_free(t);
}

static void test_querier(void **state)
{
	struct mg_params p = { .robustness = 2, .query_interval_ms = 8000, .query_resp_ms = 2000 };
	struct mg_table *t = mg_new(&p);
	static const uint8_t ours[4] = { 10, 20, 0, 5 }, lower[4] = { 10, 20, 0, 1 },
			     higher[4] = { 10, 20, 0, 9 };

	(void)state;
	assert_false(mg_general_due(t, AF_INET, 0)); /* not started */
	mg_start(t, 1000);
	assert_true(mg_is_querier(t, AF_INET, 1000));
	/* startup: two a quarter interval apart, then every interval */
	assert_true(mg_general_due(t, AF_INET, 1000));
	assert_false(mg_general_due(t, AF_INET, 2999));
	assert_true(mg_general_due(t, AF_INET, 3000));
	assert_false(mg_general_due(t, AF_INET, 4999));
	assert_true(mg_general_due(t, AF_INET, 5000));
	assert_false(mg_general_due(t, AF_INET, 12999));
	assert_true(mg_general_due(t, AF_INET, 13000));
	/* a higher address does not silence us; a lower one does, for 2 * 8 + 1 s */
	mg_query_heard(t, AF_INET, higher, ours, 14000);
	assert_true(mg_is_querier(t, AF_INET, 14000));
	mg_query_heard(t, AF_INET, lower, ours, 14000);
	assert_false(mg_is_querier(t, AF_INET, 14000));
	assert_true(mg_is_querier(t, AF_INET6, 14000));
	assert_false(mg_general_due(t, AF_INET, 21000)); /* due, but silenced */
	assert_false(mg_is_querier(t, AF_INET, 30999));
	assert_true(mg_is_querier(t, AF_INET, 31000));
	assert_true(mg_general_due(t, AF_INET, 31000));
	mg_free(t);
}

static void test_full_and_rate(void **state)
{
	struct mg_table *t = mg_new(NULL);
	struct mg_group *m = NULL;
	struct mg_stats st;
	bool created;
	unsigned ok = 0;

	(void)state;
	for (unsigned i = 0; i < MG_MAX_GROUPS; i++) {
		struct ip_addr a = { .family = AF_INET,
				     .bytes = { 239, 9, (uint8_t)(i >> 8), (uint8_t)i } };

		m = mg_report(t, &a, 0, &created);
		assert_non_null(m);
	}
	{
		struct ip_addr a = g4(1);

		assert_null(mg_report(t, &a, 0, &created));
	}
	mg_stats(t, &st);
	assert_int_equal(st.refused_full, 1);
	/* 100 pps: a burst of 11 at once, then one per 10 ms */
	for (int i = 0; i < 50; i++)
		ok += mg_rate_ok(m, 100, 1000000000ull);
	assert_int_equal(ok, 11);
	assert_int_equal(m->rate_limited, 39);
	assert_false(mg_rate_ok(m, 100, 1000000000ull + 9999999));
	assert_true(mg_rate_ok(m, 100, 1000000000ull + 10000000));
	assert_true(mg_rate_ok(m, 0, 0));
	n_gone = 0;
	mg_flush(t, gone, NULL);
	assert_int_equal(n_gone, MG_MAX_GROUPS);
	mg_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_membership),
		cmocka_unit_test(test_leave),
		cmocka_unit_test(test_querier),
		cmocka_unit_test(test_full_and_rate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
