//! A structured generator of AJS programs: an AST whose every value prints to source that is
//! close to valid AJS, so the fuzzer spends its time in the VM rather than in the parser.
//! With the `arbitrary` feature (the `generated` fuzz target's) the types derive
//! `arbitrary::Arbitrary`; the
//! stable replay test builds them from a seeded generator (`Program::random`) instead.
#![allow(dead_code)]

use std::fmt::Write;

#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug)]
pub enum Var {
    A,
    B,
    S,
    Xs,
    V0,
    V1,
    V2,
}

impl Var {
    fn name(self) -> &'static str {
        match self {
            Var::A => "a",
            Var::B => "b",
            Var::S => "s",
            Var::Xs => "xs",
            Var::V0 => "v0",
            Var::V1 => "v1",
            Var::V2 => "v2",
        }
    }
}

/// Property names, hostile ones included.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug)]
pub enum Key {
    Length,
    K,
    Constructor,
    Proto,
    Prototype,
    ToString,
    HasOwnProperty,
    Zero,
    Big,
}

impl Key {
    fn name(self) -> &'static str {
        match self {
            Key::Length => "length",
            Key::K => "k",
            Key::Constructor => "constructor",
            Key::Proto => "__proto__",
            Key::Prototype => "prototype",
            Key::ToString => "toString",
            Key::HasOwnProperty => "hasOwnProperty",
            Key::Zero => "0",
            Key::Big => "k9",
        }
    }
}

#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Lt,
    Ge,
    EqEq,
    StrictEq,
    And,
    Or,
    Nullish,
    BitAnd,
    Shl,
}

impl BinOp {
    fn text(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::Lt => "<",
            BinOp::Ge => ">=",
            BinOp::EqEq => "==",
            BinOp::StrictEq => "===",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::Nullish => "??",
            BinOp::BitAnd => "&",
            BinOp::Shl => "<<",
        }
    }
}

/// Methods with no callback, with their arity.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug)]
pub enum Method {
    Repeat,
    PadStart,
    Concat,
    Slice,
    Split,
    Join,
    Push,
    Pop,
    IndexOf,
    Includes,
    ToUpperCase,
    Reverse,
    Fill,
    Splice,
    Flat,
    Trim,
    Replace,
}

impl Method {
    fn text(self) -> (&'static str, usize) {
        match self {
            Method::Repeat => ("repeat", 1),
            Method::PadStart => ("padStart", 2),
            Method::Concat => ("concat", 1),
            Method::Slice => ("slice", 2),
            Method::Split => ("split", 1),
            Method::Join => ("join", 1),
            Method::Push => ("push", 1),
            Method::Pop => ("pop", 0),
            Method::IndexOf => ("indexOf", 1),
            Method::Includes => ("includes", 1),
            Method::ToUpperCase => ("toUpperCase", 0),
            Method::Reverse => ("reverse", 0),
            Method::Fill => ("fill", 1),
            Method::Splice => ("splice", 2),
            Method::Flat => ("flat", 1),
            Method::Trim => ("trim", 0),
            Method::Replace => ("replace", 2),
        }
    }
}

/// Methods that take a callback.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug)]
pub enum CbMethod {
    Map,
    Filter,
    Reduce,
    Some,
    Find,
    Sort,
    FlatMap,
    ForEach,
}

impl CbMethod {
    fn text(self) -> &'static str {
        match self {
            CbMethod::Map => "map",
            CbMethod::Filter => "filter",
            CbMethod::Reduce => "reduce",
            CbMethod::Some => "some",
            CbMethod::Find => "find",
            CbMethod::Sort => "sort",
            CbMethod::FlatMap => "flatMap",
            CbMethod::ForEach => "forEach",
        }
    }
}

/// Global functions.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Copy, Debug)]
pub enum Global {
    JsonParse,
    JsonStringify,
    MathMax,
    MathFloor,
    ObjectKeys,
    ObjectEntries,
    ObjectFromEntries,
    ObjectAssign,
    Error,
    ParseInt,
    StringFn,
    HttpFetch,
    /// `parallel([...])`: even items are `httpFetch` calls, odd ones plain values.
    Parallel,
}

