#!/usr/bin/env python3
# Peak RSS of `ajs eval CODE --fuel 1e11` for each hostile memory shape (docs/PERFORMANCE.md,
# "Memory: real bytes and peak RSS"): python3 benches/peak_rss.py target/release/ajs [FILTER]
import resource, subprocess, sys, json, time, os
ajs = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else None
L = "let a = []\nwhile (true) { a.push(%s) }"
shapes = {
 "obj_a1": L % "{a:1}",
 "arr1": L % "[1]",
 "empty_arr": L % "[]",
 "empty_obj": L % "{}",
 "set1": L % "Set([1])",
 "regex": L % "/a/",
 "regex_test": "let a = []\nwhile (true) { let r = /a+b/\n r.test('aaab')\n a.push(r) }",
 "date": L % "Date(0)",
 "num": L % "1",
 "short_str": "let a = []\nlet i = 0\nwhile (true) { a.push('x' + i)\n i++ }",
 "long_str": "let a = []\nlet s = 'x'.repeat(100000)\nwhile (true) { a.push(s + 'y') }",
 "str_1k": "let a = []\nlet s = 'x'.repeat(1000)\nwhile (true) { a.push(s + 'y') }",
 "many_keys": "let r = []\nwhile (true) { let e = []\n let i = 0\n while (i < 100000) { e.push(['k' + i, i])\n i++ }\n r.push(Object.fromEntries(e)) }",
 "objs_9keys": L % "{a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9}",
 "objs_8keys": L % "{a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8}",
 "nested_push": "let a = []\nwhile (true) { let b = []\n b.push(1)\n a.push(b) }",
 "concat_buf": "let s = ''\nwhile (true) { s = s + 'xyzw' }",
 "concat_keep": "let a = []\nlet s = 'x'.repeat(300)\nwhile (true) { s = s + 'xy'\n a.push(s) }",
 "json_nested": "let t = '[' + '[[],'.repeat(400000) + '[]]' + ']'.repeat(0)\nlet r = []\nwhile (true) { r.push(JSON.parse('[' + '[],'.repeat(1000000) + '[]]')) }",
 "json_objs": "let t = '[' + '{\"a\":1},'.repeat(1000000) + '{}]'\nlet r = []\nwhile (true) { r.push(JSON.parse(t)) }",
 "json_deep": "let r = []\nlet t = '['.repeat(500) + ']'.repeat(500)\nwhile (true) { r.push(JSON.parse('[' + (t + ',').repeat(20000) + '1]')) }",
 "map_copy": "let a = []\nlet i = 0\nwhile (i < 100000) { a.push(i)\n i++ }\nlet k = []\nwhile (true) { k.push(a.map(x => x)) }",
 "sort_copy": "let a = []\nlet i = 0\nwhile (i < 100000) { a.push(i)\n i++ }\nlet k = []\nwhile (true) { k.push([...a].sort()) }",
 "split": "let s = 'x'.repeat(100000)\nlet k = []\nwhile (true) { k.push(s.split('')) }",
 "entries": "let e = []\nlet i = 0\nwhile (i < 1000) { e.push(['k' + i, i])\n i++ }\nlet o = Object.fromEntries(e)\nlet k = []\nwhile (true) { k.push(Object.entries(o)) }",
 "set_big": "let s = Set()\nlet i = 0\nwhile (true) { s.add(i)\n i++ }",
 "set_str": "let s = Set()\nlet i = 0\nwhile (true) { s.add('k' + i)\n i++ }",
 "spread_obj": "let a = []\nlet o = {a:1,b:2,c:3}\nwhile (true) { a.push({...o}) }",
 "arr_of_arr_push": "let a = []\nwhile (true) { a.push([1,2,3,4,5,6,7,8,9,10]) }",
}
print("%-16s %9s %8s  %s" % ("shape", "peakMiB", "secs", "outcome"))
for name, code in shapes.items():
    if only and only not in name: continue
    t = time.time()
    p = subprocess.Popen([ajs, "eval", code + "\nreturn 1", "--fuel", "100000000000", "--timeout-ms", "60000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read(); err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    dt = time.time() - t
    try:
        o = json.loads(out)
        msg = (o.get("error") or {}).get("message", "ok")[:60]
    except Exception:
        msg = "RAW " + (out[:60] + err[-120:]).decode(errors="replace")
    print("%-16s %9.1f %8.1f  %s" % (name, ru.ru_maxrss / 1024, dt, msg), flush=True)
