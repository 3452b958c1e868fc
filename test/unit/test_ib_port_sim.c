/*
 * The sim IB port backend, as far as a unit test can check it without a rack: it is
 * found by name, its ops table is complete, and bad configs are refused before any
 * I/O. Everything past open needs umad2sim and ibgw-fabric: the RC engine's logic is
 * covered by test_ib_rc.c, the backend end to end by test/integration/ib_port_sim.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "port/ib_port.h"

static void backend_by_name(void **state)
{
	(void)state;
	assert_ptr_equal(ibp_backend("sim"), &ibp_sim_ops);
	assert_string_equal(ibp_sim_ops.name, "sim");
	assert_null(ibp_backend("Sim"));
}

static void every_op_is_set(void **state)
{
	const struct ibp_ops *o = &ibp_sim_ops;
	const void *const fns[] = {
		o->open,       o->close,       o->query,         o->buf_get,      o->buf_put,
		o->create_srq, o->destroy_srq, o->create_qp,     o->qp_ready,     o->destroy_qp,
		o->qp_num,     o->create_ah,   o->destroy_ah,    o->attach_mcast, o->detach_mcast,
		o->post_send,  o->post_recv,   o->post_srq_recv, o->poll,         o->cq_fd,
		o->arm,        o->async_fd,    o->next_event,
	};
	(void)state;

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		assert_non_null(fns[i]);
}

static void bad_configs(void **state)
{
	struct ibp_port_config good = { .backend = "sim",
					.device = "ibhost1",
					.port = 1,
					.sim_socket = "/nonexistent/fabric.sock",
					.buf_size = 4096,
					.n_bufs = 16 };
	struct ibp_port_config c;
	struct ibp_port *port = NULL;
	(void)state;

	assert_int_equal(ibp_sim_ops.open(NULL, &port), -EINVAL);
	c = good;
	c.device = NULL;
	assert_int_equal(ibp_sim_ops.open(&c, &port), -EINVAL);
	c = good;
	c.sim_socket = NULL;
	assert_int_equal(ibp_sim_ops.open(&c, &port), -EINVAL);
	c = good;
	c.port = 0;
	assert_int_equal(ibp_sim_ops.open(&c, &port), -EINVAL);
	c = good;
	c.n_bufs = 0;
	assert_int_equal(ibp_sim_ops.open(&c, &port), -EINVAL);
	c = good;
	c.buf_size = 0;
	assert_int_equal(ibp_sim_ops.open(&c, &port), -EINVAL);
	c = good;
	c.device = "a-node-name-that-is-far-too-long-for-the-fabric-protocol-field-x";
	assert_int_equal(ibp_sim_ops.open(&c, &port), -EINVAL);
	assert_null(port);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backend_by_name),
		cmocka_unit_test(every_op_is_set),
		cmocka_unit_test(bad_configs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
