/* tls-ctx.c — the server context: OpenSSL's SSL_CTX made from the
 * certificate chain and key (TLS 1.2 and 1.3, AEAD suites, server
 * preference, ALPN http/1.1, kTLS asked for), swapped whole by a reload,
 * and session tickets sealed under keys of the context's own that rotate
 * (so a reload keeps every ticket valid, and no key lives past two
 * rotation periods). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tls-internal.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

/* TLS 1.2: ECDHE with an AEAD only (no CBC, no RSA key exchange), the
 * strongest first as the server picks; TLS 1.3's three are all AEAD. */
static const char tls12_ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
static const char tls13_suites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
    "TLS_CHACHA20_POLY1305_SHA256";

static void set_err(char *err, size_t errlen, const char *what)
{
    if (!err || !errlen)
        return;
    unsigned long e = ERR_peek_last_error();
    if (e) {
        char reason[200];
        ERR_error_string_n(e, reason, sizeof(reason));
        snprintf(err, errlen, "%s: %s", what, reason);
    } else {
        snprintf(err, errlen, "%s", what);
    }
    ERR_clear_error();
}

static uint64_t mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec;
}

static void ticket_key_make(struct ktcp_tls_ticket_key *k, uint64_t now)
{
    if (RAND_bytes(k->name, sizeof(k->name)) != 1 ||
        RAND_bytes(k->aes, sizeof(k->aes)) != 1 ||
        RAND_bytes(k->hmac, sizeof(k->hmac)) != 1)
        abort(); /* no randomness: nothing safe to seal tickets with */
    k->made_s = now;
    k->valid = true;
}

/* The keys now, rotated when the newest is older than the period; the
 * one before stays for decryption. Under ctx->lock. */
static void ticket_keys_rotate(struct ktcp_tls_ctx *ctx)
{
    uint64_t now = mono_s();
    if (ctx->keys[0].valid && now - ctx->keys[0].made_s < ctx->rotate_s)
        return;
    /* a key unused for two periods is not kept for decryption either */
    bool stale = ctx->keys[0].valid &&
                 now - ctx->keys[0].made_s >= 2 * (uint64_t) ctx->rotate_s;
    ctx->keys[1] = ctx->keys[0];
    ctx->keys[1].valid = ctx->keys[0].valid && !stale;
    ticket_key_make(&ctx->keys[0], now);
    ctx->rotations++;
}

/* OpenSSL's ticket key callback: enc=1 seal a new ticket under the newest
 * key; enc=0 find the key a ticket names: 1 (use it), 2 (use it and send
 * a fresh ticket: the key is the older one), 0 (unknown or expired: a
 * full handshake), -1 on error. */
static int ticket_cb(SSL *s,
                     unsigned char key_name[16],
                     unsigned char *iv,
                     EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx,
                     int enc)
{
    struct ktcp_tls_ctx *ctx = SSL_CTX_get_app_data(SSL_get_SSL_CTX(s));
    struct ktcp_tls_ticket_key k;
    int ret = 1;
    pthread_mutex_lock(&ctx->lock);
    ticket_keys_rotate(ctx);
    if (enc) {
        k = ctx->keys[0];
    } else {
        int i;
        for (i = 0; i < 2; i++)
            if (ctx->keys[i].valid &&
                memcmp(ctx->keys[i].name, key_name, 16) == 0)
                break;
        if (i == 2) {
            pthread_mutex_unlock(&ctx->lock);
            return 0;
        }
        k = ctx->keys[i];
        ret = i == 0 ? 1 : 2;
    }
    pthread_mutex_unlock(&ctx->lock);

    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (enc) {
        memcpy(key_name, k.name, 16);
        if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1 ||
            EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k.aes, iv) != 1)
            ret = -1;
    } else if (EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k.aes, iv) !=
               1) {
        ret = -1;
    }
    if (ret > 0 && EVP_MAC_init(hctx, k.hmac, sizeof(k.hmac), params) != 1)
        ret = -1;
    OPENSSL_cleanse(&k, sizeof(k));
    return ret;
}

/* ALPN: http/1.1 when the client offers it; a client that offers only
 * other protocols gets the no_application_protocol alert (RFC 7301), as
 * nginx answers it. */
