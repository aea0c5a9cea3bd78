// oxnet fwd as a configuration: every frame received on $A is sent on $B
// and back, batch by batch, on any two oxnet devices.
//
//   oxnet run conf/fwd.click A=0000:03:00.0 B=0000:03:00.1
//   oxnet run -j 2 conf/fwd.click A=... B=...     (queue i on thread i, RSS)
//
// TIMEOUT 0: a batch goes out as it came (no waiting for a full burst),
// as `oxnet fwd` does. FLOW=true: 802.3x pause frames on both devices, so
// that a full ring pauses the sender instead of dropping.
define($A sim:fwd0, $B sim:fwd1, $BURST 32, $FLOW false)

FromDevice($A, PROMISC true, BURST $BURST, FLOW_CONTROL $FLOW)
  -> ToDevice($B, BURST $BURST, TIMEOUT 0, FLOW_CONTROL $FLOW);
FromDevice($B, PROMISC true, BURST $BURST, FLOW_CONTROL $FLOW)
  -> ToDevice($A, BURST $BURST, TIMEOUT 0, FLOW_CONTROL $FLOW);
