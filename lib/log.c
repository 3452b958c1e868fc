/*
 * Logging sinks. The level and target are process-wide settings (there is one log per
 * process), read atomically so any thread may log while the control thread changes the
 * level at run time ("gwctl log level debug").
 */
#include "lib/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = LOG_INFO;
static _Atomic int log_sink = LOG_TARGET_STDERR;
static const char *log_ident = "ibgw";

static const char *const level_names[] = {
	[LOG_EMERG] = "emergency", [LOG_ALERT] = "alert",     [LOG_CRIT] = "critical",
	[LOG_ERR] = "error",       [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",       [LOG_DEBUG] = "debug",
};

/* systemd sets JOURNAL_STREAM=dev:ino for a stderr connected to the journal. */
static int stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long long dev, ino;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_init(const char *ident, enum log_target target, int max_priority)
{
	log_ident = ident;
	if (target == LOG_TARGET_AUTO)
		target = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_STDERR;
	if (target == LOG_TARGET_SYSLOG)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	atomic_store(&log_sink, target);
	log_set_level(max_priority);
}

void log_set_level(int max_priority)
{
	if (max_priority < LOG_ERR)
		max_priority = LOG_ERR;
	if (max_priority > LOG_DEBUG)
		max_priority = LOG_DEBUG;
	atomic_store(&log_level, max_priority);
}

int log_get_level(void)
{
	return atomic_load(&log_level);
}

int log_level_from_name(const char *name)
{
	for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

const char *log_level_name(int priority)
{
	if (priority < 0 || priority > LOG_DEBUG)
		return "unknown";
	return level_names[priority];
}

void log_vmsg(int priority, const char *fmt, va_list ap)
{
	char line[1024];
	int sink = atomic_load(&log_sink);

	if (priority > atomic_load(&log_level))
		return;
	vsnprintf(line, sizeof(line), fmt, ap);

	switch (sink) {
	case LOG_TARGET_SYSLOG:
		syslog(priority, "%s", line);
		break;
	case LOG_TARGET_JOURNAL:
		fprintf(stderr, "<%d>%s\n", priority, line);
		break;
	default: {
		struct timespec ts;
		struct tm tm;
		char stamp[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s[%d] %s: %s\n", stamp, ts.tv_nsec / 1000000, log_ident,
			(int)getpid(), level_names[priority], line);
		break;
	}
	}
}

void log_msg(int priority, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(priority, fmt, ap);
	va_end(ap);
}

void log_errno(int priority, int err, const char *fmt, ...)
{
	char head[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	log_msg(priority, "%s: %s", head, strerror(err));
}
