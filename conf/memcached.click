// A key-value server speaking memcached's text, meta and binary
// protocols (issue 12 item 6): the host as one StackHost, connections as
// stream packets from TCPEpollServer, and MemcachedServer between the
// server's output and its input. `oxnet memcached DEV --ip ...` writes
// this same configuration from memcached's flags.
//
//   oxnet run conf/memcached.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2
//   memccat --servers=10.0.0.2 KEY          (from the host)
//
// Variables: DEV (an oxnet device spec), IP, IP6, MAC, PORT, MEMORY (MiB
// of items, memcached -m), ITEM_SIZE_MAX (bytes, -I), MAX_CONNECTIONS
// (-c). Counters: kv.curr_items, kv.get_hits, kv.evictions, kv.stats
// (memcached's `stats`), srv.opened, ...
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 11211,
       $MEMORY 64, $ITEM_SIZE_MAX 1048576, $MAX_CONNECTIONS 1024)

host :: StackHost("$DEV", $IP, $IP6, $MAC);
AppExecutor;
// MAX_PENDING: replies waiting for one connection before it is no longer
// read (four times that ends it): sixteen of the largest items, so that a
// multi-get of large values is answered (values are shared, not copied).
srv :: TCPEpollServer($PORT, MAX_PENDING 16777216);
srv -> kv :: MemcachedServer(MEMORY $MEMORY, ITEM_SIZE_MAX $ITEM_SIZE_MAX,
                             MAX_CONNECTIONS $MAX_CONNECTIONS, PORT $PORT) -> srv;
