//! Statements: blocks, declarations, control flow, assignment.

use super::*;

impl<'o> Lowerer<'o> {
    pub(super) fn block(&mut self, stmts: &[Statement], top: bool, _span: Span) -> R<()> {
        self.in_block_scope(stmts, top, |l| stmts.iter().try_for_each(|s| l.stmt(s)))
    }

    /// Lowers statement `s`, one level deeper. (Its span is found once, here, and handed on:
    /// each `span()` is a call into oxc.)
    pub(super) fn stmt(&mut self, s: &Statement) -> R<()> {
        let span = s.span();
        self.nested(span, |l| l.stmt_inner(s, span))
    }

    /// [`Self::stmt`] of `s`, whose span is `span`.
    pub(super) fn stmt_inner(&mut self, s: &Statement, span: Span) -> R<()> {
        match s {
            Statement::EmptyStatement(_) => Ok(()),
            Statement::BlockStatement(b) => self.block(&b.body, false, b.span),
            Statement::ExpressionStatement(e) => {
                self.with_temps(|l| l.expr_stmt(&e.expression))
            }
            Statement::VariableDeclaration(d) => self.var_decl(d),
            Statement::IfStatement(i) => {
                let jf = self.cond_jump(&i.test, false)?;
                self.sub_stmt(&i.consequent)?;
                if let Some(alt) = &i.alternate {
                    let je = self.emit_jump(Op::Jump { target: Target(0) }, alt.span());
                    self.patch_all_here(&jf);
                    self.sub_stmt(alt)?;
                    self.patch_here(je);
                } else {
                    self.patch_all_here(&jf);
                }
                Ok(())
            }
            Statement::WhileStatement(w) => {
                // The test runs at the top once, then at the bottom of every iteration (a copy
                // of its instructions), so that an iteration is one block: `body; test;
                // JumpIfTrue body`. A test too long or with jumps leaving it is not copied: the
                // bottom then jumps back to it.
                //
                // A test of `&&`, `||` and `!` is lowered as branches (`cond_jump`) and lowered
                // again at the bottom, branching back to the body, when it is as short.
                let start = self.here();
                let logical = is_logical(&w.test);
                // (the test's temporaries are free in the body: the copy at the bottom remakes `c`)
                let (jf, c, test_end, cmp) = self.with_temps(|l| {
                    let mark = l.next_temp();
                    Ok(if logical {
                        (l.cond_jump(&w.test, false)?, Reg(0), 0, None)
                    } else {
                        let c = l.expr(&w.test)?;
                        let test_end = l.here();
                        let (jf, cmp) = l.emit_branch(c, mark, start, false, 0, w.test.span());
                        (one_jump(jf), c, test_end, cmp)
                    })
                })?;
                let test_len = self.here() - start;
                // (a fused test's comparison is not copied: it is fused again at the bottom)
                let (copied_end, cmp_span) = match cmp {
                    Some(_) => (test_end - 1, self.bufs.code[jf[0]].1),
                    None => (test_end, 0),
                };
                let body = self.here();
                self.loops.push(LoopCtx { breaks: Vec::new(), continues: Vec::new(), try_depth: self.try_depth });
                let r = self.sub_stmt(&w.body);
                let ctx = self.loops.pop();
                r?;
                let bottom = self.here();
                let to = if logical && test_len as usize <= MAX_COPIED_TEST {
                    for j in self.cond_jump(&w.test, true)? {
                        self.patch(j, body);
                    }
                    bottom
                } else if !logical && self.copy_test(start, copied_end) {
                    match cmp.and_then(|cmp| cmp.fused_branch(c.0, true, body)) {
                        Some(fused) => {
                            self.bufs.code.push((fused, cmp_span));
                        }
                        None => self.emit(Op::JumpIfTrue { cond: c.src(), target: Target(body) }, w.test.span()),
                    }
                    bottom
                } else {
                    self.emit(Op::Jump { target: Target(start) }, w.span);
                    start
                };
                self.patch_all_here(&jf);
                if let Some(ctx) = ctx {
                    for b in ctx.breaks {
                        self.patch_here(b);
                    }
                    for j in ctx.continues {
                        self.patch(j, to);
                    }
                }
                Ok(())
            }
            Statement::BreakStatement(b) => {
                if b.label.is_some() {
                    return fail(span, "labels are not supported in AJS; use a flag variable with `break`: let done = false / while (!done && …) { … done = true }");
                }
                let Some(depth) = self.loops.last().map(|l| l.try_depth) else {
                    return fail(span, "`break` outside a `while` loop; to stop early in a callback use find, some or every: items.some(x => x > 1)");
                };
                for _ in depth..self.try_depth {
                    self.emit(Op::TryExit {}, span);
                }
                let j = self.emit_jump(Op::Jump { target: Target(0) }, span);
                if let Some(l) = self.loops.last_mut() {
                    l.breaks.push(j);
                }
                Ok(())
            }
            Statement::ContinueStatement(c) => {
                if c.label.is_some() {
                    return fail(span, "labels are not supported in AJS; use a flag variable with `continue`: let skip = false / … if (skip) { continue }");
                }
                let Some(depth) = self.loops.last().map(|l| l.try_depth) else {
                    return fail(span, "`continue` outside a `while` loop; in a callback write `return` to skip to the next item");
                };
                for _ in depth..self.try_depth {
                    self.emit(Op::TryExit {}, span);
                }
                let j = self.emit_jump(Op::Jump { target: Target(0) }, span);
                if let Some(l) = self.loops.last_mut() {
                    l.continues.push(j);
                }
                Ok(())
            }
            Statement::ReturnStatement(r) if !self.callbacks.is_empty() => {
                self.with_temps(|l| l.callback_return(r.argument.as_ref(), span))
            }
            Statement::ReturnStatement(r) => {
                self.with_temps(|l| {
                    let reg = match &r.argument {
                        Some(e) => l.expr(e)?,
                        None => l.special(SpecialKey::Undef, span)?,
                    };
                    l.emit(Op::Return { src: reg.src() }, span);
                    Ok(())
                })
            }
            Statement::TryStatement(t) => self.try_stmt(t),
            Statement::ForStatement(f) => fail(span, hints::for_msg(f)),
            Statement::ForInStatement(f) => fail(span, hints::for_in_msg(f)),
            Statement::ForOfStatement(f) => fail(span, hints::for_of_msg(f)),
            Statement::SwitchStatement(s) => fail(span, hints::switch_msg(s)),
            Statement::DoWhileStatement(_) => fail(
                span,
                "Unsupported statement type: DoWhileStatement. AJS has no `do...while`. Use `while`, running the body check first: let go = true / while (go) { ... go = condition }",
            ),
            Statement::ThrowStatement(t) => fail(span, hints::throw_msg(&t.argument)),
            Statement::LabeledStatement(_) => {
                fail(span, "Unsupported statement type: LabeledStatement. AJS has no labels; use a flag variable with `break`: let done = false / while (!done && …) { … done = true }")
            }
            Statement::DebuggerStatement(_) => fail(span, "Unsupported statement type: DebuggerStatement. Remove the `debugger` statement"),
            Statement::WithStatement(_) => fail(span, "Unsupported statement type: WithStatement. AJS has no `with`; write the object's name before each property: o.a, o.b"),
            Statement::FunctionDeclaration(f) => {
                if f.generator {
                    return fail(span, "generators are not supported in AJS; build the values in an array (out.push(v)) and return it");
                }
                if f.r#async {
                    return fail(span, "async functions are not supported in AJS: atom calls look synchronous, write `let r = httpFetch({...})`");
                }
                fail(span, hints::nested_function_msg(f.id.as_ref().map_or("helper", |id| id.name.as_str())))
            }
            Statement::ClassDeclaration(_) => {
                fail(span, "Unsupported statement type: ClassDeclaration. AJS has no classes: write a top-level helper that returns an object literal, e.g. function makeItem(name) { return { name } }")
            }
            Statement::ImportDeclaration(_) => fail(span, "Imports are not supported: remove the import and call the atoms (httpFetch, llmPredict, …) and builtins by name"),
            Statement::ExportAllDeclaration(_) | Statement::ExportDefaultDeclaration(_) | Statement::ExportNamedDeclaration(_) => {
                fail(span, "Exports are not supported: remove `export` (the last top-level function is the entry)")
            }
            _ => fail(span, "unsupported statement; write let/const, if, while, try/catch, return or an expression statement (x = f(y))"),
        }
    }

    /// A statement in a position that is not a block of its own (if/while bodies).
    pub(super) fn sub_stmt(&mut self, s: &Statement) -> R<()> {
        self.in_scope(|l| l.stmt(s))
    }

    pub(super) fn var_decl(&mut self, d: &VariableDeclaration) -> R<()> {
        let is_const = match d.kind {
            VariableDeclarationKind::Let => false,
            VariableDeclarationKind::Const => true,
            VariableDeclarationKind::Var => {
                return fail(
                    d.span,
                    "AJS has no `var`; use `let` (or `const` for a value that never changes)",
                )
            }
            _ => {
                return fail(
                    d.span,
                    "`using` declarations are not supported; use `let` or `const`",
                )
            }
        };
        for decl in &d.declarations {
            let b = match &decl.id {
                BindingPattern::BindingIdentifier(b) => b,
                pattern => {
                    let Some(init) = &decl.init else {
                        return fail(
                            decl.span,
                            "a destructuring declaration needs a value: write let { a } = obj",
                        );
                    };
                    self.destructuring_decl(pattern, init, is_const)?;
                    continue;
                }
            };
            let name = b.name.as_str();
            match decl.init.as_ref().map(|e| e.without_parentheses()) {
                Some(Expression::ArrowFunctionExpression(f)) => {
                    return fail(f.span, hints::function_value_msg(name, &f.params))
                }
                Some(Expression::FunctionExpression(f)) if !f.generator => {
                    return fail(f.span, hints::function_value_msg(name, &f.params))
                }
                _ => {}
            }
            let probe = Probe::new(name);
            let reg = self.declare(probe, b.span)?;
            self.with_temps(|l| {
                match &decl.init {
                    Some(init) => l.expr_to(init, reg)?,
                    None if is_const => {
                        return fail(
                            decl.span,
                            format!("Missing initializer in const declaration '{name}'; write const {name} = value, or let {name}"),
                        )
                    }
                    None => l.emit(Op::LoadUndef { dst: reg.dst() }, decl.span),
                }
                Ok(())
            })?;
            self.bind(probe, reg, is_const);
        }
        Ok(())
    }

    pub(super) fn try_stmt(&mut self, t: &TryStatement) -> R<()> {
        if let Some(f) = &t.finalizer {
            return fail(
                f.span,
                "`finally` is not supported in AJS; put the cleanup code after the try/catch: try { … } catch (e) { … } then cleanup()",
            );
        }
        let Some(handler) = &t.handler else {
            return fail(
                t.span,
                "`try` needs a `catch` block in AJS: add catch (e) { … } (e is the message string)",
            );
        };
        let enter = self.emit_jump(Op::TryEnter { handler: Target(0) }, t.span);
        self.try_depth += 1;
        let r = self.block(&t.block.body, false, t.block.span);
        self.try_depth -= 1;
        r?;
        self.emit(Op::TryExit {}, t.block.span);
        let jend = self.emit_jump(Op::Jump { target: Target(0) }, t.block.span);
        self.patch_here(enter);
        // the catch body scope holds the catch parameter
        self.in_block_scope(&handler.body.body, false, |l| {
            match &handler.param {
                Some(p) => {
                    let BindingPattern::BindingIdentifier(b) = &p.pattern else {
                        return fail(p.span, "destructuring a caught error is not supported; the error is its message string: write catch (e) { … e … }");
                    };
                    let name = b.name.as_str();
                    let probe = Probe::new(name);
                    let reg = l.declare(probe, b.span)?;
                    l.emit(Op::Catch { dst: reg.dst() }, handler.span);
                    l.bind(probe, reg, false);
                    l.catch_regs.push(reg);
                }
                None => {
                    let reg = l.alloc(handler.span)?;
                    l.emit(Op::Catch { dst: reg.dst() }, handler.span);
                }
            }
            let r = handler.body.body.iter().try_for_each(|s| l.stmt(s));
            if handler.param.is_some() {
                l.catch_regs.pop();
            }
            r
        })?;
        self.patch_here(jend);
        Ok(())
    }

    pub(super) fn expr_stmt(&mut self, e: &Expression) -> R<()> {
        match e.without_parentheses() {
            Expression::AssignmentExpression(a) => self.assign(a),
            Expression::UpdateExpression(u) => self.update(u),
            e => {
                self.expr(e)?;
                Ok(())
            }
        }
    }

    /// The register of an assignable variable.
    pub(super) fn assign_target(&mut self, id: &IdentifierReference) -> R<Reg> {
        let name = id.name.as_str();
        self.check_callback_write(name, id.span)?;
        // (the name first: the scopes are searched only for these three)
        if !matches!(name, "undefined" | "NaN" | "Infinity") || !self.is_global(name) {
            match self.resolve(name, id.span) {
                Ok(Resolved::Local { is_const: true, .. }) => {
                    fail(id.span, format!("Assignment to constant variable '{name}'; declare it with let {name} = … to change it"))
                }
                Ok(Resolved::Local { reg, .. } | Resolved::Ext(reg)) => Ok(reg),
                Err(e) if is_builtin_name(name) => {
                    fail_at(e.offset, format!("Cannot assign to builtin '{name}'; use another name, e.g. let my{name} = …"))
                }
                Err(e) => Err(e),
            }
        } else {
            fail(
                id.span,
                format!(
                    "Cannot assign to builtin '{name}'; use another name, e.g. let my{name} = …"
                ),
            )
        }
    }

    pub(super) fn simple_target(&mut self, t: &SimpleAssignmentTarget, span: Span) -> R<Reg> {
        match t {
            SimpleAssignmentTarget::AssignmentTargetIdentifier(id) => self.assign_target(id),
            t if t.as_member_expression().is_some() => fail(
                span,
                "AJS has no member assignment (`o.k = v`, `a[i] = v`). Build a new object or array instead: write o = { ...o, k: v }, or use arr.push(v)",
            ),
            _ => fail(span, "unsupported assignment target; assign to a variable: x = …"),
        }
    }

    pub(super) fn assign(&mut self, a: &AssignmentExpression) -> R<()> {
        if let Some(m) = a.left.as_member_expression() {
            let in_callback = !self.callbacks.is_empty();
            return fail(
                a.left.span(),
                hints::member_assign_msg(m, a.operator, &a.right, in_callback),
            );
        }
        let reg = match &a.left {
            AssignmentTarget::ArrayAssignmentTarget(_)
            | AssignmentTarget::ObjectAssignmentTarget(_) => {
                return fail(
                    a.span,
                    "destructuring assignment is not supported; assign each variable on its own (to swap: const t = a / a = b / b = t), or declare new names: const [x, y] = …",
                );
            }
            t => match t.as_simple_assignment_target() {
                Some(st) => self.simple_target(st, a.left.span())?,
                None => {
                    return fail(
                        a.span,
                        "unsupported assignment target; assign to a variable: x = …",
                    )
                }
            },
        };
        let rhs = &a.right;
        if let Expression::AssignmentExpression(_) = rhs.without_parentheses() {
            return fail(rhs.span(), "chained assignment (a = b = 1) is not supported in AJS; assign each variable in its own statement: a = 1 / b = 1");
        }
        let op = a.operator;
        let arith = |dst: Dst, a: Src, b: Src| -> Option<Op> {
            Some(match op {
                AssignmentOperator::Addition => Op::Add { dst, a, b },
                AssignmentOperator::Subtraction => Op::Sub { dst, a, b },
                AssignmentOperator::Multiplication => Op::Mul { dst, a, b },
                AssignmentOperator::Division => Op::Div { dst, a, b },
                AssignmentOperator::Remainder => Op::Mod { dst, a, b },
                AssignmentOperator::Exponential => Op::Pow { dst, a, b },
                _ => return None,
            })
        };
        match op {
            AssignmentOperator::Assign => self.expr_to_var(rhs, reg),
            AssignmentOperator::LogicalAnd
            | AssignmentOperator::LogicalOr
            | AssignmentOperator::LogicalNullish => {
                let j = match op {
                    AssignmentOperator::LogicalAnd => Op::JumpIfFalse {
                        cond: reg.src(),
                        target: Target(0),
                    },
                    AssignmentOperator::LogicalOr => Op::JumpIfTrue {
                        cond: reg.src(),
                        target: Target(0),
                    },
                    _ => Op::JumpIfNotNullish {
                        src: reg.src(),
                        target: Target(0),
                    },
                };
                let j = self.emit_jump(j, a.span);
                self.expr_to_var(rhs, reg)?;
                self.patch_here(j);
                Ok(())
            }
            _ => {
                let Some(_) = arith(Dst(0), Src(0), Src(0)) else {
                    let target = match &a.left {
                        AssignmentTarget::AssignmentTargetIdentifier(id) => id.name.as_str(),
                        _ => "x",
                    };
                    return fail(a.span, hints::compound_op_msg(op.as_str(), target, rhs));
                };
                self.with_temps(|l| {
                    let r = l.expr(rhs)?;
                    if let Some(o) = arith(reg.dst(), reg.src(), r.src()) {
                        l.emit(o, a.span);
                    }
                    Ok(())
                })
            }
        }
    }

    /// Evaluates `e` into a variable's register, through a temporary when `e` writes its
    /// destination before it has read everything (logical, conditional, literals, chains).
    pub(super) fn expr_to_var(&mut self, e: &Expression, reg: Reg) -> R<()> {
        let direct = matches!(
            e.without_parentheses(),
            Expression::BinaryExpression(_)
                | Expression::UnaryExpression(_)
                | Expression::Identifier(_)
                | Expression::NumericLiteral(_)
                | Expression::StringLiteral(_)
                | Expression::BooleanLiteral(_)
                | Expression::NullLiteral(_)
                | Expression::TemplateLiteral(_)
                | Expression::StaticMemberExpression(_)
                | Expression::ComputedMemberExpression(_)
                | Expression::CallExpression(_)
        );
        self.with_temps(|l| {
            if direct {
                l.expr_to(e, reg)?;
            } else {
                let t = l.alloc(e.span())?;
                l.expr_to(e, t)?;
                l.emit(
                    Op::Move {
                        dst: reg.dst(),
                        src: t.src(),
                    },
                    e.span(),
                );
            }
            Ok(())
        })
    }

    pub(super) fn update(&mut self, u: &UpdateExpression) -> R<()> {
        let reg = self.simple_target(&u.argument, u.span)?;
        // x - (-1) converts to a number like ++ does (x + 1 would concatenate strings)
        let k = self.num_reg(
            if u.operator == UpdateOperator::Increment {
                -1.0
            } else {
                1.0
            },
            u.span,
        )?;
        self.emit(
            Op::Sub {
                dst: reg.dst(),
                a: reg.src(),
                b: k.src(),
            },
            u.span,
        );
        Ok(())
    }
}
