/*
 * Client side of the control protocol: connect, send one request, read its records and
 * its END frame. Blocking, with a timeout: gwctl and tests use it.
 */
#ifndef IBGW_MGMT_CTL_CLIENT_H
#define IBGW_MGMT_CTL_CLIENT_H

#include <stdint.h>

#include "mgmt/ctl_proto.h"

struct json_object;

struct ctl_client {
	int fd;
	uint32_t seq;
	int timeout_ms;
};

/* Returns 0 or -errno (-ENOENT / -ECONNREFUSED: no daemon on that socket). */
int ctl_client_connect(struct ctl_client *c, const char *path, int timeout_ms);
void ctl_client_close(struct ctl_client *c);

/* Called for each record; the record is borrowed (freed after the call). */
typedef void (*ctl_record_fn)(struct json_object *rec, void *arg);

/*
 * Send a request (args may be NULL) and deliver its records. Returns the END frame's
 * status (CTL_OK or a ctl_status) with *error pointing to a static copy of its text,
 * or -errno for a transport or protocol failure (error then describes it).
 */
int ctl_client_request(struct ctl_client *c, uint16_t type, struct json_object *args,
		       ctl_record_fn on_record, void *arg, const char **error);

#endif
