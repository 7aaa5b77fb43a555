//! Agent programs: several top-level `function` declarations, the last one the entry, the
//! others helpers callable by name (reference §2.1–2.2, decision 8). Each function is its own
//! frame; helpers see only their parameters; the entry's parameters are typed by example values.

use ajs_bytecode::isa::Func;
use ajs_bytecode::program::{ParamSpec, Signature, TypeSpec};

use oxc_ast::ast;

use super::*;
use crate::params::{RawFunction, RawParam};

/// The helper functions of an agent program by name: (function index, arity). Most are in a
/// small table, in one of two slots by a cheap hash of the name (its length and two words of
/// its bytes), checked against the name itself; a name whose two slots others hold goes to a
/// keyed map
/// (std's SipHash: a guest cannot choose names that collide there, so colliding names cost a
/// keyed lookup each, no chain). (Not a keyed map alone: it hashes every helper's name once to
/// build it and again at every call of a helper.)
/// How a helper is called: its function's index, its parameter count, and how many of them a
/// call must pass (the ones after have defaults, which apply when an argument is missing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HelperSig {
    pub(crate) func: u16,
    pub(crate) arity: usize,
    pub(crate) required: usize,
}

pub(crate) struct Helpers<'a> {
    /// A power of two of slots.
    slots: Vec<Option<(&'a str, HelperSig)>>,
    more: HashMap<&'a str, HelperSig>,
}

impl<'a> Helpers<'a> {
    /// A table for `n` helpers.
    fn with_capacity(n: usize) -> Helpers<'a> {
        Helpers {
            slots: vec![None; (4 * n).max(8).next_power_of_two()],
            more: HashMap::new(),
        }
    }

    /// The two slots of `name` (when the table has them): where it is, the second when another
    /// name held the first. (By the length and two words of the name, as string constants
    /// are, in two slots: one slot by a hash of its length and first and last bytes sent too
    /// many of a real agent's names to the keyed map.)
    #[inline]
    fn slots(&self, name: &str) -> [usize; 2] {
        let b = name.as_bytes();
        let (w0, w1) = hash_words(b);
        let h = mix_words(b.len(), w0, w1) as usize;
        let mask = self.slots.len() - 1;
        [h & mask, (h >> 16) & mask]
    }

    /// Adds helper `name`; false when there is one of that name already.
    fn insert(&mut self, name: &'a str, helper: HelperSig) -> bool {
        for k in self.slots(name) {
            match self.slots.get_mut(k) {
                Some(slot @ None) => {
                    *slot = Some((name, helper));
                    return true;
                }
                Some(Some((held, _))) if *held == name => return false,
                _ => {}
            }
        }
        self.more.insert(name, helper).is_none()
    }

    /// The helper `name`, if there is one.
    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<HelperSig> {
        for k in self.slots(name) {
            match self.slots.get(k) {
                // (`same_bytes`: no call of `memcmp`)
                Some(Some((held, helper))) if same_bytes(held.as_bytes(), name.as_bytes()) => {
                    return Some(*helper)
                }
                Some(None) => return None,
                _ => {}
            }
        }
        if self.more.is_empty() {
            return None;
        }
        self.more.get(name).copied()
    }

    /// Whether it holds no helper (asked once a program: it looks at every slot).
    fn is_empty(&self) -> bool {
        self.more.is_empty() && self.slots.iter().all(Option::is_none)
    }
}

/// One parameter of a function as the lowering needs it.
struct Param<'a, 'b> {
    name: &'a str,
    span: Span,
    default: Option<&'b Expression<'a>>,
    required: bool,
}

/// Compiles an agent program.
pub(crate) fn lower_agent(
    src: &str,
    body: &[Statement],
    raw: &[RawFunction],
    opts: &CompileOptions,
    kept: &mut Kept,
) -> Result<Program, crate::Fail> {
    agent_program(src, body, raw, opts, kept).map_err(|e| *e)
}

