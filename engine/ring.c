/*
 * SPSC ring: allocation and the sleep/wake handshake (the hot paths are inline in
 * ring.h).
 *
 * The handshake is a Dekker-style pair: the consumer stores sleeping = true then reads
 * head; the producer stores head then reads sleeping. With sequentially consistent
 * operations on both sides, at least one of them sees the other's store, so an entry
 * is never left in the ring with its consumer asleep.
 */
#include "engine/ring.h"

#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct ring *ring_new(uint32_t size)
{
	struct ring *r;
	size_t bytes;

	if (size < 2 || (size & (size - 1)))
		return NULL;
	bytes = sizeof(*r) + size * sizeof(void *);
	bytes = (bytes + RING_CACHELINE - 1) / RING_CACHELINE * RING_CACHELINE;
	r = aligned_alloc(RING_CACHELINE, bytes);
	if (!r)
		return NULL;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	atomic_init(&r->sleeping, false);
	r->tail_cache = 0;
	r->head_cache = 0;
	r->mask = size - 1;
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->wake_fd < 0) {
		free(r);
		return NULL;
	}
	return r;
}

void ring_free(struct ring *r)
{
	if (!r)
		return;
	close(r->wake_fd);
	free(r);
}

bool ring_sleep_prepare(struct ring *r)
{
	atomic_store(&r->sleeping, true); /* seq_cst: ordered before the load of head */
	/* Entries waiting: the announcement stays. A consumer that drains them and then
	 * sleeps without asking again (engine/slowpath.c's on_ring does) is still woken by
	 * the next enqueue; cleared here, every later wake-up was lost until a timer
	 * polled. The cost is at most one spurious wake-up. */
	return atomic_load(&r->head) == atomic_load_explicit(&r->tail, memory_order_relaxed);
}

bool ring_empty_after_prepare(struct ring *r)
{
	return atomic_load(&r->head) == atomic_load_explicit(&r->tail, memory_order_relaxed);
}

void ring_sleep_done(struct ring *r)
{
	uint64_t v;

	atomic_store(&r->sleeping, false);
	while (read(r->wake_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		;
}

void ring_wake_if_sleeping(struct ring *r)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst); /* head's store before the load below */
	if (atomic_load(&r->sleeping) && atomic_exchange(&r->sleeping, false)) {
		/* EAGAIN only when the counter is saturated: the consumer wakes anyway. */
		ssize_t n = write(r->wake_fd, &one, sizeof(one));

		(void)n;
	}
}
