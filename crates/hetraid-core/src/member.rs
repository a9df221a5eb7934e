//! Member kinds and the service-time model the `cost` write policy uses.

use serde::{Deserialize, Serialize};

/// What a member physically is. Presets resolve member order from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberKind {
    Hdd,
    Ssd,
    Nvram,
}

impl MemberKind {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hdd" | "disk" => Ok(Self::Hdd),
            "ssd" | "flash" => Ok(Self::Ssd),
            "nvram" | "ram" => Ok(Self::Nvram),
            other => Err(format!(
                "member kind '{other}' is unknown; use hdd, ssd or nvram"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hdd => "hdd",
            Self::Ssd => "ssd",
            Self::Nvram => "nvram",
        }
    }

    /// Default service model: a 7200 rpm disk (8.5 ms average seek + half a
    /// rotation ~ 12.7 ms positioning, 78 MB/s media rate, the WD20EADS class of
    /// [Wacha 2012] ch. 3), an SLC SSD (0.1 ms, 100 MB/s), NVRAM (2 us, 2 GB/s).
    pub fn default_service(self) -> ServiceModel {
        match self {
            Self::Hdd => ServiceModel {
                position_ns: 12_700_000,
                bytes_per_s: 78_000_000,
            },
            Self::Ssd => ServiceModel {
                position_ns: 100_000,
                bytes_per_s: 100_000_000,
            },
            Self::Nvram => ServiceModel {
                position_ns: 2_000,
                bytes_per_s: 2_000_000_000,
            },
        }
    }
}

/// Service time of one request = positioning + bytes / bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceModel {
    pub position_ns: u64,
    pub bytes_per_s: u64,
}

impl ServiceModel {
    pub fn service_ns(&self, bytes: u64) -> u64 {
        self.position_ns + bytes.saturating_mul(1_000_000_000) / self.bytes_per_s.max(1)
    }
}
