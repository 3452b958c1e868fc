/*
 * Names of the frame parser's results; the parser itself is static inline in
 * pkt/eth_frame.h (it runs once per received frame).
 */
#include "pkt/eth_frame.h"

const char *ethf_result_name(enum ethf_result r)
{
	static const char *const names[ETHF_ERR_MAX] = {
		[ETHF_OK] = "ok",
		[ETHF_ERR_RUNT] = "runt",
		[ETHF_ERR_TAG_RUNT] = "tag_runt",
		[ETHF_ERR_LLC] = "llc",
		[ETHF_ERR_BAD_TYPE] = "bad_type",
		[ETHF_ERR_TAG_NESTING] = "tag_nesting",
		[ETHF_ERR_TOO_MANY_TAGS] = "too_many_tags",
		[ETHF_ERR_VID_RESERVED] = "vid_reserved",
		[ETHF_ERR_SRC_MULTICAST] = "src_multicast",
	};

	if ((unsigned)r >= ETHF_ERR_MAX)
		return "unknown";
	return names[r];
}
