// An echo server (RFC 862, TCP and UDP) on oxnet's own TCP/IP stack: ClickNF's
// Figure 6 without TLS. One device, IPv4 and IPv6, ARP and Neighbor
// Discovery, ping answered, TCP as the TCPStack compound (cTCP's
// elements, docs/stack.md), the echo application as a task on the
// router's executor.
//
//   oxnet run conf/echo.click DEV=tap:ox0,ip=10.0.0.1/24 IP=10.0.0.2
//   socat - TCP:10.0.0.2:7          (from the host: type, it comes back)
//
// Variables: DEV (an oxnet device spec), IP (IPv4 address), IP6 (IPv6
// address), MAC, PORT, LOSS (a share of received frames to drop, for
// testing loss recovery where tc netem is not available; writable at run
// time as loss.drop_prob), KEEPALIVE / KEEPALIVE_INTERVAL / KEEPALIVE_COUNT
// and USER_TIMEOUT (set on every accepted connection, as setsockopt's
// TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT / TCP_USER_TIMEOUT would;
// KEEPALIVE 0 and USER_TIMEOUT 0 are off). Counters (-h or `oxnet
// handler`): echo.connections, echo.bytes, echo.timeouts, tcp/listen.syns,
// tcp/timers.user_timeouts, loss.drops, ...
define($DEV tap:ox0, $IP 10.0.0.2, $IP6 fd00::2, $MAC 02:00:00:00:00:02, $PORT 7, $LOSS 0,
       $KEEPALIVE 0, $KEEPALIVE_INTERVAL 75s, $KEEPALIVE_COUNT 9, $USER_TIMEOUT 0)

dev :: FromDevice("$DEV", PROMISC true);
// TIMEOUT 0: what the stack pushes goes at once (it pushes whole
// batches already); ToDevice's default, 100 us for a partial burst to
// fill, would add up to that to every answer of a quiet connection.
out :: ToDevice("$DEV", TIMEOUT 0);

// Frames in: IPv4, IPv6, ARP, the rest.
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

// TCP, both families, into one stack; what it sends goes to the
// resolver of its family. IPv4 segments pass TCPGRO first: a TAP (and
// most devices here) has no receive side coalescing, so in-order
// segments of one flow in a batch are merged in software
// (docs/stack.md, "Offloads"); with the 82599's RSC, leave it out.
tcp :: TCPStack;
ip4[0] -> gro :: TCPGRO -> tcp;
ip6[0] -> tcp;
family :: Classifier(0/40%f0, 0/60%f0);
tcp -> family;
family[0] -> arp;
family[1] -> nd;

// UDP: datagrams to the sockets; what they send, to the resolvers.
udp :: UDPInput;
ip4[1] -> udp;
ip6[1] -> udp;
udp -> Discard;
UDPOutput -> family;

// ICMP: echo answered; errors about our TCP segments to TCP (path MTU,
// unreachable ports, RFC 1122 §4.2.3.9).
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
ip4[3] -> Discard;
ip6[3] -> Discard;

AppExecutor;
echo :: TCPEchoServer($PORT, KEEPALIVE $KEEPALIVE, KEEPALIVE_INTERVAL $KEEPALIVE_INTERVAL,
                      KEEPALIVE_COUNT $KEEPALIVE_COUNT, USER_TIMEOUT $USER_TIMEOUT);
uecho :: UDPEchoServer($PORT);
