//! Expressions: values into registers, literals, templates, arrays and objects.

use super::*;

impl<'o> Lowerer<'o> {
    // ---------------------------------------------------------------- expressions

    /// A register holding the value of `e`: a variable's, a constant's, or a new temporary (the
    /// caller resets `top` when done).
    ///
    /// (The span is found once, here, and handed on: each `span()` is a call into oxc.)
    pub(super) fn expr(&mut self, e: &Expression) -> R<Reg> {
        // (an identifier, the usual operand, is read here, without its span (a call into oxc)
        // or the depth's update: it nests nothing, and `enter` would refuse it only at the
        // depth limit, where it goes the general way. Not done in `expr_to_at`: it cost more
        // there.)
        if let Expression::Identifier(id) = e {
            if self.depth < MAX_NESTING {
                return self.read_ident(id);
            }
        }
        self.expr_general(e)
    }

    /// [`Self::expr`] of any expression. (Inline, not out of line with `expr` a small function
    /// of its own: `expr` runs per operand.)
    #[inline]
    pub(super) fn expr_general(&mut self, e: &Expression) -> R<Reg> {
        let span = e.span();
        self.nested(span, |l| l.expr_inner(e, span))
    }

    /// [`Self::expr`] of `e`, whose span is `span`.
    pub(super) fn expr_inner(&mut self, e: &Expression, span: Span) -> R<Reg> {
        match e {
            Expression::Identifier(id) => return self.read_ident(id),
            Expression::NumericLiteral(n) => {
                strict_number(n)?;
                return self.num_reg(n.value, n.span);
            }
            Expression::StringLiteral(s) => return self.string_lit_reg(s),
            Expression::BooleanLiteral(b) => {
                return self.special(
                    if b.value {
                        SpecialKey::True
                    } else {
                        SpecialKey::False
                    },
                    b.span,
                )
            }
            Expression::NullLiteral(n) => return self.special(SpecialKey::Null, n.span),
            Expression::ParenthesizedExpression(p) => return self.expr(&p.expression),
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::UnaryNegation => {
                if let Expression::NumericLiteral(n) = u.argument.without_parentheses() {
                    strict_number(n)?;
                    return self.num_reg(-n.value, u.span);
                }
            }
            Expression::StaticMemberExpression(m) => {
                if let Some(v) = self.math_constant(&m.object, m.property.name.as_str(), m.span)? {
                    return self.num_reg(v, m.span);
                }
            }
            _ => {}
        }
        let t = self.alloc(span)?;
        self.expr_to_at(e, t, span)?;
        Ok(t)
    }

    /// The constant of a string literal.
    pub(super) fn str_lit_const(&mut self, s: &StringLiteral, span: Span) -> R<ConstIdx> {
        strict_string(s)?;
        if s.lone_surrogates {
            self.str_const_units(string_units(s), span)
        } else {
            self.str_const(s.value.as_str(), span)
        }
    }

    pub(super) fn string_lit_reg(&mut self, s: &StringLiteral) -> R<Reg> {
        let k = self.str_lit_const(s, s.span)?;
        self.special(SpecialKey::Const(k), s.span)
    }

    /// Evaluates `e` into `dst` (which the caller owns; it may be written before `e` is done).
    pub(super) fn expr_to(&mut self, e: &Expression, dst: Reg) -> R<()> {
        self.expr_to_at(e, dst, e.span())
    }

    /// [`Self::expr_to`] of `e`, whose span (found once by the caller and handed on: each
    /// `span()` is a call into oxc) is `span`.
    pub(super) fn expr_to_at(&mut self, e: &Expression, dst: Reg, span: Span) -> R<()> {
        self.nested(span, |l| l.expr_to_inner(e, dst, span))
    }

