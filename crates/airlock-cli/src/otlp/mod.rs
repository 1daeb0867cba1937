//! OpenTelemetry export of `airlock serve`'s request spans over OTLP/HTTP (protobuf), off
//! unless `--otlp-endpoint URL` is given: the pipeline (`pipeline`), a plain-HTTP client of
//! its own (`http_post`, so no second HTTP stack comes into the tree), and an exporter
//! wrapper that logs failed exports (`logged_exporter`).
mod http_post;
mod logged_exporter;
mod pipeline;

pub use pipeline::start;
