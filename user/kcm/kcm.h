/* ktcp-kcm-server: the pieces that know about AF_KCM. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifndef AF_KCM
#define AF_KCM 41
#endif
#ifndef SOL_KCM
#define SOL_KCM 281
#endif

/* The parser's per-connection state (see kcm-bpf.c): a BPF map fd or
 * -errno. */
int kcm_create_parser_state(void);

/* Load the length parser bound to one state map: a BPF program fd, or
 * -errno with the verifier's words in log. */
int kcm_load_parser(uint32_t max_msg, int state_fd, char *log, size_t log_size);
