// Counts what arrives on $DEV and drops it; read the counter while it runs:
//
//   oxnet run -u /tmp/oxnet.sock conf/counter.click DEV=af_packet:veth0
//   oxnet handler --socket /tmp/oxnet.sock c.count
//   oxnet handler --socket /tmp/oxnet.sock c.byte_count
define($DEV sim:counter0)

FromDevice($DEV, PROMISC true) -> c :: Counter -> Discard;