    /// [`Self::expr_to`] of `e`, whose span is `span`, one level deeper already.
    pub(super) fn expr_to_inner(&mut self, e: &Expression, dst: Reg, span: Span) -> R<()> {
        let d = dst.dst();
        match e {
            Expression::NumericLiteral(n) => {
                strict_number(n)?;
                let k = self.num_const(n.value, span)?;
                self.emit(Op::LoadConst { dst: d, k: k.constant() }, span);
            }
            Expression::StringLiteral(s) => {
                let k = self.str_lit_const(s, span)?;
                self.emit(Op::LoadConst { dst: d, k: k.constant() }, span);
            }
            Expression::BooleanLiteral(b) => {
                self.emit(if b.value { Op::LoadTrue { dst: d } } else { Op::LoadFalse { dst: d } }, span)
            }
            Expression::NullLiteral(_) => self.emit(Op::LoadNull { dst: d }, span),
            Expression::Identifier(id) => {
                let r = self.read_ident(id)?;
                if r != dst {
                    self.emit(Op::Move { dst: d, src: r.src() }, span);
                }
            }
            Expression::ParenthesizedExpression(p) => self.expr_to(&p.expression, dst)?,
            Expression::BinaryExpression(b) => {
                if b.operator.is_relational() || b.operator.is_bitwise() {
                    return fail(span, hints::binary_op_msg(b.operator.as_str(), Some(&b.left), Some(&b.right)));
                }
                if let Some(spine) = long_left_spine(b) {
                    return self.binary_chain(&spine, dst);
                }
                self.with_temps(|l| {
                    let a = l.expr(&b.left)?;
                    let c = l.expr(&b.right)?;
                    let op = binary_op(b.operator, d, a.src(), c.src(), span)?;
                    l.emit(op, span);
                    Ok(())
                })?;
            }
            Expression::PrivateInExpression(_) => return fail(span, hints::binary_op_msg("in", None, None)),
            Expression::LogicalExpression(l) => {
                self.expr_to(&l.left, dst)?;
                let j = match l.operator {
                    LogicalOperator::And => Op::JumpIfFalse { cond: dst.src(), target: Target(0) },
                    LogicalOperator::Or => Op::JumpIfTrue { cond: dst.src(), target: Target(0) },
                    LogicalOperator::Coalesce => Op::JumpIfNotNullish { src: dst.src(), target: Target(0) },
                };
                let j = self.emit_jump(j, span);
                self.expr_to(&l.right, dst)?;
                self.patch_here(j);
            }
            Expression::ConditionalExpression(c) => {
                let jf = self.cond_jump(&c.test, false)?;
                self.expr_to(&c.consequent, dst)?;
                let je = self.emit_jump(Op::Jump { target: Target(0) }, c.consequent.span());
                self.patch_all_here(&jf);
                self.expr_to(&c.alternate, dst)?;
                self.patch_here(je);
            }
            Expression::UnaryExpression(u) => {
                if u.operator == UnaryOperator::UnaryNegation {
                    if let Expression::NumericLiteral(n) = u.argument.without_parentheses() {
                        strict_number(n)?;
                        let k = self.num_const(-n.value, span)?;
                        self.emit(Op::LoadConst { dst: d, k: k.constant() }, span);
                        return Ok(());
                    }
                }
                self.with_temps(|l| {
                    let op = match u.operator {
                        UnaryOperator::UnaryNegation => Op::Neg { dst: d, src: l.expr(&u.argument)?.src() },
                        UnaryOperator::UnaryPlus => Op::Pos { dst: d, src: l.expr(&u.argument)?.src() },
                        UnaryOperator::LogicalNot => Op::Not { dst: d, src: l.expr(&u.argument)?.src() },
                        UnaryOperator::Typeof => Op::TypeOf { dst: d, src: l.expr(&u.argument)?.src() },
                        other => return fail(span, hints::unary_op_msg(other.as_str(), &u.argument)),
                    };
                    l.emit(op, span);
                    Ok(())
                })?;
            }
            Expression::TemplateLiteral(t) => self.template(t, dst)?,
            Expression::ArrayExpression(a) => self.array(a, dst)?,
            Expression::ObjectExpression(o) => self.object(o, dst)?,
            Expression::StaticMemberExpression(m) => {
                if let Some(v) = self.math_constant(&m.object, m.property.name.as_str(), m.span)? {
                    let k = self.num_const(v, span)?;
                    self.emit(Op::LoadConst { dst: d, k: k.constant() }, span);
                    return Ok(());
                }
                self.catch_member(m);
                self.with_temps(|l| {
                    let o = l.expr(&m.object)?;
                    if m.optional {
                        l.chain_jump(o, span);
                    }
                    let key = l.str_const(m.property.name.as_str(), m.property.span)?;
                    l.emit(Op::GetProp { dst: d, obj: o.src(), key: key.key() }, span);
                    Ok(())
                })?;
            }
            Expression::ComputedMemberExpression(m) => {
                if let Expression::StringLiteral(s) = m.expression.without_parentheses() {
                    if let Some(v) = self.math_constant(&m.object, s.value.as_str(), m.span)? {
                        let k = self.num_const(v, span)?;
                        self.emit(Op::LoadConst { dst: d, k: k.constant() }, span);
                        return Ok(());
                    }
                }
                self.with_temps(|l| {
                    let o = l.expr(&m.object)?;
                    if m.optional {
                        l.chain_jump(o, span);
                    }
                    match m.expression.without_parentheses() {
                        Expression::StringLiteral(s) => {
                            let key = l.str_lit_const(s, s.span)?;
                            l.emit(Op::GetProp { dst: d, obj: o.src(), key: key.key() }, span);
                        }
                        k => {
                            let kr = l.expr(k)?;
                            l.emit(Op::GetIndex { dst: d, obj: o.src(), key: kr.src() }, span);
                        }
                    }
                    Ok(())
                })?;
            }
            Expression::PrivateFieldExpression(_) => return fail(span, "private fields are not supported in AJS; use a plain property: o.name"),
            Expression::CallExpression(c) => self.call(c, dst)?,
            Expression::ChainExpression(c) => {
                let saved = self.chain.replace(Vec::new());
                let r = match &c.expression {
                    ChainElement::CallExpression(call) => self.call(call, dst),
                    ChainElement::TSNonNullExpression(_) => fail(span, "TypeScript syntax is not supported; remove the `!` and write plain JavaScript (x?.y for a value that may be missing)"),
                    other => match other.as_member_expression() {
                        Some(m) => self.expr_to(m.as_expression(), dst),
                        None => fail(span, "unsupported optional chain; write o?.k, o?.[k] or o.m?.()"),
                    },
                };
                let jumps = std::mem::replace(&mut self.chain, saved).unwrap_or_default();
                r?;
                if !jumps.is_empty() {
                    let je = self.emit_jump(Op::Jump { target: Target(0) }, span);
                    for j in jumps {
                        self.patch_here(j);
                    }
                    self.emit(Op::LoadUndef { dst: d }, span);
                    self.patch_here(je);
                }
            }
            Expression::NewExpression(n) => {
                let name = match n.callee.without_parentheses() {
                    Expression::Identifier(id) => Some(id.name.as_str()),
                    Expression::StaticMemberExpression(m) => match m.object.without_parentheses() {
                        Expression::Identifier(id) => Some(id.name.as_str()),
                        _ => None,
                    },
                    _ => None,
                };
                let args: Vec<&Expression> = n.arguments.iter().filter_map(|a| a.as_expression()).collect();
                return fail(span, hints::new_msg(name, &args));
            }
            Expression::ThisExpression(_) => {
                return fail(span, "'this' is not supported in AJS; use the variables and context values directly, or pass the object to a helper as a parameter: function area(shape) { return shape.w * shape.h }")
            }
            Expression::ArrowFunctionExpression(_) => return fail(span, ARROW_MSG),
            Expression::FunctionExpression(f) => {
                if f.generator {
                    return fail(span, "generators are not supported in AJS; build the values in an array (out.push(v)) and return it");
                }
                return fail(span, format!("function expressions are not supported in AJS; {ARROW_MSG}"));
            }
            Expression::ClassExpression(_) => return fail(span, "Classes are not supported. AJS has no classes: write a top-level helper that returns an object literal, e.g. function makeItem(name) { return { name } }"),
            Expression::AwaitExpression(_) => {
                return fail(span, "AJS has no await: atom calls look synchronous, write `let r = httpFetch({...})`")
            }
            Expression::YieldExpression(_) => return fail(span, "generators (yield) are not supported in AJS; build the values in an array (out.push(v)) and return it"),
            Expression::SequenceExpression(_) => {
                return fail(span, "the comma operator (sequence expression) is not supported in AJS; write separate statements: a = 1 / b = 2 on their own lines")
            }
            Expression::TaggedTemplateExpression(_) => {
                return fail(span, "tagged templates are not supported in AJS; use a plain template literal `...${x}...`")
            }
            Expression::RegExpLiteral(r) => self.regex_literal(r, dst)?,
            Expression::BigIntLiteral(_) => return fail(span, "BigInt literals are not supported in AJS; use numbers: 10 instead of 10n, Math.trunc(a / b) for integer division"),
            Expression::AssignmentExpression(_) => {
                return fail(span, "assignment inside an expression is not supported in AJS; write the assignment as its own statement (x = v on its own line), then use x")
            }
            Expression::UpdateExpression(_) => {
                return fail(span, "'++'/'--' are only allowed as statements in AJS (i++ on its own line); inside an expression write i + 1")
            }
            Expression::Super(_) => return fail(span, "'super' is not supported in AJS (there are no classes); call a top-level helper function instead: helper(x)"),
            Expression::ImportExpression(_) | Expression::ImportMeta(_) => {
                return fail(span, "import is not available: call the atoms (httpFetch, llmPredict, …) and builtins by name")
            }
            _ => return fail(span, "unsupported expression; write plain JavaScript values, operators, calls (f(x)) and arrows passed to methods (xs.map(x => x))"),
        }
        Ok(())
    }

