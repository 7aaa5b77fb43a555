//! Callback methods (`map filter find findIndex findLast findLastIndex some every forEach reduce
//! reduceRight`, decision 10) lowered **inline** as bytecode loops: no closures exist at run
//! time, the callback's body runs in the caller's frame and reads outer variables from their
//! registers (read-only: assigning to them is a compile error), and every iteration pays fuel
//! through the loop's own blocks.

use super::*;

/// The callback methods, and whether each walks the array backwards.
const CALLBACK_METHODS: &[(&str, bool)] = &[
    ("map", false),
    ("filter", false),
    ("find", false),
    ("findIndex", false),
    ("findLast", true),
    ("findLastIndex", true),
    ("some", false),
    ("every", false),
    ("forEach", false),
    ("reduce", false),
    ("reduceRight", true),
    ("flatMap", false),
];

/// Methods that take a callback in JavaScript but not (yet) in AJS, with what to write instead.
fn unsupported_callback_method(m: &str) -> Option<&'static str> {
    Some(match m {
        "toSpliced" => "toSpliced does not take a callback; write xs.filter(x => …) to drop items",
        _ => return None,
    })
}

/// State of the callback body being lowered.
pub(super) struct CallbackCtx {
    /// Register receiving the callback's value.
    result: Reg,
    /// `return` jumps to patch to the end of the body.
    exits: Vec<usize>,
    /// `try` depth when the body started.
    try_depth: u32,
    /// Scopes below this index belong to the enclosing code (read-only inside the callback).
    pub(super) scope_floor: usize,
    /// The callback's results are `parallel` items (`parallel(xs.map(…))`).
    parallel: bool,
}

