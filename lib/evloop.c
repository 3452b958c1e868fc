/*
 * epoll event loop with a timer heap. fd handlers live in a table indexed by fd (the
 * control thread's fds are few and small-numbered); timers in a binary min-heap of
 * deadlines, each timer remembering its heap slot so stop/restart is O(log n).
 */
#include "lib/evloop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct fd_watch {
	evloop_fd_cb cb;
	void *arg;
};

struct evtimer {
	struct evloop *loop;
	evloop_timer_cb cb;
	void *arg;
	uint64_t deadline_ms;
	uint64_t period_ms;
	int heap_index; /* -1 when not pending */
};

struct evloop {
	int epfd;
	bool stop;
	struct fd_watch *watches;
	int n_watches; /* size of watches[], indexed by fd */
	struct evtimer **heap;
	int heap_len, heap_cap;
	int n_timers; /* timers that exist; heap_cap >= n_timers, so starting never fails */
};

uint64_t evloop_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t evloop_now_ms(void)
{
	return evloop_now_ns() / 1000000u;
}

int evloop_new(struct evloop **out)
{
	struct evloop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return -ENOMEM;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		int err = errno;

		free(loop);
		return -err;
	}
	*out = loop;
	return 0;
}

void evloop_free(struct evloop *loop)
{
	if (!loop)
		return;
	for (int i = 0; i < loop->heap_len; i++)
		loop->heap[i]->heap_index = -1;
	close(loop->epfd);
	free(loop->watches);
	free(loop->heap);
	free(loop);
}

int evloop_add_fd(struct evloop *loop, int fd, uint32_t events, evloop_fd_cb cb, void *arg)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (fd < 0)
		return -EBADF;
	if (fd >= loop->n_watches) {
		int n = fd + 16;
		struct fd_watch *w = realloc(loop->watches, (size_t)n * sizeof(*w));

		if (!w)
			return -ENOMEM;
		memset(w + loop->n_watches, 0, (size_t)(n - loop->n_watches) * sizeof(*w));
		loop->watches = w;
		loop->n_watches = n;
	}
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	loop->watches[fd] = (struct fd_watch){ cb, arg };
	return 0;
}

int evloop_mod_fd(struct evloop *loop, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void evloop_del_fd(struct evloop *loop, int fd)
{
	if (fd < 0 || fd >= loop->n_watches)
		return;
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	loop->watches[fd] = (struct fd_watch){ NULL, NULL };
}

/* --- timer heap --- */

static void heap_set(struct evloop *loop, int i, struct evtimer *t)
{
	loop->heap[i] = t;
	t->heap_index = i;
}

static void heap_up(struct evloop *loop, int i)
{
	struct evtimer *t = loop->heap[i];

	while (i > 0) {
		int parent = (i - 1) / 2;

		if (loop->heap[parent]->deadline_ms <= t->deadline_ms)
			break;
		heap_set(loop, i, loop->heap[parent]);
		i = parent;
	}
	heap_set(loop, i, t);
}

static void heap_down(struct evloop *loop, int i)
{
	struct evtimer *t = loop->heap[i];

	for (;;) {
		int child = 2 * i + 1;

		if (child >= loop->heap_len)
			break;
		if (child + 1 < loop->heap_len &&
		    loop->heap[child + 1]->deadline_ms < loop->heap[child]->deadline_ms)
			child++;
		if (loop->heap[child]->deadline_ms >= t->deadline_ms)
			break;
		heap_set(loop, i, loop->heap[child]);
		i = child;
	}
	heap_set(loop, i, t);
}

static void heap_remove(struct evloop *loop, struct evtimer *t)
{
	int i = t->heap_index;
	struct evtimer *last;

	if (i < 0)
		return;
	t->heap_index = -1;
	last = loop->heap[--loop->heap_len];
	if (last == t)
		return;
	heap_set(loop, i, last);
	heap_up(loop, i);
	heap_down(loop, last->heap_index);
}

static void heap_insert(struct evloop *loop, struct evtimer *t)
{
	heap_set(loop, loop->heap_len++, t);
	heap_up(loop, t->heap_index);
}

struct evtimer *evtimer_new(struct evloop *loop, evloop_timer_cb cb, void *arg)
{
	struct evtimer *t;

	if (loop->n_timers == loop->heap_cap) {
		int cap = loop->heap_cap ? loop->heap_cap * 2 : 16;
		struct evtimer **h = realloc(loop->heap, (size_t)cap * sizeof(*h));

		if (!h)
			return NULL;
		loop->heap = h;
		loop->heap_cap = cap;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	*t = (struct evtimer){ .loop = loop, .cb = cb, .arg = arg, .heap_index = -1 };
	loop->n_timers++;
	return t;
}

void evtimer_start(struct evtimer *t, uint64_t delay_ms, uint64_t period_ms)
{
	heap_remove(t->loop, t);
	t->deadline_ms = evloop_now_ms() + delay_ms;
	t->period_ms = period_ms;
	heap_insert(t->loop, t);
}

void evtimer_stop(struct evtimer *t)
{
	heap_remove(t->loop, t);
}

bool evtimer_pending(const struct evtimer *t)
{
	return t->heap_index >= 0;
}

void evtimer_free(struct evtimer *t)
{
	if (!t)
		return;
	heap_remove(t->loop, t);
	t->loop->n_timers--;
	free(t);
}

/* Fire every timer whose deadline has passed; returns ms until the next, or -1. */
static int run_timers(struct evloop *loop)
{
	uint64_t now = evloop_now_ms();

	while (loop->heap_len > 0 && !loop->stop) {
		struct evtimer *t = loop->heap[0];

		if (t->deadline_ms > now) {
			uint64_t wait = t->deadline_ms - now;

			return wait > 60000 ? 60000 : (int)wait;
		}
		heap_remove(loop, t);
		if (t->period_ms) {
			t->deadline_ms += t->period_ms;
			if (t->deadline_ms <= now) /* fell behind: do not fire a burst */
				t->deadline_ms = now + t->period_ms;
			heap_insert(loop, t);
		}
		t->cb(loop, t, t->arg); /* may stop, restart or free t */
	}
	return -1;
}

int evloop_run(struct evloop *loop)
{
	struct epoll_event evs[32];

	loop->stop = false;
	while (!loop->stop) {
		int timeout = run_timers(loop);
		int n;

		if (loop->stop)
			break;
		n = epoll_wait(loop->epfd, evs, 32, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n && !loop->stop; i++) {
			int fd = evs[i].data.fd;

			/* A handler may have removed a later fd of this batch. */
			if (fd < loop->n_watches && loop->watches[fd].cb)
				loop->watches[fd].cb(loop, fd, evs[i].events,
						     loop->watches[fd].arg);
		}
	}
	return 0;
}

void evloop_stop(struct evloop *loop)
{
	loop->stop = true;
}
