/*
 * For unit tests that link the verbs shim (test_verbs_sim*.c): a real ibgw-fabric
 * (build/bin/ibgw-fabric, next to the test's folder) on a socket in a temporary
 * directory, and two nodes, nodeA (LID 1) and nodeB (LID 2), one port each, ACTIVE,
 * P_Keys 0xffff and 0x8001, described to the shim with vsim_test_set_nodes (no umad2sim
 * here). vsim_fabric_setup and vsim_fabric_teardown are a cmocka group's setup and
 * teardown; vsim_nodes is what the shim was told (change a copy to raise port events).
 */
#ifndef IBGW_TEST_UNIT_VSIM_FABRIC_H
#define IBGW_TEST_UNIT_VSIM_FABRIC_H

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/verbs/vsim.h"

static char vsim_dir[64];
static pid_t vsim_fabric_pid;
static struct vsim_test_node vsim_nodes[2];

static inline void vsim_node_init(struct vsim_test_node *n, const char *name, uint16_t lid)
{
	struct simnode_port *p = &n->port[0];

	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->n_ports = 1;
	snprintf(p->info.name, sizeof(p->info.name), "%s", name);
	p->info.port_num = 1;
	p->info.mtu = 4; /* 2048 */
	p->info.port_guid = 0x0002c90300000000ull + lid;
	p->info.gid_prefix = 0xfe80000000000000ull;
	p->info.lid = lid;
	p->info.sm_lid = 1;
	p->info.n_pkeys = 2;
	p->info.pkeys[0] = 0xffff;
	p->info.pkeys[1] = 0x8001;
	p->state = IBV_PORT_ACTIVE;
	p->subnet_timeout = 18;
}

/* Whether the fabric accepts connections on sock: the file appears at bind(), before
 * listen(), so a node that connects in between is refused (the tests then failed one run
 * in tens). The probe's connection closes without a word, which the fabric takes as a
 * client gone. */
static inline int vsim_fabric_listening(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(sock);
	int fd, ok;

	if (n >= sizeof(sa.sun_path))
		return 0;
	memcpy(sa.sun_path, sock, n + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static inline int vsim_fabric_setup(void **state)
{
	char exe[PATH_MAX], fab[PATH_MAX + 32], sock[128];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	(void)state;

	if (n <= 0)
		return -1;
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(fab, sizeof(fab), "%s/../bin/ibgw-fabric", exe);
	snprintf(vsim_dir, sizeof(vsim_dir), "/tmp/vsimtest.XXXXXX");
	if (!mkdtemp(vsim_dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/fabric.sock", vsim_dir);
	vsim_fabric_pid = fork();
	if (vsim_fabric_pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(fab, fab, "--socket", sock, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && !vsim_fabric_listening(sock); i++)
		usleep(10000);
	if (!vsim_fabric_listening(sock))
		return -1;
	setenv("IBVSIM_SOCKET", sock, 1);
	setenv("IBVSIM_PORT_MS", "20", 1);
	vsim_node_init(&vsim_nodes[0], "nodeA", 1);
	vsim_node_init(&vsim_nodes[1], "nodeB", 2);
	vsim_test_set_nodes(vsim_nodes, 2);
	return 0;
}

static inline int vsim_fabric_teardown(void **state)
{
	char sock[128];
	(void)state;

	kill(vsim_fabric_pid, SIGTERM);
	waitpid(vsim_fabric_pid, NULL, 0);
	snprintf(sock, sizeof(sock), "%s/fabric.sock", vsim_dir);
	unlink(sock);
	rmdir(vsim_dir);
	return 0;
}

#endif
