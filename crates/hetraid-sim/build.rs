//! The git commit this crate is built from, for the provenance every
//! simulated result carries (`hetraid_sim::provenance`): `git rev-parse`
//! when the source is a clone, "unknown" otherwise (a source package).
fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HETRAID_COMMIT={commit}");
    // A new commit (HEAD moves, or the branch it names).
    for f in [
        "../../.git/HEAD",
        "../../.git/refs/heads",
        "../../.git/packed-refs",
    ] {
        if std::path::Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
}
