//! docs/elements.md is `oxnet elements`' output: the reference cannot
//! drift from the elements.

#[test]
fn docs_elements_md_is_the_generated_reference() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/elements.md"))
        .expect("docs/elements.md");
    let table = doc
        .find("| class |")
        .map(|at| &doc[at..])
        .expect("the table in docs/elements.md");
    assert_eq!(
        table,
        oxnet_graph::elements::reference(),
        "docs/elements.md is out of date: regenerate it with `oxnet elements`"
    );
    // Every class the library has is in it.
    for class in oxnet_graph::elements::classes() {
        assert!(table.contains(&format!("| {class} |")), "{class} missing");
    }
}
