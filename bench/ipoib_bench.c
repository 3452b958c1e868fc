/*
 * ipoib_bench: per-core rates of the IPoIB data-path pieces, in memory, next to plain
 * baselines measured in the same run (perf figures, no pass/fail):
 *   encap   write the 4-octet IPoIB header in front of a 1500-octet packet that is
 *           copied into the send buffer (what the gateway does per packet) vs. the
 *           bare memcpy of those octets;
 *   decap   ipoib_rx_classify of a received UD buffer (GRH area + header + IPv4) vs.
 *           reading the ethertype with no checks;
 *   lookup  neigh_lookup (+ state + link) among 10,000 IPv4 neighbours vs. a plain
 *           open-addressing hash of the same keys with the same hash width.
 * Each figure is the median of 5 rounds, run alternately with its baseline.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "ipoib/ipoib_link.h"
#include "table/neigh.h"
#include "lib/ipoib.h"

#define N_NEIGH 10000
#define ROUNDS  4000000u
#define REPEAT  5

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile uint64_t sink;

static void report(const char *what, double ours, double base, const char *base_name)
{
	printf("%-8s %8.1f Mops/s   %-22s %8.1f Mops/s   ratio %.2f\n", what, ours / 1e6, base_name,
	       base / 1e6, ours / base);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, REPEAT, sizeof(*v), cmp_d);
	return v[REPEAT / 2];
}

struct plain_slot {
	uint32_t key;
	void *val;
};

int main(void)
{
	static uint8_t pkt[1500], buf[IBP_GRH_AREA + 4 + 1500];
	struct neigh_config nc = {
		.seed = 7,
		.params = { .gc_thresh1 = 20000, .gc_thresh2 = 30000, .gc_thresh3 = 40000 }
	};
	struct neigh_table *t;
	struct neigh_link ll = { .len = 20, .usable = true, .mtu = 2044 };
	uint32_t *keys = malloc(N_NEIGH * sizeof(*keys));
	struct plain_slot *plain = calloc(32768, sizeof(*plain));
	double t0, r1, r2;
	uint64_t acc = 0;

	double a1[REPEAT], a2[REPEAT], b1[REPEAT], b2[REPEAT], c1[REPEAT], c2[REPEAT];

	memset(pkt, 0x45, sizeof(pkt));
	if (neigh_table_new(&nc, &t) < 0)
		return 1;
	srand(1);
	for (unsigned i = 0; i < N_NEIGH; i++) {
		uint32_t k = 0x0a000000u | ((uint32_t)rand() & 0xffffff);
		uint32_t h;

		keys[i] = k;
		ll.qpn = i;
		neigh_update(t, AF_INET, (const uint8_t *)&keys[i], &ll,
			     NEIGH_F_CREATE | NEIGH_F_SOLICITED);
		h = (k * 2654435761u) >> 17;
		while (plain[h].val && plain[h].key != k)
			h = (h + 1) & 32767;
		plain[h].key = k;
		plain[h].val = &keys[i];
	}
	for (int rep = 0; rep < REPEAT; rep++) {
		/* encap */
		t0 = now_s();
		for (unsigned i = 0; i < ROUNDS / 4; i++) {
			struct ipoib_encap h = { .ethertype = 0x0800 };

			pkt[0] = (uint8_t)i;
			memcpy(buf + 4, pkt, sizeof(pkt));
			ipoib_encap_encode(&h, buf, 4);
			acc += buf[5];
		}
		r1 = (ROUNDS / 4) / (now_s() - t0);
		t0 = now_s();
		for (unsigned i = 0; i < ROUNDS / 4; i++) {
			pkt[0] = (uint8_t)i;
			memcpy(buf + 4, pkt, sizeof(pkt));
			acc += buf[5];
		}
		r2 = (ROUNDS / 4) / (now_s() - t0);
		a1[rep] = r1;
		a2[rep] = r2;

		/* decap */
		memset(buf, 0, sizeof(buf));
		buf[40] = 0x08;
		buf[44] = 0x45;
		t0 = now_s();
		for (unsigned i = 0; i < ROUNDS; i++) {
			struct ipoib_rx rx;

			buf[47] = (uint8_t)i;
			acc += ipoib_rx_classify(buf, sizeof(buf), i & 1, &rx) + rx.len;
		}
		r1 = ROUNDS / (now_s() - t0);
		t0 = now_s();
		for (unsigned i = 0; i < ROUNDS; i++) {
			buf[47] = (uint8_t)i;
			acc += (unsigned)(buf[40] << 8 | buf[41]) + buf[47];
		}
		r2 = ROUNDS / (now_s() - t0);
		b1[rep] = r1;
		b2[rep] = r2;

		/* lookups */
		t0 = now_s();
		for (unsigned i = 0; i < ROUNDS / 2; i++) {
			struct neigh_entry *e =
			    neigh_lookup(t, AF_INET, (const uint8_t *)&keys[i % N_NEIGH]);
			const struct neigh_link *l = e ? neigh_entry_link(e) : NULL;

			acc += (l ? l->qpn : 0) + (e ? neigh_entry_state(e) : 0);
		}
		r1 = (ROUNDS / 2) / (now_s() - t0);
		t0 = now_s();
		for (unsigned i = 0; i < ROUNDS / 2; i++) {
			uint32_t k = keys[i % N_NEIGH], h = (k * 2654435761u) >> 17;

			while (plain[h].key != k && plain[h].val)
				h = (h + 1) & 32767;
			acc += (uintptr_t)plain[h].val & 0xff;
		}
		r2 = (ROUNDS / 2) / (now_s() - t0);
		c1[rep] = r1;
		c2[rep] = r2;
	}
	report("encap", median(a1), median(a2), "memcpy 1500 only");
	report("decap", median(b1), median(b2), "read ethertype");
	report("lookup", median(c1), median(c2), "plain open hash");
	sink = acc;
	neigh_table_free(t);
	free(keys);
	free(plain);
	return 0;
}
