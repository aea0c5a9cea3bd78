//! From the syntax tree to a flat graph: every compound element expanded
//! into its components (named `compound/component`, click(5) "COMPOUND
//! ELEMENTS"), element groups opened, parameters substituted into
//! configuration strings, `->` and `=>` turned into port-to-port
//! connections, and the `input`/`output` pseudo-elements removed.
//!
//! How: every compound instance and every group gets two *tunnel* nodes,
//! one standing for its inputs and one for its outputs. A tunnel passes
//! port i straight to port i. Connections are first made between nodes,
//! tunnels included; at the end each connection from a primitive element
//! is followed through tunnels to the primitive elements it reaches.
//! A compound's overload is chosen once its scope has been read, when the
//! ports used on it are known (click(5), "Overloading").

use super::ast::*;
use super::vars::{expand, split_args, split_words};
use super::{Error, Pos};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// What the flattener needs to know about primitive (Rust) classes.
pub trait PrimitiveClasses {
    fn is_primitive(&self, class: &str) -> bool;
}

impl<F: Fn(&str) -> bool> PrimitiveClasses for F {
    fn is_primitive(&self, class: &str) -> bool {
        self(class)
    }
}

/// One primitive element of the flat graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatElement {
    /// Its full name (`compound/component` inside compounds).
    pub name: String,
    pub class: String,
    /// The configuration string, parameters substituted.
    pub config: String,
    /// Where it was declared.
    pub pos: Pos,
}

/// The flat graph: primitive elements in declaration order and
/// connections (from element, output port, to element, input port),
/// sorted and without duplicates (repeating a connection is allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flat {
    pub elements: Vec<FlatElement>,
    pub connections: Vec<(usize, u32, usize, u32)>,
    /// `require(...)` arguments, in order.
    pub requires: Vec<(String, Pos)>,
}

impl Flat {
    /// The index of the element with that name.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.elements.iter().position(|e| e.name == name)
    }

    /// The graph in Click's flat syntax (`name :: Class(config);` lines,
    /// then `a [p] -> [q] b;` lines): what `click-flatten` prints.
    pub fn to_click(&self) -> String {
        let mut out = String::new();
        for e in &self.elements {
            if e.config.is_empty() {
                out += &format!("{} :: {};\n", e.name, e.class);
            } else {
                out += &format!("{} :: {}({});\n", e.name, e.class, e.config);
            }
        }
        for &(a, p, b, q) in &self.connections {
            out += &format!("{} [{p}] -> [{q}] {};\n", self.elements[a].name, self.elements[b].name);
        }
        out
    }
}

/// Flattens a parsed configuration. `vars` (command line) override the
/// top level's `define`s.
pub fn flatten(program: &Stmts, vars: &[(String, String)], classes: &dyn PrimitiveClasses) -> Result<Flat, Error> {
    let mut f = Flattener {
        nodes: Vec::new(),
        edges: Vec::new(),
        requires: Vec::new(),
        primitives: classes,
    };
    let top_vars: HashMap<String, String> = vars.iter().cloned().collect();
    let env = Env {
        vars: Rc::new(VarScope {
            vars: HashMap::new(),
            parent: None,
        }),
        classes: None,
    };
    let mut scope = Scope::new(String::new(), env, None, None);
    scope.overrides = top_vars;
    f.scope(program, &mut scope)?;
    f.finish()
}

// ---------------------------------------------------------------------
// Environments: lexically scoped classes and parameters.

struct VarScope {
    vars: HashMap<String, String>,
    parent: Option<Rc<VarScope>>,
}

impl VarScope {
    fn get(&self, name: &str) -> Option<String> {
        self.vars
            .get(name)
            .cloned()
            .or_else(|| self.parent.as_ref().and_then(|p| p.get(name)))
    }
}

/// A class definition visible in a scope: a linked list, newest first,
/// so that a compound captures exactly the classes defined before it.
struct ClassDef {
    name: String,
    kind: ClassKind,
    parent: Option<Rc<ClassDef>>,
}

enum ClassKind {
    /// A compound (with the environment it was defined in) and, when it
    /// extends (`|| ...`), the definition it extends.
    Compound {
        compound: Rc<Compound>,
        env: Env,
        extends: Option<Rc<ClassDef>>,
    },
    /// `elementclass A B`: A is B as B was at that point.
    Synonym {
        target: String,
        env_classes: Option<Rc<ClassDef>>,
    },
}

#[derive(Clone)]
struct Env {
    vars: Rc<VarScope>,
    classes: Option<Rc<ClassDef>>,
}

fn lookup_class(classes: &Option<Rc<ClassDef>>, name: &str) -> Option<Rc<ClassDef>> {
    let mut at = classes.clone();
    while let Some(def) = at {
        if def.name == name {
            return Some(def);
        }
        at = def.parent.clone();
    }
    None
}

// ---------------------------------------------------------------------
// Nodes and scopes.

type NodeId = usize;

enum Node {
    Primitive(FlatElement),
    /// Passes input port i to output port i. `owner` names the compound
    /// or group for error messages; `inputs_side`: the tunnel standing for
    /// the owner's inputs (outside connects to its inputs, inside reads
    /// its outputs) or for its outputs.
    Tunnel {
        owner: String,
        inputs_side: bool,
        pos: Pos,
    },
}

