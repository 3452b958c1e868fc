/*
 * gwctl capture, the client's side (see ctl_capture.h; the daemon's is
 * gateway/dp_capture.c, the records' format is there).
 */
#include "mgmt/ctl_capture.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "lib/base64.h"
#include "lib/ib_pcap.h"
#include "mgmt/ctl_args.h"
#include "mgmt/ctl_client.h"

struct capture_run {
	struct ctl_client *cl;
	int fd;
	FILE *msgs;
	bool header, failed;
	uint8_t *buf;
	size_t cap;
	struct json_object *last; /* the closing record */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Stop reading: the daemon sees the connection go and ends the capture. */
static void give_up(struct capture_run *r, const char *fmt, const char *arg)
{
	if (!r->failed)
		fprintf(r->msgs, fmt, arg);
	r->failed = true;
	shutdown(r->cl->fd, SHUT_RDWR);
}

static int64_t member(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

static void on_record(struct json_object *rec, void *arg)
{
	struct capture_run *r = arg;
	struct json_object *v;

	if (r->failed)
		return;
	if (json_object_object_get_ex(rec, "linktype", &v)) {
		uint8_t h[IB_PCAP_FILE_HDR_LEN];

		(void)ib_pcap_file_header(h, sizeof(h), (uint32_t)member(rec, "snaplen"),
					  (uint32_t)json_object_get_int64(v));
		r->header = true;
		if (write_all(r->fd, h, sizeof(h)) < 0)
			give_up(r, "gwctl: capture: cannot write the file: %s\n", strerror(errno));
	} else if (json_object_object_get_ex(rec, "pcap", &v)) {
		const char *t = json_object_get_string(v);
		size_t len = (size_t)json_object_get_string_len(v), need = len / 4 * 3;
		long n;

		if (!r->header) {
			give_up(r, "gwctl: capture: %s\n", "records before the header");
			return;
		}
		if (need > r->cap) {
			uint8_t *b = realloc(r->buf, need);

			if (!b) {
				give_up(r, "gwctl: capture: %s\n", "out of memory");
				return;
			}
			r->buf = b;
			r->cap = need;
		}
		n = base64_decode(t, len, r->buf, r->cap);
		if (n < 0)
			give_up(r, "gwctl: capture: %s\n", "malformed data from the daemon");
		else if (write_all(r->fd, r->buf, (size_t)n) < 0)
			give_up(r, "gwctl: capture: cannot write the file: %s\n", strerror(errno));
	} else if (json_object_object_get_ex(rec, "ended", &v)) {
		json_object_put(r->last);
		r->last = json_object_get(rec);
	}
}

int ctl_capture_run(struct ctl_client *cl, const struct ctl_capture *a, int fd, FILE *msgs)
{
	struct capture_run r = { .cl = cl, .fd = fd, .msgs = msgs };
	struct json_object *args = ctl_capture_to_json(a);
	const char *error = "";
	int status;

	if (!args) {
		fprintf(msgs, "gwctl: out of memory\n");
		return -1;
	}
	status = ctl_client_request(cl, CTL_CAPTURE, args, on_record, &r, &error);
	json_object_put(args);
	free(r.buf);
	if (r.failed) {
		json_object_put(r.last);
		return -1;
	}
	if (status != CTL_OK) {
		fprintf(msgs, "gwctl: %s\n", error[0] ? error : "capture failed");
		json_object_put(r.last);
		return -1;
	}
	if (r.last) {
		struct json_object *why;

		json_object_object_get_ex(r.last, "ended", &why);
		fprintf(msgs,
			"%lld packets captured on %s (%s), %lld filtered out, %lld dropped by "
			"ibgwd\n",
			(long long)member(r.last, "captured"), a->dev, json_object_get_string(why),
			(long long)member(r.last, "filtered"),
			(long long)member(r.last, "dropped"));
		json_object_put(r.last);
	}
	return 0;
}
