/* tlsd-ktls.c — tlsd-ktls.h on OpenSSL 3 (SSL_OP_ENABLE_KTLS). */
#include "tlsd-ktls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

struct tlsd_ktls {
    SSL_CTX *ctx;
};

static void ssl_error(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";

    if (e)
        ERR_error_string_n(e, buf, sizeof(buf));
    snprintf(err, errlen, "%s%s%s", what, *buf ? ": " : "", buf);
    ERR_clear_error();
}

struct tlsd_ktls *tlsd_ktls_new(const char *cert_file,
                                const char *key_file,
                                char *err,
                                size_t errlen)
{
    struct tlsd_ktls *t = calloc(1, sizeof(*t));

    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->ctx = SSL_CTX_new(TLS_server_method());
    if (!t->ctx) {
        ssl_error(err, errlen, "SSL_CTX_new");
        goto fail;
    }
    /*
     * kTLS for both directions: OpenSSL 3.0 moves TLS 1.2 keys into the
     * kernel for sending and receiving, TLS 1.3 keys for sending only, so
     * the session is TLS 1.2, with AEAD ciphers the kernel has (AES-GCM,
     * ChaCha20-Poly1305) and forward secrecy (ECDHE).
     */
    SSL_CTX_set_options(t->ctx, SSL_OP_ENABLE_KTLS | SSL_OP_NO_RENEGOTIATION |
                                    SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (!SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_max_proto_version(t->ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_cipher_list(t->ctx,
                                 "ECDHE-ECDSA-AES128-GCM-SHA256:"
                                 "ECDHE-RSA-AES128-GCM-SHA256:"
                                 "ECDHE-ECDSA-AES256-GCM-SHA384:"
                                 "ECDHE-RSA-AES256-GCM-SHA384:"
                                 "ECDHE-ECDSA-CHACHA20-POLY1305:"
                                 "ECDHE-RSA-CHACHA20-POLY1305")) {
        ssl_error(err, errlen, "TLS 1.2 AEAD settings");
        goto fail;
    }
    /* A ticket or cached session would need keys kept across hand-offs;
     * every connection does a full handshake. */
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_TICKET);
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
        ssl_error(err, errlen, cert_file);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(t->ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(t->ctx) != 1) {
        ssl_error(err, errlen, key_file);
        goto fail;
    }
    return t;
fail:
    tlsd_ktls_free(t);
    return NULL;
}

void tlsd_ktls_free(struct tlsd_ktls *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

static int set_timeouts(int fd, int timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000,
                         .tv_usec = (timeout_ms % 1000) * 1000};

    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
        return -1;
    return 0;
}

int tlsd_ktls_accept(struct tlsd_ktls *t,
                     int fd,
                     int timeout_ms,
                     char *err,
                     size_t errlen)
{
    SSL *ssl;
    int ret = -1, r;

    if (set_timeouts(fd, timeout_ms) < 0) {
        snprintf(err, errlen, "timeouts: %s", strerror(errno));
        return -1;
    }
    ssl = SSL_new(t->ctx);
    if (!ssl) {
        ssl_error(err, errlen, "SSL_new");
        return -1;
    }
    /* A socket BIO that does not close fd when freed. */
    if (SSL_set_fd(ssl, fd) != 1) {
        ssl_error(err, errlen, "SSL_set_fd");
        goto out;
    }
    r = SSL_accept(ssl);
    if (r != 1) {
        int e = SSL_get_error(ssl, r);

        if (e == SSL_ERROR_SYSCALL && errno == EAGAIN)
            snprintf(err, errlen, "handshake timed out");
        else
            ssl_error(err, errlen, "handshake");
        goto out;
    }
    if (!BIO_get_ktls_send(SSL_get_wbio(ssl))) {
        snprintf(err, errlen, "kTLS refused for sending (%s, %s)",
                 SSL_get_version(ssl), SSL_get_cipher_name(ssl));
        goto out;
    }
    if (!BIO_get_ktls_recv(SSL_get_rbio(ssl))) {
        snprintf(err, errlen, "kTLS refused for receiving (%s, %s)",
                 SSL_get_version(ssl), SSL_get_cipher_name(ssl));
        goto out;
    }
    /* Records the peer sent early were read by OpenSSL, not the kernel:
     * the kernel could not have them, and the stream would be cut. */
    if (SSL_pending(ssl) > 0 || SSL_has_pending(ssl)) {
        snprintf(err, errlen, "data buffered in user space");
        goto out;
    }
    ret = 0;
out:
    /* No SSL_shutdown: the session goes on in the kernel. */
    SSL_free(ssl);
    return ret;
}
