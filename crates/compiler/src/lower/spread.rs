//! Spread (decision 7): in array literals and in the arguments of builtins and methods. The VM
//! copies element by element and charges fuel per element.

use super::*;

impl Lowerer<'_> {
    /// Evaluates `e` and appends it to the array in `arr`.
    fn append_value(&mut self, arr: Reg, e: &Expression) -> R<()> {
        let t = self.alloc(e.span())?;
        self.expr_to(e, t)?;
        self.emit(
            Op::ArrayAppend {
                arr: arr.src(),
                base: t.base(),
                count: Count(1),
            },
            e.span(),
        );
        Ok(())
    }

    /// `[a, ...b, c]`.
    pub(super) fn array_with_spread(&mut self, a: &ArrayExpression, dst: Reg) -> R<()> {
        self.with_temps(|l| {
            let arr = l.alloc(a.span)?;
            l.emit(
                Op::NewArray {
                    dst: arr.dst(),
                    base: l.next_temp().base(),
                    count: Count(0),
                },
                a.span,
            );
            for el in &a.elements {
                l.with_temps(|l| {
                    match el {
                        ArrayExpressionElement::SpreadElement(s) => {
                            let v = l.expr(&s.argument)?;
                            l.emit(
                                Op::ArrayExtend {
                                    arr: arr.src(),
                                    src: v.src(),
                                },
                                s.span,
                            );
                        }
                        ArrayExpressionElement::Elision(e) => {
                            let t = l.alloc(e.span)?;
                            l.emit(Op::LoadUndef { dst: t.dst() }, e.span);
                            l.emit(
                                Op::ArrayAppend {
                                    arr: arr.src(),
                                    base: t.base(),
                                    count: Count(1),
                                },
                                e.span,
                            );
                        }
                        el => {
                            let Some(e) = el.as_expression() else {
                                return fail(a.span, "unsupported array element; write values, ...spread or holes: [a, ...b, , c]");
                            };
                            l.append_value(arr, e)?;
                        }
                    }
                    Ok(())
                })?;
            }
            l.emit(
                Op::Move {
                    dst: dst.dst(),
                    src: arr.src(),
                },
                a.span,
            );
            Ok(())
        })
    }

    /// `Math.max(...xs)`, `xs.push(...ys)`, `parseInt(...args)`: the arguments are gathered in an
    /// array at run time and the native checks its arity when it runs.
    pub(super) fn call_with_spread(&mut self, c: &CallExpression, dst: Reg) -> R<()> {
        let span = c.span;
        let (native, recv) = match c.callee.without_parentheses() {
            Expression::StaticMemberExpression(m) => {
                let name = m.property.name.as_str();
                if let Some(ns) = self.namespace(&m.object) {
                    match native_member(ns, name) {
                        Some(n) => (n, None),
                        None => return fail(span, format!("{ns}.{name} cannot be called with spread arguments; pass the values one by one: {ns}.{name}(a, b)")),
                    }
                } else {
                    if forbidden(name) {
                        return fail(m.property.span, forbidden_msg(name));
                    }
                    match native_member("", name) {
                        Some(n) => (n, Some(&m.object)),
                        None => {
                            return fail(
                                span,
                                format!("'{name}' cannot be called with spread arguments; only builtins and methods such as Math.max(...xs) or xs.push(...ys) can"),
                            )
                        }
                    }
                }
            }
            Expression::Identifier(id) if self.is_global(id.name.as_str()) && self.helper(id.name.as_str()).is_none() => {
                match native(id.name.as_str()) {
                    Some(n) if !n.is_method() => (n, None),
                    _ => {
                        return fail(
                            span,
                            format!("'{}' cannot be called with spread arguments; pass the values one by one: {}(a, b)", id.name, id.name),
                        )
                    }
                }
            }
            _ => return fail(span, "spread arguments are only supported for builtins and methods, e.g. Math.max(...xs); pass the values one by one: f(a, b)"),
        };
        self.with_temps(|l| {
            let arr = l.alloc(span)?;
            match recv {
                Some(obj) => {
                    let r = l.alloc(span)?;
                    l.expr_to(obj, r)?;
                    l.emit(
                        Op::NewArray {
                            dst: arr.dst(),
                            base: r.base(),
                            count: Count(1),
                        },
                        span,
                    );
                }
                None => l.emit(
                    Op::NewArray {
                        dst: arr.dst(),
                        base: l.next_temp().base(),
                        count: Count(0),
                    },
                    span,
                ),
            }
            for a in &c.arguments {
                l.with_temps(|l| {
                    match a {
                        Argument::SpreadElement(s) => {
                            let v = l.expr(&s.argument)?;
                            l.emit(
                                Op::ArrayExtend {
                                    arr: arr.src(),
                                    src: v.src(),
                                },
                                s.span,
                            );
                        }
                        a => {
                            let Some(e) = a.as_expression() else {
                                return fail(span, "unsupported argument; write values or ...spread: f(a, ...rest)");
                            };
                            l.append_value(arr, e)?;
                        }
                    }
                    Ok(())
                })?;
            }
            l.emit(
                Op::CallNativeArray {
                    dst: dst.dst(),
                    native: Native(native.to_u16()),
                    args: arr.src(),
                },
                span,
            );
            Ok(())
        })
    }
}
