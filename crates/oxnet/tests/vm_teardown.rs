//! After oxnet exits, the kernel's own driver takes the device back and it
//! works: the teardown (queues stopped and polled, reset, bus mastering
//! off, `igb/teardown.rs`) leaves the NIC in a state Linux's igb driver can
//! probe, and no DMA of oxnet's survives into memory the kernel reuses.
//!
//! In a QEMU guest (TCG) with two `igb` NICs (QEMU's 82576 model) on one
//! hub and Linux's igb driver loaded: oxnet takes NIC 0 from the kernel
//! driver, sends at full rate and exits with frames in flight; NIC 0 is
//! bound to igb again, both interfaces come up, and 5 ARP requests
//! (busybox `arping -c 5`) go out of NIC 0 into NIC 1 and 5 the other way:
//! the kernel's counters of both NICs move by exactly 5 each way. (Both
//! NICs are in one kernel, which ignores ARP requests from its own
//! addresses, so there are no replies to count.)

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
stat() {{ cat /sys/class/net/$1/statistics/$2; }}
# 5 ARP requests each way (busybox arping -c 5); the kernel does not answer
# requests from its own addresses, so only what arrives is counted.
A_TX=$(stat $IFA tx_packets); B_RX=$(stat $IFB rx_packets)
arping -I $IFA -c 5 10.9.0.2 || true
echo "OUT {{\"a_tx\":$(( $(stat $IFA tx_packets) - A_TX )),\"b_rx\":$(( $(stat $IFB rx_packets) - B_RX ))}}"
B_TX=$(stat $IFB tx_packets); A_RX=$(stat $IFA rx_packets)
arping -I $IFB -c 5 10.9.0.1 || true
echo "IN {{\"b_tx\":$(( $(stat $IFB tx_packets) - B_TX )),\"a_rx\":$(( $(stat $IFA rx_packets) - A_RX ))}}"
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
    assert!(
        out.stdout.contains("BOUND igb"),
        "the kernel driver had the NIC first: {report}"
    );
    assert!(
        out.stdout.contains("AFTER none"),
        "oxnet took it from the kernel driver: {report}"
    );
    assert!(field(line(&out.stdout, "GEN "), "sent") > 0, "{report}");
    // Through the NIC oxnet used: the kernel's driver sends 5 requests and
    // receives 5 (each arrives on the other NIC of the hub).
    let out_line = line(&out.stdout, "OUT ");
    assert_eq!(field(out_line, "a_tx"), 5, "{report}");
    assert_eq!(field(out_line, "b_rx"), 5, "{report}");
    let in_line = line(&out.stdout, "IN ");
    assert_eq!(field(in_line, "b_tx"), 5, "{report}");
    assert_eq!(field(in_line, "a_rx"), 5, "{report}");
}