fn agent_program(
    src: &str,
    body: &[Statement],
    raw: &[RawFunction],
    opts: &CompileOptions,
    kept: &mut Kept,
) -> R<Program> {
    // (sized for the statements, every one a function: not grown from empty)
    let mut fns: Vec<&ast::Function> = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Statement::FunctionDeclaration(f) => fns.push(f),
            Statement::EmptyStatement(_) => {}
            Statement::ImportDeclaration(_) => {
                return fail(s.span(), "Imports are not supported: remove the import and call the atoms (httpFetch, llmPredict, …) and builtins by name")
            }
            Statement::ExportNamedDeclaration(_) | Statement::ExportDefaultDeclaration(_) | Statement::ExportAllDeclaration(_) => {
                return fail(s.span(), "Exports are not supported: remove `export` (the last top-level function is the entry)")
            }
            Statement::ClassDeclaration(_) => {
                return fail(s.span(), "Classes are not supported. AJS has no classes: write a top-level helper that returns an object literal, e.g. function makeItem(name) { return { name } }")
            }
            // (`export function f` in a script: named by its text)
            _ if src.get(s.span().start as usize..).is_some_and(|t| t.starts_with("export")) => {
                return fail(s.span(), "Exports are not supported: remove `export` (the last top-level function is the entry)")
            }
            _ => {
                return fail(
                    s.span(),
                    "only function declarations may appear at the top level of an agent; move this statement into the entry function (the last one)",
                )
            }
        }
    }
    let Some(entry) = fns.last() else {
        return fail(
            Span::new(0, 0),
            "Source must contain a function declaration: write function main({ input: 'example' }) { … return { … } }",
        );
    };
    let entry_name = entry.id.as_ref().map_or("", |i| i.name.as_str());
    // helper table: name -> (function index, arity)
    let mut helpers = Helpers::with_capacity(fns.len() - 1);
    for (i, f) in fns.iter().enumerate().take(fns.len() - 1) {
        let Some(id) = &f.id else {
            return fail(
                f.span,
                "Helper function must have a name: write function name(a, b) { … }",
            );
        };
        let name = id.name.as_str();
        if name == entry_name {
            return fail(
                id.span,
                format!("Helper function cannot share a name with the entry function: {name}; rename the helper, e.g. {name}Helper"),
            );
        }
        // a parameter is optional when it has a default written with `=` (not an example
        // value written with `:`, which the parameter rewrite marks required)
        let raw_params = raw.get(i).map(|r| r.params.as_slice()).unwrap_or(&[]);
        let optional = |p: &FormalParameter| match &p.pattern {
            BindingPattern::BindingIdentifier(b) if p.initializer.is_some() => raw_params
                .iter()
                .find(|r| r.name == b.name.as_str())
                .is_some_and(|r| !r.required),
            _ => false,
        };
        let items = &f.params.items;
        let required = items
            .iter()
            .rposition(|p| !optional(p))
            .map_or(0, |k| k + 1);
        let sig = HelperSig {
            func: i as u16,
            arity: items.len(),
            required,
        };
        if !helpers.insert(name, sig) {
            return fail(
                id.span,
                format!("Duplicate helper function name: {name}; rename one of them, e.g. {name}2"),
            );
        }
    }
    let helpers = (!helpers.is_empty()).then_some(&helpers);
    // one line index for every function's span table
    let idx = LineIndex::new(src);
    // (one cursor for all: a function's positions begin near where the previous one's end,
    // not searched for from the first line)
    let mut cursor = idx.cursor();
    // sized for the source (about one constant per 32 bytes), so the tables seldom grow
    let guess = src.len() / 32;
    let pool = Pool {
        constants: Vec::with_capacity(guess),
        num_map: NumMap::with_capacity(guess / 4),
        str_map: StrMap::with_capacity(guess),
        atoms: Vec::new(),
        bufs: kept.take_bufs(),
    };
    let mut functions = Vec::with_capacity(fns.len());
    let mut spans = Vec::with_capacity(fns.len());
    // a recycled program's functions, whose allocations the new ones are built in
    let mut spare = kept.take_spare();
    let mut signature = None;
    // One lowerer for every function, each begun afresh (not one per function, a large value
    // moved in and out of its pool);
    // the externals of the function being lowered are its parameter names, which the lowerer
    // holds itself (`Lowerer::ext_names`, in place of these options' externals).
    let fopts = CompileOptions {
        mode: Mode::FunctionBody,
        externals: &[],
        atoms: opts.atoms,
        source_name: opts.source_name,
    };
    let mut l = Lowerer::with_pool(&fopts, pool);
    l.helpers = helpers;
    // the parameters of the function being lowered (filled in place: a returned list, a large
    // value, would be copied out per function)
    let mut params: SmallVec<[Param; 8]> = SmallVec::new();
    for (i, f) in fns.iter().enumerate() {
        let is_entry = i == fns.len() - 1;
        let name = f.id.as_ref().map_or("", |i| i.name.as_str());
        if f.r#async || f.generator {
            return fail(f.span, "async functions and generators are not supported: atom calls already look synchronous; write a plain function and call atoms directly: let r = httpFetch({ url })");
        }
        let raw_params = raw.get(i).map(|r| r.params.as_slice()).unwrap_or(&[]);
        params_of(f, raw_params, is_entry, name, &mut params)?;
        if is_entry {
            signature = Some(Signature {
                name: CompactString::from(name),
                params: params
                    .iter()
                    .map(|p| ParamSpec {
                        name: CompactString::from(p.name),
                        required: p.required,
                        ty: p.default.map_or(TypeSpec::Any, infer_type),
                    })
                    .collect(),
            });
        }
        l.begin_function();
        // (the previous function's strings, written over)
        l.ext_names.truncate(params.len());
        for (k, p) in params.iter().enumerate() {
            put_str(&mut l.ext_names, k, p.name);
        }
        for (k, p) in params.iter().enumerate() {
            if forbidden(p.name) {
                return fail(p.span, forbidden_msg(p.name));
            }
            if strict_reserved(p.name) {
                return fail(p.span, strict_reserved_msg(p.name));
            }
            let reg = l.new_special(Special::Ext(k), p.span.start)?;
            l.ext_regs.insert(k, reg);
        }
        // defaults apply when the argument is missing or null
        for (k, p) in params.iter().enumerate() {
            if let Some(d) = p.default {
                let Some(reg) = l.ext_regs.get(k) else {
                    return fail(p.span, "internal compiler error");
                };
                let skip = l.emit_jump(
                    Op::JumpIfNotNullish {
                        src: reg.src(),
                        target: Target(0),
                    },
                    p.span,
                );
                // (a pattern written as an example, `user: { name }`, fails here: say so)
                l.expr_to(d, reg).map_err(|mut e| {
                    e.message = format!(
                        "{} (in a parameter list, `{n}: …` and `{n} = …` give an example value, not a pattern: write {n}: 'example' or {n}: {{ field: 'example' }} and read its fields in the body)",
                        e.message,
                        n = p.name
                    );
                    e
                })?;
                l.patch_here(skip);
            }
        }
        let Some(fbody) = &f.body else {
            return fail(f.span, "a function needs a body: write function f(x) { … }");
        };
        l.block(&fbody.statements, true, fbody.span)?;
        let end = Span::new(fbody.span.end.saturating_sub(1), fbody.span.end);
        let u = l.alloc(end)?;
        l.emit(Op::LoadUndef { dst: u.dst() }, end);
        l.emit(Op::Return { src: u.src() }, end);
        let reuse = Reuse::from(&mut spare);
        let (function, pos) = l.finish_function(&mut cursor, name, reuse)?;
        functions.push(function);
        spans.push(pos);
    }
    let pool = l.into_pool();
    pool.bufs.keep(kept);
    Ok(Program {
        entry: (functions.len() - 1) as u16,
        functions,
        constants: pool.constants,
        atoms: pool.atoms,
        debug: Some(DebugInfo { spans }),
        signature,
    })
}

