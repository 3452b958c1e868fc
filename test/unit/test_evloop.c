/*
 * Event loop: timers fire in deadline order, periodic timers repeat, timers can be
 * stopped and freed from callbacks, fd handlers see readiness.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "lib/evloop.h"

struct record {
	char order[16];
	int n;
	int ticks;
	struct evtimer *stop_after;
};

static void mark(struct evloop *loop, struct evtimer *t, void *arg, char c)
{
	struct record *r = arg;
	(void)loop;
	(void)t;
	r->order[r->n++] = c;
}

static void on_a(struct evloop *l, struct evtimer *t, void *arg)
{
	mark(l, t, arg, 'a');
}

static void on_b(struct evloop *l, struct evtimer *t, void *arg)
{
	mark(l, t, arg, 'b');
}

static void on_c(struct evloop *l, struct evtimer *t, void *arg)
{
	mark(l, t, arg, 'c');
	evloop_stop(l);
}

static void timers_fire_in_deadline_order(void **state)
{
	struct evloop *loop;
	struct record r = { 0 };
	(void)state;

	assert_int_equal(evloop_new(&loop), 0);
	struct evtimer *c = evtimer_new(loop, on_c, &r);
	struct evtimer *a = evtimer_new(loop, on_a, &r);
	struct evtimer *b = evtimer_new(loop, on_b, &r);
	evtimer_start(c, 30, 0);
	evtimer_start(a, 1, 0);
	evtimer_start(b, 15, 0);
	assert_true(evtimer_pending(a));
	assert_int_equal(evloop_run(loop), 0);
	assert_string_equal(r.order, "abc");
	assert_false(evtimer_pending(a));
	evtimer_free(a);
	evtimer_free(b);
	evtimer_free(c);
	evloop_free(loop);
}

static void on_tick(struct evloop *l, struct evtimer *t, void *arg)
{
	struct record *r = arg;

	if (++r->ticks == 5) {
		evtimer_stop(t);
		evloop_stop(l);
	}
}

static void periodic_timer_repeats_until_stopped(void **state)
{
	struct evloop *loop;
	struct record r = { 0 };
	(void)state;

	assert_int_equal(evloop_new(&loop), 0);
	struct evtimer *t = evtimer_new(loop, on_tick, &r);
	uint64_t start = evloop_now_ms();
	evtimer_start(t, 2, 2);
	assert_int_equal(evloop_run(loop), 0);
	assert_int_equal(r.ticks, 5);
	assert_false(evtimer_pending(t));
	assert_true(evloop_now_ms() - start >= 8); /* 5 ticks 2 ms apart, first after 2 ms */
	evtimer_free(t);
	evloop_free(loop);
}

static void stopped_timer_does_not_fire(void **state)
{
	struct evloop *loop;
	struct record r = { 0 };
	(void)state;

	assert_int_equal(evloop_new(&loop), 0);
	struct evtimer *a = evtimer_new(loop, on_a, &r);
	struct evtimer *c = evtimer_new(loop, on_c, &r);
	evtimer_start(a, 5, 0);
	evtimer_start(c, 10, 0);
	evtimer_stop(a);
	assert_int_equal(evloop_run(loop), 0);
	assert_string_equal(r.order, "c");
	evtimer_free(a);
	evtimer_free(c);
	evloop_free(loop);
}

/* Many timers, restarted in a shuffled order: the heap keeps deadline order. */
static struct evtimer *many[200];
static int fired_order[200], n_fired;

static void on_many(struct evloop *l, struct evtimer *t, void *arg)
{
	(void)t;
	fired_order[n_fired++] = (int)(intptr_t)arg;
	if (n_fired == 200)
		evloop_stop(l);
}

static void heap_keeps_order_with_many_timers(void **state)
{
	struct evloop *loop;
	(void)state;

	assert_int_equal(evloop_new(&loop), 0);
	for (int i = 0; i < 200; i++)
		many[i] = evtimer_new(loop, on_many, (void *)(intptr_t)i);
	for (int i = 0; i < 200; i++) /* start far out, then restart nearer, shuffled */
		evtimer_start(many[(i * 37) % 200], 10000, 0);
	/* Buckets 30 ms apart: starting 200 timers (slow under TSan) must not reorder
	 * deadlines across buckets by the time it takes. */
	for (int i = 0; i < 200; i++) {
		int k = (i * 73) % 200;
		evtimer_start(many[k], (uint64_t)(k / 20) * 30, 0);
	}
	n_fired = 0;
	assert_int_equal(evloop_run(loop), 0);
	for (int i = 1; i < 200; i++)
		assert_true(fired_order[i - 1] / 20 <= fired_order[i] / 20);
	for (int i = 0; i < 200; i++)
		evtimer_free(many[i]);
	evloop_free(loop);
}

static void on_readable(struct evloop *l, int fd, uint32_t events, void *arg)
{
	char buf[8];

	assert_true(events & EPOLLIN);
	*(ssize_t *)arg = read(fd, buf, sizeof(buf));
	evloop_stop(l);
}

static void fd_handler_sees_data(void **state)
{
	struct evloop *loop;
	int p[2];
	ssize_t got = -1;
	(void)state;

	assert_int_equal(pipe(p), 0);
	assert_int_equal(evloop_new(&loop), 0);
	assert_int_equal(evloop_add_fd(loop, p[0], EPOLLIN, on_readable, &got), 0);
	assert_int_equal(evloop_add_fd(loop, p[0], EPOLLIN, on_readable, &got), -EEXIST);
	assert_int_equal(write(p[1], "hello", 5), 5);
	assert_int_equal(evloop_run(loop), 0);
	assert_int_equal(got, 5);
	evloop_del_fd(loop, p[0]);
	close(p[0]);
	close(p[1]);
	evloop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(timers_fire_in_deadline_order),
		cmocka_unit_test(periodic_timer_repeats_until_stopped),
		cmocka_unit_test(stopped_timer_does_not_fire),
		cmocka_unit_test(heap_keeps_order_with_many_timers),
		cmocka_unit_test(fd_handler_sees_data),
	};

	return cmocka_run_group_tests_name("evloop", tests, NULL, NULL);
}
