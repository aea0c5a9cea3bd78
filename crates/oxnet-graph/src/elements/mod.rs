//! The element library. Each element is documented next to its code
//! (ports, arguments, handlers), after Click's documentation of the class
//! of the same name.

pub mod basic;
pub mod script;
pub mod standard;

use crate::element::Element;
use crate::router::Registry;

/// Every class this library has, by name.
pub const CLASSES: &[&str] = &[
    "Counter",
    "Discard",
    "DriverManager",
    "FrontDropQueue",
    "HashSwitch",
    "Idle",
    "InfiniteSource",
    "Null",
    "Print",
    "PullNull",
    "PushNull",
    "Queue",
    "RoundRobinSwitch",
    "Script",
    "SimpleQueue",
    "StaticSwitch",
    "Strip",
    "Switch",
    "Tee",
    "Truncate",
    "Unqueue",
    "Unstrip",
];

/// The standard library of elements.
#[derive(Debug, Default, Clone, Copy)]
pub struct Standard;

impl Registry for Standard {
    fn create(&self, class: &str) -> Option<Box<dyn Element>> {
        use standard::*;
        Some(match class {
            "Counter" => Box::<Counter>::default(),
            "Discard" => Box::<Discard>::default(),
            "DriverManager" => Box::new(script::Script::driver_manager()),
            "Script" => Box::new(script::Script::script()),
            "Idle" => Box::new(Idle),
            "InfiniteSource" => Box::<InfiniteSource>::default(),
            "Null" => Box::new(Null::agnostic()),
            "PullNull" => Box::new(Null::pull_only()),
            "PushNull" => Box::new(Null::push_only()),
            "Print" => Box::<Print>::default(),
            "Queue" => Box::new(Queue::new("Queue")),
            "SimpleQueue" => Box::new(Queue::new("SimpleQueue")),
            "FrontDropQueue" => Box::new(Queue::new("FrontDropQueue")),
            "Switch" => Box::<Switch>::default(),
            "StaticSwitch" => Box::<basic::StaticSwitch>::default(),
            "RoundRobinSwitch" => Box::<basic::RoundRobinSwitch>::default(),
            "HashSwitch" => Box::<basic::HashSwitch>::default(),
            "Strip" => Box::new(basic::Edit::new("Strip")),
            "Unstrip" => Box::new(basic::Edit::new("Unstrip")),
            "Truncate" => Box::new(basic::Edit::new("Truncate")),
            "Tee" => Box::<Tee>::default(),
            "Unqueue" => Box::<Unqueue>::default(),
            _ => return None,
        })
    }

    fn is_class(&self, class: &str) -> bool {
        CLASSES.contains(&class)
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
    for class in CLASSES {
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