static int alpn_cb(SSL *s,
                   const unsigned char **out,
                   unsigned char *outlen,
                   const unsigned char *in,
                   unsigned int inlen,
                   void *arg)
{
    (void) s;
    (void) arg;
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *make_ssl_ctx(struct ktcp_tls_ctx *ctx,
                             const char *cert,
                             const char *key,
                             char *err,
                             size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *s = SSL_CTX_new(TLS_server_method());
    if (!s) {
        set_err(err, errlen, "SSL_CTX_new");
        return NULL;
    }
    char what[600];
    const char *step = "TLS settings";
    if (!SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION) ||
        !SSL_CTX_set_max_proto_version(s, ctx->max_version) ||
        !SSL_CTX_set_cipher_list(s, tls12_ciphers) ||
        !SSL_CTX_set_ciphersuites(s, tls13_suites) ||
        !SSL_CTX_set_session_id_context(s, (const unsigned char *) "ktcp", 4))
        goto fail;
    SSL_CTX_set_options(s, SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               (ctx->no_ktls ? 0 : SSL_OP_ENABLE_KTLS));
    SSL_CTX_set_mode(s, SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    /* tickets only (stateless): no per-session state on the server */
    SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(s, 1);
    SSL_CTX_set_app_data(s, ctx);
    if (SSL_CTX_set_tlsext_ticket_key_evp_cb(s, ticket_cb) != 1)
        goto fail;
    SSL_CTX_set_alpn_select_cb(s, alpn_cb, NULL);
    snprintf(what, sizeof(what), "certificate %s", cert);
    step = what;
    if (SSL_CTX_use_certificate_chain_file(s, cert) != 1)
        goto fail;
    snprintf(what, sizeof(what), "key %s", key);
    if (SSL_CTX_use_PrivateKey_file(s, key, SSL_FILETYPE_PEM) != 1)
        goto fail;
    snprintf(what, sizeof(what), "key %s does not match certificate %s", key,
             cert);
    if (SSL_CTX_check_private_key(s) != 1)
        goto fail;
    return s;
fail:
    set_err(err, errlen, step);
    SSL_CTX_free(s);
    return NULL;
}

static bool ulp_present(void);

struct ktcp_tls_ctx *ktcp_tls_ctx_new(const struct ktcp_tls_opts *opts,
                                      char *err,
                                      size_t errlen)
{
    /* No clean-up at exit: the threads model's idle connection threads
     * may still be ending (and freeing their OpenSSL thread state) while
     * main returns; an atexit OPENSSL_cleanup would race them. */
    OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, NULL);
    if (opts->max_version && opts->max_version != KTCP_TLS_V1_2 &&
        opts->max_version != KTCP_TLS_V1_3) {
        set_err(err, errlen, "max_version: TLS 1.2 or 1.3");
        return NULL;
    }
    struct ktcp_tls_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        set_err(err, errlen, strerror(ENOMEM));
        return NULL;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->rotate_s = opts->ticket_rotate_s ? opts->ticket_rotate_s
                                          : KTCP_TLS_TICKET_ROTATE_S;
    ctx->no_ktls = opts->no_ktls;
    ctx->user_records = ctx->no_ktls || !ulp_present();
    ctx->max_version =
        opts->max_version == KTCP_TLS_V1_2 ? TLS1_2_VERSION : TLS1_3_VERSION;
    ticket_key_make(&ctx->keys[0], mono_s());
    ctx->ssl = make_ssl_ctx(ctx, opts->cert_file, opts->key_file, err, errlen);
    if (!ctx->ssl) {
        pthread_mutex_destroy(&ctx->lock);
        OPENSSL_cleanse(ctx->keys, sizeof(ctx->keys));
        free(ctx);
        return NULL;
    }
    return ctx;
}

int ktcp_tls_ctx_reload(struct ktcp_tls_ctx *ctx,
                        const char *cert_file,
                        const char *key_file,
                        char *err,
                        size_t errlen)
{
    SSL_CTX *s = make_ssl_ctx(ctx, cert_file, key_file, err, errlen);
    if (!s)
        return -1;
    pthread_mutex_lock(&ctx->lock);
    SSL_CTX *old = ctx->ssl;
    ctx->ssl = s;
    pthread_mutex_unlock(&ctx->lock);
    SSL_CTX_free(old); /* its connections hold their own references */
    return 0;
}

void ktcp_tls_ctx_free(struct ktcp_tls_ctx *ctx)
{
    if (!ctx)
        return;
    SSL_CTX_free(ctx->ssl);
    OPENSSL_cleanse(ctx->keys, sizeof(ctx->keys));
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

SSL *ktcp_tls_ctx_ssl_new(struct ktcp_tls_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    SSL *s = SSL_new(ctx->ssl);
    pthread_mutex_unlock(&ctx->lock);
    return s;
}

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

/* The first kTLS keys a freshly booted kernel takes load its cipher
 * modules and run their self-tests: 11.5 s for the first, 0.01 s for
 * the next, measured in the 6.12 guest under emulation. A loopback
 * connection given AES-128-GCM keys (the suite the server prefers) both
 * ways does it now, not in a client's handshake. Best effort. */
static void ktls_warm(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1, s = -1;
    if (l >= 0 && bind(l, (struct sockaddr *) &a, sizeof(a)) == 0 &&
        listen(l, 1) == 0 &&
        getsockname(l, (struct sockaddr *) &a, &alen) == 0 &&
        (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
        connect(c, (struct sockaddr *) &a, sizeof(a)) == 0 &&
        (s = accept4(l, NULL, NULL, SOCK_CLOEXEC)) >= 0 &&
        setsockopt(s, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) == 0) {
        struct tls12_crypto_info_aes_gcm_128 k = {
            .info = {.version = TLS_1_2_VERSION,
                     .cipher_type = TLS_CIPHER_AES_GCM_128}};
        setsockopt(s, SOL_TLS, TLS_TX, &k, sizeof(k));
        setsockopt(s, SOL_TLS, TLS_RX, &k, sizeof(k));
    }
    if (s >= 0)
        close(s);
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
}

static bool ulp_present(void)
{
    /* an unconnected socket: a kernel with the ULP answers ENOTCONN, one
     * without it ENOENT */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int r = setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls"));
    int e = errno;
    close(fd);
    return r == 0 || (e != ENOENT && e != ENOPROTOOPT);
}

bool ktcp_tls_kernel_has_ulp(void)
{
    bool has = ulp_present();
    if (has)
        ktls_warm();
    return has;
}

const char *ktcp_tls_library(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}
