/*
 * ibgwd: the InfiniBand-to-Ethernet IP gateway daemon.
 *
 *   ibgwd [-d] [-f FILE] [-S SOCKET]     run (foreground with -d or under systemd)
 *   ibgwd -n [-v] [-f FILE]               check a config and the failover key it names
 *                                         (print the config normalised with -v)
 *
 * Exit status: 0, 1 on a runtime failure, 2 on a usage error, 78 (EX_CONFIG) when the
 * config does not load.
 */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "cm/cm_umad.h"
#include "gateway/config.h"
#include "gateway/daemon.h"
#include "ha/ha_wire.h"
#include "lib/log.h"
#include "lib/rt_sched.h"

#ifndef IBGW_SYSCONFDIR
#define IBGW_SYSCONFDIR "/etc"
#endif
#define DEFAULT_CONFIG IBGW_SYSCONFDIR "/ibgw/ibgwd.yaml"

static void usage(FILE *out)
{
	fprintf(out, "usage: ibgwd [-d] [-f FILE] [-S SOCKET]\n"
		     "       ibgwd -n [-v] [-f FILE]\n"
		     "  -d          stay in the foreground, log to stderr (or the journal)\n"
		     "  -f FILE     configuration file (default " DEFAULT_CONFIG ")\n"
		     "  -n          check the configuration (and its failover key) and exit\n"
		     "  -v          with -n, print the normalised configuration\n"
		     "  -S SOCKET   control socket path, overriding the configuration\n"
		     "  -V          print the version and exit\n"
		     "  -h          this help\n");
}

/* The failover key as the daemon will read it (ha_key_load_file: present, a regular
 * file, mode 0600 or tighter, owned by root or this user, 16..1024 octets): a check
 * that passes here starts the pair. Run -n as the daemon's user to check the owner; run
 * as root with gateway.user set, it reads the key as that user (the daemon reads it
 * after the drop), so the unit's check as root judges the owner the daemon will see. */
static int check_failover_key(const struct gw_config *cfg)
{
	struct ha_key key;
	char why[GW_PATH_MAX + 160];
	struct passwd *pw = NULL;
	int ret;

	if (!cfg->failover.enabled || cfg->failover.auth != GW_FAILOVER_AUTH_HMAC)
		return 0;
	if (cfg->user[0] && geteuid() == 0) {
		pw = getpwnam(cfg->user);
		if (!pw) {
			fprintf(stderr, "%s: gateway.user: no user '%s'\n", cfg->source, cfg->user);
			return -1;
		}
		if (setegid(pw->pw_gid) < 0 || seteuid(pw->pw_uid) < 0) {
			fprintf(stderr, "%s: gateway.user: cannot act as %s: %s\n", cfg->source,
				cfg->user, strerror(errno));
			return -1;
		}
	}
	ret = ha_key_load_file(&key, cfg->failover.key_file, why, sizeof(why));
	ha_key_clear(&key);
	if (pw && (seteuid(0) < 0 || setegid(0) < 0))
		ret = -1;
	if (ret < 0)
		fprintf(stderr, "%s: failover.key_file: %s\n", cfg->source, why);
	return ret;
}

/* Connected mode on hardware needs the kernel's ib_cm unloaded (cm/cm_umad.h): judged
 * from sysfs, without side effects, for the HCAs present on this host only (a config
 * checked on another machine names devices this one lacks: nothing to judge there). */
static int check_connected_mode_host(const struct gw_config *cfg)
{
	int ret = 0;

	for (unsigned i = 0; i < cfg->n_ipoib_links; i++) {
		const struct gw_ipoib_link_config *l = &cfg->ipoib_links[i];

		if (l->mode != GW_IPOIB_CONNECTED || l->backend != GW_IB_BACKEND_VERBS ||
		    !cm_umad_device_present(NULL, l->device) || !cm_umad_kernel_cm_loaded(NULL))
			continue;
		fprintf(stderr,
			"%s:%u:%u: ipoib link %s: mode connected needs the CM class (0x07) of "
			"%s, which the kernel's ib_cm module holds while loaded: %s\n",
			cfg->source, l->pos.line, l->pos.column, l->name, l->device, CM_UMAD_FIX);
		ret = -1;
	}
	return ret;
}

