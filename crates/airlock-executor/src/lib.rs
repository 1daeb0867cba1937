//! airlock-executor (being built)
