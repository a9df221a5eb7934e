//! kill -9 campaign against the lifecycle verbs: `fail`, `replace`, `rebuild`
//! and `write` are killed at a random moment (most of their life is spent
//! assembling and writing superblocks), then the array is inspected and read.
//! After every kill: every member that was in the array is accepted again
//! (none left out as stale), a failure is either recorded or not, and every
//! byte reads back. Kills that land between two members' superblock writes
//! are counted (members found at different event counts, or different
//! clean flags).
//!
//! HETRAID_KILLS=N sets the number of kills (default 120; the campaign
//! ran 1,000+). HETRAID_SEED=N replays a campaign.

mod common;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const MEMBER_BYTES: u64 = 4 << 20;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hetraid"))
}

fn run(args: &[String], stdin: Option<&[u8]>) -> (bool, Vec<u8>, String) {
    let (code, out, err) = common::run_stdin(args, stdin);
    (code == 0, out, err)
}

/// Start `args`, kill -9 it after `delay_us` if it still runs. Returns how long
/// it ran when it finished first (µs), None when it was killed.
fn killed(args: &[String], stdin: Option<&[u8]>, delay_us: u64) -> Option<u64> {
    let t0 = std::time::Instant::now();
    let mut c = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    if let Some(d) = stdin {
        let _ = c.stdin.take().unwrap().write_all(d);
    }
    drop(c.stdin.take());
    // Polled, so a verb that ends first says when (bounded by the delay).
    while (t0.elapsed().as_micros() as u64) < delay_us {
        if let Ok(Some(_)) = c.try_wait() {
            return Some(t0.elapsed().as_micros() as u64);
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let _ = c.kill();
    let _ = c.wait();
    None
}

/// (event counter, clean flag) of a member's superblock, if it has one.
fn events(path: &str) -> Option<(u64, u8)> {
    let b = std::fs::read(path).ok()?;
    (b.len() >= 4096 && &b[..8] == b"HETRAID1")
        .then(|| (u64::from_le_bytes(b[32..40].try_into().unwrap()), b[44]))
}

fn with(verb: &str, members: &[String], extra: &[&str]) -> Vec<String> {
    let mut v = vec![verb.to_string()];
    v.extend(members.iter().cloned());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[test]
fn kill_9_during_lifecycle_verbs_never_costs_a_member() {
    let seed = common::env_u64("HETRAID_SEED", 0x6b11);
    let kills = common::env_u64("HETRAID_KILLS", 120) as usize;
    let mut rng = common::Rng(seed | 1);
    // Disk-backed when possible: fsync takes real time there, so kills land in
    // superblock updates more often than on tmpfs.
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut m: Vec<String> = (0..4)
        .map(|i| d.path().join(format!("m{i}")).display().to_string())
        .collect();
    let mut fresh = 0;
    let (ok, _, err) = run(
        &with(
            "create",
            &m,
            &["--layout", "raid5", "--chunk", "64K", "--size", "4M"],
        ),
        None,
    );
    assert!(ok, "{err}");
    let mut x = seed;
    let data: Vec<u8> = (0..(2 << 20))
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 33) as u8
        })
        .collect();
    let (ok, _, err) = run(&with("write", &m, &["--offset", "0"]), Some(&data));
    assert!(ok, "{err}");
    let (mut mid_update, mut landed) = (0, 0);
    // Per verb, how long it runs when not killed (a moving average): kills
    // are aimed at the second half of its life, where superblocks are written.
    let mut runs_us: std::collections::HashMap<&str, u64> = Default::default();
    let ctx = |i: usize, what: &str| format!("seed {seed}, kill {i} during {what}");
    for i in 0..kills {
        // A replacement killed before its superblock landed is not a member:
        // leave it out, as an operator would (its slot is then missing).
        let listed: Vec<String> = m.iter().filter(|p| events(p).is_some()).cloned().collect();
        let st: serde_json::Value = {
            let (ok, out, err) = run(&with("status", &listed, &["--json"]), None);
            assert!(ok, "{}: status: {err}", ctx(i, "-"));
            serde_json::from_slice(&out).unwrap()
        };
        let pre = st.clone();
        let states: Vec<String> = st["member_states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["state"].as_str().unwrap().to_string())
            .collect();
        let m_before = m.clone();
        let (args, input, what) = if let Some(k) = states
            .iter()
            .position(|s| s == "faulty" || s == "missing" || s == "removed")
        {
            fresh += 1;
            let new = d.path().join(format!("new{fresh}")).display().to_string();
            std::fs::File::create(&new)
                .unwrap()
                .set_len(MEMBER_BYTES)
                .unwrap();
            let a = with(
                "replace",
                &listed,
                &["--member", &k.to_string(), "--with", &new],
            );
            m[k] = new;
            (a, None, "replace")
        } else if states.iter().any(|s| s == "rebuilding") {
            (
                with("rebuild", &listed, &["--max-speed", "0"]),
                None,
                "rebuild",
            )
        } else if rng.below(3) == 0 {
            // The same bytes again: the content cannot depend on where the kill
            // landed, only the dirty/clean marks and the bitmap do.
            let off = rng.below(16) * 65536;
            (
                with("write", &listed, &["--offset", &off.to_string()]),
                Some(data[off as usize..off as usize + 65536].to_vec()),
                "write",
            )
        } else {
            let k = rng.below(4).to_string();
            (with("fail", &listed, &["--member", &k]), None, "fail")
        };
        let before: Vec<Option<(u64, u8)>> = m_before.iter().map(|p| events(p)).collect();
        let est = *runs_us.get(what).unwrap_or(&40_000);
        let delay = est / 2 + rng.below(est * 3 / 4);
        match killed(&args, input.as_deref(), delay) {
            // It ran longer than the delay: the estimate grows past it.
            None => {
                landed += 1;
                runs_us.insert(what, est.max(delay + delay / 10));
            }
            Some(t) => {
                runs_us.insert(what, (est * 3 + t) / 4);
            }
        }
        // Members that take superblock updates (not the faulty one left behind).
        let in_array: Vec<usize> = (0..4)
            .filter(|&j| states[j] == "active" || states[j] == "rebuilding")
            .collect();
        let after: Vec<(u64, u8)> = in_array
            .iter()
            .filter_map(|&j| events(&m_before[j]))
            .collect();
        let changed = in_array.iter().any(|&j| events(&m_before[j]) != before[j]);
        if changed && after.windows(2).any(|w| w[0] != w[1]) {
            mid_update += 1;
        }
        let listed: Vec<String> = m.iter().filter(|p| events(p).is_some()).cloned().collect();
        let (ok, out, err) = run(&with("status", &listed, &["--json"]), None);
        assert!(ok, "{}: status after the kill: {err}", ctx(i, what));
        let st: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let warnings = st["warnings"].to_string();
        for (j, s) in st["member_states"].as_array().unwrap().iter().enumerate() {
            let state = s["state"].as_str().unwrap();
            // Only the member the killed verb was about may have changed state;
            // a slot whose device was absent may be recorded missing.
            let present_before = !pre["member_states"][j]["path"].is_null();
            let ok_state = match (what, state) {
                (_, "missing") => !present_before,
                ("write" | "rebuild", "faulty" | "removed") => false,
                _ => true,
            };
            assert!(
                ok_state,
                "{}: member {j} is {state}: {warnings}",
                ctx(i, what)
            );
        }
        assert!(
            !warnings.contains("stale"),
            "{}: a member was left out as stale: {warnings}",
            ctx(i, what)
        );
        assert_ne!(st["state"], "failed", "{}", ctx(i, what));
        let (ok, out, err) = run(
            &with("read", &listed, &["--offset", "0", "--length", "2M"]),
            None,
        );
        assert!(ok, "{}: read: {err}", ctx(i, what));
        assert!(out == data, "{}: data differs", ctx(i, what));
    }
    eprintln!(
        "kill campaign (seed {seed}): {kills} kills, {landed} while the verb ran, {mid_update} between two members' superblock writes; every member accepted after each"
    );
}
