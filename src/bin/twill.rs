//! `twill`: command-line front end of the solver core.
//!
//! Exit codes: 0 success, 1 no schedule (timeout or solver failure),
//! 2 invalid input (the message names file, line and field).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use twill::checker::WarpConfig;
use twill::driver::{self, SolveRequest};
use twill::graph::{load, Graph};
use twill::joint::{self, Encoding, Objective};
use twill::modulo::{self, SearchOptions};
use twill::normalize::Normalization;
use twill::problem::Problem;
use twill::report::Report;
use twill::Machine;

#[derive(Parser)]
#[command(
    name = "twill",
    version,
    about = "Optimal software pipelining and warp specialization for Tensor Core GPUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Find the minimum initiation interval, an optimal modulo schedule and a
    /// warp-group assignment that realizes it (Algorithm 1 of the paper).
    Solve {
        /// Dependence graph in twill's TOML format (docs/graph-format.md).
        graph: PathBuf,
        /// Machine: a bundled name (see `twill machines`) or a path to a TOML file.
        #[arg(long, default_value = "h100")]
        machine: String,
        /// Print machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Upper bound U on the sum of normalized costs (paper section 5.2).
        #[arg(long, default_value_t = 300)]
        u: u64,
        /// Wall-clock guard in seconds for the whole solve.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        /// Deterministic work budget of the joint search, in millions of z3
        /// resource units (the pass's default per kernel; 0: none, the
        /// timeout alone). The same graph and budget give the same answer
        /// on any machine and under any load.
        #[arg(long, default_value_t = driver::DEFAULT_BUDGET as f64 / 1e6)]
        budget: f64,
        /// SMT encoding of the joint problem: `default` (twill's) or `paper`
        /// (the paper's boolean op[v,i,t] formulation).
        #[arg(long, default_value = "default")]
        encoding: Encoding,
        /// Number of compute warp groups (variable-latency ops get their own on top).
        #[arg(long, default_value_t = 2)]
        groups: u32,
        /// Registers per thread available to each warp group (default: the machine's limit).
        #[arg(long)]
        reg_limit: Option<u32>,
        /// Prohibit cross-warp communication between fixed-latency ops.
        #[arg(long)]
        no_cross_warp: bool,
        /// Seed of the SMT solver; the same input and seed give the same result.
        #[arg(long, default_value_t = 0)]
        seed: u32,
        /// Threads searching initiation intervals at once (0: one per core, at
        /// most 4); the result does not depend on it.
        #[arg(long, default_value_t = 0)]
        threads: u32,
        /// What to optimize after I: `length` (the paper's shortest L, then
        /// the fewest groups and crossings) or `slack` (as many stages as
        /// the shortest L, then the largest latency slack of asynchronous
        /// ops, then the shortest L with it).
        #[arg(long, default_value = "length")]
        objective: Objective,
        /// Only software pipelining: stop after the optimal modulo schedule.
        #[arg(long)]
        modulo_only: bool,
        /// Try the graph's same_group sets first (within two thirds of the
        /// budget, at most 10 s) and drop them when no schedule meets them,
        /// as `twill-opt --twill-schedule` does with Triton's partition
        /// rules (default: they always hold).
        #[arg(long)]
        same_group_first: bool,
    },
    /// List the bundled machine descriptions.
    Machines,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Machines => {
            for name in Machine::bundled_names() {
                match Machine::select(name) {
                    Ok(m) => println!("{name:8} {} ({})", m.description, m.arch),
                    Err(e) => println!("{name:8} invalid: {e}"),
                }
            }
            ExitCode::SUCCESS
        }
        Command::Solve {
            graph,
            machine,
            json,
            u,
            timeout,
            budget,
            encoding,
            groups,
            reg_limit,
            no_cross_warp,
            seed,
            threads,
            objective,
            modulo_only,
            same_group_first,
        } => {
            if !(budget.is_finite()
                && budget >= 0.0
                && budget * 1e6 <= joint::work::MAX_BUDGET as f64)
            {
                eprintln!(
                    "error: --budget must be 0 to {} million units",
                    joint::work::MAX_BUDGET / 1_000_000
                );
                return ExitCode::from(2);
            }
            let ws = (!modulo_only).then_some(Ws {
                budget: (budget * 1e6).round() as u64,
                encoding,
                groups,
                reg_limit,
                cross_warp: !no_cross_warp,
                seed,
                threads,
                objective,
                same_group_first,
            });
            solve(&graph, &machine, json, u, timeout, ws)
        }
    }
}

