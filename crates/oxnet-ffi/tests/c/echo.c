/*
 * echo.c: oxnet's C ABI from C. Makes a stack, listens on 8080, feeds a
 * hand-built SYN, the handshake's ACK and a request, accepts, reads,
 * writes the request back, and checks every packet oxnet sends (flags,
 * sequence and acknowledgment numbers, payload, addresses, checksums).
 * Exits 0 if all is as expected, 1 at the first mismatch (with a
 * message on stderr).
 */
#include "oxnet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F_FIN 0x01
#define F_SYN 0x02
#define F_PSH 0x08
#define F_ACK 0x10

static const uint8_t local_ip[4] = {192, 168, 0, 1};
static const uint8_t remote_ip[4] = {192, 0, 2, 1};
enum { LOCAL_PORT = 8080, REMOTE_PORT = 40000 };
static const uint32_t peer_isn = 7000;

#define CHECK(cond, ...)                                             \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "echo.c:%d: %s: ", __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                            \
            fprintf(stderr, " (errno %d)\n", errno);                 \
            exit(1);                                                 \
        }                                                            \
    } while (0)

/* RFC 1071: the one's-complement sum of 16-bit big-endian words. */
static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum)
{
    for (size_t i = 0; i + 1 < n; i += 2)
        sum += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1)
        sum += (uint32_t)p[n - 1] << 8;
    return sum;
}

static uint16_t fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v & 0xffff); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

/* The TCP checksum over the pseudo-header (RFC 9293 §3.1) and segment. */
static uint16_t tcp_sum(const uint8_t *ip, const uint8_t *tcp, size_t tcp_len)
{
    uint8_t pseudo[12];
    memcpy(pseudo, ip + 12, 8);
    pseudo[8] = 0;
    pseudo[9] = 6;
    put16(pseudo + 10, (uint16_t)tcp_len);
    return fold(sum16(tcp, tcp_len, sum16(pseudo, 12, 0)));
}

/* Builds an IPv4/TCP packet from the peer; returns its length. */
static size_t build(uint8_t *p, uint8_t flags, uint32_t seq, uint32_t ack, const char *data)
{
    size_t dlen = data ? strlen(data) : 0;
    size_t opt = (flags & F_SYN) ? 4 : 0;
    size_t tcp_len = 20 + opt + dlen, total = 20 + tcp_len;
    memset(p, 0, total);
    p[0] = 0x45;
    put16(p + 2, (uint16_t)total);
    p[6] = 0x40; /* DF */
    p[8] = 64;
    p[9] = 6;
    memcpy(p + 12, remote_ip, 4);
    memcpy(p + 16, local_ip, 4);
    put16(p + 10, (uint16_t)~fold(sum16(p, 20, 0)));
    uint8_t *t = p + 20;
    put16(t, REMOTE_PORT);
    put16(t + 2, LOCAL_PORT);
    put32(t + 4, seq);
    put32(t + 8, ack);
    t[12] = (uint8_t)(((20 + opt) / 4) << 4);
    t[13] = flags;
    put16(t + 14, 65535);
    if (opt) { /* MSS 1000 */
        t[20] = 2; t[21] = 4; put16(t + 22, 1000);
    }
    memcpy(t + 20 + opt, data, dlen);
    put16(t + 16, (uint16_t)~tcp_sum(p, t, tcp_len));
    return total;
}

struct seg {
    uint8_t flags;
    uint32_t seq, ack;
    size_t len;
    const uint8_t *payload;
};

/* Takes the next packet oxnet sent and parses it, checking the IPv4
 * header, the addresses, the ports and both checksums. */
static struct seg take(oxnet_stack *h, uint8_t *buf, size_t cap)
{
    ssize_t n = oxnet_stack_output(h, buf, cap);
    CHECK(n >= 40, "expected a packet, got %zd", n);
    CHECK(buf[0] == 0x45 && buf[9] == 6, "IPv4/TCP without options");
    CHECK(get16(buf + 2) == n, "IPv4 total length %u for %zd bytes", get16(buf + 2), n);
    CHECK(fold(sum16(buf, 20, 0)) == 0xffff, "IPv4 header checksum");
    CHECK(memcmp(buf + 12, local_ip, 4) == 0 && memcmp(buf + 16, remote_ip, 4) == 0, "addresses");
    const uint8_t *t = buf + 20;
    size_t tcp_len = (size_t)n - 20, off = (size_t)(t[12] >> 4) * 4;
    CHECK(off >= 20 && off <= tcp_len, "TCP data offset %zu", off);
    CHECK(tcp_sum(buf, t, tcp_len) == 0xffff, "TCP checksum");
    CHECK(get16(t) == LOCAL_PORT && get16(t + 2) == REMOTE_PORT, "ports %u -> %u", get16(t), get16(t + 2));
    struct seg s = {t[13], get32(t + 4), get32(t + 8), tcp_len - off, t + off};
    return s;
}

