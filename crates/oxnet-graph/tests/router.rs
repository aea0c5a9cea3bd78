//! Routers built from configurations: what runs, and what is refused
//! before anything runs (Click's checks).

use oxnet_graph::build;

fn run(config: &str) -> oxnet_graph::Router {
    let mut router = build("t.click", config, &[]).unwrap_or_else(|e| panic!("{config}\n{e}"));
    let start = std::time::Instant::now();
    router.run(&|| start.elapsed().as_secs() > 5);
    assert!(router.stopped(), "{config}: did not stop by itself");
    router
}

fn handler(router: &oxnet_graph::Router, element: &str, name: &str) -> String {
    router.read_handler(router.find(element).expect(element), name).unwrap()
}

#[test]
fn every_packet_of_a_limited_source_reaches_the_counter_once() {
    let r = run("InfiniteSource(LIMIT 1000, BURST 32, STOP true) -> c :: Counter -> n :: Null -> d :: Discard");
    assert_eq!(handler(&r, "c", "count"), "1000");
    assert_eq!(handler(&r, "d", "count"), "1000");
    // 64-byte packets by default.
    assert_eq!(handler(&r, "c", "byte_count"), "64000");
}

#[test]
fn queue_and_unqueue_move_push_to_pull_and_back() {
    let r = run(
        "s :: InfiniteSource(LIMIT 100, BURST 7) -> q :: Queue(1000) -> u :: Unqueue(BURST 5) -> c :: Counter -> Discard;
         InfiniteSource(LIMIT 1, STOP true) -> Idle",
    );
    // The second source stops the router at once, maybe before all 100
    // went through: the counts are consistent whatever the timing.
    let sent: u64 = handler(&r, "s", "count").parse().unwrap();
    let queued: u64 = handler(&r, "q", "length").parse().unwrap();
    let passed: u64 = handler(&r, "c", "count").parse().unwrap();
    assert_eq!(sent, queued + passed, "sent {sent} = queued {queued} + passed {passed}");
    assert_eq!(handler(&r, "u", "count"), passed.to_string());
}

#[test]
fn a_full_queue_drops_and_counts() {
    // A Tee hides the queue's fullness from the source (no notifier
    // through a fork), so the source pushes all 50 and the queue drops.
    let r = run(
        "InfiniteSource(LIMIT 50, BURST 50, STOP true) -> t :: Tee; t[0] -> q :: Queue(10) -> Discard(ACTIVE false); t[1] -> Discard",
    );
    assert_eq!(handler(&r, "q", "length"), "10");
    assert_eq!(handler(&r, "q", "drops"), "40");
    assert_eq!(handler(&r, "q", "highwater_length"), "10");
}

#[test]
fn a_source_sleeps_while_the_queue_downstream_is_full() {
    // Click's nonfull notifier: the source makes only what the queue can
    // hold (through a Counter), then sleeps; nothing is dropped. A script
    // stops the router after 50 ms of it sleeping.
    let r = run(
        "s :: InfiniteSource(BURST 32) -> c :: Counter -> q :: Queue(100) -> Discard(ACTIVE false);
         Script(wait 0.05, stop)",
    );
    assert_eq!(handler(&r, "s", "count"), "100");
    assert_eq!(handler(&r, "c", "count"), "100");
    assert_eq!(handler(&r, "q", "drops"), "0");
}

#[test]
fn tee_copies_to_every_output() {
    let r = run("InfiniteSource(LIMIT 10, STOP true) -> t :: Tee -> a :: Counter -> Discard; t[1] -> b :: Counter -> Discard; t[2] -> c :: Counter -> Discard");
    for e in ["a", "b", "c"] {
        assert_eq!(handler(&r, e, "count"), "10", "{e}");
    }
}

#[test]
fn agnostic_elements_take_the_flow_of_their_neighbours() {
    // Null between a queue and Unqueue is pull; after Unqueue, push.
    let r = run("InfiniteSource(LIMIT 20, STOP false) -> Queue -> n1 :: Null -> Unqueue(BURST 0) -> n2 :: Null -> c :: Counter -> Discard; InfiniteSource(LIMIT 1, STOP true) -> Discard");
    let _ = handler(&r, "c", "count");
    assert_eq!(handler(&r, "n1", "class"), "Null");
    assert_eq!(handler(&r, "n1", "ports"), "1 input\n1 output\n");
}

