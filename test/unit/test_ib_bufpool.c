/*
 * The IB port's buffer pool (port/ib_bufpool.h), the verbs backend's: bad sizes
 * refused, the layout (page-aligned region, cache-line stride, cap, index, zeroed
 * memory), get order, exhaustion, put/get round trips and the puts it refuses, a
 * backend's larger descriptor, and the free count under two threads (run under ASan and TSan by make check). No root.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "port/ib_bufpool.h"

/* A backend's descriptor: the pool's head first, its own fields after. */
struct tbuf {
	struct ibp_pool_buf pb;
	uint64_t wr_id;
	void *qp;
};

enum {
	T_POSTED = IBP_POOL_POSTED,
	T_CQ
};

static void bad_sizes_are_refused(void **state)
{
	struct ibp_pool p;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 0, 2048, sizeof(struct tbuf)), -EINVAL);
	assert_int_equal(ibp_pool_init(&p, 16, 0, sizeof(struct tbuf)), -EINVAL);
	assert_int_equal(ibp_pool_init(&p, 16, (size_t)UINT32_MAX + 1, sizeof(struct tbuf)),
			 -EINVAL);
	assert_int_equal(ibp_pool_init(&p, UINT32_MAX / 2 + 1, 64, sizeof(struct tbuf)), -EINVAL);
	assert_int_equal(ibp_pool_init(&p, 16, 2048, sizeof(struct ibp_pool_buf) - 1), -EINVAL);
	/* A refused pool is as fini leaves it: empty, and fini is harmless. */
	assert_null(p.mem);
	assert_int_equal(p.n_bufs, 0);
	assert_null(ibp_pool_find(&p, &(struct ibp_buf){ .id = 0 }));
	ibp_pool_fini(&p);
	ibp_pool_fini(&p);
}

static void layout_alignment_and_sizes(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct ibp_pool p;
	struct tbuf *d;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 5, 100, sizeof(struct tbuf)), 0);
	assert_int_equal(p.n_bufs, 5);
	assert_int_equal(p.stride, 128); /* 100 rounded up to the cache line */
	assert_int_equal((uintptr_t)p.mem % page, 0);
	assert_int_equal(p.mem_len % page, 0);
	assert_true(p.mem_len >= 5 * 128);
	assert_int_equal(ibp_pool_n_free(&p), 5);
	d = ibp_pool_descs(&p);
	for (unsigned i = 0; i < 5; i++) {
		struct ibp_buf *b = &d[i].pb.pub;

		assert_ptr_equal(b->data, p.mem + (size_t)i * 128);
		assert_int_equal((uintptr_t)b->data % IBP_POOL_ALIGN, 0);
		assert_int_equal(b->cap, 100);
		assert_int_equal(b->id, i);
		assert_int_equal(ibp_pool_state(&d[i].pb), IBP_POOL_FREE);
		assert_ptr_equal(ibp_pool_find(&p, b), &d[i].pb);
		/* Anonymous memory: zero until first written. */
		for (unsigned j = 0; j < b->cap; j++)
			assert_int_equal(b->data[j], 0);
	}
	ibp_pool_fini(&p);
	assert_null(p.mem);
	/* 4 KiB of payload behind the GRH area; an exact multiple of the alignment is
	 * its own stride. */
	assert_int_equal(ibp_pool_init(&p, 3, 4096 + IBP_GRH_AREA, sizeof(struct tbuf)), 0);
	assert_int_equal(p.stride, 4096 + 64);
	assert_int_equal(((struct tbuf *)ibp_pool_descs(&p))[2].pb.pub.cap, 4096 + IBP_GRH_AREA);
	ibp_pool_fini(&p);
	assert_int_equal(ibp_pool_init(&p, 2, 64, sizeof(struct tbuf)), 0);
	assert_int_equal(p.stride, 64);
	ibp_pool_fini(&p);
}

static void get_order_and_exhaustion(void **state)
{
	struct ibp_buf *b[4];
	struct ibp_pool p;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 4, 256, sizeof(struct tbuf)), 0);
	for (unsigned i = 0; i < 4; i++) {
		b[i] = ibp_pool_get(&p);
		assert_non_null(b[i]);
		assert_int_equal(b[i]->id, i); /* index order: the first share pages */
		assert_int_equal(ibp_pool_state(ibp_pool_find(&p, b[i])), IBP_POOL_OWNED);
		assert_int_equal(ibp_pool_n_free(&p), 3 - i);
	}
	assert_null(ibp_pool_get(&p));
	assert_null(ibp_pool_get(&p)); /* still cleanly empty */
	assert_int_equal(ibp_pool_n_free(&p), 0);
	/* One back: the next get finds it (a stack: last in, first out). */
	assert_int_equal(ibp_pool_put(&p, b[2]), 0);
	assert_int_equal(ibp_pool_n_free(&p), 1);
	assert_ptr_equal(ibp_pool_get(&p), b[2]);
	assert_null(ibp_pool_get(&p));
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(ibp_pool_put(&p, b[i]), 0);
	assert_int_equal(ibp_pool_n_free(&p), 4);
	ibp_pool_fini(&p);
}

