//! Variables and scopes: the names of a function, the scopes they are declared in, and how a
//! name resolves (a local, an external, a global).

use super::*;

/// A variable name of [`Names`]: where its text is, and its [`name_key`].
#[derive(Clone, Copy)]
pub(super) struct Name {
    pub(super) at: u32,
    pub(super) len: u32,
    pub(super) key: u64,
}

/// A name looked up among [`Names`]: its text and its [`name_key`], computed once for all the
/// names it is compared with.
#[derive(Clone, Copy)]
pub(super) struct Probe<'n> {
    pub(super) name: &'n str,
    pub(super) key: u64,
}

impl<'n> Probe<'n> {
    #[inline(always)]
    pub(super) fn new(name: &'n str) -> Probe<'n> {
        Probe {
            name,
            key: name_key(name.as_bytes()),
        }
    }
}

/// A word of the bytes of a name that, with its length, is the whole name when it has up to
/// eight bytes (the first eight of a longer one): its first and last four, or its first, middle
/// and last byte. Names are told apart by it and their lengths before any byte is compared. The
/// words of [`hash_words`], the two of a shorter name in one, read here by themselves: taken
/// from `hash_words`, a long name's last word would be read too.
#[inline(always)]
pub(super) fn name_key(b: &[u8]) -> u64 {
    if let Some(h) = b.first_chunk::<8>() {
        u64::from_le_bytes(*h)
    } else if let (Some(h), Some(t)) = (b.first_chunk::<4>(), b.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*h)) | u64::from(u32::from_le_bytes(*t)) << 32
    } else if let (Some(&first), Some(&mid), Some(&last)) =
        (b.first(), b.get(b.len() / 2), b.last())
    {
        u64::from(first) | u64::from(mid) << 8 | u64::from(last) << 16
    } else {
        0
    }
}

/// The variable names of one function, one after the other (a name costs no allocation).
#[derive(Default)]
pub(super) struct Names(pub(super) String);

impl Names {
    pub(super) fn add(&mut self, p: Probe) -> Name {
        let at = self.0.len();
        self.0.push_str(p.name);
        Name {
            at: at as u32,
            len: p.name.len() as u32,
            key: p.key,
        }
    }

    /// Whether `n` is the name of `p`: by their keys and lengths, which say it for a name of up
    /// to eight bytes; a longer one's bytes are compared too. Compared as bytes: slicing the
    /// `str` would check both ends for a character boundary on every comparison.
    #[inline(always)]
    pub(super) fn is(&self, n: Name, p: Probe) -> bool {
        n.key == p.key
            && n.len as usize == p.name.len()
            && (n.len <= 8
                || self
                    .0
                    .as_bytes()
                    .get(n.at as usize..(n.at + n.len) as usize)
                    .is_some_and(|t| same_bytes(t, p.name.as_bytes())))
    }
}

pub(super) struct Var {
    pub(super) name: Name,
    pub(super) reg: Reg,
    pub(super) is_const: bool,
}

#[derive(Default)]
pub(super) struct Scope {
    pub(super) vars: Vec<Var>,
    /// let/const names of this block not declared yet (use before declaration is an error).
    pub(super) pending: Vec<Name>,
    /// The function body's outermost scope (FunctionBody: may not redeclare a parameter).
    pub(super) is_top: bool,
}

pub(super) struct LoopCtx {
    pub(super) breaks: Vec<usize>,
    /// the `continue` jumps, patched to the loop's test when it is known
    pub(super) continues: Vec<usize>,
    pub(super) try_depth: u32,
}

pub(super) enum Resolved {
    Local { reg: Reg, is_const: bool },
    Ext(Reg),
}

impl<'o> Lowerer<'o> {
    // ---------------------------------------------------------------- names

