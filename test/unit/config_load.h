/*
 * For unit tests that need a configuration: load YAML text with the daemon's loader,
 * print its errors (cmocka's print_error) and fail the test unless it loads. Include
 * after <cmocka.h>.
 */
#ifndef IBGW_TEST_UNIT_CONFIG_LOAD_H
#define IBGW_TEST_UNIT_CONFIG_LOAD_H

#include <string.h>

#include "gateway/config.h"

static inline struct gw_config *load(const char *text)
{
	struct gw_config_errors errs;
	struct gw_config *cfg = NULL;
	int rc = gw_config_load_buffer("t.yaml", text, strlen(text), &cfg, &errs);

	for (unsigned i = 0; i < errs.n; i++)
		print_error("%s\n", errs.msgs[i]);
	gw_config_errors_free(&errs);
	assert_int_equal(rc, 0);
	return cfg;
}

#endif
