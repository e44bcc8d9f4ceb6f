/*
 * The KCM message parser: a BPF_PROG_TYPE_SOCKET_FILTER program assembled
 * here and loaded with the raw bpf(2) call, so nothing is compiled at run
 * time and no BPF library is needed.
 *
 * KCM's stream parser runs it when a message starts and takes its return
 * value as the message length: 0 asks for more bytes, a negative errno
 * aborts the stream (KCM then sets that error on the TCP socket, which the
 * server sees as EPOLLERR).
 *
 * Why it is not the textbook "return be32(skb[0]) + 4": the skb the
 * program sees is a clone of the TCP receive skb with its data at the start
 * of that skb, while the message may start further in (strparser keeps the
 * real offset in strp_msg(skb)->offset, which a socket filter cannot read).
 * With several messages in one segment, or a message starting where the
 * previous one ended mid-segment, a parser reading at 0 reads the wrong
 * header. So the program keeps, per connection, the TCP sequence number at
 * which the next message starts (an array map of one entry) and subtracts
 * the sequence number of the skb's first byte, read from the TCP header:
 *
 *   st = map[0]                       {next_seq, started, off, have_off}
 *   if !st.have_off:                  first call for this message
 *       ihl = IPv4 ? 4 * (nh[0] & 15) : 40
 *       seq = be32(nh + ihl + 4)      the skb's first payload byte
 *       if !st.started: st.next_seq = seq, st.started = 1
 *       st.off = st.next_seq - seq, st.have_off = 1
 *       if st.off >= skb->len: return -EPROTO     (never stall silently)
 *   len = be32(skb + st.off)          LD_IND ends the program with 0 when
 *                                     the 4 bytes are not all there yet
 *   if len > max_msg: return -EMSGSIZE            fail this connection only
 *   st.next_seq += len + 4, st.have_off = 0
 *   return len + 4
 *
 * have_off keeps the offset across "need more header" calls, where
 * strparser may present a new head skb that has no network header.
 * Calls for one connection are serialised by the TCP socket lock.
 */
#include <errno.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kcm.h"