int main(void)
{
    uint8_t pkt[2048], out[2048];
    char rd[64];
    oxnet_stack *h = oxnet_stack_new(local_ip, NULL);
    CHECK(h != NULL, "oxnet_stack_new");

    int l = oxnet_socket(h, AF_INET, SOCK_STREAM, IPPROTO_TCP);
    CHECK(l == 3, "socket gave %d", l);
    int one = 1;
    CHECK(oxnet_setsockopt(h, l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0, "SO_REUSEADDR");
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(LOCAL_PORT);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    CHECK(oxnet_bind(h, l, (struct sockaddr *)&a, sizeof(a)) == 0, "bind");
    CHECK(oxnet_listen(h, l, 4) == 0, "listen");
    CHECK(oxnet_accept(h, l, NULL, NULL) == -1 && errno == EAGAIN, "accept before a connection");

    /* SYN -> SYN-ACK acknowledging it (RFC 9293 §3.5). */
    CHECK(oxnet_stack_input(h, pkt, build(pkt, F_SYN, peer_isn, 0, NULL)) == 0, "SYN in");
    struct seg s = take(h, out, sizeof(out));
    CHECK(s.flags == (F_SYN | F_ACK), "SYN-ACK flags 0x%02x", s.flags);
    CHECK(s.ack == peer_isn + 1, "SYN-ACK ack %u", s.ack);
    CHECK(s.len == 0, "SYN-ACK payload");
    uint32_t iss = s.seq;

    /* The handshake's ACK, then a request. */
    CHECK(oxnet_stack_advance(h, 10000) == 0, "advance");
    CHECK(oxnet_stack_input(h, pkt, build(pkt, F_ACK, peer_isn + 1, iss + 1, NULL)) == 0, "ACK in");
    CHECK(oxnet_stack_output(h, out, sizeof(out)) == 0, "nothing answers the ACK");
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);
    int c = oxnet_accept(h, l, (struct sockaddr *)&peer, &plen);
    CHECK(c == 4, "accept gave %d", c);
    CHECK(plen == sizeof(peer) && peer.sin_family == AF_INET, "peer address length/family");
    CHECK(ntohs(peer.sin_port) == REMOTE_PORT && memcmp(&peer.sin_addr, remote_ip, 4) == 0, "peer");
    CHECK(oxnet_read(h, c, rd, sizeof(rd)) == -1 && errno == EAGAIN, "read before data");

    const char *req = "ping 42";
    CHECK(oxnet_stack_input(h, pkt, build(pkt, F_ACK | F_PSH, peer_isn + 1, iss + 1, req)) == 0, "data in");
    ssize_t n = oxnet_read(h, c, rd, sizeof(rd));
    CHECK(n == (ssize_t)strlen(req) && memcmp(rd, req, (size_t)n) == 0, "read %zd", n);
    /* Reading opens the window: an ACK of the request. */
    s = take(h, out, sizeof(out));
    CHECK(s.flags == F_ACK && s.seq == iss + 1 && s.ack == peer_isn + 1 + strlen(req) && s.len == 0,
          "ACK of the request: flags 0x%02x seq %u ack %u len %zu", s.flags, s.seq, s.ack, s.len);

    /* Echo it back: one segment with PSH (RFC 9293 §3.9.1). */
    CHECK(oxnet_write(h, c, rd, (size_t)n) == n, "write");
    s = take(h, out, sizeof(out));
    CHECK(s.flags == (F_ACK | F_PSH), "echo flags 0x%02x", s.flags);
    CHECK(s.seq == iss + 1 && s.ack == peer_isn + 1 + strlen(req), "echo seq %u ack %u", s.seq, s.ack);
    CHECK(s.len == strlen(req) && memcmp(s.payload, req, s.len) == 0, "echo payload (%zu bytes)", s.len);

    /* The peer acknowledges it; we close: a FIN after the data. */
    uint32_t peer_next = peer_isn + 1 + (uint32_t)strlen(req);
    CHECK(oxnet_stack_input(h, pkt, build(pkt, F_ACK, peer_next, iss + 1 + (uint32_t)n, NULL)) == 0, "ACK in");
    int err = -1;
    socklen_t elen = sizeof(err);
    CHECK(oxnet_getsockopt(h, c, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0, "SO_ERROR %d", err);
    CHECK(oxnet_close(h, c) == 0, "close");
    s = take(h, out, sizeof(out));
    CHECK(s.flags == (F_FIN | F_ACK) && s.seq == iss + 1 + (uint32_t)n && s.ack == peer_next,
          "FIN: flags 0x%02x seq %u ack %u", s.flags, s.seq, s.ack);
    CHECK(oxnet_stack_output(h, out, sizeof(out)) == 0, "nothing more");
    oxnet_stack_free(h);
    printf("echo.c: ok\n");
    return 0;
}
