/*
 * oxnet.h: oxnet's TCP sockets and epoll for C (crate oxnet-ffi; link
 * with -loxnet_ffi). Written by hand; every declaration matches an
 * exported function of crates/oxnet-ffi/src/abi.rs.
 *
 * A stack is a router with oxnet's TCP (TCPStack) between a packet
 * source and a sink: C gives it IP packets (oxnet_stack_input), takes
 * the IP packets it sends (oxnet_stack_output), and drives its simulated
 * clock (oxnet_stack_advance). Nothing waits: a call that would block
 * returns -1 with errno EAGAIN, on a blocking descriptor too (the caller
 * drives time and calls again); connect returns EINPROGRESS.
 *
 * Errors: -1 with errno set, as the libc calls do. Null pointers where
 * memory is needed give EFAULT, lengths out of range EINVAL; other bad
 * pointers cannot be detected. No Rust panic crosses into C: a panic is
 * -1 with errno EIO. A handle is used by one thread at a time.
 * Constants (AF_INET, SOCK_STREAM, TCP_NODELAY, EPOLLIN...) are Linux's,
 * from the system headers.
 */
#ifndef OXNET_H
#define OXNET_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A stack (opaque). */
typedef struct oxnet_stack oxnet_stack;

/* Makes a stack. local_ipv4 (4 bytes, network order) and local_ipv6 (16
 * bytes), each may be NULL, are its own addresses: the source address of
 * a connection opened from an unbound socket. NULL (errno set) on
 * failure. */
oxnet_stack *oxnet_stack_new(const uint8_t *local_ipv4, const uint8_t *local_ipv6);

/* Frees a stack and every socket in it. NULL: nothing. */
void oxnet_stack_free(oxnet_stack *h);

/* Gives the stack one IP packet (IPv4 or IPv6 header first, len bytes)
 * and lets it process it. 0, or -1: EINVAL for an empty packet, one over
 * 65535 bytes, or one that is neither IPv4 nor IPv6; ENOBUFS if the
 * stack had no buffer for it (one over a 2048-byte packet buffer, a
 * segment coalesced as GRO would make, takes one of a few large ones). */
int oxnet_stack_input(oxnet_stack *h, const uint8_t *ip_packet, size_t len);

/* Copies the next IP packet the stack sent into buf and returns its
 * length; 0 if there is none. -1 EMSGSIZE if cap is too small (the
 * packet stays queued). */
ssize_t oxnet_stack_output(oxnet_stack *h, uint8_t *buf, size_t cap);

/* The length of the next packet oxnet_stack_output would give (0 if
 * none); *time_us (if time_us is not NULL) gets the simulated time it was
 * sent. */
ssize_t oxnet_stack_pending(oxnet_stack *h, uint64_t *time_us);

/* Moves the simulated clock forward to now_us (microseconds since the
 * stack was made; an earlier time changes nothing). The timers due on the
 * way fire, each at its own time (retransmissions, delayed ACKs,
 * keepalives, TIME-WAIT). 0, or -1. */
int oxnet_stack_advance(oxnet_stack *h, uint64_t now_us);

/* The simulated clock in microseconds (0 for NULL). */
uint64_t oxnet_stack_now(oxnet_stack *h);

/* The earliest TCP timer deadline after now, in microseconds; -1 (errno
 * ENOENT) if no timer is armed. */
int64_t oxnet_stack_next_timer(oxnet_stack *h);

/* socket(2): domain AF_INET or AF_INET6, type SOCK_STREAM (with
 * SOCK_NONBLOCK, SOCK_CLOEXEC), protocol 0 or IPPROTO_TCP. Descriptors
 * start at 3 and are the stack's own, not the process's. */
int oxnet_socket(oxnet_stack *h, int domain, int type, int protocol);

/* bind(2): a sockaddr_in or sockaddr_in6 of the socket's family. */
int oxnet_bind(oxnet_stack *h, int fd, const struct sockaddr *addr, socklen_t addrlen);

/* listen(2) on the bound endpoint (EINVAL if not bound). */
int oxnet_listen(oxnet_stack *h, int fd, int backlog);

