// The HTTP cache of conf/http-cache.click filling its misses from an
// origin server (ClickNF Figure 11's shape: the server side, the cache,
// and TCPEpollClient for the connections to the origin). Responses are
// kept as RFC 9111 allows (Cache-Control, Expires, Last-Modified) and
// revalidated with If-None-Match / If-Modified-Since once stale.
//
//   oxnet run conf/http-cache-origin.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2 ORIGIN=10.0.0.1:8080
//   curl -v http://10.0.0.2/page.html           (from the host)
//
// Variables: as conf/http-cache.click, ORIGIN (ADDR:PORT), DIR (none by
// default: objects preloaded, never evicted), MAX_OBJECT (1M: larger answers are 502). Counters: as there, and
// cache.fetches, cache.revalidations, cache.origin_errors, cli.opened.
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 80,
       $ORIGIN 10.0.0.1:8080, $DIR "", $MEMORY 64M, $MAX_OBJECT 1M, $TIMEOUT 10, $IDLE 60)

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
srv :: TCPEpollServer($PORT)
    -> cache :: HTTPCache(ORIGIN $ORIGIN, DIR "$DIR", MEMORY $MEMORY, MAX_OBJECT $MAX_OBJECT, TIMEOUT $TIMEOUT, IDLE $IDLE)
    -> srv;
cache[1] -> cli :: TCPEpollClient(SRC $IP) -> [1]cache;