impl Global {
    fn text(self) -> &'static str {
        match self {
            Global::JsonParse => "JSON.parse",
            Global::JsonStringify => "JSON.stringify",
            Global::MathMax => "Math.max",
            Global::MathFloor => "Math.floor",
            Global::ObjectKeys => "Object.keys",
            Global::ObjectEntries => "Object.entries",
            Global::ObjectFromEntries => "Object.fromEntries",
            Global::ObjectAssign => "Object.assign",
            Global::Error => "Error",
            Global::ParseInt => "parseInt",
            Global::StringFn => "String",
            Global::HttpFetch => "httpFetch",
            Global::Parallel => "parallel",
        }
    }
}

#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug)]
pub enum Expr {
    Num(i16),
    BigNum(u32),
    Float(u8),
    Str(Key),
    JsonText(u8),
    Bool(bool),
    Null,
    Undefined,
    Var(Var),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Typeof(Box<Expr>),
    Member(Box<Expr>, Key),
    Index(Box<Expr>, Box<Expr>),
    Call(Box<Expr>, Method, Vec<Expr>),
    CbCall(Box<Expr>, CbMethod, Box<Expr>),
    Global(Global, Vec<Expr>),
    Array(Vec<Expr>),
    Spread(Box<Expr>, Box<Expr>),
    Object(Vec<(Key, Expr)>),
    Computed(Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Template(Box<Expr>, Box<Expr>),
    Item,
}

#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug)]
pub enum Stmt {
    Let(Var, Expr),
    Assign(Var, Expr),
    AddAssign(Var, Expr),
    Expr(Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    While(Expr, Vec<Stmt>),
    Try(Vec<Stmt>, Vec<Stmt>),
    Return(Expr),
    Break,
    Continue,
    Log(Expr),
}

/// A program: a list of statements, optionally wrapped in a helper called from an agent entry.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Clone, Debug)]
pub struct Program {
    pub stmts: Vec<Stmt>,
    pub as_agent: bool,
    pub recursive_helper: bool,
}

const MAX_DEPTH: usize = 6;
const MAX_LEN: usize = 6;

fn print_expr(e: &Expr, depth: usize, in_cb: bool, out: &mut String) {
    if depth > MAX_DEPTH {
        out.push('1');
        return;
    }
    let d = depth + 1;
    match e {
        Expr::Num(n) => {
            let _ = write!(out, "({n})");
        }
        Expr::BigNum(n) => {
            let _ = write!(out, "{n}");
        }
        Expr::Float(n) => {
            let _ = write!(out, "{}.5", n);
        }
        Expr::Str(k) => {
            let _ = write!(out, "'{}'", k.name());
        }
        Expr::JsonText(n) => {
            let t = match n % 6 {
                0 => r#"'{"__proto__":{"x":1}}'"#,
                1 => r#"'[[[[[[1]]]]]]'"#,
                2 => r#"'{"constructor":1,"k":[1,2]}'"#,
                3 => r#"'"\ud800"'"#,
                4 => "'1e999'",
                _ => "'{\"k\":'",
            };
            out.push_str(t);
        }
        Expr::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Expr::Null => out.push_str("null"),
        Expr::Undefined => out.push_str("undefined"),
        Expr::Var(v) => out.push_str(v.name()),
        Expr::Item => out.push_str(if in_cb { "x" } else { "a" }),
        Expr::Bin(op, l, r) => {
            out.push('(');
            print_expr(l, d, in_cb, out);
            let _ = write!(out, " {} ", op.text());
            print_expr(r, d, in_cb, out);
            out.push(')');
        }
        Expr::Not(x) => {
            out.push_str("!(");
            print_expr(x, d, in_cb, out);
            out.push(')');
        }
        Expr::Neg(x) => {
            out.push_str("-(");
            print_expr(x, d, in_cb, out);
            out.push(')');
        }
        Expr::Typeof(x) => {
            out.push_str("typeof (");
            print_expr(x, d, in_cb, out);
            out.push(')');
        }
        Expr::Member(x, k) => {
            out.push('(');
            print_expr(x, d, in_cb, out);
            match k {
                Key::Zero => out.push_str(")[0]"),
                _ => {
                    let _ = write!(out, ").{}", k.name());
                }
            }
        }
        Expr::Index(x, i) | Expr::Computed(x, i) => {
            out.push('(');
            print_expr(x, d, in_cb, out);
            out.push_str(")[");
            if matches!(e, Expr::Computed(..)) {
                out.push_str("'__pro' + ");
            }
            print_expr(i, d, in_cb, out);
            out.push(']');
        }
        Expr::Call(x, m, args) => {
            let (name, arity) = m.text();
            out.push('(');
            print_expr(x, d, in_cb, out);
            let _ = write!(out, ").{name}(");
            for (i, a) in args.iter().take(arity).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                print_expr(a, d, in_cb, out);
            }
            out.push(')');
        }
        Expr::CbCall(x, m, body) => {
            out.push('(');
            print_expr(x, d, in_cb, out);
            let _ = write!(out, ").{}(", m.text());
            match m {
                CbMethod::Reduce => out.push_str("(acc, x) => "),
                CbMethod::Sort => out.push_str("(x, y) => "),
                _ => out.push_str("(x, i) => "),
            }
            print_expr(body, d, true, out);
            if matches!(m, CbMethod::Reduce) {
                out.push_str(", 0");
            }
            out.push(')');
        }
        Expr::Global(g, args) => {
            let _ = write!(out, "{}(", g.text());
            if matches!(g, Global::Parallel) {
                out.push('[');
                for (i, a) in args.iter().take(MAX_LEN).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if i % 2 == 0 {
                        out.push_str("httpFetch({ url: 'https://api.example.com/' + ");
                        print_expr(a, d, in_cb, out);
                        out.push_str(" })");
                    } else {
                        print_expr(a, d, in_cb, out);
                    }
                }
                out.push(']');
            } else if matches!(g, Global::HttpFetch) {
                out.push_str("{ url: 'https://api.example.com/' + ");
                match args.first() {
                    Some(a) => print_expr(a, d, in_cb, out),
                    None => out.push_str("''"),
                }
                out.push_str(" }");
            } else {
                for (i, a) in args.iter().take(MAX_LEN).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    print_expr(a, d, in_cb, out);
                }
            }
            out.push(')');
        }
        Expr::Array(xs) => {
            out.push('[');
            for (i, a) in xs.iter().take(MAX_LEN).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                print_expr(a, d, in_cb, out);
            }
            out.push(']');
        }
        Expr::Spread(x, y) => {
            out.push_str("[...(");
            print_expr(x, d, in_cb, out);
            out.push_str("), ...(");
            print_expr(y, d, in_cb, out);
            out.push_str(")]");
        }
        Expr::Object(kvs) => {
            out.push_str("({ ");
            for (i, (k, v)) in kvs.iter().take(MAX_LEN).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "'{}': ", k.name());
                print_expr(v, d, in_cb, out);
            }
            out.push_str(" })");
        }
        Expr::Cond(c, t, f) => {
            out.push('(');
            print_expr(c, d, in_cb, out);
            out.push_str(" ? ");
            print_expr(t, d, in_cb, out);
            out.push_str(" : ");
            print_expr(f, d, in_cb, out);
            out.push(')');
        }
        Expr::Template(x, y) => {
            out.push_str("`<${");
            print_expr(x, d, in_cb, out);
            out.push_str("}|${");
            print_expr(y, d, in_cb, out);
            out.push_str("}>`");
        }
    }
}