/* accept(2): the new descriptor, the peer in *addr (addr and addrlen
 * both NULL: not wanted); -1 EAGAIN if no connection is established. */
int oxnet_accept(oxnet_stack *h, int fd, struct sockaddr *addr, socklen_t *addrlen);

/* connect(2): sends the SYN and returns -1 EINPROGRESS. Called again: -1
 * EALREADY during the handshake, -1 EISCONN once connected, or -1 with
 * the error that ended it (ECONNREFUSED, ETIMEDOUT). From an unbound
 * socket the source is the stack's address and an ephemeral port. */
int oxnet_connect(oxnet_stack *h, int fd, const struct sockaddr *addr, socklen_t addrlen);

/* read(2): bytes read, 0 at the end of the stream, -1 EAGAIN if nothing
 * has arrived, or the connection's error (ECONNRESET, ETIMEDOUT). */
ssize_t oxnet_read(oxnet_stack *h, int fd, void *buf, size_t count);

/* write(2): bytes queued (the send buffer takes what it has room for),
 * -1 EAGAIN if it is full, EPIPE after shutdown. */
ssize_t oxnet_write(oxnet_stack *h, int fd, const void *buf, size_t count);

/* close(2): a connection closes (a FIN, or a RST if received data is
 * unread), a listener stops; the descriptor leaves every epoll. */
int oxnet_close(oxnet_stack *h, int fd);

/* shutdown(2): SHUT_WR and SHUT_RDWR send a FIN after the queued data;
 * after SHUT_RD or SHUT_RDWR a read gives what is queued, then 0 (end of
 * file) where it would have waited. */
int oxnet_shutdown(oxnet_stack *h, int fd, int how);

/* setsockopt(2) with an int value: SOL_SOCKET SO_REUSEADDR (kept, no
 * effect), SO_KEEPALIVE, SO_SNDBUF (bytes written and not yet
 * acknowledged a socket holds, as given: Linux doubles the value and
 * counts its overhead); IPPROTO_TCP TCP_NODELAY, TCP_KEEPIDLE and
 * TCP_KEEPINTVL (seconds), TCP_KEEPCNT, TCP_USER_TIMEOUT (milliseconds,
 * 0: off), TCP_MAXSEG (before connect or on a listener: the MSS announced
 * and used at most; 0 or 88 to 32767). Set on a listener, options pass to the connections it
 * accepts. Others: ENOPROTOOPT. */
int oxnet_setsockopt(oxnet_stack *h, int fd, int level, int optname, const void *optval,
                     socklen_t optlen);

/* getsockopt(2) of the options above and SOL_SOCKET SO_ERROR (the
 * connection's error, 0 if none); *optlen becomes sizeof(int). */
int oxnet_getsockopt(oxnet_stack *h, int fd, int level, int optname, void *optval,
                     socklen_t *optlen);

/* fcntl(2), not variadic: arg is the command's argument (0 if none).
 * F_GETFL (O_RDWR | O_NONBLOCK if set), F_SETFL (O_NONBLOCK), F_GETFD
 * and F_SETFD (0). */
int oxnet_fcntl(oxnet_stack *h, int fd, int cmd, long arg);

/* epoll_create(2): size must be positive. */
int oxnet_epoll_create(oxnet_stack *h, int size);

/* epoll_ctl(2): EPOLL_CTL_ADD / MOD / DEL of a listening or connected
 * socket; EPOLLET and EPOLLONESHOT as Linux's. event may be NULL for
 * DEL. */
int oxnet_epoll_ctl(oxnet_stack *h, int epfd, int op, int fd, struct epoll_event *event);

/* epoll_wait(2) without waiting: the number of events written (0 if no
 * socket is ready); timeout is not used. */
int oxnet_epoll_wait(oxnet_stack *h, int epfd, struct epoll_event *events, int maxevents,
                     int timeout);

/* poll(2) without waiting: fills each revents (POLLNVAL for a descriptor
 * not open) and returns how many are not 0; timeout is not used. */
int oxnet_poll(oxnet_stack *h, struct pollfd *fds, nfds_t nfds, int timeout);

#ifdef __cplusplus
}
#endif

#endif /* OXNET_H */
