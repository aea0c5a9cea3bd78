//! The syntax tree, one type per production of click(5)'s BNF grammar.

use super::Pos;
use std::rc::Rc;

/// `stmts`.
pub type Stmts = Vec<Stmt>;

#[derive(Debug, Clone)]
pub enum Stmt {
    /// `connection`: element lists joined by arrows. A statement with one
    /// list and no arrow is a declaration.
    Connection(Connection),
    /// `elementclass NAME class`.
    ElementClass { name: String, class: ClassRef, pos: Pos },
    /// `require(...)`.
    Require { config: String, pos: Pos },
    /// `define(...)`.
    Define { config: String, pos: Pos },
}

#[derive(Debug, Clone)]
pub struct Connection {
    /// `lists[i] arrows[i] lists[i+1]`.
    pub lists: Vec<Vec<ElementUse>>,
    pub arrows: Vec<Arrow>,
    pub pos: Pos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrow {
    /// `->`: every element on the left to every one on the right.
    Single,
    /// `=>`: the i-th output on the left to the i-th input on the right.
    Many,
}

/// `element`: `[ports] reference [ports]`.
#[derive(Debug, Clone)]
pub struct ElementUse {
    pub inputs: Option<Vec<u32>>,
    pub target: Target,
    pub outputs: Option<Vec<u32>>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub enum Target {
    /// An element name (or a class, when no element has that name: then
    /// it is an anonymous element without configuration).
    Name(String),
    /// `name :: class(config)`.
    Declare {
        name: String,
        class: ClassRef,
        config: Option<String>,
    },
    /// `class(config)`: an anonymous element.
    Anonymous { class: ClassRef, config: Option<String> },
    /// `( stmts )`: an element group.
    Group(Rc<Stmts>),
    /// Nothing: `input` at the start of a connection, `output` at its end
    /// (click(5), "Element groups").
    Implicit,
}

/// `class`: a name or a compound.
#[derive(Debug, Clone)]
pub enum ClassRef {
    Name(String),
    Compound(Rc<Compound>),
}

/// `{ compound || compound ... [|| ...] }`.
#[derive(Debug)]
pub struct Compound {
    pub overloads: Vec<Overload>,
    /// Ends in `|| ...`: the earlier definitions of the class are further
    /// overloads (click(5), "Overloading").
    pub extends: bool,
    pub pos: Pos,
}

/// One definition of a compound: `formals | stmts`.
#[derive(Debug)]
pub struct Overload {
    pub formals: Vec<Formal>,
    pub body: Rc<Stmts>,
    pub pos: Pos,
}

/// `$name` (positional), `KEYWORD $name`, or `__REST__ $name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formal {
    pub keyword: Option<String>,
    pub name: String,
}
