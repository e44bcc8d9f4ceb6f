/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * khttpd_trace.h — the khttpd:khttpd_request trace event: one record per
 * answered request (client, method, target, status, bytes, duration), so that
 * trace-cmd, perf or the tracefs files record an access log the kernel's
 * own way. Nothing is recorded, copied or allocated while it is off.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM khttpd

#if !defined(KHTTPD_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define KHTTPD_TRACE_H

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/socket.h>
#include <linux/tracepoint.h>

/* The longest method token and target a record keeps (longer: cut). */
#define KHTTPD_TRACE_METHOD_MAX 15
#define KHTTPD_TRACE_TARGET_MAX 1024

/* Laid out as the kernel's own trace headers are. */
/* clang-format off */
TRACE_EVENT(khttpd_request, /* checkpatch: PARENTHESIS_ALIGNMENT: trace layout */

	TP_PROTO(const struct sockaddr *peer, const char *method,
		 const char *target, unsigned int target_len, int status,
		 u64 bytes, u64 ns),

	TP_ARGS(peer, method, target, target_len, status, bytes, ns),

	/* checkpatch: OPEN_ENDED_LINE: the kernel's trace header layout */
	TP_STRUCT__entry(
		__array(u8, peer, sizeof(struct sockaddr_in6))
		__array(char, method, KHTTPD_TRACE_METHOD_MAX + 1)
		__dynamic_array(char, target, target_len + 1)
		__field(int, status)
		__field(u64, bytes)
		__field(u64, usecs)
	),

	/* checkpatch: OPEN_ENDED_LINE: the kernel's trace header layout */
	TP_fast_assign(
		/* the client: an AF_INET or AF_INET6 address */
		memcpy(__entry->peer, peer, sizeof(__entry->peer));
		strscpy(__entry->method, method, sizeof(__entry->method));
		memcpy(__get_dynamic_array(target), target, target_len);
		((char *)__get_dynamic_array(target))[target_len] = '\0';
		__entry->status = status;
		__entry->bytes = bytes;
		__entry->usecs = div_u64(ns, NSEC_PER_USEC);
	),

	TP_printk("peer=%pISpc method=%s target=%s status=%d bytes=%llu usecs=%llu",
		  __entry->peer, __entry->method,
		  __get_str(target),
		  __entry->status, __entry->bytes, __entry->usecs)
);
/* clang-format on */

#endif /* KHTTPD_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE khttpd_trace
#include <trace/define_trace.h>
