/*
 * Real-time scheduling for the one thread whose lateness is a fault: the failover's
 * heartbeat thread (gateway/dp_ha.c), which must judge the peer within a few tens of
 * milliseconds on a box whose CPUs may all be busy (as corosync's and keepalived's
 * VRRP processes run SCHED_RR/SCHED_FIFO). A thread at SCHED_FIFO priority p needs
 * CAP_SYS_NICE or RLIMIT_RTPRIO >= p, and no seccomp filter refusing it (systemd's
 * RestrictRealtime=). ibgwd drops to its own user without CAP_SYS_NICE, so it raises
 * its RLIMIT_RTPRIO while root (rt_limit_raise), which setuid keeps.
 *
 * Any thread; rt_limit_raise before the privilege drop.
 */
#ifndef IBGW_LIB_RT_SCHED_H
#define IBGW_LIB_RT_SCHED_H

#include <pthread.h>

/* RLIMIT_RTPRIO at least prio, raised if it is lower (the hard limit too, which takes
 * CAP_SYS_RESOURCE). 0 or -errno (-EPERM: the hard limit is lower and may not be
 * raised; systemd: LimitRTPRIO=). */
int rt_limit_raise(unsigned prio);
/* Attributes for pthread_create: SCHED_FIFO at prio, not inherited from the creator
 * (prio 0: the default attributes, normal scheduling). 0 or -errno. Destroy a after. */
int rt_thread_attr(pthread_attr_t *a, unsigned prio);
/* Whether a thread may be made now at SCHED_FIFO prio: one is started and joined.
 * 0 or -errno (-EPERM: neither the limit nor the capability allows it, or a seccomp
 * filter refuses real-time policies). */
int rt_probe(unsigned prio);

#endif