#define INSN(c, d, s, o, i) \
    ((struct bpf_insn){     \
        .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOV64_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD64_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define AND64_IMM(d, i) INSN(BPF_ALU64 | BPF_AND | BPF_K, d, 0, 0, i)
#define LSH64_IMM(d, i) INSN(BPF_ALU64 | BPF_LSH | BPF_K, d, 0, 0, i)
#define RSH64_IMM(d, i) INSN(BPF_ALU64 | BPF_RSH | BPF_K, d, 0, 0, i)
#define ADD32_REG(d, s) INSN(BPF_ALU | BPF_ADD | BPF_X, d, s, 0, 0)
#define SUB32_REG(d, s) INSN(BPF_ALU | BPF_SUB | BPF_X, d, s, 0, 0)
#define LDX_W(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define STX_W(d, s, o) INSN(BPF_STX | BPF_MEM | BPF_W, d, s, o, 0)
#define ST_W(d, o, i) INSN(BPF_ST | BPF_MEM | BPF_W, d, 0, o, i)
#define LD_ABS_B(k) INSN(BPF_LD | BPF_B | BPF_ABS, 0, 0, 0, k)
#define LD_IND_W(s, k) INSN(BPF_LD | BPF_W | BPF_IND, 0, s, 0, k)
#define JNE_IMM(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JGT_IMM(d, i, o) INSN(BPF_JMP | BPF_JGT | BPF_K, d, 0, o, i)
#define JGE_REG(d, s, o) INSN(BPF_JMP | BPF_JGE | BPF_X, d, s, o, 0)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
/* Two slots: the map fd, resolved by the kernel at load. */
#define LD_MAP_FD(d, fd)                                          \
    INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), \
        INSN(0, 0, 0, 0, 0)

/* Offsets in the map value. */
enum { ST_NEXT_SEQ = 0, ST_STARTED = 4, ST_OFF = 8, ST_HAVE_OFF = 12 };

static long sys_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

int kcm_create_parser_state(void)
{
    union bpf_attr attr;
    int fd;

    memset(&attr, 0, sizeof(attr));
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 16;
    attr.max_entries = 1;
    fd = (int) sys_bpf(BPF_MAP_CREATE, &attr);
    return fd < 0 ? -errno : fd;
}

int kcm_load_parser(uint32_t max_msg, int state_fd, char *log, size_t log_size)
{
    const struct bpf_insn prog[] = {
        /* 0 */ MOV64_REG(BPF_REG_6, BPF_REG_1),
        /* 1 */ LD_MAP_FD(BPF_REG_1, state_fd),
        /* 3 */ ST_W(BPF_REG_10, -4, 0),
        /* 4 */ MOV64_REG(BPF_REG_2, BPF_REG_10),
        /* 5 */ ADD64_IMM(BPF_REG_2, -4),
        /* 6 */ CALL(BPF_FUNC_map_lookup_elem),
        /* 7 */ JNE_IMM(BPF_REG_0, 0, 2),
        /* 8 */ MOV64_IMM(BPF_REG_0, -EINVAL),
        /* 9 */ EXIT(),
        /* 10 */ MOV64_REG(BPF_REG_7, BPF_REG_0),
        /* 11 */ LDX_W(BPF_REG_0, BPF_REG_7, ST_HAVE_OFF),
        /* 12 */ JNE_IMM(BPF_REG_0, 0, 20), /* -> 33 */
        /* 13 */ LD_ABS_B(SKF_NET_OFF),
        /* 14 */ MOV64_REG(BPF_REG_8, BPF_REG_0),
        /* 15 */ RSH64_IMM(BPF_REG_8, 4),
        /* 16 */ AND64_IMM(BPF_REG_0, 0xf),
        /* 17 */ LSH64_IMM(BPF_REG_0, 2),
        /* 18 */ JNE_IMM(BPF_REG_8, 6, 1),
        /* 19 */ MOV64_IMM(BPF_REG_0, 40),
        /* 20 */ MOV64_REG(BPF_REG_9, BPF_REG_0),
        /* 21 */ LD_IND_W(BPF_REG_9, SKF_NET_OFF + 4),
        /* 22 */ LDX_W(BPF_REG_1, BPF_REG_7, ST_STARTED),
        /* 23 */ JNE_IMM(BPF_REG_1, 0, 2),
        /* 24 */ STX_W(BPF_REG_7, BPF_REG_0, ST_NEXT_SEQ),
        /* 25 */ ST_W(BPF_REG_7, ST_STARTED, 1),
        /* 26 */ LDX_W(BPF_REG_1, BPF_REG_7, ST_NEXT_SEQ),
        /* 27 */ SUB32_REG(BPF_REG_1, BPF_REG_0),
        /* 28 */ STX_W(BPF_REG_7, BPF_REG_1, ST_OFF),
        /* 29 */ ST_W(BPF_REG_7, ST_HAVE_OFF, 1),
        /* 30 */ LDX_W(BPF_REG_2, BPF_REG_6, 0),    /* skb->len */
        /* 31 */ JGE_REG(BPF_REG_1, BPF_REG_2, 10), /* -> 42 */
        /* 32 */ MOV64_IMM(BPF_REG_0, 0), /* (keeps 33 a clean target) */
        /* 33 */ LDX_W(BPF_REG_8, BPF_REG_7, ST_OFF),
        /* 34 */ LD_IND_W(BPF_REG_8, 0),
        /* 35 */ JGT_IMM(BPF_REG_0, (int32_t) max_msg, 8), /* -> 44 */
        /* 36 */ ADD64_IMM(BPF_REG_0, 4),
        /* 37 */ LDX_W(BPF_REG_1, BPF_REG_7, ST_NEXT_SEQ),
        /* 38 */ ADD32_REG(BPF_REG_1, BPF_REG_0),
        /* 39 */ STX_W(BPF_REG_7, BPF_REG_1, ST_NEXT_SEQ),
        /* 40 */ ST_W(BPF_REG_7, ST_HAVE_OFF, 0),
        /* 41 */ EXIT(),
        /* 42 */ MOV64_IMM(BPF_REG_0, -EPROTO),
        /* 43 */ EXIT(),
        /* 44 */ MOV64_IMM(BPF_REG_0, -EMSGSIZE),
        /* 45 */ EXIT(),
    };
    union bpf_attr attr;
    int fd;

    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insns = (uintptr_t) prog;
    attr.insn_cnt = sizeof(prog) / sizeof(prog[0]);
    attr.license = (uintptr_t) "Dual MIT/GPL";
    if (log && log_size) {
        log[0] = '\0';
        attr.log_buf = (uintptr_t) log;
        attr.log_size = (uint32_t) log_size;
        attr.log_level = 1;
    }
    strncpy(attr.prog_name, "ktcp_kcm_len", sizeof(attr.prog_name) - 1);
    fd = (int) sys_bpf(BPF_PROG_LOAD, &attr);
    if (fd < 0 && errno == EINVAL) {
        /* Kernels before 4.15 know no prog_name. */
        memset(attr.prog_name, 0, sizeof(attr.prog_name));
        fd = (int) sys_bpf(BPF_PROG_LOAD, &attr);
    }
    return fd < 0 ? -errno : fd;
}
