pub use crate::cli::loadmap::*;
use hetraid_core::layout::build;
use hetraid_core::loadmap::loadmap;
use serde_json::json;

impl LoadmapCmd {
    pub fn run(&self) -> Result<(), String> {
        let spec = self.layout.spec()?;
        let l = build(&spec).map_err(|e| e.to_string())?;
        let planner = super::plan::planner_for(l.as_ref(), &spec, &self.policy)?;
        let state = super::plan::state_for(l.members(), &self.failed)?;
        let map = loadmap(&planner, &state, self.write_chunks).map_err(|e| e.to_string())?;
        if self.json {
            return super::print_json(&json!({
                "layout": l.name(),
                "policy": planner.policy.as_str(),
                "write_chunks": map.write_chunks,
                "starts": map.starts,
                "members": map.members,
            }));
        }
        println!(
            "{}: writes of {} chunks from each of {} start positions ({} policy)",
            l.name(),
            map.write_chunks,
            map.starts,
            planner.policy.as_str()
        );
        println!(
            "{:>6} {:>10} {:>11}  reads",
            "member", "read_share", "write_share"
        );
        for m in &map.members {
            println!(
                "{:>6} {:>10.4} {:>11.4}  {}",
                m.device,
                m.read_share,
                m.write_share,
                "#".repeat((m.read_share * 60.0).round() as usize)
            );
        }
        Ok(())
    }
}
