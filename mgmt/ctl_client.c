/*
 * Blocking control-protocol client. Replies are checked as strictly as requests are on
 * the daemon's side: magic, version, sequence number, frame type and size.
 */
#include "mgmt/ctl_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

int ctl_client_connect(struct ctl_client *c, const char *path, int timeout_ms)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	c->fd = -1;
	c->seq = 0;
	c->timeout_ms = timeout_ms;
	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int err = errno;

		close(c->fd);
		c->fd = -1;
		return -err;
	}
	return 0;
}

void ctl_client_close(struct ctl_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int read_full(struct ctl_client *c, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		int r = poll(&pfd, 1, c->timeout_ms);
		ssize_t n;

		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		n = read(c->fd, p, len);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Read reply frames for request seq until its END frame. An END frame with seq 0 is
 * the daemon's answer to the connection itself, sent before it closes it (too many
 * clients, not our protocol): its status and message are the answer.
 */
static int read_reply(struct ctl_client *c, uint32_t seq, ctl_record_fn on_record, void *arg,
		      char *errbuf, size_t errlen)
{
	uint8_t hdr[CTL_HDR_LEN];
	int err;

	for (;;) {
		struct ctl_hdr rh;
		struct json_object *obj = NULL;
		char why[CTL_WHY_LEN] = "";
		uint8_t *rbody;

		err = read_full(c, hdr, sizeof(hdr));
		if (err < 0) {
			snprintf(errbuf, errlen, "no reply from the daemon: %s",
				 err == -ECONNRESET ? "connection closed" : strerror(-err));
			return err;
		}
		err = ctl_hdr_decode(hdr, CTL_MAX_REPLY, &rh);
		if (err < 0 || (rh.type != CTL_MSG_RECORD && rh.type != CTL_MSG_END) ||
		    (rh.seq != seq && !(rh.seq == 0 && rh.type == CTL_MSG_END))) {
			snprintf(errbuf, errlen, "malformed reply from the daemon");
			return -EPROTO;
		}
		rbody = malloc(rh.len ? rh.len : 1);
		if (!rbody) {
			snprintf(errbuf, errlen, "out of memory reading the reply");
			return -ENOMEM;
		}
		err = read_full(c, rbody, rh.len);
		if (err == 0 && ctl_body_parse(rbody, rh.len, &obj, why) < 0)
			err = -EPROTO;
		free(rbody);
		if (err < 0 || !obj) {
			snprintf(errbuf, errlen, "malformed reply from the daemon%s%s",
				 why[0] ? ": " : "", why);
			json_object_put(obj);
			return err < 0 ? err : -EPROTO;
		}
		if (rh.type == CTL_MSG_RECORD) {
			if (on_record)
				on_record(obj, arg);
			json_object_put(obj);
			continue;
		}
		struct json_object *st, *msg;
		int status = CTL_EFAILED;

		if (json_object_object_get_ex(obj, "status", &st))
			status = json_object_get_int(st);
		if (json_object_object_get_ex(obj, "error", &msg))
			snprintf(errbuf, errlen, "%s", json_object_get_string(msg));
		json_object_put(obj);
		return status;
	}
}

int ctl_client_request(struct ctl_client *c, uint16_t type, struct json_object *args,
		       ctl_record_fn on_record, void *arg, const char **error)
{
	static char errbuf[512];
	const char *body = args ? json_object_to_json_string_ext(
				      args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
				: "";
	size_t len = strlen(body);
	struct ctl_hdr h = { CTL_MAGIC, CTL_VERSION, type, (uint32_t)len, ++c->seq };
	uint8_t hdr[CTL_HDR_LEN];
	int err;

	*error = errbuf;
	errbuf[0] = '\0';
	if (len > CTL_MAX_REQUEST) {
		snprintf(errbuf, sizeof(errbuf), "request too large");
		return -EMSGSIZE;
	}
	ctl_hdr_encode(&h, hdr);
	if ((err = write_full(c->fd, hdr, sizeof(hdr))) < 0 ||
	    (err = write_full(c->fd, body, len)) < 0) {
		/* The daemon may have refused the connection and said why before closing. */
		int status = read_reply(c, 0, NULL, NULL, errbuf, sizeof(errbuf));

		if (status >= 0)
			return status;
		snprintf(errbuf, sizeof(errbuf), "cannot send request: %s", strerror(-err));
		return err;
	}
	return read_reply(c, h.seq, on_record, arg, errbuf, sizeof(errbuf));
}
