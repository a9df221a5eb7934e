//! The array verbs' options (clap only): the verbs are `crate::ops::array`.

use crate::args::{size, LayoutOpts};
use clap::Args;

pub mod change;
pub mod create;
pub mod data;
pub mod members;
pub mod repair;
