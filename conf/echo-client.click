// An echo client on oxnet's own TCP/IP stack: CONNECTIONS connections to
// DST:PORT, BYTES random bytes each, every byte checked when it comes
// back; the router stops when all are done. The other end can be oxnet
// (conf/echo.click) or any echo server (socat's, Linux's).
//
//   oxnet run conf/echo-client.click 'DEV=tap:ox1,ip=10.0.1.1/24' IP=10.0.1.2 SRC=10.0.1.2 DST=10.0.1.1 \
//       -h cli.done -h cli.failed -h cli.bytes
//
// SRC is the client's address, of DST's family (IP or IP6). LOSS drops
// that share of the frames received (loss.drop_prob at run time: 1 makes
// the server vanish); KEEPALIVE / KEEPALIVE_INTERVAL / KEEPALIVE_COUNT and
// USER_TIMEOUT are set on every connection (0: off), as in conf/echo.click.
//
// The host part (devices, ARP, ND, IP, ICMP) is conf/echo.click's.
define($DEV tap:ox1, $IP 10.0.1.2, $IP6 fd00:1::2, $MAC 02:00:00:00:01:02,
       $SRC 10.0.1.2, $DST 10.0.1.1, $PORT 7, $CONNECTIONS 10, $BYTES 100000, $CONCURRENCY 2,
       $LOSS 0, $KEEPALIVE 0, $KEEPALIVE_INTERVAL 75s, $KEEPALIVE_COUNT 9, $USER_TIMEOUT 0)

dev :: FromDevice("$DEV", PROMISC true);
// TIMEOUT 0: what the stack pushes goes at once (it pushes whole
// batches already); ToDevice's default, 100 us for a partial burst to
// fill, would add up to that to every answer of a quiet connection.
out :: ToDevice("$DEV", TIMEOUT 0);
eth :: Classifier(12/0800, 12/86dd, 12/0806, -);
dev -> loss :: RandomSample(DROP $LOSS) -> eth;
arp :: ARPResolver($IP, $MAC) -> out;
nd :: NDResolver($IP6, $MAC) -> out;
eth[2] -> [1]arp;
eth[3] -> Discard;
ip4 :: IPv4Input($IP);
ip6 :: IPv6Input($IP6);
eth[0] -> ip4;
eth[1] -> ip6;
tcp :: TCPStack;
ip4[0] -> tcp;
ip6[0] -> tcp;
family :: Classifier(0/40%f0, 0/60%f0);
tcp -> family;
family[0] -> arp;
family[1] -> nd;
icmp4 :: ICMPv4Responder;
icmp6 :: ICMPv6Responder;
ip4[2] -> icmp4;
ip6[2] -> icmp6;
icmp4[0] -> arp;
icmp6[0] -> nd;
icmp6[2] -> [1]nd;
tcperr :: TCPIcmpError;
icmp4[1] -> tcperr;
icmp6[1] -> tcperr;
ip4[1] -> Discard;
ip4[3] -> Discard;
ip6[1] -> Discard;
ip6[3] -> Discard;

AppExecutor;
cli :: TCPEchoClient($DST, PORT $PORT, SRC $SRC, CONNECTIONS $CONNECTIONS, BYTES $BYTES,
                     CONCURRENCY $CONCURRENCY, STOP true, KEEPALIVE $KEEPALIVE,
                     KEEPALIVE_INTERVAL $KEEPALIVE_INTERVAL, KEEPALIVE_COUNT $KEEPALIVE_COUNT,
                     USER_TIMEOUT $USER_TIMEOUT);
