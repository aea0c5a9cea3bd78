//! The element library. Each element is documented next to its code
//! (ports, arguments, handlers), after Click's documentation of the class
//! of the same name.

pub mod arp;
pub mod basic;
pub mod classifier;
pub mod control;
pub mod device;
pub mod dump;
pub mod ether;
pub mod flows;
pub mod icmp;
pub mod ip;
pub mod ipfilter;
pub mod iplookup;
pub mod ipsumdump;
pub mod ipsumdump_fields;
pub mod paint;
pub mod print;
pub mod queues;
pub mod rates;
pub mod rewriter;
pub mod sample;
pub mod script;
pub mod standard;

use crate::element::Element;
use crate::router::Registry;

/// One module of the library: the classes it defines and how to make one.
pub struct Module {
    /// Class names, sorted.
    pub classes: &'static [&'static str],
    /// Makes an element of one of `classes` (None for any other name).
    pub create: fn(&str) -> Option<Box<dyn Element>>,
}

/// Every module; a new module adds one line here.
pub const MODULES: &[Module] = &[
    standard::MODULE,
    basic::MODULE,
    script::MODULE,
    sample::MODULE,
    device::MODULE,
    control::MODULE,
    flows::MODULE,
    rates::MODULE,
    queues::MODULE,
    classifier::MODULE,
    ipfilter::MODULE,
    ip::MODULE,
    iplookup::MODULE,
    ipsumdump::MODULE,
    print::MODULE,
    paint::MODULE,
    dump::MODULE,
    rewriter::MODULE,
    ether::MODULE,
    arp::MODULE,
    icmp::MODULE,
];

/// Modules other crates add (the stack's elements: the graph does not
/// depend on them), in the order added.
static ADDED: std::sync::RwLock<Vec<&'static [Module]>> = std::sync::RwLock::new(Vec::new());

/// Adds another crate's modules to the library, for every router built
/// after (the `oxnet` binary adds the stack's at start-up). Adding the
/// same list twice adds it once.
pub fn add_modules(modules: &'static [Module]) {
    let mut added = ADDED.write().unwrap_or_else(|e| e.into_inner());
    if !added.iter().any(|m| std::ptr::eq(*m, modules)) {
        added.push(modules);
    }
}

/// This library's modules, then the ones added.
fn all_modules() -> Vec<&'static Module> {
    let added = ADDED.read().unwrap_or_else(|e| e.into_inner());
    MODULES.iter().chain(added.iter().flat_map(|m| m.iter())).collect()
}

/// Every class this library has, sorted by name.
pub fn classes() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = all_modules().iter().flat_map(|m| m.classes.iter().copied()).collect();
    all.sort_unstable();
    all
}

/// The standard library of elements.
#[derive(Debug, Default, Clone, Copy)]
pub struct Standard;

impl Registry for Standard {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        all_modules()
            .iter()
            .filter(|m| m.classes.contains(&class))
            .find_map(|m| (m.create)(class))
    }

    fn is_class(&self, class: &str) -> bool {
        all_modules().iter().any(|m| m.classes.contains(&class))
    }
}

/// The element reference (`oxnet elements`, docs/elements.md): for each
/// class, its ports, its processing code and its handlers, read from the
/// element itself so that it cannot drift from the code. Arguments and
/// behaviour are documented at each element's code and in docs/graph.md.
pub fn reference() -> String {
    let mut out = String::from(
        "| class | ports (inputs/outputs) | processing (h push, l pull, a agnostic) | handlers (r read, w write) |\n|---|---|---|---|\n",
    );
    for class in classes() {
        let Some(element) = Standard.create(class) else {
            continue;
        };
        let handlers: Vec<String> = element
            .handlers()
            .iter()
            .map(|(name, r, w)| format!("{name} ({}{})", if *r { "r" } else { "" }, if *w { "w" } else { "" }))
            .collect();
        out += &format!(
            "| {class} | {} | {} | {} |\n",
            element.port_count(),
            element.processing(),
            if handlers.is_empty() {
                "-".to_string()
            } else {
                handlers.join(", ")
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Marker;

    impl Element for Marker {
        fn class_name(&self) -> &'static str {
            "AddedMarkerForTest"
        }
    }

    static ADDED_FOR_TEST: &[Module] = &[Module {
        classes: &["AddedMarkerForTest"],
        create: |c| (c == "AddedMarkerForTest").then(|| Box::new(Marker) as Box<dyn Element>),
    }];

    #[test]
    fn modules_added_by_another_crate_are_classes_of_the_library() {
        assert!(!Standard.is_class("AddedMarkerForTest"));
        add_modules(ADDED_FOR_TEST);
        add_modules(ADDED_FOR_TEST);
        assert!(Standard.is_class("AddedMarkerForTest"));
        assert_eq!(classes().iter().filter(|c| **c == "AddedMarkerForTest").count(), 1);
        let router = crate::build("t.click", "Idle -> AddedMarkerForTest -> Discard", &[]).unwrap();
        assert_eq!(router.names().len(), 3);
    }
}