    pub(super) fn lookup_local(&self, name: &str, span: Span) -> R<Option<(Reg, bool)>> {
        // (no variable's text, no variable, and no key computed: an Eval expression's names;
        // an identifier is never empty)
        if self.bufs.names.0.is_empty() {
            return Ok(None);
        }
        let names = &self.bufs.names;
        let probe = Probe::new(name);
        for sc in self.bufs.open_scopes().iter().rev() {
            if let Some(v) = sc.vars.iter().rev().find(|v| names.is(v.name, probe)) {
                return Ok(Some((v.reg, v.is_const)));
            }
            if sc.pending.iter().any(|&p| names.is(p, probe)) {
                return fail(span, format!("Cannot access '{name}' before initialization (it is declared later in this block); move let {name} = … above its first use"));
            }
        }
        Ok(None)
    }

    pub(super) fn param_index(&self, name: &str) -> Option<usize> {
        if self.opts.mode == Mode::FunctionBody {
            self.externals().iter().rposition(|p| p == name)
        } else {
            None
        }
    }

    /// True when `name` is neither a local nor a parameter (so a builtin or atom of that name is meant).
    pub(super) fn is_global(&self, name: &str) -> bool {
        let names = &self.bufs.names;
        let probe = Probe::new(name);
        let local = self.bufs.open_scopes().iter().any(|sc| {
            sc.vars.iter().any(|v| names.is(v.name, probe))
                || sc.pending.iter().any(|&p| names.is(p, probe))
        });
        !local && self.param_index(name).is_none()
    }

    /// Resolves a name to a variable or external register; errors for everything else.
    pub(super) fn resolve(&mut self, name: &str, span: Span) -> R<Resolved> {
        if forbidden(name) {
            return fail(span, forbidden_msg(name));
        }
        if let Some((reg, is_const)) = self.lookup_local(name, span)? {
            return Ok(Resolved::Local { reg, is_const });
        }
        if let Some(i) = self.param_index(name) {
            if let Some(r) = self.ext_regs.get(i) {
                return Ok(Resolved::Ext(r));
            }
        }
        if is_builtin_name(name) {
            return fail(span, super::hints::builtin_value_msg(name));
        }
        if let Some(m) = unsupported_builtin(name) {
            return fail(span, m);
        }
        if self.opts.mode == Mode::Eval {
            if let Some(i) = self.opts.externals.iter().position(|k| k == name) {
                if let Some(r) = self.ext_regs.get(i) {
                    return Ok(Resolved::Ext(r));
                }
                let r = self.new_special(Special::Ext(i), span.start)?;
                self.ext_regs.insert(i, r);
                return Ok(Resolved::Ext(r));
            }
        }
        if self.opts.atoms.iter().any(|a| a == name) {
            return fail(
                span,
                format!("'{name}' is an atom: call it, e.g. {name}({{ ... }})"),
            );
        }
        fail(
            span,
            super::hints::undefined_msg(name, self.opts.mode != Mode::Eval),
        )
    }

    /// The register holding identifier `id`'s value. (Always inlined into its two callers: it
    /// runs per identifier read.)
    #[inline(always)]
    pub(super) fn read_ident(&mut self, id: &IdentifierReference) -> R<Reg> {
        let name = id.name.as_str();
        // (the name first: the scope search only for these three)
        if matches!(name, "undefined" | "NaN" | "Infinity") && self.is_global(name) {
            match name {
                "undefined" => return self.special(SpecialKey::Undef, id.span),
                "NaN" => return self.num_reg(f64::NAN, id.span),
                _ => return self.num_reg(f64::INFINITY, id.span),
            }
        }
        match self.resolve(name, id.span)? {
            Resolved::Local { reg, .. } | Resolved::Ext(reg) => Ok(reg),
        }
    }

    /// Declares a block-scoped variable in the innermost scope and allocates its register.
    /// (`probe`: the name's, which [`Self::bind`] takes too: its key is computed once.)
    pub(super) fn declare(&mut self, probe: Probe, span: Span) -> R<Reg> {
        let name = probe.name;
        if forbidden(name) {
            return fail(span, forbidden_msg(name));
        }
        if strict_reserved(name) {
            return fail(span, strict_reserved_msg(name));
        }
        let is_top = self.bufs.open_scopes().last().is_some_and(|s| s.is_top);
        let dup = self
            .bufs
            .open_scopes()
            .last()
            .is_some_and(|s| s.vars.iter().any(|v| self.bufs.names.is(v.name, probe)))
            || (is_top && self.param_index(name).is_some());
        if dup {
            return fail(
                span,
                format!("Identifier '{name}' has already been declared; assign it without let ({name} = …) or use another name"),
            );
        }
        let reg = self.alloc(span)?;
        Ok(reg)
    }

