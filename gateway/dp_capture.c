/*
 * gwctl capture: a packet capture of one interface streamed to the client (privileged
 * socket only). The engine's capture (engine/capture.h) fills per-worker rings; this
 * file compiles the filter with libpcap, starts the capture, and serves it as a
 * streamed reply (mgmt/ctl_server.h), every CTL_STREAM_WAIT_MS or as fast as the client
 * reads:
 *   {"capture": DEV, "linktype": 1|242, "snaplen": N}       first
 *   {"pcap": BASE64, "packets": N}                           pcap records, in time order
 *   {"captured": N, "filtered": N, "dropped": N, "ended": WHY}   last
 * The client writes the pcap file header from the first record and the decoded records
 * after it. The capture ends at its count or duration, when the interface goes away
 * (a reload), or when the client does (its cursor is freed): the workers stop copying
 * at once.
 *
 * Threads: control thread. The control server is freed before the data plane
 * (gateway/daemon.c), so a capture's end always finds its engine.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <pcap/pcap.h>

#include "engine/capture.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_json.h"
#include "lib/base64.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "mgmt/ctl_args.h"
#include "mgmt/ctl_server.h"

/* pcap octets per record (96 KiB of base64): at least one record of the largest packet
 * (a 64 KiB GSO frame), which fwd_capture_read would otherwise never hand out. */
#define PIECE_RAW (72u * 1024)
_Static_assert(PIECE_RAW >= FWD_CAPTURE_REC_HDR_LEN + FWD_CAPTURE_MAX_PACKET,
	       "a piece holds the largest record");

struct capture_cursor {
	struct gw_dp *dp;
	struct fwd_capture *cap;
	char dev[CTL_NAME_MAX];
	uint32_t ifindex;
	enum fwd_if_kind kind;
	uint64_t count, captured;
	uint64_t deadline_ns; /* 0: none */
	uint8_t raw[PIECE_RAW];
	char text[4 * (PIECE_RAW / 3) + 8];
};

static void cursor_free(void *arg)
{
	struct capture_cursor *c = arg;
	struct fwd_capture_stats st;

	fwd_capture_stats(c->cap, &st);
	log_info("capture on %s ended: %llu packets captured, %llu filtered out, %llu dropped "
		 "(ring full)",
		 c->dev, (unsigned long long)c->captured, (unsigned long long)st.filtered,
		 (unsigned long long)st.dropped);
	fwd_capture_stop(c->dp->e, c->cap);
	free(c);
}

/* Still the interface the capture began on? A reload may remove it or give its index
 * to another. */
static bool same_interface(const struct capture_cursor *c)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(c->dp->e), c->ifindex);

	return f && f->kind == c->kind && !strcmp(f->name, c->dev);
}

static int finish(struct capture_cursor *c, struct ctl_reply *r, const char *why)
{
	struct json_object *o = json_object_new_object();
	struct fwd_capture_stats st;

	fwd_capture_stats(c->cap, &st);
	add_int(o, "captured", (int64_t)c->captured);
	add_int(o, "filtered", (int64_t)st.filtered);
	/* Matched, but a worker's ring was full (the client or this thread fell behind). */
	add_int(o, "dropped", (int64_t)st.dropped);
	json_object_object_add(o, "ended", json_object_new_string(why));
	return ctl_reply_record(r, o) < 0 ? CTL_EFAILED : CTL_OK;
}

static int capture_next(void *ctx, void *cursor, struct ctl_reply *r)
{
	struct capture_cursor *c = cursor;
	bool any = false;
	(void)ctx;

	while (!ctl_reply_full(r)) {
		uint64_t packets;
		uint64_t left = c->count ? c->count - c->captured : UINT64_MAX;
		size_t n = fwd_capture_read(c->cap, c->raw, sizeof(c->raw), left, &packets);
		struct json_object *o;

		if (!packets)
			break;
		base64_encode(c->raw, n, c->text);
		o = json_object_new_object();
		json_object_object_add(o, "pcap", json_object_new_string(c->text));
		add_int(o, "packets", (int64_t)packets);
		if (ctl_reply_record(r, o) < 0)
			return CTL_EFAILED;
		c->captured += packets;
		any = true;
		if (c->count && c->captured >= c->count)
			return finish(c, r, "count");
	}
	if (!same_interface(c))
		return finish(c, r, "interface gone");
	if (c->deadline_ns && evloop_now_ns() >= c->deadline_ns)
		return finish(c, r, "duration");
	return any ? CTL_MORE : CTL_WAIT;
}