fn print_block(stmts: &[Stmt], depth: usize, in_loop: bool, out: &mut String) {
    for s in stmts.iter().take(MAX_LEN * 2) {
        print_stmt(s, depth, in_loop, out);
    }
}

fn print_stmt(s: &Stmt, depth: usize, in_loop: bool, out: &mut String) {
    if depth > MAX_DEPTH {
        return;
    }
    let d = depth + 1;
    match s {
        Stmt::Let(v, e) | Stmt::Assign(v, e) | Stmt::AddAssign(v, e) => {
            let op = match s {
                Stmt::Let(..) => "",
                Stmt::AddAssign(..) => "+",
                _ => "",
            };
            // v0..v2 are declared up front; `let` shadows in a block, assignment rebinds.
            if matches!(s, Stmt::Let(..)) {
                let _ = write!(out, "{{ let {} = ", v.name());
                print_expr(e, 0, false, out);
                out.push_str(" }\n");
            } else {
                let _ = write!(out, "{} {op}= ", v.name());
                print_expr(e, 0, false, out);
                out.push('\n');
            }
        }
        Stmt::Expr(e) => {
            out.push_str("void_ = ");
            print_expr(e, 0, false, out);
            out.push('\n');
        }
        Stmt::Log(e) => {
            out.push_str("console.log(");
            print_expr(e, 0, false, out);
            out.push_str(")\n");
        }
        Stmt::If(c, t, f) => {
            out.push_str("if (");
            print_expr(c, 0, false, out);
            out.push_str(") {\n");
            print_block(t, d, in_loop, out);
            out.push_str("} else {\n");
            print_block(f, d, in_loop, out);
            out.push_str("}\n");
        }
        Stmt::While(c, body) => {
            out.push_str("while (");
            print_expr(c, 0, false, out);
            out.push_str(") {\n");
            print_block(body, d, true, out);
            out.push_str("}\n");
        }
        Stmt::Try(t, c) => {
            out.push_str("try {\n");
            print_block(t, d, in_loop, out);
            out.push_str("} catch (err) {\n");
            print_block(c, d, in_loop, out);
            out.push_str("}\n");
        }
        Stmt::Return(e) => {
            out.push_str("return ");
            print_expr(e, 0, false, out);
            out.push('\n');
        }
        Stmt::Break if in_loop => out.push_str("break\n"),
        Stmt::Continue if in_loop => out.push_str("continue\n"),
        Stmt::Break | Stmt::Continue => {}
    }
}

