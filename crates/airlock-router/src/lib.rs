//! airlock-router (being built)
