//! airlock-jail (being built)
