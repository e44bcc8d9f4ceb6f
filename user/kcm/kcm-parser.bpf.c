/*
 * The KCM message parser: a BPF_PROG_TYPE_SOCKET_FILTER program that KCM's
 * stream parser runs when a message starts, taking its return value as the
 * message's length (header included): 0 asks for more bytes, a negative
 * errno aborts the stream (KCM sets it on the TCP socket, the server sees
 * EPOLLERR). Built with clang -target bpf, embedded in ktcp-kcm-server and
 * loaded with libbpf once per server; the same program is attached to every
 * connection's multiplexor.
 *
 * Why not "return be32(skb[0]) + 4": the skb the program sees is a clone of
 * the TCP receive skb with its data at the start of that skb, while the
 * message may start further in (strparser keeps the real offset in
 * strp_msg(skb)->offset, beyond the part of skb->cb a socket filter may
 * read). So the parser keeps, per connection, the TCP sequence number at
 * which the next message starts and subtracts the sequence number of the
 * skb's first byte, read from the TCP header still in front of the data.
 *
 * One program serves every connection, so the state is found by the
 * connection's addresses and ports (kcm_conns, filled by the server before
 * the attach and emptied after the unattach) and kept under the server's id
 * for it (kcm_states). While a header is incomplete, strparser calls again
 * for the same message with a head skb that may have no network header; the
 * first call leaves the id and the state's random cookie in the head skb's
 * control block for those calls (__sk_buff cb[0..2]: the 12 bytes of
 * skb->cb that strparser and KCM leave free on receive and that strparser
 * copies to a new head).
 *
 * Calls for one connection are serialised by the TCP socket's lock.
 */
#include <linux/bpf.h>
#include <linux/errno.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "kcm-parser.h"

/* Set by the server before loading (--max-msg). */
const volatile __u32 kcm_max_msg = 65536;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, KCM_PARSER_MAX_CONNS);
    __type(key, struct kcm_conn_key);
    __type(value, __u32);
} kcm_conns SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, KCM_PARSER_MAX_CONNS);
    __type(key, __u32);
    __type(value, struct kcm_parser_state);
} kcm_states SEC(".maps");

struct tcp_start {
    __be16 sport;
    __be16 dport;
    __be32 seq;
};

/* The connection of a head skb that still has its IP and TCP headers;
 * stores the skb's first sequence number in *seq. */
static __always_inline __u32 *conn_of(struct __sk_buff *skb, __u32 *seq)
{
    struct kcm_conn_key key = {};
    struct tcp_start th;
    __u8 vihl;
    __u32 ihl;

    if (bpf_skb_load_bytes_relative(skb, 0, &vihl, 1, BPF_HDR_START_NET))
        return 0;
    if (vihl >> 4 == 4) {
        ihl = (vihl & 0xf) * 4;
        key.peer[10] = key.peer[11] = 0xff;
        key.local[10] = key.local[11] = 0xff;
        if (bpf_skb_load_bytes_relative(skb, 12, &key.peer[12], 4,
                                        BPF_HDR_START_NET) ||
            bpf_skb_load_bytes_relative(skb, 16, &key.local[12], 4,
                                        BPF_HDR_START_NET))
            return 0;
    } else if (vihl >> 4 == 6) {
        ihl = 40; /* no extension headers on TCP here */
        if (bpf_skb_load_bytes_relative(skb, 8, key.peer, 16,
                                        BPF_HDR_START_NET) ||
            bpf_skb_load_bytes_relative(skb, 24, key.local, 16,
                                        BPF_HDR_START_NET))
            return 0;
    } else {
        return 0;
    }
    if (bpf_skb_load_bytes_relative(skb, ihl, &th, sizeof(th),
                                    BPF_HDR_START_NET))
        return 0;
    key.peer_port = th.sport;
    key.local_port = th.dport;
    *seq = bpf_ntohl(th.seq);
    return bpf_map_lookup_elem(&kcm_conns, &key);
}

SEC("socket")
int ktcp_kcm_len(struct __sk_buff *skb)
{
    struct kcm_parser_state *st;
    __u32 id, len, seq = 0, *idp;
    __be32 hdr;

    id = skb->cb[1];
    st = skb->cb[0] == KCM_PARSER_CB_MAGIC
             ? bpf_map_lookup_elem(&kcm_states, &id)
             : 0;
    /* Unless these are more bytes for a message whose header was
     * incomplete, this is a message's first call: find its connection. */
    if (!st || !st->have_off || st->cookie != skb->cb[2]) {
        idp = conn_of(skb, &seq);
        if (!idp)
            return -EPROTO; /* fail loudly rather than stall */
        id = *idp;
        st = bpf_map_lookup_elem(&kcm_states, &id);
        if (!st)
            return -EPROTO;
        if (!st->started) {
            /* Nothing has read the stream before the parser. */
            st->next_seq = seq;
            st->started = 1;
        }
        st->off = st->next_seq - seq; /* 32 bits: wrap-around is free */
        if (st->off >= skb->len)
            return -EPROTO;
        st->have_off = 1;
        skb->cb[0] = KCM_PARSER_CB_MAGIC;
        skb->cb[1] = id;
        skb->cb[2] = st->cookie;
    }
    if (bpf_skb_load_bytes(skb, st->off, &hdr, sizeof(hdr)))
        return 0; /* the header is not all there yet */
    len = bpf_ntohl(hdr);
    if (len > kcm_max_msg)
        return -EMSGSIZE; /* fails this connection only */
    st->next_seq += len + 4;
    st->have_off = 0;
    skb->cb[0] = 0;
    return len + 4;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
