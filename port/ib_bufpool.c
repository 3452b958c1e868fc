/*
 * The IB ports' packet buffer pool (port/ib_bufpool.h): an mmap'ed region cut into
 * buffers, a descriptor per buffer and a stack of free indexes under one mutex. Called
 * by the verbs backend's open and close (control thread) and by buf_get/buf_put from any
 * thread; nothing here allocates after init.
 */
#include "port/ib_bufpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/ib_hdr.h"

_Static_assert(IB_GRH_LEN == IBP_GRH_AREA, "a UD receive's GRH area holds one GRH");

static struct ibp_pool_buf *desc_at(const struct ibp_pool *pool, uint32_t id)
{
	return (struct ibp_pool_buf *)(void *)((uint8_t *)pool->descs +
					       (size_t)id * pool->desc_size);
}

int ibp_pool_init(struct ibp_pool *pool, unsigned n_bufs, size_t buf_size, size_t desc_size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t stride, len;

	memset(pool, 0, sizeof(*pool));
	if (n_bufs == 0 || buf_size == 0 || buf_size > UINT32_MAX || n_bufs > UINT32_MAX / 2 ||
	    desc_size < sizeof(struct ibp_pool_buf))
		return -EINVAL;
	stride = (buf_size + IBP_POOL_ALIGN - 1) & ~(size_t)(IBP_POOL_ALIGN - 1);
	if (stride > SIZE_MAX / n_bufs)
		return -EOVERFLOW;
	len = stride * n_bufs;
	if (len > SIZE_MAX - page)
		return -EOVERFLOW;
	len = (len + page - 1) & ~(page - 1);

	/* Not memset: see the header (the kernel zeroes each page at its first use). */
	pool->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool->mem == MAP_FAILED) {
		pool->mem = NULL;
		return -ENOMEM;
	}
	pool->mem_len = len;
	pool->descs = calloc(n_bufs, desc_size);
	pool->free_stack = calloc(n_bufs, sizeof(*pool->free_stack));
	if (!pool->descs || !pool->free_stack) {
		ibp_pool_fini(pool);
		return -ENOMEM;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pool->stride = stride;
	pool->desc_size = desc_size;
	pool->n_bufs = n_bufs;
	for (unsigned i = 0; i < n_bufs; i++) {
		struct ibp_pool_buf *b = desc_at(pool, i);

		b->pub.data = pool->mem + (size_t)i * stride;
		b->pub.cap = (uint32_t)buf_size;
		b->pub.id = i;
		ibp_pool_set_state(b, IBP_POOL_FREE);
		/* Pop order = index order: the first buffers handed out share pages. */
		pool->free_stack[i] = n_bufs - 1 - i;
	}
	pool->n_free = n_bufs;
	return 0;
}

void ibp_pool_fini(struct ibp_pool *pool)
{
	if (pool->n_bufs)
		pthread_mutex_destroy(&pool->lock);
	if (pool->mem)
		munmap(pool->mem, pool->mem_len);
	free(pool->descs);
	free(pool->free_stack);
	memset(pool, 0, sizeof(*pool));
}

struct ibp_buf *ibp_pool_get(struct ibp_pool *pool)
{
	struct ibp_pool_buf *b = NULL;

	pthread_mutex_lock(&pool->lock);
	if (pool->n_free) {
		b = desc_at(pool, pool->free_stack[--pool->n_free]);
		ibp_pool_set_state(b, IBP_POOL_OWNED);
	}
	pthread_mutex_unlock(&pool->lock);
	if (!b)
		return NULL;
	b->pub.len = 0;
	return &b->pub;
}

void ibp_pool_release(struct ibp_pool *pool, struct ibp_pool_buf *b)
{
	pthread_mutex_lock(&pool->lock);
	ibp_pool_set_state(b, IBP_POOL_FREE);
	pool->free_stack[pool->n_free++] = (uint32_t)b->pub.id;
	pthread_mutex_unlock(&pool->lock);
}

int ibp_pool_put(struct ibp_pool *pool, struct ibp_buf *buf)
{
	struct ibp_pool_buf *b = ibp_pool_find(pool, buf);

	/* A double put, a foreign or a posted buffer: refused rather than corrupt the
	 * free stack. */
	if (!b || ibp_pool_state(b) != IBP_POOL_OWNED)
		return -EINVAL;
	ibp_pool_release(pool, b);
	return 0;
}

struct ibp_pool_buf *ibp_pool_find(const struct ibp_pool *pool, const struct ibp_buf *buf)
{
	if (!buf || buf->id >= pool->n_bufs || &desc_at(pool, (uint32_t)buf->id)->pub != buf)
		return NULL;
	return desc_at(pool, (uint32_t)buf->id);
}

unsigned ibp_pool_n_free(struct ibp_pool *pool)
{
	unsigned n;

	pthread_mutex_lock(&pool->lock);
	n = pool->n_free;
	pthread_mutex_unlock(&pool->lock);
	return n;
}
