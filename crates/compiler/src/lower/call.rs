//! Calls: of helpers, atoms and natives, methods, and regex literals.

use super::*;

impl<'o> Lowerer<'o> {
    // ---------------------------------------------------------------- calls

    pub(super) fn call(&mut self, c: &CallExpression, dst: Reg) -> R<()> {
        let span = c.span;
        if c.arguments
            .iter()
            .any(|a| matches!(a, Argument::SpreadElement(_)))
        {
            return self.call_with_spread(c, dst);
        }
        // (sized first and pushed, not collected from the filtered arguments: this runs per call)
        let mut args: smallvec::SmallVec<[&Expression; 4]> =
            smallvec::SmallVec::with_capacity(c.arguments.len());
        for a in &c.arguments {
            if let Some(e) = a.as_expression() {
                args.push(e);
            }
        }
        let callee = c.callee.without_parentheses();
        match callee {
            Expression::Identifier(id) => self.call_name(id, &args, dst, span),
            Expression::StaticMemberExpression(m) => {
                self.call_method(&m.object, m.property.name.as_str(), m.optional, &args, dst, span)
            }
            Expression::ComputedMemberExpression(m) => match m.expression.without_parentheses() {
                Expression::StringLiteral(s) => self.call_method(&m.object, s.value.as_str(), m.optional, &args, dst, span),
                _ => fail(span, "computed method calls (o[k]()) are not supported in AJS; call the method by name, e.g. k === 'trim' ? s.trim() : s.toUpperCase()"),
            },
            Expression::ArrowFunctionExpression(_) | Expression::FunctionExpression(_) => {
                fail(span, format!("calling a function expression is not supported in AJS; {ARROW_MSG}"))
            }
            _ => fail(span, "only atoms, builtins (e.g. Math.max) and methods (e.g. items.push) can be called in AJS: functions are not values; write a top-level helper function f(x) { … } and call it by name"),
        }
    }

    /// The index of `name` in the program's atom table (added on first use).
    pub(super) fn atom_index(&mut self, name: &str, span: Span) -> R<AtomIdx> {
        if let Some(i) = self.atoms.iter().position(|a| a == name) {
            return Ok(AtomIdx(i as u16));
        }
        if self.atoms.len() >= u16::MAX as usize {
            return fail(span, "too many atoms; call fewer distinct atoms, e.g. one httpFetch({ url }) in a helper");
        }
        self.atoms.push(name.to_string());
        Ok(AtomIdx((self.atoms.len() - 1) as u16))
    }