/* The real-time priorities (failover.rt_priority, gateway.worker_rt_priority) as the
 * daemon will have them: RLIMIT_RTPRIO raised where it can be (as the daemon does before
 * dropping to gateway.user, keeping cap_sys_nice where it cannot), then one thread made
 * at the highest, which also finds a seccomp filter refusing real-time policies
 * (systemd's RestrictRealtime=). */
static int check_rt_priorities(const struct gw_config *cfg)
{
	unsigned prio = gw_config_rt_priority_max(cfg);
	int ret;

	if (!prio)
		return 0;
	(void)rt_limit_raise(prio);
	ret = rt_probe(prio);
	if (ret < 0)
		fprintf(
		    stderr,
		    "%s: no thread may run at SCHED_FIFO priority %u here (failover.rt_priority, "
		    "gateway.worker_rt_priority): %s (RLIMIT_RTPRIO, LimitRTPRIO= and "
		    "RestrictRealtime= under systemd; 0 is normal scheduling)\n",
		    cfg->source, prio, strerror(-ret));
	return ret;
}

/* -n: every error to stderr as FILE:LINE:COLUMN: message; -v prints the config. */
static int check_config(const char *path, bool verbose)
{
	struct gw_config_errors errs = { 0 };
	struct gw_config *cfg = NULL;
	int ret = gw_config_load(path, &cfg, &errs);

	for (unsigned i = 0; i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	gw_config_errors_free(&errs);
	if (ret < 0)
		return EX_CONFIG;
	ret = check_failover_key(cfg);
	if (check_connected_mode_host(cfg) < 0 || check_rt_priorities(cfg) < 0)
		ret = -1;
	if (ret < 0) {
		gw_config_free(cfg);
		return EX_CONFIG;
	}
	if (verbose)
		gw_config_print_yaml(cfg, stdout);
	gw_config_free(cfg);
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct gw_daemon_opts opts = { .config_path = DEFAULT_CONFIG };
	bool check = false, verbose = false;
	struct gw_daemon *d;
	int c, status;

	while ((c = getopt(argc, argv, "df:nvS:Vh")) != -1) {
		switch (c) {
		case 'd':
			opts.foreground = true;
			break;
		case 'f':
			opts.config_path = optarg;
			break;
		case 'n':
			check = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'S':
			opts.socket_override = optarg;
			break;
		case 'V':
			printf("ibgwd %s\n", IBGW_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ibgwd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EX_USAGE;
	}
	if (check)
		return check_config(opts.config_path, verbose);

	/* Under systemd (NOTIFY_SOCKET set) or with -d: stay in the foreground. Otherwise
	 * detach, and log to syslog since there is no terminal. */
	bool detach = !opts.foreground && !getenv("NOTIFY_SOCKET");
	log_init("ibgwd", detach ? LOG_TARGET_SYSLOG : LOG_TARGET_AUTO, LOG_INFO);
	if (detach && daemon(0, 0) < 0) {
		log_errno(LOG_ERR, errno, "daemon");
		return 1;
	}
	status = gw_daemon_new(&opts, &d);
	if (status < 0)
		return status == -EINVAL ? EX_CONFIG : 1;
	status = gw_daemon_run(d);
	gw_daemon_free(d);
	/* Everything is closed. Skip the libraries' exit handlers: under the simulator,
	 * libumad2sim's can deadlock (it joins its reader thread while that thread waits on
	 * a mutex), and a daemon that does not exit on SIGTERM is worse than one that
	 * skips a destructor it does not need. */
	fflush(NULL);
	_exit(status);
}
