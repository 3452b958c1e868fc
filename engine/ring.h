/*
 * A bounded single-producer single-consumer ring of pointers, for the rings between
 * a worker and the control thread (docs/dataplane.md).
 *
 * Lock-free: the producer owns head, the consumer owns tail; each publishes its index
 * with a release store and reads the other's with an acquire load, so an entry's
 * contents written before enqueue are visible after dequeue. Each side caches the
 * other's index to touch the shared cache line only when it must. Burst functions
 * return how many entries they moved (DPDK's convention).
 *
 * Waking: a consumer that is about to sleep calls ring_sleep_prepare(), checks the ring
 * once more, then sleeps on its eventfd; a producer calls ring_wake_if_sleeping() after
 * a burst, which writes the eventfd only when the consumer said it would sleep. This
 * keeps the syscall off the fast path.
 */
#ifndef IBGW_ENGINE_RING_H
#define IBGW_ENGINE_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RING_CACHELINE 64

struct ring {
	/* Producer side. */
	_Alignas(RING_CACHELINE) _Atomic uint32_t head;
	uint32_t tail_cache;
	/* Consumer side. */
	_Alignas(RING_CACHELINE) _Atomic uint32_t tail;
	uint32_t head_cache;
	_Atomic bool sleeping;
	/* Shared, read-only after init. */
	_Alignas(RING_CACHELINE) uint32_t mask; /* size - 1; size is a power of two */
	int wake_fd;                            /* eventfd, or -1 */
	void *slots[];
};

/* size: a power of two >= 2. Returns NULL on bad size or no memory. The ring owns an
 * eventfd for waking its consumer (ring_fd). */
struct ring *ring_new(uint32_t size);
void ring_free(struct ring *r);
static inline int ring_fd(const struct ring *r)
{
	return r->wake_fd;
}

/* Producer: enqueue up to n entries; returns how many fit. */
static inline unsigned ring_enqueue_burst(struct ring *r, void *const *objs, unsigned n)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t size = r->mask + 1;
	uint32_t free_slots = size - (head - r->tail_cache);

	if (free_slots < n) {
		r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
		free_slots = size - (head - r->tail_cache);
		if (n > free_slots)
			n = free_slots;
	}
	for (unsigned i = 0; i < n; i++)
		r->slots[(head + i) & r->mask] = objs[i];
	atomic_store_explicit(&r->head, head + n, memory_order_release);
	return n;
}

/* Consumer: dequeue up to n entries; returns how many there were. */
static inline unsigned ring_dequeue_burst(struct ring *r, void **objs, unsigned n)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t avail = r->head_cache - tail;

	if (avail < n) {
		r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
		avail = r->head_cache - tail;
		if (n > avail)
			n = avail;
	}
	for (unsigned i = 0; i < n; i++)
		objs[i] = r->slots[(tail + i) & r->mask];
	atomic_store_explicit(&r->tail, tail + n, memory_order_release);
	return n;
}

/* Entries waiting (a snapshot: exact only for the consumer). */
static inline unsigned ring_count(struct ring *r)
{
	return atomic_load_explicit(&r->head, memory_order_acquire) -
	       atomic_load_explicit(&r->tail, memory_order_acquire);
}

/* Consumer, before sleeping on ring_fd(): announce it. Returns true if the ring is
 * empty (sleep), false if entries arrived meanwhile (do not sleep: dequeue them). The
 * announcement stands either way, so the next enqueue writes the eventfd even if the
 * consumer drains and sleeps without asking again. */
bool ring_sleep_prepare(struct ring *r);
/* Consumer of r and of a second ring whose producer wakes it through the first ring's
 * announcement (ring_wake_if_sleeping on the first): after ring_sleep_prepare on the
 * first, whether r is empty, read in the same sequentially consistent order. */
bool ring_empty_after_prepare(struct ring *r);
/* Consumer, after waking: clear the announcement and the eventfd. */
void ring_sleep_done(struct ring *r);
/* Producer, after enqueuing: wake the consumer if it announced sleep. */
void ring_wake_if_sleeping(struct ring *r);

#endif
