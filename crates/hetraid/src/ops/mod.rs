pub mod advise;
pub mod analyze;
pub mod array;
pub mod ceph;
pub mod demo;
pub mod events;
pub mod iostat;
pub mod layout;
pub mod loadmap;
pub mod monitor;
pub mod plan;
pub mod probe;
pub mod serve;

pub use crate::render::print_json;
pub mod sim;
pub mod sweep;
pub mod trace;
