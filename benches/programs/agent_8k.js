// A realistic agent program: order triage for a shop. Top-level helper functions; the last
// function is the entry. Pure data processing, so every engine can compile it unchanged.

function clamp(x, lo, hi) {
  if (x < lo) { return lo }
  if (x > hi) { return hi }
  return x
}

function round2(x) {
  return Math.round(x * 100) / 100
}

function normalizeEmail(email) {
  if (typeof email !== 'string') { return '' }
  return email.trim().toLowerCase()
}

function isValidEmail(email) {
  let e = normalizeEmail(email)
  let at = e.indexOf('@')
  if (at < 1) { return false }
  let dot = e.lastIndexOf('.')
  return dot > at + 1 && dot < e.length - 1
}

function parseMoney(text) {
  if (typeof text === 'number') { return text }
  if (typeof text !== 'string') { return 0 }
  let cleaned = text.replace('$', '').replace(',', '').trim()
  let n = parseFloat(cleaned)
  if (isNaN(n)) { return 0 }
  return n
}

function lineTotal(line) {
  let qty = clamp(line.qty ?? 1, 0, 1000)
  let price = parseMoney(line.price)
  let discount = clamp(line.discount ?? 0, 0, 1)
  return round2(qty * price * (1 - discount))
}

function orderTotal(order) {
  let lines = order.lines ?? []
  return round2(lines.map(l => lineTotal(l)).reduce((s, x) => s + x, 0))
}

function countryZone(country) {
  let c = (country ?? '').toUpperCase()
  if (['US', 'CA', 'MX'].includes(c)) { return 'americas' }
  if (['DE', 'FR', 'IT', 'ES', 'NL', 'BE', 'AT', 'PL', 'SE'].includes(c)) { return 'europe' }
  if (['JP', 'KR', 'CN', 'SG', 'IN', 'AU'].includes(c)) { return 'apac' }
  return 'other'
}

function shippingCost(order) {
  let zone = countryZone(order.country)
  let weight = (order.lines ?? []).reduce((s, l) => s + (l.weight ?? 0.5) * (l.qty ?? 1), 0)
  let base = 5
  if (zone === 'europe') { base = 9 }
  if (zone === 'apac') { base = 14 }
  if (zone === 'other') { base = 20 }
  let perKg = zone === 'americas' ? 1.2 : 2.5
  let cost = base + weight * perKg
  if (orderTotal(order) > 200) { cost = cost / 2 }
  return round2(cost)
}

function riskScore(order, history) {
  let score = 0
  let reasons = []
  if (!isValidEmail(order.email)) {
    score += 30
    reasons.push('invalid email')
  }
  let total = orderTotal(order)
  if (total > 1000) {
    score += 20
    reasons.push(`large order (${total})`)
  }
  if (order.shippingCountry && order.shippingCountry !== order.country) {
    score += 15
    reasons.push('ships to another country')
  }
  let previous = history.filter(h => normalizeEmail(h.email) === normalizeEmail(order.email))
  if (previous.length === 0) {
    score += 10
    reasons.push('first order')
  } else {
    let refunds = previous.filter(h => h.refunded).length
    if (refunds > 1) {
      score += 10 * refunds
      reasons.push(`${refunds} refunds before`)
    }
    let spent = previous.reduce((s, h) => s + (h.total ?? 0), 0)
    if (spent > 500) {
      score -= 15
      reasons.push('loyal customer')
    }
  }
  let rushed = (order.lines ?? []).filter(l => l.express).length
  if (rushed > 2) {
    score += 5
    reasons.push('many express lines')
  }
  return { score: clamp(score, 0, 100), reasons: reasons }
}

function classify(score) {
  if (score >= 60) { return 'review' }
  if (score >= 30) { return 'watch' }
  return 'accept'
}

function summarizeLines(lines) {
  let bySku = {}
  let i = 0
  while (i < lines.length) {
    let l = lines[i]
    let sku = l.sku ?? 'unknown'
    let prev = bySku[sku] ?? { sku: sku, qty: 0, total: 0 }
    bySku = { ...bySku, [sku]: { sku: sku, qty: prev.qty + (l.qty ?? 1), total: round2(prev.total + lineTotal(l)) } }
    i = i + 1
  }
  return Object.values(bySku).sort((a, b) => b.total - a.total)
}

