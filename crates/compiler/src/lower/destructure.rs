//! Destructuring in `let`/`const` (decision 7): object and array patterns, defaults, rest.

use super::*;

impl Lowerer<'_> {
    /// Every name a pattern binds, in order.
    pub(super) fn pattern_names<'p>(
        p: &'p BindingPattern,
        out: &mut Vec<(&'p str, Span)>,
    ) -> R<()> {
        match p {
            BindingPattern::BindingIdentifier(b) => out.push((b.name.as_str(), b.span)),
            BindingPattern::AssignmentPattern(a) => Self::pattern_names(&a.left, out)?,
            BindingPattern::ObjectPattern(o) => {
                for prop in &o.properties {
                    Self::pattern_names(&prop.value, out)?;
                }
                if let Some(r) = &o.rest {
                    Self::pattern_names(&r.argument, out)?;
                }
            }
            BindingPattern::ArrayPattern(a) => {
                for el in a.elements.iter().flatten() {
                    Self::pattern_names(el, out)?;
                }
                if let Some(r) = &a.rest {
                    Self::pattern_names(&r.argument, out)?;
                }
            }
        }
        Ok(())
    }

    /// Declares the names of `pattern`, evaluates `init` and destructures it into them.
    pub(super) fn destructuring_decl(
        &mut self,
        pattern: &BindingPattern,
        init: &Expression,
        is_const: bool,
    ) -> R<()> {
        let mut names = Vec::new();
        Self::pattern_names(pattern, &mut names)?;
        let mut regs: Vec<(String, Reg)> = Vec::with_capacity(names.len());
        for (name, span) in &names {
            if regs.iter().any(|(n, _)| n == name) {
                return fail(
                    *span,
                    format!("Identifier '{name}' has already been declared; rename one of them, e.g. {{ {name}: {name}2 }}"),
                );
            }
            let r = self.declare(Probe::new(name), *span)?;
            regs.push((name.to_string(), r));
        }
        self.with_temps(|l| {
            let src = l.alloc(init.span())?;
            l.expr_to(init, src)?;
            l.destructure(pattern, src, &regs)?;
            Ok(())
        })?;
        for (name, r) in regs {
            self.bind(Probe::new(&name), r, is_const);
        }
        Ok(())
    }

    pub(super) fn destructure(
        &mut self,
        p: &BindingPattern,
        src: Reg,
        regs: &[(String, Reg)],
    ) -> R<()> {
        let span = p.span();
        match p {
            BindingPattern::BindingIdentifier(b) => {
                let reg = regs
                    .iter()
                    .find(|(n, _)| n == b.name.as_str())
                    .map(|x| x.1)
                    .unwrap_or(src);
                self.emit(
                    Op::Move {
                        dst: reg.dst(),
                        src: src.src(),
                    },
                    b.span,
                );
            }
            BindingPattern::AssignmentPattern(a) => {
                // JavaScript: the default applies when the value is undefined
                self.with_temps(|l| {
                    let t = l.alloc(span)?;
                    let c = l.alloc(span)?;
                    let undef = l.special(SpecialKey::Undef, span)?;
                    l.emit(
                        Op::Move {
                            dst: t.dst(),
                            src: src.src(),
                        },
                        span,
                    );
                    l.emit(
                        Op::StrictNe {
                            dst: c.dst(),
                            a: t.src(),
                            b: undef.src(),
                        },
                        span,
                    );
                    let skip = l.emit_jump(
                        Op::JumpIfTrue {
                            cond: c.src(),
                            target: Target(0),
                        },
                        span,
                    );
                    l.expr_to(&a.right, t)?;
                    l.patch_here(skip);
                    l.destructure(&a.left, t, regs)?;
                    Ok(())
                })?;
            }
            BindingPattern::ObjectPattern(o) => {
                self.with_temps(|l| {
                    let checked = l.alloc(span)?;
                    l.emit(
                        Op::Destructurable {
                            dst: checked.dst(),
                            src: src.src(),
                            array: Count(0),
                        },
                        span,
                    );
                    let mut taken: Vec<Reg> = Vec::new(); // registers holding the keys taken (for ...rest)
                    for prop in &o.properties {
                        let t = l.alloc(prop.span)?;
                        if prop.computed {
                            let Some(ke) = prop.key.as_expression() else {
                                return fail(prop.span, "unsupported computed key; write { [k]: value } with k an expression");
                            };
                            let k = l.alloc(prop.span)?;
                            l.expr_to(ke, k)?;
                            l.emit(
                                Op::GetIndex {
                                    dst: t.dst(),
                                    obj: src.src(),
                                    key: k.src(),
                                },
                                prop.span,
                            );
                            taken.push(k);
                        } else {
                            super::expr::strict_key(&prop.key)?;
                            let key = match &prop.key {
                                PropertyKey::StaticIdentifier(id) => id.name.as_str().to_string(),
                                PropertyKey::StringLiteral(s) => {
                                    String::from_utf16_lossy(&string_units(s))
                                }
                                PropertyKey::NumericLiteral(n) => js_number_to_string(n.value),
                                _ => {
                                    return fail(
                                        prop.key.span(),
                                        "unsupported key in a destructuring pattern; write a name or a string: const { a, 'b-c': bc } = o",
                                    )
                                }
                            };
                            if forbidden(&key) {
                                return fail(prop.key.span(), forbidden_msg(&key));
                            }
                            let kc = l.str_const(&key, prop.key.span())?;
                            l.emit(
                                Op::GetProp {
                                    dst: t.dst(),
                                    obj: src.src(),
                                    key: kc.key(),
                                },
                                prop.span,
                            );
                            if o.rest.is_some() {
                                let k = l.alloc(prop.span)?;
                                l.emit(
                                    Op::LoadConst {
                                        dst: k.dst(),
                                        k: kc.constant(),
                                    },
                                    prop.span,
                                );
                                taken.push(k);
                            }
                        }
                        l.destructure(&prop.value, t, regs)?;
                    }
                    if let Some(rest) = &o.rest {
                        if taken.len() > u8::MAX as usize {
                            return fail(
                                rest.span,
                                "too many properties before ...rest (at most 255); destructure in two steps: const { a, ...rest } = o then const { b, ...rest2 } = rest",
                            );
                        }
                        // the excluded keys must sit in consecutive registers
                        let base = l.next_temp();
                        for _ in 0..taken.len() {
                            l.alloc(rest.span)?;
                        }
                        for (i, k) in taken.iter().enumerate() {
                            l.emit(
                                Op::Move {
                                    dst: base.plus(i).dst(),
                                    src: (*k).src(),
                                },
                                rest.span,
                            );
                        }
                        let t = l.alloc(rest.span)?;
                        l.emit(
                            Op::ObjectRest {
                                dst: t.dst(),
                                src: src.src(),
                                base: base.base(),
                                count: Count(taken.len() as u8),
                            },
                            rest.span,
                        );
                        l.destructure(&rest.argument, t, regs)?;
                    }
                    Ok(())
                })?;
            }
            BindingPattern::ArrayPattern(a) => {
                let original = src;
                self.with_temps(|l| {
                    // a string destructures by code points, as `[...s]` does
                    let src = l.alloc(span)?;
                    l.emit(
                        Op::Destructurable {
                            dst: src.dst(),
                            src: original.src(),
                            array: Count(1),
                        },
                        span,
                    );
                    for (i, el) in a.elements.iter().enumerate() {
                        let Some(el) = el else { continue };
                        let t = l.alloc(el.span())?;
                        let idx = l.num_reg(i as f64, el.span())?;
                        l.emit(
                            Op::GetIndex {
                                dst: t.dst(),
                                obj: src.src(),
                                key: idx.src(),
                            },
                            el.span(),
                        );
                        l.destructure(el, t, regs)?;
                    }
                    if let Some(rest) = &a.rest {
                        let Some(slice) = native(".slice") else {
                            return fail(rest.span, "...rest in array patterns needs .slice (an internal refusal); write xs.slice(n)");
                        };
                        let base = l.alloc(rest.span)?;
                        let from = l.alloc(rest.span)?;
                        l.emit(
                            Op::Move {
                                dst: base.dst(),
                                src: src.src(),
                            },
                            rest.span,
                        );
                        let k = l.num_const(a.elements.len() as f64, rest.span)?;
                        l.emit(
                            Op::LoadConst {
                                dst: from.dst(),
                                k: k.constant(),
                            },
                            rest.span,
                        );
                        let t = l.alloc(rest.span)?;
                        l.emit(
                            Op::CallNative {
                                dst: t.dst(),
                                native: Native(slice.to_u16()),
                                base: base.base(),
                                argc: Count(2),
                            },
                            rest.span,
                        );
                        l.destructure(&rest.argument, t, regs)?;
                    }
                    Ok(())
                })?;
            }
        }
        Ok(())
    }
}
