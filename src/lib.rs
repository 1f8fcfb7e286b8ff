//! twill: optimal software pipelining and warp specialization for Tensor Core
//! GPU kernels.
//!
//! The pipeline, front to back:
//!
//! * [`graph`]: loop dependence graphs G = (V, E) and their TOML format;
//! * [`machine`]: machine descriptions (units, memories, warps, cost rules) as data;
//! * [`problem`]: a graph resolved on a machine, durations normalized ([`normalize`]);
//! * [`modulo`]: minimum initiation interval and optimal modulo schedule (ZLP);
//! * [`joint`]: the joint SWP + WS problem in SMT (z3) and Algorithm 1;
//! * [`checker`]: the independent validator every schedule passes through;
//! * [`driver`]: one loop through the steps above to Triton's attributes,
//!   for the pass and `twill solve`;
//! * [`cache`]: the persistent schedule cache the pass reads before solving;
//! * [`report`]: text and JSON output;
//! * [`protocol`]: the pipeline-protocol verifier of the code Triton builds
//!   from a schedule (independent of all of the above).
//!
//! The solver core (everything above) knows nothing about MLIR or Triton.

pub mod backend;
pub mod cache;
pub mod checker;
pub mod driver;
pub mod error;
pub mod frontend;
pub mod graph;
#[cfg(feature = "mlir")]
pub mod host;
pub mod joint;
pub mod machine;
pub mod modulo;
pub mod normalize;
pub mod problem;
pub mod protocol;
pub mod report;

pub use error::LoadError;
pub use graph::Graph;
pub use machine::Machine;
pub use problem::{Problem, Schedule};
