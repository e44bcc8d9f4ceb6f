/*
 * What the KCM length parser (kcm-parser.bpf.c, a BPF program) and the
 * server that loads it (kcm-bpf.c) agree on: the maps' keys and values.
 * Included by both, so only fixed-size kernel types.
 */
#pragma once

#include <linux/types.h>

/* Connections one server can have attached at once (the maps' size). */
#define KCM_PARSER_MAX_CONNS 65536

/*
 * One TCP connection as the parser sees it in a received packet: peer is
 * the source, local the destination. Addresses are IPv6, an IPv4 address
 * as ::ffff:a.b.c.d; addresses and ports in network byte order.
 */
struct kcm_conn_key {
    __u8 peer[16];
    __u8 local[16];
    __be16 peer_port;
    __be16 local_port;
};

/* Per connection, found through its id (the server's TCP descriptor). */
struct kcm_parser_state {
    __u32 next_seq; /* TCP sequence number where the next message starts */
    __u32 started;  /* next_seq is known (set by the first call) */
    __u32 off;      /* the current message's start in its head skb */
    __u32 have_off; /* off is known: waiting for the rest of a header */
    __u32 cookie;   /* random, from the server: proves a cb mark ours */
};

/* Written by the parser into the head skb's control block while a message's
 * header is incomplete (__sk_buff cb[0] the magic, cb[1] the connection's
 * id, cb[2] its state's cookie), so later calls for the same message find
 * the connection without a network header. Bytes that TCP left there
 * cannot pass for a mark without guessing the cookie. */
#define KCM_PARSER_CB_MAGIC 0x6b636d70u
