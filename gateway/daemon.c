/*
 * ibgwd's control thread: config load and reload, control-socket commands, signals
 * (signalfd, so handlers run in the loop and not in signal context), sd_notify and the
 * systemd watchdog.
 *
 * Reload follows bgpd: the whole new file is parsed and validated first; on any error
 * the running config stays and every error is logged and returned to the requester.
 */
#include "gateway/daemon.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-daemon.h>

#include "gateway/config.h"
#include "gateway/dataplane.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "lib/rt_sched.h"
#include "mgmt/ctl_args.h"
#include "mgmt/ctl_server.h"
#include "mgmt/metrics_http.h"

struct gw_daemon {
	struct gw_daemon_opts opts;
	struct gw_config *cfg;
	struct evloop *loop;
	struct ctl_server *ctl;
	struct gw_dp *dp;             /* the running data plane (gateway/dataplane.h) */
	struct metrics_http *metrics; /* the Prometheus endpoint, NULL when off or failed */
	int sigfd;
	int exit_status;
	struct evtimer *watchdog;
	time_t started;      /* wall clock, for show version */
	uint64_t started_ms; /* monotonic */
	unsigned reloads, reload_failures;
	char *reload_errors; /* the last failed reload's messages, one per line */
};

static void start_metrics(struct gw_daemon *d);
static int reload(struct gw_daemon *d, struct gw_reload_outcome *out, uint64_t *took_ms);

/* --- control commands --- */

static int cmd_show_version(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct json_object *o = json_object_new_object();
	(void)args;

	json_object_object_add(o, "version", json_object_new_string(IBGW_VERSION));
	json_object_object_add(o, "protocol", json_object_new_int(CTL_VERSION));
	json_object_object_add(o, "name", json_object_new_string(d->cfg->name));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "started", json_object_new_int64(d->started));
	json_object_object_add(
	    o, "uptime_s",
	    json_object_new_int64((int64_t)((evloop_now_ms() - d->started_ms) / 1000)));
	json_object_object_add(o, "config", json_object_new_string(d->cfg->source));
	json_object_object_add(o, "reloads", json_object_new_int((int)d->reloads));
	json_object_object_add(o, "reload_failures", json_object_new_int((int)d->reload_failures));
	return ctl_reply_record(r, o) < 0 ? CTL_EFAILED : CTL_OK;
}

static int cmd_show_config(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	(void)args;

	return ctl_reply_record(r, gw_config_to_json(d->cfg)) < 0 ? CTL_EFAILED : CTL_OK;
}

/* Optional arguments: known keys, each of its type, nothing else. */
struct opt_spec {
	const char *key;
	enum json_type type;
	struct json_object **out; /* NULL when absent */
};

static int opt_args(struct json_object *args, const struct opt_spec *spec, unsigned n,
		    struct ctl_reply *r, const char *what)
{
	for (unsigned i = 0; i < n; i++)
		*spec[i].out = NULL;
	if (!args)
		return 0;
	json_object_object_foreach(args, k, v)
	{
		unsigned i = 0;

		while (i < n && strcmp(k, spec[i].key))
			i++;
		if (i == n || !json_object_is_type(v, spec[i].type)) {
			char keys[128];
			size_t o = 0;

			for (unsigned j = 0; j < n && o < sizeof(keys); j++)
				o += (size_t)snprintf(keys + o, sizeof(keys) - o, "%s\"%s\"",
						      j == 0      ? ""
						      : j + 1 < n ? ", "
								  : " and ",
						      spec[j].key);
			return ctl_reply_error(r, CTL_EBADREQ, "%s takes only %s", what, keys);
		}
		*spec[i].out = v;
	}
	return 0;
}

static int opt_arg(struct json_object *args, const char *key, enum json_type type,
		   struct json_object **out, struct ctl_reply *r, const char *what)
{
	const struct opt_spec spec = { key, type, out };

	return opt_args(args, &spec, 1, r, what);
}

static int cmd_show_links(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct json_object *v, *t;
	const struct opt_spec spec[] = { { "stats", json_type_boolean, &v },
					 { "tenant", json_type_string, &t } };

	if (opt_args(args, spec, 2, r, "show links"))
		return CTL_EBADREQ;
	return gw_dp_show_links(d->dp, v && json_object_get_boolean(v),
				t ? json_object_get_string(t) : NULL, r);
}

