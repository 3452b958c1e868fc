/*
 * The packet buffer pool of an IB port (prefix ibp_pool_), the verbs backend's
 * (port/ib_port_verbs.c): one region of n_bufs buffers, a descriptor per buffer, a
 * free stack, and the buffer's state. It is what buf_get and buf_put of struct
 * ibp_ops hand out and take back. Kept apart from the backend so that it is tested
 * alone (test/unit/test_ib_bufpool.c), without an HCA.
 *
 * The region is anonymous mmap: page aligned (the verbs backend registers all of it as
 * one memory region with ibv_reg_mr(mem, mem_len)) and zeroed by the kernel page by
 * page as it is first used. A memset at init faulted in all of it (17 MiB for UD,
 * 64 MiB per connected link) on the control thread and made a link's move to its
 * backup port long enough for the failover peer to miss heartbeats; ibv_reg_mr pins
 * the pages anyway, so the verbs backend loses nothing. Buffer i starts at
 * mem + i * stride, stride being buf_size rounded up to IBP_POOL_ALIGN (a cache line).
 *
 * The backend's descriptor starts with struct ibp_pool_buf and adds what it tracks for
 * a posted buffer (its QP, the caller's wr_id...); the pool allocates n_bufs of them of
 * the size the backend gives, so the backend may index them as an array of its own
 * type (ibp_pool_descs). States: IBP_POOL_FREE (on the free stack) and IBP_POOL_OWNED
 * (held by a caller) are the pool's; the backend numbers its posted states from
 * IBP_POOL_POSTED up.
 *
 * Threads:
 * - init and fini: the control thread (the backend's open and close), alone.
 * - get, put: any thread. Callers of buf_get/buf_put are the workers (the port's owner
 *   reaping completions; any worker forwarding a packet out through the port takes a
 *   send buffer, engine/forward.c) and the control thread (slow path, the drain
 *   at stop in gateway/dataplane.c).
 * - release: the buffer's current holder; the backend releases posted buffers under
 *   its data-path lock (a destroyed QP's or SRQ's, stale completions).
 * - A buffer's state changes only by its holder in that state: the pool's lock for
 *   FREE, the backend's data-path lock for posted states, the holding thread for
 *   OWNED. It is atomic (relaxed) because the backend scans every descriptor under
 *   its data-path lock while other threads move owned buffers to the free stack.
 * - The pool's mutex guards only the free stack and is held for a push or a pop, no
 *   call made under it: lock order is the backend's data-path lock, then the pool's.
 */
#ifndef IBGW_PORT_IB_BUFPOOL_H
#define IBGW_PORT_IB_BUFPOOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "port/ib_port.h"

#define IBP_POOL_ALIGN 64 /* buffer stride alignment (cache line) */

enum ibp_pool_state {
	IBP_POOL_FREE = 0,   /* on the free stack */
	IBP_POOL_OWNED = 1,  /* held by a caller thread */
	IBP_POOL_POSTED = 2, /* the first of a backend's own states (posted somewhere) */
};

/* The head of every backend's buffer descriptor. */
struct ibp_pool_buf {
	struct ibp_buf pub; /* what callers hold; pub.id is the index */
	atomic_uchar state; /* enum ibp_pool_state or a backend's posted state */
};

struct ibp_pool {
	/* Immutable between init and fini. */
	uint8_t *mem;     /* the region, mmap'ed */
	size_t mem_len;   /* its length, whole pages */
	size_t stride;    /* from one buffer to the next */
	void *descs;      /* n_bufs descriptors of desc_size bytes */
	size_t desc_size; /* the backend's descriptor, struct ibp_pool_buf first */
	unsigned n_bufs;

	pthread_mutex_t lock; /* the free stack */
	uint32_t *free_stack; /* buffer indexes; the top is popped first */
	unsigned n_free;
};

/*
 * Sets up n_bufs buffers of buf_size bytes (each buf->cap) and their descriptors of
 * desc_size bytes (at least sizeof(struct ibp_pool_buf)), all on the free stack; the
 * first get returns buffer 0, then 1 and so on, so the first buffers handed out share
 * pages. -EINVAL for a size of 0, buf_size over UINT32_MAX or n_bufs over
 * UINT32_MAX / 2; -EOVERFLOW when the region's size does not fit in size_t; -ENOMEM.
 * On failure the pool is left as fini leaves it.
 */
int ibp_pool_init(struct ibp_pool *pool, unsigned n_bufs, size_t buf_size, size_t desc_size);

/* Unmaps and frees everything (the caller deregisters the region first). Safe on a
 * pool whose init failed or never ran, if zeroed. */
void ibp_pool_fini(struct ibp_pool *pool);

/* A free buffer, now OWNED by the caller with len 0; NULL when none is free. */
struct ibp_buf *ibp_pool_get(struct ibp_pool *pool);

/* The caller gives back a buffer it holds (OWNED): 0, or -EINVAL (nothing changed)
 * for NULL, a buffer of another pool, or one not held (free, or posted). */
int ibp_pool_put(struct ibp_pool *pool, struct ibp_buf *buf);

/* Back to the free stack, whatever its state: for the holder of a posted buffer (the
 * backend under its data-path lock) or of an owned one. */
void ibp_pool_release(struct ibp_pool *pool, struct ibp_pool_buf *b);

/* The descriptor of a buffer of this pool, or NULL for NULL or a foreign buffer. */
struct ibp_pool_buf *ibp_pool_find(const struct ibp_pool *pool, const struct ibp_buf *buf);

/* Free buffers now (takes the lock; a snapshot, for tests and statistics). */
unsigned ibp_pool_n_free(struct ibp_pool *pool);

/* The descriptor array, to be indexed as the backend's own type. */
static inline void *ibp_pool_descs(const struct ibp_pool *pool)
{
	return pool->descs;
}

static inline unsigned ibp_pool_state(struct ibp_pool_buf *b)
{
	return atomic_load_explicit(&b->state, memory_order_relaxed);
}

static inline void ibp_pool_set_state(struct ibp_pool_buf *b, unsigned state)
{
	atomic_store_explicit(&b->state, (unsigned char)state, memory_order_relaxed);
}

#endif
