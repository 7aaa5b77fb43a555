//! The readable listing of a program.

use super::*;

impl Program {
    /// A readable listing of every function.
    pub fn disassemble(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (i, c) in self.constants.iter().enumerate() {
            match c {
                Constant::Number(n) => {
                    let _ = writeln!(s, "k{i:<5} number {n:?}");
                }
                Constant::String(u) => {
                    let _ = writeln!(s, "k{i:<5} string {:?}", String::from_utf16_lossy(u));
                }
            }
        }
        for (i, a) in self.atoms.iter().enumerate() {
            let _ = writeln!(s, "atom{i:<2} {a}");
        }
        for (fi, f) in self.functions.iter().enumerate() {
            let entry = if fi == self.entry as usize {
                " (entry)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "\nfn{fi} {}({}) regs={}{entry}",
                f.name,
                f.params.join(", "),
                f.nregs
            );
            for (pc, op) in f.code.iter().enumerate() {
                let pos = self
                    .span(fi, pc)
                    .map(|p| format!("  ; {}:{}", p.line, p.col))
                    .unwrap_or_default();
                let _ = writeln!(s, "{pc:>5}  {op}{pos}");
            }
        }
        s
    }
}
