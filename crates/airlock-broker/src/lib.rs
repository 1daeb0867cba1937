//! airlock-broker (being built)
