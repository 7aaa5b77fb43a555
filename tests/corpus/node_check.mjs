// Checks the expected results of a corpus file against Node (node 20+):
//
//   node tests/corpus/node_check.mjs tests/corpus/model_tasks.json [--bless]
//
// A case opts in with a `node` key (ignored by `ajs cases`):
//   "js"   - the agent is plain JavaScript apart from its entry's parameter list; Node's result
//            is the ground truth.
//   "shim" - the agent also uses AJS atoms or builtins (httpFetch, llmPredict, host atoms from the
//            case's scripted capabilities, parallel, Error(...) that raises, Date, Set, template,
//            hash, ...); they are emulated below from docs/ajs-for-models.md and
//            docs/language.md, so the result is checked against the documented meaning.
// Cases without `node` (hand-computed) are skipped. The entry's AJS parameter list
// (`{ a, b = 1, c: 'ex', items: [{ id: 1 }] }`) is not JavaScript: it is rewritten to plain names,
// its defaults and examples applied, and the case's `args` laid over them.
// Without --bless, a mismatch is printed and the exit code is 1; with --bless, `expect.result`
// (and `expect.calls` for shim cases) are rewritten from Node's run.

import { readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import vm from 'node:vm';

const [file, ...flags] = process.argv.slice(2);
const bless = flags.includes('--bless');
if (!file) {
  console.error('usage: node node_check.mjs FILE.json [--bless]');
  process.exit(2);
}

// Index just past the string literal or bracketed group starting at `i`.
function skip(src, i) {
  const q = src[i];
  if (q === "'" || q === '"' || q === '`') {
    i++;
    while (i < src.length && src[i] !== q) i += src[i] === '\\' ? 2 : 1;
    return i + 1;
  }
  let depth = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === "'" || c === '"' || c === '`') {
      i = skip(src, i);
      continue;
    }
    if ('([{'.includes(c)) depth++;
    if (')]}'.includes(c) && --depth === 0) return i + 1;
    i++;
  }
  throw new Error('unbalanced brackets in ' + src.slice(0, 60));
}