    /// Binds `name` to `reg` in the innermost scope, where it is no longer pending. A pending
    /// name's text, added by [`Self::block_scope`], serves the variable too (not copied into
    /// the names a second time), and the pending list, only ever searched, loses it by a swap
    /// rather than a shift.
    pub(super) fn bind(&mut self, probe: Probe, reg: Reg, is_const: bool) {
        let names = &mut self.bufs.names;
        let Some(sc) = self
            .bufs
            .nscopes
            .checked_sub(1)
            .and_then(|k| self.bufs.scopes.get_mut(k))
        else {
            return;
        };
        let n = match sc.pending.iter().position(|&p| names.is(p, probe)) {
            Some(p) => sc.pending.swap_remove(p),
            None => names.add(probe),
        };
        sc.vars.push(Var {
            name: n,
            reg,
            is_const,
        });
    }

    // ---------------------------------------------------------------- statements

    /// Opens a new innermost scope, empty (one used before, when there is one: its vectors are
    /// reused).
    pub(super) fn open_scope(&mut self) -> &mut Scope {
        self.bufs.open_scope()
    }

    /// Runs `f` in a new innermost scope, empty; then closes it and frees the registers its
    /// variables and temporaries took, on every path.
    #[inline(always)]
    pub(super) fn in_scope<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.with_temps(|l| {
            l.open_scope();
            let r = f(l);
            l.pop_scope();
            r
        })
    }

    /// [`Self::in_scope`] in the scope of the block `stmts` (its let/const names pending), the
    /// function body's outermost when `top`.
    #[inline(always)]
    pub(super) fn in_block_scope<T>(
        &mut self,
        stmts: &[Statement],
        top: bool,
        f: impl FnOnce(&mut Self) -> R<T>,
    ) -> R<T> {
        self.with_temps(|l| {
            l.open_block_scope(stmts).is_top = top;
            let r = f(l);
            l.pop_scope();
            r
        })
    }

    /// Closes the innermost scope, keeping its vectors for the next.
    pub(super) fn pop_scope(&mut self) {
        if let Some(k) = self.bufs.nscopes.checked_sub(1) {
            self.bufs.nscopes = k;
            if let Some(sc) = self.bufs.scopes.get_mut(k) {
                sc.vars.clear();
                sc.pending.clear();
                sc.is_top = false;
            }
        }
    }

    /// Opens a new innermost scope for the block `stmts`, its let/const names pending.
    pub(super) fn open_block_scope(&mut self, stmts: &[Statement]) -> &mut Scope {
        let bufs = &mut self.bufs;
        let scope = bufs.open_scope_at();
        let (scopes, names) = (&mut bufs.scopes, &mut bufs.names);
        let scope = &mut scopes[scope];
        for s in stmts {
            if let Statement::VariableDeclaration(d) = s {
                for decl in &d.declarations {
                    if let BindingPattern::BindingIdentifier(b) = &decl.id {
                        scope.pending.push(names.add(Probe::new(b.name.as_str())));
                    }
                }
            }
        }
        scope
    }
}

#[cfg(test)]
mod tests {
    /// `Names::is` is `==`, at every length up to 20, for names of few letters (most pairs of
    /// one length differ in one or two bytes).
    #[test]
    fn a_name_is_its_text() {
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1d);
        let mut names = super::Names::default();
        for _ in 0..20_000 {
            let word = |next: &mut dyn FnMut() -> usize| -> String {
                let n = 1 + next() % 20;
                (0..n).map(|_| ['a', 'b', '_'][next() % 3]).collect()
            };
            let (a, b) = (word(&mut next), word(&mut next));
            let n = names.add(super::Probe::new(&a));
            assert!(names.is(n, super::Probe::new(&a)), "{a:?}");
            assert_eq!(names.is(n, super::Probe::new(&b)), a == b, "{a:?} {b:?}");
        }
    }
}