/// The parameters of `f`, into `out` (emptied first).
fn params_of<'a, 'b>(
    f: &'b ast::Function<'a>,
    raw: &[RawParam],
    is_entry: bool,
    fname: &str,
    out: &mut SmallVec<[Param<'a, 'b>; 8]>,
) -> R<()> {
    out.clear();
    let fp = &f.params;
    if let Some(rest) = &fp.rest {
        return fail(
            rest.span,
            "Unsupported parameter pattern: rest parameters (...args); name each parameter, or take an array: function f(args) { … }",
        );
    }
    let required = |name: &str| {
        raw.iter()
            .find(|r| r.name == name)
            .is_none_or(|r| r.required)
    };
    for p in &fp.items {
        match &p.pattern {
            BindingPattern::BindingIdentifier(b) => {
                let default = p.initializer.as_deref();
                let name = b.name.as_str();
                let req = default.is_none() || required(name);
                out.push(Param { name, span: b.span, default, required: req });
            }
            BindingPattern::ObjectPattern(o) if is_entry && fp.items.len() == 1 => {
                if let Some(r) = &o.rest {
                    return fail(r.span, "Unsupported parameter pattern: { ...rest }; list each property: { a, b = 1 }");
                }
                if p.initializer.is_some() {
                    // `{ a } = {}`: the whole object is optional; its properties decide
                }
                for prop in &o.properties {
                    let (id, default) = match &prop.value {
                        BindingPattern::BindingIdentifier(b) => (b, None),
                        BindingPattern::AssignmentPattern(a) => match &a.left {
                            BindingPattern::BindingIdentifier(b) => (b, Some(&a.right)),
                            _ => return fail(prop.span, "Only simple parameter names are supported; write { name } or { name: 'example' } or { name = 'default' }"),
                        },
                        _ => return fail(prop.span, "Unsupported parameter pattern: nested destructuring; give the property an example value instead: { user: { name: 'x' } } declares user's type, and read user.name in the body"),
                    };
                    if prop.computed || prop.key.static_name().is_none_or(|k| k != id.name.as_str()) {
                        return fail(prop.span, "Only simple parameter names are supported (rename inside the body instead: const other = name)");
                    }
                    out.push(Param { name: id.name.as_str(), span: id.span, default, required: default.is_none() });
                }
            }
            BindingPattern::ObjectPattern(_) if is_entry => {
                return fail(p.span, "an entry function takes one destructured object or plain parameters, not both: write function main({ a, b: 1 }) or function main(a, b)")
            }
            BindingPattern::ObjectPattern(_) | BindingPattern::ArrayPattern(_) | BindingPattern::AssignmentPattern(_) if !is_entry => {
                return fail(
                    p.span,
                    format!("Helper '{fname}' parameters must be plain identifiers (optionally with an example value); destructuring is not supported: write function {fname}(item) {{ const {{ a, b }} = item … }}"),
                )
            }
            _ => return fail(p.span, "Unsupported parameter pattern: ArrayPattern; use plain names or one destructured object: function main({ pair: [1, 2] }) then const [a, b] = pair"),
        }
    }
    // the first parameter whose name an earlier one has (a few are compared with each other,
    // more are hashed)
    let duplicate = if out.len() <= 8 {
        out.iter()
            .enumerate()
            .find(|&(i, p)| out[..i].iter().any(|q| q.name == p.name))
            .map(|(_, p)| p)
    } else {
        let mut seen = std::collections::HashSet::new();
        out.iter().find(|p| !seen.insert(p.name))
    };
    if let Some(p) = duplicate {
        return fail(
            p.span,
            format!(
                "Duplicate parameter name: {}; rename one of them, e.g. {}2",
                p.name, p.name
            ),
        );
    }
    if out.len() > u8::MAX as usize {
        return fail(f.params.span, "too many parameters (more than 255); pass one object instead: function f(options) { … options.a … }");
    }
    Ok(())
}

