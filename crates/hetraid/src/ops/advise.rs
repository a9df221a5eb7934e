//! `hetraid advise`: the command line of the advisor (`hetraid-advise`, a
//! library), and its renderers: the ranking as a table or one JSON
//! document, and the front as SVG.

pub use crate::cli::advise::*;
use crate::render::advise;
use hetraid_advise::Request;

impl AdviseCmd {
    /// The advisor's request (everything but how to render it).
    fn request(&self) -> Request {
        Request {
            members: self.members.clone(),
            workload: self.workload.clone(),
            read_fraction: self.read_fraction,
            size: self.size,
            qd: self.qd,
            trace: self.trace.clone(),
            objective: self.objective.clone(),
            chunks: self.chunks.clone(),
            redundancy: self.redundancy,
            budget_s: self.budget_s,
            candidates_max: self.candidates,
            total: self.total,
            capacity_min: self.capacity_min,
            mttdl_min_years: self.mttdl_min_years,
            probe_seconds: self.probe_seconds,
        }
    }

    pub fn run(&self) -> Result<(), String> {
        if let Some(p) = &self.svg {
            if p.is_dir() {
                return Err(format!("--svg {} is a directory; name a file", p.display()));
            }
        }
        let req = self.request();
        let advice = req.advise()?;
        if let Some(path) = &self.svg {
            std::fs::write(path, advise::front_svg(&req, &advice))
                .map_err(|e| format!("--svg {}: {e}", path.display()))?;
        }
        match self.json {
            true => crate::render::print_json(&advise::advice_json(&req, &advice)),
            false => {
                print!(
                    "{}",
                    advise::advice_text(&req, &advice, self.svg.as_deref())?
                );
                Ok(())
            }
        }
    }
}
