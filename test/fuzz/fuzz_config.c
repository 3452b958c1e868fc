/*
 * libFuzzer harness for the configuration loader (gateway/config.c, config_yaml.c).
 *
 * Any input must load or be refused with errors, never crash, leak or read
 * uninitialised memory. When it loads, the normalised form it prints must load again
 * and print identically: the printer and the parser agree on every value they accept.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *print(const struct gw_config *cfg, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	gw_config_print_yaml(cfg, f);
	if (fclose(f) != 0)
		abort();
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_config *cfg = NULL, *again = NULL;
	struct gw_config_errors errs;
	char *text, *text2;
	size_t len, len2;

	if (gw_config_load_buffer("fuzz.yaml", (const char *)data, size, &cfg, &errs) < 0) {
		/* a refusal must say why */
		if (errs.n == 0)
			abort();
		for (unsigned i = 0; i < errs.n; i++)
			if (strncmp(errs.msgs[i], "fuzz.yaml:", 10) != 0)
				abort();
		gw_config_errors_free(&errs);
		return 0;
	}
	gw_config_errors_free(&errs);
	text = print(cfg, &len);
	if (gw_config_load_buffer("printed.yaml", text, len, &again, &errs) < 0) {
		for (unsigned i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		fprintf(stderr, "--- printed form:\n%s", text);
		abort();
	}
	gw_config_errors_free(&errs);
	text2 = print(again, &len2);
	if (len != len2 || memcmp(text, text2, len) != 0) {
		fprintf(stderr, "--- printed:\n%s--- printed again:\n%s", text, text2);
		abort();
	}
	free(text);
	free(text2);
	gw_config_free(cfg);
	gw_config_free(again);
	return 0;
}
