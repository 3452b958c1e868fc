/*
 * config_bench: loading a large configuration (gw_config_load_buffer: parse, schema,
 * every check) against libyaml parsing the same text into events and nothing else, in
 * the same run. A reload runs the load on the control thread, which sends the failover
 * pair's heartbeats; the ratio says how much of a reload's stall is ours.
 *
 * Files: an IPoIB link, an Ethernet interface and R static routes (/32s via one next
 * hop, the largest table the loader accepts is 4096), for R = 256, 1024, 4096.
 *
 *   config_bench [--rounds R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "bench/bench_util.h"
#include "gateway/config.h"

static char *make_file(unsigned routes, size_t *len)
{
	size_t cap = 512 + (size_t)routes * 80, n;
	char *s = bench_xcalloc(cap, 1);

	n = (size_t)snprintf(s, cap,
			     "ipoib_links:\n  - name: ib0\n    device: mlx5_0\n"
			     "    addresses: [10.10.0.1/24]\n"
			     "ethernet_interfaces:\n  - name: eth0\n    addresses: [10.20.0.1/24]\n"
			     "routes:\n");
	for (unsigned i = 0; i < routes; i++)
		n += (size_t)snprintf(s + n, cap - n,
				      "  - {prefix: 172.16.%u.%u/32, via: 10.20.0.11}\n", i / 256,
				      i % 256);
	*len = n;
	return s;
}

static double time_ours(const char *s, size_t len)
{
	struct gw_config *cfg = NULL;
	struct gw_config_errors errs;
	double t0 = bench_now();

	if (gw_config_load_buffer("bench.yaml", s, len, &cfg, &errs) < 0) {
		fprintf(stderr, "config_bench: refused: %s\n", errs.n ? errs.msgs[0] : "?");
		exit(1);
	}
	t0 = bench_now() - t0;
	gw_config_errors_free(&errs);
	gw_config_free(cfg);
	return t0;
}

static double time_libyaml(const char *s, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	double t0 = bench_now();
	bool done = false;

	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)s, len);
	while (!done) {
		if (!yaml_parser_parse(&p, &ev)) {
			fprintf(stderr, "config_bench: libyaml: %s\n", p.problem);
			exit(1);
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return bench_now() - t0;
}

int main(int argc, char **argv)
{
	static const unsigned sizes[] = { 256, 1024, 4096 };
	int rounds = 9;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: config_bench [--rounds R]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64)
		return 2;
	printf("config_bench: medians of %d rounds; ours/libyaml = our load time over "
	       "libyaml's parse alone\n",
	       rounds);
	printf("  %8s %10s %12s %12s %10s\n", "routes", "octets", "ours (ms)", "libyaml (ms)",
	       "ours/libyaml");
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len;
		char *s = make_file(sizes[k], &len);
		double ours[64], ref[64], mo, mr;

		for (int r = 0; r < rounds; r++) {
			if (r & 1) {
				ref[r] = time_libyaml(s, len);
				ours[r] = time_ours(s, len);
			} else {
				ours[r] = time_ours(s, len);
				ref[r] = time_libyaml(s, len);
			}
		}
		mo = bench_median(ours, rounds);
		mr = bench_median(ref, rounds);
		printf("  %8u %10zu %12.2f %12.2f %9.1fx\n", sizes[k], len, mo * 1e3, mr * 1e3,
		       mo / mr);
		free(s);
	}
	return 0;
}
