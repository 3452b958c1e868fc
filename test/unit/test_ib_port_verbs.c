/*
 * The verbs IB port backend, as far as a machine without an HCA can check it: the
 * backend is found by name, its ops table is complete, and opening a device that is
 * not there (or a bad config) fails cleanly with the documented error. Everything
 * past open needs a device; see docs/ib-port.md for what remains untested.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "port/ib_port.h"

static void backend_by_name(void **state)
{
	(void)state;
	assert_ptr_equal(ibp_backend("verbs"), &ibp_verbs_ops);
	assert_null(ibp_backend("bogus"));
	assert_null(ibp_backend("Verbs"));
	assert_null(ibp_backend(""));
	assert_null(ibp_backend(NULL));
	assert_string_equal(ibp_verbs_ops.name, "verbs");
}

static void every_op_is_set(void **state)
{
	const struct ibp_ops *o = &ibp_verbs_ops;
	(void)state;

	assert_non_null(o->open);
	assert_non_null(o->close);
	assert_non_null(o->query);
	assert_non_null(o->buf_get);
	assert_non_null(o->buf_put);
	assert_non_null(o->queues);
	assert_non_null(o->create_srq);
	assert_non_null(o->destroy_srq);
	assert_non_null(o->create_qp);
	assert_non_null(o->qp_ready);
	assert_non_null(o->destroy_qp);
	assert_non_null(o->qp_num);
	assert_non_null(o->create_ah);
	assert_non_null(o->destroy_ah);
	assert_non_null(o->attach_mcast);
	assert_non_null(o->detach_mcast);
	assert_non_null(o->post_send);
	assert_non_null(o->post_recv);
	assert_non_null(o->post_srq_recv);
	assert_non_null(o->poll);
	assert_non_null(o->cq_fd);
	assert_non_null(o->async_fd);
	assert_non_null(o->arm);
	assert_non_null(o->next_event);
}

static struct ibp_port_config config(const char *device, uint8_t port)
{
	return (struct ibp_port_config){
		.backend = "verbs",
		.device = device,
		.port = port,
		.buf_size = 4096 + IBP_GRH_AREA,
		.n_bufs = 64,
	};
}

/* No HCA by this name exists anywhere (with or without kernel RDMA support). */
static void open_missing_device_is_enodev(void **state)
{
	struct ibp_port_config cfg = config("ibgw_no_such_hca0", 1);
	struct ibp_port *port = NULL;
	(void)state;

	assert_int_equal(ibp_verbs_ops.open(&cfg, &port), -ENODEV);
	assert_null(port);
}

static void open_bad_config_is_einval(void **state)
{
	struct ibp_port *port = NULL;
	struct ibp_port_config cfg;
	(void)state;

	cfg = config("ibgw_no_such_hca0", 0); /* ports are 1-based */
	assert_int_equal(ibp_verbs_ops.open(&cfg, &port), -EINVAL);
	cfg = config(NULL, 1);
	assert_int_equal(ibp_verbs_ops.open(&cfg, &port), -EINVAL);
	cfg = config("ibgw_no_such_hca0", 1);
	cfg.n_bufs = 0;
	assert_int_equal(ibp_verbs_ops.open(&cfg, &port), -EINVAL);
	cfg = config("ibgw_no_such_hca0", 1);
	cfg.buf_size = 0;
	assert_int_equal(ibp_verbs_ops.open(&cfg, &port), -EINVAL);
	assert_null(port);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backend_by_name),
		cmocka_unit_test(every_op_is_set),
		cmocka_unit_test(open_missing_device_is_enodev),
		cmocka_unit_test(open_bad_config_is_einval),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
