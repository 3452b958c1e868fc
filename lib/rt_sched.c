/*
 * Real-time scheduling for the heartbeat thread (lib/rt_sched.h). Any thread.
 */
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>

#include "lib/rt_sched.h"

int rt_limit_raise(unsigned prio)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_RTPRIO, &rl) < 0)
		return -errno;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= prio)
		return 0;
	rl.rlim_cur = prio;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < prio)
		rl.rlim_max = prio;
	return setrlimit(RLIMIT_RTPRIO, &rl) < 0 ? -errno : 0;
}

int rt_thread_attr(pthread_attr_t *a, unsigned prio)
{
	struct sched_param sp = { .sched_priority = (int)prio };
	int ret = pthread_attr_init(a);

	if (ret || !prio)
		return -ret;
	if ((ret = pthread_attr_setinheritsched(a, PTHREAD_EXPLICIT_SCHED)) ||
	    (ret = pthread_attr_setschedpolicy(a, SCHED_FIFO)) ||
	    (ret = pthread_attr_setschedparam(a, &sp))) {
		pthread_attr_destroy(a);
		return -ret;
	}
	return 0;
}

static void *probe(void *arg)
{
	return arg;
}

int rt_probe(unsigned prio)
{
	pthread_attr_t a;
	pthread_t t;
	int ret = rt_thread_attr(&a, prio);

	if (ret < 0)
		return ret;
	ret = pthread_create(&t, &a, probe, NULL);
	pthread_attr_destroy(&a);
	if (ret)
		return -ret;
	pthread_join(t, NULL);
	return 0;
}
