//! A warning (decision 39) for `e.message`, `e.stack`, `e.name` … on a catch binding: the
//! binding is the caught message string itself, so such a property is `undefined`.

use super::*;

/// Error-object properties a program reads from a caught error in JavaScript.
const ERROR_PROPERTIES: &[&str] = &["message", "stack", "name", "cause", "code"];

impl Lowerer<'_> {
    /// Warns when `m` reads an error-object property of a catch binding.
    pub(super) fn catch_member(&self, m: &StaticMemberExpression) {
        if self.catch_regs.is_empty() {
            return;
        }
        let Expression::Identifier(id) = m.object.without_parentheses() else {
            return;
        };
        let prop = m.property.name.as_str();
        if !ERROR_PROPERTIES.contains(&prop) {
            return;
        }
        let name = id.name.as_str();
        let Ok(Some((reg, _))) = self.lookup_local(name, id.span) else {
            return;
        };
        if !self.catch_regs.contains(&reg) {
            return;
        }
        crate::warnings::note(m.span.start, || {
            format!(
                "'{name}' is the caught error's message string, so {name}.{prop} is undefined; write {name} instead of {name}.{prop}"
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::{compile_with_warnings, AtomInputs, CompileOptions, Mode};

    fn warnings(src: &str, mode: Mode) -> Vec<String> {
        let opts = CompileOptions {
            mode,
            ..CompileOptions::default()
        };
        let (_, w) = compile_with_warnings(src, &opts, &AtomInputs::default()).unwrap();
        w.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_property_of_a_catch_binding_is_warned() {
        assert_eq!(
            warnings(
                "try { Error('x') } catch (e) {\n  return e.message\n}",
                Mode::FunctionBody
            ),
            vec!["warning: 'e' is the caught error's message string, so e.message is undefined; write e instead of e.message at <source>:2:9"]
        );
        let w = warnings(
            "function main() {\n  try { return { ok: 1 } } catch (err) {\n    let r = [1].map(x => err.stack)\n    return { m: err?.name + '' }\n  }\n}",
            Mode::Agent,
        );
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("err.stack is undefined") && w[0].ends_with(":3:25"),
            "{w:?}"
        );
        assert!(w[1].contains("write err instead of err.name"), "{w:?}");
    }

    #[test]
    fn other_reads_and_shadowed_names_are_not_warned() {
        for quiet in [
            // the message itself, its own properties
            "try { Error('x') } catch (e) { return e + e.length }",
            // a shadowing variable, an object of the same name outside the catch
            "try { Error('x') } catch (e) { let f = 1\n if (f) { const e = { message: 1 }\n return e.message } return 0 }",
            "let e = { message: 1 }\ntry { Error('x') } catch (err) { return err }\nreturn e.message",
            // another variable's property
            "let o = { message: 1 }\ntry { Error('x') } catch (e) { return o.message }",
        ] {
            assert!(warnings(quiet, Mode::FunctionBody).is_empty(), "{quiet}");
        }
    }
}
