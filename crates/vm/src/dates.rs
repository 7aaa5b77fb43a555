//! `Date` (decision 12): epoch milliseconds, every field and format in UTC, with JavaScript's
//! arithmetic (`MakeDay`/`MakeTime`, so adding a month to January 31 overflows as in JavaScript).
//! Parsing of ISO strings is jiff's.

use ajs_bytecode::NativeId;

use crate::error::{guest, OpResult};
use crate::heap::{Cell, Gc, PropMap};
use crate::machine::Vm;
use crate::value::Value;

const MS_PER_DAY: f64 = 86_400_000.0;
/// JavaScript's time range: ±8.64e15 ms.
const MAX_TIME: f64 = 8.64e15;

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1–12).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month 1–12, day) of days since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// UTC fields of a time value: (year, month 1–12, day, hours, minutes, seconds, ms, weekday).
pub(crate) fn fields(t: f64) -> (i64, i64, i64, i64, i64, i64, i64, i64) {
    let t = t as i64;
    let days = t.div_euclid(86_400_000);
    let ms_day = t.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    (
        y,
        m,
        d,
        ms_day / 3_600_000,
        ms_day / 60_000 % 60,
        ms_day / 1000 % 60,
        ms_day % 1000,
        (days + 4).rem_euclid(7),
    )
}

/// JavaScript's `MakeDate(MakeDay(y, m0, d), MakeTime(h, mi, s, ms))` with m0 zero-based and
/// every field allowed to overflow.
fn make_date(y: f64, m0: f64, d: f64, h: f64, mi: f64, s: f64, ms: f64) -> f64 {
    let all = [y, m0, d, h, mi, s, ms];
    if all.iter().any(|x| !x.is_finite()) {
        return f64::NAN;
    }
    let ym = y + (m0 / 12.0).floor();
    if ym.abs() > 400_000.0 {
        return f64::NAN;
    }
    let mn = m0.rem_euclid(12.0);
    let day = days_from_civil(ym as i64, mn as i64 + 1, 1) as f64 + d.trunc() - 1.0;
    let time = h.trunc() * 3_600_000.0 + mi.trunc() * 60_000.0 + s.trunc() * 1000.0 + ms.trunc();
    let t = day * MS_PER_DAY + time;
    if t.abs() > MAX_TIME {
        f64::NAN
    } else {
        t + 0.0
    }
}

/// `toISOString()`: `YYYY-MM-DDTHH:mm:ss.sssZ` (six-digit signed years outside 0–9999).
pub(crate) fn iso_string(t: f64) -> String {
    if !t.is_finite() {
        return "Invalid Date".into();
    }
    let (y, mo, d, h, mi, s, ms, _) = fields(t);
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:06}", -y)
    } else {
        format!("+{y:06}")
    };
    format!("{year}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// Parses an ISO 8601 date or date-time (no offset means UTC, decision 12).
pub(crate) fn parse_iso(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond() as f64);
    }
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        let ts = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
        return Some(ts.as_millisecond() as f64);
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        let ts = d.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
        return Some(ts.as_millisecond() as f64);
    }
    None
}

impl Vm {
    fn new_date(&mut self, t: f64) -> OpResult<Value> {
        self.reserve(24, &[])?;
        Ok(Value::Obj(self.heap.insert(Cell::Date(t))))
    }

    /// The time value of a Date, if `v` is one.
    pub(crate) fn date_of(&self, v: Value) -> Option<f64> {
        match v {
            Value::Obj(g) => match self.heap.get(g) {
                Cell::Date(t) => Some(*t),
                _ => None,
            },
            _ => None,
        }
    }

    /// A time value from `Date(init)`'s argument; `None` for an invalid one.
    fn time_of(&mut self, v: Value) -> OpResult<Option<f64>> {
        Ok(match v {
            _ if self.date_of(v).is_some() => self.date_of(v),
            Value::Num(n) if n.is_finite() && n.abs() <= MAX_TIME => Some(n.trunc() + 0.0),
            Value::Str(g) => {
                let len = self.units(g).len();
                self.charge_units(len)?;
                if len > 100 {
                    None
                } else {
                    parse_iso(&String::from_utf16_lossy(self.units(g)))
                }
            }
            _ => None,
        })
    }

    /// `Date(init?)`.
    pub(crate) fn date_new(&mut self, args: &[Value]) -> OpResult<Value> {
        self.charge(crate::price::MILLI_PER_DATE_OP)?;
        let t = match args.first().copied() {
            None | Some(Value::Undefined) => self.now().trunc(),
            Some(v) => match self.time_of(v)? {
                Some(t) => t,
                None => {
                    // a date string is at most 100 units: a longer one is shown by its start
                    let shown = match v {
                        Value::Arr(_) | Value::Obj(_) => self.render(v),
                        Value::Str(g) if self.units(g).len() > 100 => {
                            let head = String::from_utf16_lossy(&self.units(g)[..100]);
                            format!("{head}… ({} characters)", self.units(g).len())
                        }
                        v => String::from_utf16_lossy(&self.to_units(v, "Date")?),
                    };
                    return guest(format!("Invalid date: {shown}"));
                }
            },
        };
        self.new_date(t)
    }

    /// `Date.now()`.
    pub(crate) fn date_now(&mut self) -> Value {
        Value::Num(self.now().trunc())
    }

    /// A Date's read-only members.
    pub(crate) fn date_member(&mut self, t: f64, key: &str) -> OpResult<Value> {
        let (y, mo, d, h, mi, s, _, wd) = fields(t);
        Ok(Value::Num(match key {
            "value" => return self.str_value(&iso_string(t)),
            "timestamp" => t,
            "year" => y as f64,
            "month" => mo as f64,
            "day" => d as f64,
            "hours" => h as f64,
            "minutes" => mi as f64,
            "seconds" => s as f64,
            "dayOfWeek" => wd as f64,
            _ => return Ok(Value::Undefined),
        }))
    }

