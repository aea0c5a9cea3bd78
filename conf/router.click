// An IPv4 router between two interfaces, in the classic Click shape
// (Kohler et al., "The Click modular router", Figure 1, cut down): it
// answers ARP and ping for its own addresses, resolves its neighbours with
// ARP, routes between the two networks with a longest-prefix lookup,
// decrements the TTL and answers an expired one with ICMP time exceeded.
//
//   oxnet run conf/router.click IF0=af_packet:veth0 MAC0=<veth0's MAC> \
//       IF1=af_packet:veth1 MAC1=<veth1's MAC>
//
// The addresses are variables too (IP0, NET0, IP1, NET1); FLOW=true turns
// on 802.3x pause frames. With -j N, thread i routes what RSS puts on
// queue i; the ARP tables are shared between the threads (replies arrive
// on one queue). Counters:
// `oxnet handler` or -h: fwd0.count / fwd1.count (packets routed out of
// each interface), local.count (packets for the router itself),
// pings.count (echo requests answered), ttl.count (time exceeded sent).
define($IF0 af_packet:veth0, $MAC0 02:00:00:00:00:01, $IP0 10.0.1.1, $NET0 10.0.1.0/24,
       $IF1 af_packet:veth1, $MAC1 02:00:00:00:00:02, $IP1 10.0.2.1, $NET1 10.0.2.0/24,
       $FLOW false)

AddressInfo(if0 $IP0 $MAC0, if1 $IP1 $MAC1);

// Frames in: ARP requests, ARP replies, IP, the rest.
c0 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
c1 :: Classifier(12/0806 20/0001, 12/0806 20/0002, 12/0800, -);
FromDevice($IF0, FLOW_CONTROL $FLOW) -> c0;
FromDevice($IF1, FLOW_CONTROL $FLOW) -> c1;
out0 :: ToDevice($IF0, FLOW_CONTROL $FLOW);
out1 :: ToDevice($IF1, FLOW_CONTROL $FLOW);

// ARP: answer for our addresses; learn from replies.
c0[0] -> ARPResponder(if0) -> out0;
c1[0] -> ARPResponder(if1) -> out1;
arpq0 :: ARPQuerier(if0) -> out0;
arpq1 :: ARPQuerier(if1) -> out1;
c0[1] -> [1]arpq0;
c1[1] -> [1]arpq1;

// IP in: painted with the interface it came in on, header checked,
// destination annotation from the header.
rt :: StaticIPLookup($IP0/32 0, $IP1/32 0, $NET0 1, $NET1 2);
ip :: Strip(14) -> CheckIPHeader -> GetIPAddress(16) -> rt;
c0[2] -> Paint(0) -> ip;
c1[2] -> Paint(1) -> ip;

// For the router itself: ping is answered, the rest dropped.
rt[0] -> local :: Counter -> icmp :: IPClassifier(icmp type echo, -);
icmp[0] -> pings :: Counter -> ICMPPingResponder -> GetIPAddress(16) -> rt;
icmp[1] -> Discard;

// Out: TTL, then ARP (which puts the Ethernet header on).
rt[1] -> dt0 :: DecIPTTL -> fwd0 :: Counter -> [0]arpq0;
rt[2] -> dt1 :: DecIPTTL -> fwd1 :: Counter -> [0]arpq1;
// An expired TTL is answered from the address of the interface the packet
// came in on (RFC 1812 §4.3.2.4), which Paint recorded.
ttl :: Counter -> rt;
dt0[1] -> expired :: PaintSwitch;
dt1[1] -> expired;
expired[0] -> ICMPError(if0, timeexceeded) -> GetIPAddress(16) -> ttl;
expired[1] -> ICMPError(if1, timeexceeded) -> GetIPAddress(16) -> ttl;

// Everything else (IPv6, other EtherTypes) is dropped.
c0[3] -> Discard;
c1[3] -> Discard;
