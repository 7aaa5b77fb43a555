// Runs the in-subset part of tc39/test262 against AJS, by hand (see README.md):
//
//   node tests/test262/run.mjs [--test262 DIR] [--ajs BIN] [--only PATH-PREFIX] [--verbose]
//
// Selection, adaptation and classification are described in README.md; the tables below are the
// whole rule: a test is in or out by its directory, its metadata, or the AJS refusal its adapted
// source meets (a documented decision). Only DEVIATIONS names single tests, each with its decision.

import { readFileSync, writeFileSync, readdirSync, statSync, mkdtempSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join, relative, dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const T262 = arg('--test262', process.env.TEST262 || '/tmp/test262');
const AJS = arg('--ajs', join(here, '../../target/release/ajs'));
const ONLY = arg('--only', '');
const VERBOSE = process.argv.includes('--verbose');

// --- Selection: directories of what the subset has (docs/language.md §2-§8) -----------------
const STRING_METHODS = 'at charAt charCodeAt codePointAt concat endsWith includes indexOf lastIndexOf localeCompare match matchAll normalize padEnd padStart repeat replace replaceAll search slice split startsWith substring toLowerCase toString toUpperCase trim trimEnd trimStart';
const ARRAY_METHODS = 'at concat every fill filter find findIndex findLast findLastIndex flat flatMap forEach includes indexOf join lastIndexOf map pop push reduce reduceRight reverse shift slice some sort splice toReversed toSorted toString unshift';
const SCOPE = [
  ...STRING_METHODS.split(' ').map((m) => `built-ins/String/prototype/${m}`),
  'built-ins/String/fromCharCode', 'built-ins/String/fromCodePoint',
  'annexB/built-ins/String/prototype/substr',
  ...ARRAY_METHODS.split(' ').map((m) => `built-ins/Array/prototype/${m}`),
  'built-ins/Array/isArray', 'built-ins/Array/of',
  'built-ins/Math', 'built-ins/JSON/parse', 'built-ins/JSON/stringify',
  ...'isFinite isInteger isNaN isSafeInteger parseFloat parseInt MAX_SAFE_INTEGER MIN_SAFE_INTEGER EPSILON MAX_VALUE MIN_VALUE NaN NEGATIVE_INFINITY POSITIVE_INFINITY'
    .split(' ').map((m) => `built-ins/Number/${m}`),
  'built-ins/Number/prototype/toFixed', 'built-ins/Number/prototype/toPrecision',
  'built-ins/Number/prototype/toString',
  ...'keys values entries fromEntries hasOwn assign'.split(' ').map((m) => `built-ins/Object/${m}`),
  'built-ins/RegExp/prototype/exec', 'built-ins/RegExp/prototype/test',
  'built-ins/RegExp/prototype/source', 'built-ins/RegExp/prototype/flags',
  'built-ins/RegExp/named-groups', 'built-ins/RegExp/dotall', 'built-ins/RegExp/S15.10.2',
  'built-ins/RegExp/unicode_', 'built-ins/RegExp/character-class-escape',
  ...'parseInt parseFloat isNaN isFinite encodeURI encodeURIComponent decodeURI decodeURIComponent NaN Infinity undefined'
    .split(' ').map((m) => `built-ins/${m}`),
  ...('addition subtraction multiplication division modulus exponentiation concatenation conditional ' +
    'logical-and logical-or logical-not coalesce logical-assignment compound-assignment assignment ' +
    'template-literal typeof unary-minus unary-plus greater-than greater-than-or-equal less-than ' +
    'less-than-or-equal strict-equals strict-does-not-equals optional-chaining grouping array object ' +
    'arrow-function postfix-increment postfix-decrement prefix-increment prefix-decrement ' +
    'property-accessors member-expression call')
    .split(' ').map((d) => `language/expressions/${d}/`),
  ...'if while block try let const break continue return empty expression'
    .split(' ').map((d) => `language/statements/${d}/`),
  ...'literals white-space line-terminators comments asi punctuators keywords reserved-words types block-scope computed-property-names identifiers future-reserved-words statementList destructuring'
    .split(' ').map((d) => `language/${d}/`),
];

// Metadata a test may carry and still be in the subset.
const OK_FLAGS = new Set(['onlyStrict', 'generated']);
const OK_INCLUDES = new Set(['compareArray.js']);
const OK_FEATURES = new Set(('arrow-function let const template destructuring-binding ' +
  'default-parameters exponentiation optional-chaining coalesce-expression ' +
  'logical-assignment-operators numeric-separator-literal object-spread object-rest ' +
  'optional-catch-binding computed-property-names json-superset well-formed-json-stringify u180e ' +
  'string-trimming String.fromCodePoint String.prototype.at String.prototype.endsWith ' +
  'String.prototype.includes String.prototype.matchAll String.prototype.replaceAll ' +
  'String.prototype.trimEnd String.prototype.trimStart Array.prototype.at Array.prototype.flat ' +
  'Array.prototype.flatMap Array.prototype.includes array-find-from-last change-array-by-copy ' +
  'Object.fromEntries Object.hasOwn stable-array-sort regexp-dotall regexp-named-groups ' +
  'regexp-unicode-property-escapes').split(' '));

// --- Classification: AJS refusals that are documented decisions ----------------------------
// A compile error (or, for the last rows, a run-time error) matching one of these puts the test
// out of the subset; any other error is a failure.
const REFUSALS = [
  [/Unsupported statement type|AJS has no `var`|'throw' is not supported|'new' keyword|Classes are not supported|'this' is not supported|`finally` is not supported|member assignment|function expression|arrow functions are only allowed|async functions and generators|await/, 'refused syntax (decision 6)'],
  [/operator is not supported|comma operator|only allowed as statements|chained assignment|assignment inside an expression/, 'refused operators (decision 41)'],
  [/takes a (callback|comparator) written as an arrow|a callback cannot assign|only atoms, builtins .* can be called/, 'callbacks and helpers, no function values (decision 10)'],
  [/Helper '.*' expects|Helper '.*' parameters must be plain|spread arguments are only supported for builtins|Duplicate helper function name/, 'helpers are plain functions (decision 45)'],
  [/Backreferences|backreferences|Lookahead|Lookbehind|sticky|RegExp is not available|lone surrogate/, 'regular expressions (decision 23)'],
  [/is not available|is not supported in AJS|not callable in AJS|Security Error: Access to '(constructor|__proto__|prototype)'|is a function: call it|cannot be used as a value|too many arguments to|argument\(s\) in AJS|getters and setters|methods in object literals|tagged templates/, 'builtins are not values; no prototypes or reflection (decision 42)'],
  [/Cannot use '.*' on an (array|object)|Cannot use an? (array|object) in a template|Cannot join a nested array/, 'no implicit conversion of arrays and objects (decision 2)'],
  [/before initialization|is not defined/, 'name errors are compile errors (decision 44)'],
];
// A test-specific deviation a documented decision explains (the test's own assertion fails).
const DEVIATIONS = {
  'built-ins/Array/prototype/indexOf/15.4.4.14-9-b-1.js': 'arrays have no holes (decision 43)',
  'built-ins/Array/prototype/lastIndexOf/15.4.4.15-8-b-1.js': 'arrays have no holes (decision 43)',
  'built-ins/String/prototype/includes/String.prototype.includes_lengthProp.js': 'builtins are not values; no prototypes or reflection (decision 42)',
  'language/types/object/S8.6.2_A3.js': 'builtins are not values; no prototypes or reflection (decision 42)',
  'language/expressions/typeof/string.js': 'Date() is a date value (decision 12)',
  'language/types/string/S8.4_A8.js': '== never coerces (decision 43)',
};

// --- Adaptation ------------------------------------------------------------------------------
// The harness as plain AJS helpers (AJS has no closures or `this`; errors are raised with Error).
const PRELUDE = `
function __isSame(a, b) {
  if (a !== a) { return b !== b }
  if (a === 0 && b === 0) { return 1 / a === 1 / b }
  return a === b
}
function __fmt(v) {
  if (typeof v === 'string' || (typeof v === 'object' && v !== null)) { return JSON.stringify(v) }
  if (v === 0 && 1 / v < 0) { return '-0' }
  return '' + v
}
function __assert(c, m = '') {
  if (c !== true) { Error('Expected true but got ' + __fmt(c) + ' ' + m) }
  return true
}
function __sameValue(a, b, m = '') {
  if (!__isSame(a, b)) { Error('Expected SameValue(' + __fmt(a) + ', ' + __fmt(b) + ') ' + m) }
  return true
}
function __notSameValue(a, b, m = '') {
  if (__isSame(a, b)) { Error('Expected not SameValue(' + __fmt(a) + ', ' + __fmt(b) + ') ' + m) }
  return true
}
function __arraysEqual(a, b) {
  if (a.length !== b.length) { return false }
  let i = 0
  while (i < a.length) {
    if (!__isSame(a[i], b[i])) { return false }
    i++
  }
  return true
}
function __compareArray(a, b, m = '') {
  if (!__arraysEqual(a, b)) { Error('Expected ' + __fmt(a) + ' and ' + __fmt(b) + ' to have the same contents ' + m) }
  return true
}
`;

// Blanks the insides of strings, templates (not their \${} code), comments and regex literals,
// keeping every offset, so the rewrites below only ever see code.
function mask(src) {
  const out = src.split('');
  const blank = (a, b) => { for (let k = a; k < b; k++) if (out[k] !== '\n') out[k] = ' '; };
  const braces = []; // for each open '{': true when it opened a template substitution
  let i = 0;
  let prev = ''; // last significant character of code
  let prevWord = '';
  const template = () => { // at a '`' or a '}' that closes a substitution: scan template text
    const start = i + 1;
    i++;
    while (i < src.length && src[i] !== '`' && !(src[i] === '$' && src[i + 1] === '{')) i += src[i] === '\\' ? 2 : 1;
    blank(start, i);
    if (src[i] === '$') { braces.push(true); i += 2; prev = '{'; } else { i++; prev = 'x'; }
  };
  while (i < src.length) {
    const c = src[i];
    if (c === '/' && src[i + 1] === '/') { const e = src.indexOf('\n', i); const end = e < 0 ? src.length : e; blank(i, end); i = end; continue; }
    if (c === '/' && src[i + 1] === '*') { const e = src.indexOf('*/', i + 2); const end = e < 0 ? src.length : e + 2; blank(i, end); i = end; continue; }
    if (c === "'" || c === '"') {
      const start = ++i;
      while (i < src.length && src[i] !== c && src[i] !== '\n') i += src[i] === '\\' ? 2 : 1;
      blank(start, i); i++; prev = 'x'; continue;
    }
    if (c === '`') { template(); continue; }
    if (c === '{') { braces.push(false); }
    if (c === '}') { if (braces.pop()) { template(); continue; } }
    if (c === '/' && ('(,=:[!&|?{};+-*%<>~^'.includes(prev) || prev === '' ||
        /^(return|typeof|case|do|else|in|of|void|throw|delete)$/.test(prevWord))) {
      const start = ++i;
      let cls = false;
      while (i < src.length && src[i] !== '\n' && (cls || src[i] !== '/')) {
        if (src[i] === '[') cls = true; else if (src[i] === ']') cls = false;
        i += src[i] === '\\' ? 2 : 1;
      }
      blank(start, i); i++; prev = 'x'; prevWord = ''; continue;
    }
    if (/[A-Za-z0-9_$]/.test(c)) {
      const m = /^[A-Za-z0-9_$]+/.exec(src.slice(i, i + 64));
      prevWord = m[0]; prev = 'x'; i += m[0].length; continue;
    }
    if (!/\s/.test(c)) { prev = c; prevWord = ''; }
    i++;
  }
  return out.join('');
}

// Index just past the bracket group opening at `i` of the masked text.
function close(m, i) {
  if (i < 0) return -1;
  let depth = 0;
  for (; i < m.length; i++) {
    if ('([{'.includes(m[i])) depth++;
    else if (')]}'.includes(m[i]) && --depth === 0) return i + 1;
  }
  return -1;
}

// Splits the masked range [a, b) at top-level commas; returns [start, end) pairs.
function splitArgs(m, a, b) {
  const parts = [];
  let start = a;
  for (let i = a; i < b; i++) {
    if ('([{'.includes(m[i])) { i = close(m, i) - 1; if (i < 0) return []; continue; }
    if (m[i] === ',') { parts.push([start, i]); start = i + 1; }
  }
  if (m.slice(start, b).trim()) parts.push([start, b]);
  return parts;
}

// `assert.throws(E, function () { body })` (or an arrow) becomes a block that requires the body
// to raise; the error's type cannot be checked (the catch binding is the message, decision 32).
function rewriteThrows(src) {
  for (;;) {
    const m = mask(src);
    const at = m.search(/\bassert\.throws\s*\(/);
    if (at < 0) return src;
    const open = m.indexOf('(', at);
    const end = close(m, open);
    if (end < 0) return null;
    const args = splitArgs(m, open + 1, end - 1);
    if (args.length < 2) return null;
    const [fa, fb] = args[1];
    const fn = m.slice(fa, fb);
    const f = /^\s*(?:function\s*[\w$]*\s*\(\s*\)\s*|\(\s*\)\s*=>\s*)\{/.exec(fn);
    let body;
    if (f) {
      const bodyOpen = fa + f[0].length - 1;
      if (close(m, bodyOpen) !== fb - (fn.length - fn.trimEnd().length)) return null;
      body = src.slice(bodyOpen + 1, close(m, bodyOpen) - 1);
    } else {
      const a = /^\s*\(\s*\)\s*=>/.exec(fn);
      if (!a) return null;
      body = src.slice(fa + a[0].length, fb);
    }
    const name = src.slice(...args[0]).trim();
    const block = `{ let __threw = false\n try {\n${body}\n} catch { __threw = true }\n` +
      `if (!__threw) { Error('Expected a ${name} to be thrown') } }`;
    src = src.slice(0, at) + block + src.slice(end);
  }
}

// `assert.sameValue(typeof String.prototype.at, 'function')`, a test's check that the builtin
// exists, is dropped: AJS has the method but never handles a builtin as a value (decision 42).
function dropFeatureChecks(src) {
  for (;;) {
    const m = mask(src);
    // (the mask blanks the string: check its text in the source)
    const hit = /\bassert\.sameValue\s*\(\s*typeof\s+[\w$.]+\s*,\s*(['"]) {8}\1/.exec(m);
    if (!hit || !src.slice(hit.index, hit.index + hit[0].length).endsWith('function' + hit[1])) return src;
    const end = close(m, m.indexOf('(', hit.index));
    if (end < 0) return src;
    src = src.slice(0, hit.index) + src.slice(m[end] === ';' ? end + 1 : end);
  }
}

// Rewrites of code (masked) positions, as [regex on the mask, replacement].
const REWRITES = [
  [/\bthrow\s+new\s+Test262Error\s*\(\s*\)/g, "Error('Test262Error')"],
  [/\bthrow\s+new\s+Test262Error\s*\(/g, 'Error('],
  [/\bthrow\s+new\s+Test262Error\b/g, "Error('Test262Error')"],
  [/\$DONOTEVALUATE\s*\(\s*\)/g, "Error('Test262: This statement should not be evaluated.')"],
  [/\$ERROR\s*\(/g, 'Error('],
  [/\bassert\.sameValue\s*\(/g, '__sameValue('],
  [/\bassert\.notSameValue\s*\(/g, '__notSameValue('],
  [/\bassert\.compareArray\s*\(/g, '__compareArray('],
  [/\bassert\._isSameValue\s*\(/g, '__isSame('],
  [/(?<![.\w$])assert\s*\(/g, '__assert('],
  [/(?<![.\w$])compareArray\s*\(/g, '__arraysEqual('],
];
// `var` at the start of a statement becomes `let`, as AJS's refusal of `var` says to write.
const VAR = [/(?<=(?:^|[;{}(])[ \t]*)var\b/gm, 'let'];

function rewrite(src, rewrites) {
  for (const [re, to] of rewrites) {
    const m = mask(src);
    let out = '';
    let last = 0;
    for (const hit of m.matchAll(re)) {
      out += src.slice(last, hit.index) + to;
      last = hit.index + hit[0].length;
    }
    src = out + src.slice(last);
  }
  return src;
}

// Splits top-level `function` declarations (they become AJS helpers) from the statements (they
// become the entry function's body).
function hoist(src) {
  const m = mask(src);
  const fns = [];
  let body = '';
  let last = 0;
  let depth = 0;
  for (let i = 0; i < m.length; i++) {
    const c = m[i];
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (depth === 0 && /^function\b/.test(m.slice(i, i + 9)) && !/[\w$.]$/.test(m.slice(0, i)) &&
      /(^|[;}\n])\s*$/.test(m.slice(Math.max(0, i - 200), i))) {
      const end = close(m, m.indexOf('{', close(m, m.indexOf('(', i))));
      if (end < 0) break;
      body += src.slice(last, i);
      fns.push(src.slice(i, end));
      last = end;
      i = end - 1;
    }
  }
  return { fns, body: body + src.slice(last) };
}

function meta(src) {
  const y = /\/\*---([\s\S]*?)---\*\//.exec(src);
  const text = y ? y[1] : '';
  const list = (key) => {
    const inline = new RegExp(`^${key}:\\s*\\[([^\\]]*)\\]`, 'm').exec(text);
    if (inline) return inline[1].split(',').map((s) => s.trim()).filter(Boolean);
    const block = new RegExp(`^${key}:\\s*\\n((?:\\s+-.*\\n?)*)`, 'm').exec(text);
    return block ? block[1].split('\n').map((s) => s.replace(/^\s*-\s*/, '').trim()).filter(Boolean) : [];
  };
  const neg = /^negative:\s*\n\s+phase:\s*(\w+)\s*\n\s+type:\s*(\w+)/m.exec(text) ||
    /^negative:\s*\n\s+type:\s*(\w+)\s*\n\s+phase:\s*(\w+)/m.exec(text);
  let negative = null;
  if (neg) negative = /phase:\s*(\w+)/.exec(neg[0])[1];
  return { flags: list('flags'), includes: list('includes'), features: list('features'), negative, code: y ? src.slice(y.index + y[0].length) : src };
}

// Why a test is out of the subset by its metadata or harness use, or null.
function metaSkip(t) {
  const f = t.flags.find((x) => !OK_FLAGS.has(x));
  if (f) return `flag ${f}`;
  const inc = t.includes.find((x) => !OK_INCLUDES.has(x));
  if (inc) return `harness ${inc}`;
  const feat = t.features.find((x) => !OK_FEATURES.has(x));
  if (feat) return `feature ${feat}`;
  if (t.negative === 'resolution') return 'negative: resolution (modules)';
  return null;
}

function adapt(code, negative) {
  const thrown = rewriteThrows(dropFeatureChecks(code));
  if (thrown === null) return { skip: 'harness assert.throws with a function value' };
  // A negative test keeps its `var`s: rewriting them could remove the error under test.
  const src = rewrite(thrown, negative ? REWRITES : [...REWRITES, VAR]);
  const left = /\b(assert\.\w+|Test262Error|\$262|\$DONE|verifyProperty|verify\w+Property|isConstructor)\b/.exec(mask(src));
  if (left) return { skip: `harness ${left[1]}` };
  const { fns, body } = hoist(src);
  if (/\breturn\b/.test(outsideFunctions(mask(body)))) return { skip: 'a return outside functions (the adaptation wraps the test in one)' };
  const source = `${PRELUDE}\n${fns.join('\n')}\nfunction __test262_main() {\n${body}\nreturn { ok: true }\n}\n`;
  const names = (re) => new Set([...mask(code).matchAll(re)].map((x) => x[1]));
  const declared = names(/\b(?:var|let|const|function)\s+([\w$]+)/g);
  const vars = names(/\bvar\s+([\w$]+)/g);
  return { source, declared, vars, hoisted: fns.length > 0, usesVar: new RegExp(VAR[0]).test(mask(code)) };
}

// The masked text with the bodies of function expressions and arrows blanked.
function outsideFunctions(m) {
  for (const f of m.matchAll(/\bfunction\b[^{]*\{|=>\s*\{/g)) {
    const open = f.index + f[0].length - 1;
    const end = close(m, open);
    if (end > open) m = m.slice(0, open) + ' '.repeat(end - open) + m.slice(end);
  }
  return m;
}

// --- Running ---------------------------------------------------------------------------------
function walk(dir, out = []) {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (p.endsWith('.js') && !p.includes('_FIXTURE')) out.push(p);
  }
  return out;
}

const testRoot = join(T262, 'test');
const all = [...new Set([...walk(join(testRoot, 'built-ins')), ...walk(join(testRoot, 'language')),
  ...walk(join(testRoot, 'annexB/built-ins/String'))])]
  .map((p) => relative(testRoot, p))
  .filter((p) => SCOPE.some((s) => p.startsWith(s)) && p.startsWith(ONLY))
  .sort();

const skipped = {};
const outOfSubset = {}; // reason -> count (out of the subset after running)
const tests = [];
for (const path of all) {
  const t = meta(readFileSync(join(testRoot, path), 'utf8'));
  const why = metaSkip(t) || (() => { const a = adapt(t.code, t.negative); t.adapted = a; return a.skip; })();
  if (why) { skipped[why] = (skipped[why] || 0) + 1; continue; }
  tests.push({ path, ...t });
}

const work = mkdtempSync(join(tmpdir(), 'ajs-test262-'));
const FILES = 8;
const files = [];
for (let f = 0; f < FILES; f++) {
  const cases = tests.filter((_, i) => i % FILES === f).map((t) => ({
    name: t.path,
    agent: { source: t.adapted.source, args: {}, fuel: 1000000, timeoutMs: 20000, maxSourceBytes: 10000000 },
    expect: { result: { ok: true }, error: null },
  }));
  const file = join(work, `cases-${f}.json`);
  writeFileSync(file, JSON.stringify(cases));
  files.push(file);
}
let report;
try {
  report = execFileSync(AJS, ['cases', ...files], { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] });
} catch (e) {
  report = e.stdout;
}
// Every case must have run: a case file `ajs cases` could not read would otherwise look all-pass.
const total = /(\d+) passed, (\d+) failed\s*$/.exec(report);
if (!total || +total[1] + +total[2] !== tests.length) {
  console.error(`ajs cases ran ${total ? +total[1] + +total[2] : 'no'} cases of ${tests.length}:\n${report.slice(-2000)}`);
  process.exit(1);
}
const outcomes = new Map(); // failing cases only: name -> outcome
for (const line of report.split('\n')) {
  if (!line.startsWith('FAIL ')) continue;
  const name = line.slice(5, line.indexOf(': '));
  const k = line.lastIndexOf(' [outcome ');
  outcomes.set(name, k < 0 ? { error: { message: line, kind: 'crash' } } : JSON.parse(line.slice(k + 10, -1)));
}

// The documented decision an error message shows the test to be outside of, or null.
function refusalOf(t, message) {
  const row = REFUSALS.find(([re]) => re.test(message));
  if (!row) {
    if (t.adapted.usesVar && /has already been declared/.test(message)) return 'refused syntax (decision 6)';
    return null;
  }
  // At run time only decision 2 and the forbidden names raise (the others are compile errors).
  const compile = / at <source>:\d+:\d+$/.test(message);
  if (!compile && !/^Cannot |^Security Error/.test(message)) return null;
  const name = /^'([\w$]+)' is not defined|^Cannot access '([\w$]+)' before/.exec(message);
  const id = name && (name[1] || name[2]);
  // a helper reading the test's variable: no closures; else reading a `var` before it: hoisting
  if (name?.[1] && t.adapted.hoisted && t.adapted.declared.has(id)) return 'callbacks and helpers, no function values (decision 10)';
  if (id && t.adapted.vars.has(id)) return 'refused syntax (decision 6)';
  return row[1];
}

const results = { pass: [], fail: [] };
const verdicts = [];
for (const t of tests) {
  const o = outcomes.get(t.path);
  const err = o?.error;
  const kind = err?.kind;
  const refusal = kind === 'input' || kind === 'guest' ? refusalOf(t, err.message) : null;
  let verdict;
  if (t.negative === 'parse' || t.negative === 'early') verdict = kind === 'input' ? refusal || 'pass' : 'fail';
  else if (t.negative === 'runtime') verdict = refusal || (err && kind !== 'input' ? 'pass' : 'fail');
  else if (!o) verdict = 'pass';
  else verdict = refusal || DEVIATIONS[t.path] || 'fail';
  verdicts.push({ path: t.path, verdict, kind, message: err?.message });
  if (verdict === 'pass' || verdict === 'fail') results[verdict].push({ t, o });
  else outOfSubset[verdict] = (outOfSubset[verdict] || 0) + 1;
}

writeFileSync(join(work, 'verdicts.json'), JSON.stringify(verdicts, null, 1));
const n = results.pass.length + results.fail.length;
const pct = n ? ((100 * results.pass.length) / n).toFixed(2) : '0';
let rev = 'an unknown commit';
try { rev = execFileSync('git', ['-C', T262, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(); } catch { /* not a git checkout */ }
console.log(`test262 at ${rev}: ${all.length} tests in the scope directories`);
console.log('\nleft out by metadata or harness:');
for (const [k, v] of Object.entries(skipped).sort((a, b) => b[1] - a[1])) console.log(`  ${v}\t${k}`);
console.log('\nleft out by a documented AJS refusal:');
for (const [k, v] of Object.entries(outOfSubset).sort((a, b) => b[1] - a[1])) console.log(`  ${v}\t${k}`);
const byDir = {};
for (const { t } of results.fail) { const d = dirname(t.path); byDir[d] = (byDir[d] || 0) + 1; }
console.log('\nfailures by directory:');
for (const [k, v] of Object.entries(byDir).sort()) console.log(`  ${v}\t${k}`);
console.log('\nfailures:');
for (const { t, o } of results.fail) {
  const msg = o ? (o.error ? `${o.error.kind}: ${o.error.message}` : `result ${JSON.stringify(o.result)}`) : 'ran (a negative test)';
  console.log(`  ${t.path}${t.negative ? ` [negative ${t.negative}]` : ''}: ${msg.slice(0, VERBOSE ? 10000 : 200)}`);
}
const crashes = results.fail.filter(({ o }) => o?.error && !['guest', 'input'].includes(o.error.kind)).length;
console.log(`\nin subset: ${results.pass.length} of ${n} pass (${pct}%), ${crashes} of the failures crashed ` +
  `(panic, fuel, timeout); cases in ${work}`);
