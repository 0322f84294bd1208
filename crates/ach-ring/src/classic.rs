//! The classic consistent-hash ring with string keys and weighted virtual nodes.
//!
//! Not built yet: see the workspace issue for `ach-ring`.
