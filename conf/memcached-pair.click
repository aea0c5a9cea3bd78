// Both ends of a key-value load in ONE router: a client host (10.9.2.1,
// the loadgen's stack: `oxnet loadgen --proto memcached-text --config`)
// and the key-value server of conf/memcached.click (10.9.2.2, port
// 11211), each on its own software 82599 port, the two ports wired to
// each other. For simulated time (`--simtime`): a deterministic load, as
// scripts/bench/kv-instructions.sh counts instructions per request with.
//
//   oxnet loadgen -s 10.9.2.2:11211 --proto memcached-text --ip 10.9.2.1/24 \
//       --simtime --requests 2000 --config conf/memcached-pair.click
//
// Variables: A and B, the ports' names (sim: names are per process).
define($A pairA, $B pairB)
define($MACA 02:00:00:00:0c:01, $MACB 02:00:00:00:0d:02)
FromDevice("sim:$A,wire=$B", PROMISC true) -> ca :: Classifier(12/0800, -);
FromDevice("sim:$B", PROMISC true) -> cb :: Classifier(12/0800, -);
ca[1] -> Discard;
cb[1] -> Discard;
ca[0] -> ipa :: IPv4Input(10.9.2.1);
cb[0] -> ipb :: IPv4Input(10.9.2.2);
tcp :: TCPStack;
ipa[0] -> tcp;
ipb[0] -> tcp;
ipa[1] -> Discard; ipa[2] -> Discard; ipa[3] -> Discard;
ipb[1] -> Discard; ipb[2] -> Discard; ipb[3] -> Discard;
route :: IPClassifier(dst host 10.9.2.2, dst host 10.9.2.1);
tcp -> route;
route[0] -> EtherEncap(0x0800, $MACA, $MACB) -> ToDevice("sim:$A,wire=$B");
route[1] -> EtherEncap(0x0800, $MACB, $MACA) -> ToDevice("sim:$B");
AppExecutor;
srv :: TCPEpollServer(11211, ADDR 10.9.2.2, MAX_PENDING 16777216);
srv -> kv :: MemcachedServer(MEMORY 64) -> srv;
