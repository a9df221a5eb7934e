pub mod advise;
pub mod analyze;
pub mod array;
pub mod ceph;
pub mod demo;
pub mod events;
pub mod layout;
pub mod loadmap;
pub mod plan;
pub mod probe;
pub mod serve;

/// Print one JSON document on stdout.
pub fn print_json(v: &serde_json::Value) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(v).map_err(|e| e.to_string())?
    );
    Ok(())
}
pub mod sim;
pub mod sweep;
pub mod trace;
