// A TLS echo server: ClickNF's Figure 6 complete. conf/echo-epoll.click
// with TLSServer put in the loop: records from TCPEpollServer go into
// TLSServer, its plaintext comes out of output 0 straight back into its
// input 1 (the echo), and the records of the answer go back to the
// server. The peer's close_notify is echoed as ours, then the FIN.
//
//   oxnet cert --out /tmp/ox --name 10.0.0.2
//   oxnet run conf/echo-tls.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2 PORT=443 \
//       CERT=/tmp/ox/cert.pem KEY=/tmp/ox/key.pem
//   openssl s_client -connect 10.0.0.2:443 -CAfile /tmp/ox/cert.pem   (type, it comes back)
//
// Variables: DEV (an oxnet device spec), IP, IP6, MAC, PORT (443),
// CERT and KEY (PEM files; left empty, a self-signed certificate for
// NAME is made at start), NAME (default localhost), ALPN (protocol
// names, space-separated; default none), VERSIONS ("1.2 1.3").
// Counters: tls.handshakes, tls.resumed, tls.errors, tls.truncated,
// tls.plain_in, tls.plain_out, srv.opened, srv.closed, ...
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 443,
       $CERT "", $KEY "", $NAME localhost, $ALPN "", $VERSIONS "1.2 1.3")

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
srv :: TCPEpollServer($PORT);
srv -> tls :: TLSServer(CERT "$CERT", KEY "$KEY", NAME "$NAME", ALPN "$ALPN", VERSIONS "$VERSIONS")
    -> [1]tls;
tls[1] -> srv;