    pub(super) fn call_name(
        &mut self,
        id: &IdentifierReference,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<()> {
        let name = id.name.as_str();
        if forbidden(name) {
            return fail(id.span, forbidden_msg(name));
        }
        if !self.is_global(name) {
            return fail(
                id.span,
                format!("'{name}' is a variable, not a function: AJS can only call atoms, builtins (e.g. Math.max) and methods; functions are not values: write a top-level helper function {name}(…) {{ … }} and call it by name"),
            );
        }
        if self.call_helper(name, args, dst, span)? {
            return Ok(());
        }
        if name == "Error" {
            self.with_temps(|l| {
                let r = match args.first() {
                    Some(a) => l.expr(a)?,
                    None => l.special(SpecialKey::Undef, span)?,
                };
                // remaining arguments are evaluated for their effects
                for a in args.iter().skip(1) {
                    l.expr(a)?;
                }
                l.emit(Op::Throw { src: r.src() }, span);
                Ok(())
            })?;
            // keep the destination defined for the (unreachable) code that follows
            let _ = dst;
            return Ok(());
        }
        if let Some(m) = unsupported_builtin(name) {
            return fail(id.span, m);
        }
        if self.opts.atoms.iter().any(|a| a == name) {
            if args.len() > 1 {
                return fail(
                    span,
                    format!(
                        "atom '{name}' takes one object of named inputs, e.g. {name}({{ ... }})"
                    ),
                );
            }
            crate::warnings::atom_call(name, args.first().copied());
            let idx = self.atom_index(name, span)?;
            return self.with_temps(|l| {
                let r = match args.first() {
                    Some(a) => l.expr(a)?,
                    None => l.special(SpecialKey::Undef, span)?,
                };
                l.emit(
                    Op::CallAtom {
                        dst: dst.dst(),
                        atom: idx.atom(),
                        arg: r.src(),
                    },
                    span,
                );
                Ok(())
            });
        }
        if name == "parallel" {
            return self.parallel_call(args, dst, span);
        }
        if let Some(native) = NativeId::pure_atom(name) {
            if args.len() > 1 {
                return fail(
                    span,
                    format!(
                        "atom '{name}' takes one object of named inputs, e.g. {name}({{ ... }})"
                    ),
                );
            }
            return self.call_native(native, None, args, dst, span);
        }
        if is_builtin_name(name) {
            if let Some(native) = native(name) {
                return self.call_native(native, None, args, dst, span);
            }
            return fail(id.span, hints::builtin_call_msg(name, args));
        }
        if self.opts.mode == Mode::Eval && self.opts.externals.iter().any(|k| k == name) {
            return fail(id.span, format!("'{name}' is a context value, not a function: AJS can only call atoms, builtins and methods; read it as a value instead, e.g. let v = {name}"));
        }
        fail(
            id.span,
            hints::undefined_call_msg(name, self.opts.mode != Mode::Eval),
        )
    }

    pub(super) fn call_method(
        &mut self,
        obj: &Expression,
        m: &str,
        optional: bool,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<()> {
        if let Some(ns) = self.namespace(obj) {
            if ns == "Array" && m == "from" && args.len() == 2 {
                // Array.from(x, cb): build the array, then map it with the callback inline
                return self.with_temps(|l| {
                    let t = l.alloc(span)?;
                    let from = NativeId::ArrayFrom;
                    l.call_native(from, None, &args[..1], t, span)?;
                    l.callback_source = Some(t);
                    let r = l.callback_method(args[1], "map", false, &args[1..], dst, span);
                    l.callback_source = None;
                    r.map(|_| ())
                });
            }
            let native = match ns {
                "Math" => match native_member("Math", m) {
                    Some(n) => n,
                    None => return fail(span, namespace_member_msg("Math", m)),
                },
                "console" => match native_member("console", m) {
                    Some(n) => n,
                    None => {
                        let alt = match m {
                            "table" => "console.table is not available. Write console.log(JSON.stringify(rows)) for structured data.".to_string(),
                            "dir" => "console.dir is not available. Write console.log(x) instead.".into(),
                            "trace" => "console.trace is not available (AJS has no stack traces). Write console.log('where: …') instead.".into(),
                            _ => format!("console.{m} is not supported in AJS; write console.log(…), console.info, console.warn or console.error"),
                        };
                        return fail(span, alt);
                    }
                },
                "JSON" | "Object" | "Array" | "Number" | "String" | "Date" | "Schema" => {
                    match native_member(ns, m) {
                        Some(n) => n,
                        None => return fail(span, namespace_member_msg(ns, m)),
                    }
                }
                _ => return fail(span, namespace_member_msg(ns, m)),
            };
            return self.call_native(native, None, args, dst, span);
        }
        if let Expression::Identifier(id) = obj.without_parentheses() {
            // `Promise.all(…)`, `Map.groupBy(…)`: say what the name is not, and what to use
            // (the name first: the scopes are searched only for these)
            if let Some(msg) = unsupported_builtin(id.name.as_str()) {
                if self.is_global(id.name.as_str()) {
                    return fail(id.span, msg);
                }
            }
        }
        if forbidden(m) {
            return fail(span, forbidden_msg(m));
        }
        if self.callback_method(obj, m, optional, args, dst, span)? {
            return Ok(());
        }
        let Some(native) = native_member("", m) else {
            return fail(span, hints::method_msg(obj, m, args));
        };
        self.with_temps(|l| {
            let recv = l.expr(obj)?;
            if optional {
                l.chain_jump(recv, span);
            }
            l.call_native(native, Some(recv), args, dst, span)
        })
    }

    /// A regex literal: checked and translated now (decision 23: patterns that need
    /// backtracking are compile errors), built at run time by the `%regex` native.
    pub(super) fn regex_literal(&mut self, r: &RegExpLiteral, dst: Reg) -> R<()> {
        let span = r.span;
        let pattern = r.regex.pattern.text.as_str();
        let flags = r.regex.flags.to_string();
        if let Err(m) = ajs_bytecode::natives::jsregex::translate(pattern, &flags) {
            return fail(span, m);
        }
        self.with_temps(|l| {
            let base = l.alloc(span)?;
            l.alloc(span)?;
            let kp = l.str_const(pattern, span)?;
            let kf = l.str_const(&flags, span)?;
            l.emit(
                Op::LoadConst {
                    dst: base.dst(),
                    k: kp.constant(),
                },
                span,
            );
            l.emit(
                Op::LoadConst {
                    dst: base.plus(1).dst(),
                    k: kf.constant(),
                },
                span,
            );
            l.emit(
                Op::CallNative {
                    dst: dst.dst(),
                    native: Native(NativeId::RegexNew.to_u16()),
                    base: base.base(),
                    argc: Count(2),
                },
                span,
            );
            Ok(())
        })
    }

    pub(super) fn call_native(
        &mut self,
        native: NativeId,
        recv: Option<Reg>,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<()> {
        let argc = args.len() + usize::from(recv.is_some());
        let (min, max) = native.arity();
        if argc > max as usize || argc > u8::MAX as usize {
            return fail(span, hints::arity_msg(native, true));
        }
        if argc < min as usize {
            return fail(span, hints::arity_msg(native, false));
        }
        self.with_temps(|l| {
            let base = l.next_temp();
            for _ in 0..argc {
                l.alloc(span)?;
            }
            let mut i = 0;
            if let Some(r) = recv {
                l.emit(
                    Op::Move {
                        dst: base.dst(),
                        src: r.src(),
                    },
                    span,
                );
                i = 1;
            }
            for a in args {
                l.expr_to(a, base.plus(i))?;
                i += 1;
            }
            l.emit(
                Op::CallNative {
                    dst: dst.dst(),
                    native: Native(native.to_u16()),
                    base: base.base(),
                    argc: Count(argc as u8),
                },
                span,
            );
            Ok(())
        })
    }
}
