/* tlsd-ktls.h — the TLS side of ktcp-tlsd: a server handshake on a
 * connected socket that leaves the session's keys in the kernel (kTLS) for
 * both directions, so that the socket can be handed to khttpd with no
 * user-space state left to keep. OpenSSL 3 underneath; nothing above this
 * header sees OpenSSL, so it can move onto a shared TLS layer unchanged. */
#pragma once

#include <stddef.h>

struct tlsd_ktls;

/* A server context with the certificate chain and key in PEM files; NULL
 * with a message in @err on failure. */
struct tlsd_ktls *tlsd_ktls_new(const char *cert_file,
                                const char *key_file,
                                char *err,
                                size_t errlen);
void tlsd_ktls_free(struct tlsd_ktls *t);

/*
 * Run the server handshake on @fd (a blocking, connected TCP socket;
 * reads and writes each wait at most @timeout_ms) and turn kTLS on for
 * sending and receiving. 0: the kernel holds the keys and @fd carries
 * records on its own; -1 with a message in @err otherwise (no handshake,
 * or kTLS refused for a direction). @fd stays open either way.
 */
int tlsd_ktls_accept(struct tlsd_ktls *t,
                     int fd,
                     int timeout_ms,
                     char *err,
                     size_t errlen);
