/*
 * Logging for every part of ibgw.
 *
 * One line per event, with a syslog priority. Three sinks: stderr (plain, or with the
 * "<N>" priority prefix journald reads when stderr is a journal stream), and syslog(3).
 * The data path never logs per packet: it counts, and the control thread reports.
 * Thread-safe: each message is one write.
 */
#ifndef IBGW_LIB_LOG_H
#define IBGW_LIB_LOG_H

#include <stdarg.h>
#include <syslog.h>

enum log_target {
	LOG_TARGET_AUTO,    /* journal if stderr is a journal stream, else stderr */
	LOG_TARGET_STDERR,  /* plain lines on stderr */
	LOG_TARGET_JOURNAL, /* "<N>" priority prefix on stderr, for systemd */
	LOG_TARGET_SYSLOG,  /* syslog(3), facility daemon */
};

/* Priorities are syslog's: LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG. */
void log_init(const char *ident, enum log_target target, int max_priority);
void log_set_level(int max_priority);
int log_get_level(void);

/* Level names as the config file and gwctl spell them ("error", "warning", ...). */
int log_level_from_name(const char *name);
const char *log_level_name(int priority);

void log_msg(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(int priority, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Like log_msg, with ": strerror(err)" appended; err is a positive errno value. */
void log_errno(int priority, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_error(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)   log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
