//! Closed-form and numeric analysis of arrays (DESIGN: `hetraid-model`).
//!
//! - [`mttdl`]: mean time to data loss from a continuous-time Markov chain whose
//!   states are the sets of failed members the layout survives. Which sets are
//!   fatal comes from the layout's own stripes, so RAID10's "second failure is fatal
//!   only on the mirror partner" and S²-RAID's sub-arrays need no special case.
//! - [`raidh_gain`]: the thesis's small-random-write model for RAIDH.
//!
//! Pure functions of their inputs: the CLI reads presets and flags and prints.

mod ctmc;
mod fatal;

pub use ctmc::{
    hpda_chain_closed_form_h, hpda_closed_form_h, mttdl, mttdl_per_member, raid5_closed_form_h,
    Mttdl, STATES_MAX,
};
pub use fatal::FailureSets;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("{0}")]
    Invalid(String),
}

/// RAIDH's model for small random writes on `n` devices where one is faster by an
/// extra factor `f` (speed 1 + f): per-device work falls by z = 1 − n/(n + f) and
/// throughput rises by 1/(1 − z) − 1 ([Wacha 2012] ch. 6: n = 5, f = 3 gives z = 37.5 %, +60 %).
pub fn raidh_gain(n: usize, f: f64) -> Result<RaidhGain, ModelError> {
    if n < 2 {
        return Err(ModelError::Invalid(format!(
            "--devices {n}: a parity array needs at least 2 devices"
        )));
    }
    if !(f.is_finite() && f >= 0.0) {
        return Err(ModelError::Invalid(format!(
            "--faster {f}: the extra speed factor must be a number >= 0 (0 = all equal)"
        )));
    }
    let z = 1.0 - n as f64 / (n as f64 + f);
    Ok(RaidhGain {
        devices: n,
        faster: f,
        work_reduction: z,
        throughput_gain: 1.0 / (1.0 - z) - 1.0,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RaidhGain {
    pub devices: usize,
    pub faster: f64,
    /// z: the share of per-device work removed.
    pub work_reduction: f64,
    /// Throughput rise over RAID5 on the same devices (0.6 = +60 %).
    pub throughput_gain: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raidh_model_matches_the_spec_example() {
        let g = raidh_gain(5, 3.0).unwrap();
        assert!((g.work_reduction - 0.375).abs() < 1e-12);
        assert!((g.throughput_gain - 0.6).abs() < 1e-12);
        // Equal devices: nothing to gain.
        assert_eq!(raidh_gain(5, 0.0).unwrap().throughput_gain, 0.0);
        assert!(raidh_gain(1, 3.0).is_err());
        assert!(raidh_gain(5, -1.0).is_err());
        assert!(raidh_gain(5, f64::NAN).is_err());
    }
}