#[test]
fn writes_reach_handlers() {
    let mut r = build(
        "t",
        "c :: Counter; InfiniteSource(LIMIT 3, STOP true) -> c -> Discard",
        &[],
    )
    .unwrap();
    r.run(&|| false);
    let c = r.find("c").unwrap();
    assert_eq!(r.read_handler(c, "count").unwrap(), "3");
    r.write_handler(c, "reset", "").unwrap();
    assert_eq!(r.read_handler(c, "count").unwrap(), "0");
    assert_eq!(r.read_handler(c, "nope").unwrap_err(), "no 'c.nope' handler");
    assert_eq!(
        r.write_handler(c, "count", "1").unwrap_err(),
        "no 'c.count' write handler"
    );
}

#[test]
fn click_checks_refuse_bad_graphs_before_anything_runs() {
    // A pull output may feed several pull inputs (Click: only push outputs
    // and pull inputs are single-use).
    build("t", "Idle -> q :: Queue; q -> Discard; q -> Discard", &[]).unwrap();
    let cases = [
        (
            "Idle -> q :: Queue; u :: Unqueue -> Discard; q -> u; Idle -> q2 :: Queue -> u",
            "'u :: Unqueue' pull input 0 is connected more than once",
        ),
        (
            "s :: InfiniteSource -> t :: Tee; t -> Discard; t -> Discard",
            "'t :: Tee' push output 0 is connected more than once",
        ),
        (
            "Idle -> q :: Queue; q -> u :: PushNull -> Discard",
            "'q :: Queue' pull output 0 is connected to 'u :: PushNull' push input 0",
        ),
        (
            "q :: Queue -> Discard; PullNull -> q",
            "'PullNull@3 :: PullNull' pull output 0 is connected to 'q :: Queue' push input 0",
        ),
        (
            "c :: Counter; InfiniteSource -> c",
            "'c :: Counter' push output 0 is not connected",
        ),
        ("Discard -> Idle", "'Discard@1 :: Discard' has no output 0 (it has 0)"),
        (
            "Idle -> [1] Counter -> Idle",
            "'Counter@2 :: Counter' has no input 1 (it has 1)",
        ),
        (
            "Queue(x) -> Discard",
            "While configuring 'Queue@1 :: Queue': CAPACITY: 'x' is not an integer",
        ),
        (
            "Counter(5) -> Discard; Idle -> Counter@1",
            "While configuring 'Counter@1 :: Counter': too many arguments (1 left over)",
        ),
        ("InfiniteSource(NOPE 1) -> Discard", "unknown keyword argument 'NOPE'"),
        (
            "u :: Unqueue -> Discard",
            "'u :: Unqueue' pull input 0 is not connected",
        ),
    ];
    for (config, want) in cases {
        let err = match build("t", config, &[]) {
            Ok(_) => panic!("{config}: built"),
            Err(e) => e,
        };
        assert!(err.contains(want), "{config}:\n got: {err}\nwant: {want}");
    }
}

#[test]
fn scripts_wait_write_read_and_stop_the_driver() {
    // An ACTIVE Script runs at start: it waits for the source (simulated
    // time would not be needed; wait is on real time but short), writes
    // the counter's reset handler, and stops the driver.
    let r = run(
        "s :: InfiniteSource(LIMIT 50, BURST 10, STOP false) -> c :: Counter -> Discard;
         Script(wait 0.05, set x $(c.count), write c.reset, set y $(add $x 1), write vars.x $x, stop);
         vars :: Script(TYPE PASSIVE, set x 0);",
    );
    assert_eq!(handler(&r, "c", "count"), "0", "the script's write of c.reset ran");
}

