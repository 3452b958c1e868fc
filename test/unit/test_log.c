/*
 * Unit tests for lib/log: levels filter, log_errno's text, and the journal sink's
 * structured entries as journald receives them. The journal part runs in a child with
 * its own mount namespace and a datagram socket of ours mounted where libsystemd sends
 * (/run/systemd/journal/socket), so it needs root (skipped otherwise); it also shows
 * the fallback to "<N>" lines on stderr when there is no journal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/log.h"

#define JOURNAL_DIR "/run/systemd/journal"

/* Run fn in a child with stderr on a pipe; returns what it wrote, fails on a non-zero
 * exit (the child's own checks). */
static char *in_child(int (*fn)(void), char *out, size_t len)
{
	int p[2];
	pid_t pid;
	ssize_t n, got = 0;
	int st;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		_exit(fn());
	}
	close(p[1]);
	while ((n = read(p[0], out + got, len - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child failed (status 0x%x), stderr:\n%s", st, out);
	return out;
}

static int levels_child(void)
{
	log_init("tlog", LOG_TARGET_STDERR, LOG_NOTICE);
	log_info("hidden %d", 1);
	log_notice("shown %d", 2);
	log_errno(LOG_ERR, ENODEV, "port %s", "mlx5_0");
	log_set_level(LOG_DEBUG);
	log_debug("now shown");
	return 0;
}

static void test_levels_and_errno_text(void **state)
{
	char out[4096];
	(void)state;

	in_child(levels_child, out, sizeof(out));
	assert_null(strstr(out, "hidden"));
	assert_non_null(strstr(out, "notice: shown 2\n"));
	assert_non_null(strstr(out, "error: port mlx5_0: No such device\n"));
	assert_non_null(strstr(out, "debug: now shown\n"));
}

/* The value of FIELD= in a journal datagram (fields separated by newlines). */
static const char *field(const char *dgram, const char *name, char *val, size_t len)
{
	size_t nl = strlen(name);

	for (const char *p = dgram; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, name, nl) && p[nl] == '=') {
			const char *e = strchr(p + nl + 1, '\n');
			size_t n = e ? (size_t)(e - p - nl - 1) : strlen(p + nl + 1);

			snprintf(val, len, "%.*s", (int)n, p + nl + 1);
			return val;
		}
	}
	return NULL;
}

#define CHILD_CHECK(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__);          \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static int journal_child(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[4096], v[256];
	ssize_t n;
	int fd;

	/* Our own /run/systemd/journal, seen by this process only. */
	CHILD_CHECK(unshare(CLONE_NEWNS) == 0);
	CHILD_CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
	mkdir("/run/systemd", 0755);
	mkdir(JOURNAL_DIR, 0755);
	CHILD_CHECK(mount("tmpfs", JOURNAL_DIR, "tmpfs", 0, "size=64k") == 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/socket", JOURNAL_DIR);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHILD_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);

	log_init("tlog", LOG_TARGET_JOURNAL, LOG_INFO);
	log_debug("below the level: not sent");
	log_errno(LOG_WARNING, EHOSTUNREACH, "ib0: path to %s", "fe80::1");
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	CHILD_CHECK(n > 0);
	buf[n] = '\0';
	CHILD_CHECK(field(buf, "MESSAGE", v, sizeof(v)) &&
		    !strcmp(v, "ib0: path to fe80::1: No route to host"));
	CHILD_CHECK(field(buf, "PRIORITY", v, sizeof(v)) && !strcmp(v, "4"));
	CHILD_CHECK(field(buf, "SYSLOG_IDENTIFIER", v, sizeof(v)) && !strcmp(v, "tlog"));
	CHILD_CHECK(field(buf, "ERRNO", v, sizeof(v)) && atoi(v) == EHOSTUNREACH);
	CHILD_CHECK(field(buf, "CODE_FILE", v, sizeof(v)) && strstr(v, "test_log.c"));
	CHILD_CHECK(field(buf, "CODE_FUNC", v, sizeof(v)) && !strcmp(v, "journal_child"));
	CHILD_CHECK(field(buf, "CODE_LINE", v, sizeof(v)) && atoi(v) > 0);
	CHILD_CHECK(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0); /* the debug one: not sent */

	log_notice("plain notice");
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	CHILD_CHECK(n > 0);
	buf[n] = '\0';
	CHILD_CHECK(!field(buf, "ERRNO", v, sizeof(v))); /* only with an errno */

	/* The journal gone: the message still goes out, on stderr, with its priority. */
	close(fd);
	unlink(sa.sun_path);
	log_init("tlog", LOG_TARGET_JOURNAL, LOG_INFO);
	log_error("journal gone");
	return 0;
}

static void test_journal_fields(void **state)
{
	char out[4096];
	(void)state;

	if (geteuid() != 0)
		skip(); /* a mount namespace needs root */
	in_child(journal_child, out, sizeof(out));
	assert_non_null(strstr(out, "<3>journal gone\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_levels_and_errno_text),
		cmocka_unit_test(test_journal_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