/// The type an example value implies.
fn infer_type(e: &Expression) -> TypeSpec {
    match e.without_parentheses() {
        Expression::StringLiteral(_) | Expression::TemplateLiteral(_) => TypeSpec::String,
        Expression::NumericLiteral(_) => TypeSpec::Number,
        Expression::UnaryExpression(u)
            if matches!(
                u.argument.without_parentheses(),
                Expression::NumericLiteral(_)
            ) =>
        {
            TypeSpec::Number
        }
        Expression::BooleanLiteral(_) => TypeSpec::Boolean,
        Expression::NullLiteral(_) => TypeSpec::Any,
        Expression::ArrayExpression(a) => {
            let mut elem: Option<TypeSpec> = None;
            for el in &a.elements {
                let t = el.as_expression().map_or(TypeSpec::Any, infer_type);
                elem = Some(match elem {
                    None => t,
                    Some(prev) if prev == t => prev,
                    Some(_) => TypeSpec::Any,
                });
            }
            TypeSpec::Array(Box::new(elem.unwrap_or(TypeSpec::Any)))
        }
        Expression::ObjectExpression(o) => {
            let mut props = Vec::with_capacity(o.properties.len());
            for p in &o.properties {
                if let ObjectPropertyKind::ObjectProperty(p) = p {
                    if let Some(k) = p.key.static_name() {
                        props.push((CompactString::from(&*k), infer_type(&p.value)));
                    }
                }
            }
            TypeSpec::Object(props)
        }
        _ => TypeSpec::Any,
    }
}

