pub use crate::cli::layout::*;
use hetraid_core::layout::build;

impl LayoutCmd {
    pub fn run(&self) -> Result<(), String> {
        let spec = self.layout.spec()?;
        let l = build(&spec).map_err(|e| e.to_string())?;
        let count = l.stripe_count();
        let listed = self
            .stripes
            .unwrap_or(if self.json { count } else { 32 })
            .min(count);
        let stripes: Vec<_> = (0..listed).map(|s| l.stripe(s)).collect();
        let bound = hetraid_core::layout::raidx_widths::spec_bound(&spec);
        match self.json {
            true => {
                let mut v = crate::render::layout::layout_json(l.as_ref(), &spec.kinds, &stripes);
                if let Some((bytes, _)) = bound {
                    v["capacity_bound_bytes"] = serde_json::json!(bytes);
                }
                super::print_json(&v)
            }
            false => {
                print!(
                    "{}",
                    crate::render::layout::layout_text(l.as_ref(), &stripes)
                );
                if let Some((bytes, words)) = bound {
                    println!(
                        "capacity bound: {} ({words}); this layout holds {:.2} of it",
                        hetraid_core::units::format_size(bytes),
                        l.capacity_bytes() as f64 / bytes.max(1) as f64
                    );
                }
                Ok(())
            }
        }
    }
}