/// How a name is used in a connection: as the target (its input ports)
/// and as the source (its output ports).
#[derive(Clone, Copy)]
struct Endpoint {
    as_target: Option<NodeId>,
    as_source: Option<NodeId>,
}

struct Pending {
    name: String,
    def: Rc<ClassDef>,
    args: Vec<String>,
    in_tunnel: NodeId,
    out_tunnel: NodeId,
    pos: Pos,
}

struct Scope {
    prefix: String,
    env: Env,
    /// Element names of this scope.
    names: HashMap<String, (Endpoint, Pos)>,
    /// Elements created in this scope (for anonymous numbering).
    count: usize,
    /// Compound instances to expand when the scope has been read.
    pending: Vec<Pending>,
    /// Command-line definitions (top level only).
    overrides: HashMap<String, String>,
}

impl Scope {
    fn new(prefix: String, env: Env, input: Option<Endpoint>, output: Option<Endpoint>) -> Scope {
        let mut names = HashMap::new();
        let nowhere = Pos {
            file: Rc::from(""),
            line: 0,
            col: 0,
        };
        if let Some(i) = input {
            names.insert("input".to_string(), (i, nowhere.clone()));
        }
        if let Some(o) = output {
            names.insert("output".to_string(), (o, nowhere));
        }
        Scope {
            prefix,
            env,
            names,
            count: 0,
            pending: Vec::new(),
            overrides: HashMap::new(),
        }
    }

    fn var(&self, name: &str) -> Option<String> {
        self.overrides.get(name).cloned().or_else(|| self.env.vars.get(name))
    }

    fn expand(&self, text: &str) -> String {
        expand(text, &|name| self.var(name))
    }
}

struct Flattener<'a> {
    nodes: Vec<Node>,
    /// (from node, output port, to node, input port).
    edges: Vec<(NodeId, u32, NodeId, u32, Pos, Pos)>,
    requires: Vec<(String, Pos)>,
    primitives: &'a dyn PrimitiveClasses,
}

fn valid_element_name(name: &str) -> bool {
    // click(5): no component of an identifier consists only of digits.
    name.split('/')
        .all(|part| !part.is_empty() && !part.bytes().all(|b| b.is_ascii_digit()))
}

