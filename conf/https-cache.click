// The HTTP cache over TLS (issue 12 item 4, "HTTPS through TLSServer"):
// conf/http-cache.click with TLSServer wired between the server and the
// cache (ClickNF §4.2: a function added by rewiring; neither the cache
// nor the server changes). Records on the server's side, plaintext on
// the cache's.
//
//   oxnet cert --out /tmp/ox --name 10.0.0.2
//   oxnet run conf/https-cache.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2 DIR=/srv/www \
//       CERT=/tmp/ox/cert.pem KEY=/tmp/ox/key.pem
//   curl --cacert /tmp/ox/cert.pem https://10.0.0.2/index.html
//
// Variables: those of conf/http-cache.click (PORT is 443 here), and
// TLSServer's CERT, KEY (empty: a self-signed certificate for NAME),
// NAME, ALPN ("http/1.1" by default), VERSIONS. Counters: cache.*,
// tls.handshakes, tls.resumed, tls.errors, srv.*.
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 443,
       $DIR /srv/www, $MEMORY 64M, $TIMEOUT 10, $IDLE 60,
       $CERT "", $KEY "", $NAME localhost, $ALPN "http/1.1", $VERSIONS "1.2 1.3")

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
srv :: TCPEpollServer($PORT);
srv -> tls :: TLSServer(CERT "$CERT", KEY "$KEY", NAME "$NAME", ALPN "$ALPN", VERSIONS "$VERSIONS")
    -> cache :: HTTPCache(DIR $DIR, MEMORY $MEMORY, TIMEOUT $TIMEOUT, IDLE $IDLE)
    -> [1]tls;
tls[1] -> srv;