/// Warp-specialization options of `solve`.
struct Ws {
    budget: u64,
    encoding: Encoding,
    groups: u32,
    reg_limit: Option<u32>,
    cross_warp: bool,
    seed: u32,
    threads: u32,
    objective: Objective,
    same_group_first: bool,
}

fn solve(
    path: &std::path::Path,
    machine: &str,
    json: bool,
    u: u64,
    timeout: f64,
    ws: Option<Ws>,
) -> ExitCode {
    if !(timeout.is_finite() && timeout > 0.0) {
        eprintln!("error: --timeout must be a positive number of seconds");
        return ExitCode::from(2);
    }
    if u == 0 {
        eprintln!("error: --u must be at least 1");
        return ExitCode::from(2);
    }
    let started = Instant::now();
    let machine = match Machine::select(machine) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let graph = match load::load_file(path) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The pass's steps (crate::driver): price, solve, check.
    let (problem, norm) = match driver::price(&graph, &machine, u, timeout) {
        Ok(p) => p,
        Err(skip) => {
            eprintln!("error: {}", skip.text);
            return ExitCode::from(2);
        }
    };
    let report = match ws {
        None => {
            let left = (timeout - started.elapsed().as_secs_f64()).max(0.01);
            match modulo::schedule(&problem, SearchOptions { timeout: left }) {
                Ok(r) => Report::from_modulo(
                    &graph.name,
                    &machine.name,
                    &problem,
                    &norm,
                    &r,
                    started.elapsed().as_secs_f64(),
                ),
                Err(e) => {
                    eprintln!("error: {}: {e}", path.display());
                    return ExitCode::from(1);
                }
            }
        }
        Some(ws) => {
            let solved = Solving {
                path,
                graph,
                machine: &machine,
                timeout,
                started,
            };
            match solved.joint(problem, &norm, &ws) {
                Ok(r) => r,
                Err(code) => return code,
            }
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("error: cannot serialize report: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        print!("{}", report.to_text());
    }
    ExitCode::SUCCESS
}

/// A graph being solved with warp specialization.
struct Solving<'a> {
    path: &'a std::path::Path,
    graph: Graph,
    machine: &'a Machine,
    timeout: f64,
    started: Instant,
}

impl Solving<'_> {
    /// The joint search through the driver's steps (solve, check): the
    /// report, or the exit code after the error is printed.
    fn joint(
        mut self,
        mut problem: Problem,
        norm: &Normalization,
        ws: &Ws,
    ) -> Result<Report, ExitCode> {
        if ws.groups == 0 {
            eprintln!("error: --groups must be at least 1");
            return Err(ExitCode::from(2));
        }
        if !ws.objective.implemented_by(ws.encoding) {
            eprintln!("error: --objective slack needs --encoding default (the only encoding with the refinement)");
            return Err(ExitCode::from(2));
        }
        let warps = WarpConfig {
            groups: ws.groups,
            reg_limit: ws
                .reg_limit
                .unwrap_or(self.machine.warps.max_regs_per_thread),
            cross_warp: ws.cross_warp,
        };
        let request = SolveRequest {
            encoding: ws.encoding,
            warps,
            objective: ws.objective,
            seed: ws.seed,
            threads: ws.threads,
            timeout: self.timeout,
            stage_bound: None,
            stage_bound_alone: None,
            budget: ws.budget,
            refine_groups: true,
        };
        // The graph's same_group sets are part of its problem, unless they
        // are only tried first (priced with the graph, so checked alike).
        let colocated = if ws.same_group_first {
            problem.same_group.clear();
            std::mem::take(&mut self.graph.same_group)
        } else {
            Vec::new()
        };
        let solved = driver::solve(&problem, &colocated, &request, self.started).and_then(|s| {
            let solved_problem = s.colocated_problem.as_ref().unwrap_or(&problem);
            driver::check(solved_problem, &s.result, &warps).map(|()| s)
        });
        let s = solved.map_err(|skip| {
            eprintln!("error: {}: {}", self.path.display(), skip.text);
            ExitCode::from(1)
        })?;
        let (view, _) = joint::streaming_view(s.colocated_problem.as_ref().unwrap_or(&problem));
        let mut report = Report::from_joint(
            &self.graph.name,
            &self.machine.name,
            &view,
            norm,
            &s.result,
            self.started.elapsed().as_secs_f64(),
        );
        if let Some(w) = &mut report.warp_specialization {
            w.same_group_dropped = s.without_colocation;
        }
        Ok(report)
    }
}
