/*
 * Loading the KCM length parser (kcm-parser.bpf.c) with libbpf, and keeping
 * its per-connection maps. The compiled program is embedded in the binary
 * (kcm-parser-obj.S), so the server needs no file at run time, wherever it
 * is installed.
 *
 * One load per server: the program fd is attached to every connection's
 * mux (each psock takes a reference of its own). Before a connection's
 * attach the server adds its addresses and ports and a fresh state to the
 * program's maps; after the unattach it removes them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kcm-parser.h"
#include "kcm.h"

/* The object file, from kcm-parser-obj.S. */
extern const unsigned char kcm_parser_obj[], kcm_parser_obj_end[];

static struct bpf_object *parser_obj;
static int conns_fd = -1, states_fd = -1;

/* Only libbpf's warnings (among them the verifier's log of a refused
 * program), and only while loading. */
static int libbpf_warnings(enum libbpf_print_level level,
                           const char *fmt,
                           va_list ap)
{
    if (level != LIBBPF_WARN)
        return 0;
    fputs("ktcp-kcm-server: ", stderr);
    return vfprintf(stderr, fmt, ap);
}

static int libbpf_quiet(enum libbpf_print_level level,
                        const char *fmt,
                        va_list ap)
{
    (void) level;
    (void) fmt;
    (void) ap;
    return 0;
}

static int map_fd(const char *name)
{
    struct bpf_map *map = bpf_object__find_map_by_name(parser_obj, name);

    return map ? bpf_map__fd(map) : -ENOENT;
}

int kcm_parser_load(uint32_t max_msg)
{
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "ktcp_kcm");
    struct bpf_program *prog;
    struct bpf_map *map;
    int err;

    libbpf_set_print(libbpf_warnings);
    parser_obj = bpf_object__open_mem(
        kcm_parser_obj, (size_t) (kcm_parser_obj_end - kcm_parser_obj), &opts);
    if (!parser_obj) {
        err = -errno;
        goto out;
    }
    err = -ENOENT;
    bpf_object__for_each_map(map, parser_obj)
    {
        if (bpf_map__is_internal(map) &&
            strstr(bpf_map__name(map), ".rodata")) {
            err = bpf_map__set_initial_value(map, &max_msg, sizeof(max_msg));
            break;
        }
    }
    if (err)
        goto fail;
    err = bpf_object__load(parser_obj);
    if (err)
        goto fail;
    prog = bpf_object__find_program_by_name(parser_obj, "ktcp_kcm_len");
    conns_fd = map_fd("kcm_conns");
    states_fd = map_fd("kcm_states");
    if (!prog || conns_fd < 0 || states_fd < 0) {
        err = -ENOENT;
        goto fail;
    }
    err = bpf_program__fd(prog);
    goto out;
fail:
    bpf_object__close(parser_obj);
    parser_obj = NULL;
out:
    libbpf_set_print(libbpf_quiet);
    return err;
}

void kcm_parser_unload(void)
{
    bpf_object__close(parser_obj);
    parser_obj = NULL;
    conns_fd = states_fd = -1;
}

/* An address as the key holds it: IPv6, IPv4 mapped. */
static int key_addr(const struct sockaddr_storage *ss,
                    uint8_t addr[16],
                    uint16_t *port)
{
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) ss;

        memcpy(addr, &a->sin6_addr, 16);
        *port = a->sin6_port;
        return 0;
    }
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *) ss;

        memset(addr, 0, 10);
        addr[10] = addr[11] = 0xff;
        memcpy(addr + 12, &a->sin_addr, 4);
        *port = a->sin_port;
        return 0;
    }
    return -EAFNOSUPPORT;
}

int kcm_parser_add(int tcp_fd, uint32_t id, struct kcm_conn_key *key)
{
    struct sockaddr_storage peer, local;
    socklen_t plen = sizeof(peer), llen = sizeof(local);
    struct kcm_parser_state st = {0};
    int err;

    memset(key, 0, sizeof(*key));
    if (getpeername(tcp_fd, (struct sockaddr *) &peer, &plen) < 0 ||
        getsockname(tcp_fd, (struct sockaddr *) &local, &llen) < 0)
        return -errno;
    err = key_addr(&peer, key->peer, &key->peer_port);
    if (!err)
        err = key_addr(&local, key->local, &key->local_port);
    if (err)
        return err;
    if (getrandom(&st.cookie, sizeof(st.cookie), GRND_NONBLOCK) !=
        sizeof(st.cookie))
        return errno ? -errno : -EIO;
    /* A state left by an earlier connection under this id or with these
     * addresses (none should be) is replaced, never reused. */
    if (bpf_map_update_elem(states_fd, &id, &st, BPF_ANY) < 0)
        return -errno;
    if (bpf_map_update_elem(conns_fd, key, &id, BPF_ANY) < 0) {
        err = -errno;
        bpf_map_delete_elem(states_fd, &id);
        return err;
    }
    return 0;
}

void kcm_parser_remove(uint32_t id, const struct kcm_conn_key *key)
{
    uint32_t cur;

    /* Only the entry that still names this connection's id. */
    if (bpf_map_lookup_elem(conns_fd, key, &cur) == 0 && cur == id)
        bpf_map_delete_elem(conns_fd, key);
    bpf_map_delete_elem(states_fd, &id);
}
