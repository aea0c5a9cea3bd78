//! What the in-process tests of application elements share (this
//! crate's, the `oxnet` crate's): hosts on one stack without a device,
//! reading a handler.

/// A configuration of hosts at `addrs` (IPv4) on one TCPStack, no device:
/// what the stack sends loops back through a queue into the input of the
/// host it is for (IPv4Input `ipa`, `ipb`, ... in order), the router's
/// executor too. A test adds its servers and clients after it.
pub fn hosts(addrs: &[&str]) -> String {
    let names: Vec<String> = (0..addrs.len())
        .map(|i| format!("ip{}", (b'a' + i as u8) as char))
        .collect();
    let dsts: Vec<String> = addrs.iter().map(|a| format!("dst host {a}, ")).collect();
    let mut c = format!(
        "TCPSettings();\ntcp :: TCPStack;\ntcp -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) \
         -> q :: Queue(100000) -> Unqueue(BURST 64)\n    -> route :: IPClassifier({}-);\n",
        dsts.concat()
    );
    for (i, (name, addr)) in names.iter().zip(addrs).enumerate() {
        c += &format!("route[{i}] -> {name} :: IPv4Input({addr}) -> tcp;\n");
    }
    c += &format!("route[{}] -> Discard;\n", addrs.len());
    for name in &names {
        c += &format!("{name}[1] -> Discard; {name}[2] -> Discard; {name}[3] -> Discard;\n");
    }
    c + "AppExecutor;\n"
}

/// A handler's value, `element.handler`, as a number.
pub fn handler(router: &oxnet_graph::Router, spec: &str) -> u64 {
    let (name, h) = spec.rsplit_once('.').expect("element.handler");
    let index = router.find(name).unwrap_or_else(|| panic!("no element {name}"));
    router.read_handler(index, h).unwrap().trim().parse().unwrap()
}
