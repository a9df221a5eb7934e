//! Controller procedures as sans-I/O jobs (openraft's engine/runtime split,
//! TigerBeetle's one procedure in two environments): a job takes inputs —
//! the time, whether users are active, a batch done — and says what to do
//! next. The engine (threads, the wall clock) and the simulator (events,
//! simulated time) each drive a job and execute what it says; neither
//! decides the order, the batch size or the pacing itself.

pub mod change;
pub mod copyback;
pub mod reclaimer;
pub mod sweep;
