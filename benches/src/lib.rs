//! Benchmarks of the ACH toolkit live in `benches/benches/`; run them with
//! `cargo bench -p ach-benches`. This library holds nothing yet.
