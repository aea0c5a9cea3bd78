// A SOCKS4 and SOCKS4a proxy as ClickNF's Figure 11: TCPEpollServer
// takes the clients' connections, Socks4Proxy reads their requests and
// relays, TCPEpollClient opens the connections to the destinations
// (from this host's address, under the client connection's id, on a
// port RSS maps back to this core). BIND listens on BIND_ADDR ($IP),
// ports 61000-61999. FLOW_CONTROL: a slow reader on one side stops the
// other side being read (Pause/Resume passed across by the proxy).
//
//   oxnet run conf/socks4.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2
//   curl --socks4 10.0.0.2:1080 http://10.0.0.1/      (from the host)
//   curl --socks4a 10.0.0.2:1080 http://web.test/     (with HOSTS=FILE naming web.test)
//
// Variables: DEV (an oxnet device spec), IP, IP6, MAC, PORT (1080),
// HOSTS (a file in /etc/hosts format: SOCKS4a's resolver; empty: names
// are refused), ALLOW and DENY (destinations, `PREFIX[:PORT] ...`),
// USERS (user ids accepted; empty: any), REQUEST_TIMEOUT (seconds for
// a whole request, 30), BIND_TIMEOUT (seconds a BIND waits, 120).
// Counters: proxy.requests,
// proxy.granted, proxy.rejected, proxy.denied, proxy.unresolved,
// proxy.bound, proxy.bytes_up, proxy.bytes_down, proxy.errors,
// proxy.aborted, srv.opened, cli.opened, ...
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 1080,
       $HOSTS "", $ALLOW "", $DENY "", $USERS "", $REQUEST_TIMEOUT 30, $BIND_TIMEOUT 120)

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
srv :: TCPEpollServer($PORT, FLOW_CONTROL true)
    -> proxy :: Socks4Proxy(HOSTS "$HOSTS", ALLOW "$ALLOW", DENY "$DENY", USERS "$USERS", BIND_ADDR $IP,
                            REQUEST_TIMEOUT $REQUEST_TIMEOUT, BIND_TIMEOUT $BIND_TIMEOUT)
    -> srv;
proxy[1] -> cli :: TCPEpollClient(SRC $IP, FLOW_CONTROL true) -> [1]proxy;
