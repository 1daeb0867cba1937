//! airlock-protocol (being built)
