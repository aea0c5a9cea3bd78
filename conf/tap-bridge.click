// Bridges a TAP device (the host's side of it is a Linux interface) and
// another interface, both ways: the host's kernel and whatever is on $IF
// see each other, and every frame passes through the graph, where
// elements can be put between FromDevice and ToDevice (a Counter here).
//
//   oxnet run conf/tap-bridge.click TAP=tap:oxtap0 IF=af_packet:veth0
define($TAP tap:oxtap0, $IF af_packet:veth0)

FromDevice($TAP, PROMISC true) -> to_if :: Counter -> ToDevice($IF);
FromDevice($IF, PROMISC true) -> to_tap :: Counter -> ToDevice($TAP);
