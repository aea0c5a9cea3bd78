//! docs/elements.md is `oxnet elements`' output: the reference cannot
//! drift from the elements, the graph's and the stack's.

#[test]
fn docs_elements_md_is_the_generated_reference() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/elements.md"))
        .expect("docs/elements.md");
    let table = doc
        .find("| class |")
        .map(|at| &doc[at..])
        .expect("the table in docs/elements.md");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oxnet"))
        .arg("elements")
        .output()
        .expect("oxnet elements");
    assert!(out.status.success());
    assert_eq!(
        table,
        String::from_utf8_lossy(&out.stdout),
        "docs/elements.md is out of date: regenerate it with scripts/elements-doc.sh"
    );
    // Every class of both libraries is in it.
    oxnet_apps::register();
    for class in oxnet_graph::elements::classes() {
        assert!(table.contains(&format!("| {class} |")), "{class} missing");
    }
    assert!(table.contains("| TCPFlowLookup |"));
}
