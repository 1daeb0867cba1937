//! Conformance suites (being built).