    fn other_time(&mut self, v: Value, op: &str) -> OpResult<f64> {
        match self.time_of(v)? {
            Some(t) => Ok(t),
            None => guest(format!("{op}: not a date: {}", self.render(v))),
        }
    }

    /// Methods of a Date.
    pub(crate) fn date_method(&mut self, id: NativeId, g: Gc, args: &[Value]) -> OpResult<Value> {
        use NativeId::*;
        let t = match self.heap.get(g) {
            Cell::Date(t) => *t,
            _ => f64::NAN,
        };
        let a = |i: usize| args.get(i).copied().unwrap_or(Value::Undefined);
        // calendar arithmetic (civil dates, formatting) on every method; `format` three times
        let ops = if id == Format { 3 } else { 1 };
        self.charge(ops * crate::price::MILLI_PER_DATE_OP)?;
        match id {
            GetTime => Ok(Value::Num(t)),
            ToIsoString | ToString => self.str_value(&iso_string(t)),
            IsBefore => Ok(Value::Bool(t < self.other_time(a(1), "isBefore")?)),
            IsAfter => Ok(Value::Bool(t > self.other_time(a(1), "isAfter")?)),
            Diff => {
                let o = self.other_time(a(1), "diff")?;
                let unit = match a(2) {
                    Value::Undefined => "ms".to_string(),
                    v => String::from_utf16_lossy(&self.to_units(v, "diff")?),
                };
                let div = match unit.as_str() {
                    "ms" | "milliseconds" => 1.0,
                    "seconds" => 1000.0,
                    "minutes" => 60_000.0,
                    "hours" => 3_600_000.0,
                    "days" => MS_PER_DAY,
                    other => {
                        return guest(format!(
                            "diff: unknown unit '{other}' (use ms, seconds, minutes, hours or days)"
                        ))
                    }
                };
                Ok(Value::Num(((t - o) / div).trunc() + 0.0))
            }
            Add => {
                let Value::Obj(og) = a(1) else {
                    return guest("add needs an object such as { days: 1 }");
                };
                let Cell::Obj(m) = self.heap.get(og) else {
                    return guest("add needs an object such as { days: 1 }");
                };
                let m: PropMap = m.clone();
                self.charge_elems(m.len())?;
                let mut amount = [0.0f64; 7];
                for (k, v) in &m {
                    let key = String::from_utf16_lossy(k);
                    let slot = match key.as_str() {
                        "years" => 0,
                        "months" => 1,
                        "days" => 2,
                        "hours" => 3,
                        "minutes" => 4,
                        "seconds" => 5,
                        "ms" => 6,
                        other => {
                            return guest(format!(
                                "add: unknown unit '{other}' (use years, months, days, hours, minutes, seconds, ms)"
                            ))
                        }
                    };
                    amount[slot] = self.to_number(*v, "add")?;
                }
                let (y, mo, d, h, mi, s, ms, _) = fields(t);
                let nt = make_date(
                    y as f64 + amount[0],
                    (mo - 1) as f64 + amount[1],
                    d as f64 + amount[2],
                    h as f64 + amount[3],
                    mi as f64 + amount[4],
                    s as f64 + amount[5],
                    ms as f64 + amount[6],
                );
                if nt.is_nan() {
                    return guest("add: the result is not a valid date");
                }
                self.new_date(nt)
            }
            Format => {
                let fmt = match a(1) {
                    Value::Undefined => "ISO".to_string(),
                    v => String::from_utf16_lossy(&self.str_arg_pub(v, "format")?),
                };
                let (y, mo, d, h, mi, s, _, _) = fields(t);
                let out = match fmt.as_str() {
                    "ISO" => iso_string(t),
                    "date" => format!("{y:04}-{mo:02}-{d:02}"),
                    "time" => format!("{h:02}:{mi:02}:{s:02}"),
                    _ => {
                        let mut f = fmt;
                        for (tok, v) in [
                            ("YYYY", format!("{y:04}")),
                            ("MM", format!("{mo:02}")),
                            ("DD", format!("{d:02}")),
                            ("HH", format!("{h:02}")),
                            ("mm", format!("{mi:02}")),
                            ("ss", format!("{s:02}")),
                        ] {
                            f = f.replacen(tok, &v, 1);
                        }
                        f
                    }
                };
                self.charge_units(out.len())?;
                self.str_value(&out)
            }
            _ => {
                let m = &id.js_name()[1..];
                guest(crate::method_hints::not_a_function(m, "Date"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_and_iso() {
        assert_eq!(iso_string(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_string(1_705_276_800_000.0), "2024-01-15T00:00:00.000Z");
        assert_eq!(parse_iso("2024-01-15"), Some(1_705_276_800_000.0));
        assert_eq!(parse_iso("2024-01-15T00:00:00Z"), Some(1_705_276_800_000.0));
        assert_eq!(
            parse_iso("2024-01-15T01:00:00+01:00"),
            Some(1_705_276_800_000.0)
        );
        assert_eq!(parse_iso("nope"), None);
        // Jan 31 + 1 month overflows to March 2 (2024 is a leap year), as in JavaScript
        let t = make_date(2024.0, 1.0, 31.0, 0.0, 0.0, 0.0, 0.0);
        assert_eq!(iso_string(t), "2024-03-02T00:00:00.000Z");
        assert_eq!(fields(0.0).7, 4); // a Thursday
    }
}