impl Program {
    /// The program as AJS source: a function body (context `a b s xs`), or an agent whose entry
    /// calls a helper holding the statements.
    pub fn to_source(&self) -> String {
        let mut body = String::from("let v0 = 0\nlet v1 = ''\nlet v2 = []\nlet void_ = null\n");
        print_block(&self.stmts, 0, false, &mut body);
        body.push_str("return [v0, v1, v2]\n");
        if !self.as_agent {
            return body;
        }
        let mut src = String::new();
        src.push_str("function helper(a, b, s, xs, n) {\n");
        if self.recursive_helper {
            src.push_str("if (n > 0) { return helper(a, b, s, xs, n - 1) }\n");
        }
        src.push_str(&body);
        src.push_str(
            "}\nfunction main() {\n  return { r: helper(1, 2, 'hello', [1, 2, 3], 300) }\n}\n",
        );
        src
    }

    /// A program from a seed, for the stable-toolchain path (no `arbitrary` there).
    pub fn random(seed: u64) -> Program {
        let mut g = Gen(seed | 1);
        let n = g.below(8);
        Program {
            stmts: (0..n).map(|_| g.stmt(0)).collect(),
            as_agent: g.below(4) == 0,
            recursive_helper: g.below(2) == 0,
        }
    }
}

struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn var(&mut self) -> Var {
        [Var::A, Var::B, Var::S, Var::Xs, Var::V0, Var::V1, Var::V2][self.below(7)]
    }
    fn key(&mut self) -> Key {
        [
            Key::Length,
            Key::K,
            Key::Constructor,
            Key::Proto,
            Key::Prototype,
            Key::ToString,
            Key::HasOwnProperty,
            Key::Zero,
            Key::Big,
        ][self.below(9)]
    }
    fn bin(&mut self) -> BinOp {
        use BinOp::*;
        [
            Add, Sub, Mul, Div, Mod, Pow, Lt, Ge, EqEq, StrictEq, And, Or, Nullish, BitAnd, Shl,
        ][self.below(15)]
    }
    fn method(&mut self) -> Method {
        use Method::*;
        [
            Repeat,
            PadStart,
            Concat,
            Slice,
            Split,
            Join,
            Push,
            Pop,
            IndexOf,
            Includes,
            ToUpperCase,
            Reverse,
            Fill,
            Splice,
            Flat,
            Trim,
            Replace,
        ][self.below(17)]
    }
    fn cb(&mut self) -> CbMethod {
        use CbMethod::*;
        [Map, Filter, Reduce, Some, Find, Sort, FlatMap, ForEach][self.below(8)]
    }
    fn global(&mut self) -> Global {
        use Global::*;
        [
            JsonParse,
            JsonStringify,
            MathMax,
            MathFloor,
            ObjectKeys,
            ObjectEntries,
            ObjectFromEntries,
            ObjectAssign,
            Error,
            ParseInt,
            StringFn,
            HttpFetch,
            Parallel,
        ][self.below(13)]
    }
    fn exprs(&mut self, depth: usize) -> Vec<Expr> {
        let n = self.below(4);
        (0..n).map(|_| self.expr(depth + 1)).collect()
    }
    fn bx(&mut self, depth: usize) -> Box<Expr> {
        Box::new(self.expr(depth + 1))
    }
    fn expr(&mut self, depth: usize) -> Expr {
        let leaf = depth >= 4;
        match if leaf { self.below(9) } else { self.below(25) } {
            0 => Expr::Num(self.next() as i16 % 100),
            1 => Expr::BigNum(self.next() as u32),
            2 => Expr::Str(self.key()),
            3 => Expr::JsonText(self.next() as u8),
            4 => Expr::Bool(self.below(2) == 0),
            5 => Expr::Null,
            6 => Expr::Var(self.var()),
            7 => Expr::Item,
            8 => Expr::Float(self.next() as u8),
            9 => Expr::Bin(self.bin(), self.bx(depth), self.bx(depth)),
            10 => Expr::Not(self.bx(depth)),
            11 => Expr::Neg(self.bx(depth)),
            12 => Expr::Typeof(self.bx(depth)),
            13 => Expr::Member(self.bx(depth), self.key()),
            14 => Expr::Index(self.bx(depth), self.bx(depth)),
            15 => Expr::Call(self.bx(depth), self.method(), self.exprs(depth)),
            16 => Expr::CbCall(self.bx(depth), self.cb(), self.bx(depth)),
            17 => Expr::Global(self.global(), self.exprs(depth)),
            18 => Expr::Array(self.exprs(depth)),
            19 => Expr::Spread(self.bx(depth), self.bx(depth)),
            20 => {
                let n = self.below(3);
                Expr::Object((0..n).map(|_| (self.key(), self.expr(depth + 1))).collect())
            }
            21 => Expr::Computed(self.bx(depth), self.bx(depth)),
            22 => Expr::Cond(self.bx(depth), self.bx(depth), self.bx(depth)),
            23 => Expr::Template(self.bx(depth), self.bx(depth)),
            _ => Expr::Undefined,
        }
    }
    fn stmts(&mut self, depth: usize) -> Vec<Stmt> {
        let n = self.below(4);
        (0..n).map(|_| self.stmt(depth + 1)).collect()
    }
    fn stmt(&mut self, depth: usize) -> Stmt {
        let leaf = depth >= 3;
        match if leaf { self.below(6) } else { self.below(11) } {
            0 => Stmt::Let(self.var(), self.expr(0)),
            1 => Stmt::Assign(self.var(), self.expr(0)),
            2 => Stmt::AddAssign(self.var(), self.expr(0)),
            3 => Stmt::Expr(self.expr(0)),
            4 => Stmt::Log(self.expr(0)),
            5 => Stmt::Return(self.expr(0)),
            6 => Stmt::If(self.expr(0), self.stmts(depth), self.stmts(depth)),
            7 => Stmt::While(self.expr(0), self.stmts(depth)),
            8 => Stmt::Try(self.stmts(depth), self.stmts(depth)),
            9 => Stmt::Break,
            _ => Stmt::Continue,
        }
    }
}