impl Lowerer<'_> {
    /// Lowers `obj.m(callback, …)` when `m` is a callback method. Returns `Ok(false)` when `m`
    /// is not one (the caller then treats it as an ordinary method).
    pub(super) fn callback_method(
        &mut self,
        obj: &Expression,
        m: &str,
        optional: bool,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<bool> {
        if Self::is_replace_with_callback(m, args) {
            return self
                .replace_with_callback(obj, m, optional, args, dst, span)
                .map(|_| true);
        }
        if (m == "sort" || m == "toSorted") && !args.is_empty() {
            return self
                .sort_with_comparator(obj, m, optional, args, dst, span)
                .map(|_| true);
        }
        // `parallel(xs.map(…))`: this map's results are parallel items
        let par = m == "map" && std::mem::take(&mut self.parallel_map);
        let Some(&(_, backwards)) = CALLBACK_METHODS.iter().find(|(n, _)| *n == m) else {
            if let (Some(msg), Some(Expression::ArrowFunctionExpression(_))) = (
                unsupported_callback_method(m),
                args.first().map(|a| a.without_parentheses()),
            ) {
                return fail(span, msg);
            }
            return Ok(false);
        };
        let Some(Expression::ArrowFunctionExpression(cb)) =
            args.first().map(|a| a.without_parentheses())
        else {
            return fail(
                span,
                super::hints::callback_msg(obj, m, args.first().copied()),
            );
        };
        let is_reduce = m == "reduce" || m == "reduceRight";
        let max_args = if is_reduce { 2 } else { 1 };
        if args.len() > max_args {
            return fail(
                span,
                format!(
                    "'{m}' takes {max_args} argument(s) in AJS, got {}; pass {}",
                    args.len(),
                    if is_reduce {
                        "the callback and an initial value: xs.reduce((acc, x) => acc + x, 0)"
                    } else {
                        "only the callback: xs.map(x => …) (AJS has no thisArg)"
                    }
                ),
            );
        }
        if cb.r#async {
            return fail(
                cb.span,
                "async callbacks are not supported: AJS atom calls are already synchronous; drop `async` and call the atom directly: xs.map(x => llmPredict({ prompt: x }))",
            );
        }
        if cb.params.rest.is_some() {
            return fail(
                cb.params.span,
                "rest parameters (...args) are not supported in callbacks; name each parameter: (x, i) => …",
            );
        }

        self.with_temps(|l| {
            let recv = l.alloc(span)?;
            match l.callback_source.take() {
                // `Array.from(x, cb)`: the array was built already
                Some(r) => l.emit(
                    Op::Move {
                        dst: recv.dst(),
                        src: r.src(),
                    },
                    span,
                ),
                None => {
                    l.expr_to(obj, recv)?;
                    if optional {
                        l.chain_jump(recv, span);
                    }
                }
            }
            let len = l.alloc(span)?;
            let name = l.str_const(m, span)?;
            l.emit(
                Op::ArrayLen {
                    dst: len.dst(),
                    arr: recv.src(),
                    method: name.key(),
                },
                span,
            );
            let i = l.alloc(span)?;
            let acc = l.alloc(span)?;
            let elem = l.alloc(span)?;
            let cond = l.alloc(span)?;
            let zero = l.num_reg(0.0, span)?;
            let one = l.num_reg(1.0, span)?;

            // accumulator
            match m {
                "map" | "filter" | "flatMap" => l.emit(
                    Op::NewArray {
                        dst: acc.dst(),
                        base: Base(0),
                        count: Count(0),
                    },
                    span,
                ),
                "findIndex" | "findLastIndex" => {
                    let k = l.num_const(-1.0, span)?;
                    l.emit(
                        Op::LoadConst {
                            dst: acc.dst(),
                            k: k.constant(),
                        },
                        span,
                    );
                }
                "some" => l.emit(Op::LoadFalse { dst: acc.dst() }, span),
                "every" => l.emit(Op::LoadTrue { dst: acc.dst() }, span),
                "find" | "findLast" | "forEach" => l.emit(Op::LoadUndef { dst: acc.dst() }, span),
                _ => {}
            }
            // start index
            if backwards {
                l.emit(
                    Op::Sub {
                        dst: i.dst(),
                        a: len.src(),
                        b: one.src(),
                    },
                    span,
                );
            } else {
                l.emit(
                    Op::Move {
                        dst: i.dst(),
                        src: zero.src(),
                    },
                    span,
                );
            }
            if is_reduce {
                if let Some(init) = args.get(1) {
                    l.expr_to(init, acc)?;
                } else {
                    // no initial value: the first element is the accumulator (TypeError when empty)
                    let ok = l.emit_jump(
                        Op::JumpIfTrue {
                            cond: len.src(),
                            target: Target(0),
                        },
                        span,
                    );
                    let msg = l.str_const("Reduce of empty array with no initial value", span)?;
                    l.emit(
                        Op::LoadConst {
                            dst: cond.dst(),
                            k: msg.constant(),
                        },
                        span,
                    );
                    l.emit(Op::Throw { src: cond.src() }, span);
                    l.patch_here(ok);
                    l.emit(
                        Op::GetIndex {
                            dst: acc.dst(),
                            obj: recv.src(),
                            key: i.src(),
                        },
                        span,
                    );
                    l.step_index(i, one, backwards, span);
                }
            }

            let start = l.here();
            let test = if backwards {
                Op::Ge {
                    dst: cond.dst(),
                    a: i.src(),
                    b: zero.src(),
                }
            } else {
                Op::Lt {
                    dst: cond.dst(),
                    a: i.src(),
                    b: len.src(),
                }
            };
            let exit = l.emit_test(test, false, span);
            l.emit(
                Op::GetIndex {
                    dst: elem.dst(),
                    obj: recv.src(),
                    key: i.src(),
                },
                span,
            );

            // the callback's parameters: (item, index, array) or, for reduce, (acc, item, index, array)
            let all = [acc, elem, i, recv];
            let sources = if is_reduce { &all[..] } else { &all[1..] };
            let value = l.alloc(span)?;
            l.callback_body(cb, sources, value, par)?;

            let mut early_exit = None;
            match m {
                "map" if par => {}
                "map" => l.push(acc, value, span),
                "flatMap" => {
                    // an array result is flattened one level; anything else is pushed as is
                    match native("Array.isArray") {
                        Some(n) => {
                            l.emit(
                                Op::CallNative {
                                    dst: cond.dst(),
                                    native: Native(n.to_u16()),
                                    base: value.base(),
                                    argc: Count(1),
                                },
                                span,
                            );
                            let plain = l.emit_jump(
                                Op::JumpIfFalse {
                                    cond: cond.src(),
                                    target: Target(0),
                                },
                                span,
                            );
                            l.emit(
                                Op::ArrayExtend {
                                    arr: acc.src(),
                                    src: value.src(),
                                },
                                span,
                            );
                            let done = l.emit_jump(Op::Jump { target: Target(0) }, span);
                            l.patch_here(plain);
                            l.push(acc, value, span);
                            l.patch_here(done);
                        }
                        None => l.push(acc, value, span),
                    }
                }
                "filter" => {
                    let skip = l.emit_jump(
                        Op::JumpIfFalse {
                            cond: value.src(),
                            target: Target(0),
                        },
                        span,
                    );
                    l.push(acc, elem, span);
                    l.patch_here(skip);
                }
                "find" | "findLast" | "findIndex" | "findLastIndex" | "some" => {
                    let skip = l.emit_jump(
                        Op::JumpIfFalse {
                            cond: value.src(),
                            target: Target(0),
                        },
                        span,
                    );
                    match m {
                        "find" | "findLast" => l.emit(
                            Op::Move {
                                dst: acc.dst(),
                                src: elem.src(),
                            },
                            span,
                        ),
                        "findIndex" | "findLastIndex" => l.emit(
                            Op::Move {
                                dst: acc.dst(),
                                src: i.src(),
                            },
                            span,
                        ),
                        _ => l.emit(Op::LoadTrue { dst: acc.dst() }, span),
                    }
                    early_exit = Some(l.emit_jump(Op::Jump { target: Target(0) }, span));
                    l.patch_here(skip);
                }
                "every" => {
                    let skip = l.emit_jump(
                        Op::JumpIfTrue {
                            cond: value.src(),
                            target: Target(0),
                        },
                        span,
                    );
                    l.emit(Op::LoadFalse { dst: acc.dst() }, span);
                    early_exit = Some(l.emit_jump(Op::Jump { target: Target(0) }, span));
                    l.patch_here(skip);
                }
                "reduce" | "reduceRight" => l.emit(
                    Op::Move {
                        dst: acc.dst(),
                        src: value.src(),
                    },
                    span,
                ),
                _ => {} // forEach
            }
            l.step_index(i, one, backwards, span);
            l.emit(
                Op::Jump {
                    target: Target(start),
                },
                span,
            );
            l.patch_here(exit);
            if let Some(j) = early_exit {
                l.patch_here(j);
            }
            l.emit(
                Op::Move {
                    dst: dst.dst(),
                    src: acc.src(),
                },
                span,
            );
            Ok(true)
        })
    }

    /// `i = i + 1`, or `i = i - 1` when walking backwards.
    fn step_index(&mut self, i: Reg, one: Reg, backwards: bool, span: Span) {
        let (dst, a, b) = (i.dst(), i.src(), one.src());
        let op = if backwards {
            Op::Sub { dst, a, b }
        } else {
            Op::Add { dst, a, b }
        };
        self.emit(op, span);
    }

    pub(super) fn push(&mut self, arr: Reg, val: Reg, span: Span) {
        // `.push(arr, val)` needs the two in consecutive registers
        // (no register left: nothing is emitted)
        let _ = self.with_temps(|l| {
            let a = l.alloc(span)?;
            let b = l.alloc(span)?;
            l.emit(
                Op::Move {
                    dst: a.dst(),
                    src: arr.src(),
                },
                span,
            );
            l.emit(
                Op::Move {
                    dst: b.dst(),
                    src: val.src(),
                },
                span,
            );
            l.emit(
                Op::CallNative {
                    dst: a.dst(),
                    native: Native(NativeId::Push.to_u16()),
                    base: a.base(),
                    argc: Count(2),
                },
                span,
            );
            Ok(())
        });
    }

    /// Lowers the callback's body into `value`, with its parameters bound to `sources`.
    pub(super) fn callback_body(
        &mut self,
        cb: &ArrowFunctionExpression,
        sources: &[Reg],
        value: Reg,
        par: bool,
    ) -> R<()> {
        self.callback_body_rest(cb, sources, None, value, par)
    }

    /// [`Self::callback_body`], with a rest parameter bound to `rest` when there is one.
    pub(super) fn callback_body_rest(
        &mut self,
        cb: &ArrowFunctionExpression,
        sources: &[Reg],
        rest: Option<Reg>,
        value: Reg,
        par: bool,
    ) -> R<()> {
        self.in_scope(|l| {
            let floor = l.bufs.nscopes - 1;
            for (k, p) in cb.params.items.iter().enumerate() {
                if p.initializer.is_some() {
                    return fail(p.span, "default values for callback parameters are not supported; use ?? inside the body: x => (x ?? 0) + 1");
                }
                let src = sources.get(k).copied();
                match &p.pattern {
                    BindingPattern::BindingIdentifier(b) => {
                        let probe = Probe::new(b.name.as_str());
                        let reg = l.declare(probe, b.span)?;
                        match src {
                            Some(s) => l.emit(
                                Op::Move {
                                    dst: reg.dst(),
                                    src: s.src(),
                                },
                                b.span,
                            ),
                            None => l.emit(Op::LoadUndef { dst: reg.dst() }, b.span),
                        }
                        l.bind(probe, reg, false);
                    }
                    pattern => {
                        // object and array patterns, defaults and rest, as in `let`
                        let Some(s) = src else {
                            return fail(
                                p.span,
                                "this callback parameter receives nothing to destructure; name it instead: (acc, x, i) => …",
                            );
                        };
                        let mut names = Vec::new();
                        Self::pattern_names(pattern, &mut names)?;
                        let mut regs: Vec<(String, Reg)> = Vec::with_capacity(names.len());
                        for (name, nspan) in names {
                            let reg = l.declare(Probe::new(name), nspan)?;
                            regs.push((name.to_string(), reg));
                        }
                        l.destructure(pattern, s, &regs)?;
                        for (name, reg) in regs {
                            l.bind(Probe::new(&name), reg, false);
                        }
                    }
                }
            }
            if let (Some(r), Some(src)) = (&cb.params.rest, rest) {
                let BindingPattern::BindingIdentifier(b) = &r.rest.argument else {
                    return fail(r.span, "a rest parameter needs a name: write (match, ...rest) => …");
                };
                let probe = Probe::new(b.name.as_str());
                let reg = l.declare(probe, b.span)?;
                l.emit(
                    Op::Move {
                        dst: reg.dst(),
                        src: src.src(),
                    },
                    b.span,
                );
                l.bind(probe, reg, false);
            }
            // `break`/`continue` inside the body cannot reach loops outside it
            let outer_loops = std::mem::take(&mut l.loops);
            let r = match cb.body.as_expression() {
                Some(e) if par => l.parallel_item(e),
                Some(e) => l.expr_to(e, value),
                _ => {
                    let body = cb.body.as_function_body();
                    l.emit(Op::LoadUndef { dst: value.dst() }, cb.span);
                    l.callbacks.push(CallbackCtx {
                        result: value,
                        exits: Vec::new(),
                        try_depth: l.try_depth,
                        scope_floor: floor,
                        parallel: par,
                    });
                    let r = match body {
                        Some(b) => l.block(&b.statements, false, b.span),
                        None => Ok(()),
                    };
                    if par && r.is_ok() {
                        // falling off the end: the item is undefined
                        l.emit(Op::ParValue { src: value.src() }, cb.span);
                    }
                    if let Some(ctx) = l.callbacks.pop() {
                        for j in ctx.exits {
                            l.patch_here(j);
                        }
                    }
                    r
                }
            };
            l.loops = outer_loops;
            r
        })
    }

    /// `return e` inside a block-bodied callback: the callback's value.
    pub(super) fn callback_return(&mut self, arg: Option<&Expression>, span: Span) -> R<()> {
        let Some((result, depth, par)) = self
            .callbacks
            .last()
            .map(|c| (c.result, c.try_depth, c.parallel))
        else {
            return Ok(());
        };
        match arg {
            Some(e) if par => self.parallel_item(e)?,
            Some(e) => self.expr_to(e, result)?,
            None => self.emit(Op::LoadUndef { dst: result.dst() }, span),
        }
        if par && arg.is_none() {
            self.emit(Op::ParValue { src: result.src() }, span);
        }
        for _ in depth..self.try_depth {
            self.emit(Op::TryExit {}, span);
        }
        let j = self.emit_jump(Op::Jump { target: Target(0) }, span);
        if let Some(c) = self.callbacks.last_mut() {
            c.exits.push(j);
        }
        Ok(())
    }

    /// Refuses an assignment from inside a callback to a variable declared outside it.
    pub(super) fn check_callback_write(&self, name: &str, span: Span) -> R<()> {
        let Some(floor) = self.callbacks.last().map(|c| c.scope_floor) else {
            return Ok(());
        };
        let names = &self.bufs.names;
        let probe = Probe::new(name);
        let open = self.bufs.open_scopes();
        let inner = open[floor.min(open.len())..].iter().any(|sc| {
            sc.vars.iter().any(|v| names.is(v.name, probe))
                || sc.pending.iter().any(|&p| names.is(p, probe))
        });
        if inner {
            return Ok(());
        }
        fail(
            span,
            format!(
                "a callback cannot assign to '{name}', which is declared outside it (callbacks see outer variables read-only); compute the value with map/filter/reduce and assign the result outside, e.g. {name} = xs.reduce((acc, x) => acc + x, {name}), or walk the items with while, where assignments are allowed: let i = 0 / while (i < xs.length) {{ const x = xs[i]; …; i++ }}"
            ),
        )
    }
}