impl Lowerer<'_> {
    /// `helper(args…)` when `name` is a helper of this program; `Ok(false)` otherwise. The
    /// caller has made sure that `name` is global (no local or parameter of that name hides
    /// the helper): [`Lowerer::call_name`] fails first for a variable, so this does not search
    /// the scopes a second time.
    pub(super) fn call_helper(
        &mut self,
        name: &str,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<bool> {
        let Some(HelperSig {
            func,
            arity,
            required,
        }) = self.helper(name)
        else {
            return Ok(false);
        };
        if args.len() > arity || args.len() < required {
            let expects = if required == arity {
                format!("{arity}")
            } else {
                format!("{required} to {arity}")
            };
            return fail(
                span,
                format!(
                    "Helper '{name}' expects {expects} argument(s), got {}; pass {expects}: {name}(…)",
                    args.len()
                ),
            );
        }
        self.with_temps(|l| {
            let base = l.next_temp();
            for _ in 0..arity {
                l.alloc(span)?;
            }
            for (i, a) in args.iter().enumerate() {
                l.expr_to(a, base.plus(i))?;
            }
            // a missing argument is undefined, so the helper's default applies
            for i in args.len()..arity {
                l.emit(
                    Op::LoadUndef {
                        dst: base.plus(i).dst(),
                    },
                    span,
                );
            }
            l.emit(
                Op::Call {
                    dst: dst.dst(),
                    func: Func(func),
                    base: base.base(),
                    argc: Count(arity as u8),
                },
                span,
            );
            Ok(true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{HelperSig, Helpers};
    use std::collections::HashMap;

    fn sig(i: usize) -> HelperSig {
        HelperSig {
            func: i as u16,
            arity: i,
            required: i / 2,
        }
    }

    /// The helper table answers as a map would, with names that share slots (same length and
    /// ends), duplicates and misses, at every size.
    #[test]
    fn helpers_are_found_as_in_a_map() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        let letters = b"abxyz_$0";
        'round: for round in 0..2_000 {
            let n = round % 40;
            let names: Vec<String> = (0..n + 20)
                .map(|_| {
                    let len = next() % 5;
                    (0..len)
                        .map(|_| letters[next() % letters.len()] as char)
                        .collect()
                })
                .collect();
            let mut table = Helpers::with_capacity(n);
            let mut map = HashMap::new();
            for (i, name) in names.iter().take(n).enumerate() {
                let new = !map.contains_key(name.as_str());
                if new {
                    map.insert(name.as_str(), sig(i));
                }
                assert_eq!(table.insert(name, sig(i)), new, "{name:?}");
                if !new {
                    // (a duplicate is an error: the table is not used any further)
                    continue 'round;
                }
            }
            assert_eq!(table.is_empty(), map.is_empty());
            for name in &names {
                assert_eq!(table.get(name), map.get(name.as_str()).copied(), "{name:?}");
            }
        }
    }
}
