//! The stack's elements in the graph's library: each family of elements
//! (a file or folder of this crate) has a `MODULE` (class names and a
//! constructor, as the graph's own families), listed in [`MODULES`];
//! [`register`] adds them to the library, which the `oxnet` binary does
//! at start-up (the graph crate does not depend on the stack).
//!
//! Elements of one router share the stack's per-core state (tables of
//! TCBs, sockets, neighbours) through [`shared`], keyed by the router
//! being built ([`oxnet_graph::args::router_id`]): one instance per
//! router, whichever element asks first creates it.

use oxnet_graph::elements::Module;
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// Every family of the stack's elements; a new family adds one line.
pub const MODULES: &[Module] = &[
    crate::ip::MODULE,
    crate::neighbor::MODULE,
    crate::tcp::elements::MODULE,
    crate::app::MODULE,
    crate::udp::MODULE,
];

/// Adds the stack's elements to the graph's library, and its compound
/// classes (`TCPStack`, `StackHost`) to the language's prelude (idempotent).
pub fn register() {
    oxnet_graph::elements::add_modules(MODULES);
    oxnet_graph::lang::add_prelude("<oxnet-stack>", crate::tcp::elements::TCP_STACK);
    oxnet_graph::lang::add_prelude("<oxnet-stack>", crate::app::host::STACK_HOST);
}

thread_local! {
    /// Per router (id) and type: the shared state, weakly held, so that
    /// it goes with the last element of its router.
    static SHARED: RefCell<HashMap<(u64, TypeId), Weak<dyn Any>>> = RefCell::new(HashMap::new());
}

/// The state of type `T` that every element of the router being built
/// shares (call it from `configure` or `initialize`): made with
/// `T::default()` by the first element that asks, the same `Rc` for the
/// others. A router built later on the same thread gets its own.
pub fn shared<T: Default + 'static>() -> Rc<RefCell<T>> {
    let key = (oxnet_graph::args::router_id(), TypeId::of::<RefCell<T>>());
    SHARED.with(|map| {
        let mut map = map.borrow_mut();
        if let Some(state) = map.get(&key).and_then(Weak::upgrade) {
            if let Ok(state) = state.downcast::<RefCell<T>>() {
                return state;
            }
        }
        // Entries of routers that are gone: dropped as we pass.
        map.retain(|_, w| w.strong_count() > 0);
        let state = Rc::new(RefCell::new(T::default()));
        let erased: Rc<dyn Any> = state.clone();
        map.insert(key, Rc::downgrade(&erased));
        state
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Table(u32);

    #[test]
    fn elements_of_one_router_share_state_and_the_next_router_gets_its_own() {
        oxnet_graph::args::begin_router();
        let a = shared::<Table>();
        let b = shared::<Table>();
        a.borrow_mut().0 = 7;
        assert_eq!(b.borrow().0, 7);
        assert!(Rc::ptr_eq(&a, &b));
        oxnet_graph::args::begin_router();
        let c = shared::<Table>();
        assert_eq!(c.borrow().0, 0);
        assert!(!Rc::ptr_eq(&a, &c));
    }

    #[test]
    fn the_state_goes_with_the_last_element_holding_it() {
        oxnet_graph::args::begin_router();
        let weak = Rc::downgrade(&shared::<Table>());
        assert!(weak.upgrade().is_none(), "nobody held it");
        let held = shared::<Table>();
        held.borrow_mut().0 = 3;
        assert_eq!(shared::<Table>().borrow().0, 3);
    }
}
