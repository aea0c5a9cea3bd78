//! Rates, queues and notifiers in whole routers with simulated time
//! (Click's `--simtime`): exact counts.

use oxnet_graph::build;

fn run_simulated(config: &str) -> oxnet_graph::Router {
    let mut router = build("t.click", config, &[]).unwrap_or_else(|e| panic!("{config}\n{e}"));
    router.use_simulated_time();
    let start = std::time::Instant::now();
    router.run(&|| start.elapsed().as_secs() > 5);
    assert!(router.stopped(), "{config}: did not stop by itself");
    router
}

fn handler(router: &oxnet_graph::Router, element: &str, name: &str) -> String {
    router.read_handler(router.find(element).expect(element), name).unwrap()
}

#[test]
fn the_empty_notifier_reaches_through_single_input_elements() {
    // RatedUnqueue sleeps while the FullNoteQueue is empty, seen through
    // a PullNull: one run per packet, no pull in vain.
    let r = run_simulated(
        "TimedSource(0.1, LIMIT 3) -> q :: FullNoteQueue -> PullNull -> u :: RatedUnqueue(1000) -> c :: Counter -> Discard;
         Script(wait 1, stop)",
    );
    assert_eq!(handler(&r, "c", "count"), "3");
    assert_eq!(
        handler(&r, "u", "calls"),
        "3 calls to run_task()\n0 empty runs\n3 pushes\n0 failed pulls\n"
    );
}

#[test]
fn a_driver_step_runs_the_tasks_it_woke_before_time_jumps() {
    // RatedSource sends its 2 packets (a full 2-token bucket), then asks
    // the driver to stop from a run that did nothing else. The
    // DriverManager's write wakes the Unqueue, which must run before the
    // clock jumps 0.1 s to the end of the script.
    let r = run_simulated(
        "RatedSource(LIMIT 2, STOP true) -> q :: Queue -> u :: Unqueue(ACTIVE false) -> c :: Counter -> Discard;
         DriverManager(wait, write u.active true, wait_time 0.1s, stop)",
    );
    assert_eq!(handler(&r, "c", "count"), "2");
    assert_eq!(handler(&r, "q", "length"), "0");
}

#[test]
fn rated_splitters_split_at_the_rate() {
    // 100 packets at once against RATE 10 with a 5-token bucket (BURST_SIZE):
    // the first 5 pass, the others go to output 1.
    let r = run_simulated(
        "InfiniteSource(LIMIT 100, BURST 100, STOP true) -> s :: RatedSplitter(10, BURST_SIZE 5) -> a :: Counter -> Discard;
         s [1] -> b :: Counter -> Discard",
    );
    assert_eq!(handler(&r, "a", "count"), "5");
    assert_eq!(handler(&r, "b", "count"), "95");
    assert_eq!(handler(&r, "s", "rate"), "10");
}