static void put_get_round_trip(void **state)
{
	struct ibp_pool p;
	struct ibp_buf *b, *again;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 8, 2048, sizeof(struct tbuf)), 0);
	b = ibp_pool_get(&p);
	assert_non_null(b);
	assert_int_equal(b->len, 0);
	memset(b->data, 0xab, b->cap);
	b->len = 1500;
	assert_int_equal(ibp_pool_put(&p, b), 0);
	assert_int_equal(ibp_pool_state(ibp_pool_find(&p, b)), IBP_POOL_FREE);
	again = ibp_pool_get(&p);
	assert_ptr_equal(again, b);
	assert_int_equal(again->len, 0); /* reset by get; the bytes are the last holder's */
	assert_int_equal(again->cap, 2048);
	assert_int_equal(again->data[0], 0xab);
	assert_int_equal(ibp_pool_put(&p, again), 0);
	assert_int_equal(ibp_pool_n_free(&p), 8);
	ibp_pool_fini(&p);
}

static void refused_puts_change_nothing(void **state)
{
	struct ibp_pool p, other;
	struct ibp_buf *b, *o, fake;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 4, 512, sizeof(struct tbuf)), 0);
	assert_int_equal(ibp_pool_init(&other, 4, 512, sizeof(struct tbuf)), 0);
	b = ibp_pool_get(&p);
	o = ibp_pool_get(&other);

	assert_int_equal(ibp_pool_put(&p, NULL), -EINVAL);
	assert_int_equal(ibp_pool_put(&p, o), -EINVAL); /* same id, other pool */
	fake = *b;                                      /* a copy is not the buffer */
	assert_int_equal(ibp_pool_put(&p, &fake), -EINVAL);
	fake.id = 99;
	assert_int_equal(ibp_pool_put(&p, &fake), -EINVAL);
	assert_null(ibp_pool_find(&p, &fake));
	assert_int_equal(ibp_pool_n_free(&p), 3);

	assert_int_equal(ibp_pool_put(&p, b), 0);
	assert_int_equal(ibp_pool_put(&p, b), -EINVAL); /* double put */
	assert_int_equal(ibp_pool_n_free(&p), 4);
	assert_int_equal(ibp_pool_put(&other, o), 0);
	ibp_pool_fini(&other);
	ibp_pool_fini(&p);
}

/* What a backend does around a post: its own state while posted, its fields kept,
 * release from any state. */
static void backend_descriptor_and_states(void **state)
{
	struct ibp_pool p;
	struct tbuf *d;
	struct ibp_buf *b;
	struct tbuf *t;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 3, 1024, sizeof(struct tbuf)), 0);
	d = ibp_pool_descs(&p);
	b = ibp_pool_get(&p);
	t = (struct tbuf *)ibp_pool_find(&p, b);
	assert_ptr_equal(t, &d[0]);
	t->wr_id = 42;
	t->qp = &p;
	ibp_pool_set_state(&t->pb, T_POSTED);
	assert_int_equal(ibp_pool_put(&p, b), -EINVAL); /* posted: not the caller's */
	ibp_pool_set_state(&t->pb, T_CQ);
	assert_int_equal(ibp_pool_put(&p, b), -EINVAL);
	assert_int_equal(d[0].wr_id, 42);
	assert_ptr_equal(d[0].qp, &p);
	/* A destroyed QP's buffer: the backend releases it whatever its state. */
	ibp_pool_release(&p, &t->pb);
	assert_int_equal(ibp_pool_state(&t->pb), IBP_POOL_FREE);
	assert_int_equal(ibp_pool_n_free(&p), 3);
	assert_ptr_equal(ibp_pool_get(&p), b);
	ibp_pool_fini(&p);
}

#define ROUNDS 20000

static void *churn(void *arg)
{
	struct ibp_pool *p = arg;
	struct ibp_buf *held[3];

	for (unsigned r = 0; r < ROUNDS; r++) {
		unsigned n = 0;

		while (n < 3 && (held[n] = ibp_pool_get(p)) != NULL)
			held[n++]->len = r;
		while (n)
			if (ibp_pool_put(p, held[--n]) != 0)
				return (void *)1;
	}
	return NULL;
}

/* buf_get/buf_put from any thread: two threads taking and returning buffers of a pool
 * too small for both never lose or duplicate one. */
static void two_threads_keep_the_count(void **state)
{
	struct ibp_pool p;
	pthread_t t[2];
	void *r0, *r1;
	(void)state;

	assert_int_equal(ibp_pool_init(&p, 4, 128, sizeof(struct tbuf)), 0);
	assert_int_equal(pthread_create(&t[0], NULL, churn, &p), 0);
	assert_int_equal(pthread_create(&t[1], NULL, churn, &p), 0);
	pthread_join(t[0], &r0);
	pthread_join(t[1], &r1);
	assert_null(r0);
	assert_null(r1);
	assert_int_equal(ibp_pool_n_free(&p), 4);
	for (unsigned i = 0; i < 4; i++)
		assert_non_null(ibp_pool_get(&p));
	assert_null(ibp_pool_get(&p));
	ibp_pool_fini(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_sizes_are_refused),
		cmocka_unit_test(layout_alignment_and_sizes),
		cmocka_unit_test(get_order_and_exhaustion),
		cmocka_unit_test(put_get_round_trip),
		cmocka_unit_test(refused_puts_change_nothing),
		cmocka_unit_test(backend_descriptor_and_states),
		cmocka_unit_test(two_threads_keep_the_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