function formatLine(item) {
  let name = item.sku.padEnd(12, ' ')
  let qty = `${item.qty}`.padStart(4, ' ')
  let total = item.total.toFixed(2).padStart(10, ' ')
  return `${name}${qty}${total}`
}

function formatReport(result) {
  let head = [
    `Order ${result.id} for ${result.email}`,
    `Decision: ${result.decision.toUpperCase()} (risk ${result.risk.score})`,
    `Total: ${result.total.toFixed(2)} + shipping ${result.shipping.toFixed(2)}`,
  ]
  let body = result.items.map(x => formatLine(x))
  let why = result.risk.reasons.length > 0 ? ['Reasons: ' + result.risk.reasons.join('; ')] : []
  return [...head, '', ...body, '', ...why].join('\n')
}

function validateOrder(order) {
  let problems = []
  if (!order.id) { problems.push('missing id') }
  if (!Array.isArray(order.lines) || order.lines.length === 0) { problems.push('no lines') }
  let i = 0
  let lines = order.lines ?? []
  while (i < lines.length) {
    let l = lines[i]
    if (typeof l.sku !== 'string' || l.sku.length === 0) { problems.push(`line ${i}: missing sku`) }
    if ((l.qty ?? 1) <= 0) { problems.push(`line ${i}: quantity must be positive`) }
    if (parseMoney(l.price) < 0) { problems.push(`line ${i}: negative price`) }
    i = i + 1
  }
  return problems
}

function pickCoupon(order, coupons) {
  let total = orderTotal(order)
  let usable = coupons.filter(c => total >= (c.minimum ?? 0) && (c.zones ?? []).includes(countryZone(order.country)))
  if (usable.length === 0) { return null }
  let best = usable.map(c => {
    let saving = c.percent ? total * c.percent / 100 : (c.amount ?? 0)
    return { code: c.code, saving: round2(Math.min(saving, total)) }
  }).sort((a, b) => b.saving - a.saving)
  return best[0]
}

function tally(results) {
  let counts = { accept: 0, watch: 0, review: 0, invalid: 0 }
  let revenue = 0
  let i = 0
  while (i < results.length) {
    let r = results[i]
    counts = { ...counts, [r.decision]: (counts[r.decision] ?? 0) + 1 }
    if (r.decision !== 'invalid') { revenue = revenue + r.total }
    i = i + 1
  }
  return { counts: counts, revenue: round2(revenue) }
}

function convert(amount, from, to, rates) {
  if (from === to) { return round2(amount) }
  let a = rates[from] ?? null
  let b = rates[to] ?? null
  if (a === null || b === null) { return Error(`no rate for ${from} or ${to}`) }
  return round2(amount / a * b)
}

function stockCheck(lines, inventory) {
  let missing = []
  let i = 0
  while (i < lines.length) {
    let l = lines[i]
    let have = inventory[l.sku] ?? 0
    if (have < (l.qty ?? 1)) {
      missing.push({ sku: l.sku, want: l.qty ?? 1, have: have })
    }
    i = i + 1
  }
  return missing
}

function describeMissing(missing) {
  return missing.map(m => `${m.sku}: want ${m.want}, have ${m.have}`).join(', ')
}

function triageOne(order, history, coupons) {
  let problems = validateOrder(order)
  if (problems.length > 0) {
    return { id: order.id ?? null, decision: 'invalid', problems: problems, total: 0 }
  }
  let total = orderTotal(order)
  let shipping = shippingCost(order)
  let risk = riskScore(order, history)
  let coupon = pickCoupon(order, coupons)
  let result = {
    id: order.id,
    email: normalizeEmail(order.email),
    total: coupon ? round2(total - coupon.saving) : total,
    shipping: shipping,
    coupon: coupon,
    risk: risk,
    decision: classify(risk.score),
    items: summarizeLines(order.lines),
  }
  return { ...result, report: formatReport(result) }
}

function main({ orders: [{ id: 'A1', email: 'a@b.co', country: 'US', lines: [{ sku: 'X', qty: 1, price: '9.99' }] }], history: [], coupons: [] }) {
  let results = orders.map(o => triageOne(o, history, coupons))
  let summary = tally(results)
  let flagged = results.filter(r => r.decision === 'review' || r.decision === 'watch').map(r => r.id)
  let text = results.filter(r => r.report).map(r => r.report).join('\n\n----\n\n')
  return { summary: summary, flagged: flagged, results: results.map(r => ({ id: r.id, decision: r.decision, total: r.total })), text: text.slice(0, 4000) }
}