impl Lowerer<'_> {
    /// `xs.sort((a, b) => …)` / `xs.toSorted(…)`: a stable bottom-up merge sort emitted inline;
    /// the comparator runs as inline code for each comparison (n·log n of them, each paying
    /// fuel). `sort` writes the result back into the array (through `splice`) and returns it.
    fn sort_with_comparator(
        &mut self,
        obj: &Expression,
        m: &str,
        optional: bool,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<()> {
        let Some(Expression::ArrowFunctionExpression(cb)) =
            args.first().map(|a| a.without_parentheses())
        else {
            return fail(
                span,
                format!("'{m}' takes a comparator written as an arrow function, e.g. {}.{m}((a, b) => a - b)", super::hints::quote_or(obj, "items")),
            );
        };
        if args.len() > 1 {
            return fail(
                span,
                format!(
                    "'{m}' takes 1 argument, got {}; pass only the comparator: (a, b) => a - b",
                    args.len()
                ),
            );
        }
        if cb.r#async || cb.params.rest.is_some() {
            return fail(
                cb.span,
                "the comparator must be a plain arrow function: write (a, b) => a - b",
            );
        }
        let Some(splice) = native(".splice") else {
            return fail(span, "sorting with a comparator needs .splice (an internal refusal); write items.toSorted((a, b) => a - b)");
        };
        self.with_temps(|l| {
            let recv = l.alloc(span)?;
            l.expr_to(obj, recv)?;
            if optional {
                l.chain_jump(recv, span);
            }
            let n = l.alloc(span)?;
            let name = l.str_const(m, span)?;
            l.emit(
                Op::ArrayLen {
                    dst: n.dst(),
                    arr: recv.src(),
                    method: name.key(),
                },
                span,
            );
            let mut r = [Reg(0); 12];
            for slot in r.iter_mut() {
                *slot = l.alloc(span)?;
            }
            let [a, b, width, lo, mid, hi, i, j, x, y, c, v] = r;
            let zero = l.num_reg(0.0, span)?;
            let one = l.num_reg(1.0, span)?;
            // a = [...recv]
            l.emit(
                Op::NewArray {
                    dst: a.dst(),
                    base: Base(0),
                    count: Count(0),
                },
                span,
            );
            l.emit(
                Op::ArrayExtend {
                    arr: a.src(),
                    src: recv.src(),
                },
                span,
            );
            l.emit(
                Op::Move {
                    dst: width.dst(),
                    src: one.src(),
                },
                span,
            );
            // while (width < n)
            let outer = l.here();
            let outer_exit = l.emit_test(
                Op::Lt {
                    dst: c.dst(),
                    a: width.src(),
                    b: n.src(),
                },
                false,
                span,
            );
            l.emit(
                Op::NewArray {
                    dst: b.dst(),
                    base: Base(0),
                    count: Count(0),
                },
                span,
            );
            l.emit(
                Op::Move {
                    dst: lo.dst(),
                    src: zero.src(),
                },
                span,
            );
            // while (lo < n): merge the runs [lo, mid) and [mid, hi)
            let runs = l.here();
            let runs_exit = l.emit_test(
                Op::Lt {
                    dst: c.dst(),
                    a: lo.src(),
                    b: n.src(),
                },
                false,
                span,
            );
            for (to, from) in [(mid, lo), (hi, mid)] {
                l.emit(
                    Op::Add {
                        dst: to.dst(),
                        a: from.src(),
                        b: width.src(),
                    },
                    span,
                );
                let ok = l.emit_test(
                    Op::Gt {
                        dst: c.dst(),
                        a: to.src(),
                        b: n.src(),
                    },
                    false,
                    span,
                );
                l.emit(
                    Op::Move {
                        dst: to.dst(),
                        src: n.src(),
                    },
                    span,
                );
                l.patch_here(ok);
            }
            l.emit(
                Op::Move {
                    dst: i.dst(),
                    src: lo.src(),
                },
                span,
            );
            l.emit(
                Op::Move {
                    dst: j.dst(),
                    src: mid.src(),
                },
                span,
            );
            let merge = l.here();
            let m_exit1 = l.emit_test(
                Op::Lt {
                    dst: c.dst(),
                    a: i.src(),
                    b: mid.src(),
                },
                false,
                span,
            );
            let m_exit2 = l.emit_test(
                Op::Lt {
                    dst: c.dst(),
                    a: j.src(),
                    b: hi.src(),
                },
                false,
                span,
            );
            l.emit(
                Op::GetIndex {
                    dst: x.dst(),
                    obj: a.src(),
                    key: i.src(),
                },
                span,
            );
            l.emit(
                Op::GetIndex {
                    dst: y.dst(),
                    obj: a.src(),
                    key: j.src(),
                },
                span,
            );
            l.callback_body(cb, &[x, y], v, false)?;
            // y goes first only when cmp(x, y) > 0: stable, and NaN or undefined count as 0
            let take_x = l.emit_test(
                Op::Gt {
                    dst: c.dst(),
                    a: v.src(),
                    b: zero.src(),
                },
                false,
                span,
            );
            l.push(b, y, span);
            l.emit(
                Op::Add {
                    dst: j.dst(),
                    a: j.src(),
                    b: one.src(),
                },
                span,
            );
            l.emit(
                Op::Jump {
                    target: Target(merge),
                },
                span,
            );
            l.patch_here(take_x);
            l.push(b, x, span);
            l.emit(
                Op::Add {
                    dst: i.dst(),
                    a: i.src(),
                    b: one.src(),
                },
                span,
            );
            l.emit(
                Op::Jump {
                    target: Target(merge),
                },
                span,
            );
            l.patch_here(m_exit1);
            l.patch_here(m_exit2);
            for (k, end) in [(i, mid), (j, hi)] {
                let top = l.here();
                let exit = l.emit_test(
                    Op::Lt {
                        dst: c.dst(),
                        a: k.src(),
                        b: end.src(),
                    },
                    false,
                    span,
                );
                l.emit(
                    Op::GetIndex {
                        dst: x.dst(),
                        obj: a.src(),
                        key: k.src(),
                    },
                    span,
                );
                l.push(b, x, span);
                l.emit(
                    Op::Add {
                        dst: k.dst(),
                        a: k.src(),
                        b: one.src(),
                    },
                    span,
                );
                l.emit(
                    Op::Jump {
                        target: Target(top),
                    },
                    span,
                );
                l.patch_here(exit);
            }
            l.emit(
                Op::Move {
                    dst: lo.dst(),
                    src: hi.src(),
                },
                span,
            );
            l.emit(
                Op::Jump {
                    target: Target(runs),
                },
                span,
            );
            l.patch_here(runs_exit);
            l.emit(
                Op::Move {
                    dst: a.dst(),
                    src: b.src(),
                },
                span,
            );
            l.emit(
                Op::Add {
                    dst: width.dst(),
                    a: width.src(),
                    b: width.src(),
                },
                span,
            );
            l.emit(
                Op::Jump {
                    target: Target(outer),
                },
                span,
            );
            l.patch_here(outer_exit);
            if m == "toSorted" {
                l.emit(
                    Op::Move {
                        dst: dst.dst(),
                        src: a.src(),
                    },
                    span,
                );
            } else {
                // recv.splice(0, n, ...a) writes the order back in place; the array is the result
                let args = l.alloc(span)?;
                let base = l.alloc(span)?;
                let b0 = l.alloc(span)?;
                let b1 = l.alloc(span)?;
                l.emit(
                    Op::Move {
                        dst: base.dst(),
                        src: recv.src(),
                    },
                    span,
                );
                l.emit(
                    Op::Move {
                        dst: b0.dst(),
                        src: zero.src(),
                    },
                    span,
                );
                l.emit(
                    Op::Move {
                        dst: b1.dst(),
                        src: n.src(),
                    },
                    span,
                );
                l.emit(
                    Op::NewArray {
                        dst: args.dst(),
                        base: base.base(),
                        count: Count(3),
                    },
                    span,
                );
                l.emit(
                    Op::ArrayExtend {
                        arr: args.src(),
                        src: a.src(),
                    },
                    span,
                );
                l.emit(
                    Op::CallNativeArray {
                        dst: c.dst(),
                        native: Native(splice.to_u16()),
                        args: args.src(),
                    },
                    span,
                );
                l.emit(
                    Op::Move {
                        dst: dst.dst(),
                        src: recv.src(),
                    },
                    span,
                );
            }
            Ok(())
        })
    }
}