static int cmd_show_routes(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct json_object *v, *t;
	const struct opt_spec spec[] = { { "prefix", json_type_string, &v },
					 { "tenant", json_type_string, &t } };
	struct ip_prefix p;

	if (opt_args(args, spec, 2, r, "show routes"))
		return CTL_EBADREQ;
	if (v && ip_prefix_parse(json_object_get_string(v), false, &p) < 0)
		return ctl_reply_error(
		    r, CTL_EBADREQ, "'%s' is not a prefix (10.1.0.0/16, fd00::/64; no host bits)",
		    json_object_get_string(v));
	return gw_dp_show_routes(d->dp, t ? json_object_get_string(t) : "", v ? &p : NULL, r);
}

static int cmd_show_neighbours(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct json_object *v;

	if (opt_arg(args, "dev", json_type_string, &v, r, "show neighbours"))
		return CTL_EBADREQ;
	return gw_dp_show_neighbours(d->dp, v ? json_object_get_string(v) : NULL, r);
}

static int cmd_show_paths(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_paths(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_show_gid_routes(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_gid_routes(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_show_mcast(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_mcast(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_show_ra(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_ra(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_show_dhcp(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_dhcp(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_show_connections(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_connections(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_show_stats(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_stats(((struct gw_daemon *)ctx)->dp, r);
}

/* reload: one record, {"config", "duration_ms", "changes": [...], "errors": [...]}, then
 * an error END when the file was refused (nothing changed) or when what it asks could
 * not all be applied (the rest was: errors says what was not). */
static int cmd_reload(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct gw_reload_outcome out = { json_object_new_array(), json_object_new_array() };
	struct json_object *o;
	uint64_t ms = 0;
	int ret;
	(void)args;

	ret = reload(d, &out, &ms);
	if (ret == -1) {
		json_object_put(out.changes);
		json_object_put(out.errors);
		return ctl_reply_error(r, CTL_EFAILED,
				       "reload failed, the running config is unchanged:\n%s",
				       d->reload_errors ? d->reload_errors : "");
	}
	o = json_object_new_object();
	json_object_object_add(o, "config", json_object_new_string(d->opts.config_path));
	json_object_object_add(o, "duration_ms", json_object_new_int64((int64_t)ms));
	json_object_object_add(o, "changes", out.changes);
	json_object_object_add(o, "errors", out.errors);
	if (ctl_reply_record(r, o) < 0)
		return CTL_EFAILED;
	if (ret < 0)
		return ctl_reply_error(r, CTL_EFAILED,
				       "reload applied, but not as written (the rest runs):\n%s",
				       d->reload_errors ? d->reload_errors : "");
	return CTL_OK;
}

static int cmd_log_level(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct json_object *lv;
	int level;
	(void)ctx;

	if (!args || !json_object_object_get_ex(args, "level", &lv) ||
	    !json_object_is_type(lv, json_type_string) || json_object_object_length(args) != 1)
		return ctl_reply_error(r, CTL_EBADREQ,
				       "log level needs exactly one argument \"level\"");
	level = log_level_from_name(json_object_get_string(lv));
	if (level < 0)
		return ctl_reply_error(
		    r, CTL_EBADREQ, "unknown log level '%s' (error, warning, notice, info, debug)",
		    json_object_get_string(lv));
	log_set_level(level);
	log_notice("log level set to %s", log_level_name(level));
	return CTL_OK;
}

/* gwctl's write requests: the arguments' form here (mgmt/ctl_args.h), the rest in
 * gateway/dp_ctl.c. */
static int cmd_route(struct gw_daemon *d, struct json_object *args, bool add, struct ctl_reply *r)
{
	struct ctl_route rt;
	char why[CTL_ARGS_WHY_LEN];

	if (ctl_route_from_json(args, add, &rt, why) < 0)
		return ctl_reply_error(r, CTL_EBADREQ, "%s", why);
	return add ? gw_dp_route_add(d->dp, &rt, r) : gw_dp_route_del(d->dp, &rt, r);
}

static int cmd_route_add(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	return cmd_route(ctx, args, true, r);
}

static int cmd_route_del(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	return cmd_route(ctx, args, false, r);
}

static int cmd_neigh(struct gw_daemon *d, struct json_object *args, bool add, struct ctl_reply *r)
{
	struct ctl_neigh n;
	char why[CTL_ARGS_WHY_LEN];

	if (ctl_neigh_from_json(args, add, &n, why) < 0)
		return ctl_reply_error(r, CTL_EBADREQ, "%s", why);
	return add ? gw_dp_neigh_add(d->dp, &n, r) : gw_dp_neigh_del(d->dp, &n, r);
}

static int cmd_neigh_add(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	return cmd_neigh(ctx, args, true, r);
}

static int cmd_neigh_del(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	return cmd_neigh(ctx, args, false, r);
}

static int cmd_neigh_flush(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct ctl_neigh_flush f;
	char why[CTL_ARGS_WHY_LEN];

	if (ctl_neigh_flush_from_json(args, &f, why) < 0)
		return ctl_reply_error(r, CTL_EBADREQ, "%s", why);
	return gw_dp_neigh_flush(d->dp, &f, r);
}

static int cmd_path_flush(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct ctl_path_flush f;
	char why[CTL_ARGS_WHY_LEN];

	if (ctl_path_flush_from_json(args, &f, why) < 0)
		return ctl_reply_error(r, CTL_EBADREQ, "%s", why);
	return gw_dp_path_flush(d->dp, &f, r);
}

static int cmd_capture(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct ctl_capture c;
	char why[CTL_ARGS_WHY_LEN];

	if (ctl_capture_from_json(args, &c, why) < 0)
		return ctl_reply_error(r, CTL_EBADREQ, "%s", why);
	return gw_dp_capture(d->dp, &c, r);
}

static int cmd_show_ha(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	(void)args;
	return gw_dp_show_ha(((struct gw_daemon *)ctx)->dp, r);
}

static int cmd_ha_switchover(void *ctx, struct json_object *args, struct ctl_reply *r)
{
	struct gw_daemon *d = ctx;
	struct json_object *v;

	if (opt_arg(args, "group", json_type_string, &v, r, "ha switchover"))
		return CTL_EBADREQ;
	return gw_dp_ha_switchover(d->dp, v ? json_object_get_string(v) : NULL, r);
}

static const struct ctl_command commands[] = {
	{ CTL_SHOW_VERSION, true, cmd_show_version },
	{ CTL_SHOW_CONFIG, true, cmd_show_config },
	{ CTL_SHOW_LINKS, true, cmd_show_links },
	{ CTL_RELOAD, false, cmd_reload },
	{ CTL_LOG_LEVEL, false, cmd_log_level },
	{ CTL_SHOW_ROUTES, true, cmd_show_routes },
	{ CTL_SHOW_NEIGHBOURS, true, cmd_show_neighbours },
	{ CTL_SHOW_PATHS, true, cmd_show_paths },
	{ CTL_SHOW_MCAST, true, cmd_show_mcast },
	{ CTL_SHOW_RA, true, cmd_show_ra },
	{ CTL_SHOW_DHCP, true, cmd_show_dhcp },
	{ CTL_SHOW_GID_ROUTES, true, cmd_show_gid_routes },
	{ CTL_SHOW_CONNECTIONS, true, cmd_show_connections },
	{ CTL_SHOW_STATS, true, cmd_show_stats },
	{ CTL_ROUTE_ADD, false, cmd_route_add },
	{ CTL_ROUTE_DEL, false, cmd_route_del },
	{ CTL_NEIGH_ADD, false, cmd_neigh_add },
	{ CTL_NEIGH_DEL, false, cmd_neigh_del },
	{ CTL_NEIGH_FLUSH, false, cmd_neigh_flush },
	{ CTL_PATH_FLUSH, false, cmd_path_flush },
	{ CTL_SHOW_HA, true, cmd_show_ha },
	{ CTL_HA_SWITCHOVER, false, cmd_ha_switchover },
	/* The privileged socket only: a capture shows every host's traffic. */
	{ CTL_CAPTURE, false, cmd_capture },
};

/* --- config --- */

static int load_config(const char *path, struct gw_config **out, char **errors)
{
	struct gw_config_errors errs = { 0 };
	int ret = gw_config_load(path, out, &errs);

	if (ret < 0) {
		size_t len = 0;
		FILE *f = open_memstream(errors, &len);

		for (unsigned i = 0; i < errs.n; i++) {
			log_error("%s", errs.msgs[i]);
			if (f)
				fprintf(f, "%s%s", i ? "\n" : "", errs.msgs[i]);
		}
		if (f)
			fclose(f);
	}
	gw_config_errors_free(&errs);
	return ret;
}

/* Does the control section differ? Its sockets are made at start only. */
static bool control_changed(const struct gw_config *a, const struct gw_config *b)
{
	return strcmp(a->socket, b->socket) || strcmp(a->readonly_socket, b->readonly_socket) ||
	       a->socket_mode != b->socket_mode || strcmp(a->socket_group, b->socket_group) ||
	       a->max_clients != b->max_clients ||
	       a->readonly_socket_mode != b->readonly_socket_mode ||
	       strcmp(a->readonly_socket_group, b->readonly_socket_group) ||
	       a->readonly_max_clients != b->readonly_max_clients;
}

/* The errors of out as the last reload's messages, one a line (NULL: none). */
static char *join_errors(struct json_object *errors)
{
	size_t n = errors ? json_object_array_length(errors) : 0, len = 0;
	char *text = NULL;
	FILE *f;

	if (!n)
		return NULL;
	f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? "\n" : "",
			json_object_get_string(json_object_array_get_idx(errors, i)));
	fclose(f);
	return text;
}

/*
 * Parse, check, apply. Returns 0 (applied as written), -1 (the file is refused: the
 * running config stays) or -2 (applied, but some of it could not be: out->errors, also
 * in d->reload_errors). out (its arrays may be NULL) hears what changed; *took_ms how
 * long the control thread was at it.
 */
static int reload(struct gw_daemon *d, struct gw_reload_outcome *out, uint64_t *took_ms)
{
	struct gw_config *cfg = NULL;
	uint64_t t0 = evloop_now_ns();
	struct json_object *errors = out->errors;
	bool own_errors = !errors;

	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)(t0 / 1000));
	free(d->reload_errors);
	d->reload_errors = NULL;
	if (load_config(d->opts.config_path, &cfg, &d->reload_errors) < 0) {
		d->reload_failures++;
		*took_ms = (evloop_now_ns() - t0) / 1000000;
		log_event(LOG_ERR, IBGW_MSGID_RELOAD,
			  "reload of %s failed; the running config is unchanged",
			  d->opts.config_path);
		sd_notify(0, "READY=1\nSTATUS=running; last reload failed");
		return -1;
	}
	if (own_errors) /* SIGHUP: nobody asked, but the errors still count */
		out->errors = json_object_new_array();
	if (control_changed(cfg, d->cfg)) {
		log_notice("control socket changes take effect at the next start");
		gw_reload_note(out, false, "control sockets: take effect at the next start");
	}
	if (strcmp(cfg->user, d->cfg->user) || strcmp(cfg->group, d->cfg->group)) {
		log_notice("gateway.user and gateway.group changes take effect at the next start");
		gw_reload_note(out, false,
			       "gateway.user, gateway.group: take effect at the next start");
	}
	if (strcmp(cfg->name, d->cfg->name))
		gw_reload_note(out, false, "gateway name %s (was %s)", cfg->name, d->cfg->name);
	if (cfg->log_level != d->cfg->log_level)
		gw_reload_note(out, false, "log level %s", log_level_name(cfg->log_level));
	log_set_level(cfg->log_level);
	if (d->dp)
		gw_dp_reconfigure(d->dp, cfg, out);
	gw_config_free(d->cfg);
	d->cfg = cfg;
	d->reloads++;
	start_metrics(d);
	d->reload_errors = join_errors(out->errors);
	if (own_errors) {
		json_object_put(out->errors);
		out->errors = NULL;
	}
	*took_ms = (evloop_now_ns() - t0) / 1000000;
	/* The control thread did nothing else meanwhile (heartbeats included): worth
	 * knowing next to the failover pair's dead interval. */
	if (d->reload_errors) {
		log_event(LOG_ERR, IBGW_MSGID_RELOAD,
			  "reloaded %s in %llu ms, but not as written: %s", d->opts.config_path,
			  (unsigned long long)*took_ms, d->reload_errors);
		sd_notify(0, "READY=1\nSTATUS=running; last reload not applied as written");
		return -2;
	}
	log_event(LOG_NOTICE, IBGW_MSGID_RELOAD, "reloaded %s in %llu ms", d->opts.config_path,
		  (unsigned long long)*took_ms);
	sd_notify(0, "READY=1\nSTATUS=running");
	return 0;
}

int gw_daemon_reload(struct gw_daemon *d)
{
	struct gw_reload_outcome out = { NULL, NULL };
	uint64_t ms;

	return reload(d, &out, &ms) == 0 ? 0 : -1;
}

/* --- signals, watchdog --- */

static void on_signal(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct gw_daemon *d = arg;
	struct signalfd_siginfo si;
	(void)events;

	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGHUP:
			log_notice("SIGHUP: reloading %s", d->opts.config_path);
			gw_daemon_reload(d);
			break;
		case SIGTERM:
		case SIGINT:
			log_notice("%s: shutting down", strsignal((int)si.ssi_signo));
			sd_notify(0, "STOPPING=1");
			evloop_stop(loop);
			break;
		}
	}
}

static void on_watchdog(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

/* A group name to its gid; "" is (gid_t)-1 (the daemon's group). */
static int socket_gid(const char *name, gid_t *gid)
{
	struct group *g;

	*gid = (gid_t)-1;
	if (!name[0])
		return 0;
	g = getgrnam(name);
	if (!g) {
		log_error("control socket group '%s' does not exist", name);
		return -1;
	}
	*gid = g->gr_gid;
	return 0;
}

/*
 * The control sockets, each with its own mode, group and client limit (docs/config.md
 * "control"). They are made once, at start: a reload that changes the control section
 * says the change waits for the next start.
 */
static int open_sockets(struct gw_daemon *d)
{
	const struct gw_config *cfg = d->cfg;
	const char *path = d->opts.socket_override ? d->opts.socket_override : cfg->socket;
	const char *ro_group =
	    cfg->readonly_socket_group[0] ? cfg->readonly_socket_group : cfg->socket_group;
	struct ctl_listen_cfg priv = { .path = path,
				       .mode = cfg->socket_mode,
				       .max_clients = cfg->max_clients };
	struct ctl_listen_cfg ro = { .path = cfg->readonly_socket,
				     .mode = cfg->readonly_socket_mode,
				     .read_only = true,
				     .max_clients = cfg->readonly_max_clients };
	int err;

	if (socket_gid(cfg->socket_group, &priv.gid) < 0 || socket_gid(ro_group, &ro.gid) < 0)
		return -1;
	/* The socket's folder (/run/ibgw) is made by systemd's RuntimeDirectory; make it
	 * here too for a daemon started by hand. */
	char dir[GW_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			log_errno(LOG_WARNING, errno, "cannot create %s", dir);
	}
	err = ctl_server_new(d->loop, commands, sizeof(commands) / sizeof(commands[0]), d, &d->ctl);
	if (err < 0)
		return -1;
	if (ctl_server_listen(d->ctl, &priv) < 0)
		return -1;
	if (cfg->readonly_socket[0] && !d->opts.socket_override &&
	    ctl_server_listen(d->ctl, &ro) < 0)
		return -1;
	log_info("control socket %s", path);
	return 0;
}

/* --- privileges (ibgwd(8) "Privileges") --- */

/*
 * What the process keeps after gateway.user: raw Ethernet sockets and IPoIB's packet
 * sockets (CAP_NET_RAW), netlink route and link writes, AF_XDP and promiscuous mode
 * (CAP_NET_ADMIN), and memory the HCA pins (CAP_IPC_LOCK). A reload that adds a link or
 * an interface opens its sockets with these; nothing else is done after start that needs
 * more.
 */
static const struct {
	int cap;
	const char *name;
} kept_caps[] = {
	{ CAP_NET_ADMIN, "cap_net_admin" },
	{ CAP_NET_RAW, "cap_net_raw" },
	{ CAP_IPC_LOCK, "cap_ipc_lock" },
};

/* Threads of this process; capabilities are per thread, so the drop must come first. */
static unsigned count_threads(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	if (!dir)
		return 0;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/*
 * The real-time priorities (failover.rt_priority for the heartbeat thread,
 * gateway.worker_rt_priority) as the user the threads will run as: the drop takes
 * CAP_SYS_NICE away and RLIMIT_RTPRIO stays, so the limit is raised here, while root
 * (under systemd the unit's LimitRTPRIO= has done it). Where it cannot be (no
 * CAP_SYS_RESOURCE and a lower hard limit: a container, the rack), the drop keeps
 * CAP_SYS_NICE instead (*keep_nice), and says so.
 */
static void raise_rt_limit(const struct gw_config *cfg, bool *keep_nice)
{
	unsigned prio = gw_config_rt_priority_max(cfg);
	int ret;

	*keep_nice = false;
	if (!prio || !cfg->user[0])
		return;
	ret = rt_limit_raise(prio);
	if (ret < 0) {
		log_errno(
		    LOG_NOTICE, -ret,
		    "SCHED_FIFO priority %u (failover.rt_priority, gateway.worker_rt_priority): "
		    "RLIMIT_RTPRIO cannot be raised to it (LimitRTPRIO= under systemd); keeping "
		    "cap_sys_nice instead",
		    prio);
		*keep_nice = true;
	}
}

/*
 * An af_xdp interface loads its XDP program when its port opens, after the drop: that
 * needs CAP_BPF (with CAP_NET_ADMIN), kept only when the config at start has one (a
 * reload that adds the first af_xdp interface cannot open it: the port says why).
 */
static bool uses_af_xdp(const struct gw_config *cfg)
{
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
		if (cfg->eth_ifs[i].backend == GW_ETH_BACKEND_AF_XDP)
			return true;
	return false;
}

/*
 * Become cfg->user (and cfg->group, or the user's login group, plus the user's other
 * groups) keeping only kept_caps (and cap_sys_nice with keep_nice: raise_rt_limit;
 * cap_bpf with an af_xdp interface: uses_af_xdp),
 * permitted and effective, none inheritable or ambient.
 * Called once, after the control sockets are made (their chown needs CAP_CHOWN) and
 * before the data plane starts its threads, which inherit the result. Not undone by a
 * reload: a changed user or group waits for the next start.
 */
static int drop_privileges(const struct gw_config *cfg, bool keep_nice)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	char caps[64] = "";
	struct passwd *pw;
	struct group *gr;
	uid_t uid;
	gid_t gid;

	if (!cfg->user[0])
		return 0;
	pw = getpwnam(cfg->user);
	if (!pw) {
		log_error("gateway.user: no user '%s'", cfg->user);
		return -1;
	}
	uid = pw->pw_uid;
	gid = pw->pw_gid;
	if (cfg->group[0]) {
		gr = getgrnam(cfg->group);
		if (!gr) {
			log_error("gateway.group: no group '%s'", cfg->group);
			return -1;
		}
		gid = gr->gr_gid;
	}
	if (count_threads() > 1)
		log_warning("gateway.user: %u threads at the drop; only this one keeps the "
			    "capabilities",
			    count_threads());
	if (initgroups(cfg->user, gid) < 0 || setgid(gid) < 0 ||
	    prctl(PR_SET_KEEPCAPS, 1L, 0L, 0L, 0L) < 0 || setuid(uid) < 0) {
		log_errno(LOG_ERR, errno, "gateway.user: cannot become %s (uid %u, gid %u)",
			  cfg->user, (unsigned)uid, (unsigned)gid);
		return -1;
	}
	for (size_t i = 0; i < sizeof(kept_caps) / sizeof(kept_caps[0]); i++) {
		data[kept_caps[i].cap / 32].permitted |= 1u << (kept_caps[i].cap % 32);
		snprintf(caps + strlen(caps), sizeof(caps) - strlen(caps), "%s%s", i ? "," : "",
			 kept_caps[i].name);
	}
	if (uses_af_xdp(cfg)) {
		data[CAP_BPF / 32].permitted |= 1u << (CAP_BPF % 32);
		snprintf(caps + strlen(caps), sizeof(caps) - strlen(caps), ",cap_bpf");
	}
	if (keep_nice) {
		data[CAP_SYS_NICE / 32].permitted |= 1u << (CAP_SYS_NICE % 32);
		snprintf(caps + strlen(caps), sizeof(caps) - strlen(caps), ",cap_sys_nice");
	}
	data[0].effective = data[0].permitted;
	data[1].effective = data[1].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0) {
		log_errno(LOG_ERR, errno, "gateway.user: cannot keep %s", caps);
		return -1;
	}
	/* Nothing this process executes inherits them, and it cannot get others back. */
	prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0L, 0L, 0L);
	/* The drop cleared "dumpable": /proc/PID would be root's and core dumps off. The
	 * process holds nothing its own user may not read. */
	prctl(PR_SET_DUMPABLE, 1L, 0L, 0L, 0L);
	log_notice("running as user %s (uid %u, gid %u) with capabilities %s", cfg->user,
		   (unsigned)uid, (unsigned)gid, caps);
	return 0;
}

/* --- metrics endpoint (docs/operations.md "Metrics") --- */

/* The daemon's own families, then the data plane's. */
static int render_metrics(void *ctx, FILE *out)
{
	struct gw_daemon *d = ctx;
	struct ctl_server_stats cs;

	metrics_family(out, "ibgw_build_info", "gauge", "The running ibgwd's version (value 1).");
	fprintf(out, "ibgw_build_info{version=\"%s\"} 1\n", IBGW_VERSION);
	metrics_single(out, "ibgw_start_time_seconds", "gauge",
		       "When the daemon started, in seconds since the Unix epoch.",
		       (uint64_t)d->started);
	metrics_single(out, "ibgw_config_reloads_total", "counter",
		       "Configuration reloads that succeeded.", d->reloads);
	metrics_single(out, "ibgw_config_reload_failures_total", "counter",
		       "Configuration reloads refused (the running config stayed).",
		       d->reload_failures);
	metrics_single(out, "ibgw_config_last_reload_successful", "gauge",
		       "0 when the last reload was refused, else 1.", d->reload_errors == NULL);
	ctl_server_get_stats(d->ctl, &cs);
	metrics_single(out, "ibgw_control_connections_total", "counter",
		       "Connections the control sockets accepted.", cs.accepted);
	metrics_single(out, "ibgw_control_connections_rejected_total", "counter",
		       "Control connections refused: too many at once.", cs.rejected_busy);
	metrics_single(out, "ibgw_control_requests_total", "counter", "Control requests handled.",
		       cs.requests);
	metrics_single(out, "ibgw_control_bad_requests_total", "counter",
		       "Control requests refused as malformed.", cs.bad_requests);
	metrics_single(out, "ibgw_control_denied_total", "counter",
		       "Control requests refused: a write request on the read-only socket, or a "
		       "peer not allowed on the privileged one.",
		       cs.denied);
	return gw_dp_metrics(d->dp, out);
}

/* --- status page (metrics.status_page; docs/operations.md "Status page") --- */

/* Records per table on the page: a browser polling every 2 s cannot show a million routes,
 * and the walk runs on the control thread; the page says when a table was cut. */
#define STATUS_MAX_RECORDS 1000

/*
 * status[key] = the records handler h gives (gwctl's show, the same JSON), plus
 * status[key_truncated] when cut at STATUS_MAX_RECORDS and status[key_error] when it
 * failed (failover not configured, say).
 */
static void status_table(struct gw_daemon *d, struct json_object *status, const char *key,
			 ctl_handler_fn h, struct json_object *args)
{
	struct json_object *arr = json_object_new_array();
	bool cut = false;
	char k[64];
	int st;

	if (!arr)
		return;
	st = ctl_reply_collect(h, d, args, STATUS_MAX_RECORDS, arr, &cut);
	json_object_object_add(status, key, arr);
	if (cut) {
		snprintf(k, sizeof(k), "%s_truncated", key);
		json_object_object_add(status, k, json_object_new_boolean(true));
	}
	if (st != CTL_OK) {
		snprintf(k, sizeof(k), "%s_error", key);
		json_object_object_add(status, k, json_object_new_int(st));
	}
}

/*
 * /status.json: one object of the tables gwctl shows, built by the same handlers on the
 * control thread (metrics_http calls this from the loop, as gwctl's requests), so the HTTP
 * side never reads the data plane itself.
 */
static int render_status(void *ctx, FILE *out)
{
	struct gw_daemon *d = ctx;
	struct json_object *o = json_object_new_object(), *stats = json_object_new_object();
	struct timespec now;
	const char *s;
	int err = 0;

	if (!o || !stats) {
		json_object_put(o);
		json_object_put(stats);
		return -ENOMEM;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	json_object_object_add(o, "name", json_object_new_string(d->cfg->name));
	json_object_object_add(o, "version", json_object_new_string(IBGW_VERSION));
	json_object_object_add(o, "started", json_object_new_int64(d->started));
	json_object_object_add(
	    o, "uptime_s",
	    json_object_new_int64((int64_t)((evloop_now_ms() - d->started_ms) / 1000)));
	json_object_object_add(
	    o, "now_ms", json_object_new_int64((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000));
	json_object_object_add(stats, "stats", json_object_new_boolean(true));
	status_table(d, o, "links", cmd_show_links, stats);
	json_object_put(stats);
	status_table(d, o, "routes", cmd_show_routes, NULL);
	status_table(d, o, "neighbours", cmd_show_neighbours, NULL);
	status_table(d, o, "paths", cmd_show_paths, NULL);
	status_table(d, o, "mcast", cmd_show_mcast, NULL);
	status_table(d, o, "stats", cmd_show_stats, NULL);
	status_table(d, o, "failover", cmd_show_ha, NULL);
	s = json_object_to_json_string_ext(o,
					   JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!s || fputs(s, out) == EOF)
		err = -ENOMEM;
	json_object_put(o);
	return err;
}

static void stop_metrics(struct gw_daemon *d)
{
	metrics_http_free(d->metrics);
	d->metrics = NULL;
}

/*
 * Serve cfg->metrics.listen ("": none); at start and at every reload. A failed bind
 * leaves the daemon running without the endpoint: forwarding matters more than its
 * metrics, and a target that cannot be scraped is itself Prometheus's alert (up == 0).
 * A reload tries again. The old endpoint closes before the new one opens, so that an
 * address change on the same port (0.0.0.0:9464 -> 127.0.0.1:9464) can bind.
 */
static void start_metrics(struct gw_daemon *d)
{
	const char *listen = d->cfg->metrics.listen;

	if (!d->metrics || strcmp(metrics_http_listen(d->metrics), listen)) {
		stop_metrics(d);
		if (listen[0] &&
		    metrics_http_new(d->loop, listen, render_metrics, d, &d->metrics) < 0) {
			d->metrics = NULL;
			log_warning("running without the metrics endpoint; a reload tries %s again",
				    listen);
		}
	}
	if (d->metrics) /* on or off with every reload, as the config says */
		metrics_http_set_status(d->metrics,
					d->cfg->metrics.status_page ? render_status : NULL);
}

int gw_daemon_new(const struct gw_daemon_opts *opts, struct gw_daemon **out)
{
	struct gw_daemon *d = calloc(1, sizeof(*d));
	char *errors = NULL;
	sigset_t mask;
	uint64_t wd_usec;
	bool keep_nice;
	int err = -EIO;

	if (!d)
		return -ENOMEM;
	d->opts = *opts;
	d->sigfd = -1;
	d->started = time(NULL);
	d->started_ms = evloop_now_ms();
	if (load_config(opts->config_path, &d->cfg, &errors) < 0) {
		free(errors);
		err = -EINVAL;
		goto fail;
	}
	if (d->cfg->log_target != LOG_TARGET_AUTO)
		log_init("ibgwd", d->cfg->log_target, d->cfg->log_level);
	else
		log_set_level(d->cfg->log_level);
	if (evloop_new(&d->loop) < 0)
		goto fail;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* threads started later inherit this */
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sigfd < 0 || evloop_add_fd(d->loop, d->sigfd, EPOLLIN, on_signal, d) < 0) {
		log_errno(LOG_ERR, errno, "signalfd");
		goto fail;
	}
	raise_rt_limit(d->cfg, &keep_nice);
	if (open_sockets(d) < 0 || drop_privileges(d->cfg, keep_nice) < 0)
		goto fail;
	err = gw_dp_start(d->cfg, d->loop, &d->dp);
	if (err < 0) {
		d->dp = NULL;
		log_errno(LOG_ERR, -err, "data plane");
		err = -EIO;
		goto fail;
	}
	start_metrics(d);
	err = -EIO;
	if (sd_watchdog_enabled(0, &wd_usec) > 0) {
		d->watchdog = evtimer_new(d->loop, on_watchdog, d);
		if (!d->watchdog)
			goto fail;
		evtimer_start(d->watchdog, 0, wd_usec / 2000);
	}
	*out = d;
	return 0;
fail:
	gw_daemon_free(d);
	return err;
}

int gw_daemon_run(struct gw_daemon *d)
{
	log_notice("ibgwd %s started (%s, %u IPoIB links, %u Ethernet interfaces)", IBGW_VERSION,
		   d->cfg->source, d->cfg->n_ipoib_links, d->cfg->n_eth_ifs);
	sd_notify(0, "READY=1\nSTATUS=running");
	if (evloop_run(d->loop) < 0) {
		log_errno(LOG_ERR, errno, "event loop");
		return 1;
	}
	log_notice("stopped");
	return d->exit_status;
}

void gw_daemon_free(struct gw_daemon *d)
{
	if (!d)
		return;
	stop_metrics(d); /* its pages read the control server and the data plane */
	ctl_server_free(d->ctl);
	gw_dp_stop(d->dp);
	evtimer_free(d->watchdog);
	if (d->sigfd >= 0)
		close(d->sigfd);
	evloop_free(d->loop);
	gw_config_free(d->cfg);
	free(d->reload_errors);
	free(d);
}
