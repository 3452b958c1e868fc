/*
 * Logging sinks. The level and target are process-wide settings (there is one log per
 * process), read atomically so any thread may log while the control thread changes the
 * level at run time ("gwctl log level debug").
 */
#include "lib/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION /* the caller's location is sent, not this file's */
#include <systemd/sd-journal.h>

static _Atomic int log_level = LOG_INFO;
static _Atomic int log_sink = LOG_TARGET_STDERR;
static const char *log_ident = "ibgw";
static _Atomic bool journal_native;

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

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
	/* libsystemd drops entries silently when the journal's socket is missing: without
	 * it, write "<N>" lines (which a journal stream on stderr still understands). */
	journal_native = target == LOG_TARGET_JOURNAL && access(JOURNAL_SOCKET, W_OK) == 0;
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

/* A structured journal entry; -errno when the journal cannot be reached. */
static int journal_send(int priority, int err, const char *msgid, const char *file, int line,
			const char *func, const char *msg)
{
	char f_msg[1100], f_prio[16], f_ident[64], f_file[160], f_line[24], f_func[96], f_errno[24];
	char f_id[48];
	struct iovec iov[8];
	int n = 0;

#define FIELD(buf, ...)                                                                            \
	do {                                                                                       \
		int len_ = snprintf(buf, sizeof(buf), __VA_ARGS__);                                \
		iov[n].iov_base = buf;                                                             \
		iov[n++].iov_len = len_ < (int)sizeof(buf) ? (size_t)len_ : sizeof(buf) - 1;       \
	} while (0)
	FIELD(f_msg, "MESSAGE=%s", msg);
	FIELD(f_prio, "PRIORITY=%d", priority);
	FIELD(f_ident, "SYSLOG_IDENTIFIER=%s", log_ident);
	FIELD(f_file, "CODE_FILE=%s", file);
	FIELD(f_line, "CODE_LINE=%d", line);
	FIELD(f_func, "CODE_FUNC=%s", func);
	if (err > 0)
		FIELD(f_errno, "ERRNO=%d", err);
	if (msgid)
		FIELD(f_id, "MESSAGE_ID=%s", msgid);
#undef FIELD
	return sd_journal_sendv(iov, n);
}

static void vlog(int priority, int err, const char *msgid, const char *file, int line,
		 const char *func, const char *fmt, va_list ap)
    __attribute__((format(printf, 7, 0)));

void log_at(int priority, int err, const char *file, int line, const char *func, const char *fmt,
	    ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(priority, err, NULL, file, line, func, fmt, ap);
	va_end(ap);
}

void log_at_id(int priority, int err, const char *msgid, const char *file, int line,
	       const char *func, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(priority, err, msgid, file, line, func, fmt, ap);
	va_end(ap);
}

static void vlog(int priority, int err, const char *msgid, const char *file, int line,
		 const char *func, const char *fmt, va_list ap)
{
	char msg[1024];
	int sink = atomic_load(&log_sink);
	int len;

	if (priority > atomic_load(&log_level))
		return;
	len = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (err > 0 && len >= 0 && (size_t)len < sizeof(msg))
		snprintf(msg + len, sizeof(msg) - (size_t)len, ": %s", strerror(err));

	switch (sink) {
	case LOG_TARGET_SYSLOG:
		syslog(priority, "%s", msg);
		break;
	case LOG_TARGET_JOURNAL:
		if (!atomic_load(&journal_native) ||
		    journal_send(priority, err, msgid, file, line, func, msg) < 0)
			fprintf(stderr, "<%d>%s\n", priority, msg);
		break;
	default: {
		struct timespec ts;
		struct tm tm;
		char stamp[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s[%d] %s: %s\n", stamp, ts.tv_nsec / 1000000, log_ident,
			(int)getpid(), level_names[priority], msg);
		break;
	}
	}
}
