// An HTTP/1.1 cache server (issue 12 item 4): the host as one
// StackHost, the connections as stream packets from TCPEpollServer, and
// HTTPCache between the server and itself, serving DIR's files from
// memory (DMA-able buffers, bodies sent without a copy).
//
//   oxnet run conf/http-cache.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2 DIR=/srv/www
//   curl -v http://10.0.0.2/index.html          (from the host)
//
// conf/http-cache-origin.click fills misses from an origin server.
// HTTPS (conf/https-cache.click): TLSServer goes between the server and the cache, records on
// the server's side, plaintext on the cache's (ClickNF §4.2: a function
// added by rewiring; the cache does not change):
//   srv :: TCPEpollServer(443);
//   srv -> tls :: TLSServer(CERT "$CERT", KEY "$KEY")
//       -> cache :: HTTPCache(DIR $DIR) -> [1]tls;
//   tls[1] -> srv;
//
// Variables: DEV (an oxnet device spec), IP, IP6, MAC, PORT (80), DIR,
// MEMORY (64M), TIMEOUT (10 s: a request head must be complete by
// then), IDLE (60 s). Counters: cache.requests, cache.hits,
// cache.misses, cache.statuses, cache.errors, cache.timeouts,
// cache.evictions, srv.opened, srv.closed, host/tcp/listen.syns, ...
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 80,
       $DIR /srv/www, $MEMORY 64M, $TIMEOUT 10, $IDLE 60)

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
srv :: TCPEpollServer($PORT)
    -> cache :: HTTPCache(DIR $DIR, MEMORY $MEMORY, TIMEOUT $TIMEOUT, IDLE $IDLE)
    -> srv;