    pub(super) fn chain_jump(&mut self, obj: Reg, span: Span) {
        if self.chain.is_some() {
            let j = self.emit_jump(
                Op::JumpIfNullish {
                    src: obj.src(),
                    target: Target(0),
                },
                span,
            );
            if let Some(c) = self.chain.as_mut() {
                c.push(j);
            }
        }
    }

    /// The builtin namespace `e` names, if it is a bare identifier of one not shadowed locally.
    pub(super) fn namespace<'e>(&self, e: &'e Expression) -> Option<&'e str> {
        if let Expression::Identifier(id) = e.without_parentheses() {
            let n = id.name.as_str();
            if is_namespace_name(n) && self.is_global(n) {
                return Some(n);
            }
        }
        None
    }

    /// `Math.<name>` as a number; an error for other namespace members read as values.
    /// (Inline, the test that `obj` may name a namespace: most member reads are of other
    /// objects, not worth a call each.)
    #[inline(always)]
    pub(super) fn math_constant(&self, obj: &Expression, name: &str, span: Span) -> R<Option<f64>> {
        match obj.without_parentheses() {
            Expression::Identifier(id) if may_be_namespace_name(id.name.as_str()) => {
                self.namespace_constant(obj, name, span)
            }
            _ => Ok(None),
        }
    }

    /// [`Self::math_constant`] of an object that may name a namespace.
    #[inline(never)]
    pub(super) fn namespace_constant(
        &self,
        obj: &Expression,
        name: &str,
        span: Span,
    ) -> R<Option<f64>> {
        match self.namespace(obj) {
            None => Ok(None),
            Some("Math") => match MATH_CONSTANTS.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => Ok(Some(*v)),
                None if native_member("Math", name).is_some() => fail(
                    span,
                    format!("Math.{name} is a function: call it, e.g. Math.{name}(x)"),
                ),
                None => fail(span, namespace_member_msg("Math", name)),
            },
            Some("Number") => match NUMBER_CONSTANTS.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => Ok(Some(*v)),
                None => fail(span, namespace_member_msg("Number", name)),
            },
            Some(ns) => fail(span, namespace_member_msg(ns, name)),
        }
    }

    pub(super) fn template(&mut self, t: &TemplateLiteral, dst: Reg) -> R<()> {
        let span = t.span;
        // (a text part is encoded into UTF-16 when its constant is looked up: no copy unless new)
        let mut parts: SmallVec<[Result<&Expression, (&str, Span)>; 8]> = SmallVec::new();
        for (i, q) in t.quasis.iter().enumerate() {
            let Some(cooked) = &q.value.cooked else {
                return fail(
                    q.span,
                    "invalid escape sequence in template literal; write `\\\\` for a backslash",
                );
            };
            if !cooked.as_str().is_empty() {
                parts.push(Err((cooked.as_str(), q.span)));
            }
            if let Some(e) = t.expressions.get(i) {
                parts.push(Ok(e));
            }
        }
        if parts.len() > u8::MAX as usize {
            return fail(span, "template literal has too many parts (at most 255); join the parts with + or build them with an array's join('')");
        }
        if parts.is_empty() {
            let k = self.str_const("", span)?;
            self.emit(
                Op::LoadConst {
                    dst: dst.dst(),
                    k: k.constant(),
                },
                span,
            );
            return Ok(());
        }
        self.with_temps(|l| {
            let base = l.next_temp();
            for _ in 0..parts.len() {
                l.alloc(span)?;
            }
            for (i, p) in parts.into_iter().enumerate() {
                let r = base.plus(i);
                match p {
                    Ok(e) => l.expr_to(e, r)?,
                    Err((text, sp)) => {
                        let k = l.str_const(text, sp)?;
                        l.emit(
                            Op::LoadConst {
                                dst: r.dst(),
                                k: k.constant(),
                            },
                            sp,
                        );
                    }
                }
            }
            let count = l.top - base.0;
            l.emit(
                Op::Concat {
                    dst: dst.dst(),
                    base: base.base(),
                    count: Count(count as u8),
                },
                span,
            );
            Ok(())
        })
    }

    pub(super) fn array(&mut self, a: &ArrayExpression, dst: Reg) -> R<()> {
        let span = a.span;
        if a.elements
            .iter()
            .any(|e| matches!(e, ArrayExpressionElement::SpreadElement(_)))
        {
            return self.array_with_spread(a, dst);
        }
        let mut chunks = a.elements.chunks(u8::MAX as usize).peekable();
        let mut first = true;
        if chunks.peek().is_none() {
            self.emit(
                Op::NewArray {
                    dst: dst.dst(),
                    base: self.next_temp().base(),
                    count: Count(0),
                },
                span,
            );
            return Ok(());
        }
        for chunk in chunks {
            self.with_temps(|l| {
                let base = l.next_temp();
                for _ in 0..chunk.len() {
                    l.alloc(span)?;
                }
                for (i, el) in chunk.iter().enumerate() {
                    let r = base.plus(i);
                    match el {
                    ArrayExpressionElement::Elision(e) => {
                        l.emit(Op::LoadUndef { dst: r.dst() }, e.span)
                    }
                    ArrayExpressionElement::SpreadElement(s) => return fail(
                        s.span,
                        "spread (...) in array literals is not supported here; write a.concat(b) or a.push(...b)",
                    ),
                    el => match el.as_expression() {
                        Some(e) => l.expr_to(e, r)?,
                        None => return fail(span, "unsupported array element; write values, ...spread or holes: [a, ...b, , c]"),
                    },
                }
                }
                let count = Count(chunk.len() as u8);
                if first {
                    l.emit(
                        Op::NewArray {
                            dst: dst.dst(),
                            base: base.base(),
                            count,
                        },
                        span,
                    );
                    first = false;
                } else {
                    l.emit(
                        Op::ArrayAppend {
                            arr: dst.src(),
                            base: base.base(),
                            count,
                        },
                        span,
                    );
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    pub(super) fn object(&mut self, o: &ObjectExpression, dst: Reg) -> R<()> {
        self.emit(Op::NewObject { dst: dst.dst() }, o.span);
        for p in &o.properties {
            let p = match p {
                ObjectPropertyKind::ObjectProperty(p) => p,
                ObjectPropertyKind::SpreadProperty(s) => {
                    self.with_temps(|l| {
                        let v = l.expr(&s.argument)?;
                        l.emit(
                            Op::ObjectAssign {
                                obj: dst.src(),
                                src: v.src(),
                            },
                            s.span,
                        );
                        Ok(())
                    })?;
                    continue;
                }
            };
            if p.kind != PropertyKind::Init {
                return fail(p.span, "getters and setters are not supported in AJS object literals; compute the value when you build the object, e.g. { total: a + b }");
            }
            if p.method {
                return fail(
                    p.span,
                    "methods in object literals are not supported in AJS; use plain values, and write the function as a top-level helper that takes the object: function describe(o) { … }",
                );
            }
            if p.computed {
                let Some(ke) = p.key.as_expression() else {
                    return fail(p.key.span(), "unsupported computed key; write [k]: v with k an expression, e.g. { [name]: 1 }");
                };
                self.with_temps(|l| {
                    let k = l.expr(ke)?;
                    let v = l.expr(&p.value)?;
                    l.emit(
                        Op::InitIndex {
                            obj: dst.src(),
                            key: k.src(),
                            val: v.src(),
                        },
                        p.span,
                    );
                    Ok(())
                })?;
                continue;
            }
            strict_key(&p.key)?;
            // a key written as a name or a plain string: no UTF-16 copy unless it is new
            let plain = match &p.key {
                PropertyKey::StaticIdentifier(id) => Some(id.name.as_str()),
                PropertyKey::StringLiteral(s) if !s.lone_surrogates => Some(s.value.as_str()),
                _ => None,
            };
            let k = if let Some(name) = plain {
                if forbidden(name) {
                    return fail(p.key.span(), forbidden_msg(name));
                }
                self.str_const(name, p.key.span())?
            } else {
                let key: Vec<u16> = match &p.key {
                    PropertyKey::StringLiteral(s) => string_units(s),
                    PropertyKey::NumericLiteral(n) => {
                        js_number_to_string(n.value).encode_utf16().collect()
                    }
                    _ => {
                        return fail(
                            p.key.span(),
                            "unsupported object key; write an identifier, a string or a number: { a: 1, 'b-c': 2, [k]: 3 }",
                        )
                    }
                };
                let key_str = String::from_utf16_lossy(&key);
                if forbidden(&key_str) {
                    return fail(p.key.span(), forbidden_msg(&key_str));
                }
                self.str_const_units(key, p.key.span())?
            };
            self.with_temps(|l| {
                let v = l.expr(&p.value)?;
                l.emit(
                    Op::InitProp {
                        obj: dst.src(),
                        key: k.key(),
                        val: v.src(),
                    },
                    p.span,
                );
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// Terms from which a chain leaning left (`a + b + c + …`: each operation the left operand of
/// the next) is lowered in a loop instead of by recursion, so that its length is no nesting.
const LONG_CHAIN: usize = 32;

/// The binary operations of `b`'s left spine, outermost first, when there are at least
/// [`LONG_CHAIN`] of them.
fn long_left_spine<'e, 'a>(b: &'e BinaryExpression<'a>) -> Option<Vec<&'e BinaryExpression<'a>>> {
    let mut n = 1;
    let mut left = &b.left;
    while let Expression::BinaryExpression(inner) = left {
        n += 1;
        left = &inner.left;
    }
    if n < LONG_CHAIN {
        return None;
    }
    let mut spine = Vec::with_capacity(n);
    let mut at = b;
    loop {
        spine.push(at);
        match &at.left {
            Expression::BinaryExpression(inner) => at = inner,
            _ => return Some(spine),
        }
    }
}

/// The instruction of the binary operator `op`, or the refusal of one AJS does not have.
fn binary_op(op: BinaryOperator, d: Dst, a: Src, b: Src, span: Span) -> R<Op> {
    Ok(match op {
        BinaryOperator::Addition => Op::Add { dst: d, a, b },
        BinaryOperator::Subtraction => Op::Sub { dst: d, a, b },
        BinaryOperator::Multiplication => Op::Mul { dst: d, a, b },
        BinaryOperator::Division => Op::Div { dst: d, a, b },
        BinaryOperator::Remainder => Op::Mod { dst: d, a, b },
        BinaryOperator::Exponential => Op::Pow { dst: d, a, b },
        BinaryOperator::Equality => Op::Eq { dst: d, a, b },
        BinaryOperator::Inequality => Op::Ne { dst: d, a, b },
        BinaryOperator::StrictEquality => Op::StrictEq { dst: d, a, b },
        BinaryOperator::StrictInequality => Op::StrictNe { dst: d, a, b },
        BinaryOperator::LessThan => Op::Lt { dst: d, a, b },
        BinaryOperator::LessEqualThan => Op::Le { dst: d, a, b },
        BinaryOperator::GreaterThan => Op::Gt { dst: d, a, b },
        BinaryOperator::GreaterEqualThan => Op::Ge { dst: d, a, b },
        other => {
            return fail(span, hints::binary_op_msg(other.as_str(), None, None));
        }
    })
}

impl Lowerer<'_> {
    /// A long left-leaning chain (`spine`, outermost first) into `dst`: the innermost left
    /// operand into an accumulator, then each operation in turn, the last one into `dst`
    /// (written once, at the end, as the recursive lowering does).
    fn binary_chain(&mut self, spine: &[&BinaryExpression], dst: Reg) -> R<()> {
        let Some(innermost) = spine.last() else {
            return Ok(());
        };
        self.with_temps(|l| {
            let acc = l.alloc(innermost.span)?;
            l.expr_to(&innermost.left, acc)?;
            for (i, b) in spine.iter().rev().enumerate() {
                let to = if i + 1 == spine.len() { dst } else { acc };
                l.with_temps(|l| {
                    let c = l.expr(&b.right)?;
                    let op = binary_op(b.operator, to.dst(), acc.src(), c.src(), b.span)?;
                    l.emit(op, b.span);
                    Ok(())
                })?;
            }
            Ok(())
        })
    }
}

/// Refuses a numeric literal strict mode refuses (`010`, `08`).
fn strict_number(n: &NumericLiteral) -> R<()> {
    match n
        .raw
        .as_ref()
        .and_then(|r| crate::strict_literals::number(r.as_str()))
    {
        Some(m) => fail(n.span, m),
        None => Ok(()),
    }
}

/// Refuses a property key written as a literal strict mode refuses (`{ 010: 1 }`).
pub(super) fn strict_key(k: &PropertyKey) -> R<()> {
    match k {
        PropertyKey::NumericLiteral(n) => strict_number(n),
        PropertyKey::StringLiteral(s) => strict_string(s),
        _ => Ok(()),
    }
}

/// Refuses a string literal with an octal escape (`'\1'`), as strict mode does.
fn strict_string(s: &StringLiteral) -> R<()> {
    match s
        .raw
        .as_ref()
        .and_then(|r| crate::strict_literals::string(r.as_str()))
    {
        Some(m) => fail(s.span, m),
        None => Ok(()),
    }
}
