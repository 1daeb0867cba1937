mod attacks_fs;
mod attacks_identity;
mod attacks_net;
mod attacks_process;
mod attacks_protocol;
mod attacks_resources;
mod exec_mode;
mod sanity;
pub mod support;