#[test]
fn driver_manager_takes_the_stop_request_and_runs_on() {
    // The source's stop request is the event wait_stop waits for; the
    // driver runs the rest (the reset) before it stops.
    let r = run("InfiniteSource(LIMIT 30, STOP true) -> c :: Counter -> Discard;
         DriverManager(wait_stop, write c.reset, stop);");
    assert_eq!(handler(&r, "c", "count"), "0");
}

#[test]
fn count_call_switches_before_the_nth_packet_even_inside_a_batch() {
    // Click's counter.hh: the handler is called when the count reaches N,
    // before the Nth packet goes on; here N = 50 falls inside the second
    // burst of 32, so the burst is split.
    let r = run(
        "InfiniteSource(LIMIT 100, BURST 32, STOP true) -> Counter(COUNT_CALL 50 s.switch 1)
         -> s :: Switch -> c0 :: Counter -> Discard; s[1] -> c1 :: Counter -> Discard;",
    );
    assert_eq!(handler(&r, "c0", "count"), "49");
    assert_eq!(handler(&r, "c1", "count"), "51");
    assert_eq!(handler(&r, "s", "switch"), "1");
}

#[test]
fn switch_minus_one_drops_and_front_drop_queue_holds_its_capacity() {
    let r = run("InfiniteSource(LIMIT 10, STOP true) -> Switch(-1) -> c :: Counter -> Discard;");
    assert_eq!(handler(&r, "c", "count"), "0");
    // 40 packets into a FrontDropQueue of 10 that nobody pulls from until
    // the source is done: the 30 oldest are dropped.
    let r = run("InfiniteSource(LIMIT 40, BURST 40, STOP true) -> q :: FrontDropQueue(10) -> u :: Unqueue -> c :: Counter -> Discard;");
    // The source's stop ends the run with what the queue still holds.
    let drops: u64 = handler(&r, "q", "drops").parse().unwrap();
    let count: u64 = handler(&r, "c", "count").parse().unwrap();
    let left: u64 = handler(&r, "q", "length").parse().unwrap();
    assert_eq!(drops + count + left, 40, "every packet dropped, passed or still queued");
    assert_eq!(drops, 30, "one burst of 40 into 10 places");
}

#[test]
fn round_robin_static_and_hash_switches_send_every_packet_once() {
    // 100 packets in bursts of 32 over 3 outputs in turn: 34, 33, 33.
    let r = run(
        "InfiniteSource(LIMIT 100, BURST 32, STOP true) -> s :: RoundRobinSwitch;
         s[0] -> a :: Counter -> Discard; s[1] -> b :: Counter -> Discard; s[2] -> c :: Counter -> Discard;",
    );
    assert_eq!(
        [
            handler(&r, "a", "count"),
            handler(&r, "b", "count"),
            handler(&r, "c", "count")
        ],
        ["34", "33", "33"]
    );
    let r = run("InfiniteSource(LIMIT 10, STOP true) -> s :: StaticSwitch(1); s[0] -> a :: Counter -> Discard; s[1] -> b :: Counter -> Discard;");
    assert_eq!([handler(&r, "a", "count"), handler(&r, "b", "count")], ["0", "10"]);
    // Identical packets hash alike: all 50 on one output.
    let r = run("InfiniteSource(LIMIT 50, BURST 8, STOP true) -> s :: HashSwitch(12, 2); s[0] -> a :: Counter -> Discard; s[1] -> b :: Counter -> Discard;");
    let (a, b): (u64, u64) = (
        handler(&r, "a", "count").parse().unwrap(),
        handler(&r, "b", "count").parse().unwrap(),
    );
    assert_eq!(a + b, 50);
    assert!(a == 50 || b == 50, "a {a} b {b}");
}

#[test]
fn strip_unstrip_and_truncate_change_lengths_as_documented() {
    let r = run(
        "InfiniteSource(LIMIT 10, LENGTH 64, STOP true) -> Strip(14) -> s :: Counter -> Unstrip(14) -> u :: Counter
         -> Truncate(20) -> t :: Counter -> Strip(100) -> z :: Counter -> Discard;",
    );
    assert_eq!(handler(&r, "s", "byte_count"), "500");
    assert_eq!(handler(&r, "u", "byte_count"), "640");
    assert_eq!(handler(&r, "t", "byte_count"), "200");
    assert_eq!(
        handler(&r, "z", "byte_count"),
        "0",
        "a shorter packet is stripped whole"
    );
    // More than the head room: dropped and counted, not panicking.
    let r = run("InfiniteSource(LIMIT 5, STOP true) -> x :: Unstrip(100000) -> c :: Counter -> Discard;");
    assert_eq!(handler(&r, "x", "drops"), "5");
    assert_eq!(handler(&r, "c", "count"), "0");
}
