// An echo server built as ClickNF's Figure 6 (without TLS): the host as
// one StackHost, the connections as stream packets from TCPEpollServer,
// and the echo itself as the wiring: what comes out of the server goes
// back into it (bytes written back, the peer's FIN answered with ours).
// conf/echo-tls.click puts TLSServer in the loop; conf/echo.click is the
// same service as a task on the executor (TCPEchoServer).
//
//   oxnet run conf/echo-epoll.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2
//   socat - TCP:10.0.0.2:7          (from the host: type, it comes back)
//
// Variables: DEV (an oxnet device spec), IP, IP6, MAC, PORT. Counters:
// srv.opened, srv.closed, srv.bytes_in, srv.bytes_out, srv.errors,
// host/tcp/listen.syns, ...
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 7)

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
srv :: TCPEpollServer($PORT) -> srv;
