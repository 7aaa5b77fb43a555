//! `s.replace(pattern, (m, p1, …) => …)` and `replaceAll`: the callback runs inline, as the
//! other callback methods' do (decision 10). `%replaceMatches` lists the matches, each as the
//! callback's argument list (`[match, ...captures, offset, input, groups?]`); a loop runs the
//! body once per match, its parameters read from that list; `%replaceJoin` splices the
//! results into the string as text.

use super::*;

impl Lowerer<'_> {
    /// Whether `obj.m(args)` is `replace`/`replaceAll` with an arrow function as replacement.
    pub(super) fn is_replace_with_callback(m: &str, args: &[&Expression]) -> bool {
        (m == "replace" || m == "replaceAll")
            && args.len() == 2
            && matches!(
                args[1].without_parentheses(),
                Expression::ArrowFunctionExpression(_)
            )
    }

    /// Lowers `obj.replace(pattern, cb)` / `obj.replaceAll(pattern, cb)` into `dst`.
    pub(super) fn replace_with_callback(
        &mut self,
        obj: &Expression,
        m: &str,
        optional: bool,
        args: &[&Expression],
        dst: Reg,
        span: Span,
    ) -> R<()> {
        let Some(Expression::ArrowFunctionExpression(cb)) =
            args.get(1).map(|a| a.without_parentheses())
        else {
            return fail(span, format!("'{m}' takes a pattern and a replacement: write s.{m}(/x/g, m => …) or s.{m}('x', 'y')"));
        };
        if cb.r#async {
            return fail(
                cb.span,
                "async callbacks are not supported: AJS atom calls are already synchronous; drop `async` and call the atom directly: s.replace(re, m => llmPredict({ prompt: m }))",
            );
        }
        self.with_temps(|l| {
            // [s, pattern, all] for %replaceMatches; s stays for %replaceJoin
            let base = l.alloc(span)?;
            let pat = l.alloc(span)?;
            let all = l.alloc(span)?;
            l.expr_to(obj, base)?;
            if optional {
                l.chain_jump(base, span);
            }
            l.expr_to(args[0], pat)?;
            l.emit(
                if m == "replaceAll" {
                    Op::LoadTrue { dst: all.dst() }
                } else {
                    Op::LoadFalse { dst: all.dst() }
                },
                span,
            );
            let recs = l.alloc(span)?;
            l.emit(
                Op::CallNative {
                    dst: recs.dst(),
                    native: Native(NativeId::ReplaceMatches.to_u16()),
                    base: base.base(),
                    argc: Count(3),
                },
                span,
            );
            let results = l.alloc(span)?;
            l.emit(
                Op::NewArray {
                    dst: results.dst(),
                    base: Base(0),
                    count: Count(0),
                },
                span,
            );
            let len = l.alloc(span)?;
            let name = l.str_const(m, span)?;
            l.emit(
                Op::ArrayLen {
                    dst: len.dst(),
                    arr: recs.src(),
                    method: name.key(),
                },
                span,
            );
            let i = l.alloc(span)?;
            let rec = l.alloc(span)?;
            let cond = l.alloc(span)?;
            let zero = l.num_reg(0.0, span)?;
            let one = l.num_reg(1.0, span)?;
            l.emit(
                Op::Move {
                    dst: i.dst(),
                    src: zero.src(),
                },
                span,
            );
            // the registers of the parameters, and the positions they read in a match's list
            let nparams = cb.params.items.len();
            let mut params = Vec::with_capacity(nparams);
            let mut keys = Vec::with_capacity(nparams);
            for k in 0..nparams {
                params.push(l.alloc(span)?);
                keys.push(l.num_reg(k as f64, span)?);
            }

            let start = l.here();
            let exit = l.emit_test(
                Op::Lt {
                    dst: cond.dst(),
                    a: i.src(),
                    b: len.src(),
                },
                false,
                span,
            );
            l.emit(
                Op::GetIndex {
                    dst: rec.dst(),
                    obj: recs.src(),
                    key: i.src(),
                },
                span,
            );
            for (p, k) in params.iter().zip(&keys) {
                l.emit(
                    Op::GetIndex {
                        dst: p.dst(),
                        obj: rec.src(),
                        key: k.src(),
                    },
                    span,
                );
            }
            // `...rest`: the rest of the list, a copy (the list itself stays the natives')
            let rest = match (&cb.params.rest, native(".slice")) {
                (None, _) => None,
                (Some(_), Some(slice)) => {
                    let r = l.alloc(span)?;
                    let from = l.num_reg(nparams as f64, span)?;
                    let args = l.alloc(span)?;
                    l.alloc(span)?;
                    l.emit(
                        Op::Move {
                            dst: args.dst(),
                            src: rec.src(),
                        },
                        span,
                    );
                    l.emit(
                        Op::Move {
                            dst: args.plus(1).dst(),
                            src: from.src(),
                        },
                        span,
                    );
                    l.emit(
                        Op::CallNative {
                            dst: r.dst(),
                            native: Native(slice.to_u16()),
                            base: args.base(),
                            argc: Count(2),
                        },
                        span,
                    );
                    Some(r)
                }
                (Some(r), None) => return fail(r.span, "rest parameters need .slice (an internal refusal); write the captures as parameters: (m, p1, p2) => …"),
            };
            let value = l.alloc(span)?;
            l.callback_body_rest(cb, &params, rest, value, false)?;
            l.push(results, value, span);
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
                    target: Target(start),
                },
                span,
            );
            l.patch_here(exit);
            // [s, matches, results] for %replaceJoin
            l.emit(
                Op::Move {
                    dst: pat.dst(),
                    src: recs.src(),
                },
                span,
            );
            l.emit(
                Op::Move {
                    dst: all.dst(),
                    src: results.src(),
                },
                span,
            );
            l.emit(
                Op::CallNative {
                    dst: dst.dst(),
                    native: Native(NativeId::ReplaceJoin.to_u16()),
                    base: base.base(),
                    argc: Count(3),
                },
                span,
            );
            Ok(())
        })
    }
}
