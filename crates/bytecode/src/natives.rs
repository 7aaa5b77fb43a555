//! The builtin functions and methods a program may call, declared once.
//!
//! The compiler resolves a call such as `Math.max(a, b)` or `xs.push(x)` to a [`NativeId`]; the
//! VM implements each id. Arity bounds are checked by the verifier, so a native never sees an
//! argument count it was not declared with. A method's receiver counts as its first argument.

macro_rules! define_natives {
    ($( $(#[doc = $doc:literal])* $id:ident = $js:literal, $min:literal ..= $max:literal; )*) => {
        /// A builtin function or method.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum NativeId {
            $( $(#[doc = $doc])* $id, )*
        }

        const ALL: &[NativeId] = &[$( NativeId::$id, )*];
        const NAMES: &[&str] = &[$( $js, )*];
        const ARITY: &[(u8, u8)] = &[$( ($min, $max), )*];
    };
}

define_natives! {
    /// `Math.abs(x)`.
    MathAbs = "Math.abs", 0..=255;
    /// `Math.ceil(x)`.
    MathCeil = "Math.ceil", 0..=255;
    /// `Math.floor(x)`.
    MathFloor = "Math.floor", 0..=255;
    /// `Math.round(x)`.
    MathRound = "Math.round", 0..=255;
    /// `Math.trunc(x)`.
    MathTrunc = "Math.trunc", 0..=255;
    /// `Math.sign(x)`.
    MathSign = "Math.sign", 0..=255;
    /// `Math.sqrt(x)`.
    MathSqrt = "Math.sqrt", 0..=255;
    /// `Math.cbrt(x)`.
    MathCbrt = "Math.cbrt", 0..=255;
    /// `Math.pow(x, y)`.
    MathPow = "Math.pow", 0..=255;
    /// `Math.exp(x)`.
    MathExp = "Math.exp", 0..=255;
    /// `Math.expm1(x)`.
    MathExpm1 = "Math.expm1", 0..=255;
    /// `Math.log(x)`.
    MathLog = "Math.log", 0..=255;
    /// `Math.log2(x)`.
    MathLog2 = "Math.log2", 0..=255;
    /// `Math.log10(x)`.
    MathLog10 = "Math.log10", 0..=255;
    /// `Math.log1p(x)`.
    MathLog1p = "Math.log1p", 0..=255;
    /// `Math.sin(x)`.
    MathSin = "Math.sin", 0..=255;
    /// `Math.cos(x)`.
    MathCos = "Math.cos", 0..=255;
    /// `Math.tan(x)`.
    MathTan = "Math.tan", 0..=255;
    /// `Math.asin(x)`.
    MathAsin = "Math.asin", 0..=255;
    /// `Math.acos(x)`.
    MathAcos = "Math.acos", 0..=255;
    /// `Math.atan(x)`.
    MathAtan = "Math.atan", 0..=255;
    /// `Math.atan2(y, x)`.
    MathAtan2 = "Math.atan2", 0..=255;
    /// `Math.sinh(x)`.
    MathSinh = "Math.sinh", 0..=255;
    /// `Math.cosh(x)`.
    MathCosh = "Math.cosh", 0..=255;
    /// `Math.tanh(x)`.
    MathTanh = "Math.tanh", 0..=255;
    /// `Math.asinh(x)`.
    MathAsinh = "Math.asinh", 0..=255;
    /// `Math.acosh(x)`.
    MathAcosh = "Math.acosh", 0..=255;
    /// `Math.atanh(x)`.
    MathAtanh = "Math.atanh", 0..=255;
    /// `Math.hypot(…)`.
    MathHypot = "Math.hypot", 0..=255;
    /// `Math.min(…)`.
    MathMin = "Math.min", 0..=255;
    /// `Math.max(…)`.
    MathMax = "Math.max", 0..=255;
    /// `Math.clz32(x)`.
    MathClz32 = "Math.clz32", 0..=255;
    /// `Math.imul(a, b)`.
    MathImul = "Math.imul", 0..=255;
    /// `Math.fround(x)`.
    MathFround = "Math.fround", 0..=255;
    /// `Math.random()`: from the host's randomness source.
    MathRandom = "Math.random", 0..=255;
    /// `console.log(…)`: to the run's log.
    ConsoleLog = "console.log", 0..=255;
    /// `console.info(…)`.
    ConsoleInfo = "console.info", 0..=255;
    /// `console.warn(…)`.
    ConsoleWarn = "console.warn", 0..=255;
    /// `console.error(…)`.
    ConsoleError = "console.error", 0..=255;
    /// `array.push(…)`: appends, returns the new length.
    Push = ".push", 1..=255;
}

impl NativeId {
    /// Every native, in id order.
    pub fn all() -> &'static [NativeId] {
        ALL
    }
    /// The id as encoded in bytecode.
    pub fn to_u16(self) -> u16 {
        self as u16
    }
    /// The native with this id, if any.
    pub fn from_u16(n: u16) -> Option<NativeId> {
        ALL.get(n as usize).copied()
    }
    /// The name as written in JavaScript: `Math.max`, or `.push` for a method.
    pub fn js_name(self) -> &'static str {
        NAMES[self as usize]
    }
    /// Inclusive bounds on the argument count (a method's receiver included).
    pub fn arity(self) -> (u8, u8) {
        ARITY[self as usize]
    }
    /// True for methods (called on a receiver).
    pub fn is_method(self) -> bool {
        self.js_name().starts_with('.')
    }
    /// Looks up a builtin function by its full name (`Math.max`) or a method by `.name`.
    pub fn lookup(name: &str) -> Option<NativeId> {
        NAMES.iter().position(|n| *n == name).map(|i| ALL[i])
    }
}

/// Numeric constants of the `Math` namespace, resolved at compile time.
pub const MATH_CONSTANTS: &[(&str, f64)] = &[
    ("PI", std::f64::consts::PI),
    ("E", std::f64::consts::E),
    ("LN2", std::f64::consts::LN_2),
    ("LN10", std::f64::consts::LN_10),
    ("LOG2E", std::f64::consts::LOG2_E),
    ("LOG10E", std::f64::consts::LOG10_E),
    ("SQRT2", std::f64::consts::SQRT_2),
    ("SQRT1_2", std::f64::consts::FRAC_1_SQRT_2),
];