impl Flattener<'_> {
    /// Reads the statements of one scope (a file or a compound body).
    fn scope(&mut self, stmts: &Stmts, scope: &mut Scope) -> Result<(), Error> {
        // All definitions of a scope take effect at once (click(5),
        // "PARAMETER DEFINITIONS"), so they are read first.
        let mut defined: HashMap<String, (String, Pos)> = HashMap::new();
        self.collect_defines(stmts, &mut defined)?;
        if !defined.is_empty() {
            let vars = defined.into_iter().map(|(k, (v, _))| (k, v)).collect();
            scope.env.vars = Rc::new(VarScope {
                vars,
                parent: Some(scope.env.vars.clone()),
            });
        }
        self.stmts(stmts, scope)?;
        // Compound instances, now that the ports used on them are known.
        let pending = std::mem::take(&mut scope.pending);
        for p in pending {
            self.expand_compound(p)?;
        }
        Ok(())
    }

    /// `define` statements of this scope and of the groups in it (groups
    /// do not open a scope).
    fn collect_defines(&self, stmts: &Stmts, out: &mut HashMap<String, (String, Pos)>) -> Result<(), Error> {
        for stmt in stmts {
            match stmt {
                Stmt::Define { config, pos } => {
                    for arg in split_args(config) {
                        let words = split_words(&arg);
                        let Some(var) = words.first().and_then(|w| w.strip_prefix('$')) else {
                            return Err(Error::new(
                                pos.clone(),
                                format!("define: expected '$NAME value', found '{arg}'"),
                            ));
                        };
                        if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                            return Err(Error::new(
                                pos.clone(),
                                format!("define: '${var}' is not a parameter name"),
                            ));
                        }
                        let value = arg[arg.find(var).map_or(0, |i| i + var.len())..].trim().to_string();
                        if let Some((_, first)) = out.get(var) {
                            return Err(Error::new(
                                pos.clone(),
                                format!("parameter '${var}' is defined twice in this scope (first at {first})"),
                            ));
                        }
                        out.insert(var.to_string(), (value, pos.clone()));
                    }
                }
                Stmt::Connection(c) => {
                    for list in &c.lists {
                        for e in list {
                            if let Target::Group(body) = &e.target {
                                self.collect_defines(body, out)?;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn stmts(&mut self, stmts: &Stmts, scope: &mut Scope) -> Result<(), Error> {
        for stmt in stmts {
            match stmt {
                Stmt::Define { .. } => {}
                Stmt::Require { config, pos } => {
                    self.requires.push((scope.expand(config), pos.clone()));
                }
                Stmt::ElementClass { name, class, pos } => {
                    let kind = match class {
                        ClassRef::Name(target) => {
                            if lookup_class(&scope.env.classes, target).is_none()
                                && !self.primitives.is_primitive(target)
                            {
                                return Err(Error::new(pos.clone(), format!("unknown element class '{target}'")));
                            }
                            ClassKind::Synonym {
                                target: target.clone(),
                                env_classes: scope.env.classes.clone(),
                            }
                        }
                        ClassRef::Compound(compound) => ClassKind::Compound {
                            compound: compound.clone(),
                            env: scope.env.clone(),
                            extends: if compound.extends {
                                lookup_class(&scope.env.classes, name)
                            } else {
                                None
                            },
                        },
                    };
                    if let ClassRef::Compound(c) = class {
                        if c.extends
                            && lookup_class(&scope.env.classes, name).is_none()
                            && !self.primitives.is_primitive(name)
                        {
                            return Err(Error::new(
                                pos.clone(),
                                format!("'{name}' has no earlier definition to extend with '...'"),
                            ));
                        }
                    }
                    scope.env.classes = Some(Rc::new(ClassDef {
                        name: name.clone(),
                        kind,
                        parent: scope.env.classes.clone(),
                    }));
                }
                Stmt::Connection(c) => self.connection(c, scope)?,
            }
        }
        Ok(())
    }

    fn connection(&mut self, c: &Connection, scope: &mut Scope) -> Result<(), Error> {
        // Declaration shorthand (click(5)): "a, b, c :: Class(config);"
        // declares all three. Inside a connection only the last is.
        if let [list] = c.lists.as_slice() {
            if let Some((
                ElementUse {
                    target: Target::Declare { class, config, .. },
                    ..
                },
                names,
            )) = list.split_last()
            {
                if !names.is_empty()
                    && names
                        .iter()
                        .all(|e| matches!(e.target, Target::Name(_)) && e.inputs.is_none() && e.outputs.is_none())
                {
                    for e in list {
                        let name = match &e.target {
                            Target::Name(n) | Target::Declare { name: n, .. } => n.clone(),
                            _ => unreachable!("checked above"),
                        };
                        let declared = ElementUse {
                            inputs: None,
                            target: Target::Declare {
                                name,
                                class: class.clone(),
                                config: config.clone(),
                            },
                            outputs: None,
                            pos: e.pos.clone(),
                        };
                        self.element_use(&declared, scope)?;
                    }
                    return Ok(());
                }
            }
        }
        let last = c.lists.len() - 1;
        // Resolve every element use first (declarations happen left to
        // right, as Click reads them).
        let mut resolved: Vec<Vec<(Endpoint, &ElementUse)>> = Vec::new();
        for (i, list) in c.lists.iter().enumerate() {
            let mut row = Vec::new();
            for e in list {
                let implicit = match (&e.target, i) {
                    (Target::Implicit, 0) => Some("input"),
                    (Target::Implicit, i) if i == last => Some("output"),
                    (Target::Implicit, _) => {
                        return Err(Error::new(
                            e.pos.clone(),
                            "a port without an element in the middle of a connection",
                        ))
                    }
                    _ => None,
                };
                let endpoint = match implicit {
                    Some(pseudo) => self.name(pseudo, &e.pos, scope)?,
                    None => self.element_use(e, scope)?,
                };
                row.push((endpoint, e));
            }
            resolved.push(row);
        }
        if c.lists.len() == 1 {
            // A declaration statement: ports make no sense there.
            if let Some((_, e)) = resolved[0]
                .iter()
                .find(|(_, e)| e.inputs.is_some() || e.outputs.is_some())
            {
                return Err(Error::new(
                    e.pos.clone(),
                    "ports given on an element that is not connected",
                ));
            }
            return Ok(());
        }
        for (k, arrow) in c.arrows.iter().enumerate() {
            let left = &resolved[k];
            let right = &resolved[k + 1];
            let mut outs = Vec::new();
            for (endpoint, e) in left {
                let Some(node) = endpoint.as_source else {
                    return Err(Error::new(
                        e.pos.clone(),
                        "'output' has no output ports to connect from",
                    ));
                };
                outs.push((node, e.outputs.clone(), e.pos.clone()));
            }
            let mut ins = Vec::new();
            for (endpoint, e) in right {
                let Some(node) = endpoint.as_target else {
                    return Err(Error::new(e.pos.clone(), "'input' has no input ports to connect to"));
                };
                ins.push((node, e.inputs.clone(), e.pos.clone()));
            }
            match arrow {
                Arrow::Single => {
                    for (from, ports, from_pos) in &outs {
                        for p in ports.clone().unwrap_or_else(|| vec![0]) {
                            for (to, in_ports, to_pos) in &ins {
                                for q in in_ports.clone().unwrap_or_else(|| vec![0]) {
                                    self.edges.push((*from, p, *to, q, from_pos.clone(), to_pos.clone()));
                                }
                            }
                        }
                    }
                }
                Arrow::Many => {
                    let left_ports = port_list(&outs);
                    let right_ports = port_list(&ins);
                    let (left_ports, right_ports) = match (left_ports, right_ports) {
                        (Some(l), Some(r)) => (l, r),
                        (Some(l), None) => {
                            let n = l.len() as u32;
                            (l, (0..n).map(|q| (ins[0].0, q)).collect())
                        }
                        (None, Some(r)) => {
                            let n = r.len() as u32;
                            ((0..n).map(|p| (outs[0].0, p)).collect(), r)
                        }
                        (None, None) => {
                            // One element with no ports on each side: as
                            // many ports as the smaller side uses is
                            // unknowable here; Click needs one side given.
                            return Err(Error::new(
                                c.pos.clone(),
                                "'=>' between two single elements without ports: give the ports on one side",
                            ));
                        }
                    };
                    if left_ports.len() != right_ports.len() {
                        return Err(Error::new(
                            c.pos.clone(),
                            format!(
                                "'=>' connects {} output port(s) to {} input port(s); the counts must be equal",
                                left_ports.len(),
                                right_ports.len()
                            ),
                        ));
                    }
                    for ((from, p), (to, q)) in left_ports.into_iter().zip(right_ports) {
                        self.edges.push((from, p, to, q, c.pos.clone(), c.pos.clone()));
                    }
                }
            }
        }
        Ok(())
    }

    /// The node an element use stands for, declaring it if needed.
    fn element_use(&mut self, e: &ElementUse, scope: &mut Scope) -> Result<Endpoint, Error> {
        match &e.target {
            Target::Name(name) => self.name(name, &e.pos, scope),
            Target::Declare { name, class, config } => {
                if let Some((_, first)) = scope.names.get(name) {
                    if name == "input" || name == "output" {
                        return Err(Error::new(
                            e.pos.clone(),
                            format!("'{name}' cannot be redeclared inside a compound element"),
                        ));
                    }
                    return Err(Error::new(
                        e.pos.clone(),
                        format!("redeclaration of element '{name}' (first declared at {first})"),
                    ));
                }
                if !valid_element_name(name) {
                    return Err(Error::new(
                        e.pos.clone(),
                        format!("'{name}' is not a valid element name"),
                    ));
                }
                let config = config.as_deref().map(|c| scope.expand(c)).unwrap_or_default();
                self.declare(name.clone(), class, config, &e.pos, scope)
            }
            Target::Anonymous { class, config } => {
                let config = config.as_deref().map(|c| scope.expand(c)).unwrap_or_default();
                let name = self.anonymous_name(class, scope);
                self.declare(name, class, config, &e.pos, scope)
            }
            Target::Group(body) => self.group(body, &e.pos, scope),
            Target::Implicit => unreachable!("handled by the caller"),
        }
    }

    /// `Class@N`, N one more than the elements of this scope so far (and
    /// more if that name is taken).
    fn anonymous_name(&self, class: &ClassRef, scope: &Scope) -> String {
        let base = match class {
            ClassRef::Name(n) => n.clone(),
            ClassRef::Compound(_) => String::new(),
        };
        let mut n = scope.count + 1;
        loop {
            let name = format!("{base}@{n}");
            if !scope.names.contains_key(&name) {
                return name;
            }
            n += 1;
        }
    }

    /// A name used alone: a declared element, or else a class used as an
    /// anonymous element without configuration.
    fn name(&mut self, name: &str, pos: &Pos, scope: &mut Scope) -> Result<Endpoint, Error> {
        if let Some((endpoint, _)) = scope.names.get(name) {
            return Ok(*endpoint);
        }
        if name == "input" || name == "output" {
            return Err(Error::new(
                pos.clone(),
                format!("'{name}' is only defined inside compound elements and groups"),
            ));
        }
        if lookup_class(&scope.env.classes, name).is_some() || self.primitives.is_primitive(name) {
            let class = ClassRef::Name(name.to_string());
            let anon = self.anonymous_name(&class, scope);
            return self.declare(anon, &class, String::new(), pos, scope);
        }
        Err(Error::new(
            pos.clone(),
            format!("undeclared element '{name}' (and no element class has that name)"),
        ))
    }

    fn declare(
        &mut self,
        name: String,
        class: &ClassRef,
        config: String,
        pos: &Pos,
        scope: &mut Scope,
    ) -> Result<Endpoint, Error> {
        scope.count += 1;
        let full = format!("{}{name}", scope.prefix);
        let endpoint = match class {
            ClassRef::Name(class_name) => match lookup_class(&scope.env.classes, class_name) {
                Some(def) => self.instance(&full, def, &config, pos, scope)?,
                None if self.primitives.is_primitive(class_name) => {
                    let id = self.nodes.len();
                    self.nodes.push(Node::Primitive(FlatElement {
                        name: full,
                        class: class_name.clone(),
                        config,
                        pos: pos.clone(),
                    }));
                    Endpoint {
                        as_target: Some(id),
                        as_source: Some(id),
                    }
                }
                None => return Err(Error::new(pos.clone(), format!("unknown element class '{class_name}'"))),
            },
            ClassRef::Compound(compound) => {
                let def = Rc::new(ClassDef {
                    name: String::new(),
                    kind: ClassKind::Compound {
                        compound: compound.clone(),
                        env: scope.env.clone(),
                        extends: None,
                    },
                    parent: None,
                });
                self.instance(&full, def, &config, pos, scope)?
            }
        };
        scope.names.insert(name, (endpoint, pos.clone()));
        Ok(endpoint)
    }

    /// An instance of a class defined in the language: a synonym resolves
    /// to its target; a compound gets its tunnels now and is expanded when
    /// the scope is complete.
    fn instance(
        &mut self,
        full: &str,
        def: Rc<ClassDef>,
        config: &str,
        pos: &Pos,
        scope: &mut Scope,
    ) -> Result<Endpoint, Error> {
        if let ClassKind::Synonym { target, env_classes } = &def.kind {
            return match lookup_class(env_classes, target) {
                Some(inner) => self.instance(full, inner, config, pos, scope),
                None => {
                    let id = self.nodes.len();
                    self.nodes.push(Node::Primitive(FlatElement {
                        name: full.to_string(),
                        class: target.clone(),
                        config: config.to_string(),
                        pos: pos.clone(),
                    }));
                    Ok(Endpoint {
                        as_target: Some(id),
                        as_source: Some(id),
                    })
                }
            };
        }
        let in_tunnel = self.tunnel(full, true, pos);
        let out_tunnel = self.tunnel(full, false, pos);
        scope.pending.push(Pending {
            name: full.to_string(),
            def,
            args: split_args(config),
            in_tunnel,
            out_tunnel,
            pos: pos.clone(),
        });
        Ok(Endpoint {
            as_target: Some(in_tunnel),
            as_source: Some(out_tunnel),
        })
    }

    fn tunnel(&mut self, owner: &str, inputs_side: bool, pos: &Pos) -> NodeId {
        self.nodes.push(Node::Tunnel {
            owner: owner.to_string(),
            inputs_side,
            pos: pos.clone(),
        });
        self.nodes.len() - 1
    }

    /// `( stmts )`: same scope, with `input` and `output` bound to the
    /// group's tunnels while its statements are read.
    fn group(&mut self, body: &Stmts, pos: &Pos, scope: &mut Scope) -> Result<Endpoint, Error> {
        let owner = format!("{}group at {pos}", scope.prefix);
        let in_tunnel = self.tunnel(&owner, true, pos);
        let out_tunnel = self.tunnel(&owner, false, pos);
        let saved = (scope.names.remove("input"), scope.names.remove("output"));
        scope.names.insert(
            "input".into(),
            (
                Endpoint {
                    as_target: None,
                    as_source: Some(in_tunnel),
                },
                pos.clone(),
            ),
        );
        scope.names.insert(
            "output".into(),
            (
                Endpoint {
                    as_target: Some(out_tunnel),
                    as_source: None,
                },
                pos.clone(),
            ),
        );
        let result = self.stmts(body, scope);
        scope.names.remove("input");
        scope.names.remove("output");
        if let Some(i) = saved.0 {
            scope.names.insert("input".into(), i);
        }
        if let Some(o) = saved.1 {
            scope.names.insert("output".into(), o);
        }
        result?;
        Ok(Endpoint {
            as_target: Some(in_tunnel),
            as_source: Some(out_tunnel),
        })
    }

    /// Ports used from outside on a compound instance's tunnels.
    fn outside_ports(&self, p: &Pending) -> (u32, u32) {
        let inputs = self
            .edges
            .iter()
            .filter(|e| e.2 == p.in_tunnel)
            .map(|e| e.3 + 1)
            .max()
            .unwrap_or(0);
        let outputs = self
            .edges
            .iter()
            .filter(|e| e.0 == p.out_tunnel)
            .map(|e| e.1 + 1)
            .max()
            .unwrap_or(0);
        (inputs, outputs)
    }

    fn expand_compound(&mut self, p: Pending) -> Result<(), Error> {
        // Every overload of the class, earlier extensions last.
        let mut candidates = Vec::new();
        let mut at = Some(p.def.clone());
        while let Some(def) = at {
            match &def.kind {
                ClassKind::Compound { compound, env, extends } => {
                    for i in 0..compound.overloads.len() {
                        candidates.push((compound.clone(), i, env.clone()));
                    }
                    at = extends.clone();
                }
                ClassKind::Synonym { .. } => break,
            }
        }
        let (ins, outs) = self.outside_ports(&p);
        let mut fitting = Vec::new();
        let mut arg_error = None;
        for (compound, i, env) in &candidates {
            match bind_formals(&compound.overloads[*i].formals, &p.args) {
                Ok(bound) => fitting.push((compound.clone(), *i, env.clone(), bound)),
                Err(e) => {
                    arg_error.get_or_insert(e);
                }
            }
        }
        if fitting.is_empty() {
            let why = arg_error.unwrap_or_else(|| "no definition".into());
            return Err(Error::new(
                p.pos.clone(),
                format!("'{}': {why}", p.name.rsplit('/').next().unwrap_or(&p.name)),
            ));
        }
        // The first whose ports match the use (click(5), "Overloading");
        // if none matches exactly, the first that takes the arguments
        // (its port errors are then reported precisely below).
        let chosen = fitting
            .iter()
            .position(|(c, i, _, _)| overload_ports(&c.overloads[*i].body) == (ins, outs))
            .unwrap_or(0);
        let (compound, i, env, bound) = fitting.swap_remove(chosen);
        let body = compound.overloads[i].body.clone();
        let vars = Rc::new(VarScope {
            vars: bound,
            parent: Some(env.vars.clone()),
        });
        let mut inner = Scope::new(
            format!("{}/", p.name),
            Env {
                vars,
                classes: env.classes.clone(),
            },
            Some(Endpoint {
                as_target: None,
                as_source: Some(p.in_tunnel),
            }),
            Some(Endpoint {
                as_target: Some(p.out_tunnel),
                as_source: None,
            }),
        );
        self.scope(&body, &mut inner)
    }

    /// Follows every connection through tunnels and checks the ports of
    /// compound elements and groups.
    fn finish(self) -> Result<Flat, Error> {
        // Ports of each tunnel used inside and outside.
        let mut inside: HashMap<NodeId, BTreeSet<u32>> = HashMap::new();
        let mut outside: HashMap<NodeId, Vec<(u32, Pos)>> = HashMap::new();
        for (from, p, to, q, from_pos, to_pos) in &self.edges {
            if let Node::Tunnel { inputs_side, .. } = &self.nodes[*from] {
                if *inputs_side {
                    inside.entry(*from).or_default().insert(*p);
                } else {
                    outside.entry(*from).or_default().push((*p, from_pos.clone()));
                }
            }
            if let Node::Tunnel { inputs_side, .. } = &self.nodes[*to] {
                if *inputs_side {
                    outside.entry(*to).or_default().push((*q, to_pos.clone()));
                } else {
                    inside.entry(*to).or_default().insert(*q);
                }
            }
        }
        for (id, node) in self.nodes.iter().enumerate() {
            let Node::Tunnel {
                owner,
                inputs_side,
                pos,
            } = node
            else {
                continue;
            };
            let what = if *inputs_side { "input" } else { "output" };
            let used = inside.get(&id).cloned().unwrap_or_default();
            let count = used.iter().next_back().map_or(0, |m| m + 1);
            if let Some(missing) = (0..count).find(|i| !used.contains(i)) {
                return Err(Error::new(
                    pos.clone(),
                    format!("'{owner}' uses {what} port {} but not {what} port {missing}", count - 1),
                ));
            }
            for (port, at) in outside.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
                if *port >= count {
                    return Err(Error::new(
                        at.clone(),
                        format!("'{owner}' has no {what} port {port} (it has {count})"),
                    ));
                }
            }
        }
        // Adjacency from each (node, output port).
        let mut out_edges: HashMap<(NodeId, u32), Vec<(NodeId, u32)>> = HashMap::new();
        for (from, p, to, q, _, _) in &self.edges {
            out_edges.entry((*from, *p)).or_default().push((*to, *q));
        }
        let mut index = vec![usize::MAX; self.nodes.len()];
        let mut elements = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            if let Node::Primitive(e) = node {
                index[id] = elements.len();
                elements.push(e.clone());
            }
        }
        let mut connections = BTreeSet::new();
        for (from, p, _, _, _, _) in &self.edges {
            if index[*from] == usize::MAX {
                continue;
            }
            // Depth-first through tunnels; a tunnel passes port q on as q.
            let mut stack = vec![(*from, *p)];
            let mut seen = BTreeSet::new();
            while let Some(key) = stack.pop() {
                if !seen.insert(key) {
                    continue;
                }
                for &(to, q) in out_edges.get(&key).map(Vec::as_slice).unwrap_or(&[]) {
                    if index[to] != usize::MAX {
                        connections.insert((index[*from], *p, index[to], q));
                    } else {
                        stack.push((to, q));
                    }
                }
            }
        }
        Ok(Flat {
            elements,
            connections: connections.into_iter().collect(),
            requires: self.requires,
        })
    }
}

/// The ports of one side of `=>`: None for a single element with no
/// ports given (the other side decides), else (node, port) per port.
fn port_list(side: &[(NodeId, Option<Vec<u32>>, Pos)]) -> Option<Vec<(NodeId, u32)>> {
    if side.len() == 1 && side[0].1.is_none() {
        return None;
    }
    Some(
        side.iter()
            .flat_map(|(node, ports, _)| {
                ports
                    .clone()
                    .unwrap_or_else(|| vec![0])
                    .into_iter()
                    .map(move |p| (*node, p))
            })
            .collect(),
    )
}

/// Ports an overload's body uses on `input` (its outputs) and `output`
/// (its inputs), read from the syntax: what a use must match.
fn overload_ports(body: &Stmts) -> (u32, u32) {
    let (mut ins, mut outs) = (0, 0);
    for stmt in body.iter() {
        let Stmt::Connection(c) = stmt else { continue };
        let last = c.lists.len() - 1;
        for (i, list) in c.lists.iter().enumerate() {
            for e in list {
                let is_input = matches!(&e.target, Target::Name(n) if n == "input")
                    || (matches!(e.target, Target::Implicit) && i == 0);
                let is_output = matches!(&e.target, Target::Name(n) if n == "output")
                    || (matches!(e.target, Target::Implicit) && i == last && i > 0);
                if is_input && i < last {
                    let max = e.outputs.as_ref().and_then(|p| p.iter().max().copied()).unwrap_or(0);
                    ins = ins.max(max + 1);
                }
                if is_output && i > 0 {
                    let max = e.inputs.as_ref().and_then(|p| p.iter().max().copied()).unwrap_or(0);
                    outs = outs.max(max + 1);
                }
            }
        }
    }
    (ins, outs)
}

/// Matches a compound's arguments to its formals (click(5),
/// "Configuration parameters"): keyword arguments by keyword, then the
/// positional ones in order; `__REST__` takes what is left, joined with
/// ", ".
fn bind_formals(formals: &[Formal], args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut bound = HashMap::new();
    let rest = formals.iter().find(|f| f.keyword.as_deref() == Some("__REST__"));
    let keywords: Vec<&Formal> = formals
        .iter()
        .filter(|f| f.keyword.is_some() && f.keyword.as_deref() != Some("__REST__"))
        .collect();
    let positional: Vec<&Formal> = formals.iter().filter(|f| f.keyword.is_none()).collect();
    let mut left = Vec::new();
    for arg in args {
        let words = split_words(arg);
        let first = words.first().map(String::as_str).unwrap_or("");
        if let Some(k) = keywords.iter().find(|k| k.keyword.as_deref() == Some(first)) {
            let value = arg[first.len()..].trim().to_string();
            bound.insert(k.name.clone(), value);
        } else {
            left.push(arg.clone());
        }
    }
    let mut left = left.into_iter();
    for f in &positional {
        match left.next() {
            Some(v) => {
                bound.insert(f.name.clone(), v);
            }
            None => {
                return Err(format!(
                    "too few arguments: {} given, {} expected",
                    args.len(),
                    positional.len() + keywords.len()
                ))
            }
        }
    }
    for k in &keywords {
        if !bound.contains_key(&k.name) {
            return Err(format!("missing '{}' parameter", k.keyword.as_deref().unwrap_or("")));
        }
    }
    let extra: Vec<String> = left.collect();
    match rest {
        Some(r) => {
            bound.insert(r.name.clone(), extra.join(", "));
        }
        None if !extra.is_empty() => {
            return Err(format!(
                "too many arguments: {} given, {} expected",
                args.len(),
                positional.len() + keywords.len()
            ))
        }
        None => {}
    }
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::super::compile;

    fn classes(name: &str) -> bool {
        matches!(
            name,
            "Queue"
                | "Counter"
                | "Discard"
                | "Print"
                | "Idle"
                | "Paint"
                | "Classifier"
                | "InfiniteSource"
                | "Tee"
                | "Shaper"
                | "X"
                | "Y"
        )
    }

    fn flat(src: &str) -> String {
        compile("t", src, &[], &classes)
            .map(|f| f.to_click())
            .unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    fn err(src: &str) -> String {
        compile("t", src, &[], &classes).unwrap_err().to_string()
    }

    #[test]
    fn declarations_and_chains() {
        assert_eq!(
            flat("a :: Queue(10); a -> c :: Counter -> Discard;"),
            "a :: Queue(10);\nc :: Counter;\nDiscard@3 :: Discard;\na [0] -> [0] c;\nc [0] -> [0] Discard@3;\n"
        );
        // A repeated connection is one connection.
        assert_eq!(flat("a :: Idle; a -> a; a -> a"), "a :: Idle;\na [0] -> [0] a;\n");
    }

    #[test]
    fn compounds_expand_with_prefixed_names_click_5_example() {
        // click(5): compound :: { input -> X -> output; input [1] -> Y -> [1] output };
        // a -> compound -> b; c -> [1] compound [1] -> d;
        let out = flat(
            "compound :: { input -> X -> output; input [1] -> Y -> [1] output }; \
             a, b, c, d :: Idle; a -> compound -> b; c -> [1] compound [1] -> d;",
        );
        assert!(out.contains("compound/X@1 :: X;"), "{out}");
        assert!(out.contains("compound/Y@2 :: Y;"), "{out}");
        for line in [
            "a [0] -> [0] compound/X@1;",
            "compound/X@1 [0] -> [0] b;",
            "c [0] -> [0] compound/Y@2;",
            "compound/Y@2 [0] -> [0] d;",
        ] {
            assert!(out.contains(line), "{line} missing in\n{out}");
        }
    }

    #[test]
    fn elementclass_parameters_overloads_and_synonyms() {
        let out = flat(
            "elementclass MyQueue { input -> Queue -> Shaper(1000) -> output || $cap | input -> Queue($cap) -> Shaper(1000) -> output }
             elementclass Q2 MyQueue;
             i :: Idle; d :: Discard;
             i -> q :: MyQueue(20) -> d; i -> r :: Q2 -> d;",
        );
        assert!(out.contains("q/Queue@1 :: Queue(20);"), "{out}");
        assert!(out.contains("r/Queue@1 :: Queue;"), "{out}");
        assert!(out.contains("i [0] -> [0] q/Queue@1;"), "{out}");
        assert!(out.contains("r/Shaper@2 [0] -> [0] d;"), "{out}");
    }

    #[test]
    fn keyword_and_rest_parameters_bind_as_click_5_says() {
        // click(5): { $a, COUNT $count, __REST__ $rest | ... } (1, 2, COUNT 3, FOO 4)
        // gives $a = 1, $count = 3, $rest = "2, FOO 4".
        let out = flat("x :: { $a, COUNT $count, __REST__ $rest | Print(\"$a|$count|$rest\") } (1, 2, COUNT 3, FOO 4)");
        assert!(out.contains("x/Print@1 :: Print(\"1|3|2, FOO 4\");"), "{out}");
        assert_eq!(
            err("x :: { $a, $b | Idle } (1)"),
            "t:1:1: 'x': too few arguments: 1 given, 2 expected"
        );
        assert_eq!(
            err("x :: { $a, $b | Idle } (1, 2, 3)"),
            "t:1:1: 'x': too many arguments: 3 given, 2 expected"
        );
        assert_eq!(
            err("x :: { COUNT $count | Idle } (1)"),
            "t:1:1: 'x': missing 'COUNT' parameter"
        );
    }

    #[test]
    fn defines_are_simultaneous_and_the_command_line_overrides() {
        // click(5): "Message($a); define($a 2)" works like the reverse order.
        assert_eq!(flat("Print($a); define($a 2)"), "Print@1 :: Print(2);\n");
        let f = compile("t", "define($a 2); Print($a)", &[("a".into(), "7".into())], &classes).unwrap();
        assert_eq!(f.elements[0].config, "7");
        assert_eq!(
            err("define($a 1); define($a 2)"),
            "t:1:15: parameter '$a' is defined twice in this scope (first at t:1:1)"
        );
    }

    #[test]
    fn indexed_variables_of_clicks_variables_01_test() {
        let out = flat(
            "elementclass Foo { $a | input -> Print(\"$a\") -> Print(\"${a[0]}\") -> Print(\"${a[2]}\") -> Print(\"${a[3]}\") -> output }
             elementclass Bar { $a, $n | input -> Print(\"${a[$n]}\") -> output }
             elementclass Baz { $a | input -> Bar(${a[1]} ${a[0]}, ${a[2]}) -> output }
             InfiniteSource(DATA \"\", LIMIT 1, STOP true) -> Foo(A B C) -> Bar(D E F, 2) -> Baz(G H 1) -> Baz(I J 0) -> Discard",
        );
        let prints: Vec<&str> = out
            .lines()
            .filter(|l| l.contains(":: Print("))
            .map(|l| l.split(":: ").nth(1).unwrap())
            .collect();
        assert_eq!(
            prints,
            [
                "Print(\"A B C\");",
                "Print(\"A\");",
                "Print(\"C\");",
                "Print(\"\");",
                "Print(\"F\");",
                "Print(\"G\");",
                "Print(\"J\");"
            ]
        );
        // Order of the chain: source -> Foo's four Prints -> ... -> Discard.
        let f = compile(
            "t",
            "InfiniteSource -> Foo(A B C) -> Discard; elementclass Foo { $a | input -> Print($a) -> output }",
            &[],
            &classes,
        );
        assert!(f.is_err(), "classes are visible only after their definition");
    }

    #[test]
    fn groups_and_many_to_many() {
        // click(5): x -> (input -> output) -> y is x -> y, and so are the
        // other spellings.
        for src in [
            "x :: Idle; y :: Idle; x -> ( input -> output ) -> y;",
            "x :: Idle; y :: Idle; x -> ( [0] -> [0] ) -> y;",
            "x :: Idle; y :: Idle; x -> (->) -> y;",
        ] {
            assert_eq!(flat(src), "x :: Idle;\ny :: Idle;\nx [0] -> [0] y;\n", "{src}");
        }
        let out = flat(
            "c :: Classifier(00/01, 00/02, 00/03); next :: Idle; c [0-2] => Paint(0), Paint(1), Paint(2) -> next;",
        );
        for (p, paint) in [(0, "Paint@3"), (1, "Paint@4"), (2, "Paint@5")] {
            assert!(out.contains(&format!("c [{p}] -> [0] {paint};")), "{out}");
            assert!(out.contains(&format!("{paint} [0] -> [0] next;")), "{out}");
        }
        // A group's declarations are visible after it.
        let out = flat("x :: Idle; x -> (input -> q :: Queue -> output) -> Discard; q -> Counter");
        assert!(out.contains("q [0] -> [0] Counter@"), "{out}");
    }

    #[test]
    fn every_flattening_error_names_its_place() {
        let cases = [
            ("a :: Nope", "t:1:1: unknown element class 'Nope'"),
            (
                "a -> b",
                "t:1:1: undeclared element 'a' (and no element class has that name)",
            ),
            (
                "a :: Idle; a :: Idle",
                "t:1:12: redeclaration of element 'a' (first declared at t:1:1)",
            ),
            (
                "input -> Idle",
                "t:1:1: 'input' is only defined inside compound elements and groups",
            ),
            (
                "x :: { input -> output }; Idle -> [1] x",
                "t:1:35: 'x' has no input port 1 (it has 1)",
            ),
            (
                "x :: { input [1] -> output }; Idle -> x -> Idle",
                "t:1:1: 'x' uses input port 1 but not input port 0",
            ),
            (
                "a :: Idle; a [0,1] => [0] b :: Idle",
                "t:1:12: '=>' connects 2 output port(s) to 1 input port(s); the counts must be equal",
            ),
            ("elementclass A B", "t:1:1: unknown element class 'B'"),
            ("1 :: Idle", "t:1:1: '1' is not a valid element name"),
            ("define(a 1)", "t:1:1: define: expected '$NAME value', found 'a 1'"),
            (
                "elementclass Q { || ... }",
                "t:1:1: 'Q' has no earlier definition to extend with '...'",
            ),
        ];
        for (src, want) in cases {
            assert_eq!(err(src), want, "{src}");
        }
    }
}
