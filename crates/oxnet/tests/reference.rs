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

/// The README's count of element classes ("`oxnet elements`: N classes,
/// G of the graph, S of the stack and A of the applications") is the
/// libraries' own.
#[test]
fn the_readme_counts_the_element_classes_right() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let at = readme.find("elements`: ").expect("the README's class count") + "elements`: ".len();
    let numbers: Vec<usize> = readme[at..]
        .split(')')
        .next()
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    oxnet_apps::register();
    let count = |modules: &[oxnet_graph::elements::Module]| modules.iter().map(|m| m.classes.len()).sum::<usize>();
    let total = oxnet_graph::elements::classes().len();
    let (stack, apps) = (count(oxnet_stack::elements::MODULES), count(oxnet_apps::MODULES));
    assert_eq!(
        numbers,
        vec![total, total - stack - apps, stack, apps],
        "README: `oxnet elements`: {total} classes, {} of the graph, {stack} of the stack and {apps} of the applications",
        total - stack - apps
    );
}
