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
        match self.json {
            true => super::print_json(&crate::render::layout::layout_json(
                l.as_ref(),
                &spec.kinds,
                &stripes,
            )),
            false => {
                print!(
                    "{}",
                    crate::render::layout::layout_text(l.as_ref(), &stripes)
                );
                Ok(())
            }
        }
    }
}