/* libpcap compiles; Ethernet's link type for both kinds (engine/capture.h says why). */
static int compile_filter(const char *expr, uint32_t snaplen, struct bpf_program *prog, char *err,
			  size_t errlen)
{
	pcap_t *p = pcap_open_dead(DLT_EN10MB, (int)snaplen);
	int ret = 0;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (pcap_compile(p, prog, expr, 1, PCAP_NETMASK_UNKNOWN) < 0) {
		snprintf(err, errlen, "%s", pcap_geterr(p));
		ret = -EINVAL;
	}
	pcap_close(p);
	return ret;
}

int gw_dp_capture(struct gw_dp *dp, const struct ctl_capture *a, struct ctl_reply *r)
{
	const struct fwd_snap *s = fwd_engine_current(dp->e);
	struct fwd_capture_config cfg = { .snaplen =
					      a->snaplen ? a->snaplen : FWD_CAPTURE_MAX_PACKET };
	struct bpf_program prog = { 0 };
	struct capture_cursor *c;
	struct json_object *o;
	char err[PCAP_ERRBUF_SIZE];
	int ret;

	for (uint32_t k = 1; k < FWD_IF_MAX && !cfg.ifindex; k++) {
		const struct fwd_if *f = fwd_snap_if(s, k);

		if (f && f->kind != FWD_IF_NONE && !strcmp(f->name, a->dev))
			cfg.ifindex = k;
	}
	if (!cfg.ifindex)
		return ctl_reply_error(r, CTL_EBADREQ, "no interface '%s' in the data plane",
				       a->dev);
	if (a->filter[0] && compile_filter(a->filter, cfg.snaplen, &prog, err, sizeof(err)) < 0)
		return ctl_reply_error(r, CTL_EBADREQ, "filter: %s", err);
	cfg.filter = prog.bf_insns;
	cfg.filter_len = prog.bf_len;
	cfg.dirs = (a->dirs & CTL_CAPTURE_DIR_IN ? FWD_CAPTURE_RX : 0) |
		   (a->dirs & CTL_CAPTURE_DIR_OUT ? FWD_CAPTURE_TX : 0);
	if (!cfg.dirs)
		cfg.dirs = FWD_CAPTURE_RX | FWD_CAPTURE_TX;
	c = calloc(1, sizeof(*c));
	if (!c) {
		pcap_freecode(&prog);
		return ctl_reply_error(r, CTL_EFAILED, "out of memory");
	}
	ret = fwd_capture_start(dp->e, &cfg, &c->cap);
	pcap_freecode(&prog);
	if (ret < 0) {
		free(c);
		if (ret == -EBUSY)
			return ctl_reply_error(
			    r, CTL_EFAILED, "a capture runs on %s already (one at a time)", a->dev);
		return ctl_reply_error(r, CTL_EFAILED, "capture on %s: %s", a->dev, strerror(-ret));
	}
	c->dp = dp;
	c->ifindex = cfg.ifindex;
	c->kind = fwd_snap_if(s, cfg.ifindex)->kind;
	snprintf(c->dev, sizeof(c->dev), "%s", a->dev);
	c->count = a->count;
	if (a->duration_ms)
		c->deadline_ns = evloop_now_ns() + (uint64_t)a->duration_ms * 1000000;
	log_info("capture on %s started%s%s", a->dev, a->filter[0] ? ": " : "", a->filter);
	o = json_object_new_object();
	json_object_object_add(o, "capture", json_object_new_string(a->dev));
	add_int(o, "linktype", fwd_capture_linktype(c->cap));
	add_int(o, "snaplen", cfg.snaplen);
	if (ctl_reply_record(r, o) < 0) {
		cursor_free(c);
		return CTL_EFAILED;
	}
	ctl_reply_stream(r, capture_next, c, cursor_free);
	return CTL_OK;
}
