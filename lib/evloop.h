/*
 * A small epoll event loop with one-shot and periodic timers: the control thread's loop.
 *
 * Handlers run on the loop's thread; nothing here is thread-safe (other threads reach
 * the loop through an eventfd they write and the loop watches).
 * Timers are kept in a binary heap keyed by CLOCK_MONOTONIC deadlines; epoll_wait's
 * timeout is the nearest deadline, so an idle loop sleeps.
 */
#ifndef IBGW_LIB_EVLOOP_H
#define IBGW_LIB_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>

struct evloop;
struct evtimer;

/* events: EPOLLIN, EPOLLOUT, ... as given to evloop_add_fd / evloop_mod_fd. */
typedef void (*evloop_fd_cb)(struct evloop *loop, int fd, uint32_t events, void *arg);
typedef void (*evloop_timer_cb)(struct evloop *loop, struct evtimer *t, void *arg);

int evloop_new(struct evloop **out);
void evloop_free(struct evloop *loop);

/* Watch fd. One registration per fd. Returns 0 or -errno. */
int evloop_add_fd(struct evloop *loop, int fd, uint32_t events, evloop_fd_cb cb, void *arg);
int evloop_mod_fd(struct evloop *loop, int fd, uint32_t events);
void evloop_del_fd(struct evloop *loop, int fd);

/* Timers: created stopped; start with a delay, optionally repeating every period_ms. */
struct evtimer *evtimer_new(struct evloop *loop, evloop_timer_cb cb, void *arg);
void evtimer_start(struct evtimer *t, uint64_t delay_ms, uint64_t period_ms);
void evtimer_stop(struct evtimer *t);
bool evtimer_pending(const struct evtimer *t);
void evtimer_free(struct evtimer *t);

/* Run until evloop_stop(); returns 0, or -errno if epoll fails. */
int evloop_run(struct evloop *loop);
void evloop_stop(struct evloop *loop);

/* Monotonic time in milliseconds and nanoseconds. */
uint64_t evloop_now_ms(void);
uint64_t evloop_now_ns(void);

#endif
