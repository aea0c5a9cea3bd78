//! `StackHost`: a whole host on one device, as a compound class for the
//! configurations of servers (conf/*.click of issue 12), so that each
//! of them is its application elements and one line for the host.
//!
//! `StackHost("DEV", IP, IP6, MAC)`: FromDevice/ToDevice on DEV (an oxnet
//! device spec, quoted: a spec's options are separated by commas), IPv4 address IP and IPv6 address IP6 (both answered:
//! ARP, Neighbor Discovery, ping), TCP as `TCPStack` with TCPGRO on
//! IPv4 (a device with RSC does not need it; harmless otherwise), UDP
//! (`UDPInput`, `UDPOutput`) and ICMP errors delivered to TCP. No ports:
//! applications reach it through the router's sockets (the executor's
//! tasks, TCPEpollServer, ...). Its elements' handlers are under the
//! instance's name: `host/tcp/listen.syns`, `host/ip4.drops`, ...
//! conf/echo.click is the same host written out, element by element.

/// The compound class, added to the language's prelude by
/// `crate::elements::register`.
pub const STACK_HOST: &str = "
elementclass StackHost { $dev, $ip, $ip6, $mac |
  dev :: FromDevice($dev, PROMISC true);
  out :: ToDevice($dev, TIMEOUT 0);
  eth :: Classifier(12/0800, 12/86dd, 12/0806, -);
  dev -> eth;
  arp :: ARPResolver($ip, $mac) -> out;
  nd :: NDResolver($ip6, $mac) -> out;
  eth[2] -> [1]arp;
  eth[3] -> Discard;
  ip4 :: IPv4Input($ip);
  ip6 :: IPv6Input($ip6);
  eth[0] -> ip4;
  eth[1] -> ip6;
  tcp :: TCPStack;
  ip4[0] -> gro :: TCPGRO -> tcp;
  ip6[0] -> tcp;
  family :: Classifier(0/40%f0, 0/60%f0);
  tcp -> family;
  family[0] -> arp;
  family[1] -> nd;
  udp :: UDPInput;
  ip4[1] -> udp;
  ip6[1] -> udp;
  udp -> Discard;
  UDPOutput -> family;
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
}
";
