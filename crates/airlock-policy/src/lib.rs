//! airlock-policy (being built)
