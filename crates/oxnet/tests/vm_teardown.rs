//! After oxnet exits, the kernel's own driver takes the device back and it
//! works: the teardown (queues stopped and polled, reset, bus mastering
//! off, `igb/teardown.rs`) leaves the NIC in a state Linux's igb driver can
//! probe, and no DMA of oxnet's survives into memory the kernel reuses.
//!
//! In a QEMU guest (TCG) with two `igb` NICs (QEMU's 82576 model) on one
//! hub and Linux's igb driver loaded: oxnet takes NIC 0 from the kernel
//! driver, sends at full rate and exits with frames in flight; NIC 0 is
//! bound to igb again, both interfaces come up, and `arping` from NIC 0 to
//! NIC 1's address gets an answer per request (ARP, RFC 826: a request
//! out of NIC 0, a reply into it), and the kernel's counters moved.

mod common;
use common::{field, line, static_oxnet as oxnet};
use oxnet_rig::{Vm, IGB};
use std::time::Duration;

#[test]
fn after_oxnet_exits_the_kernel_igb_driver_takes_the_nic_back_and_it_works() {
    let (a, b) = (Vm::nic_address(0), Vm::nic_address(1));
    let script = format!(
        r#"set -e
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null || true
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 2>/dev/null || true
echo "BOUND $(basename $(readlink /sys/bus/pci/devices/{a}/driver))"
oxnet pktgen {a} --seconds 2 --json --quiet > /tmp/gen.out 2> /tmp/gen.err || {{ cat /tmp/gen.err; exit 3; }}
echo "GEN $(tail -n 1 /tmp/gen.out)"
echo "AFTER $(basename $(readlink /sys/bus/pci/devices/{a}/driver) 2>/dev/null || echo none)"
echo {a} > /sys/bus/pci/drivers/igb/bind
n=0; until [ -d /sys/bus/pci/devices/{a}/net ]; do n=$((n+1)); [ $n -gt 100 ] && {{ echo 'no netdev'; exit 4; }}; sleep 0.1; done
IFA=$(ls /sys/bus/pci/devices/{a}/net/)
IFB=$(ls /sys/bus/pci/devices/{b}/net/)
ip addr add 10.9.0.1/24 dev $IFA
ip addr add 10.9.0.2/24 dev $IFB
ip link set $IFA up
ip link set $IFB up
n=0; until [ "$(cat /sys/class/net/$IFA/carrier 2>/dev/null)" = 1 ] && [ "$(cat /sys/class/net/$IFB/carrier 2>/dev/null)" = 1 ]; do n=$((n+1)); [ $n -gt 100 ] && {{ echo 'no carrier'; exit 5; }}; sleep 0.1; done
TXA=$(cat /sys/class/net/$IFA/statistics/tx_packets)
RXA=$(cat /sys/class/net/$IFA/statistics/rx_packets)
arping -I $IFA -c 5 10.9.0.2 > /tmp/arping.out 2>&1 || true
cat /tmp/arping.out
echo "COUNTERS tx={{\"moved\":$(( $(cat /sys/class/net/$IFA/statistics/tx_packets) - TXA ))}} rx={{\"moved\":$(( $(cat /sys/class/net/$IFA/statistics/rx_packets) - RXA ))}}"
echo "REPLIES {{\"received\":$(sed -n 's/^Received \([0-9]*\) response.*/\1/p' /tmp/arping.out)}}"
"#
    );
    let out = Vm::new()
        .nic(IGB, 0)
        .nic(IGB, 0)
        .modules(&["igb"])
        .file(oxnet(), "/bin/oxnet")
        .hugepages(64)
        .memory_mb(768)
        .timeout(Duration::from_secs(240))
        .run(&script)
        .expect("guest ran");
    println!("{}\nguest ran {:?}", out.stdout, out.duration);
    let report = out.report();
    assert!(out.success(), "{report}");
    assert!(out.stdout.contains("BOUND igb"), "the kernel driver had the NIC first: {report}");
    assert!(out.stdout.contains("AFTER none"), "oxnet took it from the kernel driver: {report}");
    assert!(field(line(&out.stdout, "GEN "), "sent") > 0, "{report}");
    // busybox arping -c 5 sends 5 requests; each gets one reply from NIC 1.
    assert_eq!(field(line(&out.stdout, "REPLIES "), "received"), 5, "{report}");
    let counters = line(&out.stdout, "COUNTERS ");
    let (tx, rx) = counters.split_once(" rx=").expect("two counters");
    assert!(field(tx, "moved") >= 5, "the kernel sent through NIC 0: {report}");
    assert!(field(rx, "moved") >= 5, "the kernel received through NIC 0: {report}");
}
