//! Benchmarks of the ajs facade live in `benches/`; run them with
//! `cd benches && cargo bench --bench overhead`.
