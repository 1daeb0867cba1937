//! The one integration-test binary of airlock-jail: every layer is attacked for real, mostly
//! through the single-threaded `airlock-jail-probe` helper (see `src/bin/`).

mod suite;
