/* ktcp-kcm-server: the pieces that know about AF_KCM. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kcm-parser.h"

#ifndef AF_KCM
#define AF_KCM 41
#endif
#ifndef SOL_KCM
#define SOL_KCM 281
#endif

/* Load the length parser (kcm-bpf.c) for messages of at most max_msg body
 * bytes, once per server: its program fd, or -errno (libbpf has printed the
 * details, the verifier's log among them). */
int kcm_parser_load(uint32_t max_msg);

/* Drop the parser and its maps (psocks keep their references). */
void kcm_parser_unload(void);

/* Before attaching the TCP socket tcp_fd: enter the connection, under id,
 * with a fresh stream position; key is filled for kcm_parser_remove.
 * 0 or -errno (-E2BIG: KCM_PARSER_MAX_CONNS connections already). */
int kcm_parser_add(int tcp_fd, uint32_t id, struct kcm_conn_key *key);

/* After the unattach: forget the connection. */
void kcm_parser_remove(uint32_t id, const struct kcm_conn_key *key);
