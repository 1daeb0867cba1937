//! Unit tests of the store as a whole, by concern.
mod bounds;
mod hostile;
mod integrity;
mod round_trip;
mod store_dir;
mod support;
