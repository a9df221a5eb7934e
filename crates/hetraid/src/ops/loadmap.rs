pub use crate::cli::loadmap::*;
use crate::render::plan::LoadmapReport;
use hetraid_core::layout::build;
use hetraid_core::loadmap::loadmap;

impl LoadmapCmd {
    pub fn run(&self) -> Result<(), String> {
        let spec = self.layout.spec()?;
        let l = build(&spec).map_err(|e| e.to_string())?;
        let planner = super::plan::planner_for(l.as_ref(), &spec, &self.policy)?;
        let state = super::plan::state_for(l.members(), &self.failed)?;
        let map = loadmap(&planner, &state, self.write_chunks).map_err(|e| e.to_string())?;
        let report = LoadmapReport {
            layout: l.name().to_string(),
            policy: planner.policy.as_str(),
            map,
        };
        crate::render::emit(&report, self.json)
    }
}
