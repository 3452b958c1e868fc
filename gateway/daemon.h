/*
 * The running daemon: the composition root that owns the config, the control thread's
 * event loop, the control sockets, signal handling and the systemd protocol.
 *
 * Thread ownership: everything here belongs to the control thread.
 */
#ifndef IBGW_GATEWAY_DAEMON_H
#define IBGW_GATEWAY_DAEMON_H

#include <stdbool.h>

struct gw_daemon;

struct gw_daemon_opts {
	const char *config_path;
	const char *socket_override; /* -S: control socket path instead of the config's */
	bool foreground;
};

/* Load the config, open the control sockets. Returns 0, -EINVAL when the config does
 * not load, or another -errno; every failure is logged. */
int gw_daemon_new(const struct gw_daemon_opts *opts, struct gw_daemon **out);
/* Run until SIGTERM/SIGINT; returns the process exit status. */
int gw_daemon_run(struct gw_daemon *d);
void gw_daemon_free(struct gw_daemon *d);

/* Reload the config file: parse and validate first, swap only if it is clean.
 * Returns 0, or -1 with every error logged (and kept for the control reply). */
int gw_daemon_reload(struct gw_daemon *d);

#endif
