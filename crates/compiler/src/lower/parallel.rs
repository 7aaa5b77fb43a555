//! `parallel(items)` and `parallel(items, { settled: true })`: several host calls at once.
//!
//! `items` is an array literal or `xs.map(x => …)`. Every item that is an atom call written
//! directly (`httpFetch({ url })`, or either branch of `c ? a(…) : b(…)`) is queued (`ParCall`)
//! instead of stopping the run; anything else is evaluated and kept as it is (`ParValue`). At
//! the end (`ParEnd`) the host performs the queued calls together and the result is the array of
//! the items' results, in order. The first failed call (by position) raises its error; with
//! `{ settled: true }` each item is `{ ok: true, value }` or `{ ok: false, error }` instead.

use super::*;

const SHAPE: &str = "parallel() takes an array of atom calls, e.g. parallel([httpFetch({ url: a }), httpFetch({ url: b })]) or parallel(urls.map(u => httpFetch({ url: u })))";

impl Lowerer<'_> {
    /// Lowers `parallel(args…)` into `dst`.
    pub(super) fn parallel_call(&mut self, args: &[&Expression], dst: Reg, span: Span) -> R<()> {
        let Some(items) = args.first() else {
            return fail(span, SHAPE);
        };
        if args.len() > 2 {
            return fail(span, "parallel() takes the items and at most one options object, e.g. parallel(calls, { settled: true })");
        }
        let settled = match args.get(1) {
            None => false,
            Some(o) => self.parallel_options(o)?,
        };
        self.emit(Op::ParBegin {}, span);
        match items.without_parentheses() {
            Expression::ArrayExpression(a) => {
                for el in &a.elements {
                    match el {
                        ArrayExpressionElement::SpreadElement(s) => {
                            return fail(
                                s.span,
                                format!("spread is not supported inside parallel([...]); {SHAPE}"),
                            )
                        }
                        ArrayExpressionElement::Elision(e) => {
                            self.with_temps(|l| {
                                let r = l.special(SpecialKey::Undef, e.span)?;
                                l.emit(Op::ParValue { src: r.src() }, e.span);
                                Ok(())
                            })?;
                        }
                        _ => match el.as_expression() {
                            Some(e) => self.parallel_item(e)?,
                            None => return fail(a.span, SHAPE),
                        },
                    }
                }
            }
            Expression::CallExpression(c) if is_map_call(c) => {
                self.with_temps(|l| {
                    let r = l.alloc(c.span)?;
                    l.parallel_map = true;
                    l.expr_to(items, r)?;
                    if std::mem::take(&mut l.parallel_map) {
                        return fail(c.span, SHAPE);
                    }
                    Ok(())
                })?;
            }
            other => return fail(other.span(), SHAPE),
        }
        self.emit(
            Op::ParEnd {
                dst: dst.dst(),
                settled: Imm(u32::from(settled)),
            },
            span,
        );
        Ok(())
    }

    /// `{ settled: true }` (or `false`), known when compiling.
    fn parallel_options(&mut self, o: &Expression) -> R<bool> {
        const MSG: &str = "parallel()'s options are an object literal: write parallel(calls, { settled: true }) to make each item { ok, value } or { ok, error } instead of failing on the first error";
        let Expression::ObjectExpression(obj) = o.without_parentheses() else {
            return fail(o.span(), MSG);
        };
        let mut settled = false;
        for p in &obj.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                return fail(obj.span, MSG);
            };
            let key = match &p.key {
                PropertyKey::StaticIdentifier(id) => id.name.as_str(),
                PropertyKey::StringLiteral(s) => s.value.as_str(),
                _ => return fail(p.span, MSG),
            };
            if key != "settled" {
                return fail(p.span, format!("unknown parallel() option '{key}'; {MSG}"));
            }
            match p.value.without_parentheses() {
                Expression::BooleanLiteral(b) => settled = b.value,
                _ => return fail(p.value.span(), MSG),
            }
        }
        Ok(settled)
    }

    /// One item: a direct atom call is queued, a conditional chooses between items, anything
    /// else is a plain value.
    pub(super) fn parallel_item(&mut self, e: &Expression) -> R<()> {
        self.nested(e.span(), |l| l.parallel_item_inner(e))
    }

    fn parallel_item_inner(&mut self, e: &Expression) -> R<()> {
        let span = e.span();
        match e.without_parentheses() {
            Expression::CallExpression(c) if self.direct_atom(c).is_some() => {
                let name = self.direct_atom(c).unwrap_or_default().to_string();
                let args: smallvec::SmallVec<[&Expression; 4]> = c
                    .arguments
                    .iter()
                    .filter_map(|a| a.as_expression())
                    .collect();
                if args.len() > 1 {
                    return fail(
                        c.span,
                        format!(
                            "atom '{name}' takes one object of named inputs, e.g. {name}({{ ... }})"
                        ),
                    );
                }
                let idx = self.atom_index(&name, c.span)?;
                self.with_temps(|l| {
                    let r = match args.first() {
                        Some(a) => l.expr(a)?,
                        None => l.special(SpecialKey::Undef, c.span)?,
                    };
                    l.emit(
                        Op::ParCall {
                            atom: idx.atom(),
                            arg: r.src(),
                        },
                        c.span,
                    );
                    Ok(())
                })?;
            }
            Expression::ConditionalExpression(c) => {
                let jf = self.with_temps(|l| {
                    let t = l.expr(&c.test)?;
                    Ok(l.emit_jump(
                        Op::JumpIfFalse {
                            cond: t.src(),
                            target: Target(0),
                        },
                        c.test.span(),
                    ))
                })?;
                self.parallel_item(&c.consequent)?;
                let je = self.emit_jump(Op::Jump { target: Target(0) }, c.consequent.span());
                self.patch_here(jf);
                self.parallel_item(&c.alternate)?;
                self.patch_here(je);
            }
            _ => {
                self.with_temps(|l| {
                    let r = l.expr(e)?;
                    l.emit(Op::ParValue { src: r.src() }, span);
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// The atom a call names directly (`name(…)` where `name` is a host atom, not shadowed by a
    /// variable or a helper, and no argument is spread).
    fn direct_atom<'c>(&self, c: &'c CallExpression) -> Option<&'c str> {
        let Expression::Identifier(id) = c.callee.without_parentheses() else {
            return None;
        };
        let name = id.name.as_str();
        let plain = !c
            .arguments
            .iter()
            .any(|a| matches!(a, Argument::SpreadElement(_)));
        (plain
            && self.is_global(name)
            && self.helper(name).is_none()
            && self.opts.atoms.iter().any(|a| a == name))
        .then_some(name)
    }
}

/// `xs.map(arrow)` (not optional).
fn is_map_call(c: &CallExpression) -> bool {
    matches!(
        c.callee.without_parentheses(),
        Expression::StaticMemberExpression(m) if m.property.name == "map" && !m.optional
    ) && !c.optional
        && matches!(
            c.arguments
                .first()
                .and_then(|a| a.as_expression())
                .map(|e| e.without_parentheses()),
            Some(Expression::ArrowFunctionExpression(_))
        )
}
