/*
 * Logging for every part of ibgw.
 *
 * One line per event, with a syslog priority. Sinks: stderr (plain lines), syslog(3),
 * and the systemd journal through its native protocol: a structured entry with
 * MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE/CODE_LINE/CODE_FUNC (where in the
 * source) and ERRNO (log_errno), so `journalctl -u ibgwd ERRNO=19` or `-o json` work;
 * when the journal cannot be reached the line goes to stderr with journald's "<N>"
 * priority prefix instead. The data path never logs per packet: it counts, and the
 * control thread reports. Thread-safe: each message is one write.
 */
#ifndef IBGW_LIB_LOG_H
#define IBGW_LIB_LOG_H

#include <stdarg.h>
#include <syslog.h>

enum log_target {
	LOG_TARGET_AUTO,    /* journal if stderr is a journal stream, else stderr */
	LOG_TARGET_STDERR,  /* plain lines on stderr */
	LOG_TARGET_JOURNAL, /* native journal entries (fallback: "<N>" lines on stderr) */
	LOG_TARGET_SYSLOG,  /* syslog(3), facility daemon */
};

/* Priorities are syslog's: LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG. */
void log_init(const char *ident, enum log_target target, int max_priority);
void log_set_level(int max_priority);
int log_get_level(void);

/* Level names as the config file and gwctl spell them ("error", "warning", ...). */
int log_level_from_name(const char *name);
const char *log_level_name(int priority);

/* One message; err > 0 appends ": strerror(err)" (and ERRNO= in the journal). Call it
 * through the macros, which add where in the source it comes from. */
void log_at(int priority, int err, const char *file, int line, const char *func, const char *fmt,
	    ...) __attribute__((format(printf, 6, 7)));

#define log_msg(priority, ...) log_at(priority, 0, __FILE__, __LINE__, __func__, __VA_ARGS__)
/* Like log_msg, with ": strerror(err)" appended; err is a positive errno value. */
#define log_errno(priority, err, ...)                                                              \
	log_at(priority, err, __FILE__, __LINE__, __func__, __VA_ARGS__)

/*
 * The events an operator alerts on carry a journal MESSAGE_ID (an sd-id128, generated
 * once with `systemd-id128 new` and fixed: docs/operations.md "Journal" and the catalog
 * packaging/ibgw.catalog list them), so `journalctl MESSAGE_ID=...` finds every one of a
 * kind whatever its text. Other sinks print the message alone.
 */
#define IBGW_MSGID_FAILOVER   "52af46611684416ebd1b5879fbacc327" /* a group changed state */
#define IBGW_MSGID_LINK_STATE "fe25a6c973c747a28743b5fe6bd54e8f" /* a link went up or down */
#define IBGW_MSGID_SM_CHANGE  "d84055f00b1d48929df62620c106e464" /* an IB port's SM moved */
#define IBGW_MSGID_RELOAD     "82bc78d6df8444bfbde807091df0d439" /* a config reload's end */

void log_at_id(int priority, int err, const char *msgid, const char *file, int line,
	       const char *func, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* log_msg with a MESSAGE_ID (one of IBGW_MSGID_*). */
#define log_event(priority, msgid, ...)                                                            \
	log_at_id(priority, 0, msgid, __FILE__, __LINE__, __func__, __VA_ARGS__)

#define log_error(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)   log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