// Splits `text` at `sep` outside brackets and strings.
function topLevel(text, sep) {
  const parts = [];
  let start = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (`'"\`([{`.includes(c)) {
      i = skip(text, i);
      continue;
    }
    if (c === sep) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
    i++;
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

// The entry's name, the source with its parameters made plain, and the defaults object's code.
function rewrite(src) {
  const heads = [...src.matchAll(/^function\s+([A-Za-z_$][\w$]*)\s*\(/gm)];
  const last = heads[heads.length - 1];
  const open = last.index + last[0].length - 1;
  const close = skip(src, open);
  const inner = src.slice(open + 1, close - 1).trim();
  if (!inner.startsWith('{')) throw new Error('entry must take one destructured object');
  const names = [];
  const defaults = [];
  for (const entry of topLevel(inner.slice(1, -1), ',')) {
    const m = entry.match(/^([A-Za-z_$][\w$]*)\s*(?:([:=])\s*([\s\S]*))?$/);
    if (!m) throw new Error('cannot read parameter ' + entry);
    names.push(m[1]);
    if (m[3] !== undefined) defaults.push(`${m[1]}: ${m[3]}`);
  }
  const plain = src.slice(0, open + 1) + `{ ${names.join(', ')} }` + src.slice(close - 1);
  return { entry: last[1], plain, defaults: `({ ${defaults.join(', ')} })` };
}

// Scripted capabilities as the conformance README describes them.
function scripted(caps, calls) {
  const answer = (key, rules, input, probe) => {
    calls[key] = (calls[key] ?? 0) + 1;
    for (const r of rules) {
      const m = r.match ?? {};
      if (!probe(m)) continue;
      if ('respond' in r) return structuredClone(r.respond);
      if ('throw' in r) throw r.throw;
      if (r.echo) return structuredClone(input);
      if (r.upper) return input.toUpperCase();
      if ('lengthTemplate' in r) return r.lengthTemplate.replace('{n}', String(input.length));
      throw new Error('unsupported rule ' + JSON.stringify(r));
    }
    throw 'no scripted answer';
  };
  const g = {};
  for (const [key, rules] of Object.entries(caps ?? {})) {
    if (key === 'fetch') {
      g.httpFetch = ({ url, method = 'GET' }) => {
        const u = new URL(url);
        return answer(key, rules, null, (m) =>
          (m.host === undefined || m.host === u.hostname) &&
          (m.method === undefined || m.method.toUpperCase() === method.toUpperCase()) &&
          (m.urlPrefix === undefined || url.startsWith(m.urlPrefix)));
      };
    } else if (key === 'llm') {
      g.llmPredict = ({ prompt }) =>
        answer(key, rules, prompt, (m) => m.promptContains === undefined || prompt.includes(m.promptContains));
    } else {
      g[key] = (input) => answer(key, rules, input, () => true);
    }
  }
  return g;
}

// A Date of AJS: UTC, fields instead of getters, crosses out as its ISO string.
function ajsDate(x) {
  const t = x === undefined ? globalThis.Date.now() : new globalThis.Date(x).getTime();
  if (Number.isNaN(t)) throw 'Invalid date: ' + x;
  const d = new globalThis.Date(t);
  const two = (n) => String(n).padStart(2, '0');
  const f = {
    year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate(),
    hours: d.getUTCHours(), minutes: d.getUTCMinutes(), seconds: d.getUTCSeconds(),
  };
  const units = { ms: 1, milliseconds: 1, seconds: 1e3, minutes: 6e4, hours: 36e5, days: 864e5 };
  return {
    ...f, value: d.toISOString(), timestamp: t, dayOfWeek: d.getUTCDay(),
    getTime: () => t, toISOString: () => d.toISOString(), toJSON: () => d.toISOString(),
    isBefore: (o) => t < o.timestamp, isAfter: (o) => t > o.timestamp,
    diff: (o, unit = 'ms') => Math.trunc((t - o.timestamp) / units[unit]) + 0,
    add: (a) => ajsDate(globalThis.Date.UTC(f.year + (a.years ?? 0), f.month - 1 + (a.months ?? 0),
      f.day + (a.days ?? 0), f.hours + (a.hours ?? 0), f.minutes + (a.minutes ?? 0),
      f.seconds + (a.seconds ?? 0), d.getUTCMilliseconds() + (a.ms ?? 0))),
    format: (fmt = 'ISO') => {
      const date = `${f.year}-${two(f.month)}-${two(f.day)}`;
      const time = `${two(f.hours)}:${two(f.minutes)}:${two(f.seconds)}`;
      if (fmt === 'ISO') return d.toISOString();
      if (fmt === 'date') return date;
      if (fmt === 'time') return time;
      return [['YYYY', String(f.year)], ['MM', two(f.month)], ['DD', two(f.day)], ['HH', two(f.hours)],
        ['mm', two(f.minutes)], ['ss', two(f.seconds)]].reduce((s, [k, v]) => s.replace(k, v), fmt);
    },
  };
}

// A Set of AJS: a factory, `remove`, `toArray`, set algebra, crosses out as an array.
function ajsSet(items = []) {
  const s = new globalThis.Set(items);
  const arr = (o) => (Array.isArray(o) ? o : o.toArray());
  const self = {
    add: (x) => { s.add(x); return self; },
    remove: (x) => s.delete(x),
    clear: () => s.clear(),
    has: (x) => s.has(x),
    get size() { return s.size; },
    toArray: () => [...s],
    union: (o) => ajsSet([...s, ...arr(o)]),
    intersection: (o) => ajsSet([...s].filter((x) => arr(o).includes(x))),
    diff: (o) => ajsSet([...s].filter((x) => !arr(o).includes(x))),
    toJSON: () => [...s],
  };
  return self;
}

function shims(caps, calls) {
  return {
    ...scripted(caps, calls),
    Error: (m) => { throw String(m); },
    Date: ajsDate,
    Set: ajsSet,
    parallel: (items) => items,
    template: ({ tmpl, vars }) => tmpl.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k) => String(vars[k])),
    hash: ({ value }) => createHash('sha256').update(typeof value === 'string' ? value : JSON.stringify(value)).digest('hex'),
    pick: ({ obj, keys }) => Object.fromEntries(keys.filter((k) => k in obj).map((k) => [k, obj[k]])),
    omit: ({ obj, keys }) => Object.fromEntries(Object.entries(obj).filter(([k]) => !keys.includes(k))),
    merge: ({ a, b }) => ({ ...a, ...b }),
    keys: ({ obj }) => Object.keys(obj),
    jsonParse: ({ str }) => JSON.parse(str),
    jsonStringify: ({ value }) => JSON.stringify(value),
    Schema: { response: (name, example) => ({ type: 'json_schema', name, example }) },
  };
}

// JSON with object keys sorted (the corpus compares objects in any key order).
function canon(v) {
  return JSON.stringify(v, (_, x) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]]))
      : x);
}

const cases = JSON.parse(readFileSync(file, 'utf8'));
let checked = 0;
let failed = 0;
for (const c of cases) {
  if (!c.node || !c.agent) continue;
  checked++;
  const calls = {};
  const globals = c.node === 'shim' ? shims(c.capabilities, calls) : {};
  const { entry, plain, defaults } = rewrite(c.agent.source);
  const ctx = vm.createContext({ ...globals, __args: c.agent.args ?? {} });
  let got;
  try {
    vm.runInContext(plain, ctx);
    const defs = vm.runInContext(defaults, ctx);
    const args = { ...defs, ...ctx.__args };
    const value = vm.runInContext(entry, ctx)(args);
    got = { result: JSON.parse(JSON.stringify(value ?? null)) };
  } catch (e) {
    got = { error: typeof e === 'string' ? e : String(e?.message ?? e) };
  }
  if (bless && got.error === undefined) {
    c.expect.result = got.result;
    if (c.node === 'shim' && Object.keys(calls).length) c.expect.calls = calls;
    continue;
  }
  const same = got.error === undefined && canon(got.result) === canon(c.expect.result);
  const callsOk = c.node !== 'shim' || !c.expect.calls || canon(calls) === canon(c.expect.calls);
  if (!same || !callsOk) {
    failed++;
    console.log(`${c.name}:\n  expected ${canon(c.expect.result)} calls ${canon(c.expect.calls ?? {})}` +
      `\n  node     ${canon(got)} calls ${canon(calls)}`);
  }
}
if (bless) {
  const indent = (readFileSync(file, 'utf8').match(/^\[\n( +)/) ?? [, ' '])[1].length;
  writeFileSync(file, JSON.stringify(cases, null, indent) + '\n');
}
console.log(`${checked} checked against node, ${failed} differ`);
process.exit(failed ? 1 : 0);
