//! `asys profile --process-rank-include`: under a job launcher (`srun asys
//! profile ...`) only the listed ranks are traced; the others run the
//! application untraced, so a big job can be profiled a few ranks at a time.
use std::os::unix::process::CommandExt;

/// A set of ranks: `0,2,4-7`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankSet(Vec<(u32, u32)>);

impl RankSet {
    pub fn contains(&self, rank: u32) -> bool {
        self.0.iter().any(|&(lo, hi)| (lo..=hi).contains(&rank))
    }
}

/// Parses `N[,N-M...]` (clap's value parser).
pub fn parse(s: &str) -> Result<RankSet, String> {
    let number = |v: &str| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| format!("expected ranks as N[,N-M...], got '{s}'"))
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if lo > hi {
            return Err(format!("rank range {lo}-{hi} is empty"));
        }
        out.push((lo, hi));
    }
    Ok(RankSet(out))
}

/// With `--process-rank-include`, when asys's own rank (from the same
/// variables as the traced processes': its environment is the launcher's)
/// is not in `set`: replaces asys by the application, untraced; returns
/// only on failure. Without a rank asys traces as usual: a run outside a
/// job is not one of its excluded ranks.
pub fn run_untraced_if_excluded(set: &RankSet, command: &[String]) -> anyhow::Result<()> {
    let Some(rank) = crate::process::procfs::rank_of(std::process::id()) else {
        return Ok(());
    };
    if set.contains(rank) {
        return Ok(());
    }
    let Some(app) = command.first() else {
        anyhow::bail!("no application given (usage: asys profile [<args>] <application>)");
    };
    eprintln!("asys: rank {rank} is not in --process-rank-include: running {app} untraced");
    let e = std::process::Command::new(app).args(&command[1..]).exec();
    anyhow::bail!("cannot run {app}: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_and_ranges() {
        let s = parse("0,2,4-7").unwrap();
        assert!([0, 2, 4, 5, 7].iter().all(|&r| s.contains(r)));
        assert!([1, 3, 8].iter().all(|&r| !s.contains(r)));
        assert!(parse("3-1").is_err());
        assert!(parse("a").is_err());
        assert!(parse("").is_err());
    }
}
